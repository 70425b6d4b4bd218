//! `cargo xtask lab|bench|soak|fuzz`: the test crate's own binaries, run
//! in release; `lab`, `bench` and `soak` against a build of the nginx
//! version asked for, `fuzz` without nginx.

use crate::build;
use crate::harness::harness_command;
use crate::versions;
use crate::workspace::{cargo, run, Result};

/// `cargo xtask lab|bench [--nginx VERSION] [--nginx-source PATH]
/// [options]`: that binary of the harness, in release, against the nginx
/// (stock, module, patched) of that version; the other options are the
/// binary's.
pub fn harness_bin(bin: &str, args: &[String]) -> Result {
    let (version, source, rest) = versions::parse_one_among(args)?;
    let built = build::build_version(&version, source.as_deref())?;
    run(harness_command(bin, &built.install).args(rest))
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
