//! The nginx versions the project builds, patches and tests, and where each
//! one's source comes from.
//!
//! - 1.28.0, the default, is built by nginx-sys from the `nginx-src` crate
//!   (`vendored`), as it always was.
//! - 1.28.3 comes from the `nginx-src` crate release that carries it, 1.30.4
//!   and 1.31.4 from the mirror (`GENERATION_RETRY_NGINX_MIRROR`, which CI
//!   points at `../shared/nginx`) or nginx.org, each checked before use
//!   (`source.rs`).
//! - `--nginx-source PATH` names any nginx source instead: an nginx.org
//!   release tarball (`./configure` at the top), a repository archive or
//!   checkout (`auto/configure`), as a directory or a `.tar.gz`.
//!
//! Every version is configured with the same flags ([`FLAGS`], those of the
//! vendored build), and the module is built against each tree's own `objs`
//! (`NGINX_BUILD_DIR`), so bindings, structure layouts and the module
//! signature are that version's: nothing is written per version.

use std::path::{Path, PathBuf};

pub use crate::source::{tree_version, Source};
use crate::workspace::Result;

pub use crate::workspace::DEFAULT;

/// What CI runs on a codebase of [`CODEBASES`] (`harness::matrix_tests`
/// names the suite's modules of each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Runs {
    /// The default: every test of the workspace, the external builds,
    /// the memcheck subset.
    Whole,
    /// The newest release: the matrix tests. Its patch series is the
    /// canonical one (`patches.rs`), and the mutants of the patches meet
    /// its code, where `sticky` (1.29.6) and `least_time` (1.31.0) exist.
    Newest,
    /// A stable release: the matrix tests but the layout gate and the
    /// install, which the newest proves on the same ground.
    Stable,
    /// nginx code another row already meets (1.28.0's line, the newest's
    /// development branch): the races, the directive matrix, the empty
    /// list.
    Twin,
    /// Tengine: what runs on a twin (its empty-list crash proven).
    Tengine,
    /// Angie: no module builds for it; the races of stock and patched.
    Angie,
}

impl Runs {
    /// What CI proves on a codebase of this kind, and the install's source
    /// when the kind alone decides it: the README's table (`docs.rs`).
    pub const fn proven(self) -> (&'static str, Option<&'static str>) {
        match self {
            Runs::Whole => ("the whole suite, memcheck", None),
            Runs::Newest => ("the matrix tests", None),
            Runs::Stable => ("the matrix tests but the layout gate and the install", None),
            Runs::Twin => ("the races, the directives, the empty list", None),
            Runs::Tengine => (
                "the races, the directives, the empty list ([one limit](#tengine-and-angie))",
                None,
            ),
            Runs::Angie => (
                "stock fails, patched rescues (http, stream, every protocol)",
                Some("no module: [the patch](#tengine-and-angie)"),
            ),
        }
    }
}

/// A codebase CI builds and tests: its name (`--nginx NAME`: a release,
/// `master-COMMIT`, `tengine-X.Y.Z`, `angie-X.Y.Z`; where its source comes
/// from, `source.rs` says by the name) and what runs on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Codebase {
    pub name: &'static str,
    pub runs: Runs,
}

/// Every codebase CI builds and tests, the default first: nginx's
/// releases, its development branch at a commit, Angie (no module: its
/// stock and patched builds) and Tengine (nginx 1.31.3 inside), whose
/// sources come from the mirror (`../shared/nginx` and `../shared/forks`
/// in CI) or `--nginx-source`. Adding a release is a row here, its
/// patch series (`cargo xtask patches --derive`) and `cargo xtask docs`
/// (the docs' tables of versions): docs/extending.md.
pub const CODEBASES: &[Codebase] = &[
    row(DEFAULT, Runs::Whole),
    row("1.28.3", Runs::Twin),
    row("1.30.4", Runs::Stable),
    row("1.31.4", Runs::Newest),
    row("master-3f6f782", Runs::Twin),
    row("angie-1.12.1", Runs::Angie),
    row("tengine-3.2.0", Runs::Tengine),
];

