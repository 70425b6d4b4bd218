//! The lab: the seed's A/B experiment on loopback. Each arm runs nginx under
//! the same open-loop load and the same faults (a DNS answer that swaps at
//! every re-resolve, keepalive reclaim at the backend), one arm after
//! another, and is summarised from what the clients, the access log, the
//! error log, the backend and (with the module) the status endpoint saw.
//!
//! `arms` describes every arm, one row each; `http` and `stream` run
//! an arm of their protocol: they set it up, hand `open_loop` what one
//! request (session) does, and hand `summarise` what they observed;
//! `report` renders the results.

use std::future::Future;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::actors::load::Client;
use crate::nginx::Nginx;
use crate::scenarios::http::status_object;
use crate::scoring::accesslog::{tally, Entry, Shape};
use crate::scoring::errorlog;
use crate::scoring::metrics::{log, Counter, NoLiveCause, StatusExt};

mod arms;
mod claims;
mod http;
mod report;
mod stream;

pub use arms::{Arm, Build, Dns, Protocol, Row};

/// The path prefix of the readiness probes an http arm sends before its
/// traffic (`/ready/0`, `/ready/1`, ... until one is answered 200).
pub const READY_PATH: &str = "/ready/";
pub use claims::{Claim, Cmp};
pub use report::{render_csv, render_svg, render_table, ArmResult, Logs};

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

impl Options {
    /// The suite's short run, which the arms' claims are stated for: 10 s
    /// at 250 requests a second, a tenth of reused connections reclaimed
    /// (`statistical.rs`, `diagnose.rs`).
    pub fn short() -> Options {
        Options {
            rate: 250.0,
            duration: Duration::from_secs(10),
            reclaim: 0.1,
            ..Options::default()
        }
    }
}

/// Runs one arm. `progress(fraction)` is called while the load runs.
pub async fn run_arm(
    arm: Arm,
    opts: &Options,
    progress: impl Fn(f64) + Send + Sync + 'static,
) -> ArmResult {
    match arm.row().protocol {
        Protocol::Http => http::run(arm, opts, progress).await,
        Protocol::Stream => stream::run(arm, opts, progress).await,
    }
}

/// The load of every arm: `one(i)` started at `opts.rate` per second for
/// `opts.duration`, on schedule whatever the earlier ones do (like vegeta:
/// a slow or failing nginx cannot slow the load down and hide failures),
/// with `progress` told the share elapsed and nginx reloaded every
/// `opts.reload_every`. Returns the wall clock time the load started, and
/// every outcome in schedule order once all have completed.
/// When the open loop's requests start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Arrivals {
    /// Every 1/rate seconds exactly (the HTTP arms: the seed drives their
    /// reclaim fault instead).
    Even,
    /// One in each 1/rate slot, at a point drawn from `opts.seed`: the
    /// stream arms' only fault is the dead primaries, so the seed moves
    /// the sessions against the DNS swaps and the primaries' probes.
    Seeded,
}

async fn open_loop<T, F>(
    opts: &Options,
    nginx: &Nginx,
    arrivals: Arrivals,
    progress: impl Fn(f64) + Send + Sync + 'static,
    one: impl Fn(u64) -> F,
) -> (f64, Vec<T>)
where
    F: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let start_wall = epoch_now();
    let ticker = ticker(opts.duration, progress);
    let reloads = opts.reload_every.map(|every| reloader(nginx.pid(), every));
    let n = (opts.rate * opts.duration.as_secs_f64()).round() as u64;
    let started = tokio::time::Instant::now();
    let mut tasks = Vec::with_capacity(n as usize);
    let mut rng = crate::rng::Rng::new(opts.seed);
    for i in 0..n {
        let slot = match arrivals {
            Arrivals::Even => i as f64,
            Arrivals::Seeded => i as f64 + rng.unit(),
        };
        tokio::time::sleep_until(started + Duration::from_secs_f64(slot / opts.rate)).await;
        tasks.push(tokio::spawn(one(i)));
    }
    let mut outcomes = Vec::with_capacity(tasks.len());
    for t in tasks {
        outcomes.push(t.await.expect("load task"));
    }
    ticker.abort();
    if let Some(r) = reloads {
        r.abort();
    }
    (start_wall, outcomes)
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

