//! The generation race: 2-hop (the retry refused) and 1-hop (the first
//! selection refused), with the address change that makes it one.

use super::common::{Logs, A, B};
use super::{only, two_hop_race};
use generation_retry_diagnose::classify::{Family, Shape};
use generation_retry_diagnose::report;

#[test]
fn two_hop_with_address_change_is_generation_retry() {
    let analysis = two_hop_race().analyze();
    let i = only(&analysis);
    assert_eq!(i.family, Family::GenerationRetry, "{}", i.reason);
    assert_eq!(i.shape, Shape::TwoHop);
    assert_eq!(i.upstream, "be");
    assert_eq!(i.upstream_addr, format!("{A}, be"));
    assert_eq!(i.before, [A]);
    assert_eq!(i.after, [B]);
    assert!(i.access.is_some(), "the access line is the incident");
    assert_eq!(
        i.own_errors.len(),
        3,
        "no-live, closed and disabled lines joined"
    );
    assert_eq!(i.request, "GET /race HTTP/1.1");
    assert!(report::verdict(&analysis.incidents)
        .starts_with("1 of 1 502/504s are the generation race (2-hop 1, 1-hop 0)"));
}

#[test]
fn one_hop_with_address_change_is_generation_first() {
    let mut l = Logs::new();
    l.ok(0, A);
    l.ok(500, A);
    l.no_live(1_000, 8, "/first");
    l.access(1_000, 502, "be", "/first", 8);
    l.ok(1_300, B);
    l.ok(1_800, B);
    let analysis = l.analyze();
    let i = only(&analysis);
    assert_eq!(i.family, Family::GenerationFirst, "{}", i.reason);
    assert_eq!(i.shape, Shape::OneHop);
    assert_eq!(
        (i.before.as_slice(), i.after.as_slice()),
        (&[A.to_string()][..], &[B.to_string()][..])
    );
    assert!(report::verdict(&analysis.incidents).contains("(2-hop 0, 1-hop 1)"));
}

#[test]
fn error_line_without_access_line_is_its_own_incident() {
    let mut l = Logs::new();
    l.ok(0, A);
    l.no_live(1_000, 40, "/lonely");
    l.ok(1_800, B);
    let analysis = l.analyze();
    let i = only(&analysis);
    assert_eq!(i.access, None);
    assert_eq!(i.status, 502);
    assert_eq!(i.upstream_addr, "");
    assert_eq!(i.request, "GET /lonely HTTP/1.1");
    assert_eq!(i.time_text, "2026/12/01 07:00:01");
    assert_eq!(i.family, Family::GenerationFirst, "{}", i.reason);
}

/// Scale-out: B joins while A stays. The retry after A's failure is
/// refused; A's `temporarily disabled` line is this request's own and must
/// not make it `unavailable` (A did not leave, so only the request match
/// keeps it out).
#[test]
fn own_disabled_line_does_not_make_a_race_unavailable() {
    let mut l = Logs::new();
    l.ok(0, A);
    l.ok(600, A);
    l.error(
        1_000,
        "error",
        21,
        "upstream timed out (110: Connection timed out) while reading response header from upstream",
        "/scale",
        A,
    );
    l.error(
        1_000,
        "warn",
        21,
        "upstream server temporarily disabled while reading response header from upstream",
        "/scale",
        A,
    );
    l.no_live(1_000, 21, "/scale");
    l.access(1_200, 502, &format!("{A}, be"), "/scale", 21);
    l.ok(1_500, A);
    l.ok(1_700, B);
    let analysis = l.analyze();
    let i = only(&analysis);
    assert_eq!(i.before, [A]);
    assert_eq!(i.after, [A, B]);
    assert_eq!(i.family, Family::GenerationRetry, "{}", i.reason);
    assert_eq!(i.own_errors.len(), 3);
}

/// The DNS answer flips with a period close to the window: A, then B
/// around the refusal, then A again. The sets before and after the refusal
/// are both {A, B}, yet the served set changed twice within the window.
#[test]
fn flip_with_a_period_near_the_window_is_a_change() {
    let mut l = Logs::new();
    for k in 0..8 {
        l.ok(k * 250, A);
        l.ok(2_000 + k * 250, B);
        l.ok(4_000 + k * 250, A);
    }
    l.no_live(3_000, 70, "/flip");
    l.access(3_000, 502, "be", "/flip", 70);
    let analysis = l.analyze();
    let i = only(&analysis);
    assert_eq!(i.before, [A, B]);
    assert_eq!(i.after, [A, B]);
    assert_eq!(i.family, Family::GenerationFirst, "{}", i.reason);
    assert!(i.reason.contains("within the window"), "{}", i.reason);
}

/// "A, B, be": B failed last, and the retry after it was refused. A keeps
/// serving; B is gone. The change is B leaving, not A.
#[test]
fn two_hop_uses_the_last_address_before_the_name() {
    let mut l = Logs::new();
    for ms in [200, 600, 1_400, 1_800] {
        l.ok(ms, A);
    }
    l.access(1_000, 502, &format!("{A}, {B}, be"), "/two", 90);
    let analysis = l.analyze();
    let i = only(&analysis);
    assert_eq!(i.shape, Shape::TwoHop);
    assert_eq!(i.family, Family::GenerationRetry, "{}", i.reason);
    assert!(
        i.reason.contains(&format!("after {B} failed")),
        "{}",
        i.reason
    );
}
