//! Classification on small synthetic logs, one scenario per family, plus
//! the joins between access and error lines.

mod common;

use common::{
    Logs, A, B, FORMAT, FORMAT_BARE, FORMAT_LOCAL, FORMAT_MSEC, FORMAT_NO_CONN, FORMAT_UNQUOTED,
};
use generation_retry_diagnose::classify::{Family, Incident, Shape};
use generation_retry_diagnose::collect::{OffsetBasis, Options};
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
        let source = analysis.data.errors[*e].source;
        analysis
            .text(source)
            .is_some_and(|t| t.contains("] 11#11: *7 no live upstreams"))
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

fn gone(resolver_line: &str) -> Logs {
    let mut l = Logs::new();
    l.ok(100, A);
    l.raw_error(200, "error", resolver_line);
    l.access(1_500, 502, "be", "/gone", 9);
    l.ok(2_300, B);
    l
}

fn with_servers(servers: &[(&str, &str)]) -> Options {
    Options {
        error_offset_s: Some(0),
        servers: servers
            .iter()
            .map(|(u, n)| (u.to_string(), n.to_string()))
            .collect(),
        ..Options::default()
    }
}

/// Resolver lines count only for the upstream whose `server NAME` they
/// name: the upstream of that very name, or one `--upstream-server` ties
/// to it, or, when the logs name one upstream only, that one. With two
/// upstreams, a name neither is known to resolve concerns none.
#[test]
fn resolver_error_counts_only_for_its_upstream() {
    let line = "be.example.com could not be resolved (3: Host not found)";
    let alone = gone(line).analyze();
    assert_eq!(only(&alone).family, Family::Empty, "one upstream: its line");
    let mut logs = gone(line);
    logs.access(50, 200, &format!("{A}, be"), "/u", 7);
    logs.access(60, 200, "10.0.0.9:80, api", "/u", 8);
    let analysis = logs.analyze();
    let i = only(&analysis);
    assert_ne!(i.family, Family::Empty, "{}", i.reason);
    assert!(i.nearby.is_empty(), "not be's line: {:?}", i.nearby);
    assert!(report::human(&analysis)
        .contains("note: resolver errors for be.example.com (1) are tied to no upstream"));
    let analysis = logs.analyze_opts(FORMAT, with_servers(&[("be", "be.example.com")]));
    let i = only(&analysis);
    assert_eq!(i.family, Family::Empty, "{}", i.reason);
    assert!(i.reason.contains("be.example.com"));
    assert_eq!(i.nearby.len(), 1, "the resolver line is evidence");
    // Another upstream's server name does not empty `be`.
    let analysis = logs.analyze_opts(FORMAT, with_servers(&[("api", "be.example.com")]));
    assert_ne!(only(&analysis).family, Family::Empty);
}

/// An upstream named after its server: `$upstream_addr` says `be`, and
/// the resolver line names `be`.
#[test]
fn only_nxdomain_empties_the_list() {
    let nx = gone("be could not be resolved (3: Host not found)").analyze();
    assert_eq!(only(&nx).family, Family::Empty, "{}", only(&nx).reason);
    for failure in ["(2: Server failure)", "(110: Operation timed out)"] {
        let a = gone(&format!("be could not be resolved {failure}")).analyze();
        let i = only(&a);
        assert_ne!(i.family, Family::Empty, "{failure}: {}", i.reason);
        assert_eq!(i.nearby.len(), 1, "still shown as evidence");
    }
    // An address served after the NXDOMAIN: the name resolved again.
    let mut l = gone("be could not be resolved (3: Host not found)");
    l.ok(1_200, B);
    let a = l.analyze();
    assert_ne!(only(&a).family, Family::Empty, "{}", only(&a).reason);
}

/// Refusals with no address serving afterwards are not `empty` without a
/// resolver line saying the name is gone.
#[test]
fn repeated_refusals_without_resolver_evidence_are_not_empty() {
    let mut l = Logs::new();
    l.ok(100, A);
    l.access(1_500, 502, "be", "/a", 10);
    l.access(1_800, 502, "be", "/b", 11);
    let analysis = l.analyze();
    assert_eq!(
        families(&analysis),
        [Family::Unavailable, Family::Unavailable]
    );
}

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
