//! The deterministic race with the module loaded.

use generation_retry_t::nginx::Flavor;
use generation_retry_t::scenarios::http::Lab;
use generation_retry_t::scoring::accesslog::Shape;
use generation_retry_t::scoring::metrics::{log, Counter, NoLiveCause, Protocol, StatusExt};

/// `on`: every scripted race is rescued: 200 from the new address,
/// `$upstream_addr` "OLD:P, NEW:P", one retry-phase busy, one re-snapshot,
/// one rescue per race.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn module_on_rescues_the_race() {
    let mut lab = Lab::start(Flavor::with_module(), "generation_retry_resnapshot on;").await;
    let repeats = generation_retry_t::repeats(20);
    for i in 0..repeats {
        let race = lab.race_once(i).await;
        lab.assert_rescued(&race);
        assert_eq!(race.entry.shape(), Shape::Other);
        assert_eq!(
            race.entry.resnapshots,
            Some(1),
            "$generation_retry_resnapshots"
        );

        let s = lab.status("be").await;
        let n = (i + 1) as u64;
        assert_eq!(s.count(Counter::BusyRetry), n, "{s}");
        assert_eq!(s.count(Counter::BusyFirst), 0, "{s}");
        assert_eq!(s.count(Counter::Resnapshots), n, "{s}");
        assert_eq!(s.count(Counter::Rescued), n, "{s}");
        assert_eq!(s.count(Counter::Failed), 0, "{s}");
        assert_eq!(s.count(Counter::NoLiveGeneration), 0, "{s}");
    }
    lab.assert_rescue_log(&log::rescued_marker(Protocol::Http, "be"), repeats);
    lab.finish();
}

/// `off`: observe only. The outcome is stock's 502, and the counters say
/// why.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn module_off_observes_without_changing_the_outcome() {
    let mut lab = Lab::start(Flavor::with_module(), "generation_retry_resnapshot off;").await;
    let race = lab.race_once(0).await;
    assert_eq!(race.response.status(), 502, "{race:?}");
    assert_eq!(
        race.entry.upstream_addr(),
        format!("{}, be", lab.upstream_addr(race.old))
    );
    assert!(lab.two_hop_pair(&race.path).is_some());
    assert_eq!(race.entry.resnapshots, Some(0));
    let log = lab.nginx.error_log();
    assert!(
        log.contains(&log::no_live_marker(
            Protocol::Http,
            "be",
            NoLiveCause::Generation
        )),
        "the module's error line precedes nginx's: {log}"
    );
    let s = lab.status("be").await;
    assert_eq!(s.count(Counter::BusyRetry), 1, "{s}");
    assert_eq!(s.count(Counter::Failed), 1, "{s}");
    assert_eq!(s.count(Counter::NoLiveGeneration), 1, "{s}");
    assert_eq!(s.count(Counter::Resnapshots), 0, "{s}");
    assert_eq!(s.count(Counter::Rescued), 0, "{s}");
    assert_eq!(s["mode"], "off", "{s}");
    lab.finish();
}
