//! What a re-snapshot must leave as nginx has it (issue 41, a review of
//! the module against nginx's C): the request's tries, the peers'
//! `max_fails` bookkeeping, and what nginx's log handler reads. Each test
//! failed on the module before its fix.
//!
//! The races are scripted as in `t/tests/history/`: the first attempt is held
//! by the backend, the name's answer changes and nginx applies it, then
//! the backend closes the held connection so that nginx retries under a
//! moved generation. `hash $request_uri` makes the fresh state's first
//! choice the peer the request already tried, every time.
//!
//! Each test has a `patched_` twin: the patched nginx without the module,
//! held to the same behaviour (issue 47: the series failed each of them
//! before it took the module's fixes).

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use generation_retry_core::rescue::Fault;
use generation_retry_t::actors::backend::{Held, ADDR_A, ADDR_B, ADDR_C, UNAVAILABLE_PATH};
use generation_retry_t::actors::dns::{Answer, DnsServer};
use generation_retry_t::actors::load::{Client, Response};
use generation_retry_t::actors::tcp::{BlackHole, Session, HOLE, NEW, OLD};
use generation_retry_t::memcheck::patience;
use generation_retry_t::nginx::gdb::{worker_pids, Breakpoint};
use generation_retry_t::nginx::{free_port, Config, Fix, Nginx};
use generation_retry_t::scenarios::http::{
    patched_rescue_line, status_object, wait_peers, Lab, Spec,
};
use generation_retry_t::scenarios::stream::NAME as STREAM_NAME;
use generation_retry_t::scoring::errorlog::NO_LIVE;
use generation_retry_t::scoring::metrics::{log, Counter, NoLiveCause, Protocol, StatusExt};
use generation_retry_t::scoring::streamlog::parse_stream_log;
use generation_retry_t::shared::{status_server, UPSTREAM};
use tokio::task::JoinHandle;

/// nginx's line when a peer reaches `max_fails`.
const DISABLED: &str = "upstream server temporarily disabled";

/// A GET of `path` whose first attempt the backend holds at an address
/// `want` accepts: paths `{prefix}{i}` until one is (a hashing balancer
/// sends each path to one peer); the others are released and answered.
async fn held_at(
    lab: &Lab,
    prefix: &str,
    want: impl Fn(Ipv4Addr) -> bool,
) -> (String, Held, JoinHandle<Response>) {
    for i in 0..32 {
        let hold = lab.backend.arm_hold_any();
        let path = format!("{prefix}{i}");
        let request = {
            let (client, path) = (lab.client.clone(), path.clone());
            tokio::spawn(async move { client.get(&path).await })
        };
        let held = hold
            .caught(patience(Duration::from_secs(10)))
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", lab.nginx.error_log()));
        if want(held.addr) {
            return (path, held, request);
        }
        held.close();
        let _ = request.await;
    }
    panic!("no request under {prefix} was held at the address wanted");
}

/// `r` is answered `status` by the backend at `ip` (which answers with
/// its address).
fn assert_answered(r: &Response, status: u16, ip: Ipv4Addr, log: &str) {
    assert_eq!(
        (r.status(), r.body.as_str()),
        (status, format!("{ip}\n").as_str()),
        "{r:?}\n{log}"
    );
}

/// Defect A: the tries a request keeps on a fresh state. The name holds
/// {X, Y, Z}, so the request has 3 tries; its first attempt fails at X (2
/// left); Z leaves the list and the request re-snapshots onto {X, Y}, where
/// only Y is untried: 1 try. Y answers 503, which
/// `proxy_next_upstream http_503` retries only while tries are left, so
/// nginx passes Y's 503 on, as it does on a list of two whose first peer
/// failed. With the tries it had (2), the request retried the 503 into a
/// list whose every peer it had tried: `no live upstreams`, 502.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_list_that_lost_a_peer_passes_the_last_peers_503_on() {
    lost_a_peer(Fix::Module).await;
}

/// The patched nginx's tries after a re-snapshot, capped as the module's.
///
/// Non-regression guard: the patched nginx, without the module.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn patched_a_list_that_lost_a_peer_passes_the_last_peers_503_on() {
    if Fix::Patched.available() {
        lost_a_peer(Fix::Patched).await;
    }
}

