//! The seed's two control rows: each fault alone is harmless.

use std::time::Duration;

use generation_retry_t::actors::backend::{ADDR_A, ADDR_B};
use generation_retry_t::actors::dns::Answer;
use generation_retry_t::actors::load::{assert_all_ok, open_loop};
use generation_retry_t::nginx::Flavor;
use generation_retry_t::scenarios::http::{Lab, NAME};
use generation_retry_t::scoring::accesslog::tally;
use generation_retry_t::scoring::errorlog::{with_message, PREMATURELY_CLOSED};
use reqwest::Method;

/// DNS alternation alone: the name's single A record swaps at every
/// re-resolve under load, and no client sees an error (swaps are atomic).
///
/// Non-regression guard: a control of the seed: each fault alone is harmless to
/// stock nginx, module or not.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dns_alternation_alone_gives_no_errors() {
    let lab = Lab::start(Flavor::stock(), "").await;
    lab.dns.set(NAME, Answer::rotate(&[ADDR_B, ADDR_A]));

    let sent = open_loop(&lab.client, 100.0, Duration::from_secs(10), |i| {
        (Method::GET, format!("/alt/{i}"), None)
    })
    .await;

    let swaps = lab.dns.answers_for(NAME).len() - 1;
    // nginx re-resolves every valid+1 s: about 5 swaps in 10 s.
    assert!(
        swaps >= 3,
        "the DNS answer swapped only {swaps} times: the control ran without its fault"
    );
    assert!(lab.backend.answered(ADDR_A, "GET") > 0 && lab.backend.answered(ADDR_B, "GET") > 0);

    assert_all_ok(&sent);
    // Only the load's lines: readiness probes before the first resolution
    // legitimately meet an empty peer list.
    let load = lab.nginx.access_entries("/alt/", sent.len()).await;
    let t = tally(&load);
    assert_eq!(t.requests, sent.len());
    assert_eq!(t.status_502, 0, "{t:?}");
    lab.finish();
}

/// Keepalive reclaim alone on a fixed address: many first attempts fail on
/// reused connections, and nginx's retry rescues every one.
///
/// Non-regression guard: a control of the seed: each fault alone is harmless to
/// stock nginx, module or not.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn keepalive_reclaim_alone_is_rescued_by_retry() {
    let lab = Lab::start(Flavor::stock(), "").await;
    lab.backend.set_reclaim(0.2, 42);

    let sent = open_loop(&lab.client, 200.0, Duration::from_secs(5), |i| {
        (Method::GET, format!("/reclaim/{i}"), None)
    })
    .await;

    let first_attempt_failures = with_message(&lab.nginx.error_log(), PREMATURELY_CLOSED).len();
    assert!(
        first_attempt_failures >= 20,
        "only {first_attempt_failures} first-attempt failures: the reclaim fault did not bite"
    );
    assert_all_ok(&sent);
    assert_eq!(
        lab.dns.answers_for(NAME).len(),
        1,
        "the address must stay fixed"
    );
    lab.finish();
}
