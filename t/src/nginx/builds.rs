//! Where `cargo xtask build` installed nginx and the module, which nginx
//! that is (version, Tengine or not), and the module's build as xtask runs
//! it (for tests that build it against another tree).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Where `cargo xtask build` installed nginx and the module.
pub fn install_dir() -> PathBuf {
    match std::env::var_os("GENERATION_RETRY_NGINX_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../target/nginx")
            .join(vendored_version()),
    }
}

/// The nginx release the `nginx-src` crate pinned in Cargo.lock carries
/// (`1.28.1+1.28.0`: 1.28.0), which nginx-sys builds: the default version
/// (xtask's `DEFAULT`, which a test of xtask's holds to the same line).
pub fn vendored_version() -> String {
    let lock = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.lock");
    let text = std::fs::read_to_string(&lock).unwrap_or_else(|e| panic!("{}: {e}", lock.display()));
    text.split("\n[[package]]\n")
        .find(|p| p.starts_with("name = \"nginx-src\"\n"))
        .and_then(|p| p.lines().find_map(|l| l.strip_prefix("version = \"")))
        .and_then(|v| v.trim_end_matches('"').split_once('+'))
        .map(|(_, nginx)| nginx.to_string())
        .unwrap_or_else(|| panic!("{}: no nginx-src X+NGINX version", lock.display()))
}

/// The version of the stock nginx under test, as `(major, minor, patch)`
/// from its `nginx -V`, so a test can use what a version has (sticky from
/// 1.29.6, least_time from 1.31.0).
pub fn version() -> (u32, u32, u32) {
    static VERSION: std::sync::OnceLock<(u32, u32, u32)> = std::sync::OnceLock::new();
    *VERSION.get_or_init(|| {
        let binary = installed("stock/sbin/nginx");
        // -V: Angie's -v names only Angie; -V says the nginx inside too.
        let out = Command::new(&binary).arg("-V").output().expect("nginx -V");
        let said = String::from_utf8_lossy(&out.stderr);
        crate::since::nginx_version(&said)
            .unwrap_or_else(|| panic!("{} -V: {said}", binary.display()))
    })
}

/// What the nginx under test says to `-v`, read once.
fn says_v() -> &'static str {
    static SAID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SAID.get_or_init(|| {
        let binary = installed("stock/sbin/nginx");
        let out = Command::new(&binary).arg("-v").output().expect("nginx -v");
        String::from_utf8_lossy(&out.stderr).into_owned()
    })
}

/// Whether the nginx under test is Tengine (`nginx -v` says
/// `Tengine version: Tengine/X.Y.Z` before nginx's version).
pub fn is_tengine() -> bool {
    says_v().contains("Tengine version:")
}

/// Whether the nginx under test is Angie (`nginx -v` says
/// `Angie version: Angie/X.Y.Z`). Angie names an nginx version in `-V` but
/// does not have everything that version has: its upstream `keepalive`,
/// for one, is not on by default and refuses `0`.
pub fn is_angie() -> bool {
    says_v().contains("Angie version:")
}

/// Whether upstream `keepalive` is on without the directive: nginx from
/// 1.29.7 (32 connections per worker), not Angie.
pub fn keepalive_by_default() -> bool {
    version() >= (1, 29, 7) && !is_angie()
}

/// `rel` under [`install_dir`], which must be there.
pub(super) fn installed(rel: &str) -> PathBuf {
    let path = install_dir().join(rel);
    assert!(
        path.is_file(),
        "{} is missing: run `cargo xtask build` (or `cargo xtask nginx-test`)",
        path.display()
    );
    path
}

/// The matrix's module target directory: `GENERATION_RETRY_MODULE_TARGET_DIR`,
/// else `target/module-cargo`.
pub fn module_target_dir() -> PathBuf {
    std::env::var_os("GENERATION_RETRY_MODULE_TARGET_DIR")
        .filter(|d| !d.is_empty())
        .map_or_else(
            || Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/module-cargo"),
            PathBuf::from,
        )
}

/// `cargo build --release` of the module against the nginx tree whose
/// objs are `objs` (`NGINX_BUILD_DIR`), as `cargo xtask build` builds it,
/// in the matrix's module target directory
/// (`GENERATION_RETRY_MODULE_TARGET_DIR`, else `target/module-cargo`),
/// whose dependencies are built: the command, for the caller's own
/// environment and run.
pub fn module_build(objs: &Path) -> std::process::Command {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let target = module_target_dir();
    let mut c = std::process::Command::new(env!("CARGO"));
    c.current_dir(&workspace)
        .args([
            "build",
            "--release",
            "--locked",
            "--package",
            "ngx_http_upstream_generation_retry_module",
            "--no-default-features",
            "--features",
            "export-modules",
            "--target-dir",
        ])
        .arg(target)
        .env("NGINX_BUILD_DIR", objs)
        // As xtask's `build::cargo_build_against_in` (the same command, so
        // that one target directory serves both without rebuilding).
        .env_remove("NGINX_SOURCE_DIR")
        .env_remove("RUSTFLAGS");
    c
}