async fn lost_a_peer(fix: Fix) {
    let spec = Spec {
        servers: "server app.test:${BPORT} resolve;".into(),
        location_extra: "proxy_next_upstream error http_503;".into(),
        ..Spec::two_peers(fix.flavor(), "", fix.on())
    };
    let lab = Lab::start_spec(spec).await;
    let all = [ADDR_A, ADDR_B, ADDR_C];
    lab.point(&all).await;
    let (path, held, request) = held_at(&lab, &format!("{UNAVAILABLE_PATH}race/"), |_| true).await;
    let x = held.addr;
    let others: Vec<Ipv4Addr> = all.into_iter().filter(|a| *a != x).collect();
    let y = others[0];
    lab.point(&[x, y]).await;
    held.close();
    let r = request.await.expect("client task");

    let log = lab.nginx.error_log();
    assert_answered(&r, 503, y, &log);
    assert_eq!(lab.backend.reached(&path), [x, y], "{log}");
    if fix == Fix::Module {
        let s = lab.status(UPSTREAM).await;
        assert_eq!(s.count(Counter::Rescued), 1, "{s}");
        assert_eq!(s.count(NoLiveCause::Unavailable.counter()), 0, "{s}");
    } else {
        let lines = lab.request_errors(&path);
        let rescue = patched_rescue_line(UPSTREAM);
        assert_eq!(
            lines.iter().filter(|l| l.contains(&rescue)).count(),
            1,
            "{lines:#?}"
        );
        // This request's lines: a readiness probe may meet the name's
        // empty list before its first answer.
        assert!(!lines.iter().any(|l| l.contains(NO_LIVE)), "{lines:#?}");
    }
    lab.finish();
}

/// Defect A in stream, where a session's retry follows a failed connect
/// and ends, without `no live upstreams`, when its tries run out. The
/// black hole (`weight=100`, so the first session's first choice) holds
/// the session's connect; the name `tcp.test` at a port where nothing
/// listens holds {OLD, NEW}: 3 tries. NEW leaves the list; the black hole
/// closes (refused, 2 tries left), and the session re-snapshots onto
/// {hole, OLD}, where only OLD is untried: 1 try. OLD refuses too and the
/// session ends there, as nginx ends one on a list of two whose peers both
/// refused. With the tries it had, it asked for a third peer and met
/// `no live upstreams`, counted as `cause="unavailable"`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stream_list_that_lost_a_peer_ends_the_session_when_its_tries_do() {
    stream_lost_a_peer(Fix::Module).await;
}

/// The patched nginx's session tries after a re-snapshot, capped as the
/// module's. Without the module's status page, nginx's application of
/// each answer is waited for as the DNS server's reply and one round trip
/// through the worker.
///
/// Non-regression guard: the patched nginx, without the module.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn patched_a_stream_list_that_lost_a_peer_ends_the_session_when_its_tries_do() {
    if Fix::Patched.available() {
        stream_lost_a_peer(Fix::Patched).await;
    }
}

/// Points `tcp.test` at `ips`; returns once nginx's one worker applied it:
/// with the module, its peer gauge says `peers`; without, the answer was
/// sent after `since` and a request went through the worker.
async fn stream_point(fix: Fix, dns: &DnsServer, http: &Client, ips: &[Ipv4Addr], peers: u64) {
    let since = Instant::now();
    let answer = Answer::A(ips.to_vec());
    dns.set(STREAM_NAME, answer.clone());
    if fix == Fix::Module {
        wait_peers(http, "stream", UPSTREAM, peers).await;
        return;
    }
    dns.wait_answered(
        STREAM_NAME,
        &answer,
        since,
        patience(Duration::from_secs(10)),
    )
    .await
    .unwrap();
    let _ = http.get("/status").await;
}

