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
}

/// What `build`, `nginx-test` and `nginx-tests` do, by command.
const DOES: &[(&str, &str)] = &[
    (
        "build",
        "nginx, the patched nginx and the module, into target/nginx/VERSION/",
    ),
    (
        "nginx-test",
        "build, then the unit tests and the nginx integration suite \
         (--nginx all: CI's run)",
    ),
    (
        "nginx-tests",
        "build, then nginx's own test suite (nginx-tests), four ways",
    ),
];

/// `cargo xtask COMMAND --help` for the commands whose options [`parse`]
/// reads (`build`, `nginx-test`, `nginx-tests`).
pub fn usage(command: &str) -> String {
    let does = DOES
        .iter()
        .find(|(c, _)| *c == command)
        .map_or("", |(_, d)| d);
    let mut out = format!(
        "cargo xtask {command} [--nginx VERSION|all] [--nginx-source PATH]{}\n  {does}\n\n\
         \x20 --nginx VERSION|all   one nginx (default {DEFAULT}): a release X.Y.Z, master-COMMIT,\n\
         \x20                       tengine-X.Y.Z or angie-X.Y.Z; all: CI's versions,\n\
         \x20                       {}\n\
         \x20 --nginx-source PATH   an nginx source tree or .tar.gz of your own (the version\n\
         \x20                       is the tree's)\n",
        if command == "build" { "" } else { " [-- ARGS]" },
        MATRIX.join(", ")
    );
    if command == "build" {
        out.push_str(
            "  --for NGINX_BINARY    only the module, for that binary (its options:\n\
             \x20                       cargo xtask build --for BINARY --help)\n",
        );
    } else {
        out.push_str(
            "  -- ARGS               after `--`, to the test binaries (e.g. `race::`, a test path filter)\n",
        );
    }
    out.push_str("  --help, -h            this");
    out
}

/// Whether `args` ask for `--help` (or `-h`) before any `--` (what follows
/// it is the test binaries'): then [`usage`] is printed.
pub fn help(command: &str, args: &[String]) -> bool {
    print_help(args, &usage(command))
}

/// Whether `args` ask for `--help` (or `-h`) before any `--` (what
/// follows it is the test binaries'): then `usage` is printed.
pub fn print_help(args: &[String], usage: &str) -> bool {
    let asked = args
        .iter()
        .take_while(|a| *a != "--")
        .any(|a| a == "--help" || a == "-h");
    if asked {
        println!("{usage}");
    }
    asked
}

/// Parses `--nginx VERSION|all` and `--nginx-source PATH` (also as
/// `--opt=value`); returns them and the arguments after `--`.
pub fn parse(args: &[String]) -> Result<(Selection, Vec<String>)> {
    let mut version = None;
    let mut source = None;
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
            other => {
                return Err(format!(
                    "unknown option `{other}` (options: --nginx VERSION|all, \
                     --nginx-source PATH; test filters go after `--`)"
                ))
            }
        }
    }
    let rest: Vec<String> = it.cloned().collect();
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
                    "--nginx {v}: expected a version such as 1.30.4, nginx's development \
                     branch as master-COMMIT, tengine-X.Y.Z, angie-X.Y.Z, or all"
                ));
            }
            Which::One(v.to_string())
        }
        // With a source of its own, the version is the source's.
        None if source.is_some() => Which::One(String::new()),
        None => Which::One(DEFAULT.to_string()),
    };
    Ok((Selection { which, source }, rest))
}

