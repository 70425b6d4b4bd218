//! Where an nginx source tree comes from, for the operator's install and
//! for every build of the suite: one order, each tarball checked before a
//! byte of it is built.
//!
//! 1. `--nginx-source PATH`: the operator's own tree or tarball.
//! 2. A mirror directory, when `GENERATION_RETRY_NGINX_MIRROR` names one
//!    or more (`:`-separated; CI's are `../shared/nginx` and
//!    `../shared/forks`): the first that holds `nginx-NAME.tar.gz`,
//!    `NAME.tar.gz` or a repository archive `NAME-COMMIT.tar.gz`, checked
//!    against its `SHA256SUMS` or a `.asc` beside it.
//! 3. The `nginx-src` crate on crates.io, where a release of it carries
//!    that nginx ([`CRATES`]); cargo checks it against the registry's
//!    checksum.
//! 4. nginx.org's release tarball and its detached signature
//!    (`GENERATION_RETRY_NGINX_URL` replaces `https://nginx.org/download`),
//!    checked with `gpgv` against the release keys in `xtask/keys/` (or a
//!    directory of keys named with `--signing-keys`), or against the
//!    SHA-256 given with `--sha256`. Downloads are cached in
//!    `GENERATION_RETRY_CACHE` (else `$XDG_CACHE_HOME/generation-retry`,
//!    else `~/.cache/generation-retry`) and checked again at every use.
//!
//! A tarball that fails its check is refused by name and nothing is built
//! from it. `--sha256` is checked against whatever tarball is used (the
//! operator's, the mirror's or a download); it cannot vouch for a
//! directory or the crate. A mirror's `SHA256SUMS` sits beside its
//! tarballs: it catches a damaged copy, and vouches for nothing more than
//! the directory does; a `.asc` there is checked as a download's is.
//!
//! Here the order and its options; each place in its own file: the mirror
//! (`mirror.rs`), the crate (`crates_io.rs`), nginx.org's download and its
//! signature (`download.rs`, `pgp.rs`), and the tarballs and trees they
//! give (`trees.rs`).

pub(crate) mod crates_io;
mod download;
mod mirror;
mod pgp;
mod trees;

use std::env;
use std::path::{Path, PathBuf};

use crate::workspace::Result;

#[cfg(test)]
pub use mirror::listed_sha256;
pub use mirror::{check_listed, mirror, mirrored_tree, mirrors, MIRROR_ENV};
pub use trees::{sha256, tree_identity, tree_version};

use crates_io::{from_crate, CRATES};
use download::{download_checked, NGINX_ORG, URL_ENV};
use mirror::{check_mirrored, mirrored};
use trees::{tree_name, unpack};

/// How a source is obtained and checked.
/// `--nginx-source`, `--sha256` and `--signing-keys`: the options of
/// `install`, `uninstall` and `build` (the last two with `--for`).
#[derive(clap::Args, Debug, Default)]
pub struct Options {
    /// the nginx source tree or tarball (with --for: that binary's version's;
    /// else the mirror, the nginx-src crate, or nginx.org, signed)
    #[arg(long = "nginx-source", value_name = "PATH")]
    pub user: Option<PathBuf>,
    /// the tarball's expected SHA-256 (accepted by it instead of its signature)
    #[arg(long, value_name = "HEX", requires = "binary")]
    pub sha256: Option<String>,
    /// the keys nginx.org's signature is checked with (armored; default xtask/keys/)
    #[arg(long = "signing-keys", value_name = "DIR", requires = "binary")]
    pub keys: Option<PathBuf>,
}

/// Where a version's source will come from, before anything is fetched.
#[derive(Debug, PartialEq, Eq)]
pub enum Origin {
    User(PathBuf),
    Mirror(PathBuf),
    Crate(String),
    Download(String),
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::User(p) => write!(f, "{}", p.display()),
            Origin::Mirror(p) => write!(f, "{} (mirror, {MIRROR_ENV})", p.display()),
            Origin::Crate(v) => write!(f, "the nginx-src crate {v} (crates.io)"),
            Origin::Download(url) => write!(f, "{url} (downloaded, then verified)"),
        }
    }
}

/// A pristine nginx source tree, and what identifies its contents.
pub struct Source {
    /// The codebase's name: `1.30.4`, `tengine-3.2.0`, `master-3f6f782`.
    pub version: String,
    /// The nginx version its `nginx.h` says (Tengine 3.2.0: 1.31.3).
    pub nginx: String,
    pub tree: PathBuf,
    pub identity: String,
    pub origin: Origin,
}

