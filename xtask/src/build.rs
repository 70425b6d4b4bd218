//! `cargo xtask build [--nginx VERSION|all] [--nginx-source PATH]`: nginx
//! and the module, copied to fixed paths for each version:
//!
//! - `target/nginx/VERSION/stock/sbin/nginx`
//! - `target/nginx/VERSION/patched/sbin/nginx` (see `patched.rs`)
//! - `target/nginx/VERSION/modules/ngx_http_upstream_generation_retry_module.so`
//! - `target/nginx/VERSION/modules/ngx_http_generation_retry_test_wrap_module.so`
//!   (test-only, see `test_wrap.rs`)
//!
//! The default version (1.28.0) is built by nginx-sys from the nginx-src
//! crate; the others from their source (`versions.rs`), configured with the
//! same flags, with the module built against that tree's `objs`.

use std::env::consts::{DLL_PREFIX, DLL_SUFFIX};
use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::Value;

use crate::patched::{self, StockBuild, StockTree};
use crate::prereq;
use crate::test_wrap;
use crate::tree::{binary_name, copy_if_changed, files, fnv1a, nginx_tree, Make};
use crate::versions::{self, Selection, Which, DEFAULT, FLAGS, MATRIX};
use crate::workspace::{cargo, root, run, target_dir, version_dir, At, Result};

pub const MODULE_PACKAGE: &str = "ngx_http_upstream_generation_retry_module";
pub const MODULE_FILE: &str = "ngx_http_upstream_generation_retry_module.so";

/// What a build made.
#[derive(Clone)]
pub struct Built {
    pub version: String,
    /// `target/nginx/VERSION`.
    pub install: PathBuf,
    /// The pristine source tree it was built from.
    pub source: PathBuf,
}

/// `cargo xtask build [--nginx VERSION|all] [--nginx-source PATH]` (the
/// operator's `--for BINARY` is `install::build_for`): builds what
/// `--nginx` selected, in [`MATRIX`] order for `all`.
pub fn build_selection(sel: &Selection) -> Result<Vec<Built>> {
    match &sel.which {
        Which::One(v) => Ok(vec![build_version(v, sel.source.as_deref())?]),
        Which::All => MATRIX.iter().map(|v| build_version(v, None)).collect(),
    }
}

/// Builds one version: the vendored default, or any other from its source
/// (`version` may be empty when `source` names it).
pub fn build_version(version: &str, source: Option<&Path>) -> Result<Built> {
    prereq::ensure()?;
    let started = Instant::now();
    let built = if version == DEFAULT && source.is_none() {
        build_vendored()?
    } else {
        build_from_source(version, source)?
    };
    let install = &built.install;
    eprintln!(
        "xtask: nginx {}: {} and {}, module {} ({:.1} s)",
        built.version,
        install.join("stock/sbin/nginx").display(),
        install.join("patched/sbin/nginx").display(),
        install.join("modules").join(MODULE_FILE).display(),
        started.elapsed().as_secs_f64()
    );
    Ok(built)
}

/// nginx 1.28.0 as nginx-sys builds it from the nginx-src crate, the module
/// built with it, and the patched nginx from the same tree.
fn build_vendored() -> Result<Built> {
    let found = cargo_build_module()?;
    let install = version_dir(DEFAULT);
    let stock_nginx = install.join("stock/sbin/nginx");
    copy_if_changed(&found.nginx_build_dir.join("nginx"), &stock_nginx)?;
    copy_if_changed(&found.module, &install.join("modules").join(MODULE_FILE))?;
    // That module is nginx-sys's; a stamp left by a `--nginx-source` build
    // of this version must not vouch for it.
    let _ = fs::remove_file(install.join("modules/.stamp"));
    check_nginx(&stock_nginx, DEFAULT)?;

    let stock = StockBuild::read(&found.nginx_build_dir)?;
    // nginx-sys runs make in the source tree, with objs elsewhere.
    test_wrap::build(
        &found.nginx_build_dir,
        &stock.source,
        &install.join("modules"),
    )?;
    if stock.flags != FLAGS {
        return err!(
            "nginx-src configured nginx with {:?}, not the flags every other version \
             is built with ({FLAGS:?}): update versions::FLAGS",
            stock.flags
        );
    }
    let identity = stock.source.to_string_lossy().into_owned();
    let from = StockTree {
        source: &stock.source,
        objs: &found.nginx_build_dir,
    };
    let patched = patched::build(DEFAULT, from, &identity, &stock.flags, &install)?;
    check_nginx(&patched, DEFAULT)?;
    Ok(Built {
        version: DEFAULT.to_string(),
        install,
        source: stock.source,
    })
}

