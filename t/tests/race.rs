//! The deterministic race of nginx/nginx#1656 on stock nginx 1.28.0.

use generation_retry_t::nginx::Flavor;
use generation_retry_t::scenarios::http::Lab;
use generation_retry_t::scoring::accesslog::Shape;
use generation_retry_t::scoring::errorlog;

/// Stock nginx answers the scripted race with the 2-hop 502, every time:
/// `$upstream_addr` "OLD:P, be", and error.log's `upstream prematurely closed
/// connection` then `no live upstreams` on the same connection.
///
/// Non-regression guard: stock nginx, without the module: the race is real.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stock_reproduces_two_hop_502() {
    let mut lab = Lab::start(Flavor::stock(), "").await;
    let repeats = generation_retry_t::repeats(20);
    for i in 0..repeats {
        let race = lab.race_once(i).await;
        let expected = format!("{}, be", lab.upstream_addr(race.old));
        assert_eq!(race.response.status(), 502, "race {i}: {race:?}");
        assert_eq!(race.entry.upstream_addr(), expected, "race {i}");
        assert_eq!(race.entry.shape(), Shape::TwoHop { attempts: 1 });
        assert!(
            lab.two_hop_pair(&race.path).is_some(),
            "race {i}: error.log lacks the prematurely-closed / no-live pair:\n{}",
            lab.nginx.error_log()
        );
    }
    // One refusal per race, no more: nothing else met `no live upstreams`.
    let log = lab.nginx.error_log();
    let refused: Vec<_> = errorlog::with_message(&log, errorlog::NO_LIVE)
        .into_iter()
        .filter(|l| l.whole.contains(" /race/"))
        .collect();
    assert_eq!(refused.len(), repeats, "{refused:#?}");
    lab.finish();
}
