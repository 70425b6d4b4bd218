//! The source release of `cargo xtask dist`, built as a packager builds it
//! (nginx.org's pkg-oss, Debian): unpacked beside the source of the nginx
//! under test, `./configure --with-compat ... --add-dynamic-module=<it>`
//! and `make modules` with the network off and an empty `CARGO_HOME`, so
//! every crate must come from the release's `vendor/`. The module it
//! leaves must load into the stock nginx of the same version (`nginx -t`
//! with its directive), and the release must not carry the test crate,
//! xtask or the diagnosis tool, nor what only they need (tokio, reqwest).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use generation_retry_t::nginx;

const MODULE_FILE: &str = "ngx_http_upstream_generation_retry_module.so";

/// A scratch directory, removed on drop unless the test failed (then it is
/// left for a look).
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("generation-retry-t/dist-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("create the scratch directory");
        Scratch(dir)
    }

    /// A fresh directory `name` inside.
    fn dir(&self, name: &str) -> PathBuf {
        let dir = self.0.join(name);
        fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        dir
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("dist: scratch left in {}", self.0.display());
        } else {
            let _ = fs::remove_dir_all(&self.0);
        }
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("t/ is inside the workspace")
        .to_path_buf()
}

/// The cargo running the tests (or the one on PATH).
fn cargo_program() -> PathBuf {
    std::env::var_os("CARGO").map_or_else(|| "cargo".into(), PathBuf::from)
}

/// Runs `cmd`, failing the test with its output unless it succeeds;
/// returns its stdout.
fn run(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Copies the tree `from` to `to`, leaving out what a configure and make
/// left at its top (`objs`, `Makefile`).
fn copy_source(from: &Path, to: &Path) {
    fn copy(from: &Path, to: &Path, top: bool) {
        fs::create_dir_all(to).unwrap_or_else(|e| panic!("{}: {e}", to.display()));
        for entry in fs::read_dir(from).unwrap_or_else(|e| panic!("{}: {e}", from.display())) {
            let entry = entry.unwrap();
            let name = entry.file_name();
            if top && (name == "objs" || name == "Makefile") {
                continue;
            }
            let (src, dst) = (entry.path(), to.join(&name));
            if entry.file_type().unwrap().is_dir() {
                copy(&src, &dst, false);
            } else {
                fs::copy(&src, &dst).unwrap_or_else(|e| panic!("{}: {e}", src.display()));
            }
        }
    }
    copy(from, to, true);
}

/// The nginx source of the version under test: for the default (1.28.0)
/// the nginx-src crate's tree, for the others the configured copy `cargo xtask build`
/// kept in `stock-build/src`.
fn nginx_source() -> (String, PathBuf) {
    let (a, b, c) = nginx::version();
    let version = format!("{a}.{b}.{c}");
    if version != nginx::vendored_version() {
        return (version, nginx::install_dir().join("stock-build/src"));
    }
    let metadata = run(Command::new(cargo_program())
        .args(["metadata", "--format-version", "1"])
        .current_dir(workspace_root()));
    let metadata: serde_json::Value = serde_json::from_str(&metadata).expect("cargo metadata");
    let manifest = metadata["packages"]
        .as_array()
        .expect("cargo metadata's packages")
        .iter()
        .find(|p| p["name"] == "nginx-src")
        .and_then(|p| p["manifest_path"].as_str())
        .expect("the nginx-src package in cargo metadata");
    let tree = Path::new(manifest)
        .parent()
        .expect("nginx-src's directory")
        .join("nginx");
    (version, tree)
}

/// `cargo xtask dist --out <scratch>`: the tarball (after `sha256sum -c` of
/// the `.sha256` beside it).
fn make_release(out: &Path) -> PathBuf {
    let started = Instant::now();
    let said = run(Command::new(cargo_program())
        .args(["xtask", "dist", "--out"])
        .arg(out)
        .current_dir(workspace_root()));
    eprintln!(
        "dist: cargo xtask dist in {:.1} s:\n{said}",
        started.elapsed().as_secs_f64()
    );
    let tarballs: Vec<String> = names(out)
        .into_iter()
        .filter(|n| n.ends_with(".tar.gz"))
        .collect();
    assert_eq!(tarballs.len(), 1, "one tarball in {}", out.display());
    let tarball = out.join(&tarballs[0]);
    assert!(said.contains(&tarball.display().to_string()), "{said}");
    run(Command::new("sha256sum")
        .arg("-c")
        .arg(format!("{}.sha256", tarballs[0]))
        .current_dir(out));
    tarball
}

/// What a packager's build may not lean on: anything of cargo's from this
/// machine or its environment but the program itself.
fn offline<'a>(cmd: &'a mut Command, cargo_home: &Path) -> &'a mut Command {
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("CARGO_") {
            cmd.env_remove(key);
        }
    }
    cmd.env("CARGO_NET_OFFLINE", "true")
        .env("CARGO_HOME", cargo_home)
        .env("NGX_CARGO", cargo_program())
}

