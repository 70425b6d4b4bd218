//! The lab: the seed's A/B experiment on loopback. Each arm runs nginx under
//! the same open-loop load and the same faults (a DNS answer that swaps at
//! every re-resolve, keepalive reclaim at the backend), one arm after
//! another, and is summarised from what the clients, the access log, the
//! error log, the backend and (with the module) the status endpoint saw.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{json, Value};

use crate::accesslog::{tally, Entry, Shape};
use crate::backend::{Backend, ADDR_A, ADDR_B};
use crate::dns::{Answer, DnsServer};
use crate::errorlog;
use crate::load::{open_loop, Client, Sent};
use crate::nginx::{Config, Flavor, Nginx};
use crate::scenario::{status_object, PROXY_HTTP, SINGLE_PEER_SERVERS};

/// One configuration under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arm {
    /// Stock nginx 1.28.0, the seed's configuration.
    Stock,
    /// Stock with `max_fails=0` (the seed: no effect).
    StockMaxFails0,
    /// Stock with a `backup` server (the seed: no effect, busy skips backup).
    StockBackup,
    /// Stock with the seed's `error_page 502 = @retry_once` workaround.
    StockRetryOnce,
    /// The module, `off`: observe only.
    ModuleOff,
    /// The module, `on`.
    ModuleOn,
    /// nginx with the core patch, no module.
    Patched,
    /// Control: DNS alternation alone, no reclaim.
    AlternationOnly,
    /// Control: reclaim alone, fixed address.
    ReclaimOnly,
    /// Sibling family: the name briefly answers two records (max_fails
    /// wipe-out), module on to show the cause.
    TwoRecords,
    /// Sibling family: NXDOMAIN empties the list, module on.
    NxDomain,
    /// Stream (TCP), stock: sessions through an upstream whose primary is
    /// a dead peer (connects time out) and whose backup re-resolves.
    StreamStock,
    /// Stream, the module `on`.
    StreamModuleOn,
    /// Stream, the patched nginx.
    StreamPatched,
}