/// Sends SIGHUP to nginx's master `pid` every `every`.
fn reloader(pid: libc::pid_t, every: Duration) -> tokio::task::JoinHandle<()> {
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
}

/// The module's status object of the arm's upstream (none without the
/// module).
async fn module_status(arm: Arm, client: &Client, protocol: &str) -> Option<Value> {
    if arm.resnapshot().is_some() {
        status_object(client, protocol, None).await.ok()
    } else {
        None
    }
}

/// Where the load's counts start: the module's status object and the
/// length of the error log once nginx is ready, before the faults and the
/// load, so that readiness probes (which may meet the name not yet
/// resolved, or the dead primaries) count in neither.
struct Baseline {
    status: Option<Value>,
    /// Bytes of the error log up to its last complete line.
    error_log_len: usize,
}

impl Baseline {
    async fn take(arm: Arm, client: &Client, nginx: &Nginx, protocol: &str) -> Baseline {
        let status = module_status(arm, client, protocol).await;
        let log = nginx.error_log();
        Baseline {
            status,
            error_log_len: log.rfind('\n').map_or(0, |i| i + 1),
        }
    }
}

/// What one request (session) of the load got.
#[derive(Clone, Copy, Debug)]
struct Outcome {
    /// The answer asked for: a 200, or every byte echoed.
    ok: bool,
    /// A request nginx may retry: a GET, or a stream session (a POST whose
    /// body was sent is not retried, so a fault can fail it in any arm).
    retryable: bool,
    latency: Duration,
}

/// POSTs sent and what the backend did with them.
#[derive(Clone, Copy, Debug, Default)]
struct Posts {
    sent: usize,
    delivered: usize,
    received_twice: usize,
}

/// What an arm's run observed, whatever its protocol: the input of
/// [`summarise`].
struct Observed {
    /// Each request (session) of the load, in schedule order.
    outcomes: Vec<Outcome>,
    /// 502s: as the clients saw them (HTTP) or as nginx logged them (stream,
    /// whose clients see a closed connection).
    status_502: usize,
    /// nginx's log lines of the load, as access log entries (a stream
    /// session's `$upstream_addr` has the same shapes).
    entries: Vec<Entry>,
    /// The whole error log; the load's part starts at
    /// `baseline.error_log_len`.
    error_log: String,
    baseline: Baseline,
    /// When the DNS answer changed (seconds since the epoch).
    swaps: Vec<f64>,
    /// When the load started (seconds since the epoch).
    start_wall: f64,
    /// The module's status object of the upstream.
    status: Option<Value>,
    posts: Posts,
    logs: Logs,
}

