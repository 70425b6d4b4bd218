//! `cargo xtask external`: the module built against nginx trees other than
//! the one nginx-sys builds, the two ways an operator would. Installed under
//! `target/nginx/1.28.0/external/`:
//!
//! - `sbin/nginx`, `modules/<module>.so`: nginx 1.28.0 configured on its own
//!   with other flags (`--with-debug`, another prefix, no threads, and no
//!   `--with-compat`: it refuses a module built against any other tree, so
//!   its own module loading proves the build used its objs), and the module
//!   built against its objs directory as the README tells operators,
//!   `NGINX_BUILD_DIR=<objs> cargo build --release --no-default-features
//!   --features export-modules` (in `target/module-cargo`, shared with
//!   the other versions' modules, so `target/release` keeps the stock build);
//! - `addon/sbin/nginx`, `addon/modules/<module>.so`: nginx configured with
//!   `--with-compat` and `--add-dynamic-module=<this repository>`, so the
//!   repository's `config` and `config.make` have nginx's `make` build the
//!   module.
//!
//! Each nginx is a copy of the nginx-src tree, rebuilt only when its stamp
//! (source tree, flags, and for the addon tree `config` and `config.make`)
//! changes; cargo (and nginx's make, for the addon) decide whether the module
//! must be rebuilt.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::build::{self, module_against, Built, MODULE_FILE};
use crate::harness::parallel::{run_modules, Modules};
use crate::harness::{suite_test, TestTotals};
use crate::tree::{copy_if_changed, make_target, nginx_tree, Make};
use crate::versions::DEFAULT;
use crate::workspace::{root, At, Result};

/// `cargo xtask external`: its builds, then the suite's `external` module.
pub fn command(extra: &[String]) -> Result {
    let built = build::build_version(DEFAULT, None)?;
    build(&built)?;
    let mut cmd = suite_test();
    cmd.env("GENERATION_RETRY_NGINX_DIR", &built.install);
    if !extra.is_empty() {
        cmd.arg("--").args(extra.iter().skip_while(|a| *a == "--"));
    }
    run_modules(
        &cmd,
        &mut TestTotals::default(),
        Modules::Only(&["external"]),
        extra.is_empty(),
    )
}

/// Someone else's nginx: a debug build with another prefix, without
/// `--with-compat` and without the stock build's threads, HTTP/2 and realip
/// modules, so its module signature differs from the stock build's.
pub const EXTERNAL_FLAGS: &[&str] = &[
    "--prefix=/opt/someone-else/nginx",
    "--with-debug",
    "--with-stream",
    "--with-http_ssl_module",
];

/// The nginx the module is added to with `--add-dynamic-module` (that flag
/// is appended): another prefix, threads, no TLS.
pub const ADDON_FLAGS: &[&str] = &[
    "--prefix=/opt/addon/nginx",
    "--with-compat",
    "--with-stream",
    "--with-threads",
];

/// Builds (or reuses) everything above; returns the `external` directory.
pub fn build(built: &Built) -> Result<PathBuf> {
    let started = Instant::now();
    let source_id = built.source.to_string_lossy().into_owned();
    let out = built.install.join("external");
    let work = built.install.join("external-build");

    // Someone else's nginx, and the module built against its objs.
    let (tree, _, stamp) = nginx_tree(
        &built.source,
        &source_id,
        &work.join("debug"),
        &args(EXTERNAL_FLAGS, &[]),
        &[],
        Make::Binary,
    )?;
    let objs = tree.join("objs");
    copy_if_changed(&objs.join("nginx"), &out.join("sbin/nginx"))?;
    module_against(&objs, &stamp, &out.join("modules"))?;

    // nginx with `--add-dynamic-module`: its make builds the module too.
    let config = [
        read(&root().join("config"))?,
        read(&root().join("config.make"))?,
    ];
    let add = format!("--add-dynamic-module={}", root().display());
    let (tree, rebuilt, _) = nginx_tree(
        &built.source,
        &source_id,
        &work.join("addon"),
        &args(ADDON_FLAGS, &[add]),
        &config,
        Make::Binary,
    )?;
    let objs = tree.join("objs");
    if !rebuilt {
        // The tree is as configured; the module's sources may have changed.
        make_target(&tree, &objs, "modules")?;
    }
    let addon = out.join("addon");
    copy_if_changed(&objs.join("nginx"), &addon.join("sbin/nginx"))?;
    copy_if_changed(
        &objs.join(MODULE_FILE),
        &addon.join("modules").join(MODULE_FILE),
    )?;

    eprintln!(
        "xtask: external nginx and modules in {} ({:.1} s)",
        out.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(out)
}

fn args(flags: &[&str], more: &[String]) -> Vec<String> {
    flags
        .iter()
        .map(|f| f.to_string())
        .chain(more.iter().cloned())
        .collect()
}

fn read(path: &Path) -> Result<Vec<u8>> {
    fs::read(path).at(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builds_differ_where_the_tests_rely_on_it() {
        assert!(EXTERNAL_FLAGS.contains(&"--with-debug"));
        assert!(!EXTERNAL_FLAGS.contains(&"--with-compat"));
        assert!(ADDON_FLAGS.contains(&"--with-compat"));
        for flags in [EXTERNAL_FLAGS, ADDON_FLAGS] {
            assert!(flags.iter().any(|f| f.starts_with("--prefix=/opt/")));
            assert!(!flags.iter().any(|f| f.starts_with("--builddir")));
        }
    }

    #[test]
    fn the_addon_files_are_at_the_root() {
        for name in ["config", "config.make"] {
            let text = fs::read_to_string(root().join(name)).unwrap();
            assert!(text.contains("ngx_http_upstream_generation_retry_module"));
        }
    }
}