impl Arm {
    pub const ALL: &'static [Arm] = &[
        Arm::Stock,
        Arm::StockMaxFails0,
        Arm::StockBackup,
        Arm::StockRetryOnce,
        Arm::ModuleOff,
        Arm::ModuleOn,
        Arm::Patched,
        Arm::AlternationOnly,
        Arm::ReclaimOnly,
        Arm::TwoRecords,
        Arm::NxDomain,
        Arm::StreamStock,
        Arm::StreamModuleOn,
        Arm::StreamPatched,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Arm::Stock => "stock",
            Arm::StockMaxFails0 => "stock+max_fails=0",
            Arm::StockBackup => "stock+backup",
            Arm::StockRetryOnce => "stock+@retry_once",
            Arm::ModuleOff => "module-off",
            Arm::ModuleOn => "module-on",
            Arm::Patched => "patched",
            Arm::AlternationOnly => "control:alternation-only",
            Arm::ReclaimOnly => "control:reclaim-only",
            Arm::TwoRecords => "sibling:two-records",
            Arm::NxDomain => "sibling:nxdomain",
            Arm::StreamStock => "stream:stock",
            Arm::StreamModuleOn => "stream:module-on",
            Arm::StreamPatched => "stream:patched",
        }
    }

    pub fn parse(name: &str) -> Option<Arm> {
        Arm::ALL.iter().copied().find(|a| a.name() == name)
    }

    fn flavor(self) -> Flavor {
        match self {
            Arm::ModuleOff
            | Arm::ModuleOn
            | Arm::TwoRecords
            | Arm::NxDomain
            | Arm::StreamModuleOn => Flavor::with_module(),
            Arm::Patched | Arm::StreamPatched => Flavor::patched(),
            _ => Flavor::stock(),
        }
    }

    /// Whether the arm needs the patched nginx.
    pub fn patched(self) -> bool {
        matches!(self, Arm::Patched | Arm::StreamPatched)
    }

    fn stream(self) -> bool {
        matches!(
            self,
            Arm::StreamStock | Arm::StreamModuleOn | Arm::StreamPatched
        )
    }

    fn swaps(self) -> bool {
        self != Arm::ReclaimOnly
    }

    fn reclaims(self) -> bool {
        self != Arm::AlternationOnly
    }

    fn dns_schedule(self) -> Answer {
        match self {
            Arm::ReclaimOnly => Answer::A(vec![ADDR_A]),
            Arm::TwoRecords => Answer::Cycle(vec![
                Answer::A(vec![ADDR_A]),
                Answer::A(vec![ADDR_A, ADDR_B]),
                Answer::A(vec![ADDR_B]),
                Answer::A(vec![ADDR_B, ADDR_A]),
            ]),
            Arm::NxDomain => Answer::Cycle(vec![
                Answer::A(vec![ADDR_A]),
                Answer::A(vec![ADDR_B]),
                Answer::NxDomain,
            ]),
            _ => Answer::rotate(&[ADDR_A, ADDR_B]),
        }
    }

    /// (upstream lines, location lines, extra server-level lines)
    fn config(self) -> (String, String, String) {
        let servers = SINGLE_PEER_SERVERS.to_string();
        let keepalive = "proxy_http_version 1.1; proxy_set_header Connection \"\";";
        match self {
            Arm::StockMaxFails0 => (
                servers.replace("resolve;", "resolve max_fails=0;"),
                keepalive.into(),
                String::new(),
            ),
            Arm::StockBackup => (
                format!("{servers}\n        server 127.0.0.4:${{BPORT}} backup;"),
                keepalive.into(),
                String::new(),
            ),
            Arm::StockRetryOnce => (
                servers,
                format!("{keepalive} error_page 502 = @retry_once;"),
                format!(
                    "location @retry_once {{\n            \
                     if ($request_method !~ ^(GET|HEAD|OPTIONS)$) {{ return 502; }}\n            \
                     proxy_pass http://be; {keepalive}\n        }}"
                ),
            ),
            Arm::ModuleOff => (
                format!("{servers}\n        generation_retry_resnapshot off;"),
                keepalive.into(),
                String::new(),
            ),
            Arm::ModuleOn | Arm::TwoRecords | Arm::NxDomain => (
                format!("{servers}\n        generation_retry_resnapshot on;"),
                keepalive.into(),
                String::new(),
            ),
            _ => (servers, keepalive.into(), String::new()),
        }
    }
}

/// The knobs of a lab run.
#[derive(Clone, Debug)]
pub struct Options {
    /// Requests per second, open loop.
    pub rate: f64,
    /// Load duration per arm.
    pub duration: Duration,
    /// nginx's `resolver ... valid=`, seconds (a swap every valid+1 s).
    pub valid: u32,
    /// Probability that the backend closes a reused connection instead of
    /// answering.
    pub reclaim: f64,
    /// A reclaimed request fails after a delay drawn in [0, this]: how long
    /// it was in flight.
    pub reclaim_delay: Duration,
    /// Share of requests that are POSTs.
    pub post_share: f64,
    pub seed: u64,
    /// Reload nginx (SIGHUP) this often while the load runs.
    pub reload_every: Option<Duration>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            rate: 300.0,
            duration: Duration::from_secs(30),
            valid: 1,
            reclaim: 0.05,
            reclaim_delay: Duration::from_millis(300),
            post_share: 0.05,
            seed: 1656,
            reload_every: None,
        }
    }
}

/// What one arm measured.
#[derive(Clone, Debug, Default)]
pub struct ArmResult {
    pub arm: String,
    pub requests: usize,
    pub status_502: usize,
    pub two_hop_502: usize,
    pub one_hop_502: usize,
    pub other_errors: usize,
    pub first_attempt_failures: usize,
    /// Configuration reloads nginx carried out (error.log `reconfiguring`).
    pub reloads: usize,
    pub swaps: usize,
    /// Milliseconds from the last swap to each no-live 502.
    pub ms_after_swap: Vec<f64>,
    pub rescued: Option<u64>,
    /// Rescues logged in error.log (one `warn` line each, by every worker
    /// of every configuration): with counters that survive reloads, equal
    /// to `rescued`.
    pub rescued_logged: usize,
    pub busy: Option<u64>,
    /// no_live by cause (generation, unavailable, empty), module arms.
    pub no_live: Option<[u64; 3]>,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub post_sent: usize,
    pub post_delivered: usize,
    pub post_delivered_twice: usize,
    /// Seconds from the arm's start: swaps, and no-live 502s.
    pub swap_times: Vec<f64>,
    pub failure_times: Vec<f64>,
}