fn is_version(v: &str) -> bool {
    crate::source::is_release(v) || crate::source::is_codebase(v)
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

/// For a command whose other options are a harness binary's (`lab`,
/// `bench`): takes `--nginx VERSION` and `--nginx-source PATH` (also as
/// `--opt=value`) out of `args` and parses them; returns the selection,
/// one version (empty when the source names it), its source if given,
/// and every other argument in order.
pub fn parse_one_among(args: &[String]) -> Result<(String, Option<PathBuf>, Vec<String>)> {
    let (mut own, mut others) = (Vec::new(), Vec::new());
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let name = arg.split_once('=').map_or(arg.as_str(), |(n, _)| n);
        if name == "--nginx" || name == "--nginx-source" {
            own.push(arg.clone());
            if !arg.contains('=') {
                own.extend(it.next().cloned());
            }
        } else {
            others.push(arg.clone());
        }
    }
    match parse(&own)? {
        (
            Selection {
                which: Which::One(version),
                source,
            },
            _,
        ) => Ok((version, source, others)),
        _ => Err("--nginx all: this command runs one nginx; name a version such as 1.31.4".into()),
    }
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
    fn a_harness_commands_nginx_options_are_taken_out_of_its_own() {
        let (v, source, rest) =
            parse_one_among(&args("--rate 500 --nginx 1.31.4 --arms stock,module")).unwrap();
        assert_eq!((v.as_str(), source), ("1.31.4", None));
        assert_eq!(rest, args("--rate 500 --arms stock,module"));
        let (v, source, rest) = parse_one_among(&args("--quick --nginx-source=/src/n")).unwrap();
        assert_eq!((v.as_str(), source), ("", Some(PathBuf::from("/src/n"))));
        assert_eq!(rest, args("--quick"));
        let (v, _, rest) = parse_one_among(&[]).unwrap();
        assert_eq!((v.as_str(), rest.len()), (DEFAULT, 0));
        let err = parse_one_among(&args("--nginx all")).unwrap_err();
        assert!(err.contains("one nginx"), "{err}");
        let err = parse_one_among(&args("--rate 5 --nginx")).unwrap_err();
        assert!(err.contains("--nginx needs a value"), "{err}");
    }

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
        for name in ["master-3f6f782", "tengine-3.2.0"] {
            let (s, _) = parse(&args(&format!("--nginx {name}"))).unwrap();
            assert_eq!(s.which, Which::One(name.into()));
        }
        let (s, _) = parse(&args("--nginx-source /src/nginx-1.29.0")).unwrap();
        assert_eq!(s.which, Which::One(String::new()));
        assert_eq!(s.source, Some(PathBuf::from("/src/nginx-1.29.0")));
    }

    /// `build --help` and `nginx-test --help` print their options (they
    /// said `unknown option`); a `--help` after `--` is the test
    /// binaries'.
    #[test]
    fn help_is_asked_before_the_separator_and_names_every_option() {
        for command in ["build", "nginx-test", "nginx-tests"] {
            assert!(help(command, &args("--help")));
            assert!(help(command, &args("--nginx 1.30.4 -h")));
            assert!(!help(command, &args("--nginx 1.30.4")));
            assert!(!help(command, &args("-- --help")));
            let text = usage(command);
            for option in ["--nginx VERSION|all", "--nginx-source PATH", DEFAULT] {
                assert!(text.contains(option), "{command}: {option}: {text}");
            }
            assert!(text.contains(DOES.iter().find(|(c, _)| *c == command).unwrap().1));
        }
        assert!(usage("build").contains("--for NGINX_BINARY"));
        assert!(usage("nginx-test").contains("-- ARGS"));
        // Every option the usage names, parse takes.
        for a in ["--nginx 1.30.4", "--nginx all", "--nginx-source /src/nginx"] {
            assert!(parse(&args(a)).is_ok(), "{a}");
        }
    }

    #[test]
    fn bad_options_are_refused_with_what_was_wrong() {
        for (a, said) in [
            ("--nginx", "--nginx needs a value"),
            ("--nginx 1.30", "expected a version"),
            ("--nginx latest", "expected a version"),
            ("--nginx master-xyz", "master-COMMIT"),
            ("--nginx tengine-3.2", "tengine-X.Y.Z"),
            ("--nginx angie-1.12", "expected a version"),
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
