//! Test binaries side by side: `cargo test` compiles them (`--no-run`),
//! then they run `jobs` at a time, each binary's output printed whole when
//! it ends, under cargo's own `Running` line, so that a log reads as
//! cargo's would and [`TestTotals`] sums it the same way.
//!
//! An integration suite is one binary with a module per job (`t/tests/
//! suite.rs`): its tests are listed (`--list`) and each module runs as a
//! process of its own (`--exact` its tests), as a binary of its own did.
//! [`Modules`] picks which: a codebase's selection, by module name, and a
//! name the suite does not have is an error, not a module silently left
//! out.
//!
//! Why: the suite's binaries mostly wait (on nginx's resolver timers, on
//! held requests, on reloads), one after another, while the cores idle.
//! Every binary already runs its own tests two at a time (libtest), its
//! nginx prefixes carry its pid, and the ports its nginx listen on are
//! held against every other process (`t/src/nginx/ports.rs`), so two
//! binaries at once ask nothing new of them. The lab's timed claims and the
//! diagnosis floors measured under load still run alone ([`ALONE`]).

use std::collections::VecDeque;
use std::io::{BufReader, Read};
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::Mutex;

use super::{TestTotals, NO_TEST};
use crate::since::{needed_by, nginx_version, show, Version};
use crate::workspace::{version_dir, At, Result, DEFAULT};

/// The binaries that run with no other test binary beside them, first
/// (`--nginx all`'s builds at the idle scheduling class do: they take
/// only the CPU time the tests leave): `statistical`
/// holds the lab's latency claims, `diagnose_mixed` places 502s by their
/// timing under load, and `diagnose` checks the lab arms' timed claims
/// (no 502 outside a swap's window) before it scores the tool (beside
/// three other modules on a matrix version it failed both, in a
/// clean-clone run).
pub const ALONE: &[&str] = &["statistical", "diagnose_mixed", "diagnose"];

/// Binaries whose tests mostly wait, each test with its own nginx, DNS
/// server and backend (resolver timers, held requests), and how many of
/// their tests run at once: more than libtest's one per core. `protocols`
/// (36 tests, each under 10 s) takes 16 s this way on two cores, 27 s at
/// six at once, 57 s at two.
pub const WAITING: &[(&str, usize)] = &[("protocols", 12), ("dns_records", 7)];

/// The `--test-threads` a binary named `name` gets, unless `test_args`
/// already say.
fn test_threads(name: &str, test_args: &[String]) -> Option<String> {
    if test_args.iter().any(|a| a.starts_with("--test-threads")) {
        return None;
    }
    let (_, n) = WAITING.iter().find(|(w, _)| *w == name)?;
    Some(format!("--test-threads={n}"))
}

/// How many binaries run at once: `GENERATION_RETRY_TEST_JOBS` as `cmd`
/// sets it, else as ours is, else 2 (CI's machine has two cores; `1` runs
/// them one by one, as cargo does).
pub fn jobs(cmd: &Command) -> Result<usize> {
    let set = cmd
        .get_envs()
        .find(|(k, _)| *k == JOBS_ENV)
        .and_then(|(_, v)| v.map(|v| v.to_string_lossy().into_owned()));
    match set.or_else(|| std::env::var(JOBS_ENV).ok()) {
        Some(v) => v
            .parse()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("{JOBS_ENV}={v}: expected a count of 1 or more").into()),
        None => Ok(2),
    }
}

/// [`jobs`]'s variable.
pub const JOBS_ENV: &str = "GENERATION_RETRY_TEST_JOBS";

/// One compiled test binary, or one module of an integration suite.
#[derive(Debug, Clone, PartialEq)]
pub struct Binary {
    /// As cargo names it in `Running`: `tests/race.rs`, `unittests
    /// src/lib.rs`; a suite's module as `t/race` (its package's directory
    /// and the module).
    pub shown: String,
    /// The target's name (`suite`, or the package's for unit tests), then
    /// a suite's module's: `race`.
    pub name: String,
    pub exe: PathBuf,
    /// The package's directory, the binary's working directory under cargo.
    pub dir: PathBuf,
    /// An integration test target (`tests/`), whose modules run apart.
    pub suite: bool,
    /// A suite's module: the full names of its tests, run `--exact`.
    pub exact: Vec<String>,
    /// A suite's module: its tests of a protocol the nginx under test does
    /// not speak ([`crate::since`]), each reported as not run, why said.
    pub not_run: Vec<String>,
}

