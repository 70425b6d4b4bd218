//! One nginx with many upstreams failing in every way at once, the way an
//! operator's logs look: the scenario `generation-retry-diagnose` is scored
//! on (`t/tests/diagnose_mixed.rs`), with the ground truth from the module.
//!
//! Two workers, nine upstreams behind one server, each under its own
//! location (`/NAME/...`), each with a `zone` and the module in observe
//! mode (`generation_retry_resnapshot off` at `http` level), so nginx fails
//! exactly as stock does and the module writes each `no live upstreams`'
//! `cause=` before it. The families at once:
//!
//! | upstream | what fails | family of its `no live upstreams` |
//! |---|---|---|
//! | `move1` | one resolving peer whose address moves at every re-resolve; the backend reclaims reused connections | generation (2-hop) |
//! | `move2` | a resolving name of several records that change | generation (2-hop) |
//! | `nx` | a resolving name answered NXDOMAIN between addresses | empty, and generation |
//! | `wipe` | two refusing peers with `max_fails=1` | unavailable (and `other` for the attempts) |
//! | `conns` | `max_conns=1` on a slow peer | unavailable |
//! | `down` | every peer `down` | unavailable |
//! | `refused` | one refusing peer | `other` |
//! | `slow` | a timeout (read or connect) | `other` (504) |
//! | `reset` | a peer that resets each connection | `other` |
//!
//! Each request has its own path (`/NAME/SEQ`), chosen among the upstreams
//! by the seed, so the access log and the module's lines join on it. nginx
//! writes the same requests in three formats at once: the harness's
//! (`$msec` and `$request_time`), the same without `$request_time`, and
//! `combined` plus `"$upstream_addr"` (no `$msec`).
//!
//! [`Layout`] holds the two sets: what the diagnosis rules may be tuned on
//! and what they are scored on. The held-out set differs in: `move1`
//! rotating over three addresses instead of two; `move2` cycling {A,B,C},
//! {A}, {B,C} instead of {A,B}, {B,C}, with `max_fails=3 fail_timeout=2s`
//! instead of `max_fails=0`; `nx` answering A, NXDOMAIN, C, B, NXDOMAIN
//! instead of A, B, NXDOMAIN; `wipe` a resolving name (`fail_timeout=3s`)
//! instead of two static peers; `conns` two peers instead of one; `down`
//! three peers instead of one; `slow` a connect timeout instead of a read
//! timeout. The seed fixes which upstream each request goes to and the
//! backends' reclaim draws; DNS and fault timing follow the clock, so runs
//! of one seed differ. In both sets the load goes on 2.5 s after every name
//! stops changing (`STILL_TAIL`), so that every race has traffic after it.
//!
//! This file holds the run: its knobs, its timeline and what it leaves;
//! `parts` starts the backends and faults besides nginx, `http` and
//! `stream` configure their upstreams and schedule their names and load,
//! `score` scores the tool on a run's logs.

mod http;
mod parts;
mod score;
mod stream;
#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use reqwest::Method;

use crate::actors::backend::{ADDR_A, ADDR_B, ADDR_C};
use crate::actors::dns::{Answer, DnsServer};
use crate::actors::load::{open_loop, Client};
use crate::nginx::Nginx;
use crate::rng::Rng;
use http::{config, pick, schedules};
use parts::{Parts, WIPE_A, WIPE_B};
pub use score::{score, score_stream};
use stream::{stream_load, stream_logged, stream_ready, stream_schedules, RACE_NAMES, STREAM_RATE};
pub use stream::{STREAM_LOGS, STREAM_UPSTREAMS};

/// Which set of upstreams and faults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// The set the rules may be studied and tuned on.
    Tuning,
    /// The set the test scores: other schedules, peer counts and faults,
    /// never used to tune a rule.
    HeldOut,
}

impl Layout {
    pub fn name(self) -> &'static str {
        match self {
            Layout::Tuning => "tuning",
            Layout::HeldOut => "held-out",
        }
    }
}

/// The knobs of one mixed run.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    pub layout: Layout,
    pub seed: u64,
    /// Requests per second over all upstreams, open loop.
    pub rate: f64,
    /// How long the names change under load; the load runs
    /// `STILL_TAIL` longer, with every name still.
    pub duration: Duration,
}

/// The three access logs nginx writes, by file name under `logs/`, with
/// their `log_format` name (the first is the harness's own).
pub const ACCESS_LOGS: [(&str, &str); 3] = [
    ("access.log", crate::scoring::accesslog::LOG_FORMAT_NAME),
    ("no-request-time.log", "no_request_time"),
    ("combined.log", "combined_upstream"),
];

