//! The operator's install, `cargo xtask install --for BINARY`, run as a new
//! user would: in a copy of the repository with no `../shared` beside it
//! and no mirror configured, against the real nginx of the version under
//! test, installed into a scratch prefix (`--prefix`). Its sources come from
//! crates.io (1.28.x, the `nginx-src` crate) or from a loopback HTTP server
//! standing in for nginx.org, serving the tarball with a detached signature
//! by a key this test makes (`--signing-keys`). Nothing but crates.io (for
//! the crate, as cargo fetches every crate) is reached: the download URL is
//! always the loopback server's, or a closed loopback port.

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};
use std::time::SystemTime;

use generation_retry_t::nginx::{install_dir, version, Flavor};
use generation_retry_t::scenario::Lab;

const MODULE: &str = "ngx_http_upstream_generation_retry_module.so";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A scratch directory of this test process.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gr-install-{}/{name}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

/// The repository's files (tracked, and new ones not ignored) copied to a
/// directory with no `shared/` beside it: a user's clone.
fn clean_copy() -> &'static Path {
    static COPY: OnceLock<PathBuf> = OnceLock::new();
    COPY.get_or_init(|| {
        let dest = scratch("clone/generation-retry");
        assert!(!dest.parent().unwrap().join("shared").exists());
        let out = Command::new("git")
            .args([
                "ls-files",
                "-z",
                "--cached",
                "--others",
                "--exclude-standard",
            ])
            .current_dir(workspace())
            .output()
            .expect("git ls-files");
        assert!(out.status.success());
        for rel in out.stdout.split(|b| *b == 0).filter(|r| !r.is_empty()) {
            let rel = Path::new(std::str::from_utf8(rel).unwrap());
            let from = workspace().join(rel);
            if !from.is_file() {
                continue; // deleted in the work tree
            }
            let to = dest.join(rel);
            fs::create_dir_all(to.parent().unwrap()).unwrap();
            fs::copy(&from, &to).unwrap();
        }
        dest
    })
}

/// What one `cargo xtask` run said.
struct Run {
    ok: bool,
    stdout: String,
    stderr: String,
}

impl Run {
    fn said(&self) -> String {
        format!("stdout:\n{}\nstderr:\n{}", self.stdout, self.stderr)
    }
}

/// `cargo xtask ARGS` in the clean copy, without a mirror, with its own
/// download cache, downloading from `url` (a loopback server, or a closed
/// loopback port when nothing should be downloaded).
fn xtask(args: &[&str], url: &str, cache: &Path) -> Run {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .arg("xtask")
        .args(args)
        .current_dir(clean_copy())
        .env_remove("GENERATION_RETRY_NGINX_MIRROR")
        .env_remove("RUSTFLAGS")
        // Compiled once for every run of this file, in the workspace's target;
        // the module's release dependencies are those the version builds
        // compiled (same flags), only the module and nginx-sys are its own.
        .env("CARGO_TARGET_DIR", workspace().join("target/install-test"))
        .env(
            "GENERATION_RETRY_MODULE_TARGET_DIR",
            std::env::var_os("CARGO_TARGET_DIR")
                .map_or_else(|| workspace().join("target"), PathBuf::from)
                .join("module-cargo"),
        )
        .env("GENERATION_RETRY_NGINX_URL", url)
        .env("GENERATION_RETRY_CACHE", cache)
        .output()
        .expect("cargo xtask");
    Run {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs that build the module share one work tree per version: one at a
/// time.
fn building() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// A URL on which nothing listens: any download attempt fails.
fn nowhere() -> String {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    format!("http://127.0.0.1:{port}/download")
}

/// An HTTP server on 127.0.0.1 serving the files of `dir` at `/download/`,
/// for as long as the test runs; counts what it served.
struct Server {
    url: String,
    served: std::sync::Arc<Mutex<Vec<String>>>,
}

impl Server {
    fn start(dir: PathBuf) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/download", listener.local_addr().unwrap());
        let served = std::sync::Arc::new(Mutex::new(Vec::new()));
        let log = served.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut line = String::new();
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                if reader.read_line(&mut line).is_err() {
                    continue;
                }
                // The rest of the request head.
                let mut h = String::new();
                while reader.read_line(&mut h).is_ok_and(|n| n > 2) {
                    h.clear();
                }
                let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
                let name = path.strip_prefix("/download/").unwrap_or("");
                let file = dir.join(name);
                let body = (!name.contains('/') && !name.is_empty())
                    .then(|| fs::read(&file).ok())
                    .flatten();
                log.lock().unwrap().push(path.clone());
                let _ = match body {
                    Some(b) => stream
                        .write_all(
                            format!(
                                "HTTP/1.0 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                                b.len()
                            )
                            .as_bytes(),
                        )
                        .and_then(|_| stream.write_all(&b)),
                    None => stream.write_all(b"HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n\r\n"),
                };
            }
        });
        Server { url, served }
    }

    fn served(&self) -> Vec<String> {
        self.served.lock().unwrap().clone()
    }
}

