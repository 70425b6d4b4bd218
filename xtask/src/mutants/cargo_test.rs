//! The tests run: one `cargo test` per module of `t`'s suite, each name exact,
//! and core's unit tests; every command logged, retried while the working
//! tree's tests do not build, stopped at a time limit; libtest's lines read
//! back as passed and failed.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::harness::matrix_env;
use crate::harness::parallel::installed_version;
use crate::since::needed_by;
use crate::workspace::{cargo, At, Result};

/// The tests are the working tree's, which others may be editing: a test
/// binary that does not build is tried again this many times, this far
/// apart, before the mutant is left unjudged.
const BUILD_ATTEMPTS: u32 = 6;
const BUILD_RETRY: Duration = Duration::from_secs(60);

/// How long one `cargo test` may run before it is stopped (and its
/// unfinished tests count as timed out).
const TEST_LIMIT: Duration = Duration::from_secs(20 * 60);

/// What a test run said, by test.
#[derive(Default)]
pub(super) struct Results {
    pub(super) passed: Vec<String>,
    pub(super) failed: Vec<String>,
}

/// The listed tests, one `cargo test` per binary, each name exact; every
/// name must have run.
pub(super) fn run_listed(
    tests: &[(&str, &str)],
    install_dir: &Path,
    log: &Path,
) -> Result<Results> {
    let mut by_binary: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (b, t) in tests {
        by_binary.entry(b).or_default().push(t);
    }
    let mut all = Results::default();
    for (b, names) in by_binary {
        let r = cargo_test(b, &names, install_dir, log)?;
        for n in names {
            let id = format!("{b}::{n}");
            if !r.passed.contains(&id) && !r.failed.contains(&id) {
                return err!("{id} did not run (see {})", log.display());
            }
        }
        all.passed.extend(r.passed);
        all.failed.extend(r.failed);
    }
    Ok(all)
}

/// `cargo test -p generation-retry-t --test suite -- --exact BINARY::NAME...`
/// (a module of the suite, once a binary of its own; all its tests when
/// `names` is empty)
/// from the workspace root against `install_dir`; its output appended to
/// `log`. Tests that did not finish in [`TEST_LIMIT`] count as failed
/// (`... (timed out)`). Fails when the binary did not build.
pub(super) fn cargo_test(
    binary: &str,
    names: &[&str],
    install_dir: &Path,
    log: &Path,
) -> Result<Results> {
    let mut attempt = 1;
    let (ok, lines) = loop {
        let suite = || {
            let mut cmd = cargo();
            cmd.args(["test", "-p", "generation-retry-t", "--test", "suite", "--"]);
            cmd
        };
        // The module's tests by name: a filter matches anywhere (`race::`
        // would run `module_race::` too), so the whole module is listed.
        let exact: Vec<String> = if names.is_empty() {
            let (_, listed) = run_logged(suite().args(["--list", "--format", "terse"]), log)?;
            listed
                .iter()
                .filter_map(|l| l.strip_suffix(": test"))
                .filter(|t| t.starts_with(&format!("{binary}::")))
                .map(String::from)
                .collect()
        } else {
            names.iter().map(|n| format!("{binary}::{n}")).collect()
        };
        // Not a test of a protocol this nginx does not speak: the runner's
        // rule (`harness::parallel`), which reports it as not run.
        let nginx = installed_version(install_dir);
        let exact: Vec<String> = exact
            .into_iter()
            .filter(|t| nginx.is_none_or(|v| needed_by(t) <= v))
            .collect();
        // No name: the suite did not build (or lost the module); never a
        // bare `--exact`, which would run every test.
        let (ok, lines) = if exact.is_empty() {
            (false, Vec::new())
        } else {
            let mut cmd = suite();
            cmd.arg("--exact").args(&exact);
            cmd.env("GENERATION_RETRY_NGINX_DIR", install_dir);
            matrix_env(&mut cmd);
            run_logged(&mut cmd, log)?
        };
        let started = lines.iter().any(|l| l.starts_with("running "));
        if ok || started || attempt == BUILD_ATTEMPTS {
            break (ok, lines);
        }
        // The working tree's `t` did not build: someone may be editing it.
        eprintln!(
            "xtask: mutants: the suite did not build for {binary} (attempt {attempt} of \
             {BUILD_ATTEMPTS}); again in {} s",
            BUILD_RETRY.as_secs()
        );
        std::thread::sleep(BUILD_RETRY);
        attempt += 1;
    };
    let mut r = parse_results(&lines, "");
    let finished = lines.iter().any(|l| l.starts_with("test result: "));
    if !ok && !finished {
        let timed_out = names
            .iter()
            .map(|n| format!("{binary}::{n}"))
            .filter(|id| !r.passed.contains(id) && !r.failed.contains(id))
            .map(|id| format!("{id} (timed out)"))
            .collect::<Vec<_>>();
        if lines.iter().any(|l| l == TIMED_OUT) {
            r.failed.extend(timed_out);
            if names.is_empty() {
                r.failed.push(format!("{binary} (timed out)"));
            }
            return Ok(r);
        }
        return err!(
            "`cargo test --test suite -- {binary}::` ran no test (did it build? see {})",
            log.display()
        );
    }
    Ok(r)
}

