//! What the install tests share: `cargo xtask` run in a clean copy of the
//! repository (no `../shared`, no mirror), the scratch directories and
//! prefixes it installs into, and the nginx under test.

use std::fs;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};
use std::time::SystemTime;

use generation_retry_t::nginx::{install_dir, version};

/// The module's shared object, as the install names it.
pub(crate) const MODULE: &str = "ngx_http_upstream_generation_retry_module.so";

pub(crate) fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A scratch directory of this test process.
pub(crate) fn scratch(name: &str) -> PathBuf {
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
pub(crate) struct Run {
    pub(crate) ok: bool,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Run {
    pub(crate) fn said(&self) -> String {
        format!("stdout:\n{}\nstderr:\n{}", self.stdout, self.stderr)
    }
}

/// `cargo xtask ARGS` in the clean copy, without a mirror, with its own
/// download cache, downloading from `url` (a loopback server, or a closed
/// loopback port when nothing should be downloaded).
pub(crate) fn xtask(args: &[&str], url: &str, cache: &Path) -> Run {
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
pub(crate) fn building() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// A URL on which nothing listens: any download attempt fails.
pub(crate) fn nowhere() -> String {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    format!("http://127.0.0.1:{port}/download")
}

/// A stand-in for an nginx binary that answers `-V` as `version` with
/// `arguments` (the refusals happen before anything else is asked of it).
pub(crate) fn fake_nginx(dir: &Path, version: &str, arguments: &str) -> PathBuf {
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
pub(crate) fn prefix_with(name: &str, conf: &str) -> PathBuf {
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

/// Whether the tests run as root (then nginx.conf says `user root;`).
pub(crate) fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

pub(crate) fn mtime(p: &Path) -> SystemTime {
    fs::metadata(p).and_then(|m| m.modified()).unwrap()
}

/// The stock nginx of the version under test.
pub(crate) fn stock() -> PathBuf {
    install_dir().join("stock/sbin/nginx")
}

/// The comment the install writes above the `include` it adds.
pub(crate) const ADDED_NOTE: &str = "# generation-retry: `cargo xtask install --edit-conf` added the next line; `cargo xtask uninstall` removes it";

/// `cargo xtask uninstall --for` the stock nginx with `--prefix prefix`,
/// offline, its downloads cached in `cache`.
pub(crate) fn uninstall_in(prefix: &Path, cache: &Path) -> Run {
    let stock = stock();
    let args = [
        "uninstall",
        "--for",
        stock.to_str().unwrap(),
        "--prefix",
        prefix.to_str().unwrap(),
    ];
    xtask(&args, &nowhere(), cache)
}

/// The stock nginx run with `-p prefix` and `args` (`-t`, `-T`, `-e`):
/// what it said.
pub(crate) fn nginx_in(prefix: &Path, args: &[&str]) -> std::process::Output {
    Command::new(stock())
        .arg("-p")
        .arg(prefix)
        .args(args)
        .output()
        .expect("run nginx")
}

pub(crate) fn version_string() -> String {
    let (a, b, c) = version();
    format!("{a}.{b}.{c}")
}

/// Whether the install takes this version from the `nginx-src` crate (and
/// downloads nothing), as its own dry run says.
pub(crate) fn from_crates_io(v: &str) -> bool {
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
