//! Step 1 of `cargo xtask debian`: Debian's packages, pinned or downloaded,
//! unpacked into one directory.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::source::{check_listed, mirror, sha256, MIRROR_ENV};
use crate::tree::{fnv1a, run_quiet};
use crate::workspace::{At, Result};

/// Debian's packages the build and the tests need: nginx, its development
/// files and dynamic stream module, and the runtime libraries Debian's
/// binary needs that are newer than Debian 12's.
pub const DEBIAN_PACKAGES: &[&str] = &[
    "nginx",
    "nginx-common",
    "nginx-dev",
    "libnginx-mod-stream",
    "libc6",
    "libcrypt1",
    "libpcre2-8-0",
    "libssl3t64",
    "zlib1g",
    "libzstd1",
];

/// Where Debian's packages come from.
pub enum Inputs {
    /// The mirror's `debian-sid/` (`GENERATION_RETRY_NGINX_MIRROR`, which CI
    /// points at `../shared/nginx`), checked against its `SHA256SUMS`.
    Pinned,
    /// The named suite of Debian's archive, downloaded now.
    Suite(String),
    /// This machine's own `nginx-dev` and nginx (`apt install nginx-dev`):
    /// what an operator builds the package for. The races run in the
    /// installed `/usr/sbin/nginx`; the install test, which needs Debian's
    /// `.deb`s, does not run.
    Installed,
}

impl Inputs {
    pub(super) fn label(&self) -> String {
        match self {
            Inputs::Pinned => "pinned".into(),
            Inputs::Suite(s) => s.clone(),
            Inputs::Installed => "installed".into(),
        }
    }
}

/// The `.deb`s: checked pinned ones, or downloaded ones.
pub(super) fn fetch(inputs: &Inputs, dir: &Path) -> Result<Vec<PathBuf>> {
    match inputs {
        Inputs::Pinned => {
            let mirror = pinned_mirror()?;
            let pinned = mirror.join("debian-sid");
            let mut debs = Vec::new();
            for entry in fs::read_dir(&pinned).at(&pinned)? {
                let path = entry.at(&pinned)?.path();
                let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
                    continue;
                };
                if !name.ends_with(".deb") {
                    continue;
                }
                check_listed(
                    &mirror.join("SHA256SUMS"),
                    &format!("debian-sid/{name}"),
                    &path,
                )?;
                debs.push(path);
            }
            debs.sort();
            Ok(debs)
        }
        Inputs::Suite(suite) => download(suite, dir),
        Inputs::Installed => Err("the installed nginx-dev needs no packages".into()),
    }
}

/// The mirror that holds the pinned Debian packages.
pub(super) fn pinned_mirror() -> Result<PathBuf> {
    mirror().ok_or(
        format!(
            "the pinned Debian packages come from the mirror: set {MIRROR_ENV} to a directory \
         with debian-sid/ and SHA256SUMS (CI: ../shared/nginx), or use --suite sid \
         (Debian's current packages) or --installed (this machine's nginx-dev)"
        )
        .into(),
    )
}

/// `apt-get download` of [`DEBIAN_PACKAGES`] from `suite`, with a package
/// index of its own under `dir` (this machine's sources, lists and
/// installed packages are untouched). The archive is the one this
/// machine's apt already uses, and its keyring checks the suite.
fn download(suite: &str, dir: &Path) -> Result<Vec<PathBuf>> {
    let (uri, keyring) = system_archive()?;
    let _ = fs::remove_dir_all(dir);
    for d in ["lists/partial", "cache/archives/partial", "parts", "debs"] {
        fs::create_dir_all(dir.join(d)).at(dir.join(d))?;
    }
    let sources = dir.join("sources.list");
    fs::write(
        &sources,
        format!("deb [signed-by={keyring}] {uri} {suite} main\n"),
    )
    .at(&sources)?;
    let opts = [
        format!("Dir::Etc::SourceList={}", sources.display()),
        format!("Dir::Etc::SourceParts={}", dir.join("parts").display()),
        format!("Dir::State::Lists={}", dir.join("lists").display()),
        format!("Dir::Cache={}", dir.join("cache").display()),
    ];
    let apt = |args: &[&str], cwd: &Path| {
        let mut c = Command::new("apt-get");
        for o in &opts {
            c.arg("-o").arg(o);
        }
        c.args(["-qq"]).args(args).current_dir(cwd);
        c
    };
    eprintln!("xtask: debian: package index of {suite} from {uri}");
    run_quiet(&mut apt(&["update"], dir))?;
    let debs_dir = dir.join("debs");
    let mut args = vec!["download"];
    args.extend_from_slice(DEBIAN_PACKAGES);
    run_quiet(&mut apt(&args, &debs_dir))?;
    let mut debs: Vec<PathBuf> = fs::read_dir(&debs_dir)
        .at(&debs_dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "deb"))
        .collect();
    debs.sort();
    Ok(debs)
}

