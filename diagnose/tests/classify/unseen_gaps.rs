//! Where the evidence for `empty` has gaps (the review of issue 40's
//! rules): "nothing of U selected since the resolver line" is evidence
//! only in access logs that cover that span (nginx never logs a
//! successful resolution); a static peer in the configuration keeps the
//! list from ever being empty; an NXDOMAIN that another upstream's
//! flag claims may still be U's when U's names are not known; and one of
//! U's two names failing leaves the other's peers.

use super::common::{Logs, A, B, FORMAT};
use super::unseen::{all, options, refusals};
use generation_retry_diagnose::access::AccessParser;
use generation_retry_diagnose::analyze;
use generation_retry_diagnose::classify::{Family, Incident};
use generation_retry_diagnose::collect::{Collector, LogKind, Options};

/// The incidents of an error log read alone (an access log of nothing, as
/// the library allows).
fn error_log_only(lines: &[String]) -> Vec<Incident> {
    let mut c = Collector::new(
        Some(AccessParser::new(FORMAT).expect("format")),
        options(|_| {}),
    );
    let e = c.start_file("error.log", LogKind::Error);
    for line in lines {
        c.line(e, line.as_bytes());
    }
    analyze(c.finish()).incidents
}

/// Only the error log: a name's NXDOMAIN, then a refusal. With no access
/// line, "nothing of `be` selected since" holds of nothing, and the name
/// may have resolved again (nginx never logs that): `unknown`, naming
/// `--access-log`, whether the NXDOMAIN came long before (the unseen
/// rule) or within fail_timeout (the first selection's rule). The old
/// rules called both `empty`.
#[test]
fn an_nxdomain_without_the_access_log_is_unknown() {
    for nx in [500, 50_000] {
        let mut l = Logs::new();
        l.nxdomain(nx, "be");
        l.no_live(55_000, 9, "/p");
        let incidents = error_log_only(&l.error);
        assert_eq!(incidents.len(), 1, "{incidents:#?}");
        let i = &incidents[0];
        assert_eq!(
            i.family,
            Family::Unknown,
            "NXDOMAIN at {nx} ms: {}",
            i.reason
        );
        assert!(
            i.reason.contains("no access log entry was read")
                && i.reason.contains("--access-log PATH"),
            "{}",
            i.reason
        );
    }
}

/// Only the error log: a refusal, then a resolver failure other than
/// NXDOMAIN. Nothing shows `be` never served: `unknown`, not "the name
/// had not resolved".
#[test]
fn a_failure_without_the_access_log_is_no_name_that_never_resolved() {
    let mut l = Logs::new();
    l.no_live(15_000, 9, "/p");
    l.raw_error(
        15_000,
        "error",
        "be could not be resolved (110: Operation timed out)",
    );
    let incidents = error_log_only(&l.error);
    assert_eq!(incidents.len(), 1, "{incidents:#?}");
    let i = &incidents[0];
    assert_eq!(i.family, Family::Unknown, "{}", i.reason);
    assert!(i.reason.contains("--access-log PATH"), "{}", i.reason);
}

/// An access log that begins after the resolver line says nothing of
/// what was selected before it began: `unknown`, naming when it begins;
/// the same logs with an entry before the line are `empty`.
#[test]
fn an_access_log_that_begins_after_the_resolver_line_is_no_evidence() {
    let mut late = Logs::new();
    for (k, ms) in [15_000, 16_000, 17_000].into_iter().enumerate() {
        late.no_live(ms, 40 + k as u64, "/p");
        late.access(ms, 502, "be", "/p", 40 + k as u64);
    }
    let line = "app.test could not be resolved (3: Host not found)";
    late.raw_error(500, "error", line);
    all(
        &late.analyze().incidents,
        Family::Unknown,
        "the access logs read begin at 2026/12/01 07:00:15, after that line",
    );
    let mut covered = refusals();
    covered.raw_error(500, "error", line);
    all(
        &covered.analyze().incidents,
        Family::Empty,
        "no address of be was selected since",
    );
}

