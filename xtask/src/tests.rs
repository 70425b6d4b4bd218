//! The command line as clap reads it: the defaults, a bad value refused
//! naming its option, what follows `--` handed to the test binaries, and
//! `cargo xtask help` naming every command and option.

use std::path::{Path, PathBuf};

use clap::{CommandFactory, Parser};

use super::{Cli, Command};
use crate::versions::{Which, DEFAULT, MATRIX};

fn parse(line: &str) -> Command {
    try_parse(line).unwrap_or_else(|e| panic!("{line}: {e}"))
}

fn try_parse(line: &str) -> Result<Command, clap::Error> {
    let words = std::iter::once("xtask").chain(line.split_whitespace());
    Cli::try_parse_from(words).map(|cli| cli.command.expect("a command"))
}

/// clap's error for `line`, as the operator sees it.
fn refused(line: &str) -> String {
    match try_parse(line) {
        Ok(c) => panic!("{line}: accepted as {c:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn the_definitions_hold_together() {
    Cli::command().debug_assert();
}

#[test]
fn without_nginx_the_default_version_or_the_sources_own() {
    let Command::NginxTest { nginx, extra } = parse("nginx-test") else {
        panic!()
    };
    let sel = nginx.selection().unwrap();
    assert_eq!(
        (sel.which, sel.source, extra.len()),
        (Which::One(DEFAULT.into()), None, 0)
    );
    let Command::NginxTests { nginx } = parse("nginx-tests --nginx-source /src/nginx-1.29.0")
    else {
        panic!()
    };
    let sel = nginx.selection().unwrap();
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
        let Command::NginxTest { nginx, .. } = parse(&format!("nginx-test {line}")) else {
            panic!()
        };
        assert_eq!(nginx.selection().unwrap().which, which, "{line}");
    }
    let Command::Build { nginx, install } = parse("build") else {
        panic!()
    };
    assert_eq!((nginx, install.for_binary), (None, None));
    let Command::Dist(d) = parse("dist") else {
        panic!()
    };
    assert_eq!(
        d.out().unwrap(),
        crate::workspace::target_dir().join("dist")
    );
    let Command::Dist(d) = parse("dist --out x") else {
        panic!()
    };
    assert_eq!(d.out().unwrap(), std::env::current_dir().unwrap().join("x"));
}

#[test]
fn what_follows_the_separator_goes_to_the_test_binaries() {
    let Command::NginxTest { nginx, extra } = parse("nginx-test --nginx 1.30.4 -- race --exact -h")
    else {
        panic!()
    };
    assert_eq!(nginx.nginx, Some(Which::One("1.30.4".into())));
    assert_eq!(extra, ["race", "--exact", "-h"]);
    let Command::Debian(d) = parse("debian --no-test -- --exact debian::x") else {
        panic!()
    };
    assert!(d.no_test && d.extra == ["--exact", "debian::x"]);
    for line in [
        "external -- --exact external::x",
        "external --exact external::x",
    ] {
        let Command::External { extra } = parse(line) else {
            panic!()
        };
        assert_eq!(extra, ["--exact", "external::x"], "{line}");
    }
    // A filter before `--` is no option of nginx-test's.
    assert!(refused("nginx-test race::").contains("unexpected argument 'race::'"));
    assert!(refused("build -- race::").contains("unexpected argument"));
}

#[test]
fn a_harness_commands_nginx_comes_first_and_the_rest_is_the_binarys() {
    let Command::Lab(a) = parse("lab --nginx 1.31.4 --rate 500 --arms stock,module") else {
        panic!()
    };
    assert_eq!(a.one().unwrap(), ("1.31.4".into(), None));
    assert_eq!(a.rest, ["--rate", "500", "--arms", "stock,module"]);
    let Command::Bench(a) = parse("bench --nginx-source=/src/n --churn --help") else {
        panic!()
    };
    assert_eq!(
        a.one().unwrap(),
        (String::new(), Some(PathBuf::from("/src/n")))
    );
    assert_eq!(a.rest, ["--churn", "--help"]);
    let Command::Soak(a) = parse("soak") else {
        panic!()
    };
    assert_eq!((a.one().unwrap().0, a.rest.len()), (DEFAULT.into(), 0));
    let Command::Lab(a) = parse("lab --nginx all") else {
        panic!()
    };
    assert!(a.one().unwrap_err().to_string().contains("runs one nginx"));
    // After the binary's options, --nginx would be theirs: refused before any build.
    let Command::Lab(a) = parse("lab --quick --nginx 1.31.4") else {
        panic!()
    };
    let err = a.one().unwrap_err().to_string();
    assert!(
        err.contains("--nginx: --nginx and --nginx-source go before"),
        "{err}"
    );
    let Command::Fuzz { args } = parse("fuzz --inputs 5 --help") else {
        panic!()
    };
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
    let Command::NginxTest { nginx, .. } = parse("nginx-test --nginx all --nginx-source x.tar.gz")
    else {
        panic!()
    };
    let err = nginx.selection().unwrap_err().to_string();
    assert!(err.contains("cannot go with --nginx all"), "{err}");
}

#[test]
fn the_operators_options_are_parsed_and_off_by_default() {
    let Command::Install(a) = parse("install --for=/usr/sbin/nginx") else {
        panic!()
    };
    let a = a.named().unwrap();
    assert_eq!(a.binary, Path::new("/usr/sbin/nginx"));
    assert!(!a.dry_run && !a.edit_conf && a.prefix.is_none());
    let Command::Install(a) = parse(
        "install --for /x --nginx-source s --sha256 h --signing-keys k --prefix p \
         --dry-run --edit-conf",
    ) else {
        panic!()
    };
    assert_eq!(a.source.user.as_deref(), Some(Path::new("s")));
    assert_eq!(a.source.sha256.as_deref(), Some("h"));
    assert_eq!(a.source.keys.as_deref(), Some(Path::new("k")));
    assert_eq!(a.prefix.as_deref(), Some(Path::new("p")));
    assert!(a.dry_run && a.edit_conf);
    let Command::Build { install, .. } = parse("build --for /x --dry-run") else {
        panic!()
    };
    assert!(install.named().unwrap().dry_run);
    let Command::Mutants(m) = parse("mutants --only do-nothing --list") else {
        panic!()
    };
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
