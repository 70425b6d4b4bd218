//! HTTPS upstreams with `proxy_ssl_session_reuse on`: the wrapper forwards
//! set_session/save_session to the balancer's state, so sessions are still
//! saved and resumed, before a re-snapshot and on the connection a rescue
//! opens after one, and the race is rescued over TLS too.

use std::net::Ipv4Addr;

use generation_retry_t::actors::backend::{Backend, ADDR_A, ADDR_B};
use generation_retry_t::actors::load::Client;
use generation_retry_t::nginx::Flavor;
use generation_retry_t::scenarios::http::{Lab, Spec};
use generation_retry_t::scoring::metrics::{log, Counter, Protocol, StatusExt};
use generation_retry_t::shared::UPSTREAM;

const ON: &str = "generation_retry_resnapshot on;";

/// Whether each connection that carried a request to `ip` resumed a TLS
/// session, in the order the requests came, from the `skip`-th request to
/// `ip` on.
fn resumed_on(backend: &Backend, ip: Ipv4Addr, skip: usize) -> Vec<(String, bool)> {
    backend
        .seen()
        .into_iter()
        .filter(|s| s.addr == ip)
        .skip(skip)
        .map(|s| {
            let resumed = backend
                .resumed(s.conn)
                .unwrap_or_else(|| panic!("{} on {ip}: no TLS handshake", s.path));
            (s.path, resumed)
        })
        .collect()
}

/// Without keepalive every request is a new TLS connection. One
/// re-resolving primary and a backup (the second try the race retries
/// with; never used while the primary is up), so every request goes to the
/// name's current address:
///
/// 1. before the race, every connection to the old address after the first
///    resumes a session (nginx saved and set them through the wrapper);
/// 2. the race's retry, rescued onto the new address after a re-snapshot,
///    opens a new connection that resumes the session the probes saved for
///    the new address (set_session went through the wrapper re-installed
///    over the fresh state);
/// 3. every later connection to the new address resumes too; the first of
///    them uses the session the rescued connection saved (the backend's
///    TLS 1.3 tickets are single-use, and the rescued connection used the
///    probes' one), so save_session went through it as well.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tls_sessions_are_saved_and_resumed_through_the_wrapper_after_a_rescue() {
    let mut spec = Spec::two_peers(Flavor::with_module(), "", ON).tls();
    spec.servers =
        "server app.test:${BPORT} resolve;\n        server 127.0.0.4:${BPORT} backup;".into();
    let mut lab = Lab::start_spec(spec).await;
    // The test's own requests, one client connection each: a pooled client
    // racing a new connection against one not yet back in its pool leaves a
    // spare that never sends a request, which nginx's graceful shutdown
    // waits for (client_header_timeout) until the harness kills it.
    let fresh = Client::without_keepalive(lab.nginx.url(""));
    for i in 0..4 {
        let r = fresh.get(&format!("/tls/{i}")).await;
        assert_eq!(r.status(), 200, "{r:?}");
        assert_eq!(r.body, format!("{ADDR_A}\n"), "{r:?}");
    }
    // The first connection to ADDR_A has nothing to resume.
    let before = resumed_on(&lab.backend, ADDR_A, 1);
    assert!(
        before.len() >= 4 && before.iter().all(|(_, resumed)| *resumed),
        "sessions are not reused before the race: {before:?}"
    );

    let race = lab.race_once(0).await;
    lab.assert_rescued(&race);
    assert_eq!((race.old, race.new), (ADDR_A, ADDR_B));
    let rescue: Vec<String> = lab
        .request_errors(&race.path)
        .into_iter()
        .filter(|l| log::is_rescue_line(l))
        .collect();
    let selected = format!(
        "selected {} on a fresh snapshot",
        lab.upstream_addr(race.new)
    );
    assert!(
        matches!(rescue.as_slice(), [l] if l.contains(&log::rescued_marker(Protocol::Http, UPSTREAM))
            && l.contains(&selected)),
        "{}: one rescue line selecting {}: {rescue:#?}",
        race.path,
        race.new
    );
    // The probes that found ADDR_B came first; the race's retry is the
    // first request to ADDR_B after them.
    let to_new = resumed_on(&lab.backend, ADDR_B, 0);
    let rescued = to_new
        .iter()
        .position(|(path, _)| *path == race.path)
        .unwrap_or_else(|| panic!("{} never reached {ADDR_B}: {to_new:?}", race.path));
    assert!(rescued >= 1, "no probe reached {ADDR_B} first: {to_new:?}");
    assert!(
        to_new[rescued].1,
        "the rescued connection did not resume the session saved for {ADDR_B}: {to_new:?}"
    );

    for i in 0..3 {
        let r = fresh.get(&format!("/after/{i}")).await;
        assert_eq!(r.body, format!("{ADDR_B}\n"), "{r:?}");
    }
    let after = &resumed_on(&lab.backend, ADDR_B, 0)[rescued + 1..];
    assert!(
        after.len() == 3 && after.iter().all(|(_, resumed)| *resumed),
        "connections after the rescue did not resume (the first one needs the \
         session the rescued connection saved): {after:?}"
    );
    let s = lab.status("be").await;
    assert_eq!(s.count(Counter::Rescued), 1, "{s}");
    assert_eq!(s.count(Counter::Resnapshots), 1, "{s}");
    lab.finish();
}

/// The keepalive race over HTTPS.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tls_keepalive_race_is_rescued() {
    let mut lab = Lab::start_spec(Spec::single_peer(Flavor::with_module(), "", ON).tls()).await;
    for i in 0..2 {
        let race = lab.race_once(i).await;
        lab.assert_rescued(&race);
    }
    assert_eq!(lab.status("be").await.count(Counter::Rescued), 2);
    lab.finish();
}