/// `upstream be { server 10.0.0.1; server app.test resolve; }`: the
/// static peer is always in the list, so an NXDOMAIN of the name (long
/// before, or within fail_timeout), or a first address just after the
/// refusals, never makes them `empty`. The old rules checked the static
/// peers after the `empty` ones.
#[test]
fn a_static_peer_beside_a_resolving_name_is_never_empty() {
    let mixed = || {
        options(|o| {
            o.configured = true;
            o.peers = vec![("be".into(), A.into())];
            o.conf_servers = vec![("be".into(), "app.test".into())];
        })
    };
    for nx in [500, 14_000] {
        let mut l = refusals();
        l.nxdomain(nx, "app.test");
        all(
            &l.analyze_opts(FORMAT, mixed()).incidents,
            Family::Unavailable,
            "the configuration gives be static peers (10.0.0.1:80)",
        );
    }
    // The static peer back just after the refusals: not "the name had not
    // resolved yet".
    let mut l = refusals();
    l.ok(17_500, A);
    let got = l.analyze_opts(FORMAT, mixed());
    assert!(
        got.incidents
            .iter()
            .all(|i| i.family == Family::Unavailable),
        "{:#?}",
        got.incidents
    );
}

/// `be` served before; since then `app.test`, which `--upstream-server`
/// gives `api`, answered NXDOMAIN. Which names `be` resolves is not
/// known, so that line could be its own: `unknown`, naming the flag (the
/// old rules counted only lines tied to no upstream, and called it
/// `unavailable`). Told `be`'s name, the lines decide.
#[test]
fn another_upstreams_nxdomain_may_be_this_ones_while_its_names_are_unknown() {
    let mut l = refusals();
    l.access(2_000, 200, &format!("{A}, be"), "/u", 5);
    l.ok(3_000, A);
    l.access(3_100, 200, &format!("{B}, api"), "/api", 6);
    l.nxdomain(10_000, "app.test");
    let servers = |pairs: &[(&str, &str)]| {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(u, n)| (u.to_string(), n.to_string()))
            .collect();
        options(move |o: &mut Options| o.servers = pairs)
    };
    let api = l.analyze_opts(FORMAT, servers(&[("api", "app.test")]));
    all(
        &api.incidents,
        Family::Unknown,
        "app.test (a name of api) could not be resolved (3: Host not found)",
    );
    assert!(api.incidents[0]
        .reason
        .contains("pass --upstream-server be=NAME for each such NAME"));
    let other = l.analyze_opts(FORMAT, servers(&[("api", "app.test"), ("be", "be.test")]));
    all(
        &other.incidents,
        Family::Unavailable,
        "no NXDOMAIN that could be its name's came since",
    );
    let own = l.analyze_opts(FORMAT, servers(&[("api", "app.test"), ("be", "app.test")]));
    all(
        &own.incidents,
        Family::Empty,
        "app.test could not be resolved (3: Host not found) at 2026/12/01 07:00:10",
    );
}

/// `be` resolves two names and only one answered NXDOMAIN: the other's
/// peers were still in the list (no failure logged for it), so the
/// refusals are not `empty` (the old rules took any one name's NXDOMAIN).
/// Once both have, they are; a name whose only failure is not NXDOMAIN,
/// with nothing of `be` ever served, had not resolved either.
#[test]
fn one_of_two_names_failing_leaves_the_others_peers() {
    let two = || {
        options(|o| {
            o.servers = vec![
                ("be".into(), "a.test".into()),
                ("be".into(), "b.test".into()),
            ]
        })
    };
    let mut l = refusals();
    l.nxdomain(500, "a.test");
    all(
        &l.analyze_opts(FORMAT, two()).incidents,
        Family::Unavailable,
        "be resolves b.test and the error log has no failure to resolve it",
    );
    let mut both = refusals();
    both.nxdomain(500, "a.test");
    both.nxdomain(5_000, "b.test");
    all(
        &both.analyze_opts(FORMAT, two()).incidents,
        Family::Empty,
        "a.test could not be resolved (3: Host not found) at 2026/12/01 07:00:00, b.test at \
         2026/12/01 07:00:05, and no address of be was selected since",
    );
    let mut servfail = refusals();
    servfail.nxdomain(500, "a.test");
    servfail.raw_error(
        5_000,
        "error",
        "b.test could not be resolved (2: Server failure)",
    );
    all(
        &servfail.analyze_opts(FORMAT, two()).incidents,
        Family::Empty,
        "its names had not resolved",
    );
}
