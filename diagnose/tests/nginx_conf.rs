//! One nginx, four upstreams failing at once in the same logs, read with
//! `--nginx-conf` alone (issue 26's new-user trial): `be` a moving name
//! with 2-hop races, `nx` a name answering NXDOMAIN, `wipe` two peers
//! refusing with `max_fails=1`, `one` a refusing static peer. Each
//! incident's evidence must come from its own upstream: `nx`'s refusals
//! are `empty` on `nx.test`'s resolver lines, not `unavailable` on a peer
//! of `wipe`. Also: formats without `$upstream_addr` are named with the
//! line to add, and an unusable configuration fails with status 4.

use super::common;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs;
use std::path::Path;

use common::{error_time, msec, scratch};
use generation_retry_diagnose::run;
use serde_json::Value;

const FORMAT: &str = r#"$msec $status "$upstream_addr" "$request" $request_time $connection"#;
const BE_A: &str = "10.0.0.1:80";
const BE_B: &str = "10.0.0.2:80";
const WIPE_1: &str = "127.0.0.6:28180";
const WIPE_2: &str = "127.0.0.7:28180";
const ONE: &str = "127.0.0.8:28180";

fn conf(dir: &Path, format: &str) -> String {
    let d = dir.display();
    format!(
        "# configuration file {d}/nginx.conf:\n\
         error_log {d}/error.log;\n\
         events {{}}\n\
         http {{\n\
         \x20   log_format up '{format}';\n\
         \x20   access_log {d}/access.log up;\n\
         \x20   access_log {d}/plain.log;\n\
         \x20   log_format bare '$msec $status \"$upstream_addr\"';\n\
         \x20   access_log {d}/bare.log bare;\n\
         \x20   resolver 127.0.0.53 valid=2s;\n\
         \x20   upstream be {{ zone be 64k; server be.test:80 resolve; }}\n\
         \x20   upstream nx {{ zone nx 64k; server nx.test:80 resolve; }}\n\
         \x20   upstream wipe {{ server {WIPE_1} max_fails=1 fail_timeout=30s; \
         server {WIPE_2} max_fails=1 fail_timeout=30s; }}\n\
         \x20   upstream one {{ server {ONE}; }}\n\
         \x20   upstream unused {{ server 127.0.0.9; server unused.test resolve; }}\n\
         \x20   server {{\n\
         \x20       listen 8080;\n\
         \x20       location /be/ {{ proxy_pass http://be; }}\n\
         \x20       location /nx/ {{ proxy_pass http://nx; }}\n\
         \x20       location /wipe/ {{ proxy_pass http://wipe; }}\n\
         \x20       location = /one {{ proxy_pass http://one; }}\n\
         \x20       location /static/ {{ root /srv; }}\n\
         \x20   }}\n\
         }}\n"
    )
}

#[derive(Default)]
struct Logs {
    access: Vec<String>,
    error: Vec<String>,
    conn: u64,
}

impl Logs {
    /// An access line; returns its connection number.
    fn access(&mut self, ms: i64, took: i64, status: u16, upstream_addr: &str, uri: &str) -> u64 {
        self.conn += 1;
        self.access.push(format!(
            "{} {status} \"{upstream_addr}\" \"GET {uri} HTTP/1.1\" {}.{:03} {}",
            msec(ms),
            took / 1_000,
            took % 1_000,
            self.conn
        ));
        self.conn
    }

    fn error(&mut self, ms: i64, level: &str, conn: u64, message: &str, uri: &str, up: &str) {
        self.error.push(format!(
            "{} [{level}] 11#11: *{conn} {message}, client: 10.9.9.9, server: , request: \
             \"GET {uri} HTTP/1.1\", upstream: \"http://{up}{uri}\", host: \"example.com\"",
            error_time(ms)
        ));
    }

    /// A request to `upstream` refused at once: its 502 and its `no live
    /// upstreams` line.
    fn refused(&mut self, ms: i64, upstream: &str) {
        let uri = format!("/{upstream}/{ms}");
        let c = self.access(ms, 0, 502, upstream, &uri);
        self.error(
            ms,
            "error",
            c,
            "no live upstreams while connecting to upstream",
            &uri,
            upstream,
        );
    }

    fn raw(&mut self, ms: i64, level: &str, message: &str) {
        self.error
            .push(format!("{} [{level}] 11#11: {message}", error_time(ms)));
    }
}

