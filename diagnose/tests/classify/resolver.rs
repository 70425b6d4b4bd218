//! Resolver lines: which upstream they concern, and when a name that is
//! gone (NXDOMAIN) makes a refusal `empty`.

use super::common::{Logs, A, B, FORMAT};
use super::{families, only};
use generation_retry_diagnose::classify::Family;
use generation_retry_diagnose::collect::Options;
use generation_retry_diagnose::report;

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
        // The configuration's: no `down` server hides beside the names.
        configured: true,
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
