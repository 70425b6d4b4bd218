//! The race through every balancer the nginx under test ships (1.28's, plus
//! `sticky` from 1.29.6 and `least_time` from 1.31.0), with and without
//! keepalive, in either directive order, with backup servers: with
//! `generation_retry_resnapshot on` each is rescued, and so is each by the
//! patched nginx without the module. Rescued means: 200 answered by hop 2,
//! hop 2 on the re-resolved list (the new address, never the old one nor
//! `be`), and the fix's own error.log line on the request (the module's
//! rescue line naming hop 2, or the patch's `peers changed` line).
//!
//! One test per balancer and fix; its rows run concurrently, each with
//! its own nginx, DNS server and backend. [`sticky`]: what `sticky` keeps
//! of a rescue that hands tried peers back and then fails.

mod sticky;

use std::net::SocketAddr;

use generation_retry_t::actors::backend::ADDR_C;
use generation_retry_t::nginx::{test_config, Config, Fix};
use generation_retry_t::scenarios::http::{patched_rescue_line, Lab, Spec};
use generation_retry_t::scoring::accesslog::Hop;
use generation_retry_t::scoring::errorlog::NO_LIVE;
use generation_retry_t::scoring::metrics::{log, Counter, Protocol, StatusExt};
use generation_retry_t::shared::UPSTREAM;
use tokio::task::JoinSet;

/// One row of a balancer's test.
struct Row {
    name: String,
    spec: Spec,
    /// The row has the static peer [`ADDR_C`] beside the re-resolving one
    /// (two peers, no keepalive): a fresh snapshot holds it and the new
    /// address, and hop 2 is one of the two, but never the one hop 1 tried
    /// (the first attempt may be held at the static peer; the fix keeps
    /// it excluded though the fresh `tried` bitmap is new). Without it hop
    /// 2 is the new address.
    static_peer: bool,
}

/// The rows of one balancer directive (`""` for round-robin).
fn variants(balancer: &'static str, fix: Fix) -> Vec<Row> {
    let on = match fix {
        Fix::Module => "generation_retry_resnapshot on;",
        Fix::Patched => "",
    };
    let row = |name: &str, spec: Spec, static_peer| Row {
        name: format!("[{balancer}] {name}"),
        spec,
        static_peer,
    };
    let mut v = vec![
        row(
            "keepalive after balancer, directive last",
            Spec::single_peer(fix.flavor(), balancer, on),
            false,
        ),
        row(
            "two peers, no keepalive",
            Spec::two_peers(fix.flavor(), balancer, on),
            true,
        ),
    ];
    if matches!(fix, Fix::Module) {
        v.push(row(
            "keepalive after balancer, directive first",
            Spec::single_peer(fix.flavor(), &format!("{on} {balancer}"), ""),
            false,
        ));
    }
    if !balancer.is_empty() {
        // nginx 1.28 drops a keepalive placed before the balancer (with a
        // "load balancing method redefined" warning); the fix must not care
        // which of them ends up inside it.
        v.push(row(
            "keepalive before balancer",
            Spec::two_peers(fix.flavor(), "keepalive 16;", &format!("{balancer} {on}")),
            true,
        ));
    }
    if balancer.is_empty() || balancer.starts_with("least_conn") {
        // hash, ip_hash and random refuse `backup`. The backup is not
        // tried while the new primary is up.
        v.push(row(
            "with a backup server",
            Spec::single_peer(
                fix.flavor(),
                balancer,
                &format!("server 127.0.0.4:${{BPORT}} backup; {on}"),
            ),
            false,
        ));
    }
    v
}

/// One race through a row, checked: a 200 answered by hop 2, hop 1 where
/// the backend held the first attempt, hop 2 an untried peer of the fresh
/// list (the new address; or the static peer, in a row that has one, when
/// hop 1 was not there), never the old address nor `be`; the fix's own line on the request (the module's
/// rescue line naming hop 2, or the patch's line), once, and no `no live
/// upstreams`; with the module, its counters. Returns every problem.
async fn race_row(row: Row, fix: Fix) -> Result<(), String> {
    let Row {
        name,
        spec,
        static_peer,
    } = row;
    let mut lab = Lab::start_spec(spec).await;
    let race = lab.race_once(0).await;
    let mut problems = Vec::new();
    if race.response.status() != 200 {
        problems.push(format!("status {}", race.response.status()));
    }
    let first = lab.upstream_addr(race.first_hop);
    let mut fresh = vec![lab.upstream_addr(race.new)];
    if static_peer {
        fresh.push(lab.upstream_addr(ADDR_C));
    }
    let second: Option<SocketAddr> = match race.entry.hops.as_slice() {
        [Hop::Addr(a), Hop::Addr(b)] => {
            if a.to_string() != first {
                problems.push(format!(
                    "hop 1 is {a}, the first attempt was held at {first}"
                ));
            }
            // The static peer is on the fresh list too, but once tried it
            // is not tried again.
            fresh.retain(|f| *f != first);
            if !fresh.contains(&b.to_string()) {
                problems.push(format!(
                    "hop 2 is {b}, not an untried peer of the fresh list {fresh:?}"
                ));
            }
            if race.response.body != format!("{}\n", b.ip()) {
                problems.push(format!(
                    "hop 2 is {b} but {:?} answered",
                    race.response.body
                ));
            }
            Some(*b)
        }
        _ => {
            problems.push(format!(
                "$upstream_addr {:?}, not two addresses",
                race.entry.upstream_addr()
            ));
            None
        }
    };

    // `sticky cookie` sets its cookie at each selection, and the fix (the
    // module, or the patched nginx's core) hides the first attempt's once
    // the fresh state sets its own.
    problems.extend(cookie_problems(
        &race.response.headers,
        name.contains("sticky cookie"),
    ));

    let lines = lab.request_errors(&race.path);
    let line = match fix {
        Fix::Module => log::rescued_marker(Protocol::Http, UPSTREAM),
        Fix::Patched => patched_rescue_line(UPSTREAM),
    };
    let fix_lines: Vec<&String> = lines.iter().filter(|l| l.contains(&line)).collect();
    if fix_lines.len() != 1 {
        problems.push(format!("{} lines `{line}`, expected 1", fix_lines.len()));
    }
    if let (Fix::Module, Some(b), [l]) = (fix, second, fix_lines.as_slice()) {
        let selected = format!("selected {b} on a fresh snapshot");
        if !l.contains(&selected) {
            problems.push(format!("the rescue line does not say `{selected}`"));
        }
    }
    if lines.iter().any(|l| l.contains(NO_LIVE)) {
        problems.push(format!("`{NO_LIVE}` for {}", race.path));
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
        println!("{name}: $upstream_addr {:?}", race.entry.upstream_addr());
        Ok(())
    } else {
        Err(format!(
            "{name}: {} ($upstream_addr {:?})\n{log}",
            problems.join("; "),
            race.entry.upstream_addr()
        ))
    }
}

