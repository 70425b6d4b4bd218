//! `cargo xtask dist [--out DIR]`: the source release for packagers,
//! `generation-retry-VERSION.tar.gz` (with its `.sha256`) in `target/dist/`.
//!
//! Distribution builds are offline: nginx.org's pkg-oss builds its Rust
//! module (nginx-module-acme) from a tarball with every crate vendored, and
//! Debian's builders have no network either. So the tarball is what
//! `./configure --add-dynamic-module=<it>` and `make modules` need and no
//! more: `config`, `config.make`, the module (its build script and the
//! layout gate in `build/`) and `module/core`, their
//! manifests, the README and `docs/`, every crate in `vendor/` (`cargo
//! vendor --locked`) and a `.cargo/config.toml` that builds from there with
//! the network off (`config.make` runs cargo in the module's directory, so
//! cargo reads that file). Its README opens with what its reader runs
//! ([`release_readme`]): the repository's `cargo xtask` commands need a
//! clone, which the tarball is not.
//!
//! Its workspace is the module and `module/core` alone: the test crate,
//! xtask and the diagnosis tool would vendor tokio, reqwest and hickory for
//! nothing. Its `Cargo.lock` is the repository's, pruned to that workspace
//! by cargo offline; every package left must be in the repository's lock at
//! the same version, or nothing is written.

use std::collections::BTreeSet;
use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::source::sha256;
use crate::tree::{files, run_quiet};
use crate::workspace::{cargo, root, target_dir, At, Result};

/// The release's name before `-VERSION`.
const NAME: &str = "generation-retry";

/// The release's workspace: the module and its nginx-free core.
const MEMBERS: &str = r#"members = [".", "module/core"]"#;

/// The files of the repository's root that go into the release.
const ROOT_FILES: &[&str] = &[
    "config",
    "config.make",
    "build.rs",
    "Cargo.toml",
    "Cargo.lock",
    "README.md",
];

/// The directories that go into the release (without any `target/`).
const DIRS: &[&str] = &["module", "build", "docs"];

/// Licence files, under whichever of these names they have.
const LICENSE_PREFIXES: &[&str] = &["LICENSE", "LICENCE", "COPYING", "NOTICE"];

/// cargo's configuration in the release: the crates from `vendor/`, and
/// the network off.
const CARGO_CONFIG: &str = "\
# Written by `cargo xtask dist`: every crate comes from vendor/, offline.
[source.crates-io]
replace-with = \"vendored-sources\"

[source.vendored-sources]
directory = \"vendor\"

[net]
offline = true
";

/// `cargo xtask dist [--out DIR]`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// where the tarball goes (default target/dist)
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

impl Args {
    /// `--out` from the working directory, else `target/dist`.
    pub fn out(&self) -> Result<PathBuf> {
        Ok(match &self.out {
            Some(dir) => env::current_dir().map_err(|e| e.to_string())?.join(dir),
            None => target_dir().join("dist"),
        })
    }
}