/// An OpenPGP key this test makes (GnuPG, in a home of its own), exported
/// armored into `keys/`, as the release keys are kept in `xtask/keys/`.
struct Key {
    home: PathBuf,
    fpr: String,
    keys: PathBuf,
}

impl Key {
    fn new(tag: &str) -> Key {
        // Short: gpg-agent's socket path must fit in sun_path.
        let home = PathBuf::from(format!("/tmp/grk-{}-{tag}", std::process::id()));
        let _ = fs::remove_dir_all(&home);
        fs::create_dir_all(&home).unwrap();
        fs::set_permissions(&home, fs::Permissions::from_mode(0o700)).unwrap();
        let gpg = |args: &[&str]| {
            let out = Command::new("gpg")
                .args([
                    "--batch",
                    "--quiet",
                    "--pinentry-mode",
                    "loopback",
                    "--passphrase",
                    "",
                ])
                .args(args)
                .env("GNUPGHOME", &home)
                .output()
                .expect("gpg (Debian's gnupg)");
            assert!(
                out.status.success(),
                "gpg {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        gpg(&[
            "--quick-gen-key",
            &format!("{tag} <{tag}@install.test>"),
            "ed25519",
            "sign",
            "1d",
        ]);
        let fpr = gpg(&["--with-colons", "--list-keys"])
            .lines()
            .find_map(|l| l.strip_prefix("fpr:::::::::"))
            .map(|f| f.trim_end_matches(':').to_string())
            .unwrap();
        let keys = home.join("keys");
        fs::create_dir_all(&keys).unwrap();
        fs::write(
            keys.join(format!("{tag}.asc")),
            gpg(&["--armor", "--export", &fpr]),
        )
        .unwrap();
        Key { home, fpr, keys }
    }