/// The four upstreams over the same 20 seconds.
fn scenario() -> Logs {
    let mut l = Logs::default();
    // be: A, then B from 10 s; three 2-hop races at the change.
    for ms in (0..20_000).step_by(50) {
        let addr = if ms < 10_000 { BE_A } else { BE_B };
        l.access(ms, 3, 200, addr, &format!("/be/{ms}"));
    }
    for k in 0..3 {
        let ms = 10_020 + k * 10;
        let uri = format!("/be/race{k}");
        let c = l.access(ms, 300, 502, &format!("{BE_A}, be"), &uri);
        l.error(
            ms - 300,
            "error",
            c,
            "upstream prematurely closed connection while reading response header from upstream",
            &uri,
            BE_A,
        );
        l.error(
            ms,
            "error",
            c,
            "no live upstreams while connecting to upstream",
            &uri,
            "be",
        );
    }
    // nx: NXDOMAIN every 2 s; every request refused at once.
    for s in (0..20).step_by(2) {
        l.raw(
            s * 1_000,
            "error",
            "nx.test could not be resolved (3: Host not found)",
        );
    }
    for ms in (1_000..19_000).step_by(1_500) {
        l.refused(ms, "nx");
    }
    // wipe: both peers refuse at 900 ms and are disabled; then its
    // requests are refused at once, while nx's are too.
    for (i, peer) in [WIPE_1, WIPE_2].into_iter().enumerate() {
        let uri = format!("/wipe/first{i}");
        let c = l.access(900, 2, 502, &format!("{WIPE_1}, {WIPE_2}"), &uri);
        l.error(
            900,
            "error",
            c,
            "connect() failed (111: Connection refused) while connecting to upstream",
            &uri,
            peer,
        );
        l.error(
            900,
            "warn",
            c,
            "upstream server temporarily disabled while connecting to upstream",
            &uri,
            peer,
        );
    }
    for ms in (1_100..19_000).step_by(1_500) {
        l.refused(ms, "wipe");
    }
    // one: a refusing static peer, one attempt each.
    for ms in (1_200..19_000).step_by(3_000) {
        let c = l.access(ms, 1, 502, ONE, "/one");
        l.error(
            ms,
            "error",
            c,
            "connect() failed (111: Connection refused) while connecting to upstream",
            "/one",
            ONE,
        );
    }
    // The access log is in time order, as nginx writes it.
    l.access.sort();
    l
}

fn write(dir: &Path, format: &str) -> String {
    let l = scenario();
    fs::write(dir.join("access.log"), l.access.join("\n") + "\n").expect("access.log");
    fs::write(dir.join("error.log"), l.error.join("\n") + "\n").expect("error.log");
    fs::write(dir.join("plain.log"), "").expect("plain.log");
    fs::write(dir.join("bare.log"), "").expect("bare.log");
    let conf_path = dir.join("nginx-T.txt");
    fs::write(&conf_path, conf(dir, format)).expect("conf");
    conf_path.display().to_string()
}

fn cli(args: &[&str]) -> (i32, String, String) {
    let args: Vec<OsString> = args.iter().map(OsString::from).collect();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let status = run(&args, &mut out, &mut err);
    (
        status,
        String::from_utf8_lossy(&out).into_owned(),
        String::from_utf8_lossy(&err).into_owned(),
    )
}

/// Per upstream, its families with their counts.
type Families = BTreeMap<String, BTreeMap<String, usize>>;

/// Per upstream, its families with their counts, and every reason.
fn by_upstream(json: &str) -> (Families, Vec<(String, String)>) {
    let v: Value = serde_json::from_str(json).expect("json");
    let mut out = Families::new();
    let mut reasons = Vec::new();
    for i in v["incidents"].as_array().expect("incidents") {
        let u = i["upstream"].as_str().unwrap_or("?").to_string();
        let f = i["family"].as_str().unwrap_or("?").to_string();
        *out.entry(u.clone()).or_default().entry(f).or_default() += 1;
        reasons.push((u, i["reason"].as_str().unwrap_or("").to_string()));
    }
    (out, reasons)
}

