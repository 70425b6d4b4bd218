//! The stand-in for nginx.org: a loopback HTTP server, an OpenPGP key made
//! for the test (as the release keys are kept in `xtask/keys/`), the
//! release tarball of the version under test, and the release as the
//! install finds it (from crates.io, or signed on the loopback server).

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use generation_retry_t::nginx::install_dir;

use super::common::{
    building, from_crates_io, nowhere, scratch, stock, version_string, xtask, Run,
};

/// An HTTP server on 127.0.0.1 serving the files of `dir` at `/download/`,
/// for as long as the test runs; counts what it served.
pub(crate) struct Server {
    pub(crate) url: String,
    served: std::sync::Arc<Mutex<Vec<String>>>,
}

impl Server {
    pub(crate) fn start(dir: PathBuf) -> Server {
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

    pub(crate) fn served(&self) -> Vec<String> {
        self.served.lock().unwrap().clone()
    }
}

/// An OpenPGP key this test makes (GnuPG, in a home of its own), exported
/// armored into `keys/`, as the release keys are kept in `xtask/keys/`.
pub(crate) struct Key {
    home: PathBuf,
    pub(crate) fpr: String,
    pub(crate) keys: PathBuf,
}

impl Key {
    pub(crate) fn new(tag: &str) -> Key {
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
    pub(crate) fn sign(&self, file: &Path) {
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
pub(crate) struct Release {
    pub(crate) key: Key,
    pub(crate) url: String,
}

impl Release {
    pub(crate) fn serve(tag: &str) -> Release {
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
    pub(crate) fn install_into(&self, p: &Path) -> Run {
        self.install_with(p, &[])
    }

    /// [`Release::install_into`] with `extra` options (`--edit-conf`).
    pub(crate) fn install_with(&self, p: &Path, extra: &[&str]) -> Run {
        let _one = building();
        let stock = stock();
        let mut args = vec![
            "install",
            "--for",
            stock.to_str().unwrap(),
            "--prefix",
            p.to_str().unwrap(),
            "--signing-keys",
            self.key.keys.to_str().unwrap(),
        ];
        args.extend(extra);
        xtask(&args, &self.url, &p.join("cache"))
    }
}
