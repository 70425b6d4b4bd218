//! The one exception to the history rule: a list of one peer, whose peer
//! is retried after its cached connection failed and counted as
//! `retried`, not excluded (after a fresh connection failed, it is
//! excluded: `mid_selection::single_peer`).

use std::time::{Duration, Instant};

use generation_retry_t::actors::backend::{ADDR_A, ADDR_B};
use generation_retry_t::memcheck::patience;
use generation_retry_t::nginx::Flavor;
use generation_retry_t::scenarios::http::{Lab, Spec, NAME};
use generation_retry_t::scoring::metrics::{Counter, StatusExt};
use generation_retry_t::shared::UPSTREAM;

/// The one exception, said out loud: a list of one peer. nginx's balancers
/// keep no tried bitmap for a single peer and retry it (a stale keepalive
/// connection is the everyday case), so the rule passes it on too, and
/// counts it as `retried`. The request's cached connection to the old
/// address is closed by the backend after the name moved away and back:
/// the fresh list is that one address again. It is rescued there on a new
/// connection (`$upstream_addr` "A:P, A:P"), counted as retried, not
/// excluded; excluding it would end the request in `no live upstreams`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_single_peer_is_retried_and_counted() {
    let spec = Spec::single_peer(Flavor::with_module(), "", "generation_retry_resnapshot on;");
    let lab = Lab::start_spec(spec).await;
    lab.wait_proxying_to(ADDR_A, "/warm").await;
    let hold = lab.backend.arm_hold();
    let client = lab.client.clone();
    let request = tokio::spawn(async move { client.get("/single").await });
    let held = hold
        .caught(patience(Duration::from_secs(10)))
        .await
        .unwrap();
    assert_eq!(held.addr, ADDR_A);
    for ip in [ADDR_B, ADDR_A] {
        let since = Instant::now();
        lab.dns.set_a(NAME, ip);
        lab.wait_applied(ip, since).await;
        lab.wait_proxying_to(ip, &format!("/probe-{ip}")).await;
    }
    held.close();
    let response = request.await.unwrap();
    assert_eq!(
        response.status(),
        200,
        "{response:?}\n{}",
        lab.nginx.error_log()
    );
    assert_eq!(response.body, format!("{ADDR_A}\n"));
    let entry = lab.access_entry("/single").await;
    let a = lab.upstream_addr(ADDR_A);
    assert_eq!(entry.upstream_addr(), format!("{a}, {a}"));
    let s = lab.status(UPSTREAM).await;
    assert_eq!(
        (
            s.count(Counter::Rescued),
            s.count(Counter::Retried),
            s.count(Counter::Excluded)
        ),
        (1, 1, 0),
        "{s}"
    );
    lab.finish();
}