async fn stream_lost_a_peer(fix: Fix) {
    let dns = DnsServer::start().await;
    let mut hole = BlackHole::start().await;
    let port = free_port();
    let stream = format!(
        "    upstream {UPSTREAM} {{\n        zone {UPSTREAM} 64k;\n        \
         resolver ${{DNS}} valid=1s ipv6=off;\n        \
         server {HOLE}:${{APORT}} weight=100;\n        \
         server {STREAM_NAME}:1 resolve;\n        {}\n    }}\n    \
         server {{\n        listen 127.0.0.1:{port};\n        proxy_pass {UPSTREAM};\n        \
         proxy_connect_timeout 20s;\n    }}\n",
        fix.on()
    );
    let module = fix == Fix::Module;
    let config = Config::new(fix.flavor(), status_server(module))
        .stream(stream)
        .var("DNS", dns.addr())
        .var("APORT", hole.port());
    let nginx = Nginx::start(&config);
    let http = Client::new(nginx.url(""));
    stream_point(fix, &dns, &http, &[OLD, NEW], 3).await;

    // The first session's first choice is the black hole; its connect
    // hangs there until the hole closes. One round trip through nginx's
    // one worker after the session connected: the worker has accepted it,
    // and so taken its state at the list of three, before the change.
    let session = Session::open((Ipv4Addr::LOCALHOST, port).into(), b"data".to_vec()).await;
    let before = if module {
        Some(
            status_object(&http, "stream", Some(UPSTREAM))
                .await
                .unwrap(),
        )
    } else {
        let _ = http.get("/status").await;
        None
    };
    stream_point(fix, &dns, &http, &[OLD], 2).await;
    hole.close();
    let reply = session.reply(patience(Duration::from_secs(15))).await;

    let log = nginx.error_log();
    assert!(
        matches!(&reply, Ok(r) if r.bytes.is_empty()),
        "{reply:?}\n{log}"
    );
    let entry = parse_stream_log(&nginx.stream_log())
        .into_iter()
        .find(|e| e.server_port == port)
        .unwrap_or_else(|| panic!("no stream log line\n{log}"));
    assert_eq!(
        entry.upstream_addr,
        format!("{HOLE}:{}, {OLD}:1", hole.port()),
        "{log}"
    );
    assert!(!log.contains(NO_LIVE), "{log}");
    if let Some(before) = before {
        let s = status_object(&http, "stream", Some(UPSTREAM))
            .await
            .unwrap();
        // This session's rescue, whatever the points before counted.
        assert_eq!(
            s.count(Counter::Rescued),
            before.count(Counter::Rescued) + 1,
            "before {before}, after {s}"
        );
        assert_eq!(s.count(NoLiveCause::Unavailable.counter()), 0, "{s}");
    } else {
        let rescue = patched_rescue_line(UPSTREAM);
        assert_eq!(log.matches(&rescue).count(), 1, "{log}");
    }
    nginx.finish();
}

/// The static peer C, with `max_fails`, and the name; `hash` keeps every
/// path on one peer, so the fresh state's first choice for the held
/// request's path is C again.
fn hashed(fix: Fix, max_fails: u32) -> Spec {
    Spec {
        servers: format!(
            "server 127.0.0.4:${{BPORT}} max_fails={max_fails} fail_timeout=60s;\n        \
             server app.test:${{BPORT}} resolve max_fails=0;"
        ),
        ..Spec::two_peers(fix.flavor(), "hash $request_uri;", fix.on())
    }
}

/// Defect C: a peer handed back unused is not failed again. C has
/// `max_fails=2`; the request fails at C once (its one real failure), the
/// name moves, and the fresh state offers C first: handed back as failed,
/// C was disabled for `fail_timeout` after one failure ("temporarily
/// disabled", and the next request for the path went elsewhere). Handed
/// back as an attempt never made, C keeps one failure and serves on.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_peer_handed_back_unused_is_not_failed_twice() {
    handed_back_once(Fix::Module).await;
}

/// The patched nginx hands C back as passed over (`NGX_PEER_NEXT`), not
/// as failed.
///
/// Non-regression guard: the patched nginx, without the module.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn patched_a_peer_handed_back_unused_is_not_failed_twice() {
    if Fix::Patched.available() {
        handed_back_once(Fix::Patched).await;
    }
}

async fn handed_back_once(fix: Fix) {
    let lab = Lab::start_spec(hashed(fix, 2)).await;
    let (path, held, request) = held_at(&lab, "/twice/", |a| a == ADDR_C).await;
    lab.point(&[ADDR_B]).await;
    held.close();
    let r = request.await.expect("client task");
    let log = lab.nginx.error_log();
    // Answered by B, not C again: C was handed back.
    assert_answered(&r, 200, ADDR_B, &log);
    if fix == Fix::Module {
        let s = lab.status(UPSTREAM).await;
        assert_eq!(s.count(Counter::Excluded), 1, "C was handed back: {s}");
    }
    assert!(!log.contains(DISABLED), "one failure disabled C:\n{log}");
    // Within fail_timeout, C (one failure of two) still takes its path.
    let again = lab.client.get(&path).await;
    assert_eq!(again.body, format!("{ADDR_C}\n"), "{again:?}\n{log}");
    lab.finish();
}