/// What is wrong with a response's `Set-Cookie` headers: more than one
/// for a cookie name (nginx's own retries send one, RFC 6265 4.1.1), or,
/// where `sticky cookie` set one (`expected`), none.
fn cookie_problems(headers: &reqwest::header::HeaderMap, expected: bool) -> Vec<String> {
    let mut problems = Vec::new();
    let mut names: Vec<&str> = Vec::new();
    for v in headers.get_all("set-cookie") {
        names.push(v.to_str().unwrap_or("").split('=').next().unwrap_or(""));
    }
    names.sort_unstable();
    let mut counted = names.clone();
    counted.dedup();
    for n in counted {
        let count = names.iter().filter(|m| **m == n).count();
        if count != 1 {
            problems.push(format!("{count} Set-Cookie for {n}: {headers:?}"));
        }
    }
    if expected && names.is_empty() {
        problems.push("no Set-Cookie from `sticky cookie`".into());
    }
    problems
}

/// Races every row, concurrently, and fails with every problem; passes only
/// when each row reported back, under its own name, with no problem.
async fn run(balancer: &'static str, fix: Fix) {
    let rows = variants(balancer, fix);
    let mut expected: Vec<String> = rows.iter().map(|r| r.name.clone()).collect();
    let mut set = JoinSet::new();
    for row in rows {
        set.spawn(async move {
            let name = row.name.clone();
            (name, race_row(row, fix).await)
        });
    }
    let mut failures = Vec::new();
    let mut passed = Vec::new();
    while let Some(r) = set.join_next().await {
        match r.expect("row task") {
            (name, Ok(())) => passed.push(name),
            (_, Err(e)) => failures.push(e),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    passed.sort();
    expected.sort();
    assert_eq!(passed, expected, "every row must run and pass its checks");
    println!("{} rows passed: {passed:#?}", passed.len());
}

macro_rules! balancer_tests {
    ($($name:ident, $patched:ident => $directive:expr,)*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn $name() {
            run($directive, Fix::Module).await;
        }

        /// Non-regression guard: the patched nginx, without the module.
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
/// test has it; where it has not, proof of that (`nginx -t` calls the
/// directive unknown), so a wrong version reading cannot skip the rows.
async fn run_since(since: (u32, u32, u32), balancer: &'static str, fix: Fix) {
    if !lacks(since, balancer, fix) {
        run(balancer, fix).await;
    }
}

/// Whether the nginx under test is older than `since`, the version that
/// ships `balancer`: then with proof of that (`nginx -t` calls the
/// directive unknown), so a wrong version reading cannot skip a test.
fn lacks(since: (u32, u32, u32), balancer: &str, fix: Fix) -> bool {
    let v = generation_retry_t::nginx::version();
    if v >= since {
        return false;
    }
    let word = balancer.split_whitespace().next().expect("a directive");
    let t = test_config(&Config::new(
        fix.flavor(),
        format!(
            "upstream ${{UPSTREAM}} {{ zone ${{UPSTREAM}} 64k; server 127.0.0.2:1; {balancer} }}"
        ),
    ));
    assert!(
        !t.ok && t.stderr.contains(&format!("unknown directive \"{word}\"")),
        "nginx {v:?} should not know `{balancer}` (since {since:?}): {t:?}"
    );
    println!("nginx {v:?} has no `{balancer}` (since {since:?}): nothing to run");
    true
}

macro_rules! newer_balancer_tests {
    ($($name:ident, $patched:ident => $since:expr, $directive:expr,)*) => {$(
        /// Non-regression guard: before the version that ships the
        /// balancer the test only proves nginx refuses its directive; from
        /// that version on it is a rescue test.
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn $name() {
            run_since($since, $directive, Fix::Module).await;
        }

        /// Non-regression guard: the patched nginx, without the module.
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn $patched() {
            run_since($since, $directive, Fix::Patched).await;
        }
    )*};
}

newer_balancer_tests! {
    sticky_cookie, patched_sticky_cookie => (1, 29, 6), "sticky cookie srv_id;",
    // `header`: sticky learns at the response's header through the peer
    // connection's `notify`, which it wraps at every `peer.init` (so at a
    // re-snapshot too; issue 41, the callbacks a re-init must not see).
    sticky_learn, patched_sticky_learn => (1, 29, 6),
        "sticky learn create=$upstream_http_x_backend lookup=$cookie_srv_id \
         zone=sticky_learn:1m header;",
    least_time, patched_least_time => (1, 31, 0), "least_time header;",
}
