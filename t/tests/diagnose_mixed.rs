//! `generation-retry-diagnose` on one nginx's mixed logs (see
//! `generation_retry_t::scenarios::mixed`): nine upstreams failing in every way at
//! once, two workers, one error log, the tool told nothing but `nginx -T`.
//! The ground truth is the module's `cause=` lines (observe mode) and the
//! shape of each 502 that has none (`other`, reported apart: it is decided
//! by the line's shape alone, on both sides).
//!
//! The rules may be studied on the tuning set ([`mixed::Layout::Tuning`],
//! seed 7, `tuning_set_scores`); the test scores the held-out set
//! ([`mixed::Layout::HeldOut`], seed 2026), whose DNS schedules,
//! peer counts and faults differ, in the three formats nginx writes at once.
//! It runs on the default nginx only: the tool does not depend on the
//! version, and the lab's labelled arms (`diagnose.rs`) cover the matrix.

use generation_retry_t::scenarios::labels::{Score, FAMILIES};
use generation_retry_t::scenarios::mixed;

/// Scores every access log of one mixed run and prints the figures.
fn mixed_scores(opts: mixed::Options) -> Vec<Score> {
    let run = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(mixed::run(&opts));
    let scores: Vec<Score> = mixed::ACCESS_LOGS
        .iter()
        .enumerate()
        .map(|(k, (file, format))| {
            let s = mixed::score(
                &run,
                k,
                &format!(
                    "{} seed {} {file} ({format})",
                    opts.layout.name(),
                    opts.seed
                ),
            );
            eprintln!("{}", s.line());
            for m in &s.misplaced {
                eprintln!("    misplaced: {m}");
            }
            s
        })
        .collect();
    eprintln!("sent: {:?}", run.sent);
    let streams: Vec<Score> = mixed::STREAM_LOGS
        .iter()
        .enumerate()
        .map(|(k, (file, format))| {
            let s = mixed::score_stream(
                &run,
                k,
                &format!(
                    "{} seed {} {file} ({format})",
                    opts.layout.name(),
                    opts.seed
                ),
            );
            eprintln!("{}", s.line());
            for m in &s.misplaced {
                eprintln!("    misplaced: {m}");
            }
            s
        })
        .collect();
    eprintln!("sessions: {:?}", run.stream_sessions);
    scores.into_iter().chain(streams).collect()
}

/// The rules' tuning set: what a change to the rules may be studied on
/// (`GENERATION_RETRY_KEEP_LOGS=DIR` keeps its logs). Prints the scores,
/// asserts nothing: the held-out test below is the measure.
#[test]
#[ignore = "the tuning set: run by hand when changing the rules"]
fn tuning_set_scores() {
    mixed_scores(mixed::Options {
        layout: mixed::Layout::Tuning,
        seed: 7,
        rate: 300.0,
        duration: std::time::Duration::from_secs(12),
    });
}

/// Members each family needs in a run for its share to say something.
const MIN_MEMBERS: usize = 20;

/// The share of each family the tool must place right on the held-out
/// set, per access log of [`mixed::ACCESS_LOGS`], then of
/// [`mixed::STREAM_LOGS`] (measured: diagnose/README.md, "Accuracy", six
/// runs, with a margin under the lowest run for run-to-run timing). `combined` has whole seconds and no `$request_time`: it cannot
/// tell a change in flight from one a second away, and its floors say so.
/// `other` is held to the lab's 99% in every format, being decided by
/// shape on both sides.
const HELD_OUT_SHARE: [[(&str, f64); 4]; 5] = [
    [
        ("generation-retry", 0.95),
        ("unavailable", 0.98),
        ("empty", 0.95),
        ("other", 0.99),
    ],
    // Without `$request_time` a request's start is assumed (six runs since
    // the still tail: 100%; before it, a race in the run's last second
    // could read as its tried peer being out, one run of seven 88%).
    [
        ("generation-retry", 0.95),
        ("unavailable", 0.98),
        ("empty", 0.95),
        ("other", 0.99),
    ],
    [
        ("generation-retry", 0.35),
        ("unavailable", 0.96),
        ("empty", 0.45),
        ("other", 0.99),
    ],
    // The stream logs of [`mixed::STREAM_LOGS`] (six runs since the still
    // tail: 100%; before it a race at the run's end had no session after
    // it to show the change, and the floor was 85%). About 35 races a run:
    // 90% leaves three misplaced.
    [
        ("generation-retry", 0.90),
        ("unavailable", 0.98),
        ("empty", 0.95),
        ("other", 0.99),
    ],
    [
        ("generation-retry", 0.90),
        ("unavailable", 0.98),
        ("empty", 0.95),
        ("other", 0.99),
    ],
];

/// The held-out set, scored: every family but `generation-first` (which
/// no run of this scenario produces: it is scored nowhere, see the
/// README) has its members, and the tool places each at its floor.
#[test]
fn the_tool_places_each_family_of_one_nginxs_mixed_logs_held_out() {
    let scores = mixed_scores(mixed::Options {
        layout: mixed::Layout::HeldOut,
        seed: 2026,
        rate: 300.0,
        duration: std::time::Duration::from_secs(12),
    });
    assert_eq!(scores.len(), HELD_OUT_SHARE.len(), "a floor per log");
    let mut failed = Vec::new();
    for (s, floors) in scores.iter().zip(HELD_OUT_SHARE) {
        if s.status != 0 || !s.unlabelled.is_empty() || s.incidents != s.errors_logged {
            failed.extend(s.failures(1.0).into_iter().take(3));
        }
        for (family, share) in floors {
            let k = FAMILIES
                .iter()
                .position(|f| *f == family)
                .expect("a family");
            let (total, right) = s.families[k];
            if total < MIN_MEMBERS {
                failed.push(format!(
                    "{}: {family}: {total} members, {MIN_MEMBERS} needed",
                    s.arm
                ));
            } else if (right as f64) < share * total as f64 {
                failed.push(format!(
                    "{}: {family}: {right} of {total} placed right, {:.0}% required; misplaced: {}",
                    s.arm,
                    100.0 * share,
                    s.misplaced.join("; ")
                ));
            }
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}
