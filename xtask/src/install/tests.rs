//! The install commands' unit tests: `nginx -V` read, the tree's flags,
//! the layout, a stale module told apart, the options, a `--for` that is
//! no binary, and the configuration read and edited.

use std::os::unix::fs::PermissionsExt;

use super::binary::{not_a_binary, parse_v};
use super::conf::{add_include, remove_include, ADDED_NOTE};
use super::place::MADE_DIR_NOTE;
use super::*;
use crate::build::MODULE_FILE;

fn id(args: &str) -> Identity {
    parse_v(&format!(
        "nginx version: nginx/1.30.4\nconfigure arguments: {args}\n"
    ))
    .unwrap()
}

#[test]
fn nginx_v_is_parsed() {
    let id = parse_v(
        "nginx version: nginx/1.30.6 (Debian)\nbuilt with OpenSSL 3.6.5\n\
         configure arguments: --with-cc-opt='-g -O2 -fPIC' --prefix=/usr/share/nginx --with-compat\n",
    )
    .unwrap();
    assert_eq!(id.version, "1.30.6");
    assert_eq!(id.version_tuple(), Some((1, 30, 6)));
    assert_eq!(
        id.arguments,
        [
            "--with-cc-opt=-g -O2 -fPIC",
            "--prefix=/usr/share/nginx",
            "--with-compat"
        ]
    );
    assert!(id.has("--with-compat"));
    assert_eq!(id.value("--prefix"), Some("/usr/share/nginx"));
    assert_eq!(id.codebase, "1.30.6");
    assert!(parse_v("Usage: something else").is_none());
    // Tengine says both; its module is built against Tengine's tree.
    let t = parse_v(
        "Tengine version: Tengine/3.2.0\nnginx version: nginx/1.31.3\n\
         configure arguments: --with-compat\n",
    )
    .unwrap();
    assert_eq!(
        (t.version.as_str(), t.codebase.as_str()),
        ("1.31.3", "tengine-3.2.0")
    );
    assert_eq!(t.describe(), "tengine-3.2.0 (nginx 1.31.3)");
    let a = parse_v(
        "Angie version: Angie/1.12.1\nnginx version: nginx/1.31.2\n\
         configure arguments: --with-compat\n",
    )
    .unwrap();
    assert_eq!(a.codebase, "angie-1.12.1");
}

#[test]
fn the_tree_is_configured_with_the_flags_that_decide_layouts() {
    // nginx.org's packages, abridged.
    let f = tree_flags(&id(
        "--prefix=/etc/nginx --with-compat --with-threads --with-http_ssl_module \
         --with-http_v2_module --with-stream --with-stream_ssl_module \
         --with-cc-opt='-O2 -g' --with-openssl=../openssl-3 --with-http_xslt_module=dynamic \
         --with-http_perl_module --without-pcre",
    ));
    assert_eq!(
        f,
        [
            "--with-compat",
            "--with-threads",
            "--with-http_ssl_module",
            "--with-http_v2_module",
            "--with-stream",
            "--with-stream_ssl_module",
            "--without-pcre"
        ]
    );
    // Debian's dynamic stream is configured in: the module's stream
    // part is built, and loaded after Debian's stream module.
    assert!(
        tree_flags(&id("--with-compat --with-stream=dynamic")).contains(&"--with-stream".into())
    );
    assert_eq!(tree_flags(&id("")), ["--with-compat"]);
}

#[test]
fn the_layout_follows_the_binary_and_the_prefix() {
    let l = Layout::of(&id("--with-compat"), Some(Path::new("/tmp/p")));
    assert_eq!(l.modules, Path::new("/tmp/p/modules"));
    assert_eq!(l.conf, Path::new("/tmp/p/conf/nginx.conf"));
    assert_eq!(
        l.snippet,
        Path::new("/tmp/p/conf/modules.d/generation-retry.conf")
    );
    assert_eq!(
        l.include.as_deref(),
        Some("include /tmp/p/conf/modules.d/*.conf;")
    );
    let l = Layout::of(
        &id("--prefix=/etc/nginx --modules-path=/usr/lib/nginx/modules --conf-path=/etc/nginx/nginx.conf"),
        None,
    );
    assert_eq!(
        l.module(),
        Path::new("/usr/lib/nginx/modules").join(MODULE_FILE)
    );
    assert_eq!(l.conf, Path::new("/etc/nginx/nginx.conf"));
}

