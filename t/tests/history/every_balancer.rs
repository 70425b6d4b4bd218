//! Every balancer of nginx 1.28, module and patched nginx: a POST whose
//! first attempt failed at the heavy static peer is not sent there again
//! after the re-snapshot, with keepalive after the balancer, before it,
//! without it, with a backup server and over TLS (one row each).

use std::time::{Duration, Instant};

use generation_retry_t::actors::backend::{Wire, ADDR_A, ADDR_B, ADDR_C};
use generation_retry_t::actors::dns::Answer;
use generation_retry_t::memcheck::patience;
use generation_retry_t::nginx::Flavor;
use generation_retry_t::scenarios::http::{patched_rescue_line, Lab, Ready, Spec, NAME};
use generation_retry_t::scoring::accesslog::Hop;
use generation_retry_t::scoring::errorlog::NO_LIVE;
use generation_retry_t::scoring::metrics::{log, Counter, Protocol, StatusExt};
use generation_retry_t::shared::{KEEPALIVE_LOCATION, UPSTREAM};
use reqwest::Method;
use tokio::task::JoinSet;

use super::common::{Fix, RETRY_POST};

/// The heavy static peer and the re-resolving name, both `max_fails=0`.
const WEIGHTED: &str = "server 127.0.0.4:${BPORT} weight=20 max_fails=0;\n        \
                        server app.test:${BPORT} resolve max_fails=0;";
/// The static peer alone as primary, the name as its backup.
const WITH_BACKUP: &str = "server 127.0.0.4:${BPORT} max_fails=0;\n        \
                           server app.test:${BPORT} resolve max_fails=0 backup;";

struct Row {
    name: String,
    spec: Spec,
}

fn rows(balancer: &'static str, fix: Fix) -> Vec<Row> {
    let (flavor, on) = match fix {
        Fix::Module => (Flavor::with_module(), "generation_retry_resnapshot on;"),
        Fix::Patched => (Flavor::patched(), ""),
    };
    // `keepalive: false` for the harness even where the upstream keeps
    // connections: its probes then come from several client addresses, so
    // ip_hash reaches the name too, and they warm nginx's cache all the
    // same (the fresh snapshot's get meets cached connections to ADDR_C).
    let spec = |servers: &str, pre: String, keepalive: bool, tls: bool| Spec {
        flavor: flavor.clone(),
        servers: servers.into(),
        pre,
        extra: on.into(),
        keepalive: false,
        http_extra: String::new(),
        location_extra: if keepalive {
            format!("{RETRY_POST} {KEEPALIVE_LOCATION}")
        } else {
            RETRY_POST.into()
        },
        tls,
        wrapper: Vec::new(),
        daemon: false,
        // The name as a backup is never picked while ADDR_C is up.
        ready: if servers.contains("backup") {
            Ready::Answered
        } else {
            Ready::Proxying
        },
        stream: String::new(),
        valid: 1,
        wire: Wire::Http,
        records: |_| Vec::new(),
        ipv6: false,
    };
    let with_keepalive = format!("{WEIGHTED}\n        keepalive 16;");
    let row = |name: &str, spec: Spec| Row {
        name: format!("[{balancer}] {name}"),
        spec,
    };
    let mut v = vec![
        row(
            "keepalive after balancer",
            spec(&with_keepalive, balancer.into(), true, false),
        ),
        row(
            "no keepalive",
            spec(WEIGHTED, balancer.into(), false, false),
        ),
    ];
    if !balancer.is_empty() {
        // nginx drops a keepalive placed before the balancer, with a
        // "load balancing method redefined" warning.
        v.push(row(
            "keepalive before balancer",
            spec(WEIGHTED, format!("keepalive 16; {balancer}"), true, false),
        ));
    }
    if balancer.is_empty() || balancer.starts_with("least_conn") {
        // hash, ip_hash and random refuse `backup`.
        let servers = format!("{WITH_BACKUP}\n        keepalive 16;");
        v.push(row("backup", spec(&servers, balancer.into(), true, false)));
    }
    if balancer.is_empty() || balancer.starts_with("hash") {
        v.push(row(
            "TLS, keepalive",
            spec(&with_keepalive, balancer.into(), true, true),
        ));
    }
    v
}

