//! `cargo xtask valgrind`: the deterministic race scenarios (every balancer
//! row, the module's race and behaviour tests, stock's and the patched
//! nginx's races, HTTPS, stream) and a short lab, with every nginx under valgrind
//! memcheck (`GENERATION_RETRY_VALGRIND`, see `t/src/memcheck.rs`), built
//! with `NGX_DEBUG_PALLOC` (`build::memcheck_build`: every pool allocation
//! of nginx's and the module's a block of its own to valgrind), then one
//! summary over every memcheck log: processes checked, errors, definite
//! leaks, by nginx flavor. Each log is read by the harness's own parser
//! (`t/src/memcheck.rs`, compiled into xtask as `crate::memcheck`), the one
//! that fails the tests.
//!
//! `nginx-test` runs [`ci_subset`]: two race scenarios of the module and two
//! balancer rows, under the same checks.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::build::{self, Built};
use crate::harness::parallel::{run_modules, Modules, JOBS_ENV};
use crate::harness::{harness_command, suite_test, TestTotals};
use crate::memcheck::{self, ENV};
use crate::workspace::{run, target_dir, At, Result, DEFAULT};

/// The suite's modules of the full run (timing-dependent ones excluded: see
/// docs/testing.md, "Memory safety").
const TESTS: &[&str] = &[
    "race",
    "patched",
    "module_race",
    "balancers",
    "history",
    "module_behaviour",
    "https",
    "stream",
];

/// The short lab: a few seconds per arm, at a rate nginx under memcheck
/// keeps up with; module off and on, stock as the baseline, the two
/// sibling arms for the `unavailable` and `empty` paths, and the stream
/// module on.
const LAB_ARGS: &[&str] = &[
    "--arms",
    "stock,module-off,module-on,sibling:two-records,sibling:nxdomain,stream:module-on",
    "--rate",
    "100",
    "--duration",
    "6",
];

/// `nginx-test`'s subset: `on` over 20 races and `off`, round-robin's rows
/// (keepalive in both directive orders, two peers, a backup server) and
/// consistent hash's (whose zone table nginx leaks at exit, suppressed).
const CI_FILTER: &[&str] = &[
    "module_race::module_on_rescues_the_race",
    "module_race::module_off_observes_without_changing_the_outcome",
    "balancers::round_robin",
    "balancers::hash_consistent",
];

/// `cargo xtask valgrind [--ci]`.
pub fn valgrind(ci: bool) -> Result {
    let built = build::build_version(DEFAULT, None)?;
    if ci {
        return ci_subset(&built);
    }
    let install_dir = build::memcheck_build(&built)?;
    let dir = log_dir()?;
    let started = Instant::now();
    gate(&install_dir, &dir)?;
    let tests = run_tests(&install_dir, &dir, Modules::Only(TESTS), &[]);
    let lab = run(harness_command("lab", &install_dir)
        .args(LAB_ARGS)
        .arg("--out")
        .arg(dir.join("lab"))
        .env(ENV, &dir));
    let summary = Summary::read(&dir)?;
    println!("{}", summary.render(&dir, started.elapsed()));
    tests?;
    lab?;
    summary.verdict()
}

/// Two race scenarios and two balancer rows under memcheck.
pub fn ci_subset(built: &Built) -> Result {
    let install_dir = &build::memcheck_build(built)?;
    let dir = log_dir()?;
    let started = Instant::now();
    gate(install_dir, &dir)?;
    let mut filter = vec!["--exact"];
    filter.extend_from_slice(CI_FILTER);
    let tests = run_tests(install_dir, &dir, Modules::All, &filter);
    let summary = Summary::read(&dir)?;
    println!("{}", summary.render(&dir, started.elapsed()));
    tests?;
    summary.verdict()
}

/// `target/valgrind`, emptied.
fn log_dir() -> Result<PathBuf> {
    let dir = target_dir().join("valgrind");
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).at(&dir)?;
    if Command::new("valgrind").arg("--version").output().is_err() {
        return Err("valgrind is not installed (apt-get install valgrind)".into());
    }
    Ok(dir)
}

/// `t/tests/memcheck_gate.rs`: without the suppressions memcheck reports
/// nginx's own leak, with the module's frame named; with them it is clean.
/// Proof that a clean summary comes from a gate that looks.
fn gate(install_dir: &Path, dir: &Path) -> Result {
    run_tests(
        install_dir,
        dir,
        Modules::Only(&["memcheck_gate"]),
        &["--ignored"],
    )
}

fn run_tests(install_dir: &Path, dir: &Path, modules: Modules, filter: &[&str]) -> Result {
    // Every module runs even when one fails: the summary covers them all.
    let mut cmd = suite_test();
    // One test at a time, one module at a time: a test may start several
    // nginx at once, each tens of times slower under memcheck, and two
    // cores are all CI has.
    cmd.arg("--").arg("--test-threads=1").args(filter);
    cmd.env(ENV, dir)
        .env("GENERATION_RETRY_NGINX_DIR", install_dir)
        .env(JOBS_ENV, "1");
    run_modules(&cmd, &mut TestTotals::default(), modules, true)
}

