//! Refusals with no address of their upstream seen serving before them
//! (issue 40): only evidence gives them a family. An NXDOMAIN of the
//! upstream's name with nothing served since, or a name that never
//! resolved, makes them `empty`; the configuration (or a peer that served
//! before, with no NXDOMAIN since) makes them `unavailable`; with none of
//! that they are `unknown`, and the reason names the flag that decides.

use std::collections::BTreeSet;
use std::ffi::OsString;

use super::common::{Logs, A, FORMAT};
use super::{families, only};
use generation_retry_diagnose::access::AccessParser;
use generation_retry_diagnose::classify::{Family, Incident, Shape};
use generation_retry_diagnose::collect::{Collector, LogKind, Options};
use generation_retry_diagnose::{analyze, report, run};

/// Three refusals of `be` (1-hop, each with its `no live upstreams`
/// line), 15 to 17 s into the log, and nothing of `be` served. The access
/// log begins at 0 ms (a static file, no upstream), so it covers the span
/// since any resolver line of these tests: nothing of `be` selected there
/// is evidence (see `unseen_gaps.rs` for logs that do not cover it).
pub(crate) fn refusals() -> Logs {
    let mut l = Logs::new();
    l.access(0, 200, "-", "/favicon.ico", 1);
    for (k, ms) in [15_000, 16_000, 17_000].into_iter().enumerate() {
        let conn = 40 + k as u64;
        l.no_live(ms, conn, "/p");
        l.access(ms, 502, "be", "/p", conn);
    }
    l
}

/// Options with the error log in UTC, changed by `f`.
pub(crate) fn options(f: impl FnOnce(&mut Options)) -> Options {
    let mut o = Options {
        error_offset_s: Some(0),
        // The configuration's: no `down` server hides beside the names.
        configured: true,
        ..Options::default()
    };
    f(&mut o);
    o
}

/// Every incident's family is `family`, and its reason holds `text`.
pub(crate) fn all(incidents: &[Incident], family: Family, text: &str) {
    assert_eq!(incidents.len(), 3, "{incidents:#?}");
    for i in incidents {
        assert_eq!(i.family, family, "{}: {}", i.time_text, i.reason);
        assert!(i.reason.contains(text), "{text:?} not in: {}", i.reason);
    }
}

/// The issue's logs: one stock nginx, `upstream be { server app.test
/// resolve; }`, the name answering NXDOMAIN; its line came more than
/// fail_timeout (10 s) before the first refusal. The old rules looked for
/// it only that far back and called the refusals `unavailable: selection
/// refused with no change seen and 0 peers seen`.
#[test]
fn an_nxdomain_long_before_with_nothing_served_since_is_empty() {
    let mut l = refusals();
    l.nxdomain(500, "app.test");
    let analysis = l.analyze();
    all(
        &analysis.incidents,
        Family::Empty,
        "app.test could not be resolved (3: Host not found) at 2026/12/01 07:00:00",
    );
    for i in &analysis.incidents {
        let deciding = i.nearby.first().map(|e| analysis.data.errors[*e].source);
        assert!(
            deciding
                .and_then(|s| analysis.text(s))
                .is_some_and(|t| t.contains("app.test could not be resolved")),
            "the resolver line leads the evidence: {:?}",
            i.nearby
        );
    }
    // An address served after the NXDOMAIN: the name resolved again, the
    // line says nothing of the list at the refusals (which the served
    // address, with no NXDOMAIN since, says held peers).
    let mut l = refusals();
    l.nxdomain(500, "app.test");
    l.ok(3_000, A);
    let analysis = l.analyze();
    all(
        &analysis.incidents,
        Family::Unavailable,
        "and no NXDOMAIN that could be its name's came since",
    );
    assert!(analysis.incidents[0]
        .reason
        .contains("one served 12.0 s before it"));
}