/// What a mixed run leaves to score.
pub struct Run {
    /// `nginx -T` as nginx printed it, paths under `prefix`.
    pub conf_dump: String,
    /// nginx's prefix when it ran (the logs' paths in `conf_dump` start
    /// with it).
    pub prefix: PathBuf,
    /// Each of [`ACCESS_LOGS`], in its order.
    pub access: Vec<String>,
    /// Each of [`STREAM_LOGS`], in its order (the readiness sessions
    /// included).
    pub stream: Vec<String>,
    /// Sessions sent, per stream upstream.
    pub stream_sessions: Vec<(&'static str, usize)>,
    /// The error log, the module's `cause=` lines in it.
    pub error: String,
    /// Requests sent, per upstream, in [`UPSTREAMS`] order.
    pub sent: Vec<(&'static str, usize)>,
}

/// The upstreams, in the order of the table above.
pub const UPSTREAMS: [&str; 9] = [
    "move1", "move2", "nx", "wipe", "conns", "down", "refused", "slow", "reset",
];

/// How long the load goes on after every name answers one fixed set:
/// nginx takes that set at its next re-resolve (`valid=1s`), itself a last
/// change, so each list's last change is followed by a second or more of
/// traffic that shows it, as in any log but one cut at that moment.
/// Without it, a race near the run's end has little or nothing logged
/// after it to tell it from a peer going out of service, and which run
/// ends on one is the clock's draw: a CI run at a0a04e5 misplaced 9 of its
/// 84 races, all among the last 1.7 s of requests (diagnose/README.md,
/// "Accuracy", says where the tool stands on a cut log).
const STILL_TAIL: Duration = Duration::from_millis(2_500);

/// Every name of both schedules, fixed at one address set (not NXDOMAIN),
/// so that the list's last state serves and shows itself.
fn still_schedules(dns: &DnsServer) {
    dns.set_a("move1.test", ADDR_A);
    dns.set("move2.test", Answer::A(vec![ADDR_A, ADDR_B, ADDR_C]));
    dns.set_a("nx.test", ADDR_B);
    for name in RACE_NAMES {
        dns.set_a(name, crate::actors::tcp::NEW);
    }
    dns.set_a("snx.test", crate::actors::tcp::NEW);
}

/// Runs the scenario of `opts` and returns its logs and configuration.
pub async fn run(opts: &Options) -> Run {
    let parts = Parts::start().await;
    let dns = &parts.dns;
    for name in ["move1.test", "move2.test", "nx.test"] {
        dns.set_a(name, ADDR_A);
    }
    dns.set("wipe.test", Answer::A(vec![WIPE_A, WIPE_B]));
    for name in RACE_NAMES {
        dns.set_a(name, crate::actors::tcp::OLD);
    }
    dns.set_a("snx.test", crate::actors::tcp::OLD);
    let config = config(opts.layout, &parts);
    let nginx = Nginx::start(&config);
    let client = Client::new(nginx.url(""));
    for name in ["move1", "move2", "nx"] {
        wait_ready(&client, name).await;
    }
    stream_ready(&parts).await;
    // Readiness sessions have ended, so they are logged.
    let ready_sessions =
        std::fs::read_to_string(nginx.prefix().join("logs").join(STREAM_LOGS[0].0))
            .unwrap_or_default()
            .lines()
            .count();
    let conf_dump = nginx.dump(&config);

    schedules(opts.layout, dns);
    stream_schedules(opts.layout, dns);
    let load_for = opts.duration + STILL_TAIL;
    for (i, b) in parts.moving.iter().enumerate() {
        b.set_reclaim_after(0.25, opts.seed + i as u64, Duration::from_millis(900));
    }
    let choices: Vec<usize> = {
        let mut rng = Rng::new(opts.seed);
        let total = (load_for.as_secs_f64() * opts.rate).round() as usize;
        (0..total).map(|_| pick(&mut rng)).collect()
    };
    let (sent, sessions, ()) = tokio::join!(
        open_loop(&client, opts.rate, load_for, |i| {
            let name = UPSTREAMS[choices[i as usize]];
            (Method::GET, format!("/{name}/{i}"), None)
        }),
        stream_load(&parts, opts.seed, STREAM_RATE, load_for),
        async {
            tokio::time::sleep(opts.duration).await;
            still_schedules(dns);
        }
    );
    let access = logged(&nginx, sent.len()).await;
    let stream = stream_logged(&nginx, ready_sessions + sessions.iter().sum::<usize>()).await;
    let run = Run {
        conf_dump,
        prefix: nginx.prefix().to_path_buf(),
        access,
        stream,
        stream_sessions: STREAM_UPSTREAMS.iter().copied().zip(sessions).collect(),
        error: nginx.error_log(),
        sent: UPSTREAMS
            .iter()
            .enumerate()
            .map(|(k, name)| (*name, choices.iter().filter(|c| **c == k).count()))
            .collect(),
    };
    nginx.finish();
    run
}

/// The three access logs once each holds every one of the `n` load
/// requests (a worker writes a request's lines just after its response,
/// one log after the other).
async fn logged(nginx: &Nginx, n: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let texts: Vec<String> = ACCESS_LOGS
            .iter()
            .map(|(file, _)| {
                std::fs::read_to_string(nginx.prefix().join("logs").join(file)).unwrap_or_default()
            })
            .collect();
        let load = crate::scoring::accesslog::parse(&texts[0])
            .iter()
            .filter(|e| !e.path.contains("/ready-"))
            .count();
        let lines: Vec<usize> = texts.iter().map(|t| t.lines().count()).collect();
        if load >= n && lines.iter().all(|l| *l == lines[0]) {
            return texts;
        }
        assert!(
            Instant::now() < deadline,
            "the access logs hold {load} of {n} load requests, lines per log {lines:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Readiness: `/NAME/ready-K` answered 200 (the name resolved).
async fn wait_ready(client: &Client, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    for k in 0.. {
        if client.get(&format!("/{name}/ready-{k}")).await.status() == 200 {
            return;
        }
        assert!(Instant::now() < deadline, "{name} never became ready");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