/// The nginx flavor of a log named `<flavor>-<pid>-<seq>.log`.
fn flavor(file: &str) -> String {
    let stem = file.strip_suffix(".log").unwrap_or(file);
    let mut parts: Vec<&str> = stem.rsplitn(3, '-').collect();
    parts.reverse();
    match parts.as_slice() {
        [flavor, _pid, _seq] => flavor.to_string(),
        _ => stem.to_string(),
    }
}

#[derive(Debug, Default)]
struct Row {
    processes: u64,
    errors: u64,
    suppressed: u64,
    lost_bytes: u64,
    lost_blocks: u64,
    incomplete: u64,
}

#[derive(Debug, Default)]
struct Summary {
    rows: Vec<(String, Row)>,
    bad: Vec<String>,
}

impl Summary {
    fn read(dir: &Path) -> Result<Summary> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .at(dir)?
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".log"))
            .collect();
        names.sort();
        let mut s = Summary::default();
        for name in names {
            let log = memcheck::read(&dir.join(&name));
            let f = flavor(&name);
            let i = match s.rows.iter().position(|(n, _)| *n == f) {
                Some(i) => i,
                None => {
                    s.rows.push((f, Row::default()));
                    s.rows.len() - 1
                }
            };
            let row = &mut s.rows[i].1;
            row.processes += 1;
            row.errors += log.errors;
            row.suppressed += log.suppressed;
            row.lost_bytes += log.definitely_lost_bytes;
            row.lost_blocks += log.definitely_lost_blocks;
            if !log.complete {
                row.incomplete += 1;
            }
            // Not `log.clean()`: a process killed by a signal fails its
            // own test already; this list is of logs with errors, leaks or
            // no summary.
            if !log.complete || log.errors > 0 || log.definitely_lost_blocks > 0 {
                s.bad.push(name);
            }
        }
        Ok(s)
    }

    fn total(&self) -> Row {
        let mut t = Row::default();
        for (_, r) in &self.rows {
            t.processes += r.processes;
            t.errors += r.errors;
            t.suppressed += r.suppressed;
            t.lost_bytes += r.lost_bytes;
            t.lost_blocks += r.lost_blocks;
            t.incomplete += r.incomplete;
        }
        t
    }

    fn render(&self, dir: &Path, took: Duration) -> String {
        let mut out = format!(
            "\nvalgrind memcheck ({}, {:.0} s)\n{:<16} {:>9} {:>7} {:>22} {:>11} {:>11}\n",
            dir.display(),
            took.as_secs_f64(),
            "nginx",
            "processes",
            "errors",
            "definitely lost",
            "suppressed",
            "no summary"
        );
        let t = self.total();
        for (name, r) in self
            .rows
            .iter()
            .chain(std::iter::once(&("total".into(), t)))
        {
            out.push_str(&format!(
                "{:<16} {:>9} {:>7} {:>22} {:>11} {:>11}\n",
                name,
                r.processes,
                r.errors,
                format!("{} B in {} blocks", r.lost_bytes, r.lost_blocks),
                r.suppressed,
                r.incomplete
            ));
        }
        for b in &self.bad {
            out.push_str(&format!("  problem: {}\n", dir.join(b).display()));
        }
        out
    }

    fn verdict(&self) -> Result {
        let t = self.total();
        if t.processes == 0 {
            return Err("no nginx ran under memcheck".into());
        }
        if !self.bad.is_empty() {
            return err!(
                "memcheck: {} errors, {} definitely lost blocks, {} logs without a summary",
                t.errors,
                t.lost_blocks,
                t.incomplete
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flavor_from_log_name() {
        assert_eq!(flavor("module-1234-7.log"), "module");
        assert_eq!(flavor("patched-module-1234-0.log"), "patched-module");
        assert_eq!(flavor("stock-1-2.log"), "stock");
    }

    #[test]
    fn the_summary_sums_the_harness_reports_by_flavor() {
        let dir = std::env::temp_dir().join(format!("xtask-valgrind-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let clean = "==1== ERROR SUMMARY: 0 errors from 0 contexts (suppressed: 3 from 3)\n";
        let leaky = "==2==    definitely lost: 1,024 bytes in 2 blocks\n\
                     ==2== ERROR SUMMARY: 2 errors from 2 contexts (suppressed: 1 from 1)\n";
        fs::write(dir.join("module-1-0.log"), clean).unwrap();
        fs::write(dir.join("module-2-1.log"), leaky).unwrap();
        fs::write(dir.join("stock-3-0.log"), "==3== Memcheck\n").unwrap();
        fs::write(dir.join("notes.txt"), leaky).unwrap();
        let s = Summary::read(&dir).unwrap();
        let _ = fs::remove_dir_all(&dir);
        let names: Vec<&str> = s.rows.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["module", "stock"]);
        let t = s.total();
        assert_eq!(
            (
                t.processes,
                t.errors,
                t.suppressed,
                t.lost_bytes,
                t.lost_blocks,
                t.incomplete
            ),
            (3, 2, 4, 1024, 2, 1)
        );
        assert_eq!(s.bad, ["module-2-1.log", "stock-3-0.log"]);
        assert!(s
            .verdict()
            .unwrap_err()
            .to_string()
            .contains("2 errors, 2 definitely lost blocks, 1 logs"));
        assert!(Summary::default().verdict().is_err());
    }
}
