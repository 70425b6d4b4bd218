//! `cargo xtask debian [--suite SUITE]`: the module for Debian's own nginx,
//! built the way Debian builds third-party modules, packaged the way
//! Debian packages them, and tested inside Debian's binary.
//!
//! 1. Debian's packages: the pinned `.deb`s of `../shared/nginx/debian-sid/`
//!    (checked against `SHA256SUMS`), or with `--suite sid` the current
//!    ones, downloaded with `apt-get download` and a private package index
//!    (nothing is installed on this machine). All are unpacked into one
//!    directory with `dpkg-deb -x`.
//! 2. The build, as Debian's `nginx_mod` debhelper build system does it: a
//!    copy of `nginx-dev`'s `/usr/share/nginx/src`, `. ./conf_flags`,
//!    `./configure "${NGX_CONF_FLAGS[@]}" --with-stream
//!    --add-dynamic-module=<this repository>`, `make -f objs/Makefile
//!    modules` (this repository's `config.make` runs cargo against that
//!    tree's objs).
//! 3. The package, in the layout `dh_nginx` gives `libnginx-mod-*`: the
//!    shared object in `/usr/lib/nginx/modules/`, its `load_module` line in
//!    `/usr/share/nginx/modules-available/mod-http-generation-retry.conf`,
//!    `Depends:` on the ABI `nginx-dev` names (`nginx-abi-1.30.6-1`), and
//!    maintainer scripts made from `nginx-dev`'s own `dh_nginx` autoscripts
//!    that link the file into `/etc/nginx/modules-enabled/` at priority 70,
//!    after Debian's `50-mod-stream.conf`.
//! 4. The tests: the `.deb` is unpacked again and its shared object is
//!    loaded into Debian's binary (run from the unpacked packages through
//!    their own dynamic loader), after Debian's dynamic stream module, for
//!    the http and stream races; `t/tests/debian.rs` checks the package.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::build::MODULE_FILE;
use crate::tree::{copy_tree, fnv1a, is_fresh, make, run_quiet, write_stamp};
use crate::versions::{sha256, shared_nginx, verified};
use crate::{run_tests, target_dir, Result, Step, TestTotals};

/// The package: `libnginx-mod-` and `http-`, as Debian names http module
/// packages, then the project's name.
pub const PACKAGE: &str = "libnginx-mod-http-generation-retry";
/// Its `load_module` snippet in `modules-available`.
pub const CONF: &str = "mod-http-generation-retry.conf";
/// Its priority in `modules-enabled`: after `50-mod-stream.conf` (the
/// priority `dh_nginx` gives non-http modules such as `mod-stream-*`),
/// since the stream part of the shared object needs Debian's dynamic
/// stream module loaded first.
pub const PRIORITY: u32 = 70;

/// Debian's packages the build and the tests need: nginx, its development
/// files and dynamic stream module, and the runtime libraries Debian's
/// binary needs that are newer than Debian 12's.
pub const DEBIAN_PACKAGES: &[&str] = &[
    "nginx",
    "nginx-common",
    "nginx-dev",
    "libnginx-mod-stream",
    "libc6",
    "libcrypt1",
    "libpcre2-8-0",
    "libssl3t64",
    "zlib1g",
    "libzstd1",
];

/// Where Debian's packages come from.
pub enum Inputs {
    /// `../shared/nginx/debian-sid/`, checked against `SHA256SUMS`.
    Pinned,
    /// The named suite of Debian's archive, downloaded now.
    Suite(String),
    /// This machine's own `nginx-dev` and nginx (`apt install nginx-dev`):
    /// what an operator builds the package for. The races run in the
    /// installed `/usr/sbin/nginx`; the install test, which needs Debian's
    /// `.deb`s, does not run.
    Installed,
}

impl Inputs {
    fn label(&self) -> String {
        match self {
            Inputs::Pinned => "pinned".into(),
            Inputs::Suite(s) => s.clone(),
            Inputs::Installed => "installed".into(),
        }
    }
}