#[test]
fn the_source_release_builds_offline_from_its_vendored_crates() {
    let scratch = Scratch::new();

    // The release, and what it holds.
    let tarball = make_release(&scratch.dir("out"));
    let unpacked = scratch.dir("unpacked");
    run(Command::new("tar")
        .arg("-xzf")
        .arg(&tarball)
        .arg("-C")
        .arg(&unpacked));
    let top = names(&unpacked);
    let stem = tarball
        .file_name()
        .unwrap()
        .to_string_lossy()
        .trim_end_matches(".tar.gz")
        .to_string();
    assert_eq!(top, std::slice::from_ref(&stem), "one top directory");
    assert!(stem.starts_with("generation-retry-"), "{stem}");
    let release = unpacked.join(&stem);
    let contents = names(&release);
    for want in [
        ".cargo",
        "Cargo.lock",
        "Cargo.toml",
        "README.md",
        "build.rs",
        "config",
        "config.make",
        "docs",
        "module",
        "vendor",
    ] {
        assert!(
            contents.iter().any(|n| n == want),
            "no {want}: {contents:?}"
        );
    }
    for unwanted in ["t", "xtask", "diagnose", "nginx-src-patches", "target"] {
        assert!(
            !contents.iter().any(|n| n == unwanted),
            "{unwanted}/ in the release: {contents:?}"
        );
    }
    assert!(release.join("module/core/Cargo.toml").is_file());
    let config = fs::read_to_string(release.join(".cargo/config.toml")).unwrap();
    for line in [
        r#"replace-with = "vendored-sources""#,
        r#"directory = "vendor""#,
        "offline = true",
    ] {
        assert!(config.contains(line), "no {line} in:\n{config}");
    }
    let vendored = names(&release.join("vendor"));
    for crate_ in ["ngx", "nginx-sys"] {
        assert!(
            vendored.iter().any(|n| n == crate_),
            "{crate_} not vendored"
        );
    }
    let only_tests: Vec<&String> = vendored
        .iter()
        .filter(|n| {
            ["tokio", "reqwest", "hickory"]
                .iter()
                .any(|c| n.starts_with(c))
        })
        .collect();
    assert!(
        only_tests.is_empty(),
        "vendored for nothing: {only_tests:?}"
    );
    eprintln!("dist: {} vendored crates", vendored.len());

    // The nginx under test's source, configured with the release added.
    let (version, source) = nginx_source();
    let tree = scratch.0.join(format!("nginx-{version}"));
    copy_source(&source, &tree);
    let header = fs::read_to_string(tree.join("src/core/nginx.h")).expect("src/core/nginx.h");
    assert!(
        header.contains(&format!("\"{version}\"")),
        "{} is not nginx {version}",
        source.display()
    );
    let configure = ["configure", "auto/configure"]
        .into_iter()
        .find(|c| tree.join(c).is_file())
        .expect("a configure script");
    let cargo_home = scratch.dir("empty-cargo-home");
    let started = Instant::now();
    run(
        offline(&mut Command::new(tree.join(configure)), &cargo_home)
            .args(["--with-compat", "--with-http_ssl_module", "--with-stream"])
            .arg(format!("--add-dynamic-module={}", release.display()))
            .current_dir(&tree),
    );
    run(offline(&mut Command::new("make"), &cargo_home)
        .args(["-f", "objs/Makefile", "modules"])
        .current_dir(&tree));
    eprintln!(
        "dist: nginx {version}: configure and make modules, offline, in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(
        !cargo_home.join("registry").exists(),
        "the build fetched crates into CARGO_HOME: {:?}",
        names(&cargo_home)
    );
    let module = tree.join("objs").join(MODULE_FILE);
    assert!(
        module.is_file(),
        "make modules left no {}",
        module.display()
    );

    // It loads into the stock nginx of that version, its directive known.
    let prefix = scratch.dir("prefix");
    fs::create_dir_all(prefix.join("logs")).unwrap();
    let conf = prefix.join("nginx.conf");
    fs::write(
        &conf,
        format!(
            "load_module {module};\n\
             error_log stderr;\n\
             pid {pid};\n\
             events {{}}\n\
             http {{\n\
             \x20   upstream u {{ zone u 64k; server 127.0.0.1:1; }}\n\
             \x20   generation_retry_resnapshot on;\n\
             }}\n",
            module = module.display(),
            pid = prefix.join("nginx.pid").display()
        ),
    )
    .unwrap();
    let binary = nginx::install_dir().join("stock/sbin/nginx");
    let out = Command::new(&binary)
        .arg("-p")
        .arg(&prefix)
        .arg("-c")
        .arg(&conf)
        .args(["-e", "stderr", "-t"])
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", binary.display()));
    let said = String::from_utf8_lossy(&out.stderr);
    for bad in generation_retry_t::scoring::errorlog::FATAL_MARKERS {
        assert!(!said.contains(bad), "{bad} from nginx -t:\n{said}");
    }
    assert!(out.status.success(), "nginx -t: {}\n{said}", out.status);
    assert!(said.contains("test is successful"), "{said}");
}
