//! Tarballs and the trees they hold: a tarball's SHA-256, unpacked once
//! into `target/nginx/sources/`, and what a tree is (its name, its nginx
//! version, and for an operator's directory what identifies its contents).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::tree::{files, fnv1a, is_build_output, run_quiet};
use crate::workspace::{target_dir, At, Result};

/// What a tree is: `tengine-X.Y.Z` for Tengine (its `nginx.h` defines
/// `TENGINE_VERSION`), `angie-X.Y.Z` for Angie (`angie.h`'s
/// `ANGIE_VERSION`), else the nginx version ([`tree_version`]).
pub fn tree_name(tree: &Path) -> Result<String> {
    let nginx = tree_version(tree)?;
    let defined = |file: &str, name: &str| {
        let text = fs::read_to_string(tree.join("src/core").join(file)).unwrap_or_default();
        text.lines().find_map(|l| {
            l.strip_prefix("#define ")?
                .strip_prefix(name)?
                .trim()
                .strip_prefix('"')?
                .split('"')
                .next()
                .map(str::to_string)
        })
    };
    Ok(if let Some(t) = defined("nginx.h", "TENGINE_VERSION") {
        format!("tengine-{t}")
    } else if let Some(a) = defined("angie.h", "ANGIE_VERSION") {
        format!("angie-{a}")
    } else {
        nginx
    })
}

/// The `NGINX_VERSION` of a tree's `src/core/nginx.h`.
pub fn tree_version(tree: &Path) -> Result<String> {
    let header = tree.join("src/core/nginx.h");
    let text = fs::read_to_string(&header)
        .map_err(|e| format!("{}: {e} (not an nginx source tree)", header.display()))?;
    text.lines()
        .find_map(|l| {
            l.strip_prefix("#define NGINX_VERSION")
                .and_then(|rest| rest.trim().strip_prefix('"'))
                .and_then(|rest| rest.split('"').next())
        })
        .map(str::to_string)
        .ok_or(format!("{} defines no NGINX_VERSION", header.display()).into())
}

/// `sha256sum FILE` (coreutils).
pub fn sha256(file: &Path) -> Result<String> {
    let out = Command::new("sha256sum")
        .arg(file)
        .output()
        .running("sha256sum")?;
    if !out.status.success() {
        return err!(
            "sha256sum {}: {}",
            file.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .map(str::to_string)
        .ok_or("sha256sum printed nothing".into())
}

/// Unpacks a `.tar.gz` holding one top directory (both nginx.org's release
/// tarballs and repository archives do) into `target/nginx/sources/<sha>`.
pub(super) fn unpack(tarball: &Path, sha: &str) -> Result<PathBuf> {
    let dest = target_dir().join("nginx/sources").join(&sha[..16]);
    let done = dest.join(".unpacked");
    if done.is_file() {
        return Ok(dest);
    }
    let _ = fs::remove_dir_all(&dest);
    fs::create_dir_all(&dest).at(&dest)?;
    run_quiet(
        Command::new("tar")
            .arg("-xzf")
            .arg(tarball)
            .arg("--strip-components=1")
            .arg("-C")
            .arg(&dest),
    )?;
    fs::write(&done, sha).at(&done)?;
    Ok(dest)
}

/// What a user's source directory holds: every file's path, size and
/// modification time (a configured tree's `objs` and `Makefile` left out),
/// so an edited tree is rebuilt and an untouched one is not.
pub fn tree_identity(tree: &Path) -> Result<String> {
    let mut entries = Vec::new();
    for path in files(tree, &is_build_output)? {
        let meta = fs::metadata(&path).at(&path)?;
        let mtime = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        let rel = path
            .strip_prefix(tree)
            .unwrap_or(&path)
            .display()
            .to_string();
        entries.push(format!("{rel}\0{}\0{mtime}\n", meta.len()));
    }
    Ok(fnv1a(entries.iter().map(|e| e.as_bytes())))
}