/// The names a codebase other than an nginx release goes by: `master-COMMIT`
/// (nginx's development branch at that commit) and `tengine-X.Y.Z`. nginx.org
/// serves neither, and no crate carries them: their source is a mirror's or
/// the operator's (`--nginx-source`).
pub fn is_release(name: &str) -> bool {
    let parts: Vec<&str> = name.split('.').collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// A fork of nginx (`tengine-X.Y.Z`, `angie-X.Y.Z`), which runs its own
/// set of tests and not nginx's own suite.
pub fn is_fork(name: &str) -> bool {
    name.starts_with("tengine-") || name.starts_with("angie-")
}

/// `master-COMMIT` (7 to 40 hex digits), `tengine-X.Y.Z` or `angie-X.Y.Z`.
pub fn is_codebase(name: &str) -> bool {
    if let Some(commit) = name.strip_prefix("master-") {
        return (7..=40).contains(&commit.len()) && commit.bytes().all(|b| b.is_ascii_hexdigit());
    }
    ["tengine-", "angie-"]
        .iter()
        .any(|fork| name.strip_prefix(fork).is_some_and(is_release))
}

/// Where `version`'s source comes from ([`Options::user`], the mirror, the
/// crate, or a download), without fetching anything.
pub fn origin(version: &str, opts: &Options) -> Origin {
    origin_with(version, opts, &mirrors())
}

/// [`origin`] with the mirror given.
fn origin_with(version: &str, opts: &Options, mirrors: &[PathBuf]) -> Origin {
    if let Some(p) = &opts.user {
        return Origin::User(p.clone());
    }
    let name = tarball_name(version);
    if let Some(found) = mirrors.iter().find_map(|m| mirrored(m, version)) {
        return Origin::Mirror(found);
    }
    if let Some((_, krate)) = CRATES.iter().find(|(v, _)| *v == version) {
        return Origin::Crate(krate.to_string());
    }
    let base = env::var(URL_ENV).unwrap_or_else(|_| NGINX_ORG.to_string());
    Origin::Download(format!("{}/{name}", base.trim_end_matches('/')))
}

pub fn tarball_name(version: &str) -> String {
    format!("nginx-{version}.tar.gz")
}

/// Obtains and checks `version`'s source (`version` may be empty when
/// `--nginx-source` names it).
pub fn obtain(version: &str, opts: &Options) -> Result<Source> {
    // One at a time in this process: `nginx-test --nginx all` asks from
    // two threads (the builds, the lint gate's patch check), and an unpack
    // replaces its directory, and the crate's stub its manifest, in place.
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let origin = origin(version, opts);
    let (tree, identity) = match &origin {
        Origin::User(path) if path.is_dir() => (path.clone(), tree_identity(path)?),
        Origin::User(path) if path.is_file() => {
            let sha = sha256(path)?;
            given_sha256(path, &sha, opts)?;
            (unpack(path, &sha)?, sha)
        }
        Origin::User(path) => {
            return err!(
                "--nginx-source {}: no such file or directory",
                path.display()
            )
        }
        Origin::Mirror(path) => {
            let sha = check_mirrored(path, opts)?;
            given_sha256(path, &sha, opts)?;
            (unpack(path, &sha)?, sha)
        }
        Origin::Crate(krate) => {
            if opts.sha256.is_some() {
                return err!(
                    "--sha256 checks a tarball, and nginx {version} comes from {origin} \
                     (checked by cargo against crates.io's checksum): leave --sha256 out, or \
                     name the tarball with --nginx-source"
                );
            }
            from_crate(krate)?
        }
        Origin::Download(_) if !is_release(version) && !version.is_empty() => {
            return err!(
                "{version} is not an nginx.org release, so there is nothing to download: name \
                 its source with --nginx-source PATH ({}), or set {MIRROR_ENV} to a directory \
                 holding it",
                if version.starts_with("tengine-") {
                    "Tengine's release tarball or a checkout of alibaba/tengine"
                } else if version.starts_with("angie-") {
                    "Angie's release tarball or a checkout of webserver-llc/angie"
                } else {
                    "a checkout or archive of nginx's development branch at that commit"
                }
            )
        }
        Origin::Download(url) => {
            let tarball = download_checked(url, opts)?;
            let sha = sha256(&tarball)?;
            (unpack(&tarball, &sha)?, sha)
        }
    };
    if matches!(&origin, Origin::User(p) if p.is_dir()) && opts.sha256.is_some() {
        return Err("--sha256 checks a tarball; --nginx-source names a directory".into());
    }
    let nginx = tree_version(&tree)?;
    let found = tree_name(&tree)?;
    // A development branch says the release it leads to, not its commit.
    let branch = version.starts_with("master-") && is_release(&found);
    if !version.is_empty() && found != version && !branch {
        return err!("{origin} is {}, not {version}", describe(&found));
    }
    Ok(Source {
        version: if branch { version.to_string() } else { found },
        nginx,
        tree,
        identity,
        origin,
    })
}

/// `--sha256`, when given, must be the tarball's.
fn given_sha256(path: &Path, got: &str, opts: &Options) -> Result {
    match &opts.sha256 {
        Some(want) if !got.eq_ignore_ascii_case(want.trim()) => err!(
            "{}: SHA-256 {got}, not the {want} given with --sha256; refusing to build from it",
            path.display()
        ),
        _ => Ok(()),
    }
}

/// `nginx 1.30.4`, or a fork's name as it is.
fn describe(name: &str) -> String {
    if is_release(name) {
        format!("nginx {name}")
    } else {
        name.to_string()
    }
}

#[cfg(test)]
mod tests;