/// One POST through a row; every problem found, and the module's
/// `excluded` count.
async fn post_row(row: Row, fix: Fix) -> Result<u64, String> {
    let Row { name, spec } = row;
    let servers_backup = spec.ready == Ready::Answered;
    let lab = Lab::start_spec(spec).await;
    let mut problems = Vec::new();
    // The POST's first attempt must be held at ADDR_C; a hashing balancer
    // may put a path on the other peer: try the next path then.
    let mut attempt = None;
    for i in 0..24 {
        let hold = lab.backend.arm_hold_any();
        let client = lab.client.clone();
        let path = format!("/order/{i}");
        let request = {
            let path = path.clone();
            tokio::spawn(async move {
                client
                    .request(Method::POST, &path, Some(b"item=1".to_vec()))
                    .await
            })
        };
        let held = hold
            .caught(patience(Duration::from_secs(10)))
            .await
            .map_err(|e| format!("{name}: {e}"))?;
        if held.addr == ADDR_C {
            attempt = Some((path, held, request));
            break;
        }
        held.close();
        let _ = request.await;
    }
    let Some((path, held, request)) = attempt else {
        return Err(format!("{name}: no POST was sent to {ADDR_C} first"));
    };

    let next = if lab.current == ADDR_A {
        ADDR_B
    } else {
        ADDR_A
    };
    let since = Instant::now();
    lab.dns.set_a(NAME, next);
    lab.dns
        .wait_answered(
            NAME,
            &Answer::A(vec![next]),
            since,
            patience(Duration::from_secs(10)),
        )
        .await
        .map_err(|e| format!("{name}: {e}"))?;
    if servers_backup {
        lab.wait_applied(next, since).await;
    } else {
        lab.wait_proxying_to(next, "/probe").await;
    }
    held.close();
    let response = request.await.expect("client task");

    if response.status() != 200 || response.body != format!("{next}\n") {
        problems.push(format!("answered {response:?}, not 200 from {next}"));
    }
    let reached: Vec<_> = lab
        .backend
        .seen()
        .into_iter()
        .filter(|s| s.path == path)
        .map(|s| s.addr)
        .collect();
    if reached != [ADDR_C, next] {
        problems.push(format!(
            "the POST reached {reached:?}, not {ADDR_C} then {next}"
        ));
    }
    let entry = lab.access_entry(&path).await;
    let want = [ADDR_C, next].map(|ip| lab.upstream_addr(ip));
    match entry.hops.as_slice() {
        [Hop::Addr(a), Hop::Addr(b)] if [a.to_string(), b.to_string()] == want => {}
        _ => problems.push(format!(
            "$upstream_addr {:?}, not {want:?}",
            entry.upstream_addr()
        )),
    }
    let lines = lab.request_errors(&path);
    let line = match fix {
        Fix::Module => log::rescued_marker(Protocol::Http, UPSTREAM),
        Fix::Patched => patched_rescue_line(UPSTREAM),
    };
    let n = lines.iter().filter(|l| l.contains(&line)).count();
    if n != 1 {
        problems.push(format!("{n} lines `{line}`, expected 1"));
    }
    if lines.iter().any(|l| l.contains(NO_LIVE)) {
        problems.push(format!("`{NO_LIVE}` for {path}"));
    }
    let excluded = if fix == Fix::Module {
        let s = lab.status(UPSTREAM).await;
        if s.count(Counter::Rescued) != 1 || s.count(Counter::Failed) != 0 {
            problems.push(format!("counters {s}"));
        }
        s.count(Counter::Excluded)
    } else {
        0
    };
    let log = lab.nginx.error_log();
    lab.finish();
    if problems.is_empty() {
        println!(
            "{name}: $upstream_addr {:?}, excluded {excluded}",
            entry.upstream_addr()
        );
        Ok(excluded)
    } else {
        Err(format!("{name}: {}\n{log}", problems.join("; ")))
    }
}

/// Every row of a balancer, concurrently. With the module:
/// - the backup row must hand the tried peer back: there the fresh
///   snapshot's only live peer is the tried one, so it is offered first,
///   always;
/// - the other rows together must have handed back at least one peer. Per
///   row it is a likelihood, not a certainty: the fresh snapshot prefers
///   the tried peer 20 to 1, but smooth weighted round-robin's current
///   weights live in the shared zone and carry over from earlier requests,
///   so which peer comes first is not fixed; all rows missing it has odds
///   of about 21^-4. Not for `random two`: it draws two peers (the weights
///   bias the draws) and takes the one with fewer connections, and with
///   none open either way the tried peer comes first about half the time;
///   its rows still assert that the POST reached each address once.
async fn run(balancer: &'static str, fix: Fix) {
    let rows = rows(balancer, fix);
    let expected = rows.len();
    let mut set = JoinSet::new();
    for row in rows {
        let name = row.name.clone();
        set.spawn(async move { (name, post_row(row, fix).await) });
    }
    let (mut failures, mut passed, mut excluded) = (Vec::new(), 0, 0);
    let mut backup = None;
    while let Some(r) = set.join_next().await {
        let (name, r) = r.expect("row task");
        match r {
            Ok(n) => {
                passed += 1;
                excluded += n;
                if name.ends_with("] backup") {
                    backup = Some(n);
                }
            }
            Err(e) => failures.push(e),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert_eq!(passed, expected);
    if fix == Fix::Module {
        // rows() gives round-robin and least_conn a backup row.
        if balancer.is_empty() || balancer.starts_with("least_conn") {
            let n = backup.expect("the backup row ran");
            assert!(n >= 1, "the backup row handed no tried peer back");
        }
        if !balancer.starts_with("random two") {
            assert!(excluded > 0, "no row handed a tried peer back");
        }
    }
}

macro_rules! history_tests {
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

history_tests! {
    round_robin, patched_round_robin => "",
    least_conn, patched_least_conn => "least_conn;",
    hash, patched_hash => "hash $request_uri;",
    hash_consistent, patched_hash_consistent => "hash $request_uri consistent;",
    ip_hash, patched_ip_hash => "ip_hash;",
    random, patched_random => "random;",
    random_two, patched_random_two => "random two least_conn;",
}
