//! What the logs give: joins without `$connection`, `$time_local` only,
//! an unquoted `$upstream_addr`, the error log's offset (learnt from
//! pairs, or the access log's zone), and the human report.

use super::common::{
    Logs, A, B, FORMAT, FORMAT_BARE, FORMAT_LOCAL, FORMAT_MSEC, FORMAT_NO_CONN, FORMAT_UNQUOTED,
};
use super::{families, only, two_hop_race};
use generation_retry_diagnose::classify::{Family, Shape};
use generation_retry_diagnose::collect::{OffsetBasis, Options};
use generation_retry_diagnose::report;

#[test]
fn two_hop_race_without_connection_ids() {
    let logs = two_hop_race();
    let analysis = logs.analyze_with(FORMAT_NO_CONN, 2_000);
    let i = only(&analysis);
    assert_eq!(i.family, Family::GenerationRetry, "{}", i.reason);
    assert_eq!(i.own_errors.len(), 3, "joined by request line and client");
    let analysis = logs.analyze_with(FORMAT_BARE, 2_000);
    let i = only(&analysis);
    assert_eq!(i.family, Family::GenerationRetry, "{}", i.reason);
    assert!(i.own_errors.iter().any(|e| {
        let source = analysis.data.errors[*e].source;
        analysis
            .text(source)
            .is_some_and(|t| t.contains("] 11#11: *7 no live upstreams"))
    }));
}

#[test]
fn human_report_shows_table_evidence_and_verdict() {
    let analysis = two_hop_race().analyze();
    let text = report::human(&analysis);
    assert!(text.contains("upstream be"), "{text}");
    assert!(text.contains("generation-retry        1"), "{text}");
    assert!(text.contains("    access:  10.9.9.9"), "{text}");
    assert!(
        text.contains("    error:   2026/12/01 07:00:01 [error] 11#11: *7 no live upstreams"),
        "{text}"
    );
    assert!(
        text.contains(&format!("    addresses: {A} -> {B}")),
        "{text}"
    );
    assert!(text.contains("access.log (access): 0 of 7"), "{text}");
    assert!(text.trim_end().ends_with("removes them."), "{text}");
}

/// Only `$time_local`: whole seconds. The race is still seen, the joins
/// still work by connection, and the times are the logged ones.
#[test]
fn time_local_only_log() {
    let mut l = Logs::new();
    l.ok(0, A);
    l.ok(1_000, A);
    l.no_live(3_000, 7, "/race");
    l.access(3_000, 502, &format!("{A}, be"), "/race", 7);
    l.ok(4_000, B);
    l.ok(5_000, B);
    let analysis = l.analyze_with(FORMAT_LOCAL, 2_000);
    let i = only(&analysis);
    assert_eq!(i.family, Family::GenerationRetry, "{}", i.reason);
    assert_eq!(i.time_text, "01/Dec/2026:07:00:03 +0000");
    assert_eq!(i.request, "GET /race HTTP/1.1");
    assert_eq!(i.own_errors.len(), 1, "joined by connection");
    assert_eq!(analysis.data.offset_basis, Some(OffsetBasis::Given));
}

/// `$upstream_addr` written without quotes: the 2-hop value "A, be" holds
/// a space and must be read whole.
#[test]
fn unquoted_upstream_addr_log() {
    let analysis = two_hop_race().analyze_with(FORMAT_UNQUOTED, 2_000);
    let i = only(&analysis);
    assert_eq!(i.upstream_addr, format!("{A}, be"));
    assert_eq!(i.shape, Shape::TwoHop);
    assert_eq!(i.family, Family::GenerationRetry, "{}", i.reason);
}

