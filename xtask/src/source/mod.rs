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

mod pgp;

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::tree::{files, fnv1a, is_build_output, run_quiet};
use crate::workspace::{cargo, target_dir, Result};

pub use pgp::release_keys;

/// The mirror directory's environment variable.
pub const MIRROR_ENV: &str = "GENERATION_RETRY_NGINX_MIRROR";
/// Where releases are downloaded from (default [`NGINX_ORG`]).
pub const URL_ENV: &str = "GENERATION_RETRY_NGINX_URL";
/// The download cache's environment variable.
pub const CACHE_ENV: &str = "GENERATION_RETRY_CACHE";
pub const NGINX_ORG: &str = "https://nginx.org/download";

/// The releases of the `nginx-src` crate, by the nginx they carry (the
/// newest crate release for each): crates.io's index on 2026-12-02.
pub const CRATES: &[(&str, &str)] = &[
    ("1.28.0", "1.28.1+1.28.0"),
    ("1.28.1", "1.28.3+1.28.1"),
    ("1.28.2", "1.28.4+1.28.2"),
    ("1.28.3", "1.28.5+1.28.3"),
];

/// How a source is obtained and checked.
#[derive(Debug, Default)]
pub struct Options {
    /// `--nginx-source PATH`.
    pub user: Option<PathBuf>,
    /// `--sha256 HEX`: a downloaded tarball is accepted by this instead of
    /// its signature.
    pub sha256: Option<String>,
    /// `--signing-keys DIR`: armored public keys instead of `xtask/keys/`.
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

/// A source tree of `name` (e.g. `nginx-tests`) from the first mirror that
/// holds it, checked like an nginx tarball and unpacked; `None` when no
/// mirror does.
pub fn mirrored_tree(name: &str) -> Option<Result<PathBuf>> {
    let tarball = mirrors().iter().find_map(|m| mirrored(m, name))?;
    Some(check_mirrored(&tarball, &Options::default()).and_then(|sha| unpack(&tarball, &sha)))
}

/// The tarball of `name` in mirror directory `m`: `nginx-NAME.tar.gz`,
/// `NAME.tar.gz`, or the one `NAME-COMMIT.tar.gz` (a repository archive).
fn mirrored(m: &Path, name: &str) -> Option<PathBuf> {
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
    let origin = origin(version, opts);
    let (tree, identity) = match &origin {
        Origin::User(path) if path.is_dir() => (path.clone(), tree_identity(path)?),
        Origin::User(path) if path.is_file() => {
            let sha = sha256(path)?;
            given_sha256(path, &sha, opts)?;
            (unpack(path, &sha)?, sha)
        }
        Origin::User(path) => {
            return Err(format!(
                "--nginx-source {}: no such file or directory",
                path.display()
            ))
        }
        Origin::Mirror(path) => {
            let sha = check_mirrored(path, opts)?;
            given_sha256(path, &sha, opts)?;
            (unpack(path, &sha)?, sha)
        }
        Origin::Crate(krate) => {
            if opts.sha256.is_some() {
                return Err(format!(
                    "--sha256 checks a tarball, and nginx {version} comes from {origin} \
                     (checked by cargo against crates.io's checksum): leave --sha256 out, or \
                     name the tarball with --nginx-source"
                ));
            }
            from_crate(krate)?
        }
        Origin::Download(_) if !is_release(version) && !version.is_empty() => {
            return Err(format!(
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
            ))
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
        return Err(format!("{origin} is {}, not {version}", describe(&found)));
    }
    Ok(Source {
        version: if branch { version.to_string() } else { found },
        nginx,
        tree,
        identity,
        origin,
    })
}

/// A mirrored tarball must be listed in the mirror's `SHA256SUMS` or carry
/// a `.asc` signature beside it (both are checked when both are there);
/// returns its SHA-256.
fn check_mirrored(path: &Path, opts: &Options) -> Result<String> {
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
        Err(format!(
            "{}: SHA-256 {got}, but {} says {want}; refusing to use it",
            path.display(),
            sums.display()
        ))
    }
}

/// `--sha256`, when given, must be the tarball's.
fn given_sha256(path: &Path, got: &str, opts: &Options) -> Result {
    match &opts.sha256 {
        Some(want) if !got.eq_ignore_ascii_case(want.trim()) => Err(format!(
            "{}: SHA-256 {got}, not the {want} given with --sha256; refusing to build from it",
            path.display()
        )),
        _ => Ok(()),
    }
}

/// The SHA-256 a `SHA256SUMS` file (`sha256sum`'s output) gives `name`.
pub fn listed_sha256(sums: &Path, name: &str) -> Result<String> {
    let text = fs::read_to_string(sums).map_err(|e| format!("{}: {e}", sums.display()))?;
    text.lines()
        .filter_map(|l| l.split_once(char::is_whitespace))
        .find(|(_, file)| file.trim().trim_start_matches('*') == name)
        .map(|(sum, _)| sum.to_string())
        .ok_or(format!("{} lists no {name}", sums.display()))
}

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
fn download_checked(url: &str, opts: &Options) -> Result<PathBuf> {
    let name = url.rsplit('/').next().unwrap_or(url);
    let dir = cache_dir().join("nginx");
    fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
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
fn signature_check(file: &Path, sig: &Path, opts: &Options) -> Result<String> {
    let keys = opts.keys.clone().unwrap_or_else(release_keys);
    let ring = target_dir().join(format!("nginx-keyring-{}.gpg", std::process::id()));
    fs::create_dir_all(target_dir()).map_err(|e| e.to_string())?;
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

/// `curl` to `dest` (written beside, then renamed: never half a file).
fn download(url: &str, dest: &Path) -> Result {
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
        return Err(format!(
            "downloading {url} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    fs::rename(&part, dest).map_err(|e| format!("{}: {e}", dest.display()))
}

/// The `nginx/` tree of the `nginx-src` crate release `krate`, which cargo
/// fetches from crates.io (checked against the registry's checksum) into
/// its own cache, through a stub package that depends on exactly it.
fn from_crate(krate: &str) -> Result<(PathBuf, String)> {
    let stub = target_dir().join("nginx/crates").join(krate);
    fs::create_dir_all(stub.join("src")).map_err(|e| format!("{}: {e}", stub.display()))?;
    let plain = krate.split('+').next().unwrap_or(krate);
    fs::write(
        stub.join("Cargo.toml"),
        format!(
            "[package]\nname = \"nginx-src-fetch\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\
             publish = false\n\n[dependencies]\nnginx-src = \"={plain}\"\n\n[workspace]\n"
        ),
    )
    .map_err(|e| e.to_string())?;
    fs::write(stub.join("src/lib.rs"), "").map_err(|e| e.to_string())?;
    let out = cargo()
        .current_dir(&stub)
        .args(["metadata", "--format-version", "1"])
        .env_remove("CARGO_TARGET_DIR")
        .output()
        .map_err(|e| format!("cannot run cargo metadata: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo could not fetch nginx-src {krate}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("cargo metadata printed no JSON: {e}"))?;
    let manifest = meta["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == "nginx-src" && p["version"] == krate)
        .and_then(|p| p["manifest_path"].as_str())
        .ok_or(format!("cargo metadata lists no nginx-src {krate}"))?;
    let tree = Path::new(manifest)
        .parent()
        .map(|d| d.join("nginx"))
        .ok_or("nginx-src's manifest has no directory")?;
    Ok((tree, format!("nginx-src {krate}")))
}

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

/// `nginx 1.30.4`, or a fork's name as it is.
fn describe(name: &str) -> String {
    if is_release(name) {
        format!("nginx {name}")
    } else {
        name.to_string()
    }
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
        .ok_or(format!("{} defines no NGINX_VERSION", header.display()))
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

    #[test]
    fn the_origin_follows_the_documented_order() {
        let none = Options::default();
        let user = Options {
            user: Some("/src/nginx".into()),
            ..Options::default()
        };
        assert_eq!(
            origin_with("1.30.4", &user, &[]),
            Origin::User("/src/nginx".into())
        );
        assert_eq!(
            origin_with("1.28.3", &none, &[]),
            Origin::Crate("1.28.5+1.28.3".into())
        );
        match origin_with("1.29.0", &none, &[]) {
            Origin::Download(url) => assert!(url.ends_with("/nginx-1.29.0.tar.gz"), "{url}"),
            o => panic!("1.29.0 has no crate and no mirror: {o:?}"),
        }
        // A mirror holding the tarball comes before the crate and a
        // download; one without it changes nothing.
        let m = std::env::temp_dir().join(format!("xtask-mirror-{}", std::process::id()));
        fs::create_dir_all(&m).unwrap();
        fs::write(m.join("nginx-1.28.3.tar.gz"), b"").unwrap();
        assert_eq!(
            origin_with("1.28.3", &none, std::slice::from_ref(&m)),
            Origin::Mirror(m.join("nginx-1.28.3.tar.gz"))
        );
        assert!(matches!(
            origin_with("1.29.0", &none, std::slice::from_ref(&m)),
            Origin::Download(_)
        ));
        let _ = fs::remove_dir_all(&m);
    }

    /// Several mirrors are searched in order, and a codebase that is no
    /// release is found by its repository archive's name; with no mirror
    /// holding it, it is refused with the way to name its source, before
    /// anything is downloaded.
    #[test]
    fn codebases_come_from_a_mirror_or_the_operator() {
        let base = std::env::temp_dir().join(format!("xtask-mirrors-{}", std::process::id()));
        let (nginx, forks) = (base.join("nginx"), base.join("forks"));
        for (dir, file) in [
            (&nginx, "nginx-master-3f6f782.tar.gz"),
            (&nginx, "nginx-1.31.4.tar.gz"),
            (&forks, "tengine-3.2.0-fcebbd1.tar.gz"),
            (&forks, "tengine-3.1.0-aaaaaaa.tar.gz"),
            (&forks, "tengine-3.1.0-bbbbbbb.tar.gz"),
        ] {
            fs::create_dir_all(dir).unwrap();
            fs::write(dir.join(file), b"").unwrap();
        }
        let none = Options::default();
        let both = [nginx.clone(), forks.clone()];
        assert_eq!(
            origin_with("master-3f6f782", &none, &both),
            Origin::Mirror(nginx.join("nginx-master-3f6f782.tar.gz"))
        );
        assert_eq!(
            origin_with("tengine-3.2.0", &none, &both),
            Origin::Mirror(forks.join("tengine-3.2.0-fcebbd1.tar.gz"))
        );
        // Two archives of one name: which is meant is not guessed.
        assert!(matches!(
            origin_with("tengine-3.1.0", &none, &both),
            Origin::Download(_)
        ));
        // `tengine-3.2` is no prefix of `tengine-3.2.0-...`'s name.
        assert!(mirrored(&forks, "tengine-3.2").is_none());
        let err = obtain("tengine-3.1.0", &none).err().unwrap();
        assert!(
            err.contains("not an nginx.org release") && err.contains("--nginx-source"),
            "{err}"
        );
        assert!(is_codebase("master-3f6f782") && is_codebase("tengine-3.2.0"));
        assert!(is_codebase("angie-1.12.1") && !is_codebase("angie-1.12"));
        assert!(!is_codebase("master-xyz1234") && !is_codebase("tengine-3.2"));
        assert!(!is_codebase("master-3f6f") && !is_release("master-3f6f782"));
        let _ = fs::remove_dir_all(&base);
    }

    /// A mirrored tarball is refused when its SHA256SUMS entry does not
    /// match or when neither an entry nor a signature vouches for it.
    #[test]
    fn a_mirrored_tarball_must_be_vouched_for() {
        let m = std::env::temp_dir().join(format!("xtask-mirror-chk-{}", std::process::id()));
        fs::create_dir_all(&m).unwrap();
        let t = m.join("nginx-1.30.4.tar.gz");
        fs::write(&t, b"tarball").unwrap();
        let opts = Options::default();
        let err = check_mirrored(&t, &opts).unwrap_err();
        assert!(
            err.contains("no .asc signature") && err.contains("refusing"),
            "{err}"
        );
        let good = sha256(&t).unwrap();
        fs::write(
            m.join("SHA256SUMS"),
            format!("{good}  nginx-1.30.4.tar.gz\n"),
        )
        .unwrap();
        assert_eq!(check_mirrored(&t, &opts).unwrap(), good);
        fs::write(&t, b"tarball, changed").unwrap();
        let err = check_mirrored(&t, &opts).unwrap_err();
        assert!(
            err.contains("but") && err.contains("refusing to use it"),
            "{err}"
        );
        let wrong = Options {
            sha256: Some("0".repeat(64)),
            ..Options::default()
        };
        let err = given_sha256(&t, &good, &wrong).unwrap_err();
        assert!(err.contains("given with --sha256"), "{err}");
        let _ = fs::remove_dir_all(&m);
    }

    #[test]
    fn every_crate_release_is_newest_for_its_nginx() {
        for (nginx, krate) in CRATES {
            assert_eq!(krate.split('+').nth(1), Some(*nginx), "{krate}");
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
        assert_eq!(tree_name(&dir).unwrap(), "1.31.4");
        fs::write(
            dir.join("src/core/nginx.h"),
            "#define NGINX_VERSION      \"1.31.3\"\n#define TENGINE_VERSION    \"3.2.0\"\n",
        )
        .unwrap();
        assert_eq!(tree_version(&dir).unwrap(), "1.31.3");
        assert_eq!(tree_name(&dir).unwrap(), "tengine-3.2.0");
        fs::write(
            dir.join("src/core/nginx.h"),
            "#define NGINX_VERSION      \"1.31.2\"\n",
        )
        .unwrap();
        fs::write(
            dir.join("src/core/angie.h"),
            "#define ANGIE_VERSION      \"1.12.1\"\n#define ANGIE_VER  \"Angie/\" ANGIE_VERSION\n",
        )
        .unwrap();
        assert_eq!(tree_name(&dir).unwrap(), "angie-1.12.1");
        let _ = fs::remove_dir_all(&dir);
        assert!(tree_version(&dir)
            .unwrap_err()
            .contains("not an nginx source tree"));
    }
}