/// `cargo xtask debian [--suite SUITE] [-- TEST ARGS]`.
pub fn command(args: &[String]) -> Result {
    let mut inputs = Inputs::Pinned;
    let mut it = args.iter();
    let mut extra = Vec::new();
    while let Some(a) = it.next() {
        if let Some(s) = a.strip_prefix("--suite=") {
            inputs = Inputs::Suite(s.to_string());
            continue;
        }
        match a.as_str() {
            "--suite" => {
                let s = it.next().ok_or("--suite needs a value (sid)")?;
                inputs = Inputs::Suite(s.clone());
            }
            "--installed" => inputs = Inputs::Installed,
            "--" => {
                extra = it.cloned().collect();
                break;
            }
            other => {
                return Err(format!(
                "unknown option `{other}`; usage: cargo xtask debian [--suite sid | --installed] [-- TEST ARGS]"
            ))
            }
        }
    }
    let step = test_step(&inputs, &extra);
    println!(
        "debian: {} in {:.0} s build, {:.0} s tests: {} passed, {} failed, {} ignored",
        step.what,
        step.build_s,
        step.test_s,
        step.totals.passed,
        step.totals.failed,
        step.totals.ignored
    );
    if step.ok {
        Ok(())
    } else {
        Err(format!("{} failed", step.what))
    }
}

/// Builds, packages and tests: one line of `nginx-test`'s table.
pub fn test_step(inputs: &Inputs, extra: &[String]) -> Step {
    let mut step = Step {
        what: format!("debian ({})", inputs.label()),
        build_s: 0.0,
        test_s: 0.0,
        totals: TestTotals::default(),
        ok: false,
    };
    let started = Instant::now();
    let made = match package(inputs) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("xtask: error: debian: {e}");
            return step;
        }
    };
    step.what = format!("debian nginx {}", made.nginx_version);
    step.build_s = started.elapsed().as_secs_f64();
    eprintln!("xtask: debian: {}", made.deb.display());

    let started = Instant::now();
    let mut cmd = crate::cargo();
    cmd.args(["test", "--no-fail-fast", "-p", "generation-retry-t"]);
    for t in DEBIAN_TESTS {
        let needs_debs = *t == "debian";
        let needs_stream = *t == "stream";
        if (needs_debs && made.debs_dir.is_none()) || (needs_stream && !made.stream) {
            eprintln!("xtask: debian: {t}.rs left out (no Debian .debs or no stream module here)");
            continue;
        }
        cmd.args(["--test", t]);
    }
    if let Some(debs) = &made.debs_dir {
        cmd.env("GENERATION_RETRY_DEBIAN_DEBS", debs);
    }
    // The patched nginx is ours, not Debian's; t/tests/debian.rs is
    // ignored unless this run gives it the package.
    cmd.args([
        "--",
        "--include-ignored",
        "--skip",
        "patched",
        "--skip",
        "memcheck",
    ])
    .args(extra.iter().skip_while(|a| *a == "--"))
    .env("GENERATION_RETRY_NGINX_DIR", &made.nginx_dir)
    .env("GENERATION_RETRY_DEBIAN_DEB", &made.deb);
    crate::matrix_env(&mut cmd);
    let result = run_tests(&mut cmd, &mut step.totals);
    step.test_s = started.elapsed().as_secs_f64();
    step.ok = result.is_ok();
    if let Err(e) = result {
        eprintln!("xtask: error: debian: {e}");
    }
    step
}

/// The tests run inside Debian's nginx: the http races (stock, module on
/// and off), the stream races, and the package itself.
const DEBIAN_TESTS: &[&str] = &["race", "module_race", "stream", "debian"];

