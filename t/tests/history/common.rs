//! What the history tests share: which fix runs, the retry of a POST, and
//! how an answer and a request's hops are read.

use generation_retry_t::actors::load::Response;
use generation_retry_t::scenarios::http::Lab;
use generation_retry_t::scoring::accesslog::Hop;

/// Which fix is under test: the module, or the patched nginx without it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fix {
    Module,
    Patched,
}

/// A failed POST is retried (nginx retries a non-idempotent request only
/// when told to).
pub(crate) const RETRY_POST: &str = "proxy_next_upstream error timeout non_idempotent;";

/// The `$upstream_addr` entries of the request for `path`, as text.
pub(crate) async fn hops(lab: &Lab, path: &str) -> Vec<String> {
    lab.access_entry(path)
        .await
        .hops
        .iter()
        .map(|h| match h {
            Hop::Addr(a) => a.to_string(),
            Hop::Group(g) => g.clone(),
        })
        .collect()
}

/// `response` is a 200 from the backend at `ip` (which answers with its
/// address).
pub(crate) fn assert_answered_by(lab: &Lab, response: &Response, ip: std::net::Ipv4Addr) {
    assert_eq!(
        (response.status(), response.body.as_str()),
        (200, format!("{ip}\n").as_str()),
        "{response:?}\n{}",
        lab.nginx.error_log()
    );
}
