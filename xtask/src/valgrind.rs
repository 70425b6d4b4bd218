//! `cargo xtask valgrind`: the deterministic race scenarios (every balancer
//! row, the module's race and behaviour tests, stock's and the patched
//! nginx's races, HTTPS, stream) and a short lab, with every nginx under valgrind
//! memcheck (`GENERATION_RETRY_VALGRIND`, see `t/src/memcheck.rs`), then one
//! summary over every memcheck log: processes checked, errors, definite
//! leaks, by nginx flavor.
//!
//! `nginx-test` runs [`ci_subset`]: two race scenarios of the module and two
//! balancer rows, under the same checks.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::{build, cargo, run, target_dir, Result};

/// The harness's switch: a directory for the memcheck logs.
const ENV: &str = "GENERATION_RETRY_VALGRIND";

/// The test binaries of the full run (timing-dependent ones excluded: see
/// the README's "Memory safety").
const TESTS: &[&str] = &[
    "race",
    "patched",
    "module_race",
    "balancers",
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
const CI_TESTS: &[&str] = &["module_race", "balancers"];
const CI_FILTER: &[&str] = &[
    "module_on_rescues_the_race",
    "module_off_observes_without_changing_the_outcome",
    "round_robin",
    "hash_consistent",
];

/// `cargo xtask valgrind [--ci]`.
pub fn valgrind(args: &[String]) -> Result {
    let ci = match args {
        [] => false,
        [a] if a == "--ci" => true,
        _ => return Err("usage: cargo xtask valgrind [--ci]".into()),
    };
    let install_dir = build::build()?;
    if ci {
        return ci_subset(&install_dir);
    }
    let dir = log_dir()?;
    let started = Instant::now();
    gate(&install_dir, &dir)?;
    let tests = run_tests(&install_dir, &dir, TESTS, &[]);
    let lab = run(crate::harness_command("lab", &install_dir)
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
pub fn ci_subset(install_dir: &Path) -> Result {
    let dir = log_dir()?;
    let started = Instant::now();
    gate(install_dir, &dir)?;
    let mut filter = vec!["--exact"];
    filter.extend_from_slice(CI_FILTER);
    let tests = run_tests(install_dir, &dir, CI_TESTS, &filter);
    let summary = Summary::read(&dir)?;
    println!("{}", summary.render(&dir, started.elapsed()));
    tests?;
    summary.verdict()
}

/// `target/valgrind`, emptied.
fn log_dir() -> Result<PathBuf> {
    let dir = target_dir().join("valgrind");
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    if Command::new("valgrind").arg("--version").output().is_err() {
        return Err("valgrind is not installed (apt-get install valgrind)".into());
    }
    Ok(dir)
}

/// `t/tests/memcheck_gate.rs`: without the suppressions memcheck reports
/// nginx's own leak, with the module's frame named; with them it is clean.
/// Proof that a clean summary comes from a gate that looks.
fn gate(install_dir: &Path, dir: &Path) -> Result {
    run_tests(install_dir, dir, &["memcheck_gate"], &["--ignored"])
}

fn run_tests(install_dir: &Path, dir: &Path, tests: &[&str], filter: &[&str]) -> Result {
    let mut cmd = cargo();
    // Every binary runs even when one fails: the summary covers them all.
    cmd.args(["test", "--no-fail-fast", "-p", "generation-retry-t"]);
    for t in tests {
        cmd.args(["--test", t]);
    }
    // One test at a time: a test may start several nginx at once, each
    // tens of times slower under memcheck, and two cores are all CI has.
    cmd.arg("--").arg("--test-threads=1").args(filter);
    run(cmd
        .env(ENV, dir)
        .env("GENERATION_RETRY_NGINX_DIR", install_dir))
}

/// One memcheck log, as far as the summary needs it.
#[derive(Debug, Default, PartialEq, Eq)]
struct Log {
    complete: bool,
    errors: u64,
    suppressed: u64,
    lost_bytes: u64,
    lost_blocks: u64,
}

fn parse(text: &str) -> Log {
    let mut log = Log::default();
    for line in text.lines() {
        let Some((_, body)) = line.split_once("== ") else {
            continue;
        };
        let body = body.trim();
        let nums = |s: &str| -> Vec<u64> {
            s.split(|c: char| !c.is_ascii_digit() && c != ',')
                .filter_map(|w| w.replace(',', "").parse().ok())
                .collect()
        };
        if let Some(rest) = body.strip_prefix("ERROR SUMMARY: ") {
            // `N errors from M contexts (suppressed: S from T)`
            let n = nums(rest);
            log.complete = true;
            log.errors = n.first().copied().unwrap_or(0);
            log.suppressed = n.get(2).copied().unwrap_or(0);
        } else if let Some(rest) = body.strip_prefix("definitely lost: ") {
            let n = nums(rest);
            log.lost_bytes = n.first().copied().unwrap_or(0);
            log.lost_blocks = n.get(1).copied().unwrap_or(0);
        }
    }
    log
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
            .map_err(|e| format!("{}: {e}", dir.display()))?
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".log"))
            .collect();
        names.sort();
        let mut s = Summary::default();
        for name in names {
            let text = fs::read_to_string(dir.join(&name)).unwrap_or_default();
            let log = parse(&text);
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
            row.lost_bytes += log.lost_bytes;
            row.lost_blocks += log.lost_blocks;
            if !log.complete {
                row.incomplete += 1;
            }
            if !log.complete || log.errors > 0 || log.lost_blocks > 0 {
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
            return Err(format!(
                "memcheck: {} errors, {} definitely lost blocks, {} logs without a summary",
                t.errors, t.lost_blocks, t.incomplete
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_error_and_leak_summaries() {
        let log = parse(
            "==9== LEAK SUMMARY:\n\
             ==9==    definitely lost: 1,024 bytes in 2 blocks\n\
             ==9== ERROR SUMMARY: 3 errors from 2 contexts (suppressed: 4 from 1)\n",
        );
        assert_eq!(
            log,
            Log {
                complete: true,
                errors: 3,
                suppressed: 4,
                lost_bytes: 1024,
                lost_blocks: 2
            }
        );
        assert!(!parse("==9== Memcheck, a memory error detector\n").complete);
    }

    #[test]
    fn flavor_from_log_name() {
        assert_eq!(flavor("module-1234-7.log"), "module");
        assert_eq!(flavor("patched-module-1234-0.log"), "patched-module");
        assert_eq!(flavor("stock-1-2.log"), "stock");
    }
}
