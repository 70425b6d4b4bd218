//! The lab, short, as assertions: every arm of the lab's table runs under
//! open-loop load with its faults and must show its row's claims and the
//! generic ones of its kind (`lab::Claim`, the same check `cargo xtask lab`
//! makes). On the stock and module-off arms' logs,
//! `generation-retry-diagnose` must also place at least 99% of each
//! family's 502s right (`labels::score`). The headline group: stock shows
//! 2-hop 502s, the module in `on` none, in `off` it counts exactly what
//! stock-style nginx let fail, the patched nginx none, and no POST ever
//! runs twice. The other groups run every other arm, so an arm added to
//! the table is asserted here too (but for the arms that make labelled
//! logs, which `t/tests/diagnose.rs` runs and asserts). The groups run at
//! once ([`lab_short_run_every_arm`]); each failed claim is named with its
//! group.

use std::time::Instant;

use generation_retry_t::scenarios::lab::{render_table, run_arm, Arm, Options, Protocol};
use generation_retry_t::scenarios::labels::{score, Truth, MIN_SHARE};

/// The headline arms.
const HEADLINE: &[Arm] = &[Arm::Stock, Arm::ModuleOff, Arm::ModuleOn, Arm::Patched];

fn options() -> Options {
    Options::short()
}

/// A group of arms that runs in turn: its name, its arms, its options.
struct Group {
    what: String,
    arms: Vec<Arm>,
    opts: Options,
}

/// Runs a group's arms one after another, prints their table, and returns
/// every claim a run failed, named.
async fn run_group(g: Group) -> Vec<String> {
    let Group { what, arms, opts } = g;
    if arms.is_empty() {
        return vec![format!("{what}: no arm to run")];
    }
    let started = Instant::now();
    let mut results = Vec::new();
    let mut failed = Vec::new();
    for a in &arms {
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
    if !failed.is_empty() {
        eprintln!("{what}: the runs behind the failed claims:\n{results:#?}");
    }
    failed.into_iter().map(|f| format!("{what}: {f}")).collect()
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

/// The groups: the headline arms; the workarounds (`max_fails=0`,
/// `backup`, `@retry_once`), the two controls and the two sibling causes;
/// and the stream arms (stock, the module on, the patched nginx) under
/// three seeds (the seed places the sessions against the DNS swaps: stock
/// fails at the change, the module and the patched nginx fail no session,
/// of any kind).
fn groups() -> Vec<Group> {
    let mut groups = vec![
        Group {
            what: "headline arms".into(),
            arms: HEADLINE.to_vec(),
            opts: options(),
        },
        Group {
            what: "other http arms".into(),
            arms: others(Protocol::Http),
            opts: options(),
        },
    ];
    for seed in [1656, 14, 2026] {
        groups.push(Group {
            what: format!("stream arms, seed {seed}"),
            arms: others(Protocol::Stream),
            opts: Options { seed, ..options() },
        });
    }
    groups
}

/// Every group at once, each on its own thread with its own runtime (as
/// five tests would run, were libtest's two threads on two cores not the
/// limit). An arm mostly waits on its open-loop load's schedule: the five
/// groups together keep about half a core busy (the whole `cargo xtask
/// nginx-test -- lab_short_run` command took 27 s user and 14 s system
/// in 92 s). Some claims are about timing (a stock no-live 502 within
/// 400 ms of a swap, at least three swaps), and five runs at once on the
/// 2-core machine kept them with room: the latest stock 502 257 ms after
/// its swap. 79-91 s instead of 204 s two at a time (clean-clone CI,
/// 1.28.0).
#[test]
fn lab_short_run_every_arm() {
    let failed: Vec<String> = std::thread::scope(|s| {
        let runs: Vec<_> = groups()
            .into_iter()
            .map(|g| {
                let what = g.what.clone();
                let run = s.spawn(move || {
                    tokio::runtime::Builder::new_multi_thread()
                        .worker_threads(4)
                        .enable_all()
                        .build()
                        .expect("a tokio runtime")
                        .block_on(run_group(g))
                });
                (what, run)
            })
            .collect();
        runs.into_iter()
            .flat_map(|(what, run)| {
                run.join()
                    .unwrap_or_else(|_| vec![format!("{what}: panicked (its message above)")])
            })
            .collect()
    });
    assert!(failed.is_empty(), "claims failed:\n{}", failed.join("\n"));
}