/// What [`package`] made.
pub struct Made {
    pub nginx_version: String,
    pub deb: PathBuf,
    /// Where Debian's own `.deb`s are (none for `--installed`).
    pub debs_dir: Option<PathBuf>,
    /// Whether Debian's dynamic stream module is there (loaded first).
    pub stream: bool,
    /// The harness's install directory for Debian's nginx.
    pub nginx_dir: PathBuf,
}

/// Steps 1 to 3 of the module doc, and the harness's view of the result.
pub fn package(inputs: &Inputs) -> Result<Made> {
    let base = target_dir().join("debian");
    let label = inputs.label();
    let (root, debs_dir) = match inputs {
        Inputs::Installed => (PathBuf::from("/"), None),
        _ => {
            let debs = fetch(inputs, &base.join(format!("download-{label}")))?;
            let root = unpack(&debs, &base.join(format!("root-{label}")))?;
            let dir = debs.first().and_then(|d| d.parent()).map(Path::to_path_buf);
            (root, Some(dir.ok_or("no Debian packages")?))
        }
    };
    let src = root.join("usr/share/nginx/src");
    if !src.join("conf_flags").is_file() {
        return Err(format!(
            "no {}: install Debian's nginx-dev (apt install nginx-dev)",
            src.join("conf_flags").display()
        ));
    }
    let nginx_version = crate::versions::tree_version(&src)?;
    let abi = abi(&src)?;

    let so = build(&root, &base.join(format!("build-{label}")))?;
    let deb = make_deb(&root, &so, &nginx_version, &abi, &base)?;

    // What the tests load: the .deb unpacked again, beside Debian's nginx.
    let nginx_dir = base.join(format!("nginx-{label}"));
    let _ = fs::remove_dir_all(&nginx_dir);
    let unpacked = nginx_dir.join("deb");
    dpkg_x(&deb, &unpacked)?;
    let modules = nginx_dir.join("modules");
    fs::create_dir_all(&modules).map_err(|e| e.to_string())?;
    fs::copy(
        unpacked.join("usr/lib/nginx/modules").join(MODULE_FILE),
        modules.join(MODULE_FILE),
    )
    .map_err(|e| format!("the .deb holds no usr/lib/nginx/modules/{MODULE_FILE}: {e}"))?;
    write_launcher(&root, &nginx_dir.join("stock/sbin/nginx"))?;
    let stream_so = root.join("usr/lib/nginx/modules/ngx_stream_module.so");
    let stream = stream_so.is_file();
    if stream {
        fs::write(
            nginx_dir.join("modules-first.conf"),
            format!("load_module {};\n", stream_so.display()),
        )
        .map_err(|e| e.to_string())?;
    }
    Ok(Made {
        nginx_version,
        deb,
        debs_dir,
        stream,
        nginx_dir,
    })
}

/// The `.deb`s: checked pinned ones, or downloaded ones.
fn fetch(inputs: &Inputs, dir: &Path) -> Result<Vec<PathBuf>> {
    match inputs {
        Inputs::Pinned => {
            let pinned = shared_nginx().join("debian-sid");
            let mut debs = Vec::new();
            for entry in fs::read_dir(&pinned).map_err(|e| format!("{}: {e}", pinned.display()))? {
                let path = entry.map_err(|e| e.to_string())?.path();
                let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
                    continue;
                };
                if !name.ends_with(".deb") {
                    continue;
                }
                debs.push(verified(&format!("debian-sid/{name}"))?);
            }
            debs.sort();
            Ok(debs)
        }
        Inputs::Suite(suite) => download(suite, dir),
        Inputs::Installed => Err("the installed nginx-dev needs no packages".into()),
    }
}