impl ArmResult {
    pub fn to_json(&self) -> Value {
        let (min, max) = min_max(&self.ms_after_swap);
        json!({
            "arm": self.arm,
            "requests": self.requests,
            "status_502": self.status_502,
            "two_hop_502": self.two_hop_502,
            "one_hop_502": self.one_hop_502,
            "other_errors": self.other_errors,
            "first_attempt_failures": self.first_attempt_failures,
            "swaps": self.swaps,
            "ms_after_swap_min": min,
            "ms_after_swap_max": max,
            "rescued": self.rescued,
            "busy": self.busy,
            "no_live_generation": self.no_live.map(|n| n[0]),
            "no_live_unavailable": self.no_live.map(|n| n[1]),
            "no_live_empty": self.no_live.map(|n| n[2]),
            "p50_ms": round2(self.p50_ms),
            "p99_ms": round2(self.p99_ms),
            "post_sent": self.post_sent,
            "post_delivered": self.post_delivered,
            "post_delivered_twice": self.post_delivered_twice,
            "swap_times_s": self.swap_times.iter().map(|t| round2(*t)).collect::<Vec<_>>(),
            "failure_times_s": self.failure_times.iter().map(|t| round2(*t)).collect::<Vec<_>>(),
        })
    }
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

fn min_max(v: &[f64]) -> (Option<f64>, Option<f64>) {
    let min = v.iter().copied().reduce(f64::min).map(round2);
    let max = v.iter().copied().reduce(f64::max).map(round2);
    (min, max)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

/// Runs one arm. `progress(fraction)` is called while the load runs.
pub async fn run_arm(
    arm: Arm,
    opts: &Options,
    progress: impl Fn(f64) + Send + Sync + 'static,
) -> ArmResult {
    if arm.stream() {
        return run_stream_arm(arm, opts, progress).await;
    }
    let dns = DnsServer::start().await;
    dns.set_a("app.test", ADDR_A);
    let backend = Backend::start().await;
    let flavor = arm.flavor();
    let module = flavor.module.is_some();
    let (servers, location, server_extra) = arm.config();
    let http = PROXY_HTTP.replace("valid=1s", &format!("valid={}s", opts.valid));
    let config = Config::new(flavor, http)
        .var("SERVER_EXTRA", server_extra)
        .var("DNS", dns.addr())
        .var("BPORT", backend.port())
        .var("SERVERS", servers)
        .var("UPSTREAM_PRE", "")
        .var("UPSTREAM_EXTRA", "")
        .var("HTTP_EXTRA", "")
        .var("LOCATION_EXTRA", location)
        .var("SCHEME", "http")
        .var(
            "STATUS",
            if module {
                "generation_retry_status;"
            } else {
                "return 404;"
            },
        );
    let nginx = Nginx::start(&config);
    let client = Client::new(nginx.url(""));
    wait_ready(&client).await;

    if arm.swaps() {
        dns.set("app.test", arm.dns_schedule());
    }
    if arm.reclaims() {
        backend.set_reclaim_after(opts.reclaim, opts.seed, opts.reclaim_delay);
    }

    let start_wall = epoch_now();
    let post_every = if opts.post_share > 0.0 {
        (1.0 / opts.post_share).round().max(1.0) as u64
    } else {
        u64::MAX
    };
    let ticker = ticker(opts.duration, progress);
    let reloads = opts.reload_every.map(|every| {
        let pid = nginx.pid();
        tokio::spawn(async move {
            let mut n = 0u32;
            loop {
                tokio::time::sleep(every).await;
                crate::nginx::kill(pid, libc::SIGHUP);
                n += 1;
                if n > 10_000 {
                    break;
                }
            }
        })
    });
    let sent = open_loop(&client, opts.rate, opts.duration, move |i| {
        if i % post_every == post_every - 1 {
            (
                Method::POST,
                format!("/lab/post/{i}"),
                Some(b"order=1".to_vec()),
            )
        } else {
            (Method::GET, format!("/lab/get/{i}"), None)
        }
    })
    .await;
    ticker.abort();
    if let Some(r) = reloads {
        r.abort();
    }

    let status = if module {
        status_object(&client, "http", None).await.ok()
    } else {
        None
    };
    // Let nginx write the last log lines, then stop it.
    // The access log entries of the load, once every sent request is logged.
    let entries: Vec<Entry> = nginx.access_entries("/lab/", sent.len()).await;
    let error_log = nginx.error_log();
    let swaps = dns.swaps("app.test");
    nginx.finish();

    summarise(
        arm,
        &sent,
        &entries,
        &error_log,
        &swaps,
        start_wall,
        status.as_ref(),
        &backend,
    )
}

/// Reports the share of `duration` elapsed, every 250 ms.
fn ticker(
    duration: Duration,
    progress: impl Fn(f64) + Send + Sync + 'static,
) -> tokio::task::JoinHandle<()> {
    let started = Instant::now();
    tokio::spawn(async move {
        loop {
            let f = started.elapsed().as_secs_f64() / duration.as_secs_f64();
            progress(f.min(1.0));
            if f >= 1.0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    })
}

/// The stream arms: TCP sessions at `opts.rate` through an upstream whose
/// primaries are four dead peers (black holes on 127.0.0.2: connects time
/// out after 2 s, then the session retries) and whose backup `tcp.test`
/// swaps between 127.0.0.3 and 127.0.0.4 at every re-resolve. After a
/// failure nginx sends one session per `fail_timeout=1s` to probe each dead
/// peer; a session fails when its retry meets a changed generation. No
/// POSTs and no reclaim: the fault is the dead peers.
async fn run_stream_arm(
    arm: Arm,
    opts: &Options,
    progress: impl Fn(f64) + Send + Sync + 'static,
) -> ArmResult {
    use crate::stream::{parse_stream_log, BlackHole, EchoBackend, Session, NAME, NEW, OLD};

    let dns = DnsServer::start().await;
    dns.set_a(NAME, OLD);
    let backend = EchoBackend::start().await;
    let mut holes = Vec::new();
    for _ in 0..4 {
        holes.push(BlackHole::start().await);
    }
    let primaries: String = holes
        .iter()
        .map(|h| format!("server 127.0.0.2:{} fail_timeout=1s;\n        ", h.port()))
        .collect();
    let flavor = arm.flavor();
    let module = flavor.module.is_some();
    let sport = crate::nginx::free_port();
    let top = if module {
        "generation_retry_resnapshot on;"
    } else {
        ""
    };
    let stream = format!(
        "    {top}\n    upstream be {{\n        zone be 64k;\n        \
         resolver ${{DNS}} valid={}s ipv6=off;\n        {primaries}\
         server {NAME}:{} resolve backup;\n    }}\n    \
         server {{\n        listen 127.0.0.1:{sport};\n        proxy_pass be;\n        \
         proxy_connect_timeout 2s;\n        proxy_half_close on;\n    }}\n",
        opts.valid,
        backend.port()
    );
    let status = if module {
        "generation_retry_status;"
    } else {
        "return 404;"
    };
    let http =
        format!("server {{ listen 127.0.0.1:${{PORT}}; location = /status {{ {status} }} }}");
    let config = Config::new(flavor, http)
        .stream(stream)
        .var("DNS", dns.addr());
    let nginx = Nginx::start(&config);
    let client = Client::new(nginx.url(""));
    let addr = std::net::SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, sport));
    // Ready: the backup resolved and reachable (a session answered by it;
    // the first one may wait out the dead primary's timeout).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let s = Session::open(addr, b"ready".to_vec()).await;
        let r = s.reply(Duration::from_secs(12)).await;
        if r.as_ref()
            .is_ok_and(|r| r.split() == Some((OLD, &b"ready"[..])))
        {
            break;
        }
        assert!(Instant::now() < deadline, "stream never ready: {r:?}");
    }
    dns.set(NAME, Answer::rotate(&[OLD, NEW]));

