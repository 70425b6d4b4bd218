//! nginx with `nginx-src-patches/VERSION` applied, without the module:
//! the same race answers 200 from the new address. With the module loaded
//! too, the core has already re-snapshotted, so the module finds nothing
//! to rescue and counts nothing.

use generation_retry_t::accesslog::Shape;
use generation_retry_t::metrics::{Counter, StatusExt};
use generation_retry_t::nginx::Flavor;
use generation_retry_t::scenario::{Lab, Spec};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn patched_nginx_rescues_the_race_without_the_module() {
    let mut lab = Lab::start(Flavor::patched(), "").await;
    let repeats = generation_retry_t::repeats(10);
    for i in 0..repeats {
        let race = lab.race_once(i).await;
        lab.assert_rescued(&race);
        assert_eq!(race.entry.shape(), Shape::Other);
        assert!(lab.two_hop_pair(&race.path).is_none());
    }
    lab.assert_rescue_log("upstream \"be\" peers changed, selecting again", repeats);
    lab.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn module_in_patched_nginx_finds_nothing_to_rescue() {
    let mut lab = Lab::start_spec(Spec::single_peer(
        Flavor::patched_with_module(),
        "",
        "generation_retry_resnapshot on;",
    ))
    .await;
    for i in 0..3 {
        let race = lab.race_once(i).await;
        assert_eq!(race.response.status(), 200, "race {i}: {race:?}");
        assert_eq!(race.entry.resnapshots, Some(0), "the module re-snapshotted");
    }
    let s = lab.status("be").await;
    assert_eq!(s.count(Counter::BusyFirst), 0, "{s}");
    assert_eq!(s.count(Counter::BusyRetry), 0, "{s}");
    assert_eq!(s.count(Counter::Resnapshots), 0, "{s}");
    assert_eq!(s.count(Counter::Rescued), 0, "{s}");
    assert_eq!(s.count(Counter::Failed), 0, "{s}");
    lab.finish();
}