#[test]
fn the_configuration_alone_places_each_upstreams_failures_on_its_own_evidence() {
    let dir = scratch("nginx-conf");
    let conf = write(&dir, FORMAT);
    let (status, out, err) = cli(&["--nginx-conf", &conf, "--json"]);
    assert_eq!(status, 0, "{err}\n{out}");
    let (got, reasons) = by_upstream(&out);
    let want = |pairs: &[(&str, usize)]| -> BTreeMap<String, usize> {
        pairs.iter().map(|(f, n)| (f.to_string(), *n)).collect()
    };
    assert_eq!(got["be"], want(&[("generation-retry", 3)]), "{reasons:#?}");
    assert_eq!(got["nx"], want(&[("empty", 12)]), "{reasons:#?}");
    // Its two first attempts: the peers themselves failed (the
    // configuration's `upstream wipe` says whose they are).
    assert_eq!(
        got["wipe"],
        want(&[("other", 2), ("unavailable", 12)]),
        "{reasons:#?}"
    );
    assert_eq!(got["one"], want(&[("other", 6)]), "{reasons:#?}");
    for (u, reason) in &reasons {
        if u == "nx" {
            assert!(reason.contains("nx.test"), "{reason}");
            assert!(
                !reason.contains("127.0.0."),
                "nx on another's peer: {reason}"
            );
        }
        if u == "wipe" && !reason.contains("peer's own failure") {
            assert!(
                reason.contains(WIPE_1) || reason.contains(WIPE_2),
                "{reason}"
            );
        }
    }
    // The plain `combined` log is named, with the line that fixes it.
    let v: Value = serde_json::from_str(&out).expect("json");
    let notes: Vec<&str> = v["notes"]
        .as_array()
        .expect("notes")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let plain = notes
        .iter()
        .find(|n| n.contains("plain.log"))
        .unwrap_or_else(|| panic!("{notes:#?}"));
    assert!(plain.contains("log_format combined"), "{plain}");
    assert!(plain.contains("lacks $upstream_addr"), "{plain}");
    assert!(
        plain.contains("$http_user_agent\" $msec $request_time $connection \"$upstream_addr\"'"),
        "{plain}"
    );
}

/// The same logs with the old flags and without the configuration: the
/// resolver lines are tied to no upstream, so `nx`'s refusals cannot be
/// `empty`; and the evidence rule still keeps wipe's peers out of them.
#[test]
fn without_the_configuration_no_other_upstreams_peer_is_evidence() {
    let dir = scratch("nginx-conf-flags");
    write(&dir, FORMAT);
    let access = dir.join("access.log").display().to_string();
    let error = dir.join("error.log").display().to_string();
    let with = |more: &[&str]| {
        let mut args = vec![
            "--access-log",
            &access,
            "--error-log",
            &error,
            "--log-format",
            FORMAT,
            "--json",
        ];
        args.extend_from_slice(more);
        cli(&args)
    };
    let (status, out, err) = with(&[]);
    assert_eq!(status, 0, "{err}");
    let (got, reasons) = by_upstream(&out);
    assert_eq!(got["nx"].values().sum::<usize>(), 12, "{got:#?}");
    for (u, reason) in reasons.iter().filter(|(u, _)| u == "nx") {
        assert!(!reason.contains("127.0.0."), "{u}: {reason}");
    }
    // With the flag that ties nx.test to nx, its NXDOMAIN would empty
    // the list, but a `down` server beside it (refused alike) shows in
    // the configuration only: `unknown`, naming it (issue 50).
    let (_, out, _) = with(&["--upstream-server", "nx=nx.test"]);
    let (got, reasons) = by_upstream(&out);
    assert_eq!(got["nx"].get("unknown"), Some(&12), "{reasons:#?}");
    for (_, reason) in reasons.iter().filter(|(u, _)| u == "nx") {
        assert!(reason.contains("`down` server") && reason.ends_with("--nginx-conf FILE"));
    }
}

/// A configuration whose only access log lacks `$upstream_addr`: nothing
/// to read, said with the fix, status 4; a named log given on the command
/// line takes its format from the configuration.
#[test]
fn an_unusable_configuration_says_what_to_add() {
    let dir = scratch("nginx-conf-unusable");
    let combined = generation_retry_diagnose::nginxconf::COMBINED;
    let conf = write(&dir, combined);
    // The other format's log is not on this machine.
    fs::remove_file(dir.join("bare.log")).expect("bare.log");
    let (status, _out, err) = cli(&["--nginx-conf", &conf]);
    assert_eq!(status, 4, "{err}");
    assert!(err.contains("access log"), "{err}");
    assert!(err.contains("log_format up"), "{err}");
    assert!(err.contains("access_log"), "{err}");
    assert!(
        err.contains("bare.log of the configuration is not here"),
        "{err}"
    );
    let dir2 = scratch("nginx-conf-named");
    let conf2 = write(&dir2, FORMAT);
    let access = dir2.join("access.log").display().to_string();
    let (status, out, err) = cli(&["--nginx-conf", &conf2, "--access-log", &access]);
    assert_eq!(status, 0, "{err}");
    assert!(out.contains("generation race"), "{out}");
}

