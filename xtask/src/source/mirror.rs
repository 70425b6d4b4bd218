//! The mirror directories (`GENERATION_RETRY_NGINX_MIRROR`): which holds a
//! source's tarball, and whether its `SHA256SUMS` (or a `.asc` beside it)
//! vouches for it.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};

use super::download::signature_check;
use super::trees::{sha256, unpack};
use super::{tarball_name, Options};
use crate::workspace::{At, Result};

/// The mirror directory's environment variable.
pub const MIRROR_ENV: &str = "GENERATION_RETRY_NGINX_MIRROR";

/// The mirror directories, in the order given (none when unset).
pub fn mirrors() -> Vec<PathBuf> {
    env::var_os(MIRROR_ENV)
        .map(|v| {
            env::split_paths(&v)
                .filter(|p| !p.as_os_str().is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// The first mirror directory, when one is configured.
pub fn mirror() -> Option<PathBuf> {
    mirrors().into_iter().next()
}

/// A source tree of `name` (e.g. `nginx-tests`) from the first mirror that
/// holds it, checked like an nginx tarball and unpacked; `None` when no
/// mirror does.
pub fn mirrored_tree(name: &str) -> Option<Result<PathBuf>> {
    let tarball = mirrors().iter().find_map(|m| mirrored(m, name))?;
    Some(check_mirrored(&tarball, &Options::default()).and_then(|sha| unpack(&tarball, &sha)))
}

/// The tarball of `name` in mirror directory `m`: `nginx-NAME.tar.gz`,
/// `NAME.tar.gz`, or the one `NAME-COMMIT.tar.gz` (a repository archive).
pub(super) fn mirrored(m: &Path, name: &str) -> Option<PathBuf> {
    for candidate in [tarball_name(name), format!("{name}.tar.gz")] {
        if m.join(&candidate).is_file() {
            return Some(m.join(candidate));
        }
    }
    let mut archives: Vec<PathBuf> = fs::read_dir(m)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|f| f.to_str())
                .and_then(|f| {
                    f.strip_prefix(name)?
                        .strip_prefix('-')?
                        .strip_suffix(".tar.gz")
                })
                .is_some_and(|commit| {
                    !commit.is_empty() && commit.bytes().all(|b| b.is_ascii_hexdigit())
                })
        })
        .collect();
    archives.sort();
    (archives.len() == 1).then(|| archives.remove(0))
}

/// A mirrored tarball must be listed in the mirror's `SHA256SUMS` or carry
/// a `.asc` signature beside it (both are checked when both are there);
/// returns its SHA-256.
pub(super) fn check_mirrored(path: &Path, opts: &Options) -> Result<String> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let sig = PathBuf::from(format!("{}.asc", path.display()));
    if sig.is_file() {
        signature_check(path, &sig, opts)?;
    }
    let sums = dir.join("SHA256SUMS");
    if listed_sha256(&sums, &name).is_ok() || !sig.is_file() {
        return check_listed(&sums, &name, path).map_err(|e| {
            if sig.is_file() {
                e
            } else {
                format!(
                    "{e}; the mirror has no .asc signature for it either: refusing to build \
                     from an unchecked tarball"
                )
                .into()
            }
        });
    }
    sha256(path)
}

/// `path` must have the SHA-256 that `sums` lists for `name`; returns it.
pub fn check_listed(sums: &Path, name: &str, path: &Path) -> Result<String> {
    let want = listed_sha256(sums, name)?;
    let got = sha256(path)?;
    if want == got {
        Ok(got)
    } else {
        err!(
            "{}: SHA-256 {got}, but {} says {want}; refusing to use it",
            path.display(),
            sums.display()
        )
    }
}

/// The SHA-256 a `SHA256SUMS` file (`sha256sum`'s output) gives `name`.
pub fn listed_sha256(sums: &Path, name: &str) -> Result<String> {
    let text = fs::read_to_string(sums).at(sums)?;
    text.lines()
        .filter_map(|l| l.split_once(char::is_whitespace))
        .find(|(_, file)| file.trim().trim_start_matches('*') == name)
        .map(|(sum, _)| sum.to_string())
        .ok_or(format!("{} lists no {name}", sums.display()).into())
}