/// `generation-retry-core`'s unit tests in the copy (`core::NAME` for each).
pub(super) fn run_core(tree: &Path, target: &Path, log: &Path) -> Result<Results> {
    let mut cmd = cargo();
    cmd.current_dir(tree)
        .args([
            "test",
            "-p",
            "generation-retry-core",
            "--lib",
            "--target-dir",
        ])
        .arg(target);
    let (ok, lines) = run_logged(&mut cmd, log)?;
    let r = parse_results(&lines, "core");
    if !ok && r.failed.is_empty() {
        return err!("core's unit tests did not run (see {})", log.display());
    }
    Ok(r)
}

/// The line [`run_logged`] adds when it stopped a command at [`TEST_LIMIT`].
const TIMED_OUT: &str = "xtask: mutants: stopped at the time limit";

/// Runs `cmd` in a process group of its own, stdout and stderr appended to
/// `log`; returns whether it succeeded and its stdout's lines. Stopped
/// (the whole group) after [`TEST_LIMIT`].
fn run_logged(cmd: &mut Command, log: &Path) -> Result<(bool, Vec<String>)> {
    use std::os::unix::process::CommandExt;
    append(log, &format!("$ {cmd:?}\n"));
    let stderr = File::options()
        .create(true)
        .append(true)
        .open(log)
        .at(log)?;
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(stderr)
        .process_group(0)
        .spawn()
        .running(format!("{cmd:?}"))?;
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = mpsc::channel();
    let log_path = log.to_path_buf();
    let reader = std::thread::spawn(move || {
        let mut lines = Vec::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            append(&log_path, &format!("{line}\n"));
            lines.push(line);
        }
        let _ = tx.send(());
        lines
    });
    let started = Instant::now();
    let mut stopped = false;
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            break status;
        }
        if !stopped && started.elapsed() > TEST_LIMIT {
            stopped = true;
            let _ = Command::new("kill")
                .args(["-KILL", &format!("-{}", child.id())])
                .status();
        }
        let _ = rx.recv_timeout(Duration::from_millis(200));
    };
    let mut lines = reader.join().unwrap_or_default();
    if stopped {
        append(log, &format!("{TIMED_OUT}\n"));
        lines.push(TIMED_OUT.to_string());
    }
    Ok((status.success() && !stopped, lines))
}

/// libtest's `test NAME ... ok` and `test NAME ... FAILED` lines, as
/// `PREFIX::NAME` (`NAME` with an empty prefix).
pub(super) fn parse_results(lines: &[String], prefix: &str) -> Results {
    let mut r = Results::default();
    for line in lines {
        let Some((name, result)) = line
            .strip_prefix("test ")
            .and_then(|rest| rest.rsplit_once(" ... "))
        else {
            continue;
        };
        let id = if prefix.is_empty() {
            name.to_string()
        } else {
            format!("{prefix}::{name}")
        };
        if result.starts_with("ok") {
            r.passed.push(id);
        } else if result.starts_with("FAILED") {
            r.failed.push(id);
        }
    }
    r
}

pub(super) fn append(log: &Path, text: &str) {
    if let Ok(mut f) = fs::OpenOptions::new().create(true).append(true).open(log) {
        let _ = f.write_all(text.as_bytes());
    }
}
