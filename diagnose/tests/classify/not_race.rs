//! Refusals and failures that are not the race: peers disabled or with no
//! change around them (`unavailable`), and failures at an address
//! (`other`); each upstream's addresses judged apart from the others'.

use super::common::{Logs, A, B, FORMAT};
use super::{families, only};
use generation_retry_diagnose::classify::{Family, Shape};
use generation_retry_diagnose::collect::Options;
use generation_retry_diagnose::report;

/// Two records (A and B), both fail and are disabled (max_fails=1); for
/// fail_timeout every selection is refused. The refusals go on well past
/// the 2 s window: all of them are `unavailable`, none `empty`.
#[test]
fn repeated_refusals_during_a_wipe_out_are_unavailable() {
    let mut l = Logs::new();
    for ms in [0, 300, 600, 900, 1_200] {
        l.ok(ms, A);
        l.ok(ms + 100, B);
    }
    for (conn, addr) in [(50, A), (51, B)] {
        l.error(
            1_600,
            "error",
            conn,
            "connect() to 10.0.0.x:80 failed (111: Connection refused) while connecting to upstream",
            "/x",
            addr,
        );
        l.error(
            1_600,
            "warn",
            conn,
            "upstream server temporarily disabled while connecting to upstream",
            "/x",
            addr,
        );
    }
    let refusals = [2_500, 3_500, 5_000, 7_000, 9_000, 11_000];
    for (n, ms) in refusals.iter().enumerate() {
        l.no_live(*ms, 60 + n as u64, "/r");
        l.access(*ms, 502, "be", "/r", 60 + n as u64);
    }
    let analysis = l.analyze();
    assert_eq!(analysis.incidents.len(), refusals.len());
    for i in &analysis.incidents {
        assert_eq!(
            i.family,
            Family::Unavailable,
            "{}: {}",
            i.time_text,
            i.reason
        );
    }
    // After fail_timeout, the disabled lines no longer count.
    let short = l.analyze_opts(
        FORMAT,
        Options {
            error_offset_s: Some(0),
            fail_timeout_ms: 3_000,
            ..Options::default()
        },
    );
    let late = &short.incidents[5];
    assert!(
        !late.reason.contains("temporarily disabled") && late.nearby.is_empty(),
        "{}",
        late.reason
    );
}

#[test]
fn disabled_peer_before_a_refusal_is_unavailable() {
    let mut l = Logs::new();
    l.ok(100, A);
    l.ok(300, A);
    // Another request's failure disabled A.
    l.error(
        400,
        "warn",
        3,
        "upstream server temporarily disabled while connecting to upstream",
        "/other",
        A,
    );
    l.access(1_500, 502, "be", "/down", 12);
    let analysis = l.analyze();
    let i = only(&analysis);
    assert_eq!(i.family, Family::Unavailable, "{}", i.reason);
    assert!(i.reason.contains(A));
}

#[test]
fn two_addresses_without_change_are_unavailable() {
    let mut l = Logs::new();
    for ms in [0, 300, 600, 1_300, 1_700, 2_100] {
        l.ok(ms, A);
        l.ok(ms + 50, B);
    }
    l.access(1_000, 502, "be", "/flap", 13);
    let analysis = l.analyze();
    let i = only(&analysis);
    assert_eq!(i.family, Family::Unavailable, "{}", i.reason);
    assert_eq!(i.before, [A, B]);
    assert_eq!(i.after, [A, B]);
}

#[test]
fn connect_refused_with_an_address_last_hop_is_other() {
    let mut l = Logs::new();
    l.ok(0, A);
    // An internal redirect: be refused, the error_page location used A.
    l.access(50, 200, &format!("{B}, be : {A}"), "/x", 20);
    l.error(
        1_000,
        "error",
        14,
        "connect() failed (111: Connection refused) while connecting to upstream",
        "/refused",
        A,
    );
    l.access(1_000, 502, A, "/refused", 14);
    l.access(1_400, 504, B, "/slow", 15);
    l.ok(1_800, B);
    let analysis = l.analyze();
    assert_eq!(families(&analysis), [Family::Other, Family::Other]);
    let refused = &analysis.incidents[0];
    assert_eq!(refused.shape, Shape::Address);
    assert_eq!(refused.upstream, "be", "A belongs to be's universe");
    assert_eq!(refused.own_errors.len(), 1, "its connect() failed line");
    assert_eq!(analysis.incidents[1].status, 504);
    assert!(report::verdict(&analysis.incidents).starts_with("none of 2 502/504s"));
}

/// A refusal is nginx's `no live upstreams`: with no change around it and
/// no line saying why, the peers were there but none usable (`down`,
/// `max_conns` log nothing), never `other`.
#[test]
fn one_hop_without_change_is_unavailable() {
    let mut l = Logs::new();
    l.ok(0, A);
    l.access(1_000, 502, "be", "/p", 16);
    l.ok(1_500, A);
    let analysis = l.analyze();
    assert_eq!(families(&analysis), [Family::Unavailable]);
    assert!(only(&analysis).reason.contains("no change seen"));
}

#[test]
fn two_upstreams_keep_separate_universes() {
    let mut l = Logs::new();
    // be: A only; api: B then C. A refusal of `be` is not explained by api's change.
    l.access(0, 200, &format!("{A}, be"), "/", 30);
    l.access(100, 200, "10.0.0.3:80, api", "/", 31);
    l.ok(200, A);
    l.ok(300, B);
    l.access(400, 200, &format!("{B}, api"), "/", 32);
    l.access(1_000, 502, "be", "/p", 33);
    l.ok(1_500, A);
    l.ok(1_600, "10.0.0.3:80");
    let analysis = l.analyze();
    let i = only(&analysis);
    assert_eq!(i.upstream, "be");
    assert_eq!(i.before, [A]);
    assert_eq!(i.after, [A]);
    assert_eq!(i.family, Family::Unavailable, "{}", i.reason);
}

/// An address two upstreams share says nothing about either one's
/// changes: api moving from the shared A to C is not a change of be.
#[test]
fn shared_address_does_not_carry_another_upstreams_change() {
    let (a, b, c) = (A, B, "10.0.0.3:80");
    let mut l = Logs::new();
    // Universes, from internal redirects far from the incident.
    l.access(30_000, 200, &format!("{a}, be : {b}"), "/u", 1);
    l.access(30_100, 200, &format!("{b}, be : {a}"), "/u", 2);
    l.access(30_200, 200, &format!("{a}, api : {c}"), "/u", 3);
    l.access(30_300, 200, &format!("{c}, api : {a}"), "/u", 4);
    for ms in [3_200, 3_600, 4_000, 4_400] {
        l.ok(ms, a);
        l.ok(ms + 100, b);
    }
    for ms in [5_600, 6_000, 6_400] {
        l.ok(ms, c);
        l.ok(ms + 100, b);
    }
    l.access(5_000, 502, "be", "/p", 80);
    let analysis = l.analyze();
    let i = &analysis.incidents[0];
    assert_eq!(i.upstream, "be");
    assert_eq!(i.before, [b], "{}", i.reason);
    assert_eq!(i.after, [b]);
    assert_eq!(i.family, Family::Unavailable, "{}", i.reason);
}
