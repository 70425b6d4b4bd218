//! `max=N`: how many times a request follows a list that keeps moving.
//! Worker 1 is held at its selection on its fresh snapshot while worker 0
//! applies another change: with `max=1` the request fails as
//! `generation`, with `max=2` the same sequence is rescued.

use std::time::Duration;

use generation_retry_core::rescue::Failure;
use generation_retry_t::actors::backend::{ADDR_A, ADDR_B};
use generation_retry_t::actors::load::Response;
use generation_retry_t::memcheck::patience;
use generation_retry_t::nginx::gdb::Breakpoint;
use generation_retry_t::scoring::accesslog::{Entry, Hop};
use generation_retry_t::scoring::metrics::{log, Counter, NoLiveCause, Protocol, StatusExt};
use generation_retry_t::shared::UPSTREAM;

use super::common::{status, worker, workers, Run, SELECT};

impl Run {
    /// The race of `Lab::race_once`, served by worker 1, with the list
    /// moving again (back to ADDR_A) while worker 1 is stopped at its
    /// selection on its first fresh snapshot.
    async fn race_while_moving(&mut self) -> (Response, Entry) {
        let workers = workers(&self.nginx).await;
        let g0 = self.generation().await;
        // Worker 1 caches a connection to ADDR_A; its next request there
        // (the race) is held.
        let warm = self.on_1.as_mut().unwrap().get("/warm").await.unwrap();
        assert_eq!(warm.body, format!("{ADDR_A}\n"), "{warm:?}");
        assert_eq!(worker(&warm), workers[1]);
        let hold = self.backend.arm_hold();
        let mut on_1 = self.on_1.take().unwrap();
        let request = tokio::spawn(async move {
            let r = on_1.get("/race").await;
            (on_1, r)
        });
        let held = hold
            .caught(patience(Duration::from_secs(10)))
            .await
            .unwrap();
        assert_eq!((held.addr, held.path.as_str()), (ADDR_A, "/race"));
        let g1 = self.flip(ADDR_B, g0).await;

        // Worker 1's retry: its selection is refused (generation g0, the
        // list's g1), the module re-snapshots and selects again: that
        // second call stops.
        let bp = Breakpoint::attach(workers[1], SELECT, 1).await.unwrap();
        held.close();
        let stopped = bp.hit(patience(Duration::from_secs(20))).await.unwrap();
        // Meanwhile worker 0 applies another change.
        self.flip(ADDR_A, g1).await;
        stopped.release().await.unwrap();

        let (on_1, r) = request.await.unwrap();
        self.on_1 = Some(on_1);
        let r = r.unwrap();
        assert_eq!(worker(&r), workers[1]);
        let entry = self.nginx.access_entries("/race", 1).await.remove(0);
        (r, entry)
    }
}

/// `max=1`: the one re-snapshot allowed found the list moved again, so the
/// selection fails as `generation`, counted as failed, with its line.
/// `max=2`, the control: the same sequence, and the second re-snapshot (on
/// the list as worker 0 left it) is rescued. One test, run in turn: each
/// stops a worker under gdb.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn max_is_how_many_times_a_moving_list_is_followed() {
    let mut run = Run::start(1).await;
    let (r, entry) = run.race_while_moving().await;
    let hops = entry.upstream_addr();
    assert_eq!(r.status(), 502, "max=1: {hops}");
    assert_eq!(entry.hops.len(), 2, "max=1: {hops}");
    assert!(matches!(entry.hops[1], Hop::Group(_)), "max=1: {hops}");
    assert_eq!(entry.resnapshots, Some(1), "max=1: {hops}");
    let s = status(&mut run.on_0).await;
    assert_eq!(s.count(Counter::BusyRetry), 1, "{s}");
    assert_eq!(s.count(Counter::Resnapshots), 1, "{s}");
    assert_eq!(s.count(Counter::Rescued), 0, "{s}");
    assert_eq!(s.count(Counter::Failed), 1, "{s}");
    assert_eq!(s.count(Counter::NoLiveGeneration), 1, "{s}");
    let line = log::no_live(
        Protocol::Http,
        UPSTREAM,
        NoLiveCause::Generation,
        Failure::StillMoving { max: 1 },
    );
    let log = run.nginx.error_log();
    assert!(log.contains(&line), "no {line:?} in:\n{log}");
    run.nginx.finish();

    let mut run = Run::start(2).await;
    let (r, entry) = run.race_while_moving().await;
    let hops = entry.upstream_addr();
    assert_eq!(r.status(), 200, "max=2: {hops}");
    assert_eq!(r.body, format!("{ADDR_A}\n"), "max=2: {hops}");
    assert_eq!(entry.resnapshots, Some(2), "max=2: {hops}");
    assert_eq!(
        entry.hops.last(),
        Some(&Hop::Addr((ADDR_A, run.backend.port()).into())),
        "max=2: {hops}"
    );
    let s = status(&mut run.on_0).await;
    assert_eq!(s.count(Counter::BusyRetry), 1, "{s}");
    assert_eq!(s.count(Counter::Resnapshots), 2, "{s}");
    assert_eq!(s.count(Counter::Rescued), 1, "{s}");
    assert_eq!(s.count(Counter::Failed), 0, "{s}");
    run.nginx.finish();
}
