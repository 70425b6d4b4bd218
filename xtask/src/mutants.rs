//! `cargo xtask mutants [--only NAME,...] [--list]`: the mutation check.
//!
//! Each mutant of [`MUTANTS`] is one small deliberate fault in the module
//! or in the core patches: an exact text of a file replaced. For each, this
//! command applies it to a private copy of the repository, builds what
//! changed (the module, or the patched nginx for a patch), runs the tests
//! that should catch it against that build, and restores the file. A
//! mutant is caught when one of its tests fails; the command ends with a
//! table and fails when a mutant was missed, did not build or did not
//! apply (its text must occur exactly once: a mutant that does not apply is
//! an error, never a skip).
//!
//! Nothing here touches the working tree, so it can run beside other work:
//!
//! - `target/mutants/tree`: a copy of the tracked files (`git ls-files`,
//!   with their working-tree contents), made once per run; mutants are
//!   applied there one at a time;
//! - `target/mutants/target`: that copy's cargo target directory; the
//!   module is built there as `cargo xtask build` builds it (vendored: its
//!   nginx is the same nginx 1.28.0 with the same flags as the stock one, so
//!   the module loads into `target/nginx/1.28.0`'s nginx);
//! - `target/mutants/install/NAME`: what the tests run against
//!   (`GENERATION_RETRY_NGINX_DIR`): links to `target/nginx/1.28.0`'s stock
//!   and patched nginx and the mutant's module, or for a patch mutant the
//!   patched nginx rebuilt from the mutated patch;
//! - `target/mutants/logs/NAME.log`: every test's output;
//!   `target/mutants/results.md`: the table.
//!
//! The tests themselves are the `t` crate of the working tree, run from the
//! workspace root with `GENERATION_RETRY_NGINX_DIR` pointing at the
//! mutant's install, with the matrix's shorter repeats
//! ([`matrix_env`](crate::harness::matrix_env)). First the same tests run
//! against the unmutated copy (the baseline): a test that fails there
//! would "catch" anything.
//!
//! The do-nothing mutant (the module loads and its directives parse, but it
//! never wraps a selection) runs every module of the suite instead, and is caught
//! only when every test that still passes declares itself a non-regression
//! guard: a line of its doc comment starts `/// Non-regression guard:`,
//! followed by why passing without the module's work is right
//! ([`guards`](guards::guards)).
//!
//! Here the command: its options, the selection and the run over it; the
//! catalogue in `catalogue.rs` (its mutants by area in `catalogue/`), a
//! mutant applied in `apply.rs`, what it runs against in `builds.rs`,
//! judged in `judge.rs` with the tests run by `cargo_test.rs`, the
//! declared guards in `guards.rs`, the table in `report.rs`.

mod apply;
mod builds;
mod cargo_test;
mod catalogue;
mod guards;
mod judge;
mod report;

use std::fs;
use std::path::PathBuf;
use std::time::Instant;

use crate::versions::DEFAULT;
use crate::workspace::{target_dir, At, Result};

use apply::{check_applies, read, sync_tree};
use builds::Context;
use guards::GUARD;
use judge::{baseline, run_one};
use report::{table, Report, Verdict};

pub use catalogue::{Mutant, MUTANTS};

/// Modules of the suite the do-nothing mutant leaves out: `external`,
/// `install` and `dist` test the module as their own builds of the
/// working tree make it (a clean copy, a release tarball, an nginx
/// configured on its own), not this copy's; `angie` tests Angie.
const NOT_THE_MUTANTS: &[&str] = &["external", "install", "dist", "angie"];

#[test]
fn the_do_nothing_mutant_leaves_out_what_the_whole_suite_does() {
    for m in crate::harness::NOT_IN_ANOTHER_WHOLE_SUITE {
        assert!(NOT_THE_MUTANTS.contains(m), "{m}");
    }
}

/// `cargo xtask mutants [--only NAME,...] [--list]`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// only these mutants
    #[arg(long, value_name = "NAME,...", value_delimiter = ',', value_parser = mutant)]
    pub only: Vec<String>,
    /// list the mutants and their tests
    #[arg(long)]
    pub list: bool,
}

/// `--only`'s names: those of the catalogue.
fn mutant(name: &str) -> std::result::Result<String, String> {
    match MUTANTS.iter().any(|m| m.name == name) {
        true => Ok(name.to_string()),
        false => Err("no mutant of that name; `cargo xtask mutants --list` lists them".into()),
    }
}

