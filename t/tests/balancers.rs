//! The race through every balancer nginx 1.28.0 ships, with and without
//! keepalive, in either directive order, with backup servers: with
//! `generation_retry_resnapshot on` each is rescued.
//!
//! One test per balancer; its variants run concurrently, each with its own
//! nginx, DNS server and backend.

use generation_retry_t::accesslog::Hop;
use generation_retry_t::nginx::Flavor;
use generation_retry_t::scenario::{Lab, Spec};
use tokio::task::JoinSet;

const ON: &str = "generation_retry_resnapshot on;";

/// The variants of one balancer directive (`""` for round-robin).
fn variants(balancer: &'static str) -> Vec<(String, Spec)> {
    let m = Flavor::with_module;
    let mut v = vec![
        (
            format!("[{balancer}] keepalive after balancer, directive last"),
            Spec::single_peer(m(), balancer, ON),
        ),
        (
            format!("[{balancer}] keepalive after balancer, directive first"),
            Spec::single_peer(m(), &format!("{ON} {balancer}"), ""),
        ),
        (
            format!("[{balancer}] two peers, no keepalive"),
            Spec::two_peers(m(), balancer, ON),
        ),
    ];
    if !balancer.is_empty() {
        // nginx 1.28 drops a keepalive placed before the balancer (with a
        // "load balancing method redefined" warning); the wrapper must not
        // care which of them ends up inside it.
        v.push((
            format!("[{balancer}] keepalive before balancer"),
            Spec::two_peers(m(), "keepalive 16;", &format!("{balancer} {ON}")),
        ));
    }
    if balancer.is_empty() || balancer.starts_with("least_conn") {
        // hash, ip_hash and random refuse `backup`.
        v.push((
            format!("[{balancer}] with a backup server"),
            Spec::single_peer(
                m(),
                balancer,
                &format!("server 127.0.0.4:${{BPORT}} backup; {ON}"),
            ),
        ));
    }
    v
}

/// Runs one race per variant, concurrently; returns the failures.
async fn run(balancer: &'static str) {
    let mut set = JoinSet::new();
    for (name, spec) in variants(balancer) {
        set.spawn(async move {
            let mut lab = Lab::start_spec(spec).await;
            let race = lab.race_once(0).await;
            let s = lab.status("be").await;
            let mut problems = Vec::new();
            if race.response.status() != 200 {
                problems.push(format!("status {}", race.response.status()));
            }
            let hops = &race.entry.hops;
            let all_addrs = hops.iter().all(|h| matches!(h, Hop::Addr(_)));
            if hops.len() != 2 || !all_addrs {
                problems.push(format!("$upstream_addr {:?}", race.entry.upstream_addr()));
            }
            let first = lab.upstream_addr(race.first_hop);
            if !race.entry.upstream_addr().starts_with(&first) {
                problems.push(format!("first hop should be {first}"));
            }
            if s["rescued"] != 1 || s["busy"]["retry"] != 1 || s["failed"] != 0 {
                problems.push(format!("counters {s}"));
            }
            if !problems.is_empty() {
                let log = lab.nginx.error_log();
                lab.finish();
                return Err(format!("{name}: {}\n{log}", problems.join("; ")));
            }
            lab.finish();
            Ok(name)
        });
    }
    let mut failures = Vec::new();
    let mut passed = 0;
    while let Some(r) = set.join_next().await {
        match r.expect("variant task") {
            Ok(_) => passed += 1,
            Err(e) => failures.push(e),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(passed >= 3);
}

macro_rules! balancer_tests {
    ($($name:ident => $directive:expr,)*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn $name() {
            run($directive).await;
        }
    )*};
}

balancer_tests! {
    round_robin => "",
    least_conn => "least_conn;",
    hash => "hash $request_uri;",
    hash_consistent => "hash $request_uri consistent;",
    ip_hash => "ip_hash;",
    random => "random;",
    random_two => "random two least_conn;",
}
