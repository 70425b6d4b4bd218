//! `cargo xtask check`: the lint gate `.ci/run` runs before the tests.
//! Formatting (`rustfmt.toml`), then clippy over every crate and target
//! with warnings denied (the workspace's `[workspace.lints]` among them).
//! Then every tree's core patch series against its regeneration from the
//! canonical one (`patches.rs`, where a mirror holds the sources), and the
//! house's sizes ([`sizes`]). All run even when one fails, so one run
//! shows everything to fix.

use crate::workspace::{cargo, root, Result};

mod sizes;

/// The checks, in order: a name for the report, and cargo's arguments.
const CHECKS: &[(&str, &[&str])] = &[
    ("rustfmt", &["fmt", "--all", "--check"]),
    (
        "clippy",
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
    ),
];

/// `cargo xtask check`.
pub fn command(args: &[String]) -> Result {
    if !args.is_empty() {
        return Err(format!(
            "check takes no arguments: {args:?}; usage: cargo xtask check"
        ));
    }
    let mut failed = Vec::new();
    for (name, check) in CHECKS {
        let shown = format!("cargo {}", check.join(" "));
        eprintln!("xtask: check: {shown}");
        let status = cargo()
            .args(*check)
            .status()
            .map_err(|e| format!("cannot run {shown}: {e}"))?;
        if status.success() {
            continue;
        }
        eprintln!("xtask: check: {name} failed ({status}): {shown}");
        if !installed(check[0]) {
            eprintln!(
                "xtask: check: `cargo {}` is not installed: rustup component add {name}",
                check[0]
            );
        }
        failed.push(*name);
    }
    eprintln!("xtask: check: nginx-src-patches, every series as the canonical one makes it");
    let trees: Vec<String> = crate::versions::MATRIX
        .iter()
        .map(|t| t.to_string())
        .collect();
    // The trees' sources without a network come from the mirror (CI's
    // ../shared); a clone without one is not made to download them for a
    // lint: `cargo xtask patches --check` does, on purpose.
    if crate::source::mirror().is_none() {
        eprintln!(
            "xtask: check: patches not checked: no mirror ({}); `cargo xtask patches --check` \
             fetches the sources",
            crate::source::MIRROR_ENV
        );
    } else if let Err(e) = crate::patches::check(&trees) {
        eprintln!("xtask: check: {e}");
        failed.push("patches");
    }
    eprintln!("xtask: check: sizes");
    let breaches = sizes::breaches(&root());
    for b in &breaches {
        eprintln!("xtask: check: {b}");
    }
    if !breaches.is_empty() {
        failed.push("sizes");
    }
    if failed.is_empty() {
        eprintln!("xtask: check: rustfmt and clippy clean, the patch series as made, sizes within their limits");
        Ok(())
    } else {
        Err(format!("check failed: {}", failed.join(", ")))
    }
}

/// Whether `cargo SUBCOMMAND --version` runs (a rustup toolchain may come
/// without the rustfmt and clippy components).
fn installed(subcommand: &str) -> bool {
    cargo()
        .args([subcommand, "--version"])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formatting_runs_first_and_clippy_denies_warnings() {
        let names: Vec<&str> = CHECKS.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["rustfmt", "clippy"]);
        assert_eq!(CHECKS[0].1, ["fmt", "--all", "--check"]);
        let clippy = CHECKS[1].1.join(" ");
        assert!(clippy.contains("--workspace --all-targets"), "{clippy}");
        assert!(clippy.ends_with("-- -D warnings"), "{clippy}");
    }

    /// The zone's peer lists are shared memory that other workers write
    /// under their locks: a Rust reference to one (`&Peers`, or `&self` in
    /// its accessors) promises nothing else writes it, which is undefined
    /// behaviour under Rust's aliasing rules (issue 41, defect G; the
    /// module made both until then). Every accessor takes a raw pointer and
    /// reads one field with `addr_of!`.
    #[test]
    fn shared_peer_lists_are_never_referenced() {
        // Every file of the module, wherever a new one lands (a protocol's
        // proto/NAME.rs, a peer/ file): the accessors and every reader.
        let src = crate::workspace::root().join("module/src");
        let files = crate::tree::files(&src, &|_| false).unwrap();
        assert!(files.len() > 10, "{files:?}");
        let proto: String = files
            .iter()
            .filter(|f| f.extension().is_some_and(|e| e == "rs"))
            .map(|f| std::fs::read_to_string(f).unwrap())
            .collect();
        let start = proto.find("pub(crate) trait RrPeers").expect("the trait");
        let end = start + proto[start..].find("\n}\n").expect("its end");
        let accessors = &proto[start..end];
        assert!(!accessors.contains("&self"), "{accessors}");
        for made in [
            "peers(us).as_ref()",
            "peers(us).as_mut()",
            "&*peers",
            "&*list",
        ] {
            assert!(
                !proto.contains(made),
                "module/src makes a reference: {made}"
            );
        }
        assert!(accessors.contains("unsafe fn config(p: *const Self)"));
    }
}
