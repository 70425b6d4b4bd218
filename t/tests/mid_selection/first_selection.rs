//! A change at a request's first selection, or while the balancer's own
//! `peer.init` runs: rescued and counted as `first`, absorbed by running
//! the init again, or refused by the list itself.

use std::time::Duration;

use generation_retry_t::actors::backend::ADDR_B;
use generation_retry_t::actors::dns::Answer;
use generation_retry_t::memcheck::patience;
use generation_retry_t::nginx::gdb::Breakpoint;
use generation_retry_t::scoring::accesslog::Hop;
use generation_retry_t::scoring::metrics::{log, Counter, NoLiveCause, Protocol, StatusExt};
use generation_retry_t::shared::UPSTREAM;

use super::common::{status, worker, workers, Run, Stop, INIT, SELECT};

/// The change at a request's first selection (the 1-hop shape, which stock
/// answers `502` with `$upstream_addr` "be"): worker 1 is stopped inside
/// its first round-robin selection, before round-robin compares the
/// generation; worker 0 applies a DNS change meanwhile; released, the
/// selection is refused, the module re-snapshots and the request is
/// answered by the new address in one hop, counted as a first-selection
/// busy, a re-snapshot and a rescue.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_change_at_the_first_selection_is_rescued_and_counted_as_first() {
    let mut run = Run::start(1).await;
    run.first_request_across_a_change(SELECT, Stop::AtEntry, "/first")
        .await;
    let entry = run.nginx.access_entries("/first", 1).await.remove(0);
    assert_eq!(
        entry.hops,
        [Hop::Addr((ADDR_B, run.backend.port()).into())],
        "{}",
        entry.upstream_addr()
    );
    assert_eq!(entry.resnapshots, Some(1));
    let s = status(&mut run.on_0).await;
    assert_eq!(s.count(Counter::BusyFirst), 1, "{s}");
    assert_eq!(s.count(Counter::BusyRetry), 0, "{s}");
    assert_eq!(s.count(Counter::Resnapshots), 1, "{s}");
    assert_eq!(s.count(Counter::Rescued), 1, "{s}");
    assert_eq!(s.count(Counter::Failed), 0, "{s}");
    let rescue = log::rescued_marker(Protocol::Http, UPSTREAM);
    let log = run.nginx.error_log();
    assert_eq!(log.matches(&rescue).count(), 1, "{log}");
    run.nginx.finish();
}

/// A change that lands while the balancer's `peer.init` runs leaves the
/// generation of its state unknown (read before the init: the old one;
/// after: the new one; round-robin's own read: either). The module reads
/// both and runs the init again when they differ, so the state and the
/// request agree on the generation (issue 41, defect E).
///
/// Here worker 1 is stopped as round-robin's `peer.init` returns (its
/// state taken at the old generation) while worker 0 applies a DNS change:
/// the init runs again, at the new generation, and the first selection is
/// not refused: 200 from the new address, nothing counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_change_during_the_balancers_init_is_absorbed() {
    let mut run = Run::start(1).await;
    run.first_request_across_a_change(INIT, Stop::AtReturn, "/init")
        .await;
    let s = status(&mut run.on_0).await;
    for c in [Counter::BusyFirst, Counter::Resnapshots, Counter::Rescued] {
        assert_eq!(s.count(c), 0, "{c:?}: {s}");
    }
    assert_eq!(s.count(Counter::NoLiveUnavailable), 0, "{s}");
    run.nginx.finish();
}

/// The other side of the same window: worker 1 is stopped as
/// round-robin's `peer.init` is called (the module has read the old
/// generation), and worker 0 empties the list (NXDOMAIN), so the init
/// takes its state at the new generation, of an empty list. The first
/// selection is refused by the list itself: `cause="empty"`, never a
/// generation-busy abort nor a re-snapshot, which the module counted when
/// it kept the generation it read before the init.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refusal_after_a_change_during_the_init_is_the_lists_own() {
    let mut run = Run::start(1).await;
    let workers = workers(&run.nginx).await;
    let g0 = run.generation().await;
    let before = status(&mut run.on_0).await;
    let bp = Breakpoint::attach(workers[1], INIT, 0).await.unwrap();
    let mut on_1 = run.on_1.take().unwrap();
    let request = tokio::spawn(async move { on_1.get("/inside").await });
    let stopped = bp.hit(patience(Duration::from_secs(20))).await.unwrap();
    run.flip_to(Answer::NxDomain, g0).await;
    stopped.release().await.unwrap();
    let r = request.await.unwrap().unwrap();
    assert_eq!((r.status(), worker(&r)), (502, workers[1]), "{r:?}");
    let s = status(&mut run.on_0).await;
    for c in [Counter::BusyFirst, Counter::Resnapshots, Counter::Failed] {
        assert_eq!(s.count(c), before.count(c), "{c:?}: {s}");
    }
    let empty = NoLiveCause::Empty.counter();
    assert_eq!(s.count(empty), before.count(empty) + 1, "{s}");
    run.nginx.finish();
}