const fn row(name: &'static str, runs: Runs) -> Codebase {
    Codebase { name, runs }
}

/// The names of [`CODEBASES`], in order.
pub const MATRIX: &[&str] = &names::<{ CODEBASES.len() }>();

const fn names<const N: usize>() -> [&'static str; N] {
    let mut out = [""; N];
    let mut i = 0;
    while i < N {
        out[i] = CODEBASES[i].name;
        i += 1;
    }
    out
}

/// The newest release: the one row that [`Runs::Newest`].
pub const NEWEST: &str = newest();

const fn newest() -> &'static str {
    let mut i = 0;
    while i < CODEBASES.len() {
        if matches!(CODEBASES[i].runs, Runs::Newest) {
            return CODEBASES[i].name;
        }
        i += 1;
    }
    panic!("no row of CODEBASES runs Runs::Newest")
}

/// What runs on `name`: its row's, else (a tree of the user's,
/// `--nginx-source`) the whole suite on a release, a twin's on a fork.
pub fn runs(name: &str) -> Runs {
    CODEBASES.iter().find(|c| c.name == name).map_or_else(
        || match name {
            n if n.starts_with("tengine-") => Runs::Tengine,
            n if n.starts_with("angie-") => Runs::Angie,
            _ => Runs::Whole,
        },
        |c| c.runs,
    )
}

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
#[derive(Clone, Debug, PartialEq, Eq)]
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
}

/// `--nginx VERSION|all` and `--nginx-source PATH`: the options of
/// `nginx-test`, `nginx-tests`, `lab`, `bench` and `soak` (`build` takes
/// `--nginx` alone, its `--nginx-source` being `--for`'s too).
#[derive(clap::Args, Debug, Default)]
pub struct Nginx {
    #[arg(long, value_name = "VERSION|all", value_parser = which, help = nginx_help())]
    pub nginx: Option<Which>,
    /// an nginx source tree or .tar.gz of your own (the version is the tree's)
    #[arg(long, value_name = "PATH")]
    pub nginx_source: Option<PathBuf>,
}

/// What `--nginx` says in `--help`: the default and the matrix, from here.
pub fn nginx_help() -> String {
    format!(
        "one nginx (default {DEFAULT}): a release X.Y.Z, master-COMMIT, tengine-X.Y.Z or \
         angie-X.Y.Z; all: CI's versions, {}",
        MATRIX.join(", ")
    )
}

/// `--nginx`'s value: `all`, or a version [`source`] knows how to obtain.
pub fn which(v: &str) -> std::result::Result<Which, String> {
    match v {
        "all" => Ok(Which::All),
        v if crate::source::is_release(v) || crate::source::is_codebase(v) => {
            Ok(Which::One(v.to_string()))
        }
        _ => Err(
            "expected a version such as 1.30.4, nginx's development branch as \
             master-COMMIT, tengine-X.Y.Z, angie-X.Y.Z, or all"
                .into(),
        ),
    }
}

/// What `--nginx` and `--nginx-source` select: without `--nginx`,
/// [`DEFAULT`], or the source's own version (empty) when one is named.
pub fn selection(nginx: Option<&Which>, source: Option<&Path>) -> Result<Selection> {
    let which = match (nginx, source) {
        (Some(Which::All), Some(_)) => {
            return Err("--nginx-source names one nginx; it cannot go with --nginx all".into())
        }
        (Some(w), _) => w.clone(),
        (None, Some(_)) => Which::One(String::new()),
        (None, None) => Which::One(DEFAULT.to_string()),
    };
    let source = source.map(Path::to_path_buf);
    Ok(Selection { which, source })
}

