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

use generation_retry_t::scenarios::lab::{run_arm, Arm, Options};
use generation_retry_t::scenarios::labels::{score, Truth, MIN_SHARE};

fn options() -> Options {
    Options::short()
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
/// every claim or family short of [`MIN_SHARE`], and every expected family
/// without members.
async fn labelled(arm: Arm, families: &[&str]) -> Vec<String> {
    let opts = options();
    let r = run_arm(arm, &opts, |_| {}).await;
    let mut failed = arm.check(&r, &opts);
    let s = score(&r, Truth::ModuleLines);
    eprintln!("{}", s.line());
    failed.extend(s.failures(MIN_SHARE));
    for f in families {
        if s.total(f) == 0 {
            failed.push(format!("{}: no 502 of family {f}", arm.name()));
        }
    }
    failed
}

/// The four arms run at once (each has its own nginx, DNS server and
/// backend on its own ports), so the version matrix pays for one. Each
/// runs on a thread of its own with its own runtime: nginx dies with the
/// thread that started it (`PR_SET_PDEATHSIG`), and that thread outlives
/// its arm; and one arm's blocking steps (starting nginx, scoring) do not
/// hold up another's load.
#[test]
fn the_tool_places_every_family_of_labelled_logs() {
    let arms: Vec<_> = ARMS
        .into_iter()
        .map(|(arm, families)| {
            std::thread::spawn(move || {
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .expect("a runtime")
                    .block_on(labelled(arm, families))
            })
        })
        .collect();
    let failed: Vec<String> = arms
        .into_iter()
        .flat_map(|a| a.join().expect("an arm's thread"))
        .collect();
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}
