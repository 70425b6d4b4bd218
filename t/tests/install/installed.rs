//! The whole install into the real nginx under test: a working module that
//! rescues a race, a second run that changes nothing and `uninstall`; the
//! roll-back when `nginx -t` fails; the module of an older nginx replaced
//! after an upgrade.

use std::fs;

use generation_retry_t::nginx::{free_port, install_dir, vendored_version, Flavor};
use generation_retry_t::scenarios::http::Lab;

use super::common::{
    from_crates_io, mtime, nginx_in, prefix_with, uninstall_in, version_string, workspace, MODULE,
};
use super::release::Release;

/// The whole path on the version under test: the source from crates.io or
/// from the loopback "nginx.org" (signature checked), only the module
/// compiled, installed into the prefix with its snippet, `nginx -t`
/// passing; the installed module rescues a scripted race in that nginx; a
/// second run is a no-op; `uninstall` takes it out.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn installs_a_working_module_into_the_nginx_under_test() {
    let v = version_string();
    let release = Release::serve("release");
    let p = prefix_with("prefix", "include ${SNIPPETS};\nevents {}\nhttp { }\n");
    let cache = p.join("cache");
    let run = release.install_into(&p);
    assert!(run.ok, "{}", run.said());
    if from_crates_io(&v) {
        assert!(
            run.stderr.contains("from the nginx-src crate"),
            "{}",
            run.said()
        );
    } else {
        assert!(
            run.stderr
                .contains(&format!("good signature by {}", release.key.fpr)),
            "{}",
            run.said()
        );
    }
    // Only the module was compiled: no nginx binary in the install tree.
    let work = workspace().join("target/install-test/install").join(&v);
    assert!(work.join("tree/src/objs/Makefile").is_file());
    assert!(
        !work.join("tree/src/objs/nginx").exists(),
        "install built nginx itself"
    );

    let so = p.join("modules").join(MODULE);
    let snippet = p.join("conf/modules.d/generation-retry.conf");
    assert!(run.stdout.contains("-t is successful"), "{}", run.said());
    assert_eq!(
        fs::read_to_string(&snippet).unwrap(),
        format!("load_module {};\n", so.display())
    );
    assert!(
        !run.stdout.contains("does not include"),
        "the prefix's nginx.conf includes modules.d: {}",
        run.said()
    );

    // Nothing changed: nothing done.
    let (so_time, snippet_time) = (mtime(&so), mtime(&snippet));
    let again = release.install_into(&p);
    assert!(
        again.ok && again.stdout.contains("nothing changed"),
        "{}",
        again.said()
    );
    assert_eq!((mtime(&so), mtime(&snippet)), (so_time, snippet_time));

    // The installed shared object is the module, and it rescues.
    let flavor = Flavor {
        module: Some(so.clone()),
        name: "installed",
        ..Flavor::stock()
    };
    let mut lab = Lab::start(flavor, "generation_retry_resnapshot on;").await;
    let race = lab.race_once(0).await;
    lab.assert_rescued(&race);
    lab.finish();

    // While the configuration uses the module, uninstall takes nothing,
    // and names every use at once (nginx names only the first).
    let conf = p.join("conf/nginx.conf");
    let plain = fs::read_to_string(&conf).unwrap();
    // nginx -t and -T bind the listeners: a free port, which a run
    // without root may bind (port 1 is refused it, and -T fails).
    let using = plain.replace(
        "http { }",
        &format!(
            "http {{\n    generation_retry_resnapshot on;\n    log_format gr '$generation_retry_resnapshots';\n    \
             server {{\n        listen 127.0.0.1:{};\n        location = /gr {{ generation_retry_status; }}\n    }}\n}}",
            free_port()
        ),
    );
    assert_ne!(using, plain);
    fs::write(&conf, &using).unwrap();
    let uninstall = || uninstall_in(&p, &cache);
    let out = uninstall();
    assert!(
        !out.ok
            && out.stderr.contains("still uses the module in 3 places")
            && out.stderr.contains("nothing was removed"),
        "{}",
        out.said()
    );
    let line_of = |text: &str| {
        let n = using.lines().position(|l| l.contains(text)).unwrap() + 1;
        format!("{}:{n}: ", conf.display())
    };
    for used in [
        "generation_retry_resnapshot on;",
        "$generation_retry_resnapshots",
        "generation_retry_status;",
    ] {
        assert!(
            out.stderr.contains(&line_of(used)),
            "{used}: {}",
            out.said()
        );
    }
    assert!(so.exists() && snippet.exists());
    fs::write(&conf, plain).unwrap();
    let out = uninstall();
    assert!(
        out.ok && out.stdout.contains("-t is successful"),
        "{}",
        out.said()
    );
    assert!(!so.exists() && !snippet.exists());
}