/// `apt-get download` of [`DEBIAN_PACKAGES`] from `suite`, with a package
/// index of its own under `dir` (this machine's sources, lists and
/// installed packages are untouched). The archive is the one this
/// machine's apt already uses, and its keyring checks the suite.
fn download(suite: &str, dir: &Path) -> Result<Vec<PathBuf>> {
    let (uri, keyring) = system_archive()?;
    let _ = fs::remove_dir_all(dir);
    for d in ["lists/partial", "cache/archives/partial", "parts", "debs"] {
        fs::create_dir_all(dir.join(d)).map_err(|e| e.to_string())?;
    }
    let sources = dir.join("sources.list");
    fs::write(
        &sources,
        format!("deb [signed-by={keyring}] {uri} {suite} main\n"),
    )
    .map_err(|e| e.to_string())?;
    let opts = [
        format!("Dir::Etc::SourceList={}", sources.display()),
        format!("Dir::Etc::SourceParts={}", dir.join("parts").display()),
        format!("Dir::State::Lists={}", dir.join("lists").display()),
        format!("Dir::Cache={}", dir.join("cache").display()),
    ];
    let apt = |args: &[&str], cwd: &Path| {
        let mut c = Command::new("apt-get");
        for o in &opts {
            c.arg("-o").arg(o);
        }
        c.args(["-qq"]).args(args).current_dir(cwd);
        c
    };
    eprintln!("xtask: debian: package index of {suite} from {uri}");
    run_quiet(&mut apt(&["update"], dir))?;
    let debs_dir = dir.join("debs");
    let mut args = vec!["download"];
    args.extend_from_slice(DEBIAN_PACKAGES);
    run_quiet(&mut apt(&args, &debs_dir))?;
    let mut debs: Vec<PathBuf> = fs::read_dir(&debs_dir)
        .map_err(|e| e.to_string())?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "deb"))
        .collect();
    debs.sort();
    Ok(debs)
}

/// The Debian archive and keyring of this machine's own apt sources (the
/// first `deb` source whose suites are the release's, not its security
/// archive).
fn system_archive() -> Result<(String, String)> {
    let mut texts = Vec::new();
    for f in ["/etc/apt/sources.list"] {
        if let Ok(t) = fs::read_to_string(f) {
            texts.push(t);
        }
    }
    if let Ok(dir) = fs::read_dir("/etc/apt/sources.list.d") {
        for e in dir.flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "sources" || x == "list") {
                if let Ok(t) = fs::read_to_string(&p) {
                    texts.push(t);
                }
            }
        }
    }
    let keyring = "/usr/share/keyrings/debian-archive-keyring.gpg".to_string();
    for text in &texts {
        // deb822: `URIs: X` with `Suites: ...` in the same stanza.
        for stanza in text.split("\n\n") {
            let field = |name: &str| {
                stanza
                    .lines()
                    .find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_string()))
            };
            if let (Some(uri), Some(suites)) = (field("URIs:"), field("Suites:")) {
                if uri.ends_with("/debian") && !suites.contains("security") {
                    return Ok((uri, keyring));
                }
            }
        }
        // One-line: `deb [opts] URI SUITE COMPONENTS`.
        for line in text.lines() {
            let words: Vec<&str> = line
                .split_whitespace()
                .filter(|w| !w.starts_with('[') && !w.ends_with(']'))
                .collect();
            if let ["deb", uri, suite, ..] = words.as_slice() {
                if uri.ends_with("/debian") && !suite.contains("security") {
                    return Ok((uri.to_string(), keyring));
                }
            }
        }
    }
    Err("no Debian archive in this machine's apt sources; --suite needs one".into())
}

fn dpkg_x(deb: &Path, dest: &Path) -> Result {
    fs::create_dir_all(dest).map_err(|e| e.to_string())?;
    run_quiet(Command::new("dpkg-deb").arg("-x").arg(deb).arg(dest))
}