/// The test binaries of cargo's `--message-format=json` output.
pub fn binaries(json: &str) -> Result<Vec<Binary>> {
    let mut found = Vec::new();
    for line in json.lines().filter(|l| l.starts_with('{')) {
        let v: serde_json::Value =
            serde_json::from_str(line).map_err(|e| format!("cargo's json: {e}: {line}"))?;
        if v["reason"] != "compiler-artifact" || v["profile"]["test"] != true {
            continue;
        }
        let Some(exe) = v["executable"].as_str() else {
            continue;
        };
        let manifest = PathBuf::from(v["manifest_path"].as_str().unwrap_or_default());
        let dir = manifest.parent().map(PathBuf::from).unwrap_or_default();
        let src = PathBuf::from(v["target"]["src_path"].as_str().unwrap_or_default());
        let rel = src.strip_prefix(&dir).unwrap_or(&src).display().to_string();
        let kinds = &v["target"]["kind"];
        let is_test = kinds
            .as_array()
            .is_some_and(|k| k.iter().any(|k| k == "test"));
        found.push(Binary {
            shown: if is_test {
                rel
            } else {
                format!("unittests {rel}")
            },
            name: v["target"]["name"].as_str().unwrap_or_default().to_string(),
            exe: PathBuf::from(exe),
            dir,
            suite: is_test,
            exact: Vec::new(),
            not_run: Vec::new(),
        });
    }
    Ok(found)
}

/// Runs `cmd`, a `cargo test [ARGS] [-- TEST_ARGS]`, as cargo would, but
/// with its binaries (a suite's modules, of them those `modules` names)
/// [`jobs`] at a time ([`ALONE`] first, by themselves); libtest's result
/// lines are added to `total`. Every binary runs even when one fails
/// (`--no-fail-fast`); fails when one did, or none ran, or, `strict`,
/// when a module `modules` names ran none ([`Stages::strict`]).
pub fn run_modules(
    cmd: &Command,
    total: &mut TestTotals,
    modules: Modules,
    strict: bool,
) -> Result {
    run_tests_staged(
        cmd,
        total,
        Stages {
            modules,
            strict,
            ..Stages::default()
        },
    )
}

/// Which modules of the integration suites run: a codebase's selection.
#[derive(Clone, Copy, Debug, Default)]
pub enum Modules<'a> {
    #[default]
    All,
    Only(&'a [&'a str]),
    AllBut(&'a [&'a str]),
}

impl Modules<'_> {
    fn named(&self) -> &[&str] {
        match self {
            Modules::All => &[],
            Modules::Only(n) | Modules::AllBut(n) => n,
        }
    }

    fn runs(&self, module: &str) -> bool {
        match self {
            Modules::All => true,
            Modules::Only(n) => n.contains(&module),
            Modules::AllBut(n) => !n.contains(&module),
        }
    }
}

/// What [`run_tests_staged`] runs, and in what order: CI's run tests the
/// default version while another thread makes what some of its binaries
/// need.
#[derive(Default)]
pub struct Stages<'a> {
    /// The suites' modules that run.
    pub modules: Modules<'a>,
    /// Every module [`Modules::Only`] names must run a test: set where no
    /// filter of the caller's may narrow one to nothing, so that a test
    /// renamed out of a fork's filter (`stock_`, `patched_`) fails the run
    /// instead of leaving that module's proof silently out.
    pub strict: bool,
    /// Modules run only after every other, once `before_last` says their
    /// inputs are ready; an error there fails them unrun, with its reason.
    pub last: &'a [&'a str],
    pub before_last: Option<Box<dyn FnOnce() -> Result + 'a>>,
}

/// libtest's options that take a value, `--skip` aside.
const VALUED: &[&str] = &[
    "--test-threads",
    "--format",
    "--logfile",
    "--color",
    "-Z",
    "--shuffle-seed",
];