/// Any other nginx: its pristine source (`versions::source`), configured
/// with [`FLAGS`] and built in `target/nginx/VERSION/stock-build`, the
/// module built against that tree, and the patched nginx.
fn build_from_source(version: &str, user: Option<&Path>) -> Result<Built> {
    let src = versions::source(version, user)?;
    let version = src.version.clone();
    let install = version_dir(&version);
    let flags: Vec<String> = FLAGS.iter().map(|f| f.to_string()).collect();

    let (tree, _, stamp) = nginx_tree(
        &src.tree,
        &src.identity,
        &install.join("stock-build"),
        &flags,
        &[],
        Make::Binary,
    )?;
    let objs = tree.join("objs");
    let stock_nginx = install.join("stock/sbin/nginx");
    copy_if_changed(&objs.join(binary_name(&src.tree)), &stock_nginx)?;
    check_nginx(&stock_nginx, &src.nginx)?;
    if version.starts_with("angie-") {
        // No module on ngx 0.5 builds against Angie's tree (its module
        // structure is not nginx's); t/tests/angie.rs checks the error, so
        // the day it builds is noticed. Its races run on the patched Angie.
        let _ = fs::remove_dir_all(install.join("modules"));
        eprintln!("xtask: nginx {version}: no module (ngx 0.5 cannot build one for Angie)");
    } else {
        module_against(&objs, &stamp, &install.join("modules"))?;
        test_wrap::build(&objs, &tree, &install.join("modules"))?;
    }

    if patched::patch_dir(&version).is_dir() {
        let from = StockTree {
            source: &tree,
            objs: &objs,
        };
        let patched = patched::build(&version, from, &src.identity, &flags, &install)?;
        check_nginx(&patched, &src.nginx)?;
    } else {
        let _ = fs::remove_dir_all(install.join("patched"));
        eprintln!(
            "xtask: no {}: nginx {version} is built without the patched nginx",
            patched::patch_dir(&version).display()
        );
    }
    Ok(Built {
        version,
        install,
        source: src.tree,
    })
}

/// nginx's pool allocator in debug mode: every pool allocation a `malloc`
/// of its own, so that valgrind sees an overrun of one, or a use after the
/// pool's reset, which inside a pool block it cannot (nginx-acme builds
/// its sanitizer nginx so). Only `src/core/ngx_palloc.c` reads it: no
/// structure changes, the module built for the stock tree loads as it is.
pub const MEMCHECK_CC_OPT: &str = "--with-cc-opt=-DNGX_DEBUG_PALLOC=1";

