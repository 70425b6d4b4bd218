//! The race through every balancer the nginx under test ships (1.28's, plus
//! `sticky` from 1.29.6 and `least_time` from 1.31.0), with and without
//! keepalive, in either directive order, with backup servers: with
//! `generation_retry_resnapshot on` each is rescued, and so is each by the
//! patched nginx without the module.
//!
//! One test per balancer and fix; its variants run concurrently, each with
//! its own nginx, DNS server and backend.

use generation_retry_t::accesslog::Hop;
use generation_retry_t::metrics::{Counter, StatusExt};
use generation_retry_t::nginx::Flavor;
use generation_retry_t::scenario::{Lab, Spec};
use tokio::task::JoinSet;

/// Which fix is under test.
#[derive(Clone, Copy)]
enum Fix {
    Module,
    Patched,
}

/// The variants of one balancer directive (`""` for round-robin).
fn variants(balancer: &'static str, fix: Fix) -> Vec<(String, Spec)> {
    let (flavor, on): (fn() -> Flavor, &str) = match fix {
        Fix::Module => (Flavor::with_module, "generation_retry_resnapshot on;"),
        Fix::Patched => (Flavor::patched, ""),
    };
    let mut v = vec![
        (
            format!("[{balancer}] keepalive after balancer, directive last"),
            Spec::single_peer(flavor(), balancer, on),
        ),
        (
            format!("[{balancer}] two peers, no keepalive"),
            Spec::two_peers(flavor(), balancer, on),
        ),
    ];
    if matches!(fix, Fix::Module) {
        v.push((
            format!("[{balancer}] keepalive after balancer, directive first"),
            Spec::single_peer(flavor(), &format!("{on} {balancer}"), ""),
        ));
    }
    if !balancer.is_empty() {
        // nginx 1.28 drops a keepalive placed before the balancer (with a
        // "load balancing method redefined" warning); the fix must not care
        // which of them ends up inside it.
        v.push((
            format!("[{balancer}] keepalive before balancer"),
            Spec::two_peers(flavor(), "keepalive 16;", &format!("{balancer} {on}")),
        ));
    }
    if balancer.is_empty() || balancer.starts_with("least_conn") {
        // hash, ip_hash and random refuse `backup`.
        v.push((
            format!("[{balancer}] with a backup server"),
            Spec::single_peer(
                flavor(),
                balancer,
                &format!("server 127.0.0.4:${{BPORT}} backup; {on}"),
            ),
        ));
    }
    v
}

/// Runs one race per variant, concurrently, and fails with every problem.
async fn run(balancer: &'static str, fix: Fix) {
    let mut set = JoinSet::new();
    for (name, spec) in variants(balancer, fix) {
        set.spawn(async move {
            let mut lab = Lab::start_spec(spec).await;
            let race = lab.race_once(0).await;
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
            if matches!(fix, Fix::Module) {
                let s = lab.status("be").await;
                if s.count(Counter::Rescued) != 1
                    || s.count(Counter::BusyRetry) != 1
                    || s.count(Counter::Failed) != 0
                {
                    problems.push(format!("counters {s}"));
                }
            }
            let log = lab.nginx.error_log();
            lab.finish();
            if problems.is_empty() {
                Ok(())
            } else {
                Err(format!("{name}: {}\n{log}", problems.join("; ")))
            }
        });
    }
    let mut failures = Vec::new();
    let mut passed = 0;
    while let Some(r) = set.join_next().await {
        match r.expect("variant task") {
            Ok(()) => passed += 1,
            Err(e) => failures.push(e),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(passed >= 2);
}

macro_rules! balancer_tests {
    ($($name:ident, $patched:ident => $directive:expr,)*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn $name() {
            run($directive, Fix::Module).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn $patched() {
            run($directive, Fix::Patched).await;
        }
    )*};
}

balancer_tests! {
    round_robin, patched_round_robin => "",
    least_conn, patched_least_conn => "least_conn;",
    hash, patched_hash => "hash $request_uri;",
    hash_consistent, patched_hash_consistent => "hash $request_uri consistent;",
    ip_hash, patched_ip_hash => "ip_hash;",
    random, patched_random => "random;",
    random_two, patched_random_two => "random two least_conn;",
}

/// A balancer that only newer versions ship: its rows where the nginx under
/// test has it, and a line saying it was left out where it has not.
async fn run_since(since: (u32, u32, u32), balancer: &'static str, fix: Fix) {
    let v = generation_retry_t::nginx::version();
    if v < since {
        println!("nginx {v:?} has no `{balancer}` (since {since:?}): no row to run");
        return;
    }
    run(balancer, fix).await;
}

macro_rules! newer_balancer_tests {
    ($($name:ident, $patched:ident => $since:expr, $directive:expr,)*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn $name() {
            run_since($since, $directive, Fix::Module).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn $patched() {
            run_since($since, $directive, Fix::Patched).await;
        }
    )*};
}

newer_balancer_tests! {
    sticky_cookie, patched_sticky_cookie => (1, 29, 6), "sticky cookie srv_id;",
    least_time, patched_least_time => (1, 31, 0), "least_time header;",
}