/// A name that never resolved: nothing of `be` ever served, and the
/// resolver's only answers were failures. Any failure counts here (the
/// list never had addresses to keep); once an address has served, only
/// NXDOMAIN empties the list.
#[test]
fn a_name_that_never_resolved_is_empty_whatever_the_failure() {
    for failure in ["(2: Server failure)", "(110: Operation timed out)"] {
        let mut l = refusals();
        l.raw_error(
            14_000,
            "error",
            &format!("app.test could not be resolved {failure}"),
        );
        all(
            &l.analyze().incidents,
            Family::Empty,
            "the name had not resolved",
        );
        l.ok(3_000, A);
        let a = l.analyze();
        all(
            &a.incidents,
            Family::Unavailable,
            "its list still held peers",
        );
    }
}

/// With two upstreams in the logs, a resolver line whose name neither is
/// called is tied to none: the refusals are `unknown`, and the reason
/// names the line's name and the flag that ties it; given that flag, the
/// line decides.
#[test]
fn an_untied_nxdomain_names_the_flag_that_ties_it() {
    let mut l = refusals();
    l.access(100, 200, "10.0.0.9:80, api", "/api", 7);
    l.nxdomain(500, "app.test");
    let analysis = l.analyze();
    all(
        &analysis.incidents,
        Family::Unknown,
        "resolver errors for app.test are tied to no upstream",
    );
    assert!(analysis.incidents[0]
        .reason
        .contains("pass --upstream-server be=NAME"));
    let tied = l.analyze_opts(
        FORMAT,
        options(|o| o.servers = vec![("be".into(), "app.test".into())]),
    );
    all(
        &tied.incidents,
        Family::Empty,
        "app.test could not be resolved",
    );
}

/// No configuration, no resolver line, nothing of `be` served: nothing
/// says whether its list held peers. `unknown`, naming `--nginx-conf`;
/// never `unavailable` (the old rules' guess). The verdict counts them.
#[test]
fn nothing_seen_and_no_evidence_is_unknown_with_the_flag_named() {
    let analysis = refusals().analyze_opts(FORMAT, options(|o| o.configured = false));
    all(
        &analysis.incidents,
        Family::Unknown,
        "pass --nginx-conf FILE",
    );
    assert!(analysis.incidents[0]
        .reason
        .contains("no line says whether its list held peers (unavailable) or none (empty)"));
    assert_eq!(
        report::verdict(&analysis.incidents),
        "none of 3 502/504s shown to be the generation race; 3 unknown (their evidence is \
         missing, see their reasons)."
    );
    let text = report::human(&analysis);
    assert!(text.contains("  unknown                 3"), "{text}");
    let json = report::json(&analysis);
    assert_eq!(json["summary"]["by_family"]["unknown"], 3);
    assert_eq!(json["summary"]["by_family"]["unavailable"], 0);
    assert_eq!(json["incidents"][0]["family"], "unknown");
}

/// A retry known from the error log alone (no access line of `be` read):
/// its first attempt found a peer, so the NXDOMAIN long before did not
/// empty the list that refused it, and with none of `be`'s traffic
/// nothing tells a change (the race) from peers none could use.
#[test]
fn a_retry_seen_only_in_the_error_log_is_not_empty() {
    let mut l = Logs::new();
    l.nxdomain(500, "be");
    l.error(
        15_000,
        "error",
        9,
        "connect() failed (111: Connection refused) while connecting to upstream",
        "/r",
        A,
    );
    l.no_live(15_000, 9, "/r");
    let analysis = l.analyze();
    let i = only(&analysis);
    assert_eq!(i.shape, Shape::TwoHop);
    assert_eq!(i.family, Family::Unknown, "{}", i.reason);
    assert!(
        i.reason.contains("its first attempt found a peer")
            && i.reason.contains("--access-log PATH"),
        "{}",
        i.reason
    );
}

/// No error log at all: whether the name resolved is what is missing.
#[test]
fn without_an_error_log_the_flag_named_is_error_log() {
    let mut c = Collector::new(
        Some(AccessParser::new(FORMAT).expect("format")),
        options(|_| {}),
    );
    let a = c.start_file("access.log", LogKind::Access);
    for line in refusals().render(FORMAT) {
        c.line(a, line.as_bytes());
    }
    let analysis = analyze(c.finish());
    all(
        &analysis.incidents,
        Family::Unknown,
        "pass --error-log PATH",
    );
}

