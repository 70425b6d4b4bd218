//! nginx.conf edited and put back: the `include` placed by statements,
//! not lines; a symlinked nginx.conf edited through its link, keeping
//! mode and owner; uninstall taking out the line it needs to and putting
//! everything back when a step fails.

use std::fs;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::id;
use crate::install::conf::{add_include, remove_include, ADDED_NOTE};
use crate::install::place::{edit_conf, Layout, Undo};
use crate::install::uninstall::take_out;
use crate::install::{by_hand, hint};

const LINE: &str = "include /etc/nginx/modules.d/*.conf;";

/// A scratch prefix of this test process.
fn prefix(name: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("xtask-edit-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&p);
    fs::create_dir_all(p.join("conf")).unwrap();
    p
}

/// The layout of an nginx run with `-p p`.
fn layout(p: &Path) -> Layout {
    Layout::of(&id("--with-compat"), Some(p))
}

/// Two statements on one line: the block's is given a line of its own
/// and the `include` goes before it, not after the block.
#[test]
fn a_block_sharing_its_line_gets_the_include_before_it() {
    let conf = "worker_processes 1; events {}\nhttp {}\n";
    let edited = add_include(conf, LINE);
    assert_eq!(
        edited,
        format!("worker_processes 1;\n{ADDED_NOTE}\n{LINE}\nevents {{}}\nhttp {{}}\n")
    );
    assert_eq!(
        remove_include(&edited, LINE).as_deref(),
        Some("worker_processes 1;\nevents {}\nhttp {}\n")
    );
    // Indented, alone on its line: before the line, as it was.
    assert_eq!(
        add_include("  events {}\n", LINE),
        format!("{ADDED_NOTE}\n{LINE}\n  events {{}}\n")
    );
}

/// A `{` or `}` in quotes, after an escape, in a variable's `${name}`
/// or in a comment opens and closes nothing. (nginx opens quotes only at
/// a token's start: in `env A='{';` the quote is a character and the `{`
/// opens a block, which nginx -t refuses.)
#[test]
fn a_brace_in_quotes_a_variable_or_a_comment_is_no_block() {
    let head = "env 'A={';\nerror_log \"/var/log/}{\\\"{.log\";\nenv C=${HOME}x;\n\
                env D=\\{;\n# } {\n";
    let conf = format!("{head}events {{}}\n");
    assert_eq!(
        add_include(&conf, LINE),
        format!("{head}{ADDED_NOTE}\n{LINE}\nevents {{}}\n")
    );
    // A block word inside a block, or as part of a longer word, is none.
    let conf = "stream_x 1; mail_y on;\nhttp {\n events {}\n}\n";
    assert!(add_include(conf, LINE).starts_with(&format!("stream_x 1; mail_y on;\n{ADDED_NOTE}\n")));
}

/// When nginx reads the added line too late (its blocks are in an
/// included file), the operator is told to place it by hand, named.
#[test]
fn a_line_nginx_reads_too_late_is_left_to_the_operator() {
    let l = layout(Path::new("/tmp/p"));
    let said = "nginx: [emerg] \"load_module\" directive is specified too late in \
                /tmp/p/conf/nginx.conf:9";
    let told = format!("{}\n{}", hint(said, &l), by_hand(&l));
    assert!(
        told.contains("perhaps in a file it includes")
            && told.contains("by hand")
            && told.contains("`include /tmp/p/conf/modules.d/*.conf;`"),
        "{told}"
    );
}

/// Whether this process makes files as root (then a test can give a
/// file another owner).
fn root(dir: &Path) -> bool {
    let probe = dir.join(".probe");
    fs::write(&probe, "").unwrap();
    let uid = fs::metadata(&probe).unwrap().uid();
    fs::remove_file(&probe).unwrap();
    uid == 0
}

/// The owner, group and mode of `path`, followed if a symlink.
fn owned(path: &Path) -> (u32, u32, u32) {
    let m = fs::metadata(path).unwrap();
    (m.uid(), m.gid(), m.permissions().mode() & 0o7777)
}

/// nginx.conf a symlink into another directory, the file private and
/// another group's (as root: 65534): `--edit-conf`, its roll-back and
/// uninstall edit the file it points to; the link stays a link, the file
/// and the backup keep mode, owner and group, no temporary file is left.
#[test]
fn a_symlinked_nginx_conf_stays_a_link_and_keeps_its_owner_and_mode() {
    let p = prefix("symlink");
    fs::create_dir_all(p.join("real")).unwrap();
    let real = p.join("real/nginx.conf");
    let original = "user nobody;\nevents {}\n";
    fs::write(&real, original).unwrap();
    fs::set_permissions(&real, fs::Permissions::from_mode(0o640)).unwrap();
    if root(&p) {
        std::os::unix::fs::chown(&real, Some(0), Some(65534)).unwrap();
    }
    let before = owned(&real);
    let link = p.join("conf/nginx.conf");
    symlink("../real/nginx.conf", &link).unwrap();
    let l = layout(&p);
    let is_link = || {
        fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    };
    let line = l.include_line();

    let undo = Undo::take(&l).unwrap();
    edit_conf(&l, undo.conf().unwrap(), undo.had_backup()).unwrap();
    assert!(is_link(), "the symlink was replaced by a file");
    assert!(fs::read_to_string(&real).unwrap().contains(&line));
    assert_eq!(owned(&real), before);
    let backup = p.join("real/nginx.conf.before-generation-retry");
    assert_eq!(l.backup(), backup);
    assert_eq!(fs::read_to_string(&backup).unwrap(), original);
    assert_eq!(owned(&backup), before);

    // Rolled back: still the link, the file as it was.
    undo.put_back(&l).unwrap();
    assert!(is_link());
    assert_eq!(fs::read_to_string(&real).unwrap(), original);
    assert_eq!(owned(&real), before);
    assert!(!backup.exists());

    // Edited again and uninstalled: the same.
    let undo = Undo::take(&l).unwrap();
    edit_conf(&l, undo.conf().unwrap(), undo.had_backup()).unwrap();
    let (removed, _) = take_out(&l, || Ok(())).unwrap();
    assert!(removed.iter().any(|r| r.contains(&line)), "{removed:?}");
    assert!(is_link());
    assert_eq!(fs::read_to_string(&real).unwrap(), original);
    assert_eq!(owned(&real), before);
    assert!(!backup.exists());
    let left: Vec<_> = fs::read_dir(p.join("real"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left, ["nginx.conf"], "{left:?}");
    let _ = fs::remove_dir_all(&p);
}

/// nginx -t as uninstall's test: fails while nginx.conf includes a file
/// that is not there (the `include` names one, not a glob).
fn includes_nothing_missing(conf: &Path) -> crate::workspace::Result {
    let text = fs::read_to_string(conf).unwrap();
    for l in text.lines() {
        if let Some(file) = l.strip_prefix("include ").and_then(|f| f.strip_suffix(';')) {
            if !file.contains('*') && !Path::new(file).exists() {
                return Err(
                    format!("open() \"{file}\" failed (2: No such file or directory)").into(),
                );
            }
        }
    }
    Ok(())
}

/// On a `modules-enabled/` layout the line `--edit-conf` adds names the
/// snippet itself: uninstall takes it out with the snippet, though
/// Debian's `50-mod-*.conf` are still there. The `modules.d/*.conf`
/// glob stays while other snippets are left for it.
#[test]
fn uninstall_takes_out_a_line_naming_the_snippet_whatever_else_is_enabled() {
    let p = prefix("enabled");
    let enabled = p.join("conf/modules-enabled");
    fs::create_dir_all(&enabled).unwrap();
    fs::write(enabled.join("50-mod-stream.conf"), "load_module x.so;\n").unwrap();
    let l = layout(&p);
    assert_eq!(l.snippet, enabled.join("70-mod-http-generation-retry.conf"));
    let original = "events {}\n";
    fs::write(&l.conf, add_include(original, &l.include_line())).unwrap();
    fs::write(&l.snippet, l.snippet_text(false)).unwrap();
    let (removed, kept) = take_out(&l, || includes_nothing_missing(&l.conf)).unwrap();
    assert!(kept.is_empty(), "{kept:?}");
    assert!(
        removed.iter().any(|r| r.contains(&l.include_line())),
        "{removed:?}"
    );
    assert_eq!(fs::read_to_string(&l.conf).unwrap(), original);
    assert!(!l.snippet.exists() && enabled.join("50-mod-stream.conf").exists());

    let _ = fs::remove_dir_all(&p);
    // The glob: kept for the other snippet, named.
    let p = prefix("glob");
    let l = layout(&p);
    fs::create_dir_all(l.snippet_dir()).unwrap();
    fs::write(l.snippet_dir().join("other.conf"), "").unwrap();
    fs::write(&l.snippet, l.snippet_text(false)).unwrap();
    let edited = add_include(original, &l.include_line());
    fs::write(&l.conf, &edited).unwrap();
    let (_, kept) = take_out(&l, || Ok(())).unwrap();
    assert!(
        kept.iter()
            .any(|k| k.contains("it includes other.conf too")),
        "{kept:?}"
    );
    assert_eq!(fs::read_to_string(&l.conf).unwrap(), edited);
    let _ = fs::remove_dir_all(&p);
}

/// Uninstall's `nginx -t` fails and the snippet cannot be written back
/// (its temporary name is taken by a directory): nginx.conf, the module
/// and the backup are put back all the same, and both failures said.
#[test]
fn a_failing_uninstall_puts_back_all_it_can() {
    let p = prefix("undo");
    let l = layout(&p);
    fs::create_dir_all(l.snippet_dir()).unwrap();
    fs::create_dir_all(&l.modules).unwrap();
    let original = "events {}\n";
    let edited = add_include(original, &l.include_line());
    fs::write(&l.conf, &edited).unwrap();
    fs::write(l.backup(), original).unwrap();
    fs::write(&l.snippet, l.snippet_text(false)).unwrap();
    fs::write(l.module(), "the module").unwrap();
    let blocked = l.snippet_dir().join(".generation-retry.conf.new");
    fs::create_dir_all(blocked.join("x")).unwrap();
    let err = take_out(&l, || Err("nginx -t failed: unknown directive".into()))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("nginx -t failed: unknown directive")
            && err.contains("putting it back failed too")
            && err.contains(".generation-retry.conf.new"),
        "{err}"
    );
    assert_eq!(fs::read_to_string(&l.conf).unwrap(), edited);
    assert_eq!(fs::read_to_string(l.backup()).unwrap(), original);
    assert_eq!(fs::read_to_string(l.module()).unwrap(), "the module");

    // Unblocked: everything back, the snippet too.
    fs::remove_dir_all(&blocked).unwrap();
    fs::write(&l.snippet, l.snippet_text(false)).unwrap();
    let err = take_out(&l, || Err("nginx -t failed".into()))
        .unwrap_err()
        .to_string();
    assert!(err.ends_with("everything was put back as it was"), "{err}");
    assert_eq!(
        fs::read_to_string(&l.snippet).unwrap(),
        l.snippet_text(false)
    );
    assert_eq!(fs::read_to_string(&l.conf).unwrap(), edited);
    let _ = fs::remove_dir_all(&p);
}
