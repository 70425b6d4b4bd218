//! Step 3 of `cargo xtask debian`: the `.deb`, in the layout `dh_nginx`
//! gives `libnginx-mod-*` packages.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::build::MODULE_FILE;
use crate::tree::{files, run_quiet};
use crate::workspace::{At, Result};

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

/// The ABI `dh_nginx` makes module packages depend on, from `nginx-dev`'s
/// `debian/libnginx-mod.abisubstvars` (`nginx:abi=nginx-abi-1.30.6-1`).
pub(super) fn abi(src: &Path) -> Result<String> {
    let path = src.join("debian/libnginx-mod.abisubstvars");
    let text = fs::read_to_string(&path).at(&path)?;
    text.lines()
        .find_map(|l| l.trim().strip_prefix("nginx:abi="))
        .map(str::to_string)
        .ok_or(format!("{} names no nginx:abi", path.display()).into())
}

/// `dpkg --print-architecture`.
fn architecture() -> Result<String> {
    let out = Command::new("dpkg")
        .arg("--print-architecture")
        .output()
        .running("dpkg")?;
    let arch = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || arch.is_empty() {
        return err!("dpkg --print-architecture: {out:?}");
    }
    Ok(arch)
}

/// The newest `GLIBC_x.y` symbol version the shared object needs, as
/// `dpkg-shlibdeps` turns it into `libc6 (>= x.y)`.
fn glibc_needed(so: &Path) -> Result<String> {
    let text = objdump("-T", so)?;
    if !text.contains("GLIBC_") {
        return err!("objdump -T {} shows no glibc symbol", so.display());
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
        .running("objdump")?;
    if !out.status.success() {
        return err!("objdump {flag} {}: {out:?}", so.display());
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
pub(super) fn make_deb(
    root: &Path,
    so: &Path,
    nginx: &str,
    abi: &str,
    base: &Path,
) -> Result<PathBuf> {
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
        fs::create_dir_all(d).at(d)?;
    }
    let installed = modules.join(MODULE_FILE);
    fs::copy(so, &installed).at(so)?;
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
    .at(available.join(CONF))?;
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
    .at(doc.join("copyright"))?;

    // Debian policy's changelog.Debian.gz, compressed as dh_compress does.
    let changelog = doc.join("changelog.Debian");
    fs::write(
        &changelog,
        format!(
            "{PACKAGE} ({version}) unstable; urgency=medium\n\n  * Built by cargo xtask debian against nginx-dev {nginx} ({abi}).\n\n -- generation-retry developers <generation-retry@localhost>  Tue, 01 Dec 2026 00:00:00 +0000\n"
        ),
    ).at(&changelog)?;
    run_quiet(Command::new("gzip").args(["-9n"]).arg(&changelog))?;

    // The maintainer scripts: nginx-dev's dh_nginx autoscripts, with the
    // conf pair filled in as dh_nginx does (`#NAMES#`).
    let names = format!("{CONF}:{PRIORITY}-{CONF} ");
    let autoscripts = root.join("usr/share/debhelper/autoscripts");
    for script in ["postinst", "prerm", "postrm"] {
        let template_path = autoscripts.join(format!("{script}-nginx"));
        let template = fs::read_to_string(&template_path).at(&template_path)?;
        let body = template.replace("#NAMES#", &names);
        let path = control.join(script);
        fs::write(
            &path,
            format!(
                "#!/bin/sh\nset -e\n# Automatically added by dh_nginx (cargo xtask debian)\n{body}# End automatically added section\n"
            ),
        ).at(&path)?;
        set_mode(&path, 0o755)?;
    }

    let size_kib = dir_size(&stage.join("usr"))?.div_ceil(1024);
    let mut depends = format!("{abi}, libc6 (>= {})", glibc_needed(&installed)?);
    for lib in needed(&installed)? {
        match lib.as_str() {
            "libgcc_s.so.1" => depends.push_str(", libgcc-s1 (>= 3.0)"),
            l if l.starts_with("libc.so") || l.starts_with("ld-linux") => {}
            other => return err!("the module needs {other}: name its package in Depends"),
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
    .at(control.join("control"))?;
    fs::write(control.join("md5sums"), md5sums(&stage)?).at(control.join("md5sums"))?;

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

pub(super) fn set_mode(path: &Path, mode: u32) -> Result {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).at(path)
}

fn dir_size(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for f in files(dir, &|_| false)? {
        total += fs::metadata(&f).at(&f)?.len();
    }
    Ok(total)
}

/// `DEBIAN/md5sums`: `md5sum` of every file under `usr/`, paths relative.
fn md5sums(stage: &Path) -> Result<String> {
    let out = Command::new("bash")
        .args(["-c", "find usr -type f -print0 | sort -z | xargs -0 md5sum"])
        .current_dir(stage)
        .output()
        .running("md5sum")?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned().into());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

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
