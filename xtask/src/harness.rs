//! Running the test harness crate (`t/`, `generation-retry-t`): its test
//! binaries, run two at a time with libtest's totals read back (`parallel`), its
//! binaries under `cargo run`, and one line of a closing table per step.

use std::path::Path;
use std::process::Command;

use crate::versions::{self, Runs};
use crate::workspace::{cargo, root, target_dir, At, Result};

pub mod parallel;

/// The suite's modules every version of the matrix runs besides the default
/// (which runs them all): the http and stream races (stock fails, `on`
/// rescues, `off` counts, patched rescues), the balancer rows, the
/// directive matrix, the status endpoint, the mid-selection race, the
/// diagnosis on labelled logs and the operator's install. Reloads and
/// history (the module's own bookkeeping across cycles, no per-version
/// nginx code) run on the default version, and on any version with
/// `cargo xtask nginx-test --nginx VERSION`: CI's budget.
pub const MATRIX_TESTS: &[&str] = &[
    "race",
    "module_race",
    "stream",
    "patched",
    // The same race through FastCGI, uwsgi, SCGI, memcached and gRPC.
    "protocols",
    // And under SRV records (primary and backup targets), AAAA records
    // and a changing set of addresses.
    "dns_records",
    "balancers",
    "directive",
    "module_behaviour",
    "mid_selection",
    // What a re-snapshot leaves as nginx has it: tries, max_fails, names.
    "soundness",
    "diagnose",
    // A request to an empty peer list is refused, never a crash.
    "empty_list",
    // TLS session callbacks live in ngx_peer_connection_t, which changed
    // in 1.29.6 and 1.31.3; the zone, the scraped counters and a real
    // Prometheus over each version's shared memory.
    "https",
    "zone",
    "scrapes",
    "prometheus",
    // Last, as a stable release leaves them out (MATRIX_TESTS_NO_INSTALL):
    // the layout gate fails a build calling a misplaced bitfield (1.29.3+),
    // and the operator's install from a clean copy: crates.io for the
    // default, the loopback "nginx.org" for the newest release.
    "layout",
    "install",
];

/// Tengine's: the races, http (through every protocol and under SRV and
/// AAAA records) and stream (stock
/// fails, `on` rescues, `off` counts, patched rescues), the directive matrix, and the empty list, where stock Tengine
/// 3.2.0's worker crashes (proven, so that Tengine's fix is noticed) and
/// the patched one refuses. The rest of [`MATRIX_TESTS`] sends requests
/// into empty lists on purpose (NXDOMAIN rows), which kills stock
/// Tengine's worker with or without the module: README, "Tengine and
/// Angie". (Readiness probes wait for nginx to be told an address there.)
pub const TENGINE_TESTS: &[&str] = &[
    "race",
    "module_race",
    "stream",
    "patched",
    "protocols",
    "dns_records",
    "directive",
    "empty_list",
];

/// Angie's: no module builds for it (`angie.rs` checks why), so the
/// races of stock Angie and of the patched one, http (through every
/// protocol, under SRV and AAAA records) and stream (the module's tests are skipped by name, said out
/// loud).
pub const ANGIE_TESTS: &[&str] = &[
    "race",
    "patched",
    "stream",
    "protocols",
    "dns_records",
    "angie",
];

/// Modules the whole suite leaves out: `angie` tests Angie itself (it
/// fails on any other nginx), so it runs only where a selection names it
/// ([`ANGIE_TESTS`]).
pub const NOT_IN_THE_WHOLE_SUITE: &[&str] = &["angie"];

/// [`NOT_IN_THE_WHOLE_SUITE`] and, on any version but the default,
/// `external`, which tests the default version's external builds.
pub const NOT_IN_ANOTHER_WHOLE_SUITE: &[&str] = &["angie", "external"];