/// libtest's arguments split into those that pick tests (filters,
/// `--skip NAME`, `--exact`), which the listing of a suite applies, and
/// the rest, which every run of one of its modules gets.
fn split_test_args(args: &[String]) -> (Vec<String>, Vec<String>) {
    let (mut pick, mut rest) = (Vec::new(), Vec::new());
    let mut args = args.iter();
    while let Some(a) = args.next() {
        if a == "--skip" || VALUED.contains(&a.as_str()) {
            let to = if a == "--skip" { &mut pick } else { &mut rest };
            to.push(a.clone());
            to.extend(args.next().cloned());
        } else if a == "--exact" || a.starts_with("--skip=") || !a.starts_with('-') {
            pick.push(a.clone());
        } else {
            rest.push(a.clone());
        }
    }
    (pick, rest)
}

/// The tests of the suite `exe`, by the listing `pick` narrows to
/// (libtest's `--list --format terse`).
fn list(b: &Binary, from: &Command, pick: &[String]) -> Result<Vec<String>> {
    let mut c = Command::new(&b.exe);
    c.args(["--list", "--format", "terse"])
        .args(pick)
        .current_dir(&b.dir);
    copy_env(from, &mut c);
    let out = c
        .output()
        .map_err(|e| format!("cannot list {}: {e}", b.exe.display()))?;
    if !out.status.success() {
        return err!(
            "{} --list: {}: {}",
            b.exe.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_suffix(": test"))
        .map(String::from)
        .collect())
}

/// A suite's module of each test, its path's first segment; none for a
/// test written in the suite's root, which no selection could name.
fn module_of(test: &str) -> Option<&str> {
    test.split_once("::").map(|(m, _)| m)
}

/// The version of the nginx `cmd`'s tests run against (its
/// `GENERATION_RETRY_NGINX_DIR`, else ours, else the default version's
/// install), by its `nginx -V`; none where there is no nginx to ask (a
/// test needing one fails on its own there).
fn nginx_under_test(cmd: &Command) -> Option<Version> {
    let set = cmd
        .get_envs()
        .find(|(k, _)| *k == NGINX_DIR)
        .and_then(|(_, v)| v.map(PathBuf::from));
    let dir = set
        .or_else(|| std::env::var_os(NGINX_DIR).map(PathBuf::from))
        .unwrap_or_else(|| version_dir(DEFAULT));
    installed_version(&dir)
}

/// The version of the stock nginx installed in `dir` (`target/nginx/V`).
pub fn installed_version(dir: &std::path::Path) -> Option<Version> {
    let out = Command::new(dir.join("stock/sbin/nginx"))
        .arg("-V")
        .output()
        .ok()?;
    nginx_version(&String::from_utf8_lossy(&out.stderr))
}

const NGINX_DIR: &str = "GENERATION_RETRY_NGINX_DIR";

/// The jobs of `all`: a unit-test binary whole, a suite one per module
/// `modules` runs, with its tests `pick` selects (none: no job); a test
/// needing a newer nginx than `nginx` ([`crate::since`]) is not run.
fn jobs_of(
    all: Vec<Binary>,
    cmd: &Command,
    pick: &[String],
    modules: Modules,
    strict: bool,
    nginx: Option<Version>,
) -> Result<Vec<Binary>> {
    let mut jobs = Vec::new();
    for b in all {
        if !b.suite {
            jobs.push(b);
            continue;
        }
        let every = list(&b, cmd, &[])?;
        let missing: Vec<&&str> = modules
            .named()
            .iter()
            .filter(|m| !every.iter().any(|t| module_of(t) == Some(**m)))
            .collect();
        if !missing.is_empty() && matches!(modules, Modules::Only(_)) {
            return err!(
                "{}: no module {missing:?}: a selection names a module the suite does not have",
                b.exe.display()
            );
        }
        let picked = if pick.is_empty() {
            every
        } else {
            list(&b, cmd, pick)?
        };
        let package = b.dir.file_name().map(|d| d.to_string_lossy().into_owned());
        let mut by_module: Vec<(String, Vec<String>, Vec<String>)> = Vec::new();
        for t in picked {
            let Some(m) = module_of(&t) else {
                return err!(
                    "{}: test {t} is in the suite's root: write it in a module",
                    b.exe.display()
                );
            };
            if !modules.runs(m) {
                continue;
            }
            let i = match by_module.iter().position(|(n, _, _)| n == m) {
                Some(i) => i,
                None => {
                    by_module.push((m.to_string(), Vec::new(), Vec::new()));
                    by_module.len() - 1
                }
            };
            let needs = needed_by(&t);
            match nginx.filter(|v| *v < needs) {
                Some(v) => by_module[i].2.push(format!(
                    "test {t} ... not run: needs nginx {}, this is {}",
                    show(needs),
                    show(v)
                )),
                None => by_module[i].1.push(t),
            }
        }
        let unrun: Vec<&&str> = modules
            .named()
            .iter()
            .filter(|m| !by_module.iter().any(|(n, _, _)| n == **m))
            .collect();
        if strict && matches!(modules, Modules::Only(_)) && !unrun.is_empty() {
            return err!(
                "{}: modules {unrun:?} have no test the filters {pick:?} pick",
                b.exe.display()
            );
        }
        for (m, exact, not_run) in by_module {
            jobs.push(Binary {
                shown: format!("{}/{m}", package.as_deref().unwrap_or("?")),
                name: m,
                exact,
                not_run,
                ..b.clone()
            });
        }
    }
    Ok(jobs)
}

