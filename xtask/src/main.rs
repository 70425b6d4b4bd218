//! `cargo xtask <command>`: the project's build and test entry points, in
//! plain Rust (the matklad xtask pattern), so there is no shell to learn.
//!
//! - `build`: nginx and the module, installed at fixed paths under
//!   `target/nginx/VERSION/`, for 1.28.0 or any version of the matrix
//!   (`--nginx VERSION|all`, `--nginx-source PATH`).
//! - `nginx-test`: `build` and `external`'s builds, then the unit tests and
//!   the integration suite; `--nginx all` adds every other version's
//!   matrix tests and the Debian package (what CI runs).
//! - `debian`: the module built Debian's way from `nginx-dev`, packaged as
//!   a `.deb`, and tested inside Debian's own nginx.
//! - `external`: the module built against nginx trees of other
//!   configurations (`NGINX_BUILD_DIR`, `--add-dynamic-module`), then the
//!   tests that load them.
//! - `valgrind`: the race scenarios and a short lab with nginx under
//!   valgrind memcheck (`nginx-test` runs a subset).

mod build;
mod debian;
mod external;
mod for_nginx;
mod patched;
mod prereq;
mod tree;
mod valgrind;
mod versions;

use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use versions::{Which, DEFAULT, MATRIX};

/// The default nginx release (nginx-src crate 1.28.1), built by nginx-sys.
pub const NGINX_VERSION: &str = "1.28.0";

pub type Result<T = ()> = std::result::Result<T, String>;

fn main() -> ExitCode {
    let args: Vec<String> = env::args().skip(1).collect();
    let (cmd, rest) = match args.split_first() {
        Some((cmd, rest)) => (cmd.as_str(), rest),
        None => ("help", &[][..]),
    };
    let result = match cmd {
        "build" => build_cmd(rest),
        "debian" => debian::command(rest),
        "nginx-test" => nginx_test(rest),
        "external" => external(rest),
        "lab" => harness_bin("lab", rest),
        "bench" => harness_bin("bench", rest),
        "valgrind" => valgrind::valgrind(rest),
        "help" | "--help" | "-h" => {
            print_help();
            Ok(())
        }
        other => Err(format!("unknown command `{other}`; try `cargo xtask help`")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("xtask: error: {err}");
            ExitCode::FAILURE
        }
    }
}

fn print_help() {
    println!(
        "cargo xtask <command>\n\n\
         build        build nginx, the patched nginx and the module into target/nginx/VERSION/\n\
                      --nginx VERSION|all   {versions} (default {NGINX_VERSION})\n\
                      --nginx-source PATH   an nginx source tree or .tar.gz of your own\n\
                      --for NGINX_BINARY    the version that nginx -V names, proven to load\n\
                                            into that binary with nginx -t\n\
         nginx-test   build, then run the unit tests and the nginx integration suite\n\
                      (same options; arguments after `--` go to the test binaries, e.g. a\n\
                      test name filter); `--nginx all` is CI's run: the whole suite on\n\
                      {NGINX_VERSION}, the matrix tests on every other version, and Debian\n\
         debian       build the module from Debian's nginx-dev as Debian builds modules,\n\
                      package target/debian/libnginx-mod-http-generation-retry_*.deb and run\n\
                      the races in Debian's own nginx; `--suite sid` takes the current\n\
                      packages from Debian unstable instead of ../shared/nginx/debian-sid,\n\
                      `--installed` this machine's nginx-dev and nginx\n\
         external     build nginx with other flags and the module against it (NGINX_BUILD_DIR,\n\
                      --add-dynamic-module) into target/nginx/{NGINX_VERSION}/external/, then\n\
                      run t/tests/external.rs\n\
         lab          build, then stock nginx beside nginx with the module under the same\n\
                      load and faults; `cargo xtask lab --help` for its options\n\
         bench        build, then stock vs module on vs module off: throughput and latency\n\
                      ratios, and the cost of a rescue\n\
         valgrind     build, then the race scenarios (every balancer row) and a short lab\n\
                      with nginx under valgrind memcheck; `--ci` for nginx-test's subset",
        versions = MATRIX.join(", ")
    );
}

/// The workspace root (the parent of this crate's manifest directory).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives one level below the workspace root")
        .to_path_buf()
}

/// cargo's target directory, honouring CARGO_TARGET_DIR.
pub fn target_dir() -> PathBuf {
    match env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            if dir.is_absolute() {
                dir
            } else {
                root().join(dir)
            }
        }
        None => root().join("target"),
    }
}

/// Where `build` installs one version: `target/nginx/VERSION`.
pub fn version_dir(version: &str) -> PathBuf {
    target_dir().join("nginx").join(version)
}

pub fn cargo() -> Command {
    let mut cmd = Command::new(env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.current_dir(root());
    cmd
}

pub fn run(cmd: &mut Command) -> Result {
    let status = cmd
        .status()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{cmd:?} failed: {status}"))
    }
}

/// `cargo xtask build [--nginx VERSION|all] [--nginx-source PATH]`.
fn build_cmd(args: &[String]) -> Result {
    let (sel, rest) = versions::parse(args)?;
    if !rest.is_empty() {
        return Err(format!("build takes no arguments after `--`: {rest:?}"));
    }
    if let Some(binary) = &sel.for_binary {
        return for_nginx::build_for(binary, sel.source.as_deref());
    }
    build::build_selection(&sel).map(|_| ())
}