#[test]
fn only_this_module_built_for_another_nginx_is_stale() {
    let stale = format!(
        "nginx: [emerg] module \"/usr/lib/nginx/modules/{MODULE_FILE}\" version 1028000 \
         instead of 1030004 in /etc/nginx/modules.d/generation-retry.conf:1\n\
         nginx: configuration file /etc/nginx/nginx.conf test failed"
    );
    let ours = Path::new("/usr/lib/nginx/modules").join(MODULE_FILE);
    assert!(stale_module(&stale, &ours));
    assert!(!stale_module(
        &stale,
        &Path::new("/opt/elsewhere").join(MODULE_FILE)
    ));
    assert!(!stale_module(
        &stale.replace(MODULE_FILE, "ngx_other_module.so"),
        &ours
    ));
    assert!(!stale_module(
        "nginx: [emerg] unknown directive \"frob\" in /etc/nginx/nginx.conf:3",
        &ours
    ));
}

/// `--for` naming nginx.conf, a directory or nothing is said for what it
/// is before anything runs it (as root, running it said only
/// `Permission denied`); an executable passes on to `-V`.
#[test]
fn a_for_that_is_no_binary_is_named_for_what_it_is() {
    let dir = std::env::temp_dir().join(format!("xtask-for-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(dir.join("sbin")).unwrap();
    let conf = dir.join("nginx.conf");
    fs::write(&conf, "user nginx;\nevents {\n}\n").unwrap();
    fs::set_permissions(&conf, fs::Permissions::from_mode(0o644)).unwrap();
    let err = not_a_binary(&conf).unwrap();
    assert!(
        err.contains("is not an executable (mode 0644)")
            && err.contains("looks like a configuration file")
            && err.contains("--for /usr/sbin/nginx"),
        "{err}"
    );
    // Named otherwise, its directives give it away.
    let renamed = dir.join("main");
    fs::copy(&conf, &renamed).unwrap();
    assert!(not_a_binary(&renamed)
        .unwrap()
        .contains("looks like a configuration file"));
    let notes = dir.join("notes.txt");
    fs::write(&notes, "hello\n").unwrap();
    let err = not_a_binary(&notes).unwrap();
    assert!(
        err.contains("is not an executable") && !err.contains("configuration"),
        "{err}"
    );
    let err = not_a_binary(&dir).unwrap();
    assert!(
        err.contains("is a directory: pass the nginx binary, e.g. --for /usr/sbin/nginx"),
        "{err}"
    );
    // A prefix with the binary in it: that binary is named.
    let bin = dir.join("sbin/nginx");
    fs::write(&bin, "#!/bin/sh\n").unwrap();
    fs::set_permissions(&bin, fs::Permissions::from_mode(0o755)).unwrap();
    assert!(not_a_binary(&dir)
        .unwrap()
        .contains(&format!("here: --for {}", bin.display())));
    assert_eq!(not_a_binary(&bin), None);
    let err = not_a_binary(&dir.join("nope")).unwrap();
    assert!(err.contains("no such file"), "{err}");
    // And identify says the same before running anything.
    assert!(binary::identify(&conf)
        .unwrap_err()
        .to_string()
        .contains("looks like a configuration file"));
    let _ = fs::remove_dir_all(&dir);
}

/// nginx.org's packaged nginx.conf, abridged.
const NGINX_ORG_CONF: &str = "\
user  nginx;
worker_processes  auto;

error_log  /var/log/nginx/error.log notice;
pid        /run/nginx.pid;


events {
    worker_connections  1024;
}


http {
    include       /etc/nginx/mime.types;
    include /etc/nginx/conf.d/*.conf;
}
";

/// `--edit-conf` puts the `include` at the top level, before the first
/// block (a `load_module` is refused inside one), under its note; taking
/// it out gives back the file as it was, and a line the operator wrote is
/// never taken.
#[test]
fn the_include_is_added_before_the_first_block_and_taken_out_exactly() {
    let line = "include /etc/nginx/modules.d/*.conf;";
    let edited = add_include(NGINX_ORG_CONF, line);
    assert!(
        edited.contains(&format!(
            "pid        /run/nginx.pid;\n\n\n{ADDED_NOTE}\n{line}\nevents {{\n"
        )),
        "{edited}"
    );
    assert_eq!(
        remove_include(&edited, line).as_deref(),
        Some(NGINX_ORG_CONF)
    );
    // By hand, unmarked: left alone.
    let by_hand = NGINX_ORG_CONF.replace("events {", &format!("{line}\nevents {{"));
    assert_eq!(remove_include(&by_hand, line), None);
    // A block word in a comment or inside a block is no top-level block;
    // `http{` without a blank is one.
    let conf = "# events are logged\nload_module a.so;\nhttp{\n  events_x 1;\n}\n";
    let edited = add_include(conf, line);
    assert!(
        edited.starts_with(&format!(
            "# events are logged\nload_module a.so;\n{ADDED_NOTE}\n{line}\nhttp{{"
        )),
        "{edited}"
    );
    // With no block at all: at the end, after a missing newline.
    assert_eq!(
        add_include("worker_processes 1;", line),
        format!("worker_processes 1;\n{ADDED_NOTE}\n{line}\n")
    );
}

/// `nginx -T` read: which files nginx read, and every use of the
/// module's directives and variables with its file and line, but in the
/// snippet, in comments and inside other names.
#[test]
fn the_dump_names_the_files_and_every_use_of_the_module() {
    let dump = Dump::parse(&format!(
        "# configuration file /etc/nginx/nginx.conf:\n\
         include /etc/nginx/modules.d/*.conf;\n\
         http {{\n\
         \x20   log_format m '$remote_addr $generation_retry_resnapshots';\n\
         \x20   generation_retry_resnapshot on;  # generation_retry_status here is a comment\n\
         }}\n\n\
         # configuration file /etc/nginx/modules.d/generation-retry.conf:\n\
         load_module /usr/lib/nginx/modules/{MODULE_FILE};\n\n\
         # configuration file /etc/nginx/conf.d/status.conf:\n\
         server {{ location = /gr {{ generation_retry_status; }} }}\n"
    ));
    let snippet = Path::new("/etc/nginx/modules.d/generation-retry.conf");
    assert!(dump.includes(snippet));
    assert!(!dump.includes(Path::new("/etc/nginx/modules.d/other.conf")));
    let uses: Vec<String> = dump.uses(snippet).iter().map(|u| u.to_string()).collect();
    assert_eq!(
        uses,
        [
            "/etc/nginx/nginx.conf:3: log_format m '$remote_addr $generation_retry_resnapshots';",
            "/etc/nginx/nginx.conf:4: generation_retry_resnapshot on;  # generation_retry_status here is a comment",
            "/etc/nginx/conf.d/status.conf:1: server { location = /gr { generation_retry_status; } }",
        ]
    );
    // The snippet's load_module names the module's file, no directive.
    assert!(dump.uses(Path::new("/elsewhere")).len() == 3);
}

/// The snippet says so when the install made its directory: how
/// uninstall knows to remove the directory too.
#[test]
fn the_snippet_notes_a_directory_the_install_made() {
    let l = Layout::of(&id("--with-compat"), Some(Path::new("/tmp/p")));
    let line = format!("load_module /tmp/p/modules/{MODULE_FILE};\n");
    assert_eq!(l.snippet_text(false), line);
    assert_eq!(l.snippet_text(true), format!("{MADE_DIR_NOTE}\n{line}"));
    assert_eq!(
        l.backup(),
        Path::new("/tmp/p/conf/nginx.conf.before-generation-retry")
    );
}

mod edit;