/// The error log in local time (+0200), the access log with `$msec` only
/// (UTC): the offset is learnt from the `no live upstreams` lines and
/// their 502s, so they join and the race is found.
#[test]
fn error_log_offset_is_learnt_from_pairs() {
    let mut l = two_hop_race();
    // Past fail_timeout after the race's disabled line for A.
    l.ok(12_500, B);
    l.ok(13_000, B);
    l.no_live(14_000, 8, "/first");
    l.access(14_000, 502, "be", "/first", 8);
    l.ok(14_500, A);
    l.ok(14_700, A);
    for e in &mut l.error {
        *e = e.replacen("2026/12/01 07:", "2026/12/01 09:", 1);
    }
    let learn = Options {
        error_offset_s: None,
        ..Options::default()
    };
    let analysis = l.analyze_opts(FORMAT_MSEC, learn);
    assert_eq!(analysis.data.error_offset_s, 7_200);
    assert_eq!(analysis.data.offset_basis, Some(OffsetBasis::Pairs));
    assert_eq!(analysis.incidents.len(), 2, "{:#?}", analysis.incidents);
    assert_eq!(
        families(&analysis),
        [Family::GenerationRetry, Family::GenerationFirst]
    );
    let text = report::human(&analysis);
    assert!(
        text.contains("error-log times read as +0200, learnt: 2 of 2"),
        "{text}"
    );
    // A wrong offset given explicitly applies, and the report says so.
    let wrong = Options {
        error_offset_s: Some(0),
        ..Options::default()
    };
    let analysis = l.analyze_opts(FORMAT_MSEC, wrong);
    assert_eq!(analysis.data.error_offset_s, 0);
    assert_eq!(analysis.incidents.len(), 4, "nothing joins");
    let text = report::human(&analysis);
    assert!(
        text.contains(
            "the error-log offset looks wrong: --error-log-utc-offset +0000 was given, but 2 of 2"
        ),
        "{text}"
    );
}

/// `$msec` for the time and `$time_local` for the zone: the error log is
/// read in that zone even with no pair to learn from.
#[test]
fn error_log_offset_from_the_access_zone() {
    let mut l = Logs::new();
    l.ok(0, A);
    l.error(
        1_000,
        "warn",
        3,
        "upstream server temporarily disabled while connecting to upstream",
        "/other",
        A,
    );
    l.access(1_500, 502, "be", "/down", 12);
    for a in &mut l.access {
        *a = a
            .replacen(":07:00:", ":09:00:", 1)
            .replacen("+0000]", "+0200]", 1);
    }
    for e in &mut l.error {
        *e = e.replacen("2026/12/01 07:", "2026/12/01 09:", 1);
    }
    let analysis = l.analyze_opts(FORMAT, Options::default());
    assert_eq!(analysis.data.offset_basis, Some(OffsetBasis::AccessZone));
    assert_eq!(analysis.data.error_offset_s, 7_200);
    assert_eq!(only(&analysis).family, Family::Unavailable);
}

/// Two access logs in two formats, one of them `escape=json`, in one run
/// (issue 50): one `--log-format` per `--access-log`, in order. The race's
/// 502 is in the JSON log, the addresses before and after it in the other.
#[test]
fn two_access_logs_in_two_formats_in_one_run() {
    use super::common::scratch;
    let dir = scratch("two-formats");
    let json = r#"{"msec":"$msec","status":"$status","upstream_addr":"$upstream_addr","connection":"$connection"}"#;
    let race = two_hop_race();
    let (mut plain, mut other) = (Vec::new(), Vec::new());
    for line in &race.access {
        if line.contains(", be") {
            // `$msec` is the second-last field of `FORMAT`.
            let ms: Vec<&str> = line.rsplitn(3, ' ').collect();
            other.push(format!(
                r#"{{"msec":"{}","status":"502","upstream_addr":"{A}, be","connection":"7"}}"#,
                ms[1]
            ));
        } else {
            plain.push(line.clone());
        }
    }
    assert_eq!(other.len(), 1);
    let write = |name: &str, lines: &[String]| {
        let path = dir.join(name);
        std::fs::write(&path, lines.join("\n") + "\n").expect("write");
        path.display().to_string()
    };
    let (a1, a2) = (write("access.log", &plain), write("json.log", &other));
    let error = write("error.log", &race.error);
    let args: Vec<std::ffi::OsString> = [
        "--access-log",
        &a1,
        "--log-format",
        FORMAT,
        "--access-log",
        &a2,
        "--log-format",
        json,
        "--error-log",
        &error,
        "--error-log-utc-offset",
        "+0000",
        "--json",
    ]
    .iter()
    .map(Into::into)
    .collect();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let status = generation_retry_diagnose::run(&args, &mut out, &mut err);
    assert_eq!(status, 0, "{}", String::from_utf8_lossy(&err));
    let v: serde_json::Value = serde_json::from_slice(&out).expect("json");
    assert_eq!(v["summary"]["unparsed"]["access"], 0, "{v}");
    assert_eq!(v["summary"]["by_family"]["generation-retry"], 1, "{v}");
    let _ = std::fs::remove_dir_all(&dir);
}
