//! The lab, short, as assertions: under open-loop load with DNS swaps at
//! every re-resolve and keepalive reclaim, stock shows 2-hop 502s, the
//! module in `on` shows none, in `off` it counts exactly what stock-style
//! nginx let fail, and no POST ever runs twice.

use std::time::Duration;

use generation_retry_t::lab::{run_arm, Arm, ArmResult, Options};

fn options() -> Options {
    Options {
        rate: 250.0,
        duration: Duration::from_secs(10),
        reclaim: 0.1,
        ..Options::default()
    }
}

async fn arm(a: Arm) -> ArmResult {
    let r = run_arm(a, &options(), |_| {}).await;
    assert_eq!(r.post_received_twice, 0, "{}: a POST ran twice", r.arm);
    assert_eq!(
        r.logged, r.requests,
        "{}: the access log lacks requests, so its tallies are partial",
        r.arm
    );
    assert!(r.post_sent > 0, "{}: no POST was sent", r.arm);
    assert!(
        r.swaps >= 3,
        "{}: only {} DNS swaps: the fault did not run",
        r.arm,
        r.swaps
    );
    assert!(
        r.first_attempt_failures >= 20,
        "{}: only {} first-attempt failures: the reclaim fault did not run",
        r.arm,
        r.first_attempt_failures
    );
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lab_short_run_stock_vs_module() {
    let stock = arm(Arm::Stock).await;
    assert!(
        stock.two_hop_502 > 0,
        "stock showed no 2-hop 502: the race was not provoked, so this run proves nothing: {stock:?}"
    );

    let off = arm(Arm::ModuleOff).await;
    assert!(
        off.two_hop_502 > 0,
        "module-off: the race was not provoked: {off:?}"
    );
    assert_eq!(
        off.busy,
        Some((off.two_hop_502 + off.one_hop_502) as u64),
        "module-off's busy counter must equal the no-live 502s in its access log: {off:?}"
    );
    assert_eq!(off.rescued, Some(0));

    let on = arm(Arm::ModuleOn).await;
    assert_eq!(on.two_hop_502, 0, "module-on: {on:?}");
    assert_eq!(on.one_hop_502, 0, "module-on: {on:?}");
    assert_eq!(on.no_live.map(|n| n[0]), Some(0), "module-on: {on:?}");
    // Not only no 502: every GET got its 200 (a refusal turned into a 500,
    // a 504 or a reset would show here).
    assert_eq!(on.retryable_failed, 0, "module-on: {on:?}");
    assert!(
        on.rescued.unwrap_or(0) > 0,
        "module-on rescued nothing: the race was not provoked: {on:?}"
    );
    let patched = arm(Arm::Patched).await;
    assert_eq!(patched.two_hop_502, 0, "patched: {patched:?}");
    assert_eq!(patched.one_hop_502, 0, "patched: {patched:?}");
    assert_eq!(patched.retryable_failed, 0, "patched: {patched:?}");

    eprintln!(
        "{}",
        generation_retry_t::lab::render_table(&[stock, off, on, patched])
    );
}