    /// `file.asc`, a detached armored signature of `file`.
    fn sign(&self, file: &Path) {
        let out = Command::new("gpg")
            .args([
                "--batch",
                "--yes",
                "--pinentry-mode",
                "loopback",
                "--passphrase",
                "",
            ])
            .args([
                "--local-user",
                &self.fpr,
                "--armor",
                "--detach-sign",
                "--output",
            ])
            .arg(format!("{}.asc", file.display()))
            .arg(file)
            .env("GNUPGHOME", &self.home)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Key {
    fn drop(&mut self) {
        let _ = Command::new("gpgconf")
            .args(["--kill", "gpg-agent"])
            .env("GNUPGHOME", &self.home)
            .output();
        let _ = fs::remove_dir_all(&self.home);
    }
}

/// A stand-in for an nginx binary that answers `-V` as `version` with
/// `arguments` (the refusals happen before anything else is asked of it).
fn fake_nginx(dir: &Path, version: &str, arguments: &str) -> PathBuf {
    let path = dir.join("nginx");
    fs::write(
        &path,
        format!(
            "#!/bin/sh\necho 'nginx version: nginx/{version}' >&2\n\
             echo 'configure arguments: {arguments}' >&2\n"
        ),
    )
    .unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// A prefix for the real nginx: its nginx.conf (`conf`, in which
/// `${SNIPPETS}` stands for the install's `P/conf/modules.d/*.conf`), and
/// empty `logs/`, `modules/` and `conf/modules.d/`.
fn prefix_with(name: &str, conf: &str) -> PathBuf {
    let p = scratch(name);
    for d in ["conf/modules.d", "logs", "modules"] {
        fs::create_dir_all(p.join(d)).unwrap();
    }
    let user = if is_root() { "user root;\n" } else { "" };
    let snippets = p.join("conf/modules.d/*.conf");
    fs::write(
        p.join("conf/nginx.conf"),
        format!(
            "{user}error_log logs/error.log info;\npid logs/nginx.pid;\n{}",
            conf.replace("${SNIPPETS}", &snippets.to_string_lossy())
        ),
    )
    .unwrap();
    p
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn mtime(p: &Path) -> SystemTime {
    fs::metadata(p).and_then(|m| m.modified()).unwrap()
}

/// The stock nginx of the version under test.
fn stock() -> PathBuf {
    install_dir().join("stock/sbin/nginx")
}

fn version_string() -> String {
    let (a, b, c) = version();
    format!("{a}.{b}.{c}")
}

/// Whether the install takes this version from the `nginx-src` crate (and
/// downloads nothing), as its own dry run says.
fn from_crates_io(v: &str) -> bool {
    static SAID: OnceLock<(String, bool)> = OnceLock::new();
    let (version, krate) = SAID.get_or_init(|| {
        let dir = scratch("origin");
        let stock = stock();
        let args = ["install", "--for", stock.to_str().unwrap(), "--dry-run"];
        let run = xtask(&args, &nowhere(), &dir);
        assert!(run.ok, "{}", run.said());
        let line = run
            .stdout
            .lines()
            .find(|l| l.starts_with("1. source of "))
            .unwrap_or_else(|| panic!("{}", run.said()))
            .to_string();
        (version_string(), line.contains("the nginx-src crate"))
    });
    assert_eq!(version, v);
    *krate
}

/// `nginx-VERSION.tar.gz` of the version under test, made from the
/// pristine tree `cargo xtask build` configured (objs and Makefile left
/// out), in `dir`: what nginx.org would serve.
fn release_tarball(dir: &Path, v: &str) -> PathBuf {
    let tree = install_dir().join("stock-build/src");
    assert!(
        tree.join("src/core/nginx.h").is_file(),
        "{}",
        tree.display()
    );
    let staged = dir.join("stage");
    let top = staged.join(format!("nginx-{v}"));
    fs::create_dir_all(&top).unwrap();
    let ok = Command::new("sh")
        .arg("-c")
        .arg("tar -C \"$1\" --exclude=./objs --exclude=./Makefile -cf - . | tar -C \"$2\" -xf -")
        .args(["sh"])
        .arg(&tree)
        .arg(&top)
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let tarball = dir.join(format!("nginx-{v}.tar.gz"));
    let ok = Command::new("tar")
        .arg("-czf")
        .arg(&tarball)
        .arg("-C")
        .arg(&staged)
        .arg(format!("nginx-{v}"))
        .status()
        .unwrap()
        .success();
    assert!(ok);
    tarball
}

/// The version under test's source as the install will find it: from
/// crates.io (nothing served), or `nginx-VERSION.tar.gz` signed by `key`
/// on a loopback server standing in for nginx.org.
struct Release {
    key: Key,
    url: String,
}

impl Release {
    fn serve(tag: &str) -> Release {
        let v = version_string();
        let key = Key::new(tag);
        let url = if from_crates_io(&v) {
            nowhere()
        } else {
            let dir = scratch(&format!("www-{tag}"));
            let tarball = release_tarball(&dir, &v);
            key.sign(&tarball);
            Server::start(dir).url
        };
        Release { key, url }
    }

    /// `cargo xtask install --for STOCK --prefix P` with this release's key
    /// (one build at a time).
    fn install_into(&self, p: &Path) -> Run {
        let _one = building();
        let stock = stock();
        let args = [
            "install",
            "--for",
            stock.to_str().unwrap(),
            "--prefix",
            p.to_str().unwrap(),
            "--signing-keys",
            self.key.keys.to_str().unwrap(),
        ];
        xtask(&args, &self.url, &p.join("cache"))
    }
}

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

/// The whole path on the version under test: the source from crates.io or
/// from the loopback "nginx.org" (signature checked), only the module
/// compiled, installed into the prefix with its snippet, `nginx -t`
/// passing; the installed module rescues a scripted race in that nginx; a
/// second run is a no-op; `uninstall` takes it out.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn installs_a_working_module_into_the_nginx_under_test() {
    let v = version_string();
    let release = Release::serve("release");
    let p = prefix_with("prefix", "include ${SNIPPETS};\nevents {}\nhttp { }\n");
    let stock = stock();
    let cache = p.join("cache");
    let run = release.install_into(&p);
    assert!(run.ok, "{}", run.said());
    if from_crates_io(&v) {
        assert!(
            run.stderr.contains("from the nginx-src crate"),
            "{}",
            run.said()
        );
    } else {
        assert!(
            run.stderr
                .contains(&format!("good signature by {}", release.key.fpr)),
            "{}",
            run.said()
        );
    }
    // Only the module was compiled: no nginx binary in the install tree.
    let work = workspace().join("target/install-test/install").join(&v);
    assert!(work.join("tree/src/objs/Makefile").is_file());
    assert!(
        !work.join("tree/src/objs/nginx").exists(),
        "install built nginx itself"
    );

    let so = p.join("modules").join(MODULE);
    let snippet = p.join("conf/modules.d/generation-retry.conf");
    assert!(run.stdout.contains("-t is successful"), "{}", run.said());
    assert_eq!(
        fs::read_to_string(&snippet).unwrap(),
        format!("load_module {};\n", so.display())
    );
    assert!(
        !run.stdout.contains("does not include"),
        "the prefix's nginx.conf includes modules.d: {}",
        run.said()
    );

    // Nothing changed: nothing done.
    let (so_time, snippet_time) = (mtime(&so), mtime(&snippet));
    let again = release.install_into(&p);
    assert!(
        again.ok && again.stdout.contains("nothing changed"),
        "{}",
        again.said()
    );
    assert_eq!((mtime(&so), mtime(&snippet)), (so_time, snippet_time));

    // The installed shared object is the module, and it rescues.
    let flavor = Flavor {
        module: Some(so.clone()),
        name: "installed",
        ..Flavor::stock()
    };
    let mut lab = Lab::start(flavor, "generation_retry_resnapshot on;").await;
    let race = lab.race_once(0).await;
    lab.assert_rescued(&race);
    lab.finish();

    // While the configuration uses the module, uninstall takes nothing.
    let conf = p.join("conf/nginx.conf");
    let plain = fs::read_to_string(&conf).unwrap();
    let using = plain.replace("http { }", "http { generation_retry_resnapshot on; }");
    assert_ne!(using, plain);
    fs::write(&conf, using).unwrap();
    let uninstall = || {
        let args = [
            "uninstall",
            "--for",
            stock.to_str().unwrap(),
            "--prefix",
            p.to_str().unwrap(),
        ];
        xtask(&args, &nowhere(), &cache)
    };
    let out = uninstall();
    assert!(
        !out.ok && out.stderr.contains("was put back and nothing was removed"),
        "{}",
        out.said()
    );
    assert!(so.exists() && snippet.exists());
    fs::write(&conf, plain).unwrap();
    let out = uninstall();
    assert!(
        out.ok && out.stdout.contains("-t is successful"),
        "{}",
        out.said()
    );
    assert!(!so.exists() && !snippet.exists());
}

/// When `nginx -t` fails with the module installed (here: the operator's
/// `include` of the snippets sits inside `http {}`, where `load_module` is
/// not allowed), everything is put back: the module that was there, no
/// snippet, and a configuration that passes `nginx -t` again; nginx's words
/// and the fix are printed.
#[test]
fn a_failing_nginx_t_puts_everything_back() {
    let v = version_string();
    let p = prefix_with(
        "rollback",
        "events {}\nhttp {\n    include ${SNIPPETS};\n}\n",
    );
    let so = p.join("modules").join(MODULE);
    let old = p.join("modules").join(format!("{MODULE}.old"));
    fs::write(&so, b"the module installed before").unwrap();
    fs::write(&old, b"the one before that").unwrap();
    let stock = stock();
    let release = Release::serve("rollback");
    let install = || release.install_into(&p);
    let run = install();
    assert!(!run.ok, "{}", run.said());
    assert!(
        run.stderr.contains("everything was put back as it was")
            && run
                .stderr
                .contains("\"load_module\" directive is not allowed here")
            && run.stderr.contains("belongs at the top of"),
        "{}",
        run.said()
    );
    assert_eq!(fs::read(&so).unwrap(), b"the module installed before");
    assert_eq!(fs::read(&old).unwrap(), b"the one before that");
    assert!(!p.join("conf/modules.d/generation-retry.conf").exists());
    let t = Command::new(&stock)
        .arg("-p")
        .arg(&p)
        .arg("-t")
        .output()
        .unwrap();
    assert!(t.status.success(), "{}", String::from_utf8_lossy(&t.stderr));

    // The module there already is the one built (only the snippet is
    // new): it stays when the snippet is taken back.
    let built = workspace()
        .join("target/install-test/install")
        .join(&v)
        .join("module")
        .join(MODULE);
    fs::copy(&built, &so).unwrap();
    fs::remove_file(&old).unwrap();
    let run = install();
    assert!(
        !run.ok && run.stderr.contains("everything was put back"),
        "{}",
        run.said()
    );
    assert_eq!(fs::read(&so).unwrap(), fs::read(&built).unwrap());
    assert!(!old.exists() && !p.join("conf/modules.d/generation-retry.conf").exists());
}

/// After an nginx upgrade the module installed before is for the old
/// version, and `nginx -t` refuses it (`version 1028000 instead of ...`):
/// the install replaces it instead of asking to fix the configuration
/// first. Uses the 1.28.0 module `cargo xtask nginx-test --nginx all`
/// built first; on 1.28.0 itself there is no older module to stand in.
#[test]
fn an_nginx_upgrade_replaces_the_module_built_for_the_old_one() {
    let v = version_string();
    let old = install_dir().join("../1.28.0/modules").join(MODULE);
    if v == "1.28.0" {
        eprintln!(
            "nginx 1.28.0: no module of an older nginx to replace (the matrix versions run this)"
        );
        return;
    }
    assert!(
        old.is_file(),
        "{} is missing: the matrix versions run after 1.28.0 is built (cargo xtask nginx-test --nginx all)",
        old.display()
    );
    let p = prefix_with("upgrade", "include ${SNIPPETS};\nevents {}\n");
    let so = p.join("modules").join(MODULE);
    fs::copy(&old, &so).unwrap();
    fs::write(
        p.join("conf/modules.d/generation-retry.conf"),
        format!("load_module {};\n", so.display()),
    )
    .unwrap();
    let stock = stock();
    let t = Command::new(&stock)
        .arg("-p")
        .arg(&p)
        .arg("-t")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&t.stderr);
    assert!(
        !t.status.success() && said.contains("version 1028000 instead of"),
        "{said}"
    );

    let run = Release::serve("upgrade").install_into(&p);
    assert!(run.ok, "{}", run.said());
    assert!(
        run.stderr
            .contains("refuses the module installed for another nginx"),
        "{}",
        run.said()
    );
    assert_eq!(
        fs::read(p.join("modules").join(format!("{MODULE}.old"))).unwrap(),
        fs::read(&old).unwrap()
    );
    let t = Command::new(&stock)
        .arg("-p")
        .arg(&p)
        .arg("-t")
        .output()
        .unwrap();
    assert!(t.status.success(), "{}", String::from_utf8_lossy(&t.stderr));
}