    let start_wall = epoch_now();
    let ticker = ticker(opts.duration, progress);
    let n = (opts.rate * opts.duration.as_secs_f64()).round() as u64;
    let started = tokio::time::Instant::now();
    let mut sessions = Vec::with_capacity(n as usize);
    for i in 0..n {
        tokio::time::sleep_until(started + Duration::from_secs_f64(i as f64 / opts.rate)).await;
        sessions.push(tokio::spawn(async move {
            let payload = format!("session {i}\n").into_bytes();
            let t0 = Instant::now();
            let s = Session::open(addr, payload.clone()).await;
            let reply = s.reply(Duration::from_secs(10)).await;
            let ok = reply
                .as_ref()
                .is_ok_and(|r| r.split().is_some_and(|(_, echoed)| echoed == &payload[..]));
            (ok, t0.elapsed())
        }));
    }
    let mut outcomes = Vec::with_capacity(sessions.len());
    for s in sessions {
        outcomes.push(s.await.expect("session task"));
    }
    ticker.abort();

    let status = if module {
        status_object(&client, "stream", None).await.ok()
    } else {
        None
    };
    // Every session is logged when it closes; give the last ones a moment.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut entries = parse_stream_log(&nginx.stream_log());
    while entries.len() < outcomes.len() + 1 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
        entries = parse_stream_log(&nginx.stream_log());
    }
    let entries: Vec<_> = entries
        .into_iter()
        .filter(|e| e.msec >= start_wall)
        .collect();
    let error_log = nginx.error_log();
    let swaps = dns.swaps(NAME);
    nginx.finish();

    let one_hop = |e: &&crate::stream::StreamEntry| e.status == 502 && e.upstream_addr == "be";
    let two_hop =
        |e: &&crate::stream::StreamEntry| e.status == 502 && e.upstream_addr.ends_with(", be");
    let failed: Vec<f64> = entries
        .iter()
        .filter(|e| one_hop(e) || two_hop(e))
        .map(|e| e.msec)
        .collect();
    let mut latencies: Vec<f64> = outcomes
        .iter()
        .map(|(_, d)| d.as_secs_f64() * 1000.0)
        .collect();
    latencies.sort_by(f64::total_cmp);
    let two_hop_502 = entries.iter().filter(two_hop).count();
    let one_hop_502 = entries.iter().filter(one_hop).count();
    let not_ok = outcomes.iter().filter(|(ok, _)| !ok).count();
    let (rescued, busy, no_live) = module_counts(status.as_ref());
    ArmResult {
        arm: arm.name().into(),
        requests: outcomes.len(),
        status_502: entries.iter().filter(|e| e.status == 502).count(),
        two_hop_502,
        one_hop_502,
        other_errors: not_ok.saturating_sub(two_hop_502 + one_hop_502),
        first_attempt_failures: errorlog::lines(&error_log)
            .iter()
            .filter(|l| l.level == "error" && errorlog::is_upstream_attempt_failure(l.message))
            .count(),
        reloads: 0,
        swaps: swaps.len(),
        ms_after_swap: failed
            .iter()
            .filter_map(|t| {
                let last = swaps.iter().copied().filter(|s| s <= t).reduce(f64::max)?;
                Some((t - last) * 1000.0)
            })
            .collect(),
        rescued,
        rescued_logged: rescue_lines(&error_log),
        busy,
        no_live,
        p50_ms: percentile(&latencies, 0.50),
        p99_ms: percentile(&latencies, 0.99),
        post_sent: 0,
        post_delivered: 0,
        post_delivered_twice: 0,
        swap_times: swaps
            .iter()
            .map(|s| s - start_wall)
            .filter(|s| *s >= 0.0)
            .collect(),
        failure_times: failed.iter().map(|t| t - start_wall).collect(),
    }
}

