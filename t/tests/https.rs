//! HTTPS upstreams with `proxy_ssl_session_reuse on`: the wrapper forwards
//! set_session/save_session to the balancer's state, so sessions are still
//! saved and resumed, and the race is rescued over TLS too.

use generation_retry_t::metrics::{Counter, StatusExt};
use generation_retry_t::nginx::Flavor;
use generation_retry_t::scenario::{Lab, Spec};

const ON: &str = "generation_retry_resnapshot on;";

/// Without keepalive every request is a new TLS connection: after the
/// first per peer, the backend sees resumed handshakes, which needs nginx
/// to have saved and set sessions through the wrapper.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tls_sessions_are_saved_and_resumed_through_the_wrapper() {
    let mut lab = Lab::start_spec(Spec::two_peers(Flavor::with_module(), "", ON).tls()).await;
    for i in 0..8 {
        let r = lab.client.get(&format!("/tls/{i}")).await;
        assert_eq!(r.status(), 200, "{r:?}");
    }
    let (full, resumed) = lab.backend.handshakes();
    assert!(
        resumed >= 4,
        "handshakes full={full} resumed={resumed}: sessions are not reused"
    );

    let race = lab.race_once(0).await;
    assert_eq!(
        race.response.status(),
        200,
        "{race:?}\n{}",
        lab.nginx.error_log()
    );
    assert_eq!(lab.status("be").await.count(Counter::Rescued), 1);
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