/// Every `.deb` unpacked into `dest`, unless the stamp says these were.
fn unpack(debs: &[PathBuf], dest: &Path) -> Result<PathBuf> {
    let names: Vec<String> = debs.iter().map(|d| d.display().to_string()).collect();
    let mut parts = names.clone();
    for d in debs {
        parts.push(sha256(d)?);
    }
    let stamp = fnv1a(parts.iter().map(|p| p.as_bytes()));
    let stamp_file = dest.join(".unpacked");
    if fs::read_to_string(&stamp_file).is_ok_and(|s| s == stamp) {
        return Ok(dest.to_path_buf());
    }
    let _ = fs::remove_dir_all(dest);
    for d in debs {
        dpkg_x(d, dest)?;
    }
    for needed in [
        "usr/sbin/nginx",
        "usr/share/nginx/src/conf_flags",
        "usr/lib/nginx/modules/ngx_stream_module.so",
    ] {
        if !dest.join(needed).exists() {
            return Err(format!("the packages hold no {needed}: {names:?}"));
        }
    }
    fs::write(&stamp_file, stamp).map_err(|e| e.to_string())?;
    Ok(dest.to_path_buf())
}

/// The ABI `dh_nginx` makes module packages depend on, from `nginx-dev`'s
/// `debian/libnginx-mod.abisubstvars` (`nginx:abi=nginx-abi-1.30.6-1`).
fn abi(src: &Path) -> Result<String> {
    let path = src.join("debian/libnginx-mod.abisubstvars");
    let text = fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    text.lines()
        .find_map(|l| l.trim().strip_prefix("nginx:abi="))
        .map(str::to_string)
        .ok_or(format!("{} names no nginx:abi", path.display()))
}

/// What the build adds to `conf_flags`, besides `--add-dynamic-module`:
/// `--with-stream`, as Debian's `nginx_mod` build system adds it for a
/// module that build-depends on `libnginx-mod-stream` (`conf_flags` has no
/// stream; nginx-dev's tree has its headers, not its sources, so only
/// `make modules` can be built, which is all that is wanted).
const CONFIGURE_EXTRA: &[&str] = &["--with-stream"];