pub fn command(a: &Args) -> Result {
    let out = a.out()?;
    let started = Instant::now();
    let root = root();
    let version = package_version(&read(&root.join("Cargo.toml"))?)?;
    let name = format!("{NAME}-{version}");
    let stage_parent = target_dir().join("dist/stage");
    let stage = stage_parent.join(&name);
    let _ = fs::remove_dir_all(&stage_parent);
    mkdir(&stage)?;

    eprintln!("xtask: dist: staging {}", stage.display());
    for file in ROOT_FILES {
        copy(&root.join(file), &stage.join(file))?;
    }
    for entry in fs::read_dir(&root).at(&root)? {
        let file = entry.at(&root)?.file_name();
        let file = file.to_string_lossy();
        if LICENSE_PREFIXES.iter().any(|p| file.starts_with(p)) {
            copy(&root.join(&*file), &stage.join(&*file))?;
        }
    }
    let readme = stage.join("README.md");
    fs::write(&readme, release_readme(&read(&readme)?, &name)).at(&readme)?;
    for dir in DIRS {
        for file in files(&root.join(dir), &|n| n == "target")? {
            let rel = file.strip_prefix(&root).map_err(|e| e.to_string())?;
            copy(&file, &stage.join(rel))?;
        }
    }

    // Every package of the lock in cargo's cache, for every target: the
    // offline `cargo metadata` and `cargo vendor` below resolve them all,
    // and a build downloads only the host's (a fresh machine that built
    // everything still lacks `wasi`). Without a network the cache may hold
    // them all anyway; the offline steps then name what is missing.
    if let Err(e) = run_quiet(cargo().args(["fetch", "--locked"]).current_dir(&root)) {
        eprintln!("xtask: dist: cargo fetch failed, going on with cargo's cache: {e}");
    }

    // The smaller workspace, and its lock pruned by cargo (offline: it may
    // drop packages, not fetch or upgrade any).
    let manifest = stage.join("Cargo.toml");
    fs::write(&manifest, release_manifest(&read(&manifest)?)?).at(&manifest)?;
    let metadata = output(
        cargo()
            .args(["metadata", "--offline", "--format-version", "1"])
            .current_dir(&stage),
    )?;
    let metadata: serde_json::Value =
        serde_json::from_str(&metadata).map_err(|e| format!("cargo metadata: {e}"))?;
    let members = metadata["workspace_members"].as_array().map_or(0, Vec::len);
    if members != 2 {
        return err!(
            "the release's workspace has {members} members, not the module and module/core"
        );
    }
    let original = lock_packages(&read(&root.join("Cargo.lock"))?);
    let pruned_text = read(&stage.join("Cargo.lock"))?;
    let pruned = lock_packages(&pruned_text);
    check_pruned(&original, &pruned)?;
    eprintln!(
        "xtask: dist: Cargo.lock pruned to {} of {} packages, no version changed",
        pruned.len(),
        original.len()
    );

    run_quiet(
        cargo()
            .args(["vendor", "--locked", "--offline", "vendor"])
            .current_dir(&stage),
    )?;
    let crates = fs::read_dir(stage.join("vendor"))
        .map_err(|e| format!("vendor: {e}"))?
        .count();
    let registry = registry_packages(&pruned_text);
    if crates != registry {
        return err!("vendor/ holds {crates} crates, the lock {registry} registry packages");
    }
    let config = stage.join(".cargo/config.toml");
    mkdir(&stage.join(".cargo"))?;
    fs::write(&config, CARGO_CONFIG).at(&config)?;
    let file_count = files(&stage, &|_| false)?.len();

    // A tar of sorted names, one owner and one time, gzip without a name
    // or time: the same tree gives the same bytes.
    mkdir(&out)?;
    let tar = out.join(format!("{name}.tar"));
    let tarball = out.join(format!("{name}.tar.gz"));
    run_quiet(
        Command::new("tar")
            .args(["--sort=name", "--owner=0", "--group=0", "--numeric-owner"])
            .arg(format!("--mtime=@{}", source_date()))
            .arg("-cf")
            .arg(&tar)
            .arg("-C")
            .arg(&stage_parent)
            .arg(&name),
    )?;
    run_quiet(Command::new("gzip").args(["-9", "-n", "-f"]).arg(&tar))?;
    let sha = sha256(&tarball)?;
    let sums = out.join(format!("{name}.tar.gz.sha256"));
    fs::write(&sums, format!("{sha}  {name}.tar.gz\n")).at(&sums)?;
    let size = fs::metadata(&tarball).at(&tarball)?.len();
    let _ = fs::remove_dir_all(&stage_parent);

    eprintln!(
        "xtask: dist: {file_count} files, {crates} vendored crates, in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    println!("{}", tarball.display());
    println!("size    {size} bytes ({:.1} MiB)", size as f64 / 1048576.0);
    println!("sha256  {sha}");
    Ok(())
}

/// The release's README: what its reader runs to build and install the
/// module from it (nginx's `./configure --add-dynamic-module`, `make
/// modules`, the shared object installed beside, never copied over, the
/// one nginx has loaded), then the repository's README, whose `cargo
/// xtask` commands need a clone.
fn release_readme(readme: &str, name: &str) -> String {
    let so = crate::build::MODULE_FILE;
    format!(
        "# {name}: the source release

This tarball builds the module as any third-party nginx module, with the
network off (every crate is in `vendor/`). The `cargo xtask` commands in
the README below (`install`, `uninstall`, `dist`) need a clone of the
repository: from this tarball, build in the source tree of exactly the
nginx you run (`nginx -V` prints its version and arguments), with cargo
(Rust 1.88 or newer), a C compiler and libclang:

    cd nginx-1.30.4
    ./configure --with-compat --add-dynamic-module=/path/to/{name}
    make modules

(an nginx built without `--with-compat`: configure with all the arguments
its `nginx -V` prints instead). Install `objs/{so}` into the modules path
(`nginx -V`: `--modules-path`) with `install`, which writes a new file:
copying over the `.so` a running nginx has loaded changes its mapped pages
and can crash it at the next reload.

    install -m 644 objs/{so} /usr/lib/nginx/modules/

Load it at the top of nginx.conf, outside any block, then `nginx -t` and
reload:

    load_module /usr/lib/nginx/modules/{so};

{readme}"
    )
}

/// The `version` of the manifest's `[package]`.
fn package_version(manifest: &str) -> Result<String> {
    manifest
        .lines()
        .skip_while(|l| l.trim() != "[package]")
        .skip(1)
        .take_while(|l| !l.trim_start().starts_with('['))
        .find_map(|l| {
            let (key, value) = l.split_once('=')?;
            (key.trim() == "version").then(|| value.trim().trim_matches('"').to_string())
        })
        .ok_or("Cargo.toml: no version in [package]".into())
}

/// The root manifest with its `[workspace]` cut to [`MEMBERS`] and no
/// `default-members` (either may span lines).
fn release_manifest(manifest: &str) -> Result<String> {
    let mut out = String::new();
    let mut section = "";
    let mut skipping = false;
    let mut replaced = false;
    for line in manifest.lines() {
        if skipping {
            skipping = !line.contains(']');
            continue;
        }
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            section = trimmed;
        }
        let key = trimmed.split('=').next().unwrap_or("").trim();
        if section == "[workspace]" && (key == "members" || key == "default-members") {
            // The value ends on the line of its `]`.
            let value = trimmed.split_once('=').map_or("", |(_, v)| v);
            skipping = !value.contains(']');
            if key == "members" {
                out.push_str(MEMBERS);
                out.push('\n');
                replaced = true;
            }
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    if !replaced {
        return Err("Cargo.toml: no members in [workspace]".into());
    }
    Ok(out)
}

/// The `(name, version)` of every `[[package]]` of a Cargo.lock.
fn lock_packages(lock: &str) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    let mut name = None;
    for line in lock.lines() {
        let value = |key: &str| {
            line.strip_prefix(key)
                .and_then(|rest| rest.trim().strip_prefix('='))
                .map(|v| v.trim().trim_matches('"').to_string())
        };
        if line.starts_with("[[package]]") {
            name = None;
        } else if let Some(n) = value("name") {
            name = Some(n);
        } else if let Some(v) = value("version") {
            if let Some(n) = name.take() {
                out.insert((n, v));
            }
        }
    }
    out
}

/// How many packages of a Cargo.lock come from a registry (not the
/// workspace): what `cargo vendor` copies.
fn registry_packages(lock: &str) -> usize {
    lock.lines()
        .filter(|l| l.starts_with("source = \"registry+"))
        .count()
}

/// Every package of the pruned lock is in the original at its version.
fn check_pruned(
    original: &BTreeSet<(String, String)>,
    pruned: &BTreeSet<(String, String)>,
) -> Result {
    let new: Vec<String> = pruned
        .difference(original)
        .map(|(n, v)| format!("{n} {v}"))
        .collect();
    if new.is_empty() {
        Ok(())
    } else {
        err!(
            "pruning Cargo.lock changed it: {} not in the repository's lock",
            new.join(", ")
        )
    }
}

/// The tar's time for every entry: SOURCE_DATE_EPOCH, or the last commit's
/// time, or now.
fn source_date() -> u64 {
    if let Some(t) = env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|t| t.parse().ok())
    {
        return t;
    }
    Command::new("git")
        .args(["log", "-1", "--format=%ct"])
        .current_dir(root())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs())
        })
}