/// The Debian archive and keyring of this machine's own apt sources (the
/// first `deb` source whose suites are the release's, not its security
/// archive).
fn system_archive() -> Result<(String, String)> {
    let mut texts = Vec::new();
    for f in ["/etc/apt/sources.list"] {
        if let Ok(t) = fs::read_to_string(f) {
            texts.push(t);
        }
    }
    if let Ok(dir) = fs::read_dir("/etc/apt/sources.list.d") {
        for e in dir.flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "sources" || x == "list") {
                if let Ok(t) = fs::read_to_string(&p) {
                    texts.push(t);
                }
            }
        }
    }
    let keyring = "/usr/share/keyrings/debian-archive-keyring.gpg".to_string();
    for text in &texts {
        // deb822: `URIs: X` with `Suites: ...` in the same stanza.
        for stanza in text.split("\n\n") {
            let field = |name: &str| {
                stanza
                    .lines()
                    .find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_string()))
            };
            if let (Some(uri), Some(suites)) = (field("URIs:"), field("Suites:")) {
                if uri.ends_with("/debian") && !suites.contains("security") {
                    return Ok((uri, keyring));
                }
            }
        }
        // One-line: `deb [opts] URI SUITE COMPONENTS`.
        for line in text.lines() {
            let words: Vec<&str> = line
                .split_whitespace()
                .filter(|w| !w.starts_with('[') && !w.ends_with(']'))
                .collect();
            if let ["deb", uri, suite, ..] = words.as_slice() {
                if uri.ends_with("/debian") && !suite.contains("security") {
                    return Ok((uri.to_string(), keyring));
                }
            }
        }
    }
    Err("no Debian archive in this machine's apt sources; --suite needs one".into())
}

pub(super) fn dpkg_x(deb: &Path, dest: &Path) -> Result {
    fs::create_dir_all(dest).at(dest)?;
    run_quiet(Command::new("dpkg-deb").arg("-x").arg(deb).arg(dest))
}

/// Every `.deb` unpacked into `dest`, unless the stamp says these were.
pub(super) fn unpack(debs: &[PathBuf], dest: &Path) -> Result<PathBuf> {
    let names: Vec<String> = debs.iter().map(|d| d.display().to_string()).collect();
    let mut parts = names.clone();
    for d in debs {
        parts.push(sha256(d)?);
    }
    let stamp = fnv1a(parts.iter().map(|p| p.as_bytes()));
    let stamp_file = dest.join(".unpacked");
    if fs::read_to_string(&stamp_file).is_ok_and(|s| s == stamp) {
        return Ok(dest.to_path_buf());
    }
    let _ = fs::remove_dir_all(dest);
    for d in debs {
        dpkg_x(d, dest)?;
    }
    for needed in [
        "usr/sbin/nginx",
        "usr/share/nginx/src/conf_flags",
        "usr/lib/nginx/modules/ngx_stream_module.so",
    ] {
        if !dest.join(needed).exists() {
            return err!("the packages hold no {needed}: {names:?}");
        }
    }
    fs::write(&stamp_file, stamp).at(&stamp_file)?;
    Ok(dest.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pinned_packages_are_the_ones_a_suite_download_fetches() {
        let Ok(mirror) = pinned_mirror() else {
            // Without the mirror there is nothing pinned: the refusal must
            // name the variable and the other inputs.
            let err = pinned_mirror().unwrap_err().to_string();
            assert!(
                err.contains(MIRROR_ENV) && err.contains("--suite sid"),
                "{err}"
            );
            return;
        };
        let sums = fs::read_to_string(mirror.join("SHA256SUMS")).unwrap();
        let mut pinned: Vec<String> = sums
            .lines()
            .filter_map(|l| l.split_whitespace().nth(1))
            .filter_map(|f| f.strip_prefix("debian-sid/"))
            .map(|f| f.split('_').next().unwrap().to_string())
            .collect();
        pinned.sort();
        let mut wanted: Vec<String> = DEBIAN_PACKAGES.iter().map(|p| p.to_string()).collect();
        wanted.sort();
        assert_eq!(pinned, wanted);
    }
}