/// Defect D: after a hand-back, an error from the fresh selection leaves
/// no freed peer's name for nginx's log handler. The fresh state offers C
/// (tried), which is handed back; gdb makes the next selection fail as an
/// allocation failure would. The module's error line, like the `no live
/// upstreams` one, names the upstream block in its `upstream:` field, not
/// the peer handed back (whose name may be freed by another worker's
/// re-resolve once the peer is unreferenced).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_error_after_a_hand_back_logs_no_handed_back_peer() {
    let lab = Lab::start_spec(hashed(Fix::Module, 0)).await;
    let worker = worker_pids(&lab.nginx, 1).await[0];
    let (path, held, request) = held_at(&lab, "/name/", |a| a == ADDR_C).await;
    lab.point(&[ADDR_B]).await;
    // The retry's selection (refused: the generation moved), the fresh
    // state's first (C, handed back), then the one that fails.
    let bp = Breakpoint::attach(worker, "ngx_http_upstream_get_hash_peer", 2)
        .await
        .unwrap();
    held.close();
    let stopped = bp.hit(patience(Duration::from_secs(20))).await.unwrap();
    stopped.release_returning(-1).await.unwrap();
    let r = request.await.expect("client task");

    let log = lab.nginx.error_log();
    assert_eq!(r.status(), 500, "{log}");
    let s = lab.status(UPSTREAM).await;
    assert_eq!(s.count(Counter::Excluded), 1, "C was handed back: {s}");
    let line = log::errored(Protocol::Http, UPSTREAM, Fault::FreshSelectError);
    let errored: Vec<&str> = log.lines().filter(|l| l.contains(&line)).collect();
    assert_eq!(errored.len(), 1, "{log}");
    let named = format!("upstream: \"http://{UPSTREAM}{path}\"");
    assert!(errored[0].contains(&named), "not {named}: {}", errored[0]);
    lab.finish();
}

/// Defect D in the patched nginx, which logs no line of its own at the
/// error: nginx answers 500, and the request's error page, a file that
/// does not exist, logs its `open()` line through the same log handler,
/// whose `upstream:` field must name the upstream block, not C. The core
/// re-snapshots before selecting, so the fresh state's first selection
/// (C, handed back) is the first call gdb lets pass.
///
/// Non-regression guard: the patched nginx, without the module.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn patched_an_error_after_a_hand_back_logs_no_handed_back_peer() {
    if !Fix::Patched.available() {
        return;
    }
    let spec = Spec {
        location_extra: "error_page 500 /after-error;".into(),
        ..hashed(Fix::Patched, 0)
    };
    let missing = "location = /after-error { root /nonexistent; }".to_string();
    let lab = Lab::start_spec_with(spec, &[("SERVER_EXTRA", missing)]).await;
    let worker = worker_pids(&lab.nginx, 1).await[0];
    let (path, held, request) = held_at(&lab, "/name/", |a| a == ADDR_C).await;
    lab.point(&[ADDR_B]).await;
    let bp = Breakpoint::attach(worker, "ngx_http_upstream_get_hash_peer", 1)
        .await
        .unwrap();
    held.close();
    let stopped = bp.hit(patience(Duration::from_secs(20))).await.unwrap();
    stopped.release_returning(-1).await.unwrap();
    let r = request.await.expect("client task");

    let log = lab.nginx.error_log();
    assert_ne!(r.status(), 200, "{log}");
    let opened: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("/nonexistent/after-error"))
        .collect();
    assert_eq!(opened.len(), 1, "{log}");
    let named = format!("upstream: \"http://{UPSTREAM}{path}\"");
    assert!(opened[0].contains(&named), "not {named}: {}", opened[0]);
    assert_eq!(lab.backend.reached(&path), [ADDR_C], "{log}");
    lab.finish();
}
