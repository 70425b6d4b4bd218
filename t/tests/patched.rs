//! nginx with `nginx-src-patches/VERSION` applied, without the module:
//! the same race answers 200 from the new address, and the patch says so
//! in its own line. With the module loaded too, the core has already
//! re-snapshotted, so the module finds nothing to rescue and counts nothing.

use generation_retry_t::nginx::Flavor;
use generation_retry_t::scenarios::http::{patched_rescue_line, Lab, Race, Spec};
use generation_retry_t::scoring::errorlog::{NO_LIVE, PREMATURELY_CLOSED};
use generation_retry_t::scoring::metrics::{log, Counter, StatusExt};
use generation_retry_t::shared::UPSTREAM;

/// The patched core rescued `race`: 200 from the new address with
/// `$upstream_addr` "OLD:P, NEW:P", and the request's error.log lines are
/// the failed first attempt, then the patch's re-snapshot line, and no
/// `no live upstreams` nor any rescue line of the module.
fn assert_rescued_by_the_patch(lab: &Lab, race: &Race) {
    lab.assert_rescued(race);
    let lines = lab.request_errors(&race.path);
    let failed = lines.iter().position(|l| l.contains(PREMATURELY_CLOSED));
    let reselected = lines
        .iter()
        .position(|l| l.contains("[info]") && l.contains(&patched_rescue_line(UPSTREAM)));
    assert!(
        matches!((failed, reselected), (Some(f), Some(r)) if f < r),
        "{}: expected the failed attempt, then the patch's line: {lines:#?}",
        race.path
    );
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.contains(&patched_rescue_line(UPSTREAM)))
            .count(),
        1,
        "{}: one re-snapshot: {lines:#?}",
        race.path
    );
    assert!(
        !lines
            .iter()
            .any(|l| l.contains(NO_LIVE) || log::is_rescue_line(l)),
        "{}: {lines:#?}",
        race.path
    );
}

/// The patched nginx alone rescues every race, on the new address, each
/// with one line of the patch's.
///
/// Non-regression guard: the patched nginx, without the module.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn patched_nginx_rescues_the_race_without_the_module() {
    let mut lab = Lab::start(Flavor::patched(), "").await;
    let repeats = generation_retry_t::repeats(10);
    for i in 0..repeats {
        let race = lab.race_once(i).await;
        assert_rescued_by_the_patch(&lab, &race);
    }
    lab.assert_rescue_log(&patched_rescue_line(UPSTREAM), repeats);
    lab.finish();
}

/// With the module loaded into the patched nginx and `on`, the patch
/// re-snapshots first (its line, the new address), so the module never
/// meets a stale state: it re-snapshots nothing and counts nothing.
///
/// Non-regression guard: in a patched nginx the module must find nothing to
/// rescue; the patch does the work.
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
        assert_rescued_by_the_patch(&lab, &race);
        assert_eq!(race.entry.resnapshots, Some(0), "the module re-snapshotted");
    }
    let s = lab.status("be").await;
    assert_eq!(s["mode"], "on", "{s}");
    assert_eq!(s.count(Counter::BusyFirst), 0, "{s}");
    assert_eq!(s.count(Counter::BusyRetry), 0, "{s}");
    assert_eq!(s.count(Counter::Resnapshots), 0, "{s}");
    assert_eq!(s.count(Counter::Rescued), 0, "{s}");
    assert_eq!(s.count(Counter::Failed), 0, "{s}");
    lab.assert_rescue_log(&patched_rescue_line(UPSTREAM), 3);
    lab.finish();
}
