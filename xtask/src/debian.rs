//! `cargo xtask debian [--suite SUITE | --installed] [--no-test]`: the
//! module for Debian's own nginx,
//! built the way Debian builds third-party modules, packaged the way
//! Debian packages them, and tested inside Debian's binary.
//!
//! 1. Debian's packages: the pinned `.deb`s of the mirror's `debian-sid/`
//!    (`GENERATION_RETRY_NGINX_MIRROR`, CI's `../shared/nginx`; checked
//!    against its `SHA256SUMS`), or with `--suite sid` the current
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
//!
//! `inputs.rs` is step 1, `nginx_mod.rs` step 2, `deb.rs` step 3; this file
//! puts them together and runs step 4.

mod deb;
mod inputs;
mod nginx_mod;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

pub use inputs::Inputs;

use crate::build::MODULE_FILE;
use crate::harness::parallel::{run_modules, Modules};
use crate::harness::{matrix_env, suite_test, Step};
use crate::versions::tree_version;
use crate::workspace::{target_dir, At, Result};
use deb::{abi, make_deb, set_mode};
use inputs::{dpkg_x, fetch, unpack};

/// `cargo xtask debian [--suite SUITE | --installed] [--no-test] [-- TEST ARGS]`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// the current packages from this Debian suite (sid: unstable) instead of
    /// the mirror's debian-sid/
    #[arg(long, value_name = "SUITE", conflicts_with = "installed")]
    pub suite: Option<String>,
    /// this machine's nginx-dev and nginx
    #[arg(long)]
    pub installed: bool,
    /// build the .deb and run nothing
    #[arg(long)]
    pub no_test: bool,
    /// after `--`, to the test binaries
    #[arg(last = true, value_name = "TEST ARGS")]
    pub extra: Vec<String>,
}

pub fn command(a: &Args) -> Result {
    let inputs = match (&a.suite, a.installed) {
        (Some(s), _) => Inputs::Suite(s.clone()),
        (None, true) => Inputs::Installed,
        (None, false) => Inputs::Pinned,
    };
    if a.no_test {
        // The operator's path: the package, and no test suite compiled.
        let made = package(&inputs)?;
        println!(
            "debian: {} for nginx {}; install it with: apt install {}",
            made.deb.display(),
            made.nginx_version,
            made.deb.display()
        );
        return Ok(());
    }
    let step = test_step(&inputs, &a.extra);
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
        err!("{} failed", step.what)
    }
}

/// Builds, packages and tests: one line of `nginx-test`'s table.
pub fn test_step(inputs: &Inputs, extra: &[String]) -> Step {
    let started = Instant::now();
    let made = package(inputs);
    test_made(inputs, made, started.elapsed().as_secs_f64(), extra)
}

/// The tests of what [`package`] made (in `build_s` seconds), e.g. on
/// another thread while the matrix's last version was tested.
pub fn test_made(inputs: &Inputs, made: Result<Made>, build_s: f64, extra: &[String]) -> Step {
    let mut step = Step::new(format!("debian ({})", inputs.label()));
    let made = match made {
        Ok(m) => m,
        Err(e) => {
            eprintln!("xtask: error: debian: {e}");
            return step;
        }
    };
    step.what = format!("debian nginx {}", made.nginx_version);
    step.build_s = build_s;
    eprintln!("xtask: debian: {}", made.deb.display());

    let started = Instant::now();
    let mut cmd = suite_test();
    let modules: Vec<&str> = DEBIAN_TESTS
        .iter()
        .copied()
        .filter(|t| {
            let needs_debs = *t == "debian";
            let needs_stream = *t == "stream";
            let left_out =
                (needs_debs && made.debs_dir.is_none()) || (needs_stream && !made.stream);
            if left_out {
                eprintln!("xtask: debian: {t} left out (no Debian .debs or no stream module here)");
            }
            !left_out
        })
        .collect();
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
    // protocols/udp.rs's tests need the stream module.
    .args(if made.stream {
        &[][..]
    } else {
        &["--skip", "udp::"][..]
    })
    .args(extra.iter().skip_while(|a| *a == "--"))
    .env("GENERATION_RETRY_NGINX_DIR", &made.nginx_dir)
    .env("GENERATION_RETRY_DEBIAN_DEB", &made.deb);
    matrix_env(&mut cmd);
    let result = run_modules(
        &cmd,
        &mut step.totals,
        Modules::Only(&modules),
        extra.is_empty(),
    );
    step.tests_ended(started);
    step.ok = result.is_ok();
    if let Err(e) = result {
        eprintln!("xtask: error: debian: {e}");
    }
    step
}

/// The tests run inside Debian's nginx: the http races (stock, module on
/// and off), through every protocol, the stream races, and the package
/// itself.
const DEBIAN_TESTS: &[&str] = &["race", "module_race", "protocols", "stream", "debian"];

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
        return err!(
            "no {}: install Debian's nginx-dev (apt install nginx-dev)",
            src.join("conf_flags").display()
        );
    }
    let nginx_version = tree_version(&src)?;
    let abi = abi(&src)?;

    let so = nginx_mod::build(&root, &base.join(format!("build-{label}")))?;
    let deb = make_deb(&root, &so, &nginx_version, &abi, &base)?;

    // What the tests load: the .deb unpacked again, beside Debian's nginx.
    let nginx_dir = base.join(format!("nginx-{label}"));
    let _ = fs::remove_dir_all(&nginx_dir);
    let unpacked = nginx_dir.join("deb");
    dpkg_x(&deb, &unpacked)?;
    let modules = nginx_dir.join("modules");
    fs::create_dir_all(&modules).at(&modules)?;
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
        .at(nginx_dir.join("modules-first.conf"))?;
    }
    Ok(Made {
        nginx_version,
        deb,
        debs_dir,
        stream,
        nginx_dir,
    })
}

/// The harness starts `stock/sbin/nginx`: for Debian's binary, a launcher
/// that runs it from the unpacked packages with their own dynamic loader and
/// libraries (Debian unstable's glibc and OpenSSL are newer than this
/// machine's). `exec` keeps one process: signals reach nginx itself.
fn write_launcher(root: &Path, path: &Path) -> Result {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).at(dir)?;
    }
    if root == Path::new("/") {
        // The installed nginx runs as it is.
        std::os::unix::fs::symlink("/usr/sbin/nginx", path).at(path)?;
        return Ok(());
    }
    let multiarch = String::from_utf8_lossy(
        &Command::new("dpkg-architecture")
            .arg("-qDEB_HOST_MULTIARCH")
            .output()
            .running("dpkg-architecture")?
            .stdout,
    )
    .trim()
    .to_string();
    let libs = root.join("usr/lib").join(&multiarch);
    let loader = fs::read_dir(&libs)
        .at(&libs)?
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
    ).at(path)?;
    set_mode(path, 0o755)
}
