//! What `nginx -T` tells the rules about stream sessions and backups, each
//! shown by a log whose verdict changes with it:
//!
//! - a stream `server` block's `listen` port names the upstream of a
//!   session's addresses (`$server_port`), as an http location names a
//!   request's: without it the addresses of every stream upstream read as
//!   one list;
//! - in an upstream with `backup` servers and static primaries, a retry
//!   the primaries could not take was refused on the backups' list: the
//!   primaries are no peers of it (neither held nor coming, nor leaving),
//!   and its backups' lines, not the primaries', tell why.

use super::common;

use std::collections::{BTreeMap, BTreeSet};

use common::families_of as families;
use generation_retry_diagnose::classify::Family;
use generation_retry_diagnose::collect::Options;

/// 2026-12-01 07:00:00 UTC.
const T0: i64 = 1_796_108_400_000;
/// The backup's addresses, and two static primaries.
const A: &str = "10.0.0.1:80";
const B: &str = "10.0.0.2:80";
const P: &str = "10.0.0.9:80";
const Q: &str = "10.0.0.8:80";

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
        &[],
        Options {
            stream_routes: BTreeMap::from([(9000, "be".into()), (9001, "other".into())]),
            ..Options::default()
        },
    );
    assert_eq!(routed.len(), 1, "{routed:#?}");
    assert_eq!(routed[0].1, Family::Unavailable, "{}", routed[0].2);
    let unrouted = families(STREAM, &lines, &[], Options::default());
    assert_eq!(unrouted.len(), 1);
    assert_eq!(unrouted[0].1, Family::GenerationFirst, "{}", unrouted[0].2);
    assert!(unrouted[0].2.contains(D), "{}", unrouted[0].2);
}

/// `be` on port 9000: static primaries P (dead) and Q, and a resolving
/// backup.
fn backup_options() -> Options {
    Options {
        stream_routes: BTreeMap::from([(9000, "be".into())]),
        with_backup: BTreeSet::from(["be".to_string()]),
        primary_peers: BTreeMap::from([(
            "be".to_string(),
            BTreeSet::from([P.to_string(), Q.to_string()]),
        )]),
        peers: vec![("be".into(), P.into()), ("be".into(), Q.into())],
        ..Options::default()
    }
}

/// A session tried the dead primary P and its retry was refused while
/// the backup list moved from A to B in flight: the race, on the backups'
/// list.
#[test]
fn a_backup_list_that_moved_in_flight_is_the_race() {
    let mut lines = Vec::new();
    for (k, ms) in (0..1_000).step_by(20).enumerate() {
        lines.push(session(k as u64 + 1, ms, 1, 200, A, 9000));
    }
    lines.push(session(100, 2_000, 1_000, 502, &format!("{P}, be"), 9000));
    for (k, ms) in (1_500..4_000).step_by(20).enumerate() {
        lines.push(session(k as u64 + 200, ms, 1, 200, B, 9000));
    }
    let got = families(STREAM, &lines, &[], backup_options());
    assert_eq!(got.len(), 1, "{got:#?}");
    assert_eq!(got[0].1, Family::GenerationRetry, "{}", got[0].2);
    assert!(got[0].2.contains(B), "{}", got[0].2);
}

/// The primary Q serves other sessions throughout, and the backups A and
/// C too, unchanged; a session that tried P was refused. A static primary
/// never enters or leaves the list: Q serving while the session was in
/// flight is no change, and P not serving after is P failing, not
/// leaving. No change: `unavailable`.
#[test]
fn a_static_primary_serving_or_failing_is_no_change() {
    const C: &str = "10.0.0.3:80";
    let mut lines = Vec::new();
    for (k, ms) in (0..4_000).step_by(20).enumerate() {
        let k = 3 * k as u64;
        lines.push(session(k + 1, ms, 1, 200, A, 9000));
        lines.push(session(k + 2, ms + 5, 1, 200, Q, 9000));
        lines.push(session(k + 3, ms + 10, 1, 200, C, 9000));
    }
    lines.push(session(9_000, 2_000, 1_000, 502, &format!("{P}, be"), 9000));
    let got = families(STREAM, &lines, &[], backup_options());
    assert_eq!(got.len(), 1, "{got:#?}");
    assert_eq!(got[0].1, Family::Unavailable, "{}", got[0].2);
    let unknown = families(STREAM, &lines, &[], Options::default());
    assert_eq!(unknown[0].1, Family::GenerationRetry, "{}", unknown[0].2);
}

/// nginx marks a backup down even when it is the only one (a backup list
/// is never `single`): the lone backup A, disabled by another session just
/// before a session that tried P was refused, is why; the primaries' own
/// lines are not.
#[test]
fn a_lone_backup_disabled_is_unavailable() {
    let mut lines = Vec::new();
    for (k, ms) in (0..1_000).step_by(20).enumerate() {
        lines.push(session(k as u64 + 1, ms, 1, 200, A, 9000));
    }
    lines.push(session(100, 1_300, 200, 502, &format!("{P}, be"), 9000));
    let disabled = |addr: &str| {
        format!(
            "2026/12/01 07:00:01 [warn] 11#11: *7 upstream server temporarily disabled while \
             connecting to upstream, client: 127.0.0.1, server: 0.0.0.0:9000, upstream: \
             \"{addr}\", bytes from/to client:0/0, bytes from/to upstream:0/0"
        )
    };
    let got = families(STREAM, &lines, &[disabled(A)], backup_options());
    assert_eq!(got.len(), 1, "{got:#?}");
    assert_eq!(got[0].1, Family::Unavailable, "{}", got[0].2);
    assert!(got[0].2.contains(A), "{}", got[0].2);
    // A primary's line is not why: the backups were nginx's next turn.
    let primary = families(STREAM, &lines, &[disabled(P)], backup_options());
    assert!(!primary[0].2.contains("disabled"), "{}", primary[0].2);
}
