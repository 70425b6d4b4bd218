//! `--edit-conf` where nginx.conf is not nginx.org's, in the real nginx
//! under test: a Debian-style `modules-enabled/` (the line added names
//! the snippet itself) behind a symlinked nginx.conf, and blocks that
//! live in a file nginx.conf includes (the line cannot go before them).

use std::fs;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::Path;

use super::common::{is_root, scratch, uninstall_in, ADDED_NOTE, MODULE};
use super::release::Release;

/// Owner, group and permission bits of `path`, followed if a symlink.
fn owned(path: &Path) -> (u32, u32, u32) {
    let m = fs::metadata(path).unwrap();
    (m.uid(), m.gid(), m.mode() & 0o7777)
}

/// A prefix with `modules-enabled/` (Debian's `50-mod-*.conf` in it,
/// which nginx.conf does not include) and `conf/nginx.conf` a symlink to
/// `conf/real/nginx.conf`, mode 0640 (as root, group 65534):
///
/// 1. `install --edit-conf` adds `include .../70-mod-http-generation-retry.conf;`
///    into the file the link points to; the link stays a link, the file
///    keeps mode, owner and group, and so does its backup beside it.
/// 2. `uninstall` takes that line out with the snippet (Debian's snippet
///    left in the directory does not keep it, or `nginx -t` would fail on
///    the missing file and every uninstall roll back): nginx.conf as it
///    was, still a link.
#[test]
fn edit_conf_on_modules_enabled_through_a_symlinked_nginx_conf() {
    let p = scratch("enabled-symlink");
    for d in ["conf/modules-enabled", "conf/real", "logs", "modules"] {
        fs::create_dir_all(p.join(d)).unwrap();
    }
    let enabled = p.join("conf/modules-enabled");
    let debian = enabled.join("50-mod-stub.conf");
    fs::write(&debian, "# Debian's, for a module of its own\n").unwrap();
    let user = if is_root() { "user root;\n" } else { "" };
    let original = format!("{user}error_log logs/error.log;\npid logs/nginx.pid;\nevents {{}}\n");
    let real = p.join("conf/real/nginx.conf");
    fs::write(&real, &original).unwrap();
    fs::set_permissions(&real, fs::Permissions::from_mode(0o640)).unwrap();
    if is_root() {
        std::os::unix::fs::chown(&real, Some(0), Some(65534)).unwrap();
    }
    let before = owned(&real);
    let conf = p.join("conf/nginx.conf");
    symlink("real/nginx.conf", &conf).unwrap();
    let is_link = || {
        fs::symlink_metadata(&conf)
            .unwrap()
            .file_type()
            .is_symlink()
    };
    let snippet = enabled.join("70-mod-http-generation-retry.conf");
    let include = format!("include {};", snippet.display());
    let backup = p.join("conf/real/nginx.conf.before-generation-retry");

    // 1. Added, through the link.
    let run = Release::serve("enabled").install_with(&p, &["--edit-conf"]);
    assert!(run.ok, "{}", run.said());
    assert!(
        run.stdout.contains(&format!("added `{include}`")),
        "{}",
        run.said()
    );
    assert!(is_link(), "nginx.conf is no symlink now: {}", run.said());
    assert_eq!(
        fs::read_to_string(&real).unwrap(),
        original.replace(
            "events {}",
            &format!("{ADDED_NOTE}\n{include}\nevents {{}}")
        )
    );
    assert_eq!(owned(&real), before);
    assert_eq!(fs::read_to_string(&backup).unwrap(), original);
    assert_eq!(owned(&backup), before);
    assert!(snippet.is_file() && p.join("modules").join(MODULE).is_file());

    // 2. Taken out with the snippet, whatever else is enabled.
    let run = uninstall_in(&p, &p.join("cache"));
    assert!(run.ok, "{}", run.said());
    assert!(!run.stdout.contains("kept"), "{}", run.said());
    assert!(is_link(), "nginx.conf is no symlink now: {}", run.said());
    assert_eq!(fs::read_to_string(&real).unwrap(), original);
    assert_eq!(owned(&real), before);
    assert!(debian.is_file());
    for gone in [&snippet, &backup, &p.join("modules").join(MODULE)] {
        assert!(!gone.exists(), "{} is left: {}", gone.display(), run.said());
    }
}

/// nginx.conf's blocks are in a file it includes: the line, added at
/// nginx.conf's end, comes too late for nginx. The install puts it all
/// back and tells the operator to place the line by hand, naming it.
#[test]
fn a_line_edit_conf_cannot_place_is_left_to_the_operator_by_name() {
    let p = scratch("blocks-included");
    for d in ["conf", "logs", "modules"] {
        fs::create_dir_all(p.join(d)).unwrap();
    }
    let user = if is_root() { "user root;\n" } else { "" };
    let original =
        format!("{user}error_log logs/error.log;\npid logs/nginx.pid;\ninclude main.conf;\n");
    let conf = p.join("conf/nginx.conf");
    fs::write(&conf, &original).unwrap();
    fs::write(p.join("conf/main.conf"), "events {}\nhttp {}\n").unwrap();
    let include = format!("include {}/*.conf;", p.join("conf/modules.d").display());

    let run = Release::serve("blocks").install_with(&p, &["--edit-conf"]);
    assert!(!run.ok, "{}", run.said());
    assert!(
        run.stderr
            .contains("\"load_module\" directive is specified too late")
            && run.stderr.contains("perhaps in a file it includes")
            && run
                .stderr
                .contains(&format!("add `{include}` to {} by hand", conf.display()))
            && run.stderr.contains("everything was put back as it was"),
        "{}",
        run.said()
    );
    assert_eq!(fs::read_to_string(&conf).unwrap(), original);
    for gone in [
        p.join("conf/nginx.conf.before-generation-retry"),
        p.join("conf/modules.d"),
        p.join("modules").join(MODULE),
    ] {
        assert!(!gone.exists(), "{} is left: {}", gone.display(), run.said());
    }
}