/// When `nginx -t` fails with the module installed (here: the operator's
/// `include` of the snippets sits inside `http {}`, where `load_module` is
/// not allowed), everything is put back: the module that was there, no
/// snippet, and a configuration that passes `nginx -t` again; nginx's words
/// and the fix are printed.
#[test]
fn a_failing_nginx_t_puts_everything_back() {
    let v = version_string();
    let p = prefix_with(
        "rollback",
        "events {}\nhttp {\n    include ${SNIPPETS};\n}\n",
    );
    let so = p.join("modules").join(MODULE);
    let old = p.join("modules").join(format!("{MODULE}.old"));
    fs::write(&so, b"the module installed before").unwrap();
    fs::write(&old, b"the one before that").unwrap();
    let release = Release::serve("rollback");
    let install = || release.install_into(&p);
    let run = install();
    assert!(!run.ok, "{}", run.said());
    assert!(
        run.stderr.contains("everything was put back as it was")
            && run
                .stderr
                .contains("\"load_module\" directive is not allowed here")
            && run.stderr.contains("belongs at the top of"),
        "{}",
        run.said()
    );
    assert_eq!(fs::read(&so).unwrap(), b"the module installed before");
    assert_eq!(fs::read(&old).unwrap(), b"the one before that");
    assert!(!p.join("conf/modules.d/generation-retry.conf").exists());
    let t = nginx_in(&p, &["-t"]);
    assert!(t.status.success(), "{}", String::from_utf8_lossy(&t.stderr));

    // The module there already is the one built (only the snippet is
    // new): it stays when the snippet is taken back.
    let built = workspace()
        .join("target/install-test/install")
        .join(&v)
        .join("module")
        .join(MODULE);
    fs::copy(&built, &so).unwrap();
    fs::remove_file(&old).unwrap();
    let run = install();
    assert!(
        !run.ok && run.stderr.contains("everything was put back"),
        "{}",
        run.said()
    );
    assert_eq!(fs::read(&so).unwrap(), fs::read(&built).unwrap());
    assert!(!old.exists() && !p.join("conf/modules.d/generation-retry.conf").exists());
}

/// nginx's version number of `1.28.0`: 1028000 (`nginx_version`).
fn nginx_number(version: &str) -> u32 {
    version
        .split('.')
        .map(|p| p.parse::<u32>().expect("a release version"))
        .fold(0, |n, p| n * 1000 + p)
}

/// After an nginx upgrade the module installed before is for the old
/// version, and `nginx -t` refuses it (`version 1028000 instead of ...`):
/// the install replaces it instead of asking to fix the configuration
/// first. Uses the default version's (1.28.0's) module `cargo xtask
/// nginx-test --nginx all` built first; on that version itself there is
/// no older module to stand in.
#[test]
fn an_nginx_upgrade_replaces_the_module_built_for_the_old_one() {
    let v = version_string();
    let default = vendored_version();
    let old = install_dir()
        .join("..")
        .join(&default)
        .join("modules")
        .join(MODULE);
    if v == default {
        eprintln!(
            "nginx {v}: no module of an older nginx to replace (the matrix versions run this)"
        );
        return;
    }
    assert!(
        old.is_file(),
        "{} is missing: the matrix versions run after {default} is built (cargo xtask nginx-test --nginx all)",
        old.display()
    );
    let p = prefix_with("upgrade", "include ${SNIPPETS};\nevents {}\n");
    let so = p.join("modules").join(MODULE);
    fs::copy(&old, &so).unwrap();
    fs::write(
        p.join("conf/modules.d/generation-retry.conf"),
        format!("load_module {};\n", so.display()),
    )
    .unwrap();
    let t = nginx_in(&p, &["-t"]);
    let said = String::from_utf8_lossy(&t.stderr);
    assert!(
        !t.status.success()
            && said.contains(&format!("version {} instead of", nginx_number(&default))),
        "{said}"
    );

    let run = Release::serve("upgrade").install_into(&p);
    assert!(run.ok, "{}", run.said());
    assert!(
        run.stderr
            .contains("refuses the module installed for another nginx"),
        "{}",
        run.said()
    );
    assert_eq!(
        fs::read(p.join("modules").join(format!("{MODULE}.old"))).unwrap(),
        fs::read(&old).unwrap()
    );
    let t = nginx_in(&p, &["-t"]);
    assert!(t.status.success(), "{}", String::from_utf8_lossy(&t.stderr));
}