pub fn command(a: &Args) -> Result {
    let selected: Vec<&Mutant> = MUTANTS
        .iter()
        .filter(|m| a.only.is_empty() || a.only.iter().any(|o| o == m.name))
        .collect();
    if a.list {
        print_list(&selected);
        return Ok(());
    }
    run_all(&selected)
}

fn print_list(mutants: &[&Mutant]) {
    for m in mutants {
        println!("{:<34} {}", m.name, m.file);
        println!("{:<34} tests: {}", "", tests_run(m).join(", "));
    }
}

/// The tests a mutant runs, as the table shows them.
fn tests_run(m: &Mutant) -> Vec<String> {
    if m.whole_suite {
        return vec![format!(
            "every t/tests binary but {}",
            NOT_THE_MUTANTS.join(", ")
        )];
    }
    let mut out: Vec<String> = m.tests.iter().map(|(b, t)| format!("{b}::{t}")).collect();
    if m.core {
        out.push("core unit tests".into());
    }
    out
}

/// Where everything of a run lives: `target/mutants`.
fn mutants_dir() -> PathBuf {
    target_dir().join("mutants")
}

fn run_all(selected: &[&Mutant]) -> Result {
    let started = Instant::now();
    let dir = mutants_dir();
    let tree = dir.join("tree");
    let logs = dir.join("logs");
    fs::create_dir_all(&logs).at(&logs)?;
    sync_tree(&tree)?;
    // Every mutant applies before anything is built.
    for m in selected {
        let text = read(&tree.join(m.file))?;
        check_applies(m, &text)?;
    }
    // The versions, the default first, each with its own baseline.
    let mut versions: Vec<&str> = Vec::new();
    for m in selected {
        if !versions.contains(&m.version) {
            versions.push(m.version);
        }
    }
    versions.sort_by_key(|v| *v != DEFAULT);

    let mut reports = Vec::new();
    for version in versions {
        let group: Vec<&Mutant> = selected
            .iter()
            .copied()
            .filter(|m| m.version == version)
            .collect();
        let ctx = Context::prepare(version, &tree, &dir)?;
        baseline(&group, &ctx, &tree, &logs)?;
        for m in group {
            eprintln!("xtask: mutant {} (nginx {version}): {}", m.name, m.file);
            let report = run_one(m, &tree, &ctx).unwrap_or_else(|e| Report {
                name: m.name,
                file: m.file,
                tests: tests_run(m),
                caught_by: Vec::new(),
                seconds: 0.0,
                verdict: Verdict::Error(e.to_string()),
                undeclared: Vec::new(),
            });
            eprintln!(
                "xtask: mutant {}: {:?}{} ({:.0} s)",
                m.name,
                report.verdict,
                if report.caught_by.is_empty() {
                    String::new()
                } else {
                    format!(" by {}", report.caught_by.join(", "))
                },
                report.seconds
            );
            reports.push(report);
        }
    }

    let table = table(&reports);
    println!("\n{table}");
    let results = dir.join("results.md");
    fs::write(&results, &table).at(&results)?;
    for r in reports.iter().filter(|r| !r.undeclared.is_empty()) {
        println!(
            "{}: {} tests pass without declaring `{GUARD}`:",
            r.name,
            r.undeclared.len()
        );
        for t in &r.undeclared {
            println!("  {t}");
        }
    }
    for r in &reports {
        if let Verdict::Error(e) = &r.verdict {
            println!("{}: not judged: {e}", r.name);
        }
    }
    let count = |f: &dyn Fn(&Verdict) -> bool| reports.iter().filter(|r| f(&r.verdict)).count();
    println!(
        "mutants: {} caught, {} missed, {} did not build, {} not judged, in {:.0} s (table: {})",
        count(&|v| *v == Verdict::Caught),
        count(&|v| *v == Verdict::Missed),
        count(&|v| *v == Verdict::BuildFailed),
        count(&|v| matches!(v, Verdict::Error(_))),
        started.elapsed().as_secs_f64(),
        results.display()
    );
    let bad: Vec<&str> = reports
        .iter()
        .filter(|r| r.verdict != Verdict::Caught)
        .map(|r| r.name)
        .collect();
    if bad.is_empty() {
        Ok(())
    } else {
        err!("not caught: {}", bad.join(", "))
    }
}

#[cfg(test)]
mod tests;
