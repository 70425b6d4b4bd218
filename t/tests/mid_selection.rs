//! Tests that stop an nginx worker in the middle of a peer selection with
//! gdb ([`generation_retry_t::gdb`]), to reach what timing cannot.
//!
//! `max=N`: the list keeps moving while a request re-snapshots. With two
//! workers, worker 0 re-resolves the name (nginx gives every `resolve`
//! server to worker 0) while worker 1 serves the race; gdb stops worker 1
//! at the selection on its fresh snapshot, the DNS flips again, worker 0
//! applies it, and worker 1 goes on to find its fresh snapshot already
//! old. With `max=1` that is the end (502, `failed`, cause `generation`,
//! the "still moving" line); with `max=2` the same sequence is rescued by
//! a second re-snapshot. Real nginx, real resolver, no timing: the window
//! nginx leaves open for microseconds is held open by the breakpoint.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use generation_retry_core::rescue::{Failure, Fault};
use generation_retry_t::accesslog::{Entry, Hop};
use generation_retry_t::backend::{Backend, ADDR_A, ADDR_B};
use generation_retry_t::dns::{Answer, DnsServer};
use generation_retry_t::gdb::{worker_pids, Breakpoint};
use generation_retry_t::load::{Client, Connection, Response};
use generation_retry_t::memcheck::patience;
use generation_retry_t::metrics::{log, Counter, NoLiveCause, Protocol, StatusExt};
use generation_retry_t::nginx::{Config, Flavor, Nginx};
use generation_retry_t::scenario::{Lab, Spec, NAME};
use generation_retry_t::shared::{KEEPALIVE_LOCATION, UPSTREAM};

/// One re-resolving peer with keepalive, two workers, each with its own
/// listening socket (`reuseport`), and the worker's pid on every answer.
const TEMPLATE: &str = r#"
    upstream ${UPSTREAM} {
        zone ${UPSTREAM} 128k;
        resolver ${DNS} valid=1s ipv6=off;
        resolver_timeout 3s;
        server app.test:${BPORT} resolve;
        keepalive 16;
        generation_retry_resnapshot on max=${MAX};
    }
    server {
        listen 127.0.0.1:${PORT} reuseport;
        add_header X-Worker $pid always;
        location / {
            proxy_pass http://${UPSTREAM};
            ${KEEPALIVE}
        }
        location = /status {
            generation_retry_status;
        }
    }
"#;

/// The round-robin selection every balancer here ends in.
const SELECT: &str = "ngx_http_upstream_get_round_robin_peer";

struct Run {
    nginx: Nginx,
    dns: DnsServer,
    backend: Backend,
    /// A connection served by worker 0 (which re-resolves), and one served
    /// by worker 1.
    on_0: Connection,
    /// Lent to the race while it runs.
    on_1: Option<Connection>,
}

/// The two workers' pids, in nginx's order (worker 0 first).
async fn workers(nginx: &Nginx) -> [libc::pid_t; 2] {
    let pids = worker_pids(nginx, 2).await;
    [pids[0], pids[1]]
}

