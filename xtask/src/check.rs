//! `cargo xtask check`: the lint gate (`nginx-test --nginx all` runs it).
//! Formatting (`rustfmt.toml`), then clippy over every crate and target
//! with warnings denied (the workspace's `[workspace.lints]` among them).
//! Then every tree's core patch series against its regeneration from the
//! canonical one (`patches.rs`, where a mirror holds the sources), the
//! house's sizes ([`sizes`]), each codebase's name written once
//! ([`versions_written`]), and the docs' tables of versions as `cargo
//! xtask docs` writes them (`docs::drifted`). All run even when one
//! fails, so one run shows everything to fix.

use crate::workspace::{cargo, root, At, Result};

mod sizes;
mod versions_written;

/// The module's package: linted against a configured nginx tree.
const MODULE: &str = "ngx_http_upstream_generation_retry_module";

/// The checks, in order: a name for the report, cargo's arguments, and
/// whether it needs a configured nginx tree (`NGINX_BUILD_DIR`). The
/// module is linted with the features it is built with against a tree
/// (its default `vendored` would have nginx-sys compile a whole nginx for
/// a lint): the same code, as every other version builds it.
const CHECKS: &[(&str, &[&str], bool)] = &[
    ("rustfmt", &["fmt", "--all", "--check"], false),
    (
        "clippy",
        &[
            "clippy",
            "--workspace",
            "--exclude",
            MODULE,
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
        false,
    ),
    (
        "clippy",
        &[
            "clippy",
            "--package",
            MODULE,
            "--all-targets",
            "--no-default-features",
            "--features",
            "export-modules",
            "--",
            "-D",
            "warnings",
        ],
        true,
    ),
];

/// The default version's nginx tree, configured (not built) in
/// `target/nginx/VERSION/check-tree`: the objs the module's lint binds to.
fn configured_objs() -> Result<std::path::PathBuf> {
    let src = crate::versions::source(crate::versions::DEFAULT, None)?;
    let flags: Vec<String> = crate::versions::FLAGS
        .iter()
        .map(|f| f.to_string())
        .collect();
    let (tree, _, _) = crate::tree::nginx_tree(
        &src.tree,
        &src.identity,
        &crate::workspace::version_dir(&src.version).join("check-tree"),
        &flags,
        &[],
        crate::tree::Make::ConfigureOnly,
    )?;
    Ok(tree.join("objs"))
}

/// `cargo xtask check`.
pub fn command() -> Result {
    let mut failed = Vec::new();
    let mut objs = None;
    for (name, check, tree) in CHECKS {
        let shown = format!("cargo {}", check.join(" "));
        eprintln!("xtask: check: {shown}");
        let mut cmd = cargo();
        // Its own target directory: a lint never holds the tests' build
        // (`--nginx all` runs this beside the tests).
        cmd.args(*check).env(
            "CARGO_TARGET_DIR",
            crate::workspace::target_dir().join("check"),
        );
        if *tree {
            let dir = match objs.get_or_insert_with(configured_objs) {
                Ok(d) => d,
                Err(e) => {
                    eprintln!(
                        "xtask: check: {name}: no nginx tree to lint the module against: {e}"
                    );
                    failed.push(*name);
                    continue;
                }
            };
            cmd.env("NGINX_BUILD_DIR", dir)
                .env_remove("NGINX_SOURCE_DIR");
        }
        let status = cmd.status().running(&shown)?;
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
    // The checks that read the tree: each finding on a line of its own.
    let reads: [(&str, &str, Finder); 3] = [
        ("sizes", "sizes", sizes::breaches),
        (
            "versions",
            "codebase names written once",
            versions_written::stray,
        ),
        (
            "docs",
            "the docs' tables as generated",
            crate::docs::drifted,
        ),
    ];
    for (name, what, find) in reads {
        eprintln!("xtask: check: {what}");
        let found = find(&root());
        for f in &found {
            eprintln!("xtask: check: {f}");
        }
        if !found.is_empty() {
            failed.push(name);
        }
    }
    if failed.is_empty() {
        eprintln!(
            "xtask: check: rustfmt and clippy clean, the patch series as made, sizes within \
             their limits, each codebase named once, the docs' tables as generated"
        );
        Ok(())
    } else {
        err!("check failed: {}", failed.join(", "))
    }
}

/// A check that reads the tree under the root: its findings, one a line.
type Finder = fn(&std::path::Path) -> Vec<String>;

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
        let names: Vec<&str> = CHECKS.iter().map(|(n, ..)| *n).collect();
        assert_eq!(names, ["rustfmt", "clippy", "clippy"]);
        assert_eq!(CHECKS[0].1, ["fmt", "--all", "--check"]);
        // Every package and target, the module's on its own.
        let clippy = CHECKS[1].1.join(" ");
        assert!(
            clippy.contains(&format!("--workspace --exclude {MODULE} --all-targets")),
            "{clippy}"
        );
        let module = CHECKS[2].1.join(" ");
        assert!(
            module.contains(&format!("--package {MODULE} --all-targets")),
            "{module}"
        );
        for c in [&clippy, &module] {
            assert!(c.ends_with("-- -D warnings"), "{c}");
        }
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