/// [`MATRIX_TESTS`] but the layout gate and the operator's install, for a
/// stable release ([`Runs::Stable`]): the newest proves both on the same
/// ground (the layout of 1.29.3+, the loopback nginx.org's signed tarball). Each compiles the module
/// again: CI's budget.
const MATRIX_TESTS_NO_INSTALL: &[&str] = match MATRIX_TESTS.split_last() {
    Some((_install, rest)) => match rest.split_last() {
        Some((_layout, rest)) => rest,
        None => &[],
    },
    None => &[],
};

/// The versions whose nginx code the module meets is a twin's in the
/// matrix: 1.28.3 (1.28.0's line) and nginx's development branch (1.31.4
/// and the days after it). They run what tests their own build: the http
/// and stream races (stock, `on`, `off`, patched), the directive matrix
/// and the empty list; the balancer rows, the behaviour tests, `max=N`
/// under a moving list and the diagnosis run on the twin, through the same
/// nginx code. The same binaries as Tengine's, for another reason. CI's
/// budget: about 50 s each.
const TWIN_TESTS: &[&str] = TENGINE_TESTS;

/// The suite's modules the matrix runs on `version`, as its row of
/// [`versions::CODEBASES`] says.
pub fn matrix_tests(version: &str) -> &'static [&'static str] {
    match versions::runs(version) {
        Runs::Whole | Runs::Newest => MATRIX_TESTS,
        Runs::Stable => MATRIX_TESTS_NO_INSTALL,
        Runs::Twin => TWIN_TESTS,
        Runs::Tengine => TENGINE_TESTS,
        Runs::Angie => ANGIE_TESTS,
    }
}

/// `cargo test --no-fail-fast -p generation-retry-t --test suite`: the
/// integration suite, every module run even when one fails.
pub fn suite_test() -> Command {
    let mut cmd = cargo();
    cmd.args([
        "test",
        "--no-fail-fast",
        "-p",
        "generation-retry-t",
        "--test",
        "suite",
    ]);
    cmd
}

/// The matrix's shorter runs: 5 scripted races per test instead of 10 or
/// 20 (the default version runs them in full), and a 20 s reload soak
/// instead of 30 s should a version's list ever hold `reload.rs` (none does
/// today: it tests the module's own bookkeeping). And four modules at once
/// unless `GENERATION_RETRY_TEST_JOBS` says otherwise: the matrix's modules
/// wait on resolver timers and held requests (1.30.4's took 114 s on a CI
/// machine and on one 1.7 times faster alike), and its timed claims run
/// on the default version.
pub fn matrix_env(cmd: &mut Command) {
    cmd.env("GENERATION_RETRY_REPEATS", "5")
        .env("GENERATION_RETRY_SOAK_SECONDS", "20");
    if std::env::var_os(parallel::JOBS_ENV).is_none() {
        cmd.env(parallel::JOBS_ENV, "4");
    }
}