/// Until a request under `prefix` is answered 200: the name resolved
/// (until then the list is empty: 502).
async fn ready(nginx: &Nginx, prefix: &str) {
    let any = Client::new(nginx.url(""));
    let deadline = Instant::now() + patience(Duration::from_secs(10));
    for k in 0.. {
        if any.get(&format!("{prefix}{k}")).await.status() == 200 {
            return;
        }
        assert!(Instant::now() < deadline, "{}", nginx.error_log());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Which worker answered.
fn worker(r: &Response) -> libc::pid_t {
    r.headers["x-worker"].to_str().unwrap().parse().unwrap()
}

/// New connections until one lands on each worker (the kernel spreads
/// connections over the `reuseport` sockets by their addresses).
async fn pinned(nginx: &Nginx, workers: [libc::pid_t; 2]) -> (Connection, Connection) {
    let (mut on_0, mut on_1) = (None, None);
    for k in 0..200 {
        let mut c = Connection::open(nginx.addr()).await.unwrap();
        let r = c.get(&format!("/pin/{k}")).await.unwrap();
        assert_eq!(r.status(), 200, "{r:?}");
        let pid = worker(&r);
        if pid == workers[0] {
            on_0 = on_0.or(Some(c));
        } else if pid == workers[1] {
            on_1 = on_1.or(Some(c));
        } else {
            panic!("answered by {pid}, not one of the workers {workers:?}");
        }
        if let (Some(_), Some(_)) = (&on_0, &on_1) {
            return (on_0.take().unwrap(), on_1.take().unwrap());
        }
    }
    panic!("200 connections and not one on each worker");
}

/// The module's JSON status object of `upstream be`.
async fn status(c: &mut Connection) -> serde_json::Value {
    let r = c.get("/status?format=json").await.unwrap();
    assert_eq!(r.status(), 200, "{r:?}");
    let v: serde_json::Value = serde_json::from_str(&r.body).unwrap();
    v["upstreams"]
        .as_array()
        .and_then(|a| a.iter().find(|u| u["upstream"] == UPSTREAM))
        .cloned()
        .unwrap_or_else(|| panic!("no upstream {UPSTREAM}: {}", r.body))
}

/// Points the name at `ip` and waits until nginx asked and was told.
async fn point(dns: &DnsServer, ip: Ipv4Addr) {
    answer(dns, Answer::A(vec![ip])).await;
}

/// Sets the name's answer and waits until nginx was given it.
async fn answer(dns: &DnsServer, answer: Answer) {
    let since = Instant::now();
    dns.set(NAME, answer.clone());
    dns.wait_answered(NAME, &answer, since, patience(Duration::from_secs(10)))
        .await
        .unwrap();
}

/// Where gdb holds worker 1 in a function.
enum Stop {
    /// As it is called.
    AtEntry,
    /// As it returns, in its caller.
    AtReturn,
}

/// [`TEMPLATE`] with `max=` and http lines `before` it, against `dns`
/// and the backend's port.
fn run_config(dns: &DnsServer, bport: u16, max: u32, before: &str) -> Config {
    Config::new(Flavor::with_module(), format!("{before}{TEMPLATE}"))
        .workers(2)
        .var("DNS", dns.addr())
        .var("BPORT", bport)
        .var("MAX", max)
        .var("KEEPALIVE", KEEPALIVE_LOCATION)
}

impl Run {
    async fn start(max: u32) -> Run {
        let dns = DnsServer::start().await;
        dns.set_a(NAME, ADDR_A);
        let backend = Backend::start().await;
        let config = run_config(&dns, backend.port(), max, "");
        Run::start_with(dns, backend, &config).await
    }

    /// Two workers serving `config`, the name resolved, a connection
    /// pinned to each.
    async fn start_with(dns: DnsServer, backend: Backend, config: &Config) -> Run {
        let nginx = Nginx::start(config);
        let pids = workers(&nginx).await;
        ready(&nginx, "/ready/").await;
        let (on_0, on_1) = pinned(&nginx, pids).await;
        Run {
            nginx,
            dns,
            backend,
            on_0,
            on_1: Some(on_1),
        }
    }

    async fn generation(&mut self) -> u64 {
        status(&mut self.on_0).await["generation"].as_u64().unwrap()
    }

    /// Points the name at `ip` and waits, through worker 0 (which goes on
    /// serving while worker 1 is stopped), until worker 0 asked, was told,
    /// and applied it: the shared list's generation moved past `from`.
    /// Returns the new generation.
    async fn flip(&mut self, ip: Ipv4Addr, from: u64) -> u64 {
        self.flip_to(Answer::A(vec![ip]), from).await
    }

    /// As [`Run::flip`], to any answer.
    async fn flip_to(&mut self, to: Answer, from: u64) -> u64 {
        answer(&self.dns, to.clone()).await;
        let deadline = Instant::now() + patience(Duration::from_secs(10));
        loop {
            let g = self.generation().await;
            if g > from {
                return g;
            }
            assert!(
                Instant::now() < deadline,
                "the list never moved past generation {from} to {to:?}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Worker 1 serves a new request for `path` and is held at its next
    /// call of `function` (where `stop` says) while worker 0 applies a DNS
    /// change to ADDR_B; released, the request must be answered 200 by
    /// ADDR_B, by worker 1.
    async fn first_request_across_a_change(&mut self, function: &str, stop: Stop, path: &str) {
        let workers = workers(&self.nginx).await;
        let g0 = self.generation().await;
        let bp = Breakpoint::attach(workers[1], function, 0).await.unwrap();
        let mut on_1 = self.on_1.take().unwrap();
        let path_owned = path.to_string();
        let request = tokio::spawn(async move {
            let r = on_1.get(&path_owned).await;
            (on_1, r)
        });
        let mut stopped = bp.hit(patience(Duration::from_secs(20))).await.unwrap();
        if let Stop::AtReturn = stop {
            stopped = stopped.finish().await.unwrap();
        }
        self.flip(ADDR_B, g0).await;
        stopped.release().await.unwrap();
        let (on_1, r) = request.await.unwrap();
        self.on_1 = Some(on_1);
        let r = r.unwrap();
        assert_eq!(worker(&r), workers[1]);
        assert_eq!(
            (r.status(), r.body.as_str()),
            (200, &*format!("{ADDR_B}\n")),
            "{path}"
        );
    }

    /// The race of `Lab::race_once`, served by worker 1, with the list
    /// moving again (back to ADDR_A) while worker 1 is stopped at its
    /// selection on its first fresh snapshot.
    async fn race_while_moving(&mut self) -> (Response, Entry) {
        let workers = workers(&self.nginx).await;
        let g0 = self.generation().await;
        // Worker 1 caches a connection to ADDR_A; its next request there
        // (the race) is held.
        let warm = self.on_1.as_mut().unwrap().get("/warm").await.unwrap();
        assert_eq!(warm.body, format!("{ADDR_A}\n"), "{warm:?}");
        assert_eq!(worker(&warm), workers[1]);
        let hold = self.backend.arm_hold();
        let mut on_1 = self.on_1.take().unwrap();
        let request = tokio::spawn(async move {
            let r = on_1.get("/race").await;
            (on_1, r)
        });
        let held = hold
            .caught(patience(Duration::from_secs(10)))
            .await
            .unwrap();
        assert_eq!((held.addr, held.path.as_str()), (ADDR_A, "/race"));
        let g1 = self.flip(ADDR_B, g0).await;

        // Worker 1's retry: its selection is refused (generation g0, the
        // list's g1), the module re-snapshots and selects again: that
        // second call stops.
        let bp = Breakpoint::attach(workers[1], SELECT, 1).await.unwrap();
        held.close();
        let stopped = bp.hit(patience(Duration::from_secs(20))).await.unwrap();
        // Meanwhile worker 0 applies another change.
        self.flip(ADDR_A, g1).await;
        stopped.release().await.unwrap();

        let (on_1, r) = request.await.unwrap();
        self.on_1 = Some(on_1);
        let r = r.unwrap();
        assert_eq!(worker(&r), workers[1]);
        let deadline = Instant::now() + patience(Duration::from_secs(5));
        let entry = loop {
            if let Some(e) = self.nginx.access_entry("/race") {
                break e;
            }
            assert!(Instant::now() < deadline, "no access log line for /race");
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        (r, entry)
    }
}

/// `max=1`: the one re-snapshot allowed found the list moved again, so the
/// selection fails as `generation`, counted as failed, with its line.
/// `max=2`, the control: the same sequence, and the second re-snapshot (on
/// the list as worker 0 left it) is rescued. One test, run in turn: each
/// stops a worker under gdb.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn max_is_how_many_times_a_moving_list_is_followed() {
    let mut run = Run::start(1).await;
    let (r, entry) = run.race_while_moving().await;
    let hops = entry.upstream_addr();
    assert_eq!(r.status(), 502, "max=1: {hops}");
    assert_eq!(entry.hops.len(), 2, "max=1: {hops}");
    assert!(matches!(entry.hops[1], Hop::Group(_)), "max=1: {hops}");
    assert_eq!(entry.resnapshots, Some(1), "max=1: {hops}");
    let s = status(&mut run.on_0).await;
    assert_eq!(s.count(Counter::BusyRetry), 1, "{s}");
    assert_eq!(s.count(Counter::Resnapshots), 1, "{s}");
    assert_eq!(s.count(Counter::Rescued), 0, "{s}");
    assert_eq!(s.count(Counter::Failed), 1, "{s}");
    assert_eq!(s.count(Counter::NoLiveGeneration), 1, "{s}");
    let line = log::no_live(
        Protocol::Http,
        UPSTREAM,
        NoLiveCause::Generation,
        Failure::StillMoving { max: 1 },
    );
    let log = run.nginx.error_log();
    assert!(log.contains(&line), "no {line:?} in:\n{log}");
    run.nginx.finish();

    let mut run = Run::start(2).await;
    let (r, entry) = run.race_while_moving().await;
    let hops = entry.upstream_addr();
    assert_eq!(r.status(), 200, "max=2: {hops}");
    assert_eq!(r.body, format!("{ADDR_A}\n"), "max=2: {hops}");
    assert_eq!(entry.resnapshots, Some(2), "max=2: {hops}");
    assert_eq!(
        entry.hops.last(),
        Some(&Hop::Addr((ADDR_A, run.backend.port()).into())),
        "max=2: {hops}"
    );
    let s = status(&mut run.on_0).await;
    assert_eq!(s.count(Counter::BusyRetry), 1, "{s}");
    assert_eq!(s.count(Counter::Resnapshots), 2, "{s}");
    assert_eq!(s.count(Counter::Rescued), 1, "{s}");
    assert_eq!(s.count(Counter::Failed), 0, "{s}");
    run.nginx.finish();
}

/// The upstream's own `peer.init` (under keepalive's).
const INIT: &str = "ngx_http_upstream_init_round_robin_peer";

/// The race of `Lab::race_once` on one worker, with gdb making the
/// `skip`+1-th call of `function` after the flip return `NGX_ERROR`, as an
/// allocation failure inside it would. Returns the response's status and
/// the status object afterwards.
async fn race_with_fault(
    function: &str,
    skip: u32,
) -> (u16, serde_json::Value, serde_json::Value, Lab) {
    let lab = Lab::start_spec(Spec::single_peer(
        Flavor::with_module(),
        "",
        "generation_retry_resnapshot on;",
    ))
    .await;
    let worker = worker_pids(&lab.nginx, 1).await[0];
    lab.wait_proxying_to(ADDR_A, "/warm").await;
    // Readiness probes may have met the list empty before it resolved.
    let before = lab.status(UPSTREAM).await;
    let hold = lab.backend.arm_hold();
    let request = {
        let c = lab.client.clone();
        tokio::spawn(async move { c.get("/race").await })
    };
    let held = hold
        .caught(patience(Duration::from_secs(10)))
        .await
        .unwrap();
    assert_eq!((held.addr, held.path.as_str()), (ADDR_A, "/race"));
    point(&lab.dns, ADDR_B).await;
    lab.wait_proxying_to(ADDR_B, "/probe").await;

    // From here the worker runs nothing but the race's retry.
    let bp = Breakpoint::attach(worker, function, skip).await.unwrap();
    held.close();
    let stopped = bp.hit(patience(Duration::from_secs(20))).await.unwrap();
    stopped.release_returning(-1).await.unwrap();
    let r = request.await.unwrap();
    let s = lab.status(UPSTREAM).await;
    (r.status(), before, s, lab)
}

/// The checks both faults share: answered as nginx answers the balancer's
/// own error (500, and no `no live upstreams`), counted as failed and by
/// nothing else, with the module's line naming the fault.
fn assert_errored(
    status: u16,
    before: &serde_json::Value,
    s: &serde_json::Value,
    lab: &Lab,
    fault: Fault,
) {
    assert_eq!(status, 500, "{fault:?}: {s}");
    assert_eq!(s.count(Counter::BusyRetry), 1, "{s}");
    assert_eq!(s.count(Counter::Resnapshots), 1, "{s}");
    assert_eq!(s.count(Counter::Rescued), 0, "{s}");
    assert_eq!(s.count(Counter::Failed), 1, "busy = rescued + failed: {s}");
    for cause in NoLiveCause::ALL {
        let counter = cause.counter();
        assert_eq!(s.count(counter), before.count(counter), "{cause:?}: {s}");
    }
    let log = lab.nginx.error_log();
    let line = log::errored(Protocol::Http, UPSTREAM, fault);
    assert!(log.contains(&line), "no {line:?} in:\n{log}");
    let race: Vec<&str> = log.lines().filter(|l| l.contains("/race")).collect();
    assert!(
        !race.iter().any(|l| l.contains("no live upstreams")),
        "{race:#?}"
    );
}

/// The balancer's `peer.init` fails when the module calls it again for the
/// re-snapshot: the request is answered as nginx answers a failed
/// `peer.init` (500), not as `no live upstreams`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failed_reinit_is_answered_as_nginx_answers_a_failed_init() {
    let (status, before, s, lab) = race_with_fault(INIT, 0).await;
    assert_errored(status, &before, &s, &lab, Fault::ReinitFailed);
    lab.finish();
}

/// The selection on the fresh snapshot returns an error (not a peer, not a
/// refusal): passed through as nginx would (500), and counted as failed, so
/// busy = rescued + failed still holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_error_from_the_fresh_selection_is_passed_through_and_counted() {
    let (status, before, s, lab) = race_with_fault(SELECT, 1).await;
    assert_errored(status, &before, &s, &lab, Fault::FreshSelectError);
    lab.finish();
}

/// The change at a request's first selection (the 1-hop shape, which stock
/// answers `502` with `$upstream_addr` "be"): worker 1 is stopped inside
/// its first round-robin selection, before round-robin compares the
/// generation; worker 0 applies a DNS change meanwhile; released, the
/// selection is refused, the module re-snapshots and the request is
/// answered by the new address in one hop, counted as a first-selection
/// busy, a re-snapshot and a rescue.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_change_at_the_first_selection_is_rescued_and_counted_as_first() {
    let mut run = Run::start(1).await;
    run.first_request_across_a_change(SELECT, Stop::AtEntry, "/first")
        .await;
    let entry = run.nginx.access_entries("/first", 1).await.remove(0);
    assert_eq!(
        entry.hops,
        [Hop::Addr((ADDR_B, run.backend.port()).into())],
        "{}",
        entry.upstream_addr()
    );
    assert_eq!(entry.resnapshots, Some(1));
    let s = status(&mut run.on_0).await;
    assert_eq!(s.count(Counter::BusyFirst), 1, "{s}");
    assert_eq!(s.count(Counter::BusyRetry), 0, "{s}");
    assert_eq!(s.count(Counter::Resnapshots), 1, "{s}");
    assert_eq!(s.count(Counter::Rescued), 1, "{s}");
    assert_eq!(s.count(Counter::Failed), 0, "{s}");
    let rescue = log::rescued_marker(Protocol::Http, UPSTREAM);
    let log = run.nginx.error_log();
    assert_eq!(log.matches(&rescue).count(), 1, "{log}");
    run.nginx.finish();
}

/// A change that lands while the balancer's `peer.init` runs leaves the
/// generation of its state unknown (read before the init: the old one;
/// after: the new one; round-robin's own read: either). The module reads
/// both and runs the init again when they differ, so the state and the
/// request agree on the generation (issue 41, defect E).
///
/// Here worker 1 is stopped as round-robin's `peer.init` returns (its
/// state taken at the old generation) while worker 0 applies a DNS change:
/// the init runs again, at the new generation, and the first selection is
/// not refused: 200 from the new address, nothing counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_change_during_the_balancers_init_is_absorbed() {
    let mut run = Run::start(1).await;
    run.first_request_across_a_change(INIT, Stop::AtReturn, "/init")
        .await;
    let s = status(&mut run.on_0).await;
    for c in [Counter::BusyFirst, Counter::Resnapshots, Counter::Rescued] {
        assert_eq!(s.count(c), 0, "{c:?}: {s}");
    }
    assert_eq!(s.count(Counter::NoLiveUnavailable), 0, "{s}");
    run.nginx.finish();
}

/// The other side of the same window: worker 1 is stopped as
/// round-robin's `peer.init` is called (the module has read the old
/// generation), and worker 0 empties the list (NXDOMAIN), so the init
/// takes its state at the new generation, of an empty list. The first
/// selection is refused by the list itself: `cause="empty"`, never a
/// generation-busy abort nor a re-snapshot, which the module counted when
/// it kept the generation it read before the init.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refusal_after_a_change_during_the_init_is_the_lists_own() {
    let mut run = Run::start(1).await;
    let workers = workers(&run.nginx).await;
    let g0 = run.generation().await;
    let before = status(&mut run.on_0).await;
    let bp = Breakpoint::attach(workers[1], INIT, 0).await.unwrap();
    let mut on_1 = run.on_1.take().unwrap();
    let request = tokio::spawn(async move { on_1.get("/inside").await });
    let stopped = bp.hit(patience(Duration::from_secs(20))).await.unwrap();
    run.flip_to(Answer::NxDomain, g0).await;
    stopped.release().await.unwrap();
    let r = request.await.unwrap().unwrap();
    assert_eq!((r.status(), worker(&r)), (502, workers[1]), "{r:?}");
    let s = status(&mut run.on_0).await;
    for c in [Counter::BusyFirst, Counter::Resnapshots, Counter::Failed] {
        assert_eq!(s.count(c), before.count(c), "{c:?}: {s}");
    }
    let empty = NoLiveCause::Empty.counter();
    assert_eq!(s.count(empty), before.count(empty) + 1, "{s}");
    run.nginx.finish();
}

