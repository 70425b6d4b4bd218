//! The command line as clap reads it: the defaults, a bad value refused
//! naming its option, what follows `--` handed to the test binaries, and
//! `cargo xtask help` naming every command and option.

use std::path::{Path, PathBuf};

use clap::{CommandFactory, Parser};

use super::{Cli, Command};
use crate::versions::{Selection, Which, DEFAULT, MATRIX};

fn try_parse(line: &str) -> Result<Command, clap::Error> {
    let words = std::iter::once("xtask").chain(line.split_whitespace());
    Cli::try_parse_from(words).map(|cli| cli.command.expect("a command"))
}

/// What `line` parses to, taken apart by `pattern`: `parsed!("dist", Command::Dist(d) => d)`.
macro_rules! parsed {
    ($line:expr, $pattern:pat => $out:expr) => {
        match try_parse($line) {
            Ok($pattern) => $out,
            other => panic!("{}: {other:?}", $line),
        }
    };
}

/// clap's error for `line`, as the operator sees it.
fn refused(line: &str) -> String {
    try_parse(line).unwrap_err().to_string()
}

fn selection(line: &str) -> Selection {
    let nginx =
        parsed!(line, Command::NginxTest { nginx, .. } | Command::NginxTests { nginx } => nginx);
    nginx.selection().unwrap()
}

#[test]
fn the_definitions_hold_together() {
    Cli::command().debug_assert();
}

#[test]
fn without_nginx_the_default_version_or_the_sources_own() {
    let sel = selection("nginx-test");
    assert_eq!((sel.which, sel.source), (Which::One(DEFAULT.into()), None));
    let sel = selection("nginx-tests --nginx-source /src/nginx-1.29.0");
    assert_eq!(sel.which, Which::One(String::new()));
    assert_eq!(sel.source, Some(PathBuf::from("/src/nginx-1.29.0")));
    for (line, which) in [
        ("--nginx=all", Which::All),
        (
            "--nginx master-3f6f782",
            Which::One("master-3f6f782".into()),
        ),
        ("--nginx tengine-3.2.0", Which::One("tengine-3.2.0".into())),
    ] {
        assert_eq!(
            selection(&format!("nginx-test {line}")).which,
            which,
            "{line}"
        );
    }
    let (nginx, install) = parsed!("build", Command::Build { nginx, install } => (nginx, install));
    assert_eq!((nginx, install.for_binary), (None, None));
    let out = parsed!("dist", Command::Dist(d) => d.out().unwrap());
    assert_eq!(out, crate::workspace::target_dir().join("dist"));
    let out = parsed!("dist --out x", Command::Dist(d) => d.out().unwrap());
    assert_eq!(out, std::env::current_dir().unwrap().join("x"));
}

#[test]
fn what_follows_the_separator_goes_to_the_test_binaries() {
    let line = "nginx-test --nginx 1.30.4 -- race --exact -h";
    let (nginx, extra) = parsed!(line, Command::NginxTest { nginx, extra } => (nginx, extra));
    assert_eq!(nginx.nginx, Some(Which::One("1.30.4".into())));
    assert_eq!(extra, ["race", "--exact", "-h"]);
    let d = parsed!("debian --no-test -- --exact debian::x", Command::Debian(d) => d);
    assert!(d.no_test && d.extra == ["--exact", "debian::x"]);
    for line in [
        "external -- --exact external::x",
        "external --exact external::x",
    ] {
        let extra = parsed!(line, Command::External { extra } => extra);
        assert_eq!(extra, ["--exact", "external::x"], "{line}");
    }
    // A filter before `--` is no option of nginx-test's.
    assert!(refused("nginx-test race::").contains("unexpected argument 'race::'"));
    assert!(refused("build -- race::").contains("unexpected argument"));
}

