//! The layout gate (build/layout.rs) fails a build, naming the structure
//! and the field, when the module calls an accessor of a bitfield bindgen
//! misplaces. bindgen 0.72 misplaces `ngx_http_request_t`'s bitfields from
//! `uri_changes` on in nginx 1.29.3+ trees (`in_port_t port` precedes
//! them; rust-bindgen #3384), and places them right in 1.28.
//!
//! The module calls no such accessor, so the build is asked to check one as
//! if it did (`GENERATION_RETRY_LAYOUT_GATE_CALLED`, a knob that can only
//! add checks): against this run's nginx tree, the build of the module must
//! fail naming `ngx_http_request_s.header_only` on 1.29.3+, and succeed on
//! older trees having compared that bit (the gate's report says so). The
//! gate is what fails it, and only that check: every `nginx layout gate:`
//! line of the failing build is about `header_only` (the gate says each
//! failed check on a line of its own), and on 1.29.3+ `cargo xtask build`
//! built the module against the same tree with the gate on and without the
//! knob (this test runs on its result).

use std::path::{Path, PathBuf};

use generation_retry_t::nginx;

/// This version's configured tree: (source, objs). `cargo xtask build`
/// configures 1.29+ in `stock-build/src`; 1.28.0's stock nginx comes from
/// nginx-src, so its patched tree (same headers, patch aside) stands in.
fn tree() -> (PathBuf, PathBuf) {
    let dir = nginx::install_dir();
    let stock = dir.join("stock-build/src");
    if stock.join("objs/ngx_auto_config.h").is_file() {
        return (stock.clone(), stock.join("objs"));
    }
    let patched = dir.join("patched-build");
    assert!(
        patched.join("objs/ngx_auto_config.h").is_file(),
        "no configured nginx tree under {}: run `cargo xtask build`",
        dir.display()
    );
    (patched.join("src"), patched.join("objs"))
}

/// Non-regression guard: a check of the build, not of the module's work.
#[test]
fn a_misplaced_bitfield_the_module_calls_fails_the_build_naming_it() {
    let (source, objs) = tree();
    let out = nginx::module_build(&objs)
        .env("NGINX_SOURCE_DIR", &source)
        .env("GENERATION_RETRY_LAYOUT_GATE_CALLED", "header_only")
        .env_remove("GENERATION_RETRY_LAYOUT_GATE")
        .output()
        .expect("cargo build");
    let said = String::from_utf8_lossy(&out.stderr);
    // The request's structure under its tag or its typedef's name.
    let named = said.lines().any(|l| {
        l.contains("nginx layout gate: ngx_http_request_") && l.contains(".header_only is bit")
    });
    let (major, minor, patch) = nginx::version();
    if (major, minor, patch) >= (1, 29, 3) {
        assert!(
            !out.status.success() && named,
            "nginx {major}.{minor}.{patch}: the build calling header_only must fail naming it:\n{said}"
        );
        let others: Vec<&str> = said
            .lines()
            .filter(|l| l.contains("nginx layout gate: ") && !l.contains(".header_only is bit"))
            .collect();
        assert!(
            others.is_empty(),
            "nginx {major}.{minor}.{patch}: the gate failed other checks than the knob's: {others:#?}"
        );
    } else {
        assert!(
            out.status.success() && !named,
            "nginx {major}.{minor}.{patch}: bindgen places header_only right, the build must pass:\n{said}"
        );
        // It passed having compared header_only, not by skipping it.
        let report = newest_report(&nginx::module_target_dir());
        assert!(
            report
                .lines()
                .any(|l| l.contains(".header_only: C bit") && l.ends_with("(called)")),
            "header_only not compared in the gate's report:\n{report}"
        );
    }
}

/// The newest `layout-report.txt` of the module's builds in `target`.
fn newest_report(target: &Path) -> String {
    let build = target.join("release/build");
    let newest = std::fs::read_dir(&build)
        .unwrap_or_else(|e| panic!("{}: {e}", build.display()))
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("out/layout-report.txt"))
        .filter(|p| p.is_file())
        .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok())
        .expect("no layout-report.txt: the gate did not run");
    std::fs::read_to_string(newest).unwrap()
}
