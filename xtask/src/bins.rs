//! `cargo xtask lab|bench|soak|fuzz`: the test crate's own binaries, run
//! in release; `lab`, `bench` and `soak` against a build of the nginx
//! version asked for, `fuzz` without nginx.

use crate::build;
use crate::harness::harness_command;
use crate::versions;
use crate::workspace::{cargo, run, Result};

/// `cargo xtask lab|bench|soak [--nginx VERSION] [--nginx-source PATH]
/// [OPTIONS]`: that binary of the harness, in release, against the nginx
/// (stock, module, patched) of that version; the other options are the
/// binary's.
#[derive(clap::Args, Debug)]
#[command(disable_help_flag = true)]
pub struct Harness {
    #[command(flatten)]
    pub nginx: versions::Nginx,
    /// the binary's own options, after --nginx (`cargo xtask lab --help`, `bench --help`)
    #[arg(
        value_name = "ARGS",
        allow_hyphen_values = true,
        trailing_var_arg = true
    )]
    pub rest: Vec<String>,
}

impl Harness {
    /// The one nginx asked for, and its source; refused before any build
    /// when `--nginx` came after the binary's options (it would be theirs).
    pub fn one(&self) -> Result<(String, Option<std::path::PathBuf>)> {
        match self.rest.iter().find(|a| a.starts_with("--nginx")) {
            Some(late) => err!("{late}: --nginx and --nginx-source go before the binary's options"),
            None => self.nginx.one(),
        }
    }
}

pub fn harness_bin(bin: &str, a: &Harness) -> Result {
    let (version, source) = a.one()?;
    let built = build::build_version(&version, source.as_deref())?;
    run(harness_command(bin, &built.install).args(&a.rest))
}

/// `cargo xtask fuzz [--inputs N] [--seed S] [--target NAME]`: the
/// harness's `fuzz` binary, in release (t/src/bin/fuzz.rs), which needs
/// no nginx.
pub fn fuzz(args: &[String]) -> Result {
    run(cargo()
        .args([
            "run",
            "--release",
            "--locked",
            "-q",
            "-p",
            "generation-retry-t",
            "--bin",
            "fuzz",
            "--",
        ])
        .args(args))
}
