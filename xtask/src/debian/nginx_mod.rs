//! Step 2 of `cargo xtask debian`: the module built as Debian's `nginx_mod`
//! debhelper build system builds third-party modules, from a copy of
//! `nginx-dev`'s tree.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::build::MODULE_FILE;
use crate::source::tree_identity;
use crate::tree::{copy_tree, fnv1a, is_fresh, make_target, run_quiet, write_stamp};
use crate::workspace::{self, At, Result};

/// What the build adds to `conf_flags`, besides `--add-dynamic-module`:
/// `--with-stream`, as Debian's `nginx_mod` build system adds it for a
/// module that build-depends on `libnginx-mod-stream` (`conf_flags` has no
/// stream; nginx-dev's tree has its headers, not its sources, so only
/// `make modules` can be built, which is all that is wanted).
const CONFIGURE_EXTRA: &[&str] = &["--with-stream"];

/// Step 2: configure a copy of `nginx-dev`'s tree with its `conf_flags` and
/// `--add-dynamic-module`, and `make modules`; returns the shared object.
pub(super) fn build(root: &Path, work: &Path) -> Result<PathBuf> {
    let src = root.join("usr/share/nginx/src");
    let tree = work.join("src");
    // The whole of nginx-dev's tree (a Debian revision may change its
    // headers, or only its ABI name, without a new nginx version), and how
    // this repository adds itself.
    let inputs = [
        tree_identity(&src)?.into_bytes(),
        workspace::root()
            .to_string_lossy()
            .into_owned()
            .into_bytes(),
        fs::read(workspace::root().join("config")).at(workspace::root().join("config"))?,
        fs::read(workspace::root().join("config.make")).at(workspace::root().join("config.make"))?,
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
                .arg(format!(
                    "--add-dynamic-module={}",
                    workspace::root().display()
                ))
                .current_dir(&tree),
        )?;
        write_stamp(work, &stamp)?;
        eprintln!(
            "xtask: debian: configured in {:.1} s",
            started.elapsed().as_secs_f64()
        );
    }
    let started = Instant::now();
    make_target(&tree, &objs, "modules")?;
    eprintln!(
        "xtask: debian: make modules in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let so = objs.join(MODULE_FILE);
    if !so.is_file() {
        return err!("make modules left no {}", so.display());
    }
    Ok(so)
}
