//! System prerequisites of building nginx and generating its bindings.
//!
//! A newcomer should meet "install these packages" before any bindgen or
//! configure error: check first, install when we are root, else stop with
//! the exact command.

use std::process::Command;

use crate::workspace::{run, Result};

/// `ci/packages.txt`: one Debian package per line, `#` comments. The same
/// list `.ci/run` installs, so CI and `cargo xtask build` cannot disagree.
const PACKAGES_TXT: &str = include_str!("../../ci/packages.txt");

pub fn packages() -> Vec<&'static str> {
    PACKAGES_TXT
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .collect()
}

/// Checks the packages; installs the missing ones when running as root.
pub fn ensure() -> Result {
    if Command::new("dpkg-query")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!(
            "xtask: not a Debian-like system; make sure these are installed: {}",
            names(packages().into_iter())
        );
        return Ok(());
    }
    let missing: Vec<&str> = packages().into_iter().filter(|p| !installed(p)).collect();
    if missing.is_empty() {
        return Ok(());
    }
    let install = format!(
        "apt-get update && apt-get install -y {}",
        names(missing.iter().copied())
    );
    if !is_root() {
        return err!(
            "missing system packages: {}\n  run as root: {install}",
            names(missing.iter().copied())
        );
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

pub fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout.trim_ascii() == b"0")
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    #[test]
    fn package_list_parses() {
        let p = super::packages();
        assert!(
            p.contains(&"libclang-dev") && p.contains(&"libpcre2-dev"),
            "{p:?}"
        );
        assert!(p.iter().all(|n| !n.contains(' ') && !n.contains('#')));
    }
}