/// Step 2: configure a copy of `nginx-dev`'s tree with its `conf_flags` and
/// `--add-dynamic-module`, and `make modules`; returns the shared object.
fn build(root: &Path, work: &Path) -> Result<PathBuf> {
    let src = root.join("usr/share/nginx/src");
    let tree = work.join("src");
    // The whole of nginx-dev's tree (a Debian revision may change its
    // headers, or only its ABI name, without a new nginx version), and how
    // this repository adds itself.
    let inputs = [
        crate::versions::tree_identity(&src)?.into_bytes(),
        crate::root().to_string_lossy().into_owned().into_bytes(),
        fs::read(crate::root().join("config")).map_err(|e| e.to_string())?,
        fs::read(crate::root().join("config.make")).map_err(|e| e.to_string())?,
    ];
    let stamp = fnv1a(
        inputs
            .iter()
            .map(Vec::as_slice)
            .chain(CONFIGURE_EXTRA.iter().map(|s| s.as_bytes())),
    );
    let objs = tree.join("objs");
    if !is_fresh(work, &stamp, &objs.join("Makefile")) {
        let started = Instant::now();
        eprintln!("xtask: debian: configuring nginx-dev's tree with its conf_flags");
        let _ = fs::remove_dir_all(work);
        copy_tree(&src, &tree)?;
        // As Debian's nginx_mod build system: conf_flags is a bash array
        // whose words call dpkg-architecture and dpkg-buildflags.
        run_quiet(
            Command::new("bash")
                .args([
                    "-c",
                    ". ./conf_flags && ./configure \"${NGX_CONF_FLAGS[@]}\" \"$@\"",
                    "configure",
                ])
                .args(CONFIGURE_EXTRA)
                .arg(format!("--add-dynamic-module={}", crate::root().display()))
                .current_dir(&tree),
        )?;
        write_stamp(work, &stamp)?;
        eprintln!(
            "xtask: debian: configured in {:.1} s",
            started.elapsed().as_secs_f64()
        );
    }
    let started = Instant::now();
    make(&tree, &objs, "modules")?;
    eprintln!(
        "xtask: debian: make modules in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let so = objs.join(MODULE_FILE);
    if !so.is_file() {
        return Err(format!("make modules left no {}", so.display()));
    }
    Ok(so)
}

/// `dpkg --print-architecture`.
fn architecture() -> Result<String> {
    let out = Command::new("dpkg")
        .arg("--print-architecture")
        .output()
        .map_err(|e| format!("dpkg: {e}"))?;
    let arch = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || arch.is_empty() {
        return Err(format!("dpkg --print-architecture: {out:?}"));
    }
    Ok(arch)
}

/// The newest `GLIBC_x.y` symbol version the shared object needs, as
/// `dpkg-shlibdeps` turns it into `libc6 (>= x.y)`.
fn glibc_needed(so: &Path) -> Result<String> {
    let text = objdump("-T", so)?;
    if !text.contains("GLIBC_") {
        return Err(format!("objdump -T {} shows no glibc symbol", so.display()));
    }
    let mut best: Vec<u32> = vec![2, 2, 5];
    for word in text.split_whitespace() {
        let Some(v) = word
            .trim_matches(|c| c == '(' || c == ')')
            .strip_prefix("GLIBC_")
        else {
            continue;
        };
        let parts: Option<Vec<u32>> = v.split('.').map(|p| p.parse().ok()).collect();
        if let Some(parts) = parts {
            if parts > best {
                best = parts;
            }
        }
    }
    Ok(best
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join("."))
}

/// `objdump FLAG SO`'s output; fails when objdump does.
fn objdump(flag: &str, so: &Path) -> Result<String> {
    let out = Command::new("objdump")
        .arg(flag)
        .arg(so)
        .output()
        .map_err(|e| format!("objdump: {e}"))?;
    if !out.status.success() {
        return Err(format!("objdump {flag} {}: {out:?}", so.display()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The shared libraries the object needs (`objdump -p`'s NEEDED).
fn needed(so: &Path) -> Result<Vec<String>> {
    Ok(objdump("-p", so)?
        .lines()
        .filter_map(|l| l.trim().strip_prefix("NEEDED"))
        .map(|n| n.trim().to_string())
        .collect())
}

/// Step 3: `target/debian/libnginx-mod-http-generation-retry_<version>_<arch>.deb`.
fn make_deb(root: &Path, so: &Path, nginx: &str, abi: &str, base: &Path) -> Result<PathBuf> {
    let arch = architecture()?;
    // The ABI's own revision is in the version, so a rebuild for a new
    // Debian ABI (`nginx-abi-1.30.6-2`) is a new version to apt.
    let abi_version = abi.trim_start_matches("nginx-abi-").replace('-', ".");
    let version = format!("{}-1+nginx{abi_version}", env!("CARGO_PKG_VERSION"));

    let stage = base.join("package");
    let _ = fs::remove_dir_all(&stage);
    let modules = stage.join("usr/lib/nginx/modules");
    let available = stage.join("usr/share/nginx/modules-available");
    let doc = stage.join(format!("usr/share/doc/{PACKAGE}"));
    let control = stage.join("DEBIAN");
    for d in [&modules, &available, &doc, &control] {
        fs::create_dir_all(d).map_err(|e| e.to_string())?;
    }
    let installed = modules.join(MODULE_FILE);
    fs::copy(so, &installed).map_err(|e| e.to_string())?;
    // As dh_strip does, without keeping a -dbgsym package.
    run_quiet(
        Command::new("strip")
            .args(["--strip-unneeded", "--remove-section=.comment"])
            .arg(&installed),
    )?;
    // As dh_fixperms leaves shared objects.
    set_mode(&installed, 0o644)?;
    fs::write(
        available.join(CONF),
        format!("load_module modules/{MODULE_FILE};\n"),
    )
    .map_err(|e| e.to_string())?;
    fs::write(
        doc.join("copyright"),
        "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\
         Upstream-Name: generation-retry\n\n\
         Files: *\n\
         Copyright: generation-retry developers\n\
         License: Apache-2.0\n \
         On Debian systems, the full text of the Apache License 2.0 is in\n \
         /usr/share/common-licenses/Apache-2.0.\n",
    )
    .map_err(|e| e.to_string())?;

    // Debian policy's changelog.Debian.gz, compressed as dh_compress does.
    let changelog = doc.join("changelog.Debian");
    fs::write(
        &changelog,
        format!(
            "{PACKAGE} ({version}) unstable; urgency=medium\n\n  * Built by cargo xtask debian against nginx-dev {nginx} ({abi}).\n\n -- generation-retry developers <generation-retry@localhost>  Tue, 01 Dec 2026 00:00:00 +0000\n"
        ),
    )
    .map_err(|e| e.to_string())?;
    run_quiet(Command::new("gzip").args(["-9n"]).arg(&changelog))?;

    // The maintainer scripts: nginx-dev's dh_nginx autoscripts, with the
    // conf pair filled in as dh_nginx does (`#NAMES#`).
    let names = format!("{CONF}:{PRIORITY}-{CONF} ");
    let autoscripts = root.join("usr/share/debhelper/autoscripts");
    for script in ["postinst", "prerm", "postrm"] {
        let template_path = autoscripts.join(format!("{script}-nginx"));
        let template = fs::read_to_string(&template_path)
            .map_err(|e| format!("{}: {e}", template_path.display()))?;
        let body = template.replace("#NAMES#", &names);
        let path = control.join(script);
        fs::write(
            &path,
            format!(
                "#!/bin/sh\nset -e\n# Automatically added by dh_nginx (cargo xtask debian)\n{body}# End automatically added section\n"
            ),
        )
        .map_err(|e| e.to_string())?;
        set_mode(&path, 0o755)?;
    }

    let size_kib = dir_size(&stage.join("usr"))?.div_ceil(1024);
    let mut depends = format!("{abi}, libc6 (>= {})", glibc_needed(&installed)?);
    for lib in needed(&installed)? {
        match lib.as_str() {
            "libgcc_s.so.1" => depends.push_str(", libgcc-s1 (>= 3.0)"),
            l if l.starts_with("libc.so") || l.starts_with("ld-linux") => {}
            other => {
                return Err(format!(
                    "the module needs {other}: name its package in Depends"
                ))
            }
        }
    }
    fs::write(
        control.join("control"),
        format!(
            "Package: {PACKAGE}\n\
             Source: generation-retry\n\
             Version: {version}\n\
             Architecture: {arch}\n\
             Maintainer: generation-retry developers <generation-retry@localhost>\n\
             Installed-Size: {size_kib}\n\
             Depends: {depends}\n\
             Suggests: libnginx-mod-stream\n\
             Section: httpd\n\
             Priority: optional\n\
             Description: upstream re-snapshot module for Nginx (no live upstreams fix)\n \
             Ends the intermittent \"no live upstreams\" 502s nginx gives when an\n \
             upstream \"server NAME resolve\" changes its address while a request is\n \
             being retried (nginx/nginx#1656): with generation_retry_resnapshot on,\n \
             the request selects again from the new peer list. Counts every\n \
             \"no live upstreams\" by cause for Prometheus. http and stream.\n"
        ),
    )
    .map_err(|e| e.to_string())?;
    fs::write(control.join("md5sums"), md5sums(&stage)?).map_err(|e| e.to_string())?;

    let deb = base.join(format!("{PACKAGE}_{version}_{arch}.deb"));
    let _ = fs::remove_file(&deb);
    run_quiet(
        Command::new("dpkg-deb")
            .args(["--root-owner-group", "--build"])
            .arg(&stage)
            .arg(&deb),
    )?;
    Ok(deb)
}

fn set_mode(path: &Path, mode: u32) -> Result {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).map_err(|e| e.to_string())
}

fn dir_size(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for f in crate::tree::files(dir, &|_| false)? {
        total += fs::metadata(&f).map_err(|e| e.to_string())?.len();
    }
    Ok(total)
}

/// `DEBIAN/md5sums`: `md5sum` of every file under `usr/`, paths relative.
fn md5sums(stage: &Path) -> Result<String> {
    let out = Command::new("bash")
        .args(["-c", "find usr -type f -print0 | sort -z | xargs -0 md5sum"])
        .current_dir(stage)
        .output()
        .map_err(|e| format!("md5sum: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The harness starts `stock/sbin/nginx`: for Debian's binary, a launcher
/// that runs it from the unpacked packages with their own dynamic loader and
/// libraries (Debian unstable's glibc and OpenSSL are newer than this
/// machine's). `exec` keeps one process: signals reach nginx itself.
fn write_launcher(root: &Path, path: &Path) -> Result {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    }
    if root == Path::new("/") {
        // The installed nginx runs as it is.
        std::os::unix::fs::symlink("/usr/sbin/nginx", path).map_err(|e| e.to_string())?;
        return Ok(());
    }
    let multiarch = String::from_utf8_lossy(
        &Command::new("dpkg-architecture")
            .arg("-qDEB_HOST_MULTIARCH")
            .output()
            .map_err(|e| format!("dpkg-architecture: {e}"))?
            .stdout,
    )
    .trim()
    .to_string();
    let libs = root.join("usr/lib").join(&multiarch);
    let loader = fs::read_dir(&libs)
        .map_err(|e| format!("{}: {e}", libs.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("ld-linux") && n.contains(".so."))
        })
        .ok_or(format!("no dynamic loader in {}", libs.display()))?;
    fs::write(
        path,
        format!(
            "#!/bin/sh\n# Debian's nginx, run from its unpacked packages (cargo xtask debian).\nexec '{}' --library-path '{}' '{}' \"$@\"\n",
            loader.display(),
            libs.display(),
            root.join("usr/sbin/nginx").display()
        ),
    )
    .map_err(|e| e.to_string())?;
    set_mode(path, 0o755)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pinned_packages_are_the_ones_a_suite_download_fetches() {
        let sums = fs::read_to_string(shared_nginx().join("SHA256SUMS")).unwrap();
        let mut pinned: Vec<String> = sums
            .lines()
            .filter_map(|l| l.split_whitespace().nth(1))
            .filter_map(|f| f.strip_prefix("debian-sid/"))
            .map(|f| f.split('_').next().unwrap().to_string())
            .collect();
        pinned.sort();
        let mut wanted: Vec<String> = DEBIAN_PACKAGES.iter().map(|p| p.to_string()).collect();
        wanted.sort();
        assert_eq!(pinned, wanted);
    }

    #[test]
    fn the_package_is_named_as_debian_names_module_packages() {
        // dh_nginx: libnginx-mod-<name> with an http- prefix for http modules.
        assert!(PACKAGE.starts_with("libnginx-mod-http-"));
        assert_eq!(
            CONF,
            format!("mod-{}.conf", PACKAGE.trim_start_matches("libnginx-mod-"))
        );
        // Sorted after 50-mod-stream.conf, as modules-enabled/*.conf is.
        let mut names = [
            format!("{PRIORITY}-{CONF}"),
            "50-mod-stream.conf".to_string(),
        ];
        names.sort();
        assert_eq!(names[1], format!("{PRIORITY}-{CONF}"));
    }

    #[test]
    fn glibc_versions_compare_numerically() {
        let parts = |s: &str| -> Vec<u32> { s.split('.').map(|p| p.parse().unwrap()).collect() };
        assert!(parts("2.34") > parts("2.5"));
        assert!(parts("2.3.4") > parts("2.3"));
    }
}
