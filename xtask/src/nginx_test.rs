//! `cargo xtask nginx-test [--nginx VERSION|all] [--nginx-source PATH] [-- ARGS]`:
//! `build` and `external`'s builds, then the unit tests and the integration
//! suite, per version, with a closing table; `--nginx all` is CI's run.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Instant;

use crate::harness::parallel::{Modules, Stages};
use crate::harness::{
    matrix_env, matrix_tests, slowest, Step, TestTotals, NOT_IN_ANOTHER_WHOLE_SUITE,
    NOT_IN_THE_WHOLE_SUITE, NO_TEST,
};
use crate::versions::{Selection, Which, DEFAULT, MATRIX};
use crate::workspace::{cargo, Result};
use crate::{build, debian, external, source, suite, valgrind};

/// `cargo xtask nginx-test [--nginx VERSION|all] [--nginx-source PATH] [-- ARGS]`.
/// `extra`: the arguments after `--`, the test binaries'.
pub fn command(sel: &Selection, extra: &[String]) -> Result {
    let started = Instant::now();
    crate::harness::clock();
    let mut steps = Vec::new();
    match &sel.which {
        Which::One(v) => {
            let default = v == DEFAULT && sel.source.is_none();
            steps.extend(version_steps(
                v,
                sel.source.as_deref(),
                default,
                extra,
                None,
            ));
        }
        Which::All => steps.extend(all(extra)),
    }
    let mut total = TestTotals::default();
    // `tests at`: from when to when (seconds into the run) the tests ran.
    println!(
        "\nnginx-test: {:<24} {:>8} {:>8} {:>11} {:>7} {:>7}",
        "", "build s", "tests s", "tests at", "passed", "failed"
    );
    for s in &steps {
        println!(
            "nginx-test: {:<24} {:>8.0} {:>8.0} {:>11} {:>7} {:>7}{}",
            s.what,
            s.build_s,
            s.test_s,
            if s.test_s > 0.0 {
                format!("{:.0}-{:.0}", s.ended_at - s.test_s, s.ended_at)
            } else {
                "-".into()
            },
            s.totals.passed,
            s.totals.failed,
            s.verdict()
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
        return err!("failed: {}", failed.join(", "));
    }
    if total.passed == 0 {
        return Err("no test ran".into());
    }
    Ok(())
}

/// What the builder thread of [`all`] made, in its order.
enum Made {
    External(Result<std::path::PathBuf>, f64),
    Version(&'static str, Result<build::Built>, f64),
    Debian(Result<debian::Made>, f64),
}

/// CI's run (`--nginx all`). The default version is built first, then the
/// whole suite compiled and its tests run. Meanwhile the lint
/// gate (`cargo xtask check`), then one thread building everything else
/// in turn (the default version's external builds, every other version
/// of [`MATRIX`], the Debian package), run at the idle scheduling class
/// ([`idle_priority`]): they take only the CPU time the tests leave, so
/// no test, timed or not, waits on them, and the cores the tests leave
/// idle (they mostly wait on DNS timers and held requests) build.
/// Each version is tested once its build is done, and nginx's own tests
/// of one version run beside the tests of the next.
fn all(extra: &[String]) -> Vec<Step> {
    let mut steps = Vec::new();
    let check = std::thread::spawn(|| {
        idle_priority();
        let began = Instant::now();
        let mut step = Step::new("check (fmt, clippy, patches)".into());
        step.ok = crate::check::command()
            .map_err(|e| eprintln!("xtask: error: {e}"))
            .is_ok();
        step.build_s = began.elapsed().as_secs_f64();
        step.ended_at = crate::harness::clock();
        step
    });
    // The whole suite compiles (debug, `target/debug`) while the default
    // version builds (release, `target/release`: another cargo lock): the
    // tests' own compile then finds it done. Quiet: a failure is the
    // tests' compile's to report, as it would be without this.
    let precompile = std::thread::spawn(|| {
        let (mut cmd, _) = suite_command(true, None);
        let _ = cmd
            .arg("--no-run")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    });
    let started = Instant::now();
    let built = build::build_version(DEFAULT, None);
    let build_s = started.elapsed().as_secs_f64();
    let default_built = built.as_ref().ok().cloned();
    // From here on the default version's module is built beside every
    // other: the other versions' `directive.rs` must find one to load.
    // Not if that build failed: its step says so already.
    let default_module = crate::workspace::version_dir(DEFAULT)
        .join("modules")
        .join(build::MODULE_FILE);
    OTHER_MODULES.store(default_module.is_file(), Ordering::Relaxed);
    let (send, made) = mpsc::channel::<Made>();
    let for_external = default_built.clone();
    let builder = std::thread::spawn(move || {
        idle_priority();
        let began = Instant::now();
        let external = match &for_external {
            Some(b) => external::build(b),
            None => err!("nginx {DEFAULT} did not build"),
        };
        let _ = send.send(Made::External(external, began.elapsed().as_secs_f64()));
        for v in MATRIX.iter().copied().filter(|v| *v != DEFAULT) {
            let began = Instant::now();
            let built = build::build_version(v, None);
            let _ = send.send(Made::Version(v, built, began.elapsed().as_secs_f64()));
        }
        let began = Instant::now();
        let made = debian::package(&debian::Inputs::Pinned);
        let _ = send.send(Made::Debian(made, began.elapsed().as_secs_f64()));
    });

    // Its tests need the suite compiled; the builder started without it.
    let _ = precompile.join();
    let mut external_s = 0.0;
    let mut default_step = {
        let (made, external_s) = (&made, &mut external_s);
        let stages = Stages {
            last: &["external"],
            before_last: Some(Box::new(move || match made.recv() {
                Ok(Made::External(r, secs)) => {
                    *external_s = secs;
                    r.map(|_| ())
                }
                _ => Err("the external builds were not made".into()),
            })),
            // test_step sets the modules.
            ..Stages::default()
        };
        test_step(DEFAULT, built, build_s, true, extra, None, Some(stages))
    };
    default_step.build_s += external_s;
    steps.push(default_step);

    // nginx's own tests, one version at a time, beside the next version's.
    let mut suite: Option<std::thread::JoinHandle<Option<Step>>> = None;
    let mut next_suite = |steps: &mut Vec<Step>, tested: Option<build::Built>| {
        if let Some(s) = suite.take() {
            steps.extend(
                s.join()
                    .unwrap_or_else(|_| Some(Step::new("nginx-tests (panicked)".into()))),
            );
        }
        let extra = extra.to_vec();
        suite = tested.map(|t| std::thread::spawn(move || suite::step_for(Some(&t), &extra)));
    };
    next_suite(&mut steps, default_built);
    loop {
        match made.recv() {
            Ok(Made::External(..)) => {}
            Ok(Made::Version(v, built, build_s)) => {
                let tested = built.as_ref().ok().cloned();
                steps.push(test_step(
                    v,
                    built,
                    build_s,
                    false,
                    extra,
                    Some(matrix_tests(v)),
                    None,
                ));
                next_suite(&mut steps, tested);
            }
            Ok(Made::Debian(made, build_s)) => {
                steps.push(debian::test_made(
                    &debian::Inputs::Pinned,
                    made,
                    build_s,
                    extra,
                ));
                break;
            }
            Err(_) => {
                steps.push(Step::new("builds (the builder thread ended early)".into()));
                break;
            }
        }
    }
    next_suite(&mut steps, None);
    let _ = builder.join();
    let check = check
        .join()
        .unwrap_or_else(|_| Step::new("check (panicked)".into()));
    steps.insert(0, check);
    steps
}

/// Moves the calling thread, and every process and thread it starts from
/// now on, to Linux's idle scheduling class (`SCHED_IDLE`, by `chrt`): it
/// runs only on CPU time no other task wants. Said, not fatal, where that
/// cannot be done.
fn idle_priority() {
    let tid = std::fs::read_link("/proc/thread-self")
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()));
    let done = tid.is_some_and(|tid| {
        std::process::Command::new("chrt")
            .args(["--idle", "--pid", "0", &tid])
            .status()
            .is_ok_and(|s| s.success())
    });
    if !done {
        eprintln!(
            "xtask: builds run at the normal priority (chrt --idle failed): the tests share \
             the CPU with them"
        );
    }
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
    let mut steps = vec![test_step(
        version, built, build_s, default, extra, only, None,
    )];
    steps.extend(suite::step_for(tested.as_ref(), extra));
    steps
}

