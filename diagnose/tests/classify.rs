//! Classification on small synthetic logs, one scenario per family, plus
//! the joins between access and error lines.

mod common;

use common::{Logs, A, B, FORMAT_BARE, FORMAT_NO_CONN};
use generation_retry_diagnose::classify::{Family, Incident, Shape};
use generation_retry_diagnose::report;
use generation_retry_diagnose::Analysis;

fn only(analysis: &Analysis) -> &Incident {
    assert_eq!(
        analysis.incidents.len(),
        1,
        "one incident expected: {:#?}",
        analysis.incidents
    );
    &analysis.incidents[0]
}

fn families(analysis: &Analysis) -> Vec<Family> {
    analysis.incidents.iter().map(|i| i.family).collect()
}

/// The 2-hop race: the attempt at A fails as A leaves, the retry's
/// selection is refused, B serves afterwards. nginx's own `temporarily
/// disabled` line for A (max_fails=1) belongs to this very request and must
/// not make it `unavailable`.
fn two_hop_race() -> Logs {
    let mut l = Logs::new();
    l.ok(0, A);
    l.ok(400, A);
    l.ok(800, A);
    l.error(
        1_100,
        "error",
        7,
        "upstream prematurely closed connection while reading response header from upstream",
        "/race",
        A,
    );
    l.error(
        1_100,
        "warn",
        7,
        "upstream server temporarily disabled while reading response header from upstream",
        "/race",
        A,
    );
    l.no_live(1_100, 7, "/race");
    l.access(1_200, 502, &format!("{A}, be"), "/race", 7);
    l.ok(1_500, B);
    l.ok(1_900, B);
    l.ok(2_500, B);
    l
}

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
        analysis.data.errors[*e]
            .error
            .message
            .starts_with("no live upstreams")
    }));
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
fn resolver_error_before_one_hop_is_empty() {
    let mut l = Logs::new();
    l.ok(100, A);
    l.raw_error(
        200,
        "error",
        "be.example.com could not be resolved (3: Host not found)",
    );
    l.access(1_500, 502, "be", "/gone", 9);
    l.ok(2_300, B);
    let analysis = l.analyze();
    let i = only(&analysis);
    assert_eq!(i.family, Family::Empty, "{}", i.reason);
    assert!(i.reason.contains("be.example.com"));
    assert_eq!(i.nearby.len(), 1, "the resolver line is evidence");
}

#[test]
fn repeated_refusals_with_no_address_after_are_empty() {
    let mut l = Logs::new();
    l.ok(100, A);
    l.access(1_500, 502, "be", "/a", 10);
    l.access(1_800, 502, "be", "/b", 11);
    let analysis = l.analyze();
    assert_eq!(families(&analysis), [Family::Empty, Family::Empty]);
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

#[test]
fn one_hop_without_change_is_other() {
    let mut l = Logs::new();
    l.ok(0, A);
    l.access(1_000, 502, "be", "/p", 16);
    l.ok(1_500, A);
    let analysis = l.analyze();
    assert_eq!(families(&analysis), [Family::Other]);
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
    assert_eq!(i.family, Family::Other);
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