/// Flags beside the configuration win: `--log-format` alone reads every
/// configured access log with it; `--access-log` of a rotated file takes
/// the format the configuration gives the log it rotates (two usable
/// formats here), and a log the configuration does not know needs
/// `--log-format`.
#[test]
fn flags_beside_the_configuration_win() {
    let dir = scratch("nginx-conf-flags-win");
    let combined = generation_retry_diagnose::nginxconf::COMBINED;
    let conf = write(&dir, combined);
    let (status, out, err) = cli(&["--nginx-conf", &conf, "--log-format", FORMAT, "--json"]);
    assert_eq!(status, 0, "{err}");
    let (got, _) = by_upstream(&out);
    assert_eq!(got["be"].get("generation-retry"), Some(&3), "{got:#?}");

    let dir = scratch("nginx-conf-rotated");
    let conf = write(&dir, FORMAT);
    let rotated = dir.join("access.log.1");
    fs::rename(dir.join("access.log"), &rotated).expect("rotate");
    let rotated = rotated.display().to_string();
    let (status, out, err) = cli(&["--nginx-conf", &conf, "--access-log", &rotated, "--json"]);
    assert_eq!(status, 0, "{err}");
    let (got, _) = by_upstream(&out);
    assert_eq!(got["nx"].get("empty"), Some(&12), "{got:#?}");
    let elsewhere = dir.join("copied.log");
    fs::copy(&rotated, &elsewhere).expect("copy");
    let (status, _, err) = cli(&[
        "--nginx-conf",
        &conf,
        "--access-log",
        &elsewhere.display().to_string(),
    ]);
    assert_eq!(status, 2, "{err}");
    assert!(err.contains("give --log-format"), "{err}");
}

/// Logs of one upstream read with a configuration of many: the upstreams
/// the logs never name do not count, so the one upstream's addresses are
/// all its own, as without the configuration. Here its refusals are read
/// on the disabled line of a peer no access line shows, with a format
/// that has no `$request` (no route can tell whose it is).
#[test]
fn upstreams_only_the_configuration_names_do_not_count() {
    let dir = scratch("nginx-conf-one-upstream");
    let format = r#"$msec $status "$upstream_addr" $request_time $connection"#;
    let mut access = Vec::new();
    for ms in (0..5_000).step_by(50) {
        access.push(format!("{} 200 \"{BE_A}\" 0.003 {}", msec(ms), 100 + ms));
    }
    let mut error = vec![format!(
        "{} [warn] 11#11: *9 upstream server temporarily disabled while connecting to \
         upstream, client: 10.9.9.9, server: , request: \"GET /be/x HTTP/1.1\", upstream: \
         \"http://{BE_B}/be/x\", host: \"example.com\"",
        error_time(5_000)
    )];
    for k in 0..5 {
        let ms = 5_100 + k * 100;
        access.push(format!("{} 502 \"be\" 0.000 {}", msec(ms), 9_000 + k));
        error.push(format!(
            "{} [error] 11#11: *{} no live upstreams while connecting to upstream, client: \
             10.9.9.9, server: , request: \"GET /be/{k} HTTP/1.1\", upstream: \"http://be/be/{k}\", \
             host: \"example.com\"",
            error_time(ms),
            9_000 + k
        ));
    }
    fs::write(dir.join("access.log"), access.join("\n") + "\n").expect("access.log");
    fs::write(dir.join("error.log"), error.join("\n") + "\n").expect("error.log");
    fs::write(dir.join("plain.log"), "").expect("plain.log");
    fs::write(dir.join("bare.log"), "").expect("bare.log");
    let conf_path = dir.join("nginx-T.txt");
    fs::write(&conf_path, conf(&dir, format)).expect("conf");
    let (status, out, err) = cli(&["--nginx-conf", &conf_path.display().to_string(), "--json"]);
    assert_eq!(status, 0, "{err}");
    let (got, reasons) = by_upstream(&out);
    assert_eq!(got.len(), 1, "{got:#?}");
    assert_eq!(got["be"].get("unavailable"), Some(&5), "{reasons:#?}");
    assert!(
        reasons.iter().all(|(_, r)| r.contains(BE_B)),
        "decided on be's disabled peer: {reasons:#?}"
    );
}