/// An upstream of the first configuration only, whose counters a later
/// reload must free (issue 28: a fault during a rescue).
const GONE: &str = r#"
    upstream gone {
        zone gone 64k;
        server 127.0.0.1:1;
        generation_retry_resnapshot on;
    }
"#;

/// A worker killed (SIGKILL) while gdb holds it inside a rescue: refused,
/// re-snapshotted, stopped at its selection on the fresh snapshot. The
/// in-flight request fails as nginx fails any request whose worker dies
/// (the connection closes with no answer), the master starts a new worker
/// in its place, and:
/// - the counters hold no half of the killed rescue (the tally is added
///   after the selection it was killed in: busy, rescued and failed all
///   0, so busy = rescued + failed);
/// - the new worker rescues the next race (busy 1, rescued 1);
/// - it recorded itself in the zone's worker table, taking the dead
///   worker's entry: no reload finds a live child unrecorded
///   (`zone_workers_unknown`), and the dead worker's record holds nothing
///   back: the third reload frees `gone`'s counters, which only the
///   first configuration had.
///
/// The one test whose log is expected to hold an `[alert]`: nginx's
/// `worker process PID exited on signal 9` for the worker it killed, and
/// no other fatal line.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worker_killed_inside_a_rescue_is_replaced_and_counting_goes_on() {
    let dns = DnsServer::start().await;
    dns.set_a(NAME, ADDR_A);
    let backend = Backend::start().await;
    let bport = backend.port();
    let first = run_config(&dns, bport, 2, GONE);
    let mut run = Run::start_with(dns, backend, &first).await;
    let [w0, w1] = workers(&run.nginx).await;

    // The race on worker 1, stopped inside its rescue.
    let g0 = run.generation().await;
    let warm = run.on_1.as_mut().unwrap().get("/warm").await.unwrap();
    assert_eq!(
        (warm.body.as_str(), worker(&warm)),
        (&*format!("{ADDR_A}\n"), w1)
    );
    let hold = run.backend.arm_hold();
    let mut on_1 = run.on_1.take().unwrap();
    let request = tokio::spawn(async move { on_1.get("/race").await });
    let held = hold
        .caught(patience(Duration::from_secs(10)))
        .await
        .unwrap();
    let g1 = run.flip(ADDR_B, g0).await;
    let bp = Breakpoint::attach(w1, SELECT, 1).await.unwrap();
    held.close();
    let stopped = bp.hit(patience(Duration::from_secs(20))).await.unwrap();
    // SAFETY: kill(2) with plain integers: the worker this test stopped.
    assert_eq!(unsafe { libc::kill(w1, libc::SIGKILL) }, 0);
    drop(stopped);
    let answered = request.await.unwrap();
    assert!(
        answered.is_err(),
        "the killed worker's request was answered: {answered:?}"
    );

    // The master's new worker 1.
    let pids = worker_pids(&run.nginx, 3).await;
    let w2 = pids[2];
    assert!(!pids[..2].contains(&w2), "{pids:?}");
    let log = run.nginx.error_log();
    assert!(
        log.contains(&format!("worker process {w1} exited on signal 9")),
        "{log}"
    );
    let s = status(&mut run.on_0).await;
    for c in [
        Counter::BusyFirst,
        Counter::BusyRetry,
        Counter::Rescued,
        Counter::Failed,
    ] {
        assert_eq!(s.count(c), 0, "{c:?} after the killed rescue: {s}");
    }

    // The new worker rescues the next race.
    let (on_0, on_2) = pinned(&run.nginx, [w0, w2]).await;
    run.on_0 = on_0;
    let mut on_2 = on_2;
    let warm = on_2.get("/warm/2").await.unwrap();
    assert_eq!(
        (warm.body.as_str(), worker(&warm)),
        (&*format!("{ADDR_B}\n"), w2)
    );
    let hold = run.backend.arm_hold();
    let request = tokio::spawn(async move { on_2.get("/race/2").await });
    let held = hold
        .caught(patience(Duration::from_secs(10)))
        .await
        .unwrap();
    assert_eq!(held.addr, ADDR_B);
    run.flip(ADDR_A, g1).await;
    held.close();
    let r = request.await.unwrap().unwrap();
    assert_eq!(
        (r.status(), r.body.as_str(), worker(&r)),
        (200, &*format!("{ADDR_A}\n"), w2)
    );
    let s = status(&mut run.on_0).await;
    assert_eq!(s.count(Counter::BusyRetry), 1, "{s}");
    assert_eq!(s.count(Counter::Rescued), 1, "{s}");
    assert_eq!(s.count(Counter::Failed), 0, "{s}");

    // Reloads: the first while the new worker runs (it must be in the
    // table), the third frees `gone`.
    drop(run.on_0);
    for _ in 0..3 {
        run.nginx.reconfigure(&run_config(&run.dns, bport, 2, ""));
    }
    let log = run.nginx.error_log();
    let line = log::zone_workers_unknown("generation_retry", 1, 1);
    let unknown = line
        .split("1 processes ")
        .nth(1)
        .and_then(|r| r.split(" (the table").next())
        .expect("the unrecorded-workers line's wording");
    assert!(
        !log.contains(unknown),
        "a live worker was unrecorded:\n{log}"
    );
    let freed = generation_retry_t::errorlog::zone_freed(&log);
    // One line per setup of the zone: the start, then each reload.
    assert!(
        freed.len() >= 4
            && freed.last() == Some(&1)
            && freed[..freed.len() - 1].iter().all(|&f| f == 0),
        "freed per setup {freed:?}: gone's counters must be freed at the third reload, no sooner"
    );
    run.nginx
        .finish_expecting(&[&format!("worker process {w1} exited on signal 9")]);
}