impl Nginx {
    pub fn selection(&self) -> Result<Selection> {
        selection(self.nginx.as_ref(), self.nginx_source.as_deref())
    }

    /// For a command that runs one nginx (`lab`, `bench`, `soak`): the
    /// version (empty when the source names it) and its source.
    pub fn one(&self) -> Result<(String, Option<PathBuf>)> {
        match self.selection()? {
            Selection {
                which: Which::One(version),
                source,
            } => Ok((version, source)),
            _ => Err(
                "--nginx all: this command runs one nginx; name a version such as 1.31.4".into(),
            ),
        }
    }
}

/// A pristine nginx source tree for `version` (`source.rs` says from where
/// and how it is checked): `user` if named, else the mirror, the crate or a
/// download.
pub fn source(version: &str, user: Option<&Path>) -> Result<Source> {
    crate::source::obtain(
        version,
        &crate::source::Options {
            user: user.map(Path::to_path_buf),
            ..Default::default()
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::Origin;

    #[test]
    fn the_default_is_the_nginx_the_pinned_nginx_src_crate_carries() {
        // t/src/nginx/builds.rs reads the same line of Cargo.lock.
        let lock = std::fs::read_to_string(crate::workspace::root().join("Cargo.lock")).unwrap();
        let pinned = lock
            .split("\n[[package]]\n")
            .find(|p| p.starts_with("name = \"nginx-src\"\n"))
            .and_then(|p| p.lines().find_map(|l| l.strip_prefix("version = \"")))
            .map(|v| v.trim_end_matches('"').to_string())
            .expect("nginx-src in Cargo.lock");
        assert_eq!(pinned.split_once('+').map(|(_, n)| n), Some(DEFAULT));
        let carried = crate::source::crates_io::CRATES
            .iter()
            .find(|(n, _)| *n == DEFAULT);
        assert_eq!(carried.map(|(_, c)| *c), Some(pinned.as_str()));
    }

    #[test]
    fn every_matrix_version_has_a_source_without_nginx_org() {
        // From the crate, or from the mirror where one is configured (CI's
        // ../shared/nginx): never a download the suite cannot make.
        assert_eq!(MATRIX[0], DEFAULT);
        let mirror = crate::source::mirror();
        for v in MATRIX {
            match crate::source::origin(v, &Default::default()) {
                Origin::Crate(_) => {}
                Origin::Mirror(p) => {
                    let sums = p.parent().unwrap().join("SHA256SUMS");
                    let name = p.file_name().unwrap().to_string_lossy().into_owned();
                    assert_eq!(
                        crate::source::listed_sha256(&sums, &name).unwrap().len(),
                        64
                    );
                }
                o if mirror.is_none() => eprintln!("{v}: {o} (no mirror configured)"),
                o => panic!("{v}: {o}, although the mirror is configured"),
            }
        }
    }

    #[test]
    fn the_table_has_one_default_first_and_one_newest_the_highest_release() {
        assert_eq!(CODEBASES[0], row(DEFAULT, Runs::Whole));
        let whole = CODEBASES.iter().filter(|c| c.runs == Runs::Whole);
        assert_eq!(whole.count(), 1);
        let newest: Vec<&Codebase> = CODEBASES
            .iter()
            .filter(|c| c.runs == Runs::Newest)
            .collect();
        assert_eq!(newest, [&row(NEWEST, Runs::Newest)]);
        let release =
            |n: &str| -> Option<Vec<u32>> { n.split('.').map(|p| p.parse().ok()).collect() };
        let highest = MATRIX.iter().filter_map(|n| release(n)).max();
        assert_eq!(release(NEWEST), highest);
        assert_eq!(MATRIX.len(), CODEBASES.len());
    }

    #[test]
    fn every_matrix_version_has_its_patches() {
        for v in MATRIX {
            let p = crate::patched::patches(v).unwrap();
            assert!(p.len() >= 2, "nginx-src-patches/{v}: {p:?}");
        }
    }
}