/// The module's rescue lines in `error_log`.
fn rescue_lines(error_log: &str) -> usize {
    error_log
        .lines()
        .filter(|l| l.contains("[warn]") && l.contains("peer list changed (generation"))
        .count()
}

/// rescued, busy (first + retry) and no_live (generation, unavailable,
/// empty) from the module's status object of the upstream.
fn module_counts(status: Option<&Value>) -> (Option<u64>, Option<u64>, Option<[u64; 3]>) {
    let get = |v: &Value, k: &str| v[k].as_u64();
    let Some(s) = status else {
        return (None, None, None);
    };
    let n = &s["no_live"];
    (
        get(s, "rescued"),
        get(&s["busy"], "first")
            .zip(get(&s["busy"], "retry"))
            .map(|(a, b)| a + b),
        (|| {
            Some([
                get(n, "generation")?,
                get(n, "unavailable")?,
                get(n, "empty")?,
            ])
        })(),
    )
}

fn epoch_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Readiness: a request answered 200 (the name resolved).
async fn wait_ready(client: &Client) {
    let deadline = Instant::now() + Duration::from_secs(10);
    for k in 0.. {
        if client.get(&format!("/ready/{k}")).await.status() == 200 {
            return;
        }
        assert!(Instant::now() < deadline, "nginx never became ready");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[allow(clippy::too_many_arguments)]
fn summarise(
    arm: Arm,
    sent: &[Sent],
    entries: &[Entry],
    error_log: &str,
    swaps: &[f64],
    start_wall: f64,
    status: Option<&Value>,
    backend: &Backend,
) -> ArmResult {
    let t = tally(entries);
    let mut latencies: Vec<f64> = sent
        .iter()
        .map(|s| s.response.latency.as_secs_f64() * 1000.0)
        .collect();
    latencies.sort_by(f64::total_cmp);

    let no_live: Vec<&Entry> = entries
        .iter()
        .filter(|e| e.status == 502 && e.shape() != Shape::Other)
        .collect();
    let ms_after_swap = no_live
        .iter()
        .filter_map(|e| {
            // $msec is when the request finished; the selection was just before.
            let last = swaps
                .iter()
                .copied()
                .filter(|s| *s <= e.msec)
                .reduce(f64::max)?;
            Some((e.msec - last) * 1000.0)
        })
        .collect();
    let first_attempt_failures = errorlog::lines(error_log)
        .iter()
        .filter(|l| l.level == "error" && errorlog::is_upstream_attempt_failure(l.message))
        .count();

    let post_sent = sent.iter().filter(|s| s.method == Method::POST).count();
    let answered_posts = backend.answered_by_path("POST");
    let post_delivered = sent
        .iter()
        .filter(|s| s.method == Method::POST)
        .map(|s| answered_posts.get(&s.path).copied().unwrap_or(0))
        .sum();
    let (rescued, busy, no_live_counts) = module_counts(status);
    ArmResult {
        arm: arm.name().into(),
        requests: sent.len(),
        status_502: sent.iter().filter(|s| s.response.status() == 502).count(),
        two_hop_502: t.two_hop_502,
        one_hop_502: t.one_hop_502,
        other_errors: sent
            .iter()
            .filter(|s| s.response.status() != 200)
            .count()
            .saturating_sub(t.two_hop_502 + t.one_hop_502),
        first_attempt_failures,
        reloads: error_log.matches("reconfiguring").count(),
        swaps: swaps.len(),
        ms_after_swap,
        rescued,
        rescued_logged: rescue_lines(error_log),
        busy,
        no_live: no_live_counts,
        p50_ms: percentile(&latencies, 0.50),
        p99_ms: percentile(&latencies, 0.99),
        post_sent,
        post_delivered,
        post_delivered_twice: answered_posts.values().filter(|n| **n > 1).count(),
        swap_times: swaps
            .iter()
            .map(|s| s - start_wall)
            .filter(|s| *s >= 0.0)
            .collect(),
        failure_times: no_live.iter().map(|e| e.msec - start_wall).collect(),
    }
}

/// The table printed at the end of a run.
pub fn render_table(results: &[ArmResult]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<26} {:>8} {:>6} {:>6} {:>6} {:>6} {:>8} {:>6} {:>13} {:>8} {:>6} {:>12} {:>8} {:>8} {:>9}",
        "arm", "requests", "502", "2-hop", "1-hop", "other", "1st-fail", "swaps",
        "ms after swap", "rescued", "busy", "no-live g/u/e", "p50 ms", "p99 ms", "POST d/s"
    );
    for r in results {
        let (min, max) = min_max(&r.ms_after_swap);
        let after = match (min, max) {
            (Some(a), Some(b)) => format!("{a:.0}-{b:.0}"),
            _ => "-".into(),
        };
        let opt = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
        let _ = writeln!(
            out,
            "{:<26} {:>8} {:>6} {:>6} {:>6} {:>6} {:>8} {:>6} {:>13} {:>8} {:>6} {:>12} {:>8.1} {:>8.1} {:>9}",
            r.arm,
            r.requests,
            r.status_502,
            r.two_hop_502,
            r.one_hop_502,
            r.other_errors,
            r.first_attempt_failures,
            r.swaps,
            after,
            opt(r.rescued),
            opt(r.busy),
            r.no_live
                .map_or("-".to_string(), |n| format!("{}/{}/{}", n[0], n[1], n[2])),
            r.p50_ms,
            r.p99_ms,
            format!("{}/{}", r.post_delivered, r.post_sent),
        );
    }
    out
}

