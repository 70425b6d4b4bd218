//! nginx.org's release tarballs (or `GENERATION_RETRY_NGINX_URL`'s):
//! downloaded with curl into the cache, and checked at every use against
//! `--sha256` or their detached signature by the release keys (`pgp.rs`).
//! A download that fails is said once (curl's retries each repeat its
//! error), with the other ways to give the source ([`remedies`]).

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::mirror::MIRROR_ENV;
use super::pgp::{self, release_keys};
use super::trees::sha256;
use super::{given_sha256, Options};
use crate::workspace::{target_dir, At, Result};

/// Where releases are downloaded from (default [`NGINX_ORG`]).
pub const URL_ENV: &str = "GENERATION_RETRY_NGINX_URL";
/// The download cache's environment variable.
pub const CACHE_ENV: &str = "GENERATION_RETRY_CACHE";
pub const NGINX_ORG: &str = "https://nginx.org/download";

/// The download cache (`GENERATION_RETRY_CACHE`, else
/// `$XDG_CACHE_HOME/generation-retry`, else `~/.cache/generation-retry`).
pub fn cache_dir() -> PathBuf {
    if let Some(d) = env::var_os(CACHE_ENV).filter(|v| !v.is_empty()) {
        return PathBuf::from(d);
    }
    if let Some(d) = env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(d).join("generation-retry");
    }
    match env::var_os("HOME").filter(|v| !v.is_empty()) {
        Some(h) => PathBuf::from(h).join(".cache/generation-retry"),
        None => target_dir().join("download-cache"),
    }
}

/// The tarball at `url`, from the cache or downloaded into it, checked
/// (every time it is used) against `--sha256` or its signature.
pub(super) fn download_checked(url: &str, opts: &Options) -> Result<PathBuf> {
    let name = url.rsplit('/').next().unwrap_or(url);
    let dir = cache_dir().join("nginx");
    fs::create_dir_all(&dir).at(&dir)?;
    let tarball = dir.join(name);
    if !tarball.is_file() {
        download(url, &tarball)?;
    }
    let checked = match &opts.sha256 {
        Some(_) => given_sha256(&tarball, &sha256(&tarball)?, opts),
        None => {
            let sig = dir.join(format!("{name}.asc"));
            if !sig.is_file() {
                download(&format!("{url}.asc"), &sig)?;
            }
            signature_check(&tarball, &sig, opts).map(|_| ())
        }
    };
    if let Err(e) = checked {
        // Nothing refused stays in the cache: the next run downloads anew.
        let _ = fs::remove_file(&tarball);
        let _ = fs::remove_file(dir.join(format!("{name}.asc")));
        return Err(e);
    }
    Ok(tarball)
}

/// `file` must carry a good signature `sig` by one of the release keys.
pub(super) fn signature_check(file: &Path, sig: &Path, opts: &Options) -> Result<String> {
    let keys = opts.keys.clone().unwrap_or_else(release_keys);
    let ring = target_dir().join(format!("nginx-keyring-{}.gpg", std::process::id()));
    fs::create_dir_all(target_dir()).at(target_dir())?;
    pgp::keyring(&keys, &ring)?;
    let verdict = pgp::verify(&ring, sig, file);
    let _ = fs::remove_file(&ring);
    let fpr = verdict.map_err(|e| {
        format!(
            "{e}; refusing to build from it (the keys: {})",
            keys.display()
        )
    })?;
    eprintln!(
        "xtask: {}: good signature by {fpr}",
        file.file_name().unwrap_or_default().to_string_lossy()
    );
    Ok(fpr)
}

/// The ways to give nginx's source when it cannot be downloaded, for the
/// release tarball `tarball` (`nginx-1.30.4.tar.gz`).
pub(super) fn remedies(tarball: &str) -> String {
    format!(
        "Without a network, give the source another way:\n  \
         --nginx-source PATH   that exact version's source: {tarball} (from \
         {NGINX_ORG}, fetched on another machine) or its unpacked tree\n  \
         {MIRROR_ENV}=DIR   a directory holding {tarball}, listed in a SHA256SUMS \
         beside it (or with its .asc)\n  \
         {URL_ENV}=URL   a server laid out as {NGINX_ORG} (URL/{tarball} and its .asc)"
    )
}

/// curl's error lines, each once: `--retry` repeats the same line for
/// every attempt.
fn said_once(stderr: &str) -> String {
    let mut lines: Vec<&str> = Vec::new();
    for l in stderr.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if !lines.contains(&l) {
            lines.push(l);
        }
    }
    lines.join("\n")
}

/// `curl` to `dest` (written beside, then renamed: never half a file);
/// when it fails, curl's words once and [`remedies`].
pub(super) fn download(url: &str, dest: &Path) -> Result {
    eprintln!("xtask: downloading {url}");
    let part = PathBuf::from(format!("{}.part", dest.display()));
    let out = Command::new("curl")
        .args(["--fail", "--location", "--silent", "--show-error"])
        .args(["--proto", "=https,http", "--retry", "2", "--output"])
        .arg(&part)
        .arg(url)
        .output()
        .map_err(|e| {
            format!(
                "cannot run curl ({e}) to download {url}: apt-get install curl \
                 (dnf install curl), or download it yourself and pass --nginx-source"
            )
        })?;
    if !out.status.success() {
        let _ = fs::remove_file(&part);
        let name = url.rsplit('/').next().unwrap_or(url);
        return err!(
            "downloading {url} failed: {}\n{}",
            said_once(&String::from_utf8_lossy(&out.stderr)),
            remedies(name.trim_end_matches(".asc"))
        );
    }
    fs::rename(&part, dest).at(dest)
}
