//! `cargo xtask <command>`: the project's build and test entry points, in
//! plain Rust (the matklad xtask pattern), so there is no shell to learn.
//!
//! - `build`: nginx 1.28.0 and the module, installed at fixed paths under
//!   `target/nginx/1.28.0/`.
//! - `nginx-test`: `build` and `external`'s builds, then the unit tests and
//!   the integration suite.
//! - `external`: the module built against nginx trees of other
//!   configurations (`NGINX_BUILD_DIR`, `--add-dynamic-module`), then the
//!   tests that load them.
//! - `valgrind`: the race scenarios and a short lab with nginx under
//!   valgrind memcheck (`nginx-test` runs a subset).

mod build;
mod external;
mod patched;
mod prereq;
mod valgrind;

use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// The nginx release every artefact is built from (nginx-src crate 1.28.1).
pub const NGINX_VERSION: &str = "1.28.0";

pub type Result<T = ()> = std::result::Result<T, String>;

fn main() -> ExitCode {
    let args: Vec<String> = env::args().skip(1).collect();
    let (cmd, rest) = match args.split_first() {
        Some((cmd, rest)) => (cmd.as_str(), rest),
        None => ("help", &[][..]),
    };
    let result = match cmd {
        "build" => build::build().map(|_| ()),
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
         build        build nginx {NGINX_VERSION} and the module into target/nginx/{NGINX_VERSION}/\n\
         nginx-test   build, then run the unit tests and the nginx integration suite\n\
                      (arguments after `--` go to the test binaries, e.g. a test name filter)\n\
         external     build nginx with other flags and the module against it (NGINX_BUILD_DIR,\n\
                      --add-dynamic-module) into target/nginx/{NGINX_VERSION}/external/, then\n\
                      run t/tests/external.rs\n\
         lab          build, then stock nginx beside nginx with the module under the same\n\
                      load and faults; `cargo xtask lab --help` for its options\n\
         bench        build, then stock vs module on vs module off: throughput and latency\n\
                      ratios, and the cost of a rescue\n\
         valgrind     build, then the race scenarios (every balancer row) and a short lab\n\
                      with nginx under valgrind memcheck; `--ci` for nginx-test's subset"
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

/// Where `build` installs everything: `target/nginx/1.28.0`.
pub fn install_dir() -> PathBuf {
    target_dir().join("nginx").join(NGINX_VERSION)
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

fn nginx_test(extra: &[String]) -> Result {
    let built = build::build_all()?;
    external::build(&built)?;
    let install_dir = built.install;
    let mut cmd = cargo();
    cmd.args([
        "test",
        "-p",
        "generation-retry-core",
        "-p",
        "generation-retry-t",
        "-p",
        "xtask",
    ])
    .env("GENERATION_RETRY_NGINX_DIR", &install_dir);
    if !extra.is_empty() {
        cmd.arg("--").args(extra.iter().skip_while(|a| *a == "--"));
    }
    run_tests(&mut cmd)?;
    if extra.is_empty() {
        // Memory safety: a few race scenarios with nginx under memcheck
        // (the full set is `cargo xtask valgrind`).
        valgrind::ci_subset(&install_dir)?;
    }
    Ok(())
}

/// `cargo xtask external`: its builds, then `t/tests/external.rs`.
fn external(extra: &[String]) -> Result {
    let built = build::build_all()?;
    external::build(&built)?;
    let mut cmd = cargo();
    cmd.args(["test", "-p", "generation-retry-t", "--test", "external"])
        .env("GENERATION_RETRY_NGINX_DIR", &built.install);
    if !extra.is_empty() {
        cmd.arg("--").args(extra.iter().skip_while(|a| *a == "--"));
    }
    run_tests(&mut cmd)
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

/// Runs cargo test, echoing its output, and closes with one summary line
/// over every test binary: `nginx-test: N passed, N failed, N ignored`.
fn run_tests(cmd: &mut Command) -> Result {
    use std::io::{BufRead, BufReader};
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    let mut total = TestTotals::default();
    for line in BufReader::new(child.stdout.take().expect("piped")).lines() {
        let line = line.map_err(|e| e.to_string())?;
        println!("{line}");
        total.add(&line);
    }
    let status = child.wait().map_err(|e| e.to_string())?;
    println!(
        "nginx-test: {} passed, {} failed, {} ignored",
        total.passed, total.failed, total.ignored
    );
    if !status.success() {
        return Err(format!("tests failed: {status}"));
    }
    if total.passed == 0 {
        return Err("no test ran".into());
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