/// The test binaries every version of the matrix runs besides the default
/// (which runs them all): the http and stream races (stock fails, `on`
/// rescues, `off` counts, patched rescues), the balancer rows, reloads
/// under load, the directive matrix and the status endpoint.
pub const MATRIX_TESTS: &[&str] = &[
    "race",
    "module_race",
    "stream",
    "patched",
    "balancers",
    "reload",
    "directive",
    "module_behaviour",
];

/// The matrix's shorter runs: 5 scripted races per test instead of 10 or
/// 20, and a 20 s reload soak instead of a minute (the default version runs
/// them in full).
pub fn matrix_env(cmd: &mut Command) {
    cmd.env("GENERATION_RETRY_REPEATS", "5")
        .env("GENERATION_RETRY_SOAK_SECONDS", "20");
}

/// One line of the closing table: what ran, and how long it took.
struct Step {
    what: String,
    build_s: f64,
    test_s: f64,
    totals: TestTotals,
    ok: bool,
}

/// `cargo xtask nginx-test [--nginx VERSION|all] [--nginx-source PATH] [-- ARGS]`.
fn nginx_test(args: &[String]) -> Result {
    let (sel, extra) = versions::parse(args)?;
    if sel.for_binary.is_some() {
        return Err("--for is for `cargo xtask build`".into());
    }
    let started = Instant::now();
    let mut steps = Vec::new();
    match &sel.which {
        Which::One(v) => {
            let default = v == DEFAULT && sel.source.is_none();
            steps.push(version_step(
                v,
                sel.source.as_deref(),
                default,
                &extra,
                None,
            ));
        }
        Which::All => {
            for v in MATRIX {
                let tests = (*v != DEFAULT).then_some(MATRIX_TESTS);
                steps.push(version_step(v, None, *v == DEFAULT, &extra, tests));
            }
            steps.push(debian::test_step(&debian::Inputs::Pinned, &extra));
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
fn version_step(
    version: &str,
    source: Option<&Path>,
    default: bool,
    extra: &[String],
    only: Option<&[&str]>,
) -> Step {
    let mut step = Step {
        what: format!(
            "nginx {}",
            if version.is_empty() {
                "(source)"
            } else {
                version
            }
        ),
        build_s: 0.0,
        test_s: 0.0,
        totals: TestTotals::default(),
        ok: false,
    };
    let started = Instant::now();
    let built = match build::build_version(version, source) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("xtask: error: {e}");
            return step;
        }
    };
    step.what = format!("nginx {}", built.version);
    if default {
        if let Err(e) = external::build(&built) {
            eprintln!("xtask: error: {e}");
            return step;
        }
    }
    step.build_s = started.elapsed().as_secs_f64();
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
            cmd.args([
                "-p",
                "generation-retry-core",
                "-p",
                "generation-retry-t",
                "-p",
                "xtask",
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
    if !test_args.is_empty() {
        cmd.arg("--").args(test_args);
    }
    println!("xtask: nginx {}: tests", built.version);
    let result = run_tests(&mut cmd, &mut step.totals);
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

/// The integration test binaries: `t/tests/*.rs`.
fn test_binaries() -> Result<Vec<String>> {
    let dir = root().join("t/tests");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| {
            e.ok()?
                .file_name()
                .to_str()?
                .strip_suffix(".rs")
                .map(String::from)
        })
        .collect();
    names.sort();
    Ok(names)
}

/// `cargo xtask external`: its builds, then `t/tests/external.rs`.
fn external(extra: &[String]) -> Result {
    let built = build::build_version(DEFAULT, None)?;
    external::build(&built)?;
    let mut cmd = cargo();
    cmd.args(["test", "-p", "generation-retry-t", "--test", "external"])
        .env("GENERATION_RETRY_NGINX_DIR", &built.install);
    if !extra.is_empty() {
        cmd.arg("--").args(extra.iter().skip_while(|a| *a == "--"));
    }
    run_tests(&mut cmd, &mut TestTotals::default())
}

/// `cargo xtask lab|bench [options]`: that binary of the harness, in release.
fn harness_bin(bin: &str, args: &[String]) -> Result {
    let install_dir = build::build()?;
    run(harness_command(bin, &install_dir).args(args))
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

const NO_TEST: &str = "no test ran";

/// Runs cargo test, echoing its output, adding libtest's result lines to
/// `total`; fails when cargo does or when no test ran.
fn run_tests(cmd: &mut Command, total: &mut TestTotals) -> Result {
    use std::io::{BufRead, BufReader};
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    let before = total.passed;
    for line in BufReader::new(child.stdout.take().expect("piped")).lines() {
        let line = line.map_err(|e| e.to_string())?;
        println!("{line}");
        total.add(&line);
    }
    let status = child.wait().map_err(|e| e.to_string())?;
    if !status.success() {
        return Err(format!("tests failed: {status}"));
    }
    if total.passed == before {
        return Err(NO_TEST.into());
    }
    Ok(())
}

#[derive(Default, Debug, PartialEq)]
struct TestTotals {
    passed: u64,
    failed: u64,
    ignored: u64,
}

impl TestTotals {
    /// Adds libtest's `test result: ok. 6 passed; 0 failed; 1 ignored; ...`.
    fn add(&mut self, line: &str) {
        let Some(rest) = line.strip_prefix("test result: ") else {
            return;
        };
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
    use super::TestTotals;

    #[test]
    fn sums_libtest_result_lines() {
        let mut t = TestTotals::default();
        t.add("test result: ok. 6 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.00s");
        t.add("test result: FAILED. 1 passed; 2 failed; 0 ignored; 0 measured; 0 filtered out");
        t.add("running 3 tests");
        assert_eq!(
            t,
            TestTotals {
                passed: 7,
                failed: 2,
                ignored: 1
            }
        );
    }
}
