//! The nginx versions the project builds, patches and tests, and where each
//! one's source comes from.
//!
//! - 1.28.0, the default, is built by nginx-sys from the `nginx-src` crate
//!   (`vendored`), as it always was.
//! - 1.28.3, 1.30.4 and 1.31.4 come from the pinned tarballs in
//!   `../shared/nginx/`, checked against its `SHA256SUMS` before use.
//! - `--nginx-source PATH` names any nginx source instead: an nginx.org
//!   release tarball (`./configure` at the top), a repository archive or
//!   checkout (`auto/configure`), as a directory or a `.tar.gz`.
//!
//! Every version is configured with the same flags ([`FLAGS`], those of the
//! vendored build), and the module is built against each tree's own `objs`
//! (`NGINX_BUILD_DIR`), so bindings, structure layouts and the module
//! signature are that version's: nothing is written per version.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::tree::{files, fnv1a, is_build_output, run_quiet};
use crate::workspace::{root, target_dir, Result, NGINX_VERSION};

/// The version `cargo xtask build` and `nginx-test` use without `--nginx`.
pub const DEFAULT: &str = NGINX_VERSION;

/// Every version CI builds and tests, the default first.
pub const MATRIX: &[&str] = &["1.28.0", "1.28.3", "1.30.4", "1.31.4"];

/// The configure flags of every build: those nginx-src gives the vendored
/// 1.28.0 (checked against its `last-build-info` when it is built), so a
/// module built for one tree loads into the stock and the patched nginx of
/// that version alike.
pub const FLAGS: &[&str] = &[
    "--with-compat",
    "--with-http_realip_module",
    "--with-http_ssl_module",
    "--with-http_v2_module",
    "--with-stream",
    "--with-stream_realip_module",
    "--with-stream_ssl_module",
    "--with-threads",
];

/// What `--nginx` (and `--nginx-source`) asked for.
#[derive(Debug, PartialEq, Eq)]
pub enum Which {
    /// One version (the default when `--nginx` is absent).
    One(String),
    /// Every version of [`MATRIX`].
    All,
}

/// The options shared by `build` and `nginx-test`.
#[derive(Debug, PartialEq, Eq)]
pub struct Selection {
    pub which: Which,
    pub source: Option<PathBuf>,
    /// `--for BINARY`: build for that nginx (`build` only).
    pub for_binary: Option<PathBuf>,
}

/// Parses `--nginx VERSION|all` and `--nginx-source PATH` (also as
/// `--opt=value`); returns them and the arguments after `--`.
pub fn parse(args: &[String]) -> Result<(Selection, Vec<String>)> {
    let mut version = None;
    let mut source = None;
    let mut for_binary = None;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        if arg == "--" {
            break;
        }
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (arg.as_str(), None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or(format!("{name} needs a value"))
        };
        match name {
            "--nginx" => version = Some(value()?),
            "--nginx-source" => source = Some(PathBuf::from(value()?)),
            "--for" => for_binary = Some(PathBuf::from(value()?)),
            other => {
                return Err(format!(
                    "unknown option `{other}` (options: --nginx VERSION|all, \
                     --nginx-source PATH, --for NGINX_BINARY; test filters go after `--`)"
                ))
            }
        }
    }
    let rest: Vec<String> = it.cloned().collect();
    if for_binary.is_some() && version.is_some() {
        return Err("--for reads the version from the binary; leave out --nginx".into());
    }
    let which = match version.as_deref() {
        Some("all") => {
            if source.is_some() {
                return Err("--nginx-source names one nginx; it cannot go with --nginx all".into());
            }
            Which::All
        }
        Some(v) => {
            if !is_version(v) {
                return Err(format!(
                    "--nginx {v}: expected a version such as 1.30.4, or all"
                ));
            }
            Which::One(v.to_string())
        }
        // With a source of its own, the version is the source's.
        None if source.is_some() => Which::One(String::new()),
        None => Which::One(DEFAULT.to_string()),
    };
    Ok((
        Selection {
            which,
            source,
            for_binary,
        },
        rest,
    ))
}

