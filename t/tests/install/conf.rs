//! What the install does to the operator's configuration, in the real
//! nginx under test, on an nginx.org-style layout (nginx.conf without the
//! `include` of `modules.d/`, no `modules.d/`): the line printed, or added
//! with `--edit-conf`; `uninstall` leaving nothing the install made; the
//! install's `nginx -t` runs writing nothing into the production error
//! log; "switch it on" said only while nothing sets
//! `generation_retry_resnapshot`.

use std::fs;
use std::net::TcpListener;

use super::common::{is_root, nginx_in, scratch, uninstall_in, ADDED_NOTE, MODULE};
use super::release::Release;

/// The whole round on an nginx.org-style layout. Its nginx.conf logs at
/// `warn` into `logs/error.log` (the binary's compiled-in error log too)
/// and makes nginx warn at every test (a server name twice on one port):
/// the install's `-t` runs must say that to the install, not into the
/// log.
///
/// 1. `install`: module and snippet installed, `modules.d/` made; nginx.conf
///    does not include it, so the exact line to add is printed, with
///    `--edit-conf`; nginx.conf untouched.
/// 2. `install --edit-conf`: the line added before `events`, under its
///    note, the file before kept as `nginx.conf.before-generation-retry`;
///    nginx now reads the snippet.
/// 3. With `generation_retry_resnapshot` set, a run says nothing of
///    switching it on.
/// 4. `uninstall`: nginx.conf as it was, and no snippet, `modules.d/`,
///    backup or shared object left.
///
/// And the error log is as it was before all of it.
#[test]
fn edit_conf_adds_the_include_and_uninstall_takes_out_all_the_install_made() {
    let p = scratch("edit-conf");
    for d in ["conf", "logs", "modules"] {
        fs::create_dir_all(p.join(d)).unwrap();
    }
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let user = if is_root() { "user root;\n" } else { "" };
    let original = format!(
        "{user}error_log logs/error.log warn;\npid logs/nginx.pid;\n\n\
         events {{}}\n\nhttp {{\n\
         \x20   server {{ listen 127.0.0.1:{port}; server_name twice; }}\n\
         \x20   server {{ listen 127.0.0.1:{port}; server_name twice; }}\n}}\n"
    );
    let conf = p.join("conf/nginx.conf");
    fs::write(&conf, &original).unwrap();
    let log = p.join("logs/error.log");
    fs::write(&log, "the log before the install\n").unwrap();
    let log_before = fs::read_to_string(&log).unwrap();
    // nginx warns at every test of this configuration.
    let t = nginx_in(&p, &["-e", "stderr", "-t"]);
    let said = String::from_utf8_lossy(&t.stderr);
    assert!(
        t.status.success() && said.contains("conflicting server name"),
        "{said}"
    );
    assert_eq!(fs::read_to_string(&log).unwrap(), log_before);

    let dir = p.join("conf/modules.d");
    let snippet = dir.join("generation-retry.conf");
    let so = p.join("modules").join(MODULE);
    let backup = p.join("conf/nginx.conf.before-generation-retry");
    let include = format!("include {}/*.conf;", dir.display());
    let release = Release::serve("edit-conf");

    // 1. Without consent, nginx.conf is not touched: the line is printed.
    let run = release.install_into(&p);
    assert!(run.ok, "{}", run.said());
    assert!(
        run.stdout.contains(&format!(
            "{} does not include {}",
            conf.display(),
            snippet.display()
        )) && run.stdout.contains(&include)
            && run.stdout.contains("before its events block")
            && run.stdout.contains("--edit-conf")
            && run.stdout.contains("switch it on"),
        "{}",
        run.said()
    );
    assert_eq!(fs::read_to_string(&conf).unwrap(), original);
    assert!(so.is_file() && snippet.is_file() && !backup.exists());
    assert_eq!(
        fs::read_to_string(&log).unwrap(),
        log_before,
        "{}",
        run.said()
    );

    // 2. With it, the line is added and nginx reads the snippet.
    let run = release.install_with(&p, &["--edit-conf"]);
    assert!(run.ok, "{}", run.said());
    assert!(
        run.stdout.contains(&format!("added `{include}`"))
            && !run.stdout.contains("does not include"),
        "{}",
        run.said()
    );
    let edited = fs::read_to_string(&conf).unwrap();
    assert_eq!(
        edited,
        original.replace(
            "events {}",
            &format!("{ADDED_NOTE}\n{include}\nevents {{}}")
        )
    );
    assert_eq!(fs::read_to_string(&backup).unwrap(), original);
    let dump = nginx_in(&p, &["-e", "stderr", "-T"]);
    assert!(
        String::from_utf8_lossy(&dump.stdout)
            .contains(&format!("# configuration file {}:", snippet.display())),
        "{}",
        String::from_utf8_lossy(&dump.stderr)
    );
    assert_eq!(
        fs::read_to_string(&log).unwrap(),
        log_before,
        "{}",
        run.said()
    );

    // 3. Already on: not asked to switch it on.
    fs::write(
        &conf,
        edited.replace("http {\n", "http {\n    generation_retry_resnapshot off;\n"),
    )
    .unwrap();
    let run = release.install_with(&p, &["--edit-conf"]);
    assert!(
        run.ok && run.stdout.contains("already installed") && !run.stdout.contains("switch it on"),
        "{}",
        run.said()
    );
    fs::write(&conf, &edited).unwrap();

    // 4. Uninstall: nothing the install made is left.
    let run = uninstall_in(&p, &p.join("cache"));
    assert!(run.ok, "{}", run.said());
    assert_eq!(fs::read_to_string(&conf).unwrap(), original);
    for gone in [
        &snippet,
        &dir,
        &backup,
        &so,
        &p.join("modules").join(format!("{MODULE}.old")),
    ] {
        assert!(!gone.exists(), "{} is left: {}", gone.display(), run.said());
    }
    assert_eq!(
        fs::read_to_string(&log).unwrap(),
        log_before,
        "{}",
        run.said()
    );
    let t = nginx_in(&p, &["-e", "stderr", "-t"]);
    assert!(t.status.success(), "{}", String::from_utf8_lossy(&t.stderr));
}
