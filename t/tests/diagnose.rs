//! `generation-retry-diagnose` against ground truth, on every nginx
//! version: lab arms run the module in observe mode (nginx fails exactly as
//! stock does, and the module logs the cause of every `no live upstreams`),
//! and the tool, run on the same logs with the module's lines taken out,
//! must place at least 99% of each family's 502s in that family (with
//! fewer than 100 in a family, every one). The arms: the race alone
//! (`module-off`), the two-record `max_fails` wipe-out beside the race,
//! NXDOMAIN beside the race, and plain connect failures while the name
//! swaps (`other`). Each arm's own claims are checked too (this file is
//! where the labelled arms are asserted). `statistical.rs` scores the
//! stock arm the same way on 1.28.0 (see `labels::Truth`).

use std::time::Duration;

use generation_retry_t::lab::{run_arm, Arm, Options};
use generation_retry_t::labels::{score, Truth};

/// At least this share of each family placed right.
const MIN: f64 = 0.99;

fn options() -> Options {
    Options {
        rate: 250.0,
        duration: Duration::from_secs(10),
        reclaim: 0.1,
        ..Options::default()
    }
}

/// Runs `arm`, checks its claims, scores the tool on its logs, and fails
/// naming every claim or family short of [`MIN`]; `families` must each
/// have had members (so the score is about something).
async fn labelled(arm: Arm, families: &[&str]) {
    let opts = options();
    let r = run_arm(arm, &opts, |_| {}).await;
    let mut failed = arm.check(&r, &opts);
    let s = score(&r, Truth::ModuleLines);
    eprintln!("{}", s.line());
    failed.extend(s.failures(MIN));
    for f in families {
        if s.total(f) == 0 {
            failed.push(format!("{}: no 502 of family {f}", arm.name()));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_race_alone_is_generation_retry() {
    labelled(Arm::ModuleOff, &["generation-retry"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_two_record_wipe_out_is_unavailable() {
    labelled(Arm::ObserveTwoRecords, &["unavailable"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_nxdomain_is_empty() {
    labelled(Arm::ObserveNxDomain, &["empty"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn connect_failures_are_other() {
    labelled(Arm::ObserveConnectRefused, &["other"]).await;
}
