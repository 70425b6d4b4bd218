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

/// Each labelled arm, and the families it must show members of (so its
/// score is about something).
const ARMS: [(Arm, &[&str]); 4] = [
    (Arm::ModuleOff, &["generation-retry"]),
    (Arm::ObserveTwoRecords, &["unavailable"]),
    (Arm::ObserveNxDomain, &["empty"]),
    (Arm::ObserveConnectRefused, &["other"]),
];

/// Runs `arm`, checks its claims, scores the tool on its logs, and returns
/// every claim or family short of [`MIN`], and every expected family
/// without members.
async fn labelled(arm: Arm, families: &[&str]) -> Vec<String> {
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
    failed
}

/// The four arms run at once (each has its own nginx, DNS server and
/// backend on its own ports), so the version matrix pays for one. They
/// are joined on the test's own thread, not spawned: nginx dies with the
/// thread that started it (`PR_SET_PDEATHSIG`), and a runtime's idle
/// thread may exit mid-run.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_tool_places_every_family_of_labelled_logs() {
    let [a, b, c, d] = ARMS;
    let (a, b, c, d) = tokio::join!(
        labelled(a.0, a.1),
        labelled(b.0, b.1),
        labelled(c.0, c.1),
        labelled(d.0, d.1)
    );
    let failed: Vec<String> = [a, b, c, d].concat();
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}
