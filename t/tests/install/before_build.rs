//! What the install says, refuses or leaves alone before it builds
//! anything: an nginx older than 1.27.3 is not affected, a binary without
//! `--with-compat` is refused with the way to build, a `--for` that is
//! nginx.conf or a directory is named for what it is, without a network
//! the error names the other ways to the source, a tampered tarball or a
//! wrong signature is refused, every command takes `--help`, and a dry
//! run changes nothing.

use std::fs;

use super::common::{fake_nginx, nowhere, prefix_with, scratch, stock, xtask};
use super::release::{Key, Server};

/// Below 1.27.3 there is no `resolve`, so no race: said, exit 0, nothing
/// built or written.
#[test]
fn an_nginx_older_than_1_27_3_is_not_affected() {
    let dir = scratch("floor");
    let bin = fake_nginx(&dir, "1.26.3", "--with-compat --prefix=/usr/share/nginx");
    let run = xtask(
        &[
            "install",
            "--for",
            bin.to_str().unwrap(),
            "--prefix",
            dir.to_str().unwrap(),
        ],
        &nowhere(),
        &dir.join("cache"),
    );
    assert!(run.ok, "{}", run.said());
    assert!(
        run.stdout.contains("nginx 1.26.3 is not affected"),
        "{}",
        run.said()
    );
    assert!(!dir.join("modules").exists() && !dir.join("cache").exists());
}

/// Without `--with-compat` the binary takes only modules built against its
/// own tree: refused, with how.
#[test]
fn a_binary_without_compat_is_refused_with_the_way_to_build() {
    let dir = scratch("nocompat");
    let bin = fake_nginx(&dir, "1.30.4", "--prefix=/etc/nginx --with-stream");
    let run = xtask(
        &["install", "--for", bin.to_str().unwrap()],
        &nowhere(),
        &dir,
    );
    assert!(!run.ok, "{}", run.said());
    assert!(
        run.stderr.contains("without --with-compat") && run.stderr.contains("NGINX_BUILD_DIR="),
        "{}",
        run.said()
    );
}

/// The download path's checks, on a version that no crate carries: a
/// tampered tarball, a signature by a key not trusted, and a `--sha256`
/// that does not match are each refused by name, and nothing of them
/// stays in the cache; a good signature passes (and what follows is the
/// tarball's own business: here it holds no nginx).
#[test]
fn a_tampered_tarball_or_a_wrong_signature_is_refused() {
    let dir = scratch("refused");
    let bin = fake_nginx(&dir, "1.29.9", "--with-compat");
    let www = dir.join("www");
    fs::create_dir_all(&www).unwrap();
    let tarball = www.join("nginx-1.29.9.tar.gz");
    let trusted = Key::new("trusted");
    let other = Key::new("other");
    let server = Server::start(www.clone());
    let cache = dir.join("cache");
    let install = |extra: &[&str]| {
        let mut args = vec!["install", "--for", bin.to_str().unwrap()];
        args.extend(["--signing-keys", trusted.keys.to_str().unwrap()]);
        args.extend(extra);
        xtask(&args, &server.url, &cache)
    };
    let cached = || {
        fs::read_dir(cache.join("nginx"))
            .map(|d| d.count())
            .unwrap_or(0)
    };

    // Signed, then changed.
    fs::write(&tarball, b"the release as signed").unwrap();
    trusted.sign(&tarball);
    fs::write(&tarball, b"the release, altered").unwrap();
    let run = install(&[]);
    assert!(!run.ok, "{}", run.said());
    assert!(
        run.stderr.contains("nginx-1.29.9.tar.gz is not signed by")
            && run.stderr.contains("refusing to build from it"),
        "{}",
        run.said()
    );
    assert_eq!(cached(), 0, "a refused tarball stays out of the cache");

    // Intact, signed by a key that is not trusted.
    fs::write(&tarball, b"the release as signed").unwrap();
    other.sign(&tarball);
    let run = install(&[]);
    assert!(
        !run.ok && run.stderr.contains("is not signed by"),
        "{}",
        run.said()
    );
    assert_eq!(cached(), 0);

    // A SHA-256 that is not the tarball's.
    let run = install(&["--sha256", &"0".repeat(64)]);
    assert!(
        !run.ok && run.stderr.contains("not the 0000") && run.stderr.contains("refusing"),
        "{}",
        run.said()
    );

    // Signed by the trusted key: accepted, then found to be no nginx.
    trusted.sign(&tarball);
    let run = install(&[]);
    assert!(!run.ok, "{}", run.said());
    assert!(
        run.stderr
            .contains(&format!("good signature by {}", trusted.fpr)),
        "{}",
        run.said()
    );
    assert!(
        server
            .served()
            .iter()
            .any(|p| p == "/download/nginx-1.29.9.tar.gz.asc"),
        "{:?}",
        server.served()
    );
}

