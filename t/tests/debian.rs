//! The `.deb` that `cargo xtask debian` made, checked as Debian would use
//! it: its layout and dependencies against Debian's own nginx package, and
//! an installation Debian's way (the files unpacked where dpkg puts them,
//! the maintainer scripts run as dpkg runs them) after which Debian's own
//! nginx, with Debian's own `nginx.conf`, loads the module through
//! `/etc/nginx/modules-enabled/`. Run by `cargo xtask debian` (and
//! `nginx-test --nginx all`), which sets `GENERATION_RETRY_DEBIAN_*`; the
//! races inside Debian's binary are `race.rs`, `module_race.rs` and
//! `stream.rs`, run against it by the same command.

use std::path::{Path, PathBuf};
use std::process::Command;

const MODULE: &str = "ngx_http_upstream_generation_retry_module.so";
const CONF: &str = "mod-http-generation-retry.conf";

fn env_path(name: &str) -> PathBuf {
    let v = std::env::var_os(name)
        .unwrap_or_else(|| panic!("{name} is not set: run `cargo xtask debian`"));
    PathBuf::from(v)
}

fn dpkg_deb(args: &[&str], deb: &Path) -> String {
    let out = Command::new("dpkg-deb")
        .args(args)
        .arg(deb)
        .output()
        .expect("run dpkg-deb");
    assert!(
        out.status.success(),
        "dpkg-deb {args:?} {}: {out:?}",
        deb.display()
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Debian's `.deb` of `package` in the packages `cargo xtask debian` used.
fn debian_deb(package: &str) -> PathBuf {
    let dir = env_path("GENERATION_RETRY_DEBIAN_DEBS");
    std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&format!("{package}_")) && n.ends_with(".deb"))
        })
        .unwrap_or_else(|| panic!("no {package}_*.deb in {}", dir.display()))
}

