//! A worker killed (SIGKILL) while gdb holds it inside a rescue: no
//! half-counted rescue, the new worker rescues and records itself, the
//! dead one holds no counters back.

use std::time::Duration;

use generation_retry_t::actors::backend::{Backend, ADDR_A, ADDR_B};
use generation_retry_t::actors::dns::DnsServer;
use generation_retry_t::memcheck::patience;
use generation_retry_t::nginx::gdb::{worker_pids, Breakpoint};
use generation_retry_t::scenarios::http::NAME;
use generation_retry_t::scoring::metrics::{Counter, StatusExt};

use super::common::{pinned, run_config, status, worker, workers, Run, SELECT};

/// An upstream of the first configuration only, whose counters a later
/// reload must free (issue 28: a fault during a rescue).
const GONE: &str = r#"
    upstream gone {
        zone gone 64k;
        server 127.0.0.1:1;
        generation_retry_resnapshot on;
    }
"#;

/// A worker killed (SIGKILL) while gdb holds it inside a rescue: refused,
/// re-snapshotted, stopped at its selection on the fresh snapshot. The
/// in-flight request fails as nginx fails any request whose worker dies
/// (the connection closes with no answer), the master starts a new worker
/// in its place, and:
/// - the counters hold no half of the killed rescue (the tally is added
///   after the selection it was killed in: busy, rescued and failed all
///   0, so busy = rescued + failed);
/// - the new worker rescues the next race (busy 1, rescued 1);
/// - it recorded itself in the zone's worker table, taking the dead
///   worker's entry: no reload finds a live child unrecorded
///   (`zone_workers_unknown`), and the dead worker's record holds nothing
///   back: the third reload frees `gone`'s counters, which only the
///   first configuration had.
///
/// The one test whose log is expected to hold an `[alert]`: nginx's
/// `worker process PID exited on signal 9` for the worker it killed, and
/// no other fatal line.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worker_killed_inside_a_rescue_is_replaced_and_counting_goes_on() {
    let dns = DnsServer::start().await;
    dns.set_a(NAME, ADDR_A);
    let backend = Backend::start().await;
    let bport = backend.port();
    let first = run_config(&dns, bport, 2, GONE);
    let mut run = Run::start_with(dns, backend, &first).await;
    let [w0, w1] = workers(&run.nginx).await;

    // The race on worker 1, stopped inside its rescue.
    let g0 = run.generation().await;
    let warm = run.on_1.as_mut().unwrap().get("/warm").await.unwrap();
    assert_eq!(
        (warm.body.as_str(), worker(&warm)),
        (&*format!("{ADDR_A}\n"), w1)
    );
    let hold = run.backend.arm_hold();
    let mut on_1 = run.on_1.take().unwrap();
    let request = tokio::spawn(async move { on_1.get("/race").await });
    let held = hold
        .caught(patience(Duration::from_secs(10)))
        .await
        .unwrap();
    let g1 = run.flip(ADDR_B, g0).await;
    let bp = Breakpoint::attach(w1, SELECT, 1).await.unwrap();
    held.close();
    let stopped = bp.hit(patience(Duration::from_secs(20))).await.unwrap();
    // SAFETY: kill(2) with plain integers: the worker this test stopped.
    assert_eq!(unsafe { libc::kill(w1, libc::SIGKILL) }, 0);
    drop(stopped);
    let answered = request.await.unwrap();
    assert!(
        answered.is_err(),
        "the killed worker's request was answered: {answered:?}"
    );

    // The master's new worker 1.
    let pids = worker_pids(&run.nginx, 3).await;
    let w2 = pids[2];
    assert!(!pids[..2].contains(&w2), "{pids:?}");
    let log = run.nginx.error_log();
    assert!(
        log.contains(&format!("worker process {w1} exited on signal 9")),
        "{log}"
    );
    let s = status(&mut run.on_0).await;
    for c in [
        Counter::BusyFirst,
        Counter::BusyRetry,
        Counter::Rescued,
        Counter::Failed,
    ] {
        assert_eq!(s.count(c), 0, "{c:?} after the killed rescue: {s}");
    }

    // The new worker rescues the next race.
    let (on_0, on_2) = pinned(&run.nginx, [w0, w2]).await;
    run.on_0 = on_0;
    let mut on_2 = on_2;
    let warm = on_2.get("/warm/2").await.unwrap();
    assert_eq!(
        (warm.body.as_str(), worker(&warm)),
        (&*format!("{ADDR_B}\n"), w2)
    );
    let hold = run.backend.arm_hold();
    let request = tokio::spawn(async move { on_2.get("/race/2").await });
    let held = hold
        .caught(patience(Duration::from_secs(10)))
        .await
        .unwrap();
    assert_eq!(held.addr, ADDR_B);
    run.flip(ADDR_A, g1).await;
    held.close();
    let r = request.await.unwrap().unwrap();
    assert_eq!(
        (r.status(), r.body.as_str(), worker(&r)),
        (200, &*format!("{ADDR_A}\n"), w2)
    );
    let s = status(&mut run.on_0).await;
    assert_eq!(s.count(Counter::BusyRetry), 1, "{s}");
    assert_eq!(s.count(Counter::Rescued), 1, "{s}");
    assert_eq!(s.count(Counter::Failed), 0, "{s}");

    // Reloads: the first while the new worker runs (it must be in the
    // table), the third frees `gone`.
    drop(run.on_0);
    // Each reload's two workers answer (and so have recorded themselves)
    // before the next reload.
    for _ in 0..3 {
        let started = worker_pids(&run.nginx, 0).await.len();
        run.nginx.reconfigure(&run_config(&run.dns, bport, 2, ""));
        let pids = worker_pids(&run.nginx, started + 2).await;
        let newest = [pids[pids.len() - 2], pids[pids.len() - 1]];
        drop(pinned(&run.nginx, newest).await);
    }
    let log = run.nginx.error_log();
    assert!(
        !log.contains("not recorded"),
        "a live worker was unrecorded:\n{log}"
    );
    let freed = generation_retry_t::scoring::errorlog::zone_freed(&log);
    // One line per setup of the zone: the start, then each reload.
    assert_eq!(
        freed,
        [0, 0, 0, 1],
        "freed per setup: gone's counters must be freed at the third reload, no sooner"
    );
    run.nginx
        .finish_expecting(&[&format!("worker process {w1} exited on signal 9")]);
}