/// [`run_modules`] in [`Stages`].
pub fn run_tests_staged(cmd: &Command, total: &mut TestTotals, stages: Stages) -> Result {
    let jobs = jobs(cmd)?;
    let args: Vec<String> = cmd
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let (cargo_args, test_args) = match args.iter().position(|a| a == "--") {
        Some(i) => (&args[..i], &args[i + 1..]),
        None => (&args[..], &[][..]),
    };
    let (pick, flags) = split_test_args(test_args);
    let mut build = Command::new(cmd.get_program());
    build
        .args(cargo_args.iter().filter(|a| *a != "--no-fail-fast"))
        .args(["--no-run", "--message-format=json-render-diagnostics"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    copy_env(cmd, &mut build);
    if let Some(dir) = cmd.get_current_dir() {
        build.current_dir(dir);
    }
    let out = build.output().running(format!("{build:?}"))?;
    if !out.status.success() {
        return err!("tests did not build: {}", out.status);
    }
    let all = binaries(&String::from_utf8_lossy(&out.stdout))?;
    let nginx = nginx_under_test(cmd);
    let all = jobs_of(all, cmd, &pick, stages.modules, stages.strict, nginx)?;
    let (alone, rest): (Vec<Binary>, Vec<Binary>) = all
        .into_iter()
        .partition(|b| ALONE.contains(&b.name.as_str()));
    let (last, mut rest): (Vec<Binary>, Vec<Binary>) = rest
        .into_iter()
        .partition(|b| stages.last.contains(&b.name.as_str()));
    slowest_first(&mut rest);
    let before = total.passed;
    let failed = Mutex::new(Vec::new());
    let shared = Mutex::new(std::mem::take(total));
    let run_one = |b: &Binary| {
        // Never a bare `--exact`, which would run every test: a module
        // whose every test was left out runs nothing, and fails nothing.
        let ran = (!b.suite || !b.exact.is_empty()).then(|| run_binary(b, &flags, test_args, cmd));
        let text = ran.as_ref().map_or("", |(_, text)| text.as_str());
        // One binary's output at a time, whole.
        let mut t = shared.lock().unwrap_or_else(|e| e.into_inner());
        let head = format!("     Running {} ({})", b.shown, b.exe.display());
        println!("\n{head}");
        t.add(&head);
        for line in text.lines().chain(b.not_run.iter().map(String::as_str)) {
            println!("{line}");
            t.add(line);
        }
        t.ignored += b.not_run.len() as u64;
        if let Some(why) = ran
            .as_ref()
            .and_then(|(status, text)| verdict(b, status, text))
        {
            println!("xtask: {}: {why}", b.shown);
            failed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(format!("{} ({why})", b.shown));
        }
    };
    for b in &alone {
        run_one(b);
    }
    let pool = |bins: Vec<Binary>| {
        let queue = Mutex::new(VecDeque::from(bins));
        std::thread::scope(|s| {
            for _ in 0..jobs {
                s.spawn(|| loop {
                    let next = queue.lock().unwrap_or_else(|e| e.into_inner()).pop_front();
                    let Some(b) = next else { break };
                    run_one(&b);
                });
            }
        });
    };
    pool(rest);
    if !last.is_empty() {
        match stages.before_last.map_or(Ok(()), |ready| ready()) {
            Ok(()) => pool(last),
            Err(e) => {
                let mut f = failed.lock().unwrap_or_else(|e| e.into_inner());
                for b in &last {
                    eprintln!("xtask: error: {} not run: {e}", b.shown);
                    f.push(format!("{} (not run)", b.shown));
                }
            }
        }
    }
    *total = shared.into_inner().unwrap_or_else(|e| e.into_inner());
    remember(&total.binaries);
    let failed = failed.into_inner().unwrap_or_else(|e| e.into_inner());
    if !failed.is_empty() {
        return err!("tests failed: {}", failed.join(", "));
    }
    if total.passed == before {
        return Err(NO_TEST.into());
    }
    Ok(())
}

/// Why a job failed, if it did: it exited with a failure or was killed
/// (`status`), or, a suite's module, its output (`text`) holds no result
/// of libtest or one that ran none of its tests, which a job never passes
/// on the strength of another's.
fn verdict(b: &Binary, status: &Result<ExitStatus>, text: &str) -> Option<String> {
    match status {
        Err(e) => return Some(e.to_string()),
        Ok(s) if !s.success() => return Some(format!("exited with {s}")),
        Ok(_) if !b.suite => return None,
        Ok(_) => {}
    }
    let mut t = TestTotals::default();
    text.lines().for_each(|l| t.add(l));
    if !text.lines().any(|l| l.starts_with("test result: ")) {
        return Some("printed no test result".into());
    }
    (t.passed + t.failed + t.ignored == 0)
        .then(|| format!("ran none of its {} tests", b.exact.len()))
}

/// Runs one job: a unit-test binary with `test_args`, a suite's module
/// `--exact` its tests with `flags`; how it ended and what it wrote.
fn run_binary(
    b: &Binary,
    flags: &[String],
    test_args: &[String],
    cmd: &Command,
) -> (Result<ExitStatus>, String) {
    let mut c = Command::new(&b.exe);
    if b.suite {
        c.args(flags).arg("--exact").args(&b.exact);
    } else {
        c.args(test_args);
    }
    c.current_dir(&b.dir);
    c.args(test_threads(&b.name, test_args));
    copy_env(cmd, &mut c);
    run_captured(&mut c)
}

/// How long each binary took when it last ran in this process (`--nginx
/// all` runs the same binaries once per version).
static SEEN: Mutex<Vec<(String, f64)>> = Mutex::new(Vec::new());

fn remember(ran: &[(String, f64)]) {
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    for (what, secs) in ran {
        seen.retain(|(w, _)| w != what);
        seen.push((what.clone(), *secs));
    }
}

/// The longest binaries first, as they last ran (one never seen counts
/// as longest): two at a time, a long one started last would run alone.
fn slowest_first(bins: &mut [Binary]) {
    let seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    let took = |b: &Binary| {
        seen.iter()
            .find(|(w, _)| *w == b.shown)
            .map_or(f64::INFINITY, |(_, s)| *s)
    };
    bins.sort_by(|x, y| took(y).total_cmp(&took(x)));
}

/// The environment `from` sets (or removes) for its child, set on `to`.
fn copy_env(from: &Command, to: &mut Command) {
    for (k, v) in from.get_envs() {
        match v {
            Some(v) => to.env(k, v),
            None => to.env_remove(k),
        };
    }
}

/// Runs `c` with stdout and stderr in one pipe, in order; how it exited
/// and what it wrote.
fn run_captured(c: &mut Command) -> (Result<ExitStatus>, String) {
    let spawned = std::io::pipe().and_then(|(reader, writer)| {
        let err = writer.try_clone()?;
        let child = c.stdout(writer).stderr(err).stdin(Stdio::null()).spawn()?;
        Ok((reader, child))
    });
    let (reader, mut child) = match spawned {
        Ok(r) => r,
        Err(e) => return (Err(e).running(format!("{c:?}")), String::new()),
    };
    // The child holds the writing ends now; ours must go for the end.
    c.stdout(Stdio::null()).stderr(Stdio::null());
    let mut bytes = Vec::new();
    let mut reader = BufReader::new(reader);
    let _ = reader.read_to_end(&mut bytes);
    let status = child.wait().running(format!("{c:?}"));
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests;
