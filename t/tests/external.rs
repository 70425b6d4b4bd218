//! The module built against nginx trees other than the stock one, by
//! `cargo xtask external` (and `cargo xtask nginx-test`):
//!
//! - `NGINX_BUILD_DIR=<objs> cargo build ...` against an nginx configured
//!   on its own (`--with-debug`, another prefix, no `--with-compat`): it
//!   loads into that nginx and rescues the race, http and stream;
//! - `./configure --with-compat --add-dynamic-module=<this repository>`:
//!   nginx's `make` builds it, and it rescues the race in that nginx, http
//!   and stream;
//! - a module built against another tree is refused with nginx's signature
//!   message (so the first module loading proves it was built against its
//!   nginx's objs).
//!
//! A missing artefact fails the test: nothing here is skipped.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use generation_retry_t::nginx::{self, Config, Flavor};
use generation_retry_t::scenarios::http::{Lab, Spec};
use generation_retry_t::scenarios::stream::{StreamLab, StreamSpec};
use generation_retry_t::scoring::errorlog;
use generation_retry_t::scoring::metrics::{log, Counter, Protocol, StatusExt};

const MODULE_FILE: &str = "ngx_http_upstream_generation_retry_module.so";
const RACES: usize = 5;

/// `target/nginx/1.28.0/external/<rel>`, which must exist.
fn external(rel: &str) -> PathBuf {
    let path = nginx::install_dir().join("external").join(rel);
    assert!(
        path.is_file(),
        "{} is missing: run `cargo xtask external` (or `cargo xtask nginx-test`)",
        path.display()
    );
    path
}

fn flavor(dir: &str, name: &'static str) -> Flavor {
    Flavor {
        binary: external(&format!("{dir}sbin/nginx")),
        module: Some(external(&format!("{dir}modules/{MODULE_FILE}"))),
        wrapped_by: None,
        name,
    }
}

/// `nginx -V`: the configure line the binary was built with.
fn configure_line(binary: &Path) -> String {
    let out = Command::new(binary).arg("-V").output().expect("nginx -V");
    assert!(
        out.status.success(),
        "{}: nginx -V failed",
        binary.display()
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// As `module_race.rs`: every scripted race is rescued (200 from the new
/// address, `$upstream_addr` "OLD:P, NEW:P", one re-snapshot), the counters
/// say so, and no raced request meets `no live upstreams`.
async fn rescues_the_race(flavor: Flavor) {
    let mut lab = Lab::start(flavor, "generation_retry_resnapshot on;").await;
    for i in 0..RACES {
        let race = lab.race_once(i).await;
        lab.assert_rescued(&race);
        assert_eq!(race.entry.resnapshots, Some(1), "{}", race.path);
        let s = lab.status("be").await;
        let n = (i + 1) as u64;
        assert_eq!(s.count(Counter::BusyRetry), n, "{s}");
        assert_eq!(s.count(Counter::Rescued), n, "{s}");
        assert_eq!(s.count(Counter::Failed), 0, "{s}");
        assert_eq!(s.count(Counter::NoLiveGeneration), 0, "{s}");
    }
    lab.assert_rescue_log(&log::rescued_marker(Protocol::Http, "be"), RACES);
    lab.finish();
}

/// One rescued race with `error_log logs/debug.log debug;` at http level:
/// the debug log's text.
async fn debug_log_of_a_rescue(flavor: Flavor) -> String {
    let spec = Spec::single_peer(flavor, "", "generation_retry_resnapshot on;")
        .http_extra("error_log logs/debug.log debug;");
    let mut lab = Lab::start_spec(spec).await;
    let race = lab.race_once(0).await;
    lab.assert_rescued(&race);
    let debug = fs::read_to_string(lab.nginx.prefix().join("logs/debug.log")).unwrap();
    lab.finish();
    debug
}

/// The wrapper's debug trace, as keepalive's: on an nginx built
/// `--with-debug`, the rescued selection shows the rule's outcome, the
/// re-snapshot and the callbacks around it.
async fn traces_the_rescue_at_debug_level(flavor: Flavor) {
    let debug = debug_log_of_a_rescue(flavor).await;
    let lines = errorlog::lines(&debug);
    let rescued: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].message.starts_with(log::TRACE_GET))
        .filter(|&i| lines[i].message.contains("Rescued {"))
        .collect();
    assert_eq!(rescued.len(), 1, "one rescued selection traced");
    let at = rescued[0];
    assert_eq!(lines[at].level, "debug", "{}", lines[at].whole);
    // The request starts lean (no per-request state) and takes its full
    // state at its first failed attempt, before the refusal the rescue
    // answers.
    let lean = format!("{}init upstream \"be\" peer at generation ", log::MARKER);
    let full = format!("{}full state taken at generation ", log::MARKER);
    let init_at = (0..at)
        .rev()
        .find(|&i| lines[i].conn == lines[at].conn && lines[i].message.starts_with(&lean))
        .unwrap_or_else(|| panic!("no init traced before the rescue on *{:?}", lines[at].conn));
    let path = lines[init_at].message[lean.len()..]
        .trim_start_matches(|c: char| c.is_ascii_digit())
        .strip_prefix(", ")
        .and_then(|rest| rest.split(',').next());
    assert_eq!(
        path,
        Some("lean"),
        "the raced request's init takes the lean path: {}",
        lines[init_at].whole
    );
    assert!(
        lines[init_at..at]
            .iter()
            .any(|l| l.conn == lines[at].conn && l.message.starts_with(&full)),
        "no full state taken between the init and the rescue on *{:?}",
        lines[at].conn
    );
    for line in [
        format!(
            "{}re-snapshot of \"be\": peer.init 0, fresh state",
            log::MARKER
        ),
        format!("{}inner get peer: -3", log::MARKER),
    ] {
        assert!(debug.contains(&line), "no {line:?} in the debug log");
    }
    // After the rescue the wrapper is back on top of the fresh state: the
    // request's final free goes through it (the inner init's own callbacks
    // would not trace).
    let free = format!("{}free peer, state ", log::MARKER);
    assert!(
        lines[at + 1..]
            .iter()
            .any(|l| l.conn == lines[at].conn && l.message.starts_with(&free)),
        "no free through the wrapper after the rescue on *{:?}",
        lines[at].conn
    );
}

