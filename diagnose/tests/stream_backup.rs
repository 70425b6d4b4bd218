//! What `nginx -T` tells the rules about stream sessions and backups, each
//! shown by a log whose verdict changes with it:
//!
//! - a stream `server` block's `listen` port names the upstream of a
//!   session's addresses (`$server_port`), as an http location names a
//!   request's: without it the addresses of every stream upstream read as
//!   one list;
//! - in an upstream with `backup` servers, a retry refused after a static
//!   primary was refused on the backups' list, which the primary is not
//!   part of: a backup list of one peer that nginx never marks down.

use std::collections::{BTreeMap, BTreeSet};

use generation_retry_diagnose::access::AccessParser;
use generation_retry_diagnose::analyze;
use generation_retry_diagnose::classify::Family;
use generation_retry_diagnose::collect::{Collector, LogKind, Options};

/// 2026-12-01 07:00:00 UTC.
const T0: i64 = 1_796_108_400_000;
/// A backup's address, and a static primary.
const A: &str = "10.0.0.1:80";
const P: &str = "10.0.0.9:80";

/// A stream log line (`$msec $connection $status "$upstream_addr"
/// $session_time $server_port`) of a session that ended `end` ms after T0.
fn session(conn: u64, end: i64, took: i64, status: u16, addr: &str, port: u16) -> String {
    let t = T0 + end;
    format!(
        "{}.{:03} {conn} {status} \"{addr}\" {}.{:03} {port}",
        t / 1_000,
        t % 1_000,
        took / 1_000,
        took % 1_000
    )
}

/// The family and reason of each incident of `lines` read with `format`,
/// by `$upstream_addr`.
fn families(format: &str, lines: &[String], options: Options) -> Vec<(String, Family, String)> {
    let mut c = Collector::new(
        Some(AccessParser::new(format).expect("format")),
        Options {
            error_offset_s: Some(0),
            ..options
        },
    );
    let f = c.start_file("access.log", LogKind::Access);
    for l in lines {
        c.line(f, l.as_bytes());
    }
    analyze(c.finish())
        .incidents
        .iter()
        .map(|i| (i.upstream_addr.clone(), i.family, i.reason.clone()))
        .collect()
}

const STREAM: &str = r#"$msec $connection $status "$upstream_addr" $session_time $server_port"#;

/// Sessions on port 9000 (upstream `be`) served by A throughout, one
/// refused; port 9001 (`other`) served by C, then by D from around the
/// refusal. Routed by port, `be`'s list did not change: the refusal is not
/// the race. Unrouted, the addresses of both upstreams are read as one
/// list, which changed at the refusal: the race, wrongly.
#[test]
fn a_stream_sessions_server_port_names_its_upstream() {
    const C: &str = "10.0.0.3:80";
    const D: &str = "10.0.0.4:80";
    let mut lines = Vec::new();
    let mut conn = 0;
    let mut next = || {
        conn += 1;
        conn
    };
    for ms in (0..4_000).step_by(20) {
        lines.push(session(next(), ms, 1, 200, A, 9000));
        let other = if ms < 2_000 { C } else { D };
        lines.push(session(next(), ms + 5, 1, 200, other, 9001));
    }
    lines.push(session(next(), 2_010, 0, 502, "be", 9000));
    let routed = families(
        STREAM,
        &lines,
        Options {
            stream_routes: BTreeMap::from([(9000, "be".into()), (9001, "other".into())]),
            ..Options::default()
        },
    );
    assert_eq!(routed.len(), 1, "{routed:#?}");
    assert_ne!(routed[0].1, Family::GenerationFirst, "{}", routed[0].2);
    let unrouted = families(STREAM, &lines, Options::default());
    assert_eq!(unrouted.len(), 1);
    assert_eq!(unrouted[0].1, Family::GenerationFirst, "{}", unrouted[0].2);
    assert!(unrouted[0].2.contains(D), "{}", unrouted[0].2);
}

/// `be` has a static primary P and a resolving backup that held A alone.
/// A session tried P (failed), and its retry was refused on the backups'
/// list, with nothing logged after. P is not a peer of that list: the list
/// held one peer, which nginx never marks down, so the refusal is the
/// race. Counting P as a peer of the list makes it two peers, none seen
/// changing: `unavailable`.
#[test]
fn a_retry_after_a_static_primary_is_judged_on_the_backups_list() {
    let mut lines = Vec::new();
    for (k, ms) in (0..1_000).step_by(20).enumerate() {
        lines.push(session(k as u64 + 1, ms, 1, 200, A, 9000));
    }
    lines.push(session(100, 1_300, 1_000, 502, &format!("{P}, be"), 9000));
    let backup = |primaries: BTreeSet<String>| Options {
        stream_routes: BTreeMap::from([(9000, "be".into())]),
        with_backup: BTreeSet::from(["be".to_string()]),
        primary_peers: if primaries.is_empty() {
            BTreeMap::new()
        } else {
            BTreeMap::from([("be".to_string(), primaries)])
        },
        ..Options::default()
    };
    let got = families(STREAM, &lines, backup(BTreeSet::from([P.to_string()])));
    assert_eq!(got.len(), 1, "{got:#?}");
    assert_eq!(got[0].1, Family::GenerationRetry, "{}", got[0].2);
    assert!(got[0].2.contains("one peer"), "{}", got[0].2);
    let without = families(STREAM, &lines, backup(BTreeSet::new()));
    assert_eq!(without[0].1, Family::Unavailable, "{}", without[0].2);
}