fn is_version(v: &str) -> bool {
    let parts: Vec<&str> = v.split('.').collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// `../shared/nginx`: the pinned tarballs and Debian packages.
pub fn shared_nginx() -> PathBuf {
    root().join("../shared/nginx")
}

/// The SHA-256 the pinned `SHA256SUMS` gives for `name` (a path relative to
/// `../shared/nginx`).
pub fn pinned_sha256(name: &str) -> Result<String> {
    let sums = shared_nginx().join("SHA256SUMS");
    let text = fs::read_to_string(&sums).map_err(|e| format!("{}: {e}", sums.display()))?;
    text.lines()
        .filter_map(|l| l.split_once(char::is_whitespace))
        .find(|(_, file)| file.trim().trim_start_matches('*') == name)
        .map(|(sum, _)| sum.to_string())
        .ok_or(format!("{} lists no {name}", sums.display()))
}

/// `sha256sum FILE` (coreutils).
pub fn sha256(file: &Path) -> Result<String> {
    let out = Command::new("sha256sum")
        .arg(file)
        .output()
        .map_err(|e| format!("cannot run sha256sum: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "sha256sum {}: {}",
            file.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .map(str::to_string)
        .ok_or("sha256sum printed nothing".into())
}

/// A file that must match its pinned checksum.
pub fn verified(name: &str) -> Result<PathBuf> {
    let path = shared_nginx().join(name);
    if !path.is_file() {
        return Err(format!(
            "{} is missing (see ../shared/nginx/README.md)",
            path.display()
        ));
    }
    let (want, got) = (pinned_sha256(name)?, sha256(&path)?);
    if want != got {
        return Err(format!(
            "{}: SHA-256 {got}, but SHA256SUMS says {want}; refusing to build from it",
            path.display()
        ));
    }
    Ok(path)
}

/// A pristine nginx source tree, and what identifies its contents.
pub struct Source {
    pub version: String,
    pub tree: PathBuf,
    pub identity: String,
}

/// Where the source of a non-vendored build comes from: `user` if named,
/// else the pinned tarball of `version`. Tarballs are checked, then
/// unpacked once under `target/nginx/sources/`.
pub fn source(version: &str, user: Option<&Path>) -> Result<Source> {
    let (tree, identity) = match user {
        Some(path) if path.is_dir() => (path.to_path_buf(), tree_identity(path)?),
        Some(path) if path.is_file() => {
            let sha = sha256(path)?;
            (unpack(path, &sha)?, sha)
        }
        Some(path) => {
            return Err(format!(
                "--nginx-source {}: no such file or directory",
                path.display()
            ))
        }
        None => {
            let name = format!("nginx-{version}.tar.gz");
            let tarball = verified(&name).map_err(|e| {
                format!(
                    "no pinned source for nginx {version} ({e}); name one with --nginx-source PATH"
                )
            })?;
            let sha = pinned_sha256(&name)?;
            (unpack(&tarball, &sha)?, sha)
        }
    };
    let found = tree_version(&tree)?;
    if !version.is_empty() && found != version {
        return Err(format!(
            "{} is nginx {found}, not {version}",
            user.map_or(tree.clone(), Path::to_path_buf).display()
        ));
    }
    Ok(Source {
        version: found,
        tree,
        identity,
    })
}

/// `NGINX_VERSION` of `src/core/nginx.h`.
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
        .ok_or(format!("{} defines no NGINX_VERSION", header.display()))
}

/// Unpacks a `.tar.gz` holding one top directory (both nginx.org's release
/// tarballs and repository archives do) into `target/nginx/sources/<sha>`.
fn unpack(tarball: &Path, sha: &str) -> Result<PathBuf> {
    let dest = target_dir().join("nginx/sources").join(&sha[..16]);
    let done = dest.join(".unpacked");
    if done.is_file() {
        return Ok(dest);
    }
    let _ = fs::remove_dir_all(&dest);
    fs::create_dir_all(&dest).map_err(|e| format!("{}: {e}", dest.display()))?;
    run_quiet(
        Command::new("tar")
            .arg("-xzf")
            .arg(tarball)
            .arg("--strip-components=1")
            .arg("-C")
            .arg(&dest),
    )?;
    fs::write(&done, sha).map_err(|e| format!("{}: {e}", done.display()))?;
    Ok(dest)
}

/// What a user's source directory holds: every file's path, size and
/// modification time (a configured tree's `objs` and `Makefile` left out),
/// so an edited tree is rebuilt and an untouched one is not.
pub fn tree_identity(tree: &Path) -> Result<String> {
    let mut entries = Vec::new();
    for path in files(tree, &is_build_output)? {
        let meta = fs::metadata(&path).map_err(|e| format!("{}: {e}", path.display()))?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn options_and_filters_are_parsed() {
        let (s, rest) = parse(&args("--nginx 1.30.4 -- race --exact")).unwrap();
        assert_eq!(s.which, Which::One("1.30.4".into()));
        assert_eq!(rest, args("race --exact"));
        let (s, rest) = parse(&args("--nginx=all")).unwrap();
        assert_eq!((s.which, rest.len()), (Which::All, 0));
        let (s, _) = parse(&[]).unwrap();
        assert_eq!(s.which, Which::One(DEFAULT.into()));
        let (s, _) = parse(&args("--nginx-source /src/nginx-1.29.0")).unwrap();
        assert_eq!(s.which, Which::One(String::new()));
        assert_eq!(s.source, Some(PathBuf::from("/src/nginx-1.29.0")));
    }

    #[test]
    fn bad_options_are_refused_with_what_was_wrong() {
        for (a, said) in [
            ("--nginx", "--nginx needs a value"),
            ("--nginx 1.30", "expected a version"),
            ("--nginx latest", "expected a version"),
            ("--frobnicate", "unknown option `--frobnicate`"),
            (
                "--nginx all --nginx-source x.tar.gz",
                "cannot go with --nginx all",
            ),
        ] {
            let err = parse(&args(a)).unwrap_err();
            assert!(err.contains(said), "{a}: {err}");
        }
    }

    #[test]
    fn every_matrix_version_has_a_pinned_source_or_is_vendored() {
        assert_eq!(MATRIX[0], DEFAULT);
        for v in &MATRIX[1..] {
            let sum = pinned_sha256(&format!("nginx-{v}.tar.gz")).unwrap();
            assert_eq!(sum.len(), 64, "{v}: {sum}");
        }
    }

    #[test]
    fn every_matrix_version_has_its_patches() {
        for v in MATRIX {
            let p = crate::patched::patches(v).unwrap();
            assert!(p.len() >= 2, "nginx-src-patches/{v}: {p:?}");
        }
    }

    #[test]
    fn the_version_is_read_from_nginx_h() {
        let dir = std::env::temp_dir().join(format!("xtask-ver-{}", std::process::id()));
        fs::create_dir_all(dir.join("src/core")).unwrap();
        fs::write(
            dir.join("src/core/nginx.h"),
            "#define nginx_version      1031004\n#define NGINX_VERSION      \"1.31.4\"\n",
        )
        .unwrap();
        assert_eq!(tree_version(&dir).unwrap(), "1.31.4");
        let _ = fs::remove_dir_all(&dir);
        assert!(tree_version(&dir)
            .unwrap_err()
            .contains("not an nginx source tree"));
    }
}