/// `--dry-run` says each step and changes nothing.
#[test]
fn a_dry_run_changes_nothing() {
    let p = prefix_with("dry", "events {}\n");
    let before: Vec<_> = fs::read_dir(&p)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let stock = stock();
    let run = xtask(
        &[
            "install",
            "--for",
            stock.to_str().unwrap(),
            "--prefix",
            p.to_str().unwrap(),
            "--dry-run",
        ],
        &nowhere(),
        &p.join("cache"),
    );
    assert!(run.ok, "{}", run.said());
    for step in [
        "1. source of ",
        "configure a copy",
        "cargo build",
        "install ",
        "write ",
        "put back",
    ] {
        assert!(run.stdout.contains(step), "{step}: {}", run.said());
    }
    let after: Vec<_> = fs::read_dir(&p)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(before, after);
}

/// A clone with no network and no mirror (nginx.org a closed loopback
/// port here), for a version no crate carries: the download's failure is
/// said once, with `--nginx-source`, the mirror and another URL as the
/// ways out.
#[test]
fn without_a_network_or_a_mirror_the_error_names_nginx_source() {
    let dir = scratch("no-network");
    let bin = fake_nginx(&dir, "1.29.9", "--with-compat");
    let run = xtask(
        &["install", "--for", bin.to_str().unwrap()],
        &nowhere(),
        &dir.join("cache"),
    );
    assert!(!run.ok, "{}", run.said());
    for remedy in [
        "--nginx-source PATH",
        "GENERATION_RETRY_NGINX_MIRROR=DIR",
        "GENERATION_RETRY_NGINX_URL=URL",
        "nginx-1.29.9.tar.gz",
    ] {
        assert!(run.stderr.contains(remedy), "{remedy}: {}", run.said());
    }
    assert_eq!(run.stderr.matches("curl: (7)").count(), 1, "{}", run.said());
}

/// `--for` naming nginx.conf or a directory is said for what it is (it
/// said `Permission denied`).
#[test]
fn a_for_that_is_no_binary_is_named_for_what_it_is() {
    let p = prefix_with("for", "events {}\n");
    let conf = p.join("conf/nginx.conf");
    let cache = p.join("cache");
    let run = xtask(
        &["install", "--for", conf.to_str().unwrap()],
        &nowhere(),
        &cache,
    );
    assert!(
        !run.ok
            && run.stderr.contains("is not an executable")
            && run.stderr.contains("looks like a configuration file")
            && !run.stderr.contains("Permission denied"),
        "{}",
        run.said()
    );
    let run = xtask(
        &["uninstall", "--for", p.to_str().unwrap()],
        &nowhere(),
        &cache,
    );
    assert!(
        !run.ok && run.stderr.contains("is a directory: pass the nginx binary"),
        "{}",
        run.said()
    );
}

/// Every operator's and developer's command prints its usage for
/// `--help` (`build` and `nginx-test` said `unknown option`; clap's help
/// now), and runs nothing.
#[test]
fn every_command_takes_help() {
    let dir = scratch("help");
    for (command, names) in [
        ("install", "--edit-conf"),
        ("uninstall", "--for <NGINX_BINARY>"),
        ("build", "--nginx <VERSION|all>"),
        ("nginx-test", "[-- <ARGS>...]"),
        ("nginx-tests", "--nginx-source <PATH>"),
    ] {
        let run = xtask(&[command, "--help"], &nowhere(), &dir);
        assert!(
            run.ok && run.stdout.contains(names) && !run.said().contains("unknown option"),
            "{command}: {}",
            run.said()
        );
    }
}
