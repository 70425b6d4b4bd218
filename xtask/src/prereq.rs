//! System prerequisites of building nginx and generating its bindings.
//!
//! A newcomer should meet "install these packages" before any bindgen or
//! configure error: check first, install when we are root, else stop with
//! the exact command.

use std::process::Command;

use crate::{run, Result};

/// Debian packages, each with what needs it.
pub const PACKAGES: &[(&str, &str)] = &[
    ("libssl-dev", "nginx --with-http_ssl_module"),
    ("libpcre2-dev", "nginx regular expressions"),
    ("zlib1g-dev", "nginx gzip"),
    ("libclang-dev", "bindgen (nginx-sys bindings)"),
    ("make", "building nginx"),
    ("gcc", "building nginx"),
];

/// Checks the packages; installs the missing ones when running as root.
pub fn ensure() -> Result {
    if Command::new("dpkg-query")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!(
            "xtask: not a Debian-like system; make sure these are installed: {}",
            names(PACKAGES.iter().map(|p| p.0))
        );
        return Ok(());
    }
    let missing: Vec<&str> = PACKAGES
        .iter()
        .map(|p| p.0)
        .filter(|p| !installed(p))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let install = format!(
        "apt-get update && apt-get install -y {}",
        names(missing.iter().copied())
    );
    if !is_root() {
        return Err(format!(
            "missing system packages: {}\n  run as root: {install}",
            names(missing.iter().copied())
        ));
    }
    eprintln!(
        "xtask: installing missing packages: {}",
        names(missing.iter().copied())
    );
    run(Command::new("apt-get").args(["update", "-qq"]))?;
    run(Command::new("apt-get")
        .args(["install", "-y", "-qq", "--no-install-recommends"])
        .args(&missing)
        .env("DEBIAN_FRONTEND", "noninteractive"))
}

fn names<'a>(it: impl Iterator<Item = &'a str>) -> String {
    it.collect::<Vec<_>>().join(" ")
}

fn installed(package: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${db:Status-Status}", package])
        .output()
        .map(|o| o.status.success() && o.stdout == b"installed")
        .unwrap_or(false)
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout.trim_ascii() == b"0")
        .unwrap_or(false)
}
