//! The lab, short, as assertions: every arm of the lab's table runs under
//! open-loop load with its faults and must show its row's claims and the
//! generic ones of its kind (`lab::Claim`, the same check `cargo xtask lab`
//! makes). On the stock and module-off arms' logs,
//! `generation-retry-diagnose` must also place at least 99% of each
//! family's 502s right (`labels::score`). The first test is the headline: stock shows 2-hop 502s, the
//! module in `on` none, in `off` it counts exactly what stock-style nginx
//! let fail, the patched nginx none, and no POST ever runs twice. The
//! others run every other arm, so an arm added to the table is asserted
//! here too (but for the arms that make labelled logs, which
//! `t/tests/diagnose.rs` runs and asserts).

use std::time::Instant;

use generation_retry_t::lab::{render_table, run_arm, Arm, Options, Protocol};
use generation_retry_t::labels::{score, Truth, MIN_SHARE};

/// The headline arms.
const HEADLINE: &[Arm] = &[Arm::Stock, Arm::ModuleOff, Arm::ModuleOn, Arm::Patched];

fn options() -> Options {
    Options::short()
}

/// Runs `arms` one after another, prints their table, and fails naming
/// every claim a run failed.
async fn run_and_check(what: &str, arms: &[Arm]) {
    run_seeded(what, arms, options()).await;
}

async fn run_seeded(what: &str, arms: &[Arm], opts: Options) {
    assert!(!arms.is_empty(), "{what}: no arm to run");
    let started = Instant::now();
    let mut results = Vec::new();
    let mut failed = Vec::new();
    for a in arms {
        let r = run_arm(*a, &opts, |_| {}).await;
        failed.extend(a.check(&r, &opts));
        if let Some(truth) = truth(*a) {
            let s = score(&r, truth);
            eprintln!("generation-retry-diagnose on {}", s.line());
            failed.extend(s.failures(MIN_SHARE));
        }
        results.push(r);
    }
    eprintln!(
        "{what}: {} arms in {:.0} s\n{}",
        arms.len(),
        started.elapsed().as_secs_f64(),
        render_table(&results)
    );
    assert!(
        failed.is_empty(),
        "{what}: claims failed:\n{}\n{results:#?}",
        failed.join("\n")
    );
}

/// Where the true family of `arm`'s 502s comes from, for the arms whose
/// logs `generation-retry-diagnose` is scored on here (the others with
/// labels are in `diagnose.rs`): stock by its configuration, module-off
/// by the module's lines.
fn truth(arm: Arm) -> Option<Truth> {
    match arm {
        Arm::Stock => Some(Truth::ByConstruction),
        Arm::ModuleOff => Some(Truth::ModuleLines),
        _ => None,
    }
}

/// The arms of `protocol` not in [`HEADLINE`] and not making labelled
/// logs, in table order.
fn others(protocol: Protocol) -> Vec<Arm> {
    Arm::ALL
        .iter()
        .copied()
        .filter(|a| !HEADLINE.contains(a) && !a.labels() && a.row().protocol == protocol)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lab_short_run_stock_vs_module() {
    run_and_check("headline arms", HEADLINE).await;
}

/// The workarounds (`max_fails=0`, `backup`, `@retry_once`), the two
/// controls and the two sibling causes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lab_short_run_other_http_arms() {
    run_and_check("other http arms", &others(Protocol::Http)).await;
}

/// The stream arms: stock, the module on, the patched nginx, under one
/// seed (the seed places the sessions against the DNS swaps). Stock fails
/// at the change; the module and the patched nginx fail no session, of
/// any kind. Three seeds, one test each, so the test threads share them
/// out with the http arms.
async fn stream_arms(seed: u64) {
    let arms = others(Protocol::Stream);
    let what = format!("stream arms, seed {seed}");
    run_seeded(&what, &arms, Options { seed, ..options() }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lab_short_run_stream_arms_seed_1656() {
    stream_arms(1656).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lab_short_run_stream_arms_seed_14() {
    stream_arms(14).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lab_short_run_stream_arms_seed_2026() {
    stream_arms(2026).await;
}