/// Without `--with-debug` the same configuration traces nothing: the lines
/// are compiled out with nginx's own debug logging.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn trace_lines_are_compiled_out_without_debug() {
    let debug = debug_log_of_a_rescue(Flavor::with_module()).await;
    assert!(
        debug.contains(log::RESCUE_LEVEL),
        "the rescue line is there: {debug}"
    );
    assert!(!debug.contains("[debug]"), "{debug}");
    assert!(!debug.contains(log::TRACE_GET), "{debug}");
}

/// The stream module of the same shared object: its race (`stream.rs`) is
/// rescued too, so the .so's module table holds both modules.
async fn rescues_the_stream_race(flavor: Flavor) {
    let mut spec = StreamSpec::new(flavor, 1);
    spec.extra = "generation_retry_resnapshot on;".into();
    let mut lab = StreamLab::start(spec).await;
    let race = lab.race().await;
    assert!(race.delivered(), "{race:?}");
    assert_eq!(race.entry.status, 200, "{race:?}");
    let s = lab.status("stream", &race.upstream).await;
    assert_eq!(s.count(Counter::Rescued), 1, "{s}");
    assert_eq!(s.count(Counter::Failed), 0, "{s}");
    lab.finish();
}

/// Built with `NGINX_BUILD_DIR` against a debug nginx with another prefix
/// and without `--with-compat`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nginx_build_dir_module_rescues_the_race_in_its_debug_nginx() {
    let flavor = flavor("", "external");
    let v = configure_line(&flavor.binary);
    for flag in ["--with-debug", "--prefix=/opt/someone-else/nginx"] {
        assert!(v.contains(flag), "not the external build: {v}");
    }
    for flag in ["--with-compat", "--with-threads"] {
        assert!(!v.contains(flag), "not the external build: {v}");
    }
    rescues_the_race(flavor.clone()).await;
    traces_the_rescue_at_debug_level(flavor.clone()).await;
    rescues_the_stream_race(flavor).await;
}

/// Built by nginx's `make` after `./configure --add-dynamic-module=<repo>`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn add_dynamic_module_build_rescues_the_race() {
    let flavor = flavor("addon/", "addon");
    let v = configure_line(&flavor.binary);
    let add = format!(
        "--add-dynamic-module={}",
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .unwrap()
            .display()
    );
    assert!(v.contains(&add), "not configured with {add}: {v}");
    rescues_the_race(flavor.clone()).await;
    rescues_the_stream_race(flavor).await;
}

/// `nginx -t` of `binary` loading `module`.
fn load(binary: &Path, module: Option<PathBuf>) -> nginx::ConfigTest {
    let flavor = Flavor {
        binary: binary.to_path_buf(),
        module,
        wrapped_by: None,
        name: "load",
    };
    nginx::test_config(&Config::new(flavor, ""))
}

/// Asserts that `binary` refuses `module` with nginx's signature message,
/// naming the file.
fn assert_refused(binary: &Path, module: PathBuf) {
    let t = load(binary, Some(module.clone()));
    assert!(
        !t.ok,
        "{} accepted {}: {}",
        binary.display(),
        module.display(),
        t.stderr
    );
    let message = format!(
        "nginx: [emerg] module \"{}\" is not binary compatible in ",
        module.display()
    );
    assert!(
        t.stderr.contains(&message),
        "want `{message}`, got:\n{}",
        t.stderr
    );
}

/// The external nginx (other flags, no `--with-compat`) refuses the
/// modules built against the stock and the addon trees (both
/// `--with-compat`), and the stock nginx refuses the external nginx's
/// module, each by its signature, naming the file; each nginx passes
/// `nginx -t` without a module, and with its own.
#[test]
fn a_module_built_against_another_tree_is_refused_by_its_signature() {
    let external_nginx = external("sbin/nginx");
    let external_module = external(&format!("modules/{MODULE_FILE}"));
    let addon_module = external(&format!("addon/modules/{MODULE_FILE}"));
    let stock = Flavor::with_module();
    let stock_module = stock.module.expect("the stock module");
    assert!(!configure_line(&external_nginx).contains("--with-compat"));
    assert!(configure_line(&stock.binary).contains("--with-compat"));

    for (binary, own) in [
        (&external_nginx, &external_module),
        (&stock.binary, &stock_module),
    ] {
        for module in [None, Some(own.clone())] {
            let t = load(binary, module);
            assert!(t.ok, "{}: {}", binary.display(), t.stderr);
            let fatal = errorlog::fatal_lines(&t.stderr);
            assert!(fatal.is_empty(), "{}: {fatal:#?}", binary.display());
        }
    }
    assert_refused(&external_nginx, stock_module);
    assert_refused(&external_nginx, addon_module);
    assert_refused(&stock.binary, external_module);
}
