//! `cargo xtask nginx-test [--nginx VERSION|all] [--nginx-source PATH] [-- ARGS]`:
//! `build` and `external`'s builds, then the unit tests and the integration
//! suite, per version, with a closing table; `--nginx all` is CI's run.

use std::path::Path;
use std::time::Instant;

use crate::harness::{matrix_env, matrix_tests, slowest, test_binaries, Step, TestTotals, NO_TEST};
use crate::versions::{self, Which, DEFAULT, MATRIX};
use crate::workspace::{cargo, Result};
use crate::{build, debian, external, source, suite, valgrind};

/// `cargo xtask nginx-test [--nginx VERSION|all] [--nginx-source PATH] [-- ARGS]`.
pub fn command(args: &[String]) -> Result {
    let (sel, extra) = versions::parse(args)?;
    let started = Instant::now();
    let mut steps = Vec::new();
    match &sel.which {
        Which::One(v) => {
            let default = v == DEFAULT && sel.source.is_none();
            steps.extend(version_steps(
                v,
                sel.source.as_deref(),
                default,
                &extra,
                None,
            ));
        }
        Which::All => {
            // The default version first, alone: the lab's claims are timed
            // on a machine that does nothing else. Its nginx-tests come
            // after the first matrix build has started (below), as every
            // matrix version's nginx-tests run beside the next build: the
            // build would otherwise wait for them.
            let started = Instant::now();
            let built = build::build_version(DEFAULT, None);
            let default_built = built.as_ref().ok().cloned();
            steps.push(test_step(
                DEFAULT,
                built,
                started.elapsed().as_secs_f64(),
                true,
                &extra,
                None,
            ));
            // From here on the default version's module is built beside
            // every other: `directive.rs` must find one to load (set before
            // the build threads start, as every test process inherits it).
            // Not if that build failed: its step says so already.
            if crate::workspace::version_dir(DEFAULT)
                .join("modules")
                .join(build::MODULE_FILE)
                .is_file()
            {
                std::env::set_var(OTHER_MODULES_ENV, "1");
            }
            // Then the matrix, each version built while the one before is
            // tested: builds keep the cores busy, the race tests mostly
            // wait on DNS timers and held requests.
            let matrix: Vec<&'static str> =
                MATRIX.iter().copied().filter(|v| *v != DEFAULT).collect();
            let spawn = |v: &'static str| {
                std::thread::spawn(move || {
                    let started = Instant::now();
                    (
                        build::build_version(v, None),
                        started.elapsed().as_secs_f64(),
                    )
                })
            };
            let mut next = matrix.first().map(|v| spawn(v));
            steps.extend(suite::step_for(default_built.as_ref(), &extra));
            let mut debian = None;
            for (i, v) in matrix.iter().enumerate() {
                let (built, build_s) = next
                    .take()
                    .expect("a build per version")
                    .join()
                    .unwrap_or_else(|_| (Err(format!("building nginx {v} panicked")), 0.0));
                next = matrix.get(i + 1).map(|v| spawn(v));
                if next.is_none() {
                    // The last version's tests overlap the Debian package.
                    debian = Some(std::thread::spawn(|| {
                        let started = Instant::now();
                        let made = debian::package(&debian::Inputs::Pinned);
                        (made, started.elapsed().as_secs_f64())
                    }));
                }
                let tested = built.as_ref().ok().cloned();
                steps.push(test_step(
                    v,
                    built,
                    build_s,
                    false,
                    &extra,
                    Some(matrix_tests(v)),
                ));
                steps.extend(suite::step_for(tested.as_ref(), &extra));
            }
            let (made, build_s) = match debian.map(|t| t.join()) {
                Some(Ok(done)) => done,
                Some(Err(_)) => (Err("packaging for Debian panicked".to_string()), 0.0),
                None => {
                    let started = Instant::now();
                    let made = debian::package(&debian::Inputs::Pinned);
                    (made, started.elapsed().as_secs_f64())
                }
            };
            steps.push(debian::test_made(
                &debian::Inputs::Pinned,
                made,
                build_s,
                &extra,
            ));
        }
    }
    let mut total = TestTotals::default();
    println!(
        "\nnginx-test: {:<24} {:>8} {:>8} {:>7} {:>7}",
        "", "build s", "tests s", "passed", "failed"
    );
    for s in &steps {
        println!(
            "nginx-test: {:<24} {:>8.0} {:>8.0} {:>7} {:>7}{}",
            s.what,
            s.build_s,
            s.test_s,
            s.totals.passed,
            s.totals.failed,
            if s.ok { "" } else { "  FAILED" }
        );
        if !s.totals.binaries.is_empty() {
            println!("nginx-test:     slowest: {}", slowest(&s.totals, 6));
        }
        total.passed += s.totals.passed;
        total.failed += s.totals.failed;
        total.ignored += s.totals.ignored;
    }
    println!(
        "nginx-test: all in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    println!(
        "nginx-test: {} passed, {} failed, {} ignored",
        total.passed, total.failed, total.ignored
    );
    let failed: Vec<&str> = steps
        .iter()
        .filter(|s| !s.ok)
        .map(|s| s.what.as_str())
        .collect();
    if !failed.is_empty() {
        return Err(format!("failed: {}", failed.join(", ")));
    }
    if total.passed == 0 {
        return Err("no test ran".into());
    }
    Ok(())
}