/// The install `cargo xtask valgrind` runs, beside `built`'s:
/// `target/nginx/VERSION/memcheck/`, its stock and patched nginx
/// configured with [`FLAGS`] and [`MEMCHECK_CC_OPT`] (remade only when
/// their inputs change), `built`'s modules copied in.
pub fn memcheck_build(built: &Built) -> Result<PathBuf> {
    let started = Instant::now();
    let install = built.install.join("memcheck");
    let mut flags: Vec<String> = FLAGS.iter().map(|f| f.to_string()).collect();
    flags.push(MEMCHECK_CC_OPT.into());
    let identity = built.source.to_string_lossy().into_owned();
    let (tree, _, _) = nginx_tree(
        &built.source,
        &identity,
        &install.join("stock-build"),
        &flags,
        &[],
        Make::Binary,
    )?;
    let objs = tree.join("objs");
    let stock = install.join("stock/sbin/nginx");
    copy_if_changed(&objs.join(binary_name(&built.source)), &stock)?;
    check_nginx(&stock, &built.version)?;
    if built.install.join("patched/sbin/nginx").is_file() {
        let from = StockTree {
            source: &tree,
            objs: &objs,
        };
        patched::build(&built.version, from, &identity, &flags, &install)?;
    }
    let modules = built.install.join("modules");
    for f in files(&modules, &|n| n.starts_with('.'))? {
        if let Some(name) = f.file_name() {
            copy_if_changed(&f, &install.join("modules").join(name))?;
        }
    }
    eprintln!(
        "xtask: nginx {} with NGX_DEBUG_PALLOC: {} ({:.1} s)",
        built.version,
        install.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(install)
}

/// Where every module built against an nginx tree's objs (`NGINX_BUILD_DIR`)
/// is compiled: one cargo target directory, so its dependencies are built
/// once for all trees (only nginx-sys, ngx and the module follow the tree).
pub fn module_target_dir() -> PathBuf {
    // The install tests build from a copy of the repository, and share
    // the release dependencies (bindgen and its tree) compiled here.
    std::env::var_os("GENERATION_RETRY_MODULE_TARGET_DIR")
        .filter(|d| !d.is_empty())
        .map_or_else(|| target_dir().join("module-cargo"), PathBuf::from)
}

/// The module built against `objs` into `dest/<module>.so`, unless the
/// stamp says the one there was built from this tree (`tree_stamp`) and
/// these module sources.
pub fn module_against(objs: &Path, tree_stamp: &str, dest: &Path) -> Result<PathBuf> {
    let so = dest.join(MODULE_FILE);
    let stamp = fnv1a([tree_stamp.as_bytes(), module_sources()?.as_bytes()]);
    let stamp_file = dest.join(".stamp");
    if so.is_file() && fs::read_to_string(&stamp_file).is_ok_and(|s| s == stamp) {
        return Ok(so);
    }
    let built = cargo_build_against(objs)?;
    copy_if_changed(&built, &so)?;
    fs::write(&stamp_file, &stamp).at(&stamp_file)?;
    Ok(so)
}

/// A fingerprint of everything the module is compiled from (`build/` holds
/// the layout gate `build.rs` runs: a changed gate must run again).
pub fn module_sources() -> Result<String> {
    let mut parts = Vec::new();
    for top in ["Cargo.toml", "Cargo.lock", "build.rs", "build", "module"] {
        for f in files(&root().join(top), &|n| n == "target")? {
            parts.push(f.to_string_lossy().into_owned().into_bytes());
            parts.push(fs::read(&f).at(&f)?);
        }
    }
    Ok(fnv1a(parts.iter().map(Vec::as_slice)))
}

/// `NGINX_BUILD_DIR=<objs> cargo build --release --no-default-features
/// --features export-modules` in [`module_target_dir`]; returns the shared
/// object.
pub fn cargo_build_against(objs: &Path) -> Result<PathBuf> {
    cargo_build_against_in(&root(), objs, &module_target_dir())
}

/// [`cargo_build_against`] of the workspace at `dir` (the mutation
/// check's copy), in the target directory `target`.
pub fn cargo_build_against_in(dir: &Path, objs: &Path, target: &Path) -> Result<PathBuf> {
    let started = Instant::now();
    run(cargo()
        .current_dir(dir)
        .args([
            "build",
            "--release",
            "--locked",
            "--package",
            MODULE_PACKAGE,
            "--no-default-features",
            "--features",
            "export-modules",
            "--target-dir",
        ])
        .arg(target)
        .env("NGINX_BUILD_DIR", objs)
        // As the harness's `nginx::module_build` (the same command, so that
        // one target directory serves both without rebuilding).
        .env_remove("NGINX_SOURCE_DIR")
        .env_remove("RUSTFLAGS"))?;
    let module = target
        .join("release")
        .join(format!("{DLL_PREFIX}{MODULE_PACKAGE}{DLL_SUFFIX}"));
    if !module.is_file() {
        return err!("cargo did not leave {}", module.display());
    }
    eprintln!(
        "xtask: module against {} in {:.1} s",
        objs.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(module)
}

/// What a vendored build of the module left.
pub struct CargoOutputs {
    /// The `objs` of the nginx that nginx-sys built (and bound the module to).
    pub nginx_build_dir: PathBuf,
    /// The module's shared object.
    pub module: PathBuf,
}

/// `cargo build --release` of the module, reading cargo's JSON messages for
/// where nginx-sys built nginx and where the cdylib landed.
fn cargo_build_module() -> Result<CargoOutputs> {
    cargo_build_module_in(&root(), None)
}

/// [`cargo_build_module`] in the workspace `dir` (a copy of this one), into
/// the cargo target directory `target` (else cargo's own).
pub fn cargo_build_module_in(dir: &Path, target: Option<&Path>) -> Result<CargoOutputs> {
    let mut cmd = cargo();
    cmd.current_dir(dir).args([
        "build",
        "--release",
        "-p",
        MODULE_PACKAGE,
        "--message-format=json-render-diagnostics",
    ]);
    if let Some(target) = target {
        cmd.arg("--target-dir").arg(target);
    }
    let mut child = cmd.stdout(Stdio::piped()).spawn().running("cargo")?;

    let mut nginx_out = None;
    let mut module = None;
    let stdout = child.stdout.take().expect("piped stdout");
    for line in BufReader::new(stdout).lines() {
        let line = line.map_err(|e| format!("reading cargo output: {e}"))?;
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        match msg["reason"].as_str() {
            Some("build-script-executed") if is_package(&msg, "nginx-sys") => {
                nginx_out = msg["out_dir"].as_str().map(PathBuf::from);
            }
            Some("compiler-artifact") if msg["target"]["name"] == MODULE_PACKAGE => {
                module = msg["filenames"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .find(|f| f.ends_with(".so") || f.ends_with(".dylib"))
                    .map(PathBuf::from);
            }
            _ => {}
        }
    }
    let status = child.wait().map_err(|e| format!("cargo: {e}"))?;
    if !status.success() {
        return err!("cargo build of the module failed: {status}");
    }
    let nginx_out = nginx_out.ok_or("cargo did not report nginx-sys's build directory")?;
    Ok(CargoOutputs {
        nginx_build_dir: nginx_out.join("objs"),
        module: module.ok_or("cargo did not report the module's .so")?,
    })
}

/// Package ids look like `registry+https://...#nginx-sys@0.5.0`.
fn is_package(msg: &Value, name: &str) -> bool {
    msg["package_id"]
        .as_str()
        .is_some_and(|id| id.contains(&format!("#{name}@")) || id.contains(&format!("/{name}#")))
}

/// The patched nginx of the default version from the patches in
/// `patch_dir` (a copy of `nginx-src-patches/1.28.0`), built on the
/// vendored nginx whose objs are `stock_objs`, installed in
/// `install/patched/sbin/nginx`.
pub fn patched_default_from(
    patch_dir: &Path,
    stock_objs: &Path,
    install: &Path,
) -> Result<PathBuf> {
    let stock = StockBuild::read(stock_objs)?;
    let identity = stock.source.to_string_lossy().into_owned();
    let patches = patched::patches_in(patch_dir)?;
    let from = StockTree {
        source: &stock.source,
        objs: stock_objs,
    };
    let nginx = patched::build_with(DEFAULT, &patches, from, &identity, &stock.flags, install)?;
    check_nginx(&nginx, DEFAULT)?;
    Ok(nginx)
}

/// `nginx -V` must say what the rest of the project assumes (`version` is
/// the nginx inside: Tengine 3.2.0 says `nginx/1.31.3` too).
fn check_nginx(nginx: &Path, version: &str) -> Result {
    let out = Command::new(nginx).arg("-V").output().at(nginx)?;
    let text = String::from_utf8_lossy(&out.stderr);
    for needle in [
        format!("nginx/{version}"),
        "--with-compat".to_string(),
        "--with-http_ssl_module".to_string(),
    ] {
        if !text.contains(&needle) {
            return Err(
                format!("{} -V does not mention {needle}:\n{text}", nginx.display()).into(),
            );
        }
    }
    Ok(())
}