/// Two upstreams on one moving name, one worker; `${NEWCOMER}` and
/// `${NEW_LOCATION}` are empty at the start and filled at the reload.
const FULL_TEMPLATE: &str = r#"
    upstream ${UPSTREAM} {
        zone ${UPSTREAM} 128k;
        resolver ${DNS} valid=1s ipv6=off;
        resolver_timeout 3s;
        server app.test:${BPORT} resolve;
        keepalive 16;
        generation_retry_resnapshot on;
    }
    ${NEWCOMER}
    server {
        listen 127.0.0.1:${PORT};
        location /be/ {
            proxy_pass http://${UPSTREAM};
            ${KEEPALIVE}
        }
        ${NEW_LOCATION}
        location = /status {
            generation_retry_status;
        }
    }
"#;

/// The race of `Lab::race_once` through `prefix` (a location of one
/// upstream on the name): a cached connection to `from`, the request held
/// there, the name moved to `to` and applied, the held attempt closed.
async fn race_through(
    nginx: &Nginx,
    backend: &Backend,
    dns: &DnsServer,
    prefix: &str,
    (from, to): (Ipv4Addr, Ipv4Addr),
) -> Response {
    let client = Client::new(nginx.url(""));
    let warm = client.get(&format!("{prefix}warm")).await;
    assert_eq!(warm.body, format!("{from}\n"), "{prefix}: {warm:?}");
    let hold = backend.arm_hold();
    let request = {
        let c = client.clone();
        let path = format!("{prefix}race");
        tokio::spawn(async move { c.get(&path).await })
    };
    let held = hold
        .caught(patience(Duration::from_secs(10)))
        .await
        .unwrap();
    assert_eq!(held.addr, from, "{prefix}");
    point(dns, to).await;
    // Applied: a new connection's request reaches `to`.
    let probe = Client::without_keepalive(nginx.url(""));
    let deadline = Instant::now() + patience(Duration::from_secs(10));
    for k in 0.. {
        if probe.get(&format!("{prefix}probe/{k}")).await.body == format!("{to}\n") {
            break;
        }
        assert!(Instant::now() < deadline, "{prefix}: {to} never applied");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    held.close();
    request.await.unwrap()
}

/// The zone with no room for a new upstream's counters, forced at a
/// reload under gdb: the master's allocation of that upstream's counters
/// (`ngx_slab_calloc` of more than the upstream zone's own 8 bytes)
/// returns NULL, as in a full zone. The reload goes on; nginx says so at
/// `warn`, once, naming the upstream and what frees room; the new
/// upstream's race is still rescued, though not counted (no status
/// object); the upstream that had counters keeps counting; nothing
/// crashes, nothing at `alert`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_full_zone_at_a_reload_still_rescues_and_says_so() {
    let dns = DnsServer::start().await;
    dns.set_a(NAME, ADDR_A);
    let backend = Backend::start().await;
    let config = |newcomer: bool| {
        let (upstream, location) = if newcomer {
            (
                format!(
                    "upstream newcomer {{ zone newcomer 128k; resolver {} valid=1s ipv6=off; \
                     server app.test:{} resolve; keepalive 16; \
                     generation_retry_resnapshot on; }}",
                    dns.addr(),
                    backend.port()
                ),
                format!("location /new/ {{ proxy_pass http://newcomer; {KEEPALIVE_LOCATION} }}"),
            )
        } else {
            (String::new(), String::new())
        };
        Config::new(Flavor::with_module(), FULL_TEMPLATE)
            .var("DNS", dns.addr())
            .var("BPORT", backend.port())
            .var("KEEPALIVE", KEEPALIVE_LOCATION)
            .var("NEWCOMER", upstream)
            .var("NEW_LOCATION", location)
    };
    let nginx = Nginx::start(&config(false));
    ready(&nginx, "/be/ready/").await;

    // The reload, with the master's allocation of newcomer's counters
    // failing.
    let bp = Breakpoint::attach(nginx.pid(), "ngx_slab_calloc if size > 64", 0)
        .await
        .unwrap();
    let gdb = tokio::spawn(async move {
        let stopped = bp.hit(patience(Duration::from_secs(20))).await?;
        stopped.release_returning(0).await
    });
    nginx.reconfigure(&config(true));
    gdb.await.unwrap().unwrap();

    let full = log::zone_full("generation_retry", 0, 0, Protocol::Http, "newcomer");
    let said = full
        .split("; ")
        .nth(1)
        .expect("the full-zone line's wording")
        .to_owned();
    let log = nginx.error_log();
    let lines: Vec<&str> = log.lines().filter(|l| l.contains(&said)).collect();
    assert_eq!(lines.len(), 1, "{said:?} once:\n{log}");
    assert!(lines[0].contains("[warn]"), "{}", lines[0]);

    let r = race_through(&nginx, &backend, &dns, "/new/", (ADDR_A, ADDR_B)).await;
    assert_eq!(
        (r.status(), r.body.as_str()),
        (200, &*format!("{ADDR_B}\n"))
    );
    let log = nginx.error_log();
    assert!(
        log.contains(&log::rescued_marker(Protocol::Http, "newcomer")),
        "newcomer's race was not rescued:\n{log}"
    );
    let r = race_through(&nginx, &backend, &dns, "/be/", (ADDR_B, ADDR_A)).await;
    assert_eq!(
        (r.status(), r.body.as_str()),
        (200, &*format!("{ADDR_A}\n"))
    );

    let client = Client::new(nginx.url(""));
    let page = client.get("/status?format=json").await;
    let v: serde_json::Value = serde_json::from_str(&page.body).unwrap();
    let names: Vec<&str> = v["upstreams"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|u| u["upstream"].as_str())
        .collect();
    assert_eq!(names, [UPSTREAM], "{}", page.body);
    let be = &v["upstreams"][0];
    assert_eq!(be.count(Counter::Rescued), 1, "{be}");
    assert_eq!(be.count(Counter::Failed), 0, "{be}");
    drop(client);
    nginx.finish();
}