/// Builds one version and runs its tests: the whole suite with the unit
/// tests (`only` = None), or only the binaries named. The default version
/// also gets `external`'s builds and, without filters, the memcheck subset.
/// Then nginx's own tests on it.
fn version_steps(
    version: &str,
    source: Option<&Path>,
    default: bool,
    extra: &[String],
    only: Option<&[&str]>,
) -> Vec<Step> {
    let started = Instant::now();
    let built = build::build_version(version, source);
    let build_s = started.elapsed().as_secs_f64();
    let tested = built.as_ref().ok().cloned();
    // A fork runs what it can (harness::TENGINE_TESTS, ANGIE_TESTS), as
    // the built tree says (`--nginx-source` names it too); every other
    // nginx the whole suite.
    let only = only.or_else(|| {
        tested
            .as_ref()
            .filter(|b| source::is_fork(&b.version))
            .map(|b| matrix_tests(&b.version))
    });
    let mut steps = vec![test_step(version, built, build_s, default, extra, only)];
    steps.extend(suite::step_for(tested.as_ref(), extra));
    steps
}

/// Set for the matrix's tests of `--nginx all`, which run after the
/// default version's module was built beside theirs: the test that loads
/// another version's module fails, instead of skipping, if it finds none.
pub const OTHER_MODULES_ENV: &str = "GENERATION_RETRY_OTHER_MODULES_BUILT";

/// The tests of a version [`version_step`] (or the matrix) built; the
/// default version's external builds first.
fn test_step(
    version: &str,
    built: Result<build::Built>,
    build_s: f64,
    default: bool,
    extra: &[String],
    only: Option<&[&str]>,
) -> Step {
    let mut step = Step::new(format!(
        "nginx {}",
        if version.is_empty() {
            "(source)"
        } else {
            version
        }
    ));
    let built = match built {
        Ok(b) => b,
        Err(e) => {
            eprintln!("xtask: error: {e}");
            return step;
        }
    };
    step.what = format!("nginx {}", built.version);
    let started = Instant::now();
    if default {
        if let Err(e) = external::build(&built) {
            eprintln!("xtask: error: {e}");
            return step;
        }
    }
    step.build_s = build_s + started.elapsed().as_secs_f64();
    let started = Instant::now();
    let mut cmd = cargo();
    // Every test binary runs even when one fails: the table shows all.
    cmd.args(["test", "--no-fail-fast"]);
    match only {
        Some(tests) => {
            cmd.args(["-p", "generation-retry-t"]);
            for t in tests {
                cmd.args(["--test", t]);
            }
            matrix_env(&mut cmd);
        }
        None => {
            // With the diagnosis tool's own tests (parsers, rules, files,
            // fuzzing, memory): they need no nginx, and run once.
            cmd.args([
                "-p",
                "generation-retry-core",
                "-p",
                "generation-retry-t",
                "-p",
                "xtask",
                "-p",
                "generation-retry-diagnose",
            ]);
            if !default {
                // Every test binary but `external`, which tests the default
                // version's external builds.
                cmd.args(["--lib", "--bins"]);
                match test_binaries() {
                    Ok(names) => {
                        for t in names.iter().filter(|t| *t != "external") {
                            cmd.args(["--test", t]);
                        }
                    }
                    Err(e) => {
                        eprintln!("xtask: error: {e}");
                        return step;
                    }
                }
            }
        }
    }
    cmd.env("GENERATION_RETRY_NGINX_DIR", &built.install);
    let mut test_args: Vec<String> = extra.iter().skip_while(|a| *a == "--").cloned().collect();
    if !built.install.join("patched/sbin/nginx").is_file() {
        // A version without nginx-src-patches has no patched nginx.
        eprintln!(
            "xtask: nginx {}: no patched nginx, its tests left out",
            built.version
        );
        test_args.extend(["--skip".to_string(), "patched".to_string()]);
    }
    if !built
        .install
        .join("modules")
        .join(build::MODULE_FILE)
        .is_file()
    {
        // Angie: no module, so only the tests of stock and patched nginx
        // (by name: `stock_*`, `patched_*`, and angie.rs's), none with the
        // module in them (`module_*`). A filter of the caller's is kept
        // as it is (filters widen each other), only narrowed.
        eprintln!(
            "xtask: nginx {}: no module: only the stock_*, patched_* and angie tests run",
            built.version
        );
        if extra.is_empty() {
            test_args.extend(["stock_", "patched_", "angie"].map(String::from));
        }
        test_args.extend(["--skip", "module_"].map(String::from));
    }
    if !test_args.is_empty() {
        cmd.arg("--").args(test_args);
    }
    println!("xtask: nginx {}: tests", built.version);
    let result = crate::harness::parallel::run_tests(&cmd, &mut step.totals);
    // A filter may well match nothing in one version's binaries.
    let result = match result {
        Err(e) if e == NO_TEST && !extra.is_empty() => Ok(()),
        r => r,
    };
    step.ok = result.is_ok();
    if let Err(e) = result {
        eprintln!("xtask: error: nginx {}: {e}", built.version);
    }
    if default && extra.is_empty() && only.is_none() {
        // Memory safety: a few race scenarios with nginx under memcheck
        // (the full set is `cargo xtask valgrind`).
        if let Err(e) = valgrind::ci_subset(&built.install) {
            eprintln!("xtask: error: memcheck: {e}");
            step.ok = false;
        }
    }
    step.test_s = started.elapsed().as_secs_f64();
    step
}