/// The `cargo test` of a version's tests, and the modules of the suites
/// it runs: the whole suite with the unit tests (`only` = None), or only
/// the modules named.
fn suite_command<'a>(default: bool, only: Option<&'a [&'a str]>) -> (Command, Modules<'a>) {
    let mut cmd = cargo();
    // Every test binary and module runs even when one fails: the table shows all.
    cmd.args(["test", "--no-fail-fast"]);
    let modules = match only {
        Some(tests) => {
            cmd.args(["-p", "generation-retry-t", "--test", "suite"]);
            matrix_env(&mut cmd);
            Modules::Only(tests)
        }
        None => {
            // With the diagnosis tool's own tests (parsers, rules, files,
            // fuzzing, memory): they need no nginx, and run once.
            for p in [
                "generation-retry-core",
                "generation-retry-t",
                "xtask",
                "generation-retry-diagnose",
            ] {
                cmd.args(["-p", p]);
            }
            Modules::AllBut(if default {
                NOT_IN_THE_WHOLE_SUITE
            } else {
                NOT_IN_ANOTHER_WHOLE_SUITE
            })
        }
    };
    (cmd, modules)
}

/// Set for the matrix's tests of `--nginx all`, which run after the
/// default version's module was built beside theirs: the test that loads
/// another version's module fails, instead of skipping, if it finds none.
pub const OTHER_MODULES_ENV: &str = "GENERATION_RETRY_OTHER_MODULES_BUILT";