/// The same logs with what the configuration says: a static upstream's
/// list never changes and always holds its peers, and a resolving name
/// with no failure logged resolved: `unavailable` either way. A
/// configuration that gives `be` no server decides nothing.
#[test]
fn the_configuration_decides_what_the_logs_leave_unknown() {
    let logs = refusals();
    assert_eq!(families(&logs.analyze()), [Family::Unknown; 3]);
    let resolving = logs.analyze_opts(
        FORMAT,
        options(|o| {
            o.configured = true;
            o.conf_servers = vec![("be".into(), "app.test".into())];
        }),
    );
    all(
        &resolving.incidents,
        Family::Unavailable,
        "be resolves app.test and the error log has no failure to resolve it",
    );
    let fixed = logs.analyze_opts(
        FORMAT,
        options(|o| {
            o.configured = true;
            o.static_upstreams = BTreeSet::from(["be".to_string()]);
        }),
    );
    all(
        &fixed.incidents,
        Family::Unavailable,
        "its list never changes",
    );
    let silent = logs.analyze_opts(FORMAT, options(|o| o.configured = true));
    all(
        &silent.incidents,
        Family::Unknown,
        "the configuration gives be no server",
    );
}

/// End to end: the command line without `--nginx-conf` says `unknown`
/// and names the flag; with `nginx -T`'s output giving `be` a resolving
/// server, the same logs are `unavailable`.
#[test]
fn the_command_line_with_and_without_nginx_conf() {
    let dir = std::env::temp_dir().join(format!(
        "generation-retry-diagnose-{}-unseen",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let logs = refusals();
    let (access, error) = (dir.join("access.log"), dir.join("error.log"));
    std::fs::write(&access, logs.access.join("\n") + "\n").expect("write");
    std::fs::write(&error, logs.error.join("\n") + "\n").expect("write");
    let families_of = |args: &[String]| -> Vec<(String, String)> {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let args: Vec<OsString> = args.iter().map(Into::into).collect();
        let status = run(&args, &mut out, &mut err);
        assert_eq!(status, 0, "{}", String::from_utf8_lossy(&err));
        let v: serde_json::Value = serde_json::from_slice(&out).expect("JSON");
        v["incidents"]
            .as_array()
            .expect("incidents")
            .iter()
            .map(|i| {
                (
                    i["family"].as_str().unwrap_or_default().to_string(),
                    i["reason"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect()
    };
    let bare = families_of(&[
        "--json".into(),
        "--access-log".into(),
        access.display().to_string(),
        "--error-log".into(),
        error.display().to_string(),
        "--log-format".into(),
        FORMAT.into(),
        "--error-log-utc-offset".into(),
        "+0000".into(),
    ]);
    assert_eq!(bare.len(), 3);
    assert!(
        bare.iter()
            .all(|(f, r)| f == "unknown" && r.contains("--nginx-conf FILE")),
        "{bare:#?}"
    );
    let conf = dir.join("nginx.conf");
    std::fs::write(
        &conf,
        format!(
            "error_log {};\nevents {{}}\nhttp {{\n    log_format up '{FORMAT}';\n    \
             access_log {} up;\n    resolver 127.0.0.53;\n    upstream be {{ zone be 64k; \
             server app.test:80 resolve; }}\n    server {{ listen 8080; location / {{ \
             proxy_pass http://be; }} }}\n}}\n",
            error.display(),
            access.display()
        ),
    )
    .expect("write");
    let configured = families_of(&[
        "--json".into(),
        "--nginx-conf".into(),
        conf.display().to_string(),
        "--error-log-utc-offset".into(),
        "+0000".into(),
    ]);
    assert_eq!(configured.len(), 3);
    assert!(
        configured
            .iter()
            .all(|(f, r)| f == "unavailable" && r.contains("be resolves app.test")),
        "{configured:#?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
