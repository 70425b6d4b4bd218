//! `cargo xtask <command>`: the project's build and test entry points, in
//! plain Rust (the matklad xtask pattern), so there is no shell to learn.
//!
//! - `build`: nginx 1.28.0 and the module, installed at fixed paths under
//!   `target/nginx/1.28.0/`.
//! - `nginx-test`: `build`, then the unit tests and the integration suite.

mod build;
mod prereq;

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
                      (arguments after `--` go to the test binaries, e.g. a test name filter)"
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
    let built = build::build()?;
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
    .env("GENERATION_RETRY_NGINX_DIR", &built.install_dir);
    if !extra.is_empty() {
        cmd.arg("--").args(extra.iter().skip_while(|a| *a == "--"));
    }
    run(&mut cmd)
}
