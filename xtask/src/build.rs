//! `cargo xtask build`: nginx 1.28.0 (built by nginx-sys from the nginx-src
//! crate) and the module, copied to fixed paths:
//!
//! - `target/nginx/1.28.0/stock/sbin/nginx`
//! - `target/nginx/1.28.0/patched/sbin/nginx` (see `patched.rs`)
//! - `target/nginx/1.28.0/modules/ngx_http_upstream_generation_retry_module.so`

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::{cargo, install_dir, prereq, Result, NGINX_VERSION};

pub const MODULE_PACKAGE: &str = "ngx_http_upstream_generation_retry_module";
pub const MODULE_FILE: &str = "ngx_http_upstream_generation_retry_module.so";

/// Builds everything; returns the install directory.
pub fn build() -> Result<PathBuf> {
    build_all().map(|built| built.install)
}

/// What `build` made: the install directory, and the objs directory of the
/// stock nginx (its `last-build-info` names the nginx source tree).
pub struct Built {
    pub install: PathBuf,
    pub stock_objs: PathBuf,
}

pub fn build_all() -> Result<Built> {
    prereq::ensure()?;

    let found = cargo_build_module()?;
    let install = install_dir();
    let stock_nginx = install.join("stock/sbin/nginx");
    let module = install.join("modules").join(MODULE_FILE);

    copy_if_changed(&found.nginx_build_dir.join("nginx"), &stock_nginx)?;
    copy_if_changed(&found.module, &module)?;
    check_nginx(&stock_nginx)?;
    let patched = crate::patched::build(&found.nginx_build_dir, &install)?;
    check_nginx(&patched)?;

    eprintln!("xtask: nginx  {}", stock_nginx.display());
    eprintln!("xtask: module {}", module.display());
    eprintln!(
        "xtask: nginx  {} (with nginx-src-patches)",
        patched.display()
    );
    Ok(Built {
        install,
        stock_objs: found.nginx_build_dir,
    })
}

struct CargoOutputs {
    nginx_build_dir: PathBuf,
    module: PathBuf,
}

/// `cargo build --release` of the module, reading cargo's JSON messages for
/// where nginx-sys built nginx and where the cdylib landed.
fn cargo_build_module() -> Result<CargoOutputs> {
    let mut child = cargo()
        .args([
            "build",
            "--release",
            "-p",
            MODULE_PACKAGE,
            "--message-format=json-render-diagnostics",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run cargo: {e}"))?;

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
        return Err(format!("cargo build of the module failed: {status}"));
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

pub fn copy_if_changed(from: &Path, to: &Path) -> Result {
    let new = fs::read(from).map_err(|e| format!("{}: {e}", from.display()))?;
    if fs::read(to).ok().as_deref() == Some(&new[..]) {
        return Ok(());
    }
    if let Some(dir) = to.parent() {
        fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    // Write beside and rename, so a running nginx never sees half a binary.
    let tmp = to.with_extension("tmp");
    fs::copy(from, &tmp).map_err(|e| format!("{} -> {}: {e}", from.display(), tmp.display()))?;
    fs::rename(&tmp, to).map_err(|e| format!("{}: {e}", to.display()))
}

/// `nginx -V` must say what the rest of the project assumes.
fn check_nginx(nginx: &Path) -> Result {
    let out = Command::new(nginx)
        .arg("-V")
        .output()
        .map_err(|e| format!("{}: {e}", nginx.display()))?;
    let text = String::from_utf8_lossy(&out.stderr);
    for needle in [
        format!("nginx/{NGINX_VERSION}"),
        "--with-compat".to_string(),
        "--with-http_ssl_module".to_string(),
    ] {
        if !text.contains(&needle) {
            return Err(format!(
                "{} -V does not mention {needle}:\n{text}",
                nginx.display()
            ));
        }
    }
    Ok(())
}