/// Whether [`OTHER_MODULES_ENV`] is set for the tests of every version but
/// the default: `all` built the default's module first.
static OTHER_MODULES: AtomicBool = AtomicBool::new(false);

/// The tests of a version [`version_step`] (or the matrix) built; the
/// default version's external builds first, but with `staged`, CI's
/// default version: its external builds are another thread's (the
/// `external` binary runs last, once `before_last` has them).
fn test_step(
    version: &str,
    built: Result<build::Built>,
    build_s: f64,
    default: bool,
    extra: &[String],
    only: Option<&[&str]>,
    staged: Option<Stages>,
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
    if default && staged.is_none() {
        if let Err(e) = external::build(&built) {
            eprintln!("xtask: error: {e}");
            return step;
        }
    }
    step.build_s = build_s + started.elapsed().as_secs_f64();
    let started = Instant::now();
    let (mut cmd, modules) = suite_command(default, only);
    cmd.env("GENERATION_RETRY_NGINX_DIR", &built.install);
    if !default && OTHER_MODULES.load(Ordering::Relaxed) {
        cmd.env(OTHER_MODULES_ENV, "1");
    }
    let mut test_args: Vec<String> = extra.iter().skip_while(|a| *a == "--").cloned().collect();
    // Every module a selection names must run a test, unless a filter
    // (the caller's, or the skip of an absent patched nginx) narrows it.
    let mut strict = extra.is_empty();
    if !built.install.join("patched/sbin/nginx").is_file() {
        strict = false;
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
    let mut stages = staged.unwrap_or_default();
    stages.modules = modules;
    stages.strict = strict;
    let result = crate::harness::parallel::run_tests_staged(&cmd, &mut step.totals, stages);
    // A filter may well match nothing in one version's binaries.
    let result = match result {
        Err(e) if e.to_string() == NO_TEST && !extra.is_empty() => Ok(()),
        r => r,
    };
    step.ok = result.is_ok();
    if let Err(e) = result {
        eprintln!("xtask: error: nginx {}: {e}", built.version);
    }
    if default && extra.is_empty() && only.is_none() {
        // Memory safety: a few race scenarios with nginx under memcheck
        // (the full set is `cargo xtask valgrind`).
        if let Err(e) = valgrind::ci_subset(&built) {
            eprintln!("xtask: error: memcheck: {e}");
            step.ok = false;
        }
    }
    step.tests_ended(started);
    step
}