/// A command's stdout, or its failure with its output.
fn output(cmd: &mut Command) -> Result<String> {
    let out = cmd.output().running(format!("{cmd:?}"))?;
    if !out.status.success() {
        return err!(
            "{cmd:?} failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn read(path: &Path) -> Result<String> {
    fs::read_to_string(path).at(path)
}

fn mkdir(dir: &Path) -> Result {
    fs::create_dir_all(dir).at(dir)
}

fn copy(from: &Path, to: &Path) -> Result {
    if let Some(dir) = to.parent() {
        mkdir(dir)?;
    }
    fs::copy(from, to)
        .map(|_| ())
        .map_err(|e| format!("{} -> {}: {e}", from.display(), to.display()).into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_release_workspace_is_the_module_and_core() {
        let text = read(&root().join("Cargo.toml")).unwrap();
        let cut = release_manifest(&text).unwrap();
        let ws: Vec<&str> = cut
            .lines()
            .skip_while(|l| *l != "[workspace]")
            .take_while(|l| !l.starts_with("[workspace."))
            .collect();
        assert!(ws.contains(&MEMBERS), "{ws:?}");
        for gone in ["default-members", "\"t\"", "xtask", "diagnose"] {
            assert!(!ws.iter().any(|l| l.contains(gone)), "{gone}: {ws:?}");
        }
        // The rest of the manifest is untouched.
        assert_eq!(package_version(&cut).ok(), package_version(&text).ok());
        assert!(cut.contains("[features]") && cut.contains("export-modules"));
    }

    #[test]
    fn members_spanning_lines_are_replaced() {
        let text = "[workspace]\nmembers = [\n  \".\",\n  \"t\",\n]\ndefault-members = [\n  \".\",\n]\nresolver = \"2\"\n\n[package]\nname = \"m\"\nversion = \"1.2.3\"\n";
        let cut = release_manifest(text).unwrap();
        assert_eq!(
            cut,
            format!("[workspace]\n{MEMBERS}\nresolver = \"2\"\n\n[package]\nname = \"m\"\nversion = \"1.2.3\"\n")
        );
        assert_eq!(package_version(&cut).unwrap(), "1.2.3");
        assert!(release_manifest("[package]\nname = \"m\"\n").is_err());
    }

    #[test]
    fn a_pruned_lock_may_lose_packages_but_not_change_them() {
        let lock = "version = 4\n\n[[package]]\nname = \"a\"\nversion = \"1.0.0\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\n\n[[package]]\nname = \"b\"\nversion = \"2.0.0\"\n";
        let original = lock_packages(lock);
        assert_eq!(
            original,
            BTreeSet::from([("a".into(), "1.0.0".into()), ("b".into(), "2.0.0".into())])
        );
        assert_eq!(registry_packages(lock), 1);
        let fewer = BTreeSet::from([("a".to_string(), "1.0.0".to_string())]);
        assert!(check_pruned(&original, &fewer).is_ok());
        let upgraded = BTreeSet::from([("a".to_string(), "1.0.1".to_string())]);
        let err = check_pruned(&original, &upgraded).unwrap_err().to_string();
        assert!(err.contains("a 1.0.1"), "{err}");
    }

    #[test]
    fn the_repository_lock_reads() {
        let lock = lock_packages(&read(&root().join("Cargo.lock")).unwrap());
        assert!(lock.iter().any(|(n, _)| n == "ngx"));
        assert!(lock.iter().any(|(n, _)| n == "tokio"));
    }

    /// The release's README says what its reader runs, before the
    /// repository's README (whose `cargo xtask install` the tarball
    /// cannot run).
    #[test]
    fn the_release_readme_says_what_the_tarball_runs() {
        let repo = read(&root().join("README.md")).unwrap();
        let text = release_readme(&repo, "generation-retry-9.9.9");
        let (preface, rest) = text.split_once("\n# ").unwrap();
        assert_eq!(format!("# {rest}"), repo);
        for says in [
            "./configure --with-compat --add-dynamic-module=/path/to/generation-retry-9.9.9",
            "make modules",
            "install -m 644 objs/ngx_http_upstream_generation_retry_module.so",
            "load_module /usr/lib/nginx/modules/ngx_http_upstream_generation_retry_module.so;",
            "need a clone",
        ] {
            assert!(preface.contains(says), "{says}: {preface}");
        }
        assert!(!preface.contains("cargo xtask install --for"), "{preface}");
    }
}