/// The `n` slowest test binaries or modules of `totals`, for the closing table:
/// `t/statistical 75 s, t/dist 51 s`.
pub fn slowest(totals: &TestTotals, n: usize) -> String {
    let mut b: Vec<&(String, f64)> = totals.binaries.iter().collect();
    b.sort_by(|x, y| y.1.total_cmp(&x.1));
    b.iter()
        .take(n)
        .map(|(what, s)| format!("{what} {s:.0} s"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Seconds since this process first asked: `nginx-test` asks at its start,
/// so each step's tests are placed on one clock (the closing table's
/// `from`/`to`: where a run's critical path went).
pub fn clock() -> f64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_secs_f64()
}

/// One line of the closing table: what ran, and how long it took.
pub struct Step {
    pub what: String,
    pub build_s: f64,
    pub test_s: f64,
    /// When its tests ended, on [`clock`].
    pub ended_at: f64,
    pub totals: TestTotals,
    pub ok: bool,
    /// Why the step ran nothing, when that is not a failure (a user's
    /// clone without nginx-tests): said in the table, never shown as ok.
    pub not_run: Option<String>,
}

impl Step {
    /// What the closing table says after the step's figures: nothing for
    /// a step that passed, why for one that ran nothing, else `FAILED`.
    pub fn verdict(&self) -> String {
        match (&self.not_run, self.ok) {
            (Some(why), _) => format!("  NOT RUN: {why}"),
            (None, true) => String::new(),
            (None, false) => "  FAILED".into(),
        }
    }

    /// A step that has not built or run anything yet (and so is not ok).
    pub fn new(what: String) -> Step {
        Step {
            what,
            build_s: 0.0,
            test_s: 0.0,
            ended_at: 0.0,
            totals: TestTotals::default(),
            ok: false,
            not_run: None,
        }
    }

    /// Its tests, begun at `started`, have ended.
    pub fn tests_ended(&mut self, started: std::time::Instant) {
        self.test_s = started.elapsed().as_secs_f64();
        self.ended_at = clock();
    }
}

/// The modules of the integration suite, `t/tests/suite.rs`'s `mod NAME;`
/// lines: `t/tests/NAME.rs` (its submodules, if any, in `t/tests/NAME/`),
/// each once a test binary of its own.
pub fn suite_modules() -> Result<Vec<String>> {
    let path = root().join("t/tests/suite.rs");
    let text = std::fs::read_to_string(&path).at(&path)?;
    Ok(text
        .lines()
        .filter_map(|l| l.strip_prefix("mod ")?.strip_suffix(';'))
        .map(String::from)
        .collect())
}

/// `cargo run` of a harness binary in release, against the nginx builds in
/// `install_dir`; its arguments follow.
pub fn harness_command(bin: &str, install_dir: &Path) -> Command {
    let mut cmd = cargo();
    cmd.args([
        "run",
        "--quiet",
        "--release",
        "-p",
        "generation-retry-t",
        "--bin",
        bin,
        "--",
    ])
    .env("GENERATION_RETRY_NGINX_DIR", install_dir)
    .env("GENERATION_RETRY_TARGET_DIR", target_dir());
    cmd
}

/// [`parallel::run_modules`]'s error when the tests built but none ran.
pub const NO_TEST: &str = "no test ran";

#[derive(Default, Debug, PartialEq)]
pub struct TestTotals {
    pub passed: u64,
    pub failed: u64,
    pub ignored: u64,
    /// Each test binary that ran, by cargo's `Running` line, and libtest's
    /// `finished in` seconds: where a run's time goes.
    pub binaries: Vec<(String, f64)>,
    running: Option<String>,
}

impl TestTotals {
    /// Adds libtest's `test result: ok. 6 passed; 0 failed; 1 ignored; ...`.
    pub fn add(&mut self, line: &str) {
        // cargo's own lines, indented: `     Running tests/zone.rs
        // (target/debug/deps/zone-...)`, `   Doc-tests name`.
        let cargo_says = |verb: &str| {
            line.strip_prefix(' ')
                .map(str::trim_start)
                .and_then(|l| l.strip_prefix(verb))
        };
        if let Some(what) = cargo_says("Running ").or_else(|| cargo_says("Doc-tests ")) {
            let what = what.split(" (").next().unwrap_or(what);
            self.running = Some(what.to_string());
            return;
        }
        let Some(rest) = line.strip_prefix("test result: ") else {
            return;
        };
        if let Some(secs) = rest
            .rsplit_once("finished in ")
            .and_then(|(_, s)| s.trim_end_matches('s').parse::<f64>().ok())
        {
            let what = self.running.take().unwrap_or_else(|| "?".into());
            self.binaries.push((what, secs));
        }
        for part in rest.split(['.', ';']) {
            let mut words = part.split_whitespace();
            let (Some(n), Some(what)) = (words.next(), words.next()) else {
                continue;
            };
            let Ok(n) = n.parse::<u64>() else { continue };
            match what {
                "passed" => self.passed += n,
                "failed" => self.failed += n,
                "ignored" => self.ignored += n,
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{
        matrix_tests, Step, TestTotals, ANGIE_TESTS, MATRIX_TESTS, MATRIX_TESTS_NO_INSTALL,
        TENGINE_TESTS,
    };
    use crate::versions::{Runs, CODEBASES, NEWEST};

    /// A step that ran nothing is said as not run, never as passed
    /// (issue 48, item 8: nginx-tests without a suite).
    #[test]
    fn a_step_that_ran_nothing_says_so() {
        let mut s = Step::new("nginx-tests 1.28.0".into());
        assert_eq!(s.verdict(), "  FAILED");
        s.ok = true;
        assert_eq!(s.verdict(), "");
        s.not_run = Some("no nginx-tests".into());
        assert_eq!(s.verdict(), "  NOT RUN: no nginx-tests");
    }

    #[test]
    fn the_install_is_left_out_only_where_another_version_proves_its_path() {
        let without: Vec<&&str> = MATRIX_TESTS
            .iter()
            .filter(|t| !["install", "layout"].contains(*t))
            .collect();
        let no_install: Vec<&&str> = MATRIX_TESTS_NO_INSTALL.iter().collect();
        assert_eq!(without, no_install);
        let of = |runs: Runs| CODEBASES.iter().filter(move |c| c.runs == runs);
        assert!(matrix_tests(NEWEST).contains(&"install"));
        assert!(matrix_tests(NEWEST).contains(&"layout"));
        assert!(of(Runs::Stable).count() > 0);
        for c in of(Runs::Stable) {
            assert_eq!(matrix_tests(c.name), MATRIX_TESTS_NO_INSTALL);
        }
        assert!(of(Runs::Twin).count() > 0);
        for c in of(Runs::Twin) {
            let tests = matrix_tests(c.name);
            assert!(!tests.contains(&"install"), "{}", c.name);
            assert!(
                tests.iter().all(|t| MATRIX_TESTS.contains(t)),
                "{}: only matrix tests",
                c.name
            );
        }
    }

    #[test]
    fn every_module_the_selections_name_is_in_the_suite_and_every_file_is_a_module() {
        let found = super::suite_modules().unwrap();
        for t in MATRIX_TESTS.iter().chain(TENGINE_TESTS).chain(ANGIE_TESTS) {
            assert!(found.iter().any(|f| f == t), "{t} not in {found:?}");
        }
        // `t/tests/race.rs` and `t/tests/prometheus.rs` (beside its
        // directory) alike: a file the suite does not declare would
        // compile nowhere, unseen.
        let dir = crate::workspace::root().join("t/tests");
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| {
                let name = e.ok()?.file_name().to_str()?.to_string();
                Some(name.strip_suffix(".rs").unwrap_or(&name).to_string())
            })
            .filter(|n| n != "suite")
            .collect();
        files.sort();
        files.dedup();
        assert_eq!(files, found);
    }

    #[test]
    fn a_module_the_whole_suite_leaves_out_runs_where_a_selection_names_it() {
        for m in super::NOT_IN_THE_WHOLE_SUITE {
            assert!(super::NOT_IN_ANOTHER_WHOLE_SUITE.contains(m), "{m}");
            assert!(
                crate::versions::CODEBASES
                    .iter()
                    .any(|c| matrix_tests(c.name).contains(m)),
                "{m} runs nowhere"
            );
        }
    }

    #[test]
    fn sums_libtest_result_lines() {
        let mut t = TestTotals::default();
        t.add("Running is what a test may print too");
        t.add("     Running tests/zone.rs (target/debug/deps/zone-184bfea183b3b006)");
        t.add("test result: ok. 6 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 12.50s");
        t.add("test result: FAILED. 1 passed; 2 failed; 0 ignored; 0 measured; 0 filtered out");
        t.add("running 3 tests");
        assert_eq!((t.passed, t.failed, t.ignored), (7, 2, 1));
        assert_eq!(t.binaries, vec![("tests/zone.rs".to_string(), 12.5)]);
    }
}