#[test]
#[ignore = "needs the package: run by `cargo xtask debian`"]
fn the_package_has_debians_module_layout_and_depends_on_the_abi_nginx_provides() {
    let deb = env_path("GENERATION_RETRY_DEBIAN_DEB");
    let field = |d: &Path, f: &str| {
        dpkg_deb(&["-f"], d)
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{f}: ")).map(str::to_string))
    };

    // nginx `Provides: ..., nginx-abi-1.30.6-1`: the package must depend on
    // exactly that, as dh_nginx makes Debian's own module packages do.
    let nginx = debian_deb("nginx");
    let provides = field(&nginx, "Provides").expect("nginx provides");
    let abi = provides
        .split(", ")
        .find(|p| p.starts_with("nginx-abi-"))
        .unwrap_or_else(|| panic!("Debian's nginx provides no ABI: {provides}"));
    let depends = field(&deb, "Depends").expect("Depends");
    assert!(
        depends.split(", ").any(|d| d == abi),
        "Depends: {depends} lacks {abi}"
    );
    assert!(depends.contains("libc6 (>= 2."), "Depends: {depends}");
    assert_eq!(
        field(&deb, "Package").as_deref(),
        Some("libnginx-mod-http-generation-retry")
    );
    assert_eq!(field(&deb, "Section").as_deref(), Some("httpd"));
    let stream_mod = debian_deb("libnginx-mod-stream");
    assert_eq!(
        field(&deb, "Architecture"),
        field(&stream_mod, "Architecture")
    );

    // The layout of Debian's libnginx-mod-stream: the object in the modules
    // directory and its load_module line in modules-available.
    let files = dpkg_deb(&["-c"], &deb);
    for path in [
        format!("./usr/lib/nginx/modules/{MODULE}"),
        format!("./usr/share/nginx/modules-available/{CONF}"),
        "./usr/share/doc/libnginx-mod-http-generation-retry/copyright".to_string(),
        "./usr/share/doc/libnginx-mod-http-generation-retry/changelog.Debian.gz".to_string(),
    ] {
        assert!(
            files.lines().any(|l| l.ends_with(&path)),
            "{path} missing:\n{files}"
        );
    }
    assert!(
        files.lines().all(|l| l.contains(" root/root ")),
        "files must be owned by root:\n{files}"
    );
    assert!(
        files
            .lines()
            .any(|l| l.starts_with("-rw-r--r--") && l.ends_with(MODULE)),
        "the shared object must be 0644 as dh_fixperms leaves it:\n{files}"
    );
    let theirs = dpkg_deb(&["-c"], &stream_mod);
    assert!(theirs.contains("./usr/share/nginx/modules-available/mod-stream.conf"));

    // Maintainer scripts as dh_nginx writes them, at priority 70: after
    // Debian's 50-mod-stream.conf, which the stream part needs first.
    let ctl = std::env::temp_dir().join(format!("gr-deb-ctl-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&ctl);
    let out = Command::new("dpkg-deb")
        .arg("-e")
        .arg(&deb)
        .arg(&ctl)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    for script in ["postinst", "prerm", "postrm"] {
        let text = std::fs::read_to_string(ctl.join(script)).unwrap();
        assert!(
            text.contains(&format!("{CONF}:70-{CONF}")),
            "{script}:\n{text}"
        );
        assert!(text.starts_with("#!/bin/sh\nset -e\n"), "{script}:\n{text}");
    }
    let _ = std::fs::remove_dir_all(&ctl);
}

/// The installation, in a private mount namespace whose `/etc`, `/usr` and
/// `/var` are overlays (this machine's stay untouched): Debian's `nginx`,
/// `nginx-common`, `libnginx-mod-stream` and our package are unpacked over
/// `/`, then the two modules' `postinst configure` run as dpkg runs them.
/// Debian's nginx (through the loader and libraries of Debian's own libc6
/// and friends, unpacked beside: `cargo xtask debian`'s launcher) must then pass `nginx -t` with Debian's
/// `/etc/nginx/nginx.conf` plus an http and a stream upstream using the
/// directive, so the module was loaded, after the stream module, through
/// `modules-enabled`. `prerm remove` disables it (nginx then rejects the
/// directive), `postinst configure` again re-enables it, `postrm purge`
/// removes the link.
#[test]
#[ignore = "needs the package: run by `cargo xtask debian`"]
fn the_package_installs_debians_way_and_debians_nginx_loads_it() {
    let deb = env_path("GENERATION_RETRY_DEBIAN_DEB");
    let work = std::env::temp_dir().join(format!("gr-deb-install-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let ctl = work.join("ctl");
    let stream_ctl = work.join("stream-ctl");
    for (d, to) in [
        (&deb, &ctl),
        (&debian_deb("libnginx-mod-stream"), &stream_ctl),
    ] {
        let out = Command::new("dpkg-deb")
            .arg("-e")
            .arg(d)
            .arg(to)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }
    // Debian's nginx through the launcher `cargo xtask debian` wrote (its
    // own loader and libraries): the same binary dpkg-deb puts at
    // /usr/sbin/nginx, with the same compiled-in paths.
    let launcher = generation_retry_t::nginx::install_dir().join("stock/sbin/nginx");
    assert!(launcher.is_file(), "{}", launcher.display());

    let script = format!(
        r#"
set -eu
mount --make-rprivate /
for d in etc usr var; do
    mkdir -p "$W/upper/$d" "$W/work/$d"
    mount -t overlay overlay -o "lowerdir=/$d,upperdir=$W/upper/$d,workdir=$W/work/$d" "/$d"
done
for p in nginx-common nginx libnginx-mod-stream; do
    dpkg-deb -x "$DEBS"/"$p"_*.deb /
done
dpkg-deb -x "$DEB" /
mkdir -p /var/log/nginx /var/lib/nginx
nginx() {{ "$LAUNCHER" "$@"; }}
maint() {{ # package script args...: as dpkg runs maintainer scripts
    pkg=$1 dir=$2 script=$3; shift 3
    DPKG_MAINTSCRIPT_PACKAGE=$pkg DPKG_MAINTSCRIPT_NAME=$script sh "$dir/$script" "$@"
}}
maint libnginx-mod-stream "$STREAM_CTL" postinst configure
maint libnginx-mod-http-generation-retry "$CTL" postinst configure
echo "== enabled"; ls /etc/nginx/modules-enabled
echo "== target"; readlink /etc/nginx/modules-enabled/70-{conf}
cat > /etc/nginx/conf.d/generation-retry.conf <<'EOF'
upstream gr_http {{ zone gr_http 64k; server 127.0.0.1:9; generation_retry_resnapshot on; }}
EOF
cat >> /etc/nginx/nginx.conf <<'EOF'
stream {{ upstream gr_stream {{ zone gr_stream 64k; server 127.0.0.1:9; generation_retry_resnapshot on; }} }}
EOF
echo "== nginx -t installed"; nginx -t 2>&1
maint libnginx-mod-http-generation-retry "$CTL" prerm remove
echo "== removed"; ls /etc/nginx/modules-enabled
echo "== nginx -t removed"; if nginx -t 2>&1; then echo "REMOVED-STILL-LOADS"; fi
maint libnginx-mod-http-generation-retry "$CTL" postinst configure 0.0.0
echo "== reinstalled"; ls /etc/nginx/modules-enabled
echo "== nginx -t reinstalled"; nginx -t 2>&1
maint libnginx-mod-http-generation-retry "$CTL" postrm purge
echo "== purged"; ls /etc/nginx/modules-enabled
"#,
        conf = CONF
    );
    let out = Command::new("unshare")
        .args(["-m", "sh", "-c", &script])
        .env("W", &work)
        .env("DEB", &deb)
        .env("DEBS", env_path("GENERATION_RETRY_DEBIAN_DEBS"))
        .env("CTL", &ctl)
        .env("STREAM_CTL", &stream_ctl)
        .env("LAUNCHER", &launcher)
        .output()
        .expect("run unshare");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&work);
    assert!(out.status.success(), "install script failed:\n{said}");
    let section = |name: &str| -> String {
        said.split(&format!("== {name}\n"))
            .nth(1)
            .and_then(|rest| rest.split("\n== ").next())
            .unwrap_or_else(|| panic!("no section {name}:\n{said}"))
            .to_string()
    };
    assert_eq!(
        section("enabled").split_whitespace().collect::<Vec<_>>(),
        ["50-mod-stream.conf", &format!("70-{CONF}")],
        "{said}"
    );
    assert_eq!(
        section("target").trim(),
        format!("/usr/share/nginx/modules-available/{CONF}")
    );
    let installed = section("nginx -t installed");
    assert!(installed.contains("test is successful"), "{said}");
    for bad in ["[emerg]", "[alert]", "[warn]"] {
        assert!(!installed.contains(bad), "{bad} in:\n{said}");
    }
    // prerm keeps the admin's choice as a `.removed` link, which the
    // `modules-enabled/*.conf` include does not match.
    assert_eq!(
        section("removed").split_whitespace().collect::<Vec<_>>(),
        ["50-mod-stream.conf", &format!("70-{CONF}.removed")],
        "{said}"
    );
    let removed = section("nginx -t removed");
    assert!(
        removed.contains("unknown directive \"generation_retry_resnapshot\""),
        "with the module disabled nginx must reject its directive:\n{said}"
    );
    assert!(!removed.contains("REMOVED-STILL-LOADS"), "{said}");
    assert_eq!(
        section("reinstalled")
            .split_whitespace()
            .collect::<Vec<_>>(),
        ["50-mod-stream.conf", &format!("70-{CONF}")],
        "{said}"
    );
    assert!(
        section("nginx -t reinstalled").contains("test is successful"),
        "{said}"
    );
    assert_eq!(
        section("purged").split_whitespace().collect::<Vec<_>>(),
        ["50-mod-stream.conf"],
        "{said}"
    );
}