#[test]
fn a_harness_commands_nginx_comes_first_and_the_rest_is_the_binarys() {
    let a = parsed!("lab --nginx 1.31.4 --rate 500 --arms a,b", Command::Lab(a) => a);
    assert_eq!(a.one().unwrap(), ("1.31.4".into(), None));
    assert_eq!(a.rest, ["--rate", "500", "--arms", "a,b"]);
    let a = parsed!("bench --nginx-source=/src/n --churn --help", Command::Bench(a) => a);
    assert_eq!(a.one().unwrap(), (String::new(), Some("/src/n".into())));
    assert_eq!(a.rest, ["--churn", "--help"]);
    let a = parsed!("soak", Command::Soak(a) => a);
    assert_eq!((a.one().unwrap().0, a.rest.len()), (DEFAULT.into(), 0));
    let a = parsed!("lab --nginx all", Command::Lab(a) => a);
    assert!(a.one().unwrap_err().to_string().contains("runs one nginx"));
    // After the binary's options, --nginx would be theirs: refused before any build.
    let a = parsed!("lab --quick --nginx 1.31.4", Command::Lab(a) => a);
    let err = a.one().unwrap_err().to_string();
    assert!(
        err.contains("--nginx: --nginx and --nginx-source go before"),
        "{err}"
    );
    let args = parsed!("fuzz --inputs 5 --help", Command::Fuzz { args } => args);
    assert_eq!(args, ["--inputs", "5", "--help"]);
}

#[test]
fn a_bad_value_is_refused_naming_its_option() {
    for (line, said) in [
        (
            "nginx-test --nginx",
            "a value is required for '--nginx <VERSION|all>'",
        ),
        (
            "nginx-test --nginx 1.30",
            "invalid value '1.30' for '--nginx <VERSION|all>'",
        ),
        ("build --nginx latest", "expected a version"),
        ("nginx-tests --nginx master-xyz", "master-COMMIT"),
        ("lab --nginx tengine-3.2", "tengine-X.Y.Z"),
        ("nginx-test --nginx angie-1.12", "expected a version"),
        ("build --frobnicate", "unexpected argument '--frobnicate'"),
        ("install", "--for <NGINX_BINARY>"),
        ("uninstall --dry-run", "--for <NGINX_BINARY>"),
        (
            "install --for",
            "a value is required for '--for <NGINX_BINARY>'",
        ),
        ("build --dry-run", "--for <NGINX_BINARY>"),
        ("build --nginx 1.30.4 --for /x", "cannot be used with"),
        ("debian --suite sid --installed", "cannot be used with"),
        ("mutants --only nope", "no mutant of that name"),
        ("patches 9.9.9", "invalid value '9.9.9' for '[TREE]...'"),
        ("patches --derive", "<TREE>"),
        ("valgrind --cii", "unexpected argument '--cii'"),
        ("check --fix", "unexpected argument '--fix'"),
    ] {
        let err = refused(line);
        assert!(err.contains(said), "{line}: {err}");
    }
    let line = "nginx-test --nginx all --nginx-source x.tar.gz";
    let nginx = parsed!(line, Command::NginxTest { nginx, .. } => nginx);
    let err = nginx.selection().unwrap_err().to_string();
    assert!(err.contains("cannot go with --nginx all"), "{err}");
}

#[test]
fn the_operators_options_are_parsed_and_off_by_default() {
    let a = parsed!("install --for=/usr/sbin/nginx", Command::Install(a) => a.named().unwrap());
    assert_eq!(a.binary, Path::new("/usr/sbin/nginx"));
    assert!(!a.dry_run && !a.edit_conf && a.prefix.is_none());
    let line = "install --for /x --nginx-source s --sha256 h --signing-keys k --prefix p \
                --dry-run --edit-conf";
    let a = parsed!(line, Command::Install(a) => a);
    assert_eq!(a.source.user.as_deref(), Some(Path::new("s")));
    assert_eq!(a.source.sha256.as_deref(), Some("h"));
    assert_eq!(a.source.keys.as_deref(), Some(Path::new("k")));
    assert_eq!(a.prefix.as_deref(), Some(Path::new("p")));
    assert!(a.dry_run && a.edit_conf);
    let a = parsed!("build --for /x --dry-run", Command::Build { install, .. } => install);
    assert!(a.named().unwrap().dry_run);
    let m = parsed!("mutants --only do-nothing --list", Command::Mutants(m) => m);
    assert!(m.list && m.only == ["do-nothing"]);
}

/// `cargo xtask help` (and a bare `cargo xtask`) shows every command with
/// every option, the default version and the matrix.
#[test]
fn help_names_every_command_and_option() {
    let help = Cli::command().render_help().to_string();
    for command in Cli::command().get_subcommands() {
        let name = command.get_name();
        assert!(
            help.contains(&format!("cargo xtask {name}")),
            "{name}: {help}"
        );
        for long in command.get_arguments().filter_map(|a| a.get_long()) {
            assert!(help.contains(&format!("--{long}")), "{name} --{long}");
        }
    }
    for v in MATRIX {
        assert!(help.contains(v), "{v}");
    }
    assert!(help.contains(&format!("default {DEFAULT}")));
}