pub fn render_csv(results: &[ArmResult]) -> String {
    let cols = [
        "arm",
        "requests",
        "status_502",
        "two_hop_502",
        "one_hop_502",
        "other_errors",
        "first_attempt_failures",
        "swaps",
        "ms_after_swap_min",
        "ms_after_swap_max",
        "rescued",
        "busy",
        "no_live_generation",
        "no_live_unavailable",
        "no_live_empty",
        "p50_ms",
        "p99_ms",
        "post_sent",
        "post_delivered",
        "post_delivered_twice",
    ];
    let mut out = cols.join(",") + "\n";
    for r in results {
        let v = r.to_json();
        let row: Vec<String> = cols
            .iter()
            .map(|c| match &v[*c] {
                Value::Null => String::new(),
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect();
        out.push_str(&row.join(","));
        out.push('\n');
    }
    out
}

/// An SVG with, per arm, a histogram of no-live 502s by time since the last
/// swap (100 ms bins) and a timeline of swaps (ticks) and 502s (dots).
pub fn render_svg(results: &[ArmResult], duration: Duration) -> String {
    let row_h = 70.0;
    let (hist_x, hist_w) = (200.0, 300.0);
    let (tl_x, tl_w) = (580.0, 560.0);
    let height = 60.0 + row_h * results.len() as f64;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"1160\" height=\"{height}\" \
         font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{hist_x}\" y=\"20\">no-live 502s by ms after the last swap</text>\n\
         <text x=\"{hist_x}\" y=\"34\" font-size=\"10\">0-2000 ms, 100 ms bins, each row to its own scale</text>\n\
         <text x=\"{tl_x}\" y=\"20\">timeline: swaps (grey) and no-live 502s (red), 0-{}s</text>\n",
        duration.as_secs()
    );
    let bins = 20usize;
    for (i, r) in results.iter().enumerate() {
        let peak = histogram(&r.ms_after_swap, bins)
            .into_iter()
            .max()
            .unwrap_or(0);
        let max_bin = peak.max(1);
        let y0 = 40.0 + row_h * i as f64;
        let base = y0 + row_h - 15.0;
        let _ = writeln!(
            s,
            "<text x=\"10\" y=\"{}\">{} ({} no-live)</text>",
            y0 + 30.0,
            r.arm,
            r.failure_times.len()
        );
        let _ = writeln!(
            s,
            "<text x=\"{}\" y=\"{}\" font-size=\"10\">max {peak}/bin</text>",
            hist_x + hist_w + 4.0,
            y0 + 20.0
        );
        let _ = writeln!(
            s,
            "<line x1=\"{hist_x}\" y1=\"{base}\" x2=\"{}\" y2=\"{base}\" stroke=\"black\"/>",
            hist_x + hist_w
        );
        let bw = hist_w / bins as f64;
        for (b, n) in histogram(&r.ms_after_swap, bins).into_iter().enumerate() {
            if n == 0 {
                continue;
            }
            let h = (row_h - 25.0) * n as f64 / max_bin as f64;
            let _ = writeln!(
                s,
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{h:.1}\" fill=\"steelblue\"><title>{}-{} ms: {n}</title></rect>",
                hist_x + bw * b as f64,
                base - h,
                bw - 1.0,
                b * 100,
                (b + 1) * 100
            );
        }
        let _ = writeln!(
            s,
            "<line x1=\"{tl_x}\" y1=\"{base}\" x2=\"{}\" y2=\"{base}\" stroke=\"black\"/>",
            tl_x + tl_w
        );
        let secs = duration.as_secs_f64().max(1.0);
        for t in &r.swap_times {
            let x = tl_x + tl_w * (t / secs).min(1.0);
            let _ = writeln!(
                s,
                "<line x1=\"{x:.1}\" y1=\"{}\" x2=\"{x:.1}\" y2=\"{base}\" stroke=\"#bbb\"/>",
                y0 + 10.0
            );
        }
        for t in &r.failure_times {
            let x = tl_x + tl_w * (t / secs).clamp(0.0, 1.0);
            let _ = writeln!(
                s,
                "<circle cx=\"{x:.1}\" cy=\"{}\" r=\"3\" fill=\"crimson\"/>",
                base - 12.0
            );
        }
    }
    s.push_str("</svg>\n");
    s
}

fn histogram(ms: &[f64], bins: usize) -> Vec<usize> {
    let mut h = vec![0; bins];
    for m in ms {
        let b = (*m / 100.0).floor();
        if b >= 0.0 && (b as usize) < bins {
            h[b as usize] += 1;
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(arm: &str, ms: &[f64]) -> ArmResult {
        ArmResult {
            arm: arm.into(),
            requests: 100,
            status_502: ms.len(),
            two_hop_502: ms.len(),
            ms_after_swap: ms.to_vec(),
            rescued: Some(3),
            swap_times: vec![1.0, 3.0],
            failure_times: vec![1.1],
            ..ArmResult::default()
        }
    }

    #[test]
    fn arms_round_trip_by_name() {
        for a in Arm::ALL {
            assert_eq!(Arm::parse(a.name()), Some(*a));
        }
        assert_eq!(Arm::parse("nope"), None);
    }

    #[test]
    fn json_csv_table_and_svg_carry_the_numbers() {
        let rs = [result("stock", &[12.0, 486.0]), result("module-on", &[])];
        let j = rs[0].to_json();
        assert_eq!(j["two_hop_502"], 2);
        assert_eq!(j["ms_after_swap_min"], 12.0);
        assert_eq!(j["ms_after_swap_max"], 486.0);
        assert_eq!(rs[1].to_json()["ms_after_swap_min"], Value::Null);
        let csv = render_csv(&rs);
        assert_eq!(csv.lines().count(), 3);
        assert!(csv.lines().nth(1).unwrap().starts_with("stock,100,2,2,"));
        let table = render_table(&rs);
        assert!(table.contains("12-486"));
        let svg = render_svg(&rs, Duration::from_secs(10));
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("fill=\"steelblue\"").count(), 2);
        assert_eq!(histogram(&[0.0, 99.9, 100.0, 5000.0], 20)[..2], [2, 1]);
    }

    #[test]
    fn percentiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), 51.0);
        assert_eq!(percentile(&v, 0.99), 99.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
    }
}
