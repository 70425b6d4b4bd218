//! Errors of the balancer itself during a rescue, forced with gdb: a
//! failed re-init and an error from the fresh selection are answered as
//! nginx answers them (500, not `no live upstreams`) and counted as
//! failed.

use std::time::Duration;

use generation_retry_core::rescue::Fault;
use generation_retry_t::actors::backend::{ADDR_A, ADDR_B};
use generation_retry_t::memcheck::patience;
use generation_retry_t::nginx::gdb::{worker_pids, Breakpoint};
use generation_retry_t::nginx::Flavor;
use generation_retry_t::scenarios::http::{Lab, Spec};
use generation_retry_t::scoring::metrics::{log, Counter, NoLiveCause, Protocol, StatusExt};
use generation_retry_t::shared::UPSTREAM;

use super::common::{point, INIT, SELECT};

/// The race of `Lab::race_once` on one worker, with gdb making the
/// `skip`+1-th call of `function` after the flip return `NGX_ERROR`, as an
/// allocation failure inside it would. Returns the response's status and
/// the status object afterwards.
async fn race_with_fault(
    function: &str,
    skip: u32,
) -> (u16, serde_json::Value, serde_json::Value, Lab) {
    let lab = Lab::start_spec(Spec::single_peer(
        Flavor::with_module(),
        "",
        "generation_retry_resnapshot on;",
    ))
    .await;
    let worker = worker_pids(&lab.nginx, 1).await[0];
    lab.wait_proxying_to(ADDR_A, "/warm").await;
    // Readiness probes may have met the list empty before it resolved.
    let before = lab.status(UPSTREAM).await;
    let hold = lab.backend.arm_hold();
    let request = {
        let c = lab.client.clone();
        tokio::spawn(async move { c.get("/race").await })
    };
    let held = hold
        .caught(patience(Duration::from_secs(10)))
        .await
        .unwrap();
    assert_eq!((held.addr, held.path.as_str()), (ADDR_A, "/race"));
    point(&lab.dns, ADDR_B).await;
    lab.wait_proxying_to(ADDR_B, "/probe").await;

    // From here the worker runs nothing but the race's retry.
    let bp = Breakpoint::attach(worker, function, skip).await.unwrap();
    held.close();
    let stopped = bp.hit(patience(Duration::from_secs(20))).await.unwrap();
    stopped.release_returning(-1).await.unwrap();
    let r = request.await.unwrap();
    let s = lab.status(UPSTREAM).await;
    (r.status(), before, s, lab)
}

/// The checks both faults share: answered as nginx answers the balancer's
/// own error (500, and no `no live upstreams`), counted as failed and by
/// nothing else, with the module's line naming the fault.
fn assert_errored(
    status: u16,
    before: &serde_json::Value,
    s: &serde_json::Value,
    lab: &Lab,
    fault: Fault,
) {
    assert_eq!(status, 500, "{fault:?}: {s}");
    assert_eq!(s.count(Counter::BusyRetry), 1, "{s}");
    assert_eq!(s.count(Counter::Resnapshots), 1, "{s}");
    assert_eq!(s.count(Counter::Rescued), 0, "{s}");
    assert_eq!(s.count(Counter::Failed), 1, "busy = rescued + failed: {s}");
    for cause in NoLiveCause::ALL {
        let counter = cause.counter();
        assert_eq!(s.count(counter), before.count(counter), "{cause:?}: {s}");
    }
    let log = lab.nginx.error_log();
    let line = log::errored(Protocol::Http, UPSTREAM, fault);
    assert!(log.contains(&line), "no {line:?} in:\n{log}");
    let race: Vec<&str> = log.lines().filter(|l| l.contains("/race")).collect();
    assert!(
        !race.iter().any(|l| l.contains("no live upstreams")),
        "{race:#?}"
    );
}

/// The balancer's `peer.init` fails when the module calls it again for the
/// re-snapshot: the request is answered as nginx answers a failed
/// `peer.init` (500), not as `no live upstreams`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failed_reinit_is_answered_as_nginx_answers_a_failed_init() {
    let (status, before, s, lab) = race_with_fault(INIT, 0).await;
    assert_errored(status, &before, &s, &lab, Fault::ReinitFailed);
    lab.finish();
}

/// The selection on the fresh snapshot returns an error (not a peer, not a
/// refusal): passed through as nginx would (500), and counted as failed, so
/// busy = rescued + failed still holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_error_from_the_fresh_selection_is_passed_through_and_counted() {
    let (status, before, s, lab) = race_with_fault(SELECT, 1).await;
    assert_errored(status, &before, &s, &lab, Fault::FreshSelectError);
    lab.finish();
}