/// One arm's [`ArmResult`], from what it observed.
fn summarise(arm: Arm, o: Observed) -> ArmResult {
    let t = tally(&o.entries);
    let mut latencies: Vec<f64> = o
        .outcomes
        .iter()
        .map(|s| s.latency.as_secs_f64() * 1000.0)
        .collect();
    latencies.sort_by(f64::total_cmp);

    let no_live: Vec<&Entry> = o
        .entries
        .iter()
        .filter(|e| e.status == 502 && e.shape() != Shape::Other)
        .collect();
    let ms_after_swap = no_live
        .iter()
        .filter_map(|e| {
            // $msec is when the request finished; the selection was just before.
            let last = o
                .swaps
                .iter()
                .copied()
                .filter(|s| *s <= e.msec)
                .reduce(f64::max)?;
            Some((e.msec - last) * 1000.0)
        })
        .collect();
    let load_log = o.error_log.get(o.baseline.error_log_len..).unwrap_or("");
    let first_attempt_failures = errorlog::lines(load_log)
        .iter()
        .filter(|l| l.level == "error" && errorlog::is_upstream_attempt_failure(l.message))
        .count();
    let ModuleCounts {
        rescued,
        busy,
        failed,
        no_live: no_live_counts,
    } = module_counts(o.status.as_ref()).since(&module_counts(o.baseline.status.as_ref()));
    ArmResult {
        arm: arm.name().into(),
        requests: o.outcomes.len(),
        logged: o.entries.len(),
        retryable_failed: o.outcomes.iter().filter(|s| s.retryable && !s.ok).count(),
        status_502: o.status_502,
        two_hop_502: t.two_hop_502,
        one_hop_502: t.one_hop_502,
        other_errors: o
            .outcomes
            .iter()
            .filter(|s| !s.ok)
            .count()
            .saturating_sub(t.two_hop_502 + t.one_hop_502),
        first_attempt_failures,
        reloads: load_log.matches("reconfiguring").count(),
        swaps: o.swaps.len(),
        ms_after_swap,
        rescued,
        rescued_logged: rescue_lines(load_log),
        busy,
        failed,
        no_live: no_live_counts,
        p50_ms: percentile(&latencies, 0.50),
        p99_ms: percentile(&latencies, 0.99),
        post_sent: o.posts.sent,
        post_delivered: o.posts.delivered,
        post_received_twice: o.posts.received_twice,
        swap_times: o
            .swaps
            .iter()
            .map(|s| s - o.start_wall)
            .filter(|s| *s >= 0.0)
            .collect(),
        failure_times: no_live.iter().map(|e| e.msec - o.start_wall).collect(),
        logs: o.logs,
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

/// The module's rescue lines in `error_log`.
fn rescue_lines(error_log: &str) -> usize {
    error_log.lines().filter(|l| log::is_rescue_line(l)).count()
}

/// The module's counts of an upstream: rescued, busy (first + retry),
/// failed and no_live (generation, unavailable, empty); `None` without the
/// module.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct ModuleCounts {
    rescued: Option<u64>,
    busy: Option<u64>,
    failed: Option<u64>,
    no_live: Option<[u64; 3]>,
}

impl ModuleCounts {
    /// The counts since `before` (counters only grow).
    fn since(self, before: &ModuleCounts) -> ModuleCounts {
        let minus = |a: Option<u64>, b: Option<u64>| a.map(|a| a.saturating_sub(b.unwrap_or(0)));
        ModuleCounts {
            rescued: minus(self.rescued, before.rescued),
            busy: minus(self.busy, before.busy),
            failed: minus(self.failed, before.failed),
            no_live: self.no_live.map(|n| {
                let b = before.no_live.unwrap_or_default();
                [0, 1, 2].map(|i| n[i].saturating_sub(b[i]))
            }),
        }
    }
}

/// [`ModuleCounts`] from the module's status object of the upstream.
fn module_counts(status: Option<&Value>) -> ModuleCounts {
    let Some(s) = status else {
        return ModuleCounts::default();
    };
    let busy = s
        .counter(Counter::BusyFirst)
        .zip(s.counter(Counter::BusyRetry));
    let [generation, unavailable, empty] = NoLiveCause::ALL.map(|c| s.counter(c.counter()));
    ModuleCounts {
        rescued: s.counter(Counter::Rescued),
        busy: busy.map(|(a, b)| a + b),
        failed: s.counter(Counter::Failed),
        no_live: generation
            .zip(unavailable)
            .zip(empty)
            .map(|((g, u), e)| [g, u, e]),
    }
}

/// Seconds since the epoch, as nginx's `$msec` and the DNS server's log
/// give them.
pub fn epoch_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), 51.0);
        assert_eq!(percentile(&v, 0.99), 99.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
    }

    #[test]
    fn module_counts_are_the_loads() {
        let before = ModuleCounts {
            rescued: Some(1),
            busy: Some(2),
            failed: Some(1),
            no_live: Some([0, 0, 3]),
        };
        let after = ModuleCounts {
            rescued: Some(5),
            busy: Some(7),
            failed: Some(2),
            no_live: Some([1, 0, 9]),
        };
        let since = ModuleCounts {
            rescued: Some(4),
            busy: Some(5),
            failed: Some(1),
            no_live: Some([1, 0, 6]),
        };
        assert_eq!(after.since(&before), since);
        assert_eq!(after.since(&ModuleCounts::default()), after);
        assert_eq!(
            ModuleCounts::default().since(&before),
            ModuleCounts::default()
        );
    }
}
