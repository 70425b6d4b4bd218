//! The soak (`cargo xtask soak`, documented, not in CI): the churn of
//! [`crate::scenarios::churn`] (40 upstreams, each its own name moved at every
//! re-resolve, keepalive with 5% of reused connections reclaimed) with the
//! module `on`, under closed-loop load for ten minutes, while nginx is
//! reloaded every 2 s, upgraded once (USR2, then QUIT to the old master) and
//! has one worker killed (SIGKILL). Every 10 s it samples the master's and
//! the workers' resident memory and the module's zone (its 32 MiB mapping's
//! resident KiB in the master, and the upstreams it holds counters for).
//!
//! It fails on a generation 502 (2-hop or 1-hop in the access log), any
//! fatal error-log line but the killed worker's, memory that grows after
//! the warm-up by more than 10% (master, largest worker, zone; each master
//! against its own first sample, the new one's from its start), or the new
//! master's counters differing from its access log (rescued: requests
//! answered 200 after a re-snapshot). The load pauses around the upgrade
//! and the kill so that the new master's share of the access log is known
//! exactly.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::actors::backend::{Backend, ADDR_A, ADDR_B};
use crate::actors::dns::{Answer, DnsServer};
use crate::actors::load::Client;
use crate::nginx::{Config, Flavor, Nginx};
use crate::scenarios::churn::{self, Variant};
use crate::scenarios::lab::epoch_now;
use crate::scoring::accesslog::{tally, Entry};
use crate::scoring::errorlog;

#[derive(Clone, Debug)]
pub struct Options {
    pub duration: Duration,
    pub upstreams: usize,
    pub connections: usize,
    pub workers: u32,
    pub reclaim: f64,
    /// SIGHUP this often.
    pub hup_every: Duration,
    pub sample_every: Duration,
    /// Samples before this are the warm-up, not held to flatness.
    pub warm_up: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            duration: Duration::from_secs(600),
            upstreams: 40,
            connections: 32,
            workers: 2,
            reclaim: 0.05,
            hup_every: Duration::from_secs(2),
            sample_every: Duration::from_secs(10),
            warm_up: Duration::from_secs(60),
        }
    }
}

/// One sample of memory.
#[derive(Clone, Debug)]
pub struct Sample {
    pub at_s: f64,
    pub master_kib: u64,
    /// The current master's children (its workers, old ones draining
    /// after a reload included).
    pub workers: usize,
    pub worker_kib_max: u64,
    /// The module's zone: resident KiB of its 32 MiB mapping in the master.
    pub zone_kib: u64,
    /// Upstreams the zone holds counters for (the last setup's line).
    pub counted: usize,
}

/// What a soak did.
#[derive(Debug)]
pub struct Report {
    pub samples: Vec<Sample>,
    pub seconds: f64,
    /// Answers by status (0: no HTTP answer: a connection nginx closed as
    /// a worker exited or was killed).
    pub statuses: BTreeMap<u16, usize>,
    pub logged: usize,
    pub two_hop_502: usize,
    pub one_hop_502: usize,
    pub reloads: usize,
    pub upgrade_at_s: f64,
    pub killed: libc::pid_t,
    /// The new master's counters at the end: busy, rescued, failed.
    pub counters: [u64; 3],
    /// Its access log: answered 200 after a re-snapshot, and 502 after one.
    pub log_rescued: u64,
    pub log_failed: u64,
    pub fatal: Vec<String>,
}

impl Report {
    /// Growth of a series after the warm-up, the larger of each master's
    /// (last over first sample after its warm-up): the new master of the
    /// upgrade is another process, whose memory starts where its own start
    /// leaves it, so each is held to itself, from a warm-up after its
    /// start.
    fn growth(&self, warm_up: f64, f: impl Fn(&Sample) -> u64) -> f64 {
        let ratio = |xs: Vec<u64>| match (xs.first(), xs.last()) {
            (Some(&a), Some(&b)) if a > 0 => b as f64 / a as f64,
            _ => 1.0,
        };
        let old = self
            .samples
            .iter()
            .filter(|s| s.at_s >= warm_up && s.at_s < self.upgrade_at_s)
            .map(&f)
            .collect();
        let new = self
            .samples
            .iter()
            .filter(|s| s.at_s >= self.upgrade_at_s + warm_up)
            .map(&f)
            .collect();
        ratio(old).max(ratio(new))
    }

    pub fn violations(&self, o: &Options) -> Vec<String> {
        let mut v = Vec::new();
        if self.two_hop_502 + self.one_hop_502 > 0 {
            v.push(format!(
                "generation 502s: {} 2-hop, {} 1-hop",
                self.two_hop_502, self.one_hop_502
            ));
        }
        if !self.fatal.is_empty() {
            v.push(format!("fatal error-log lines: {:#?}", self.fatal));
        }
        let warm = o.warm_up.as_secs_f64();
        for (what, g) in [
            ("master RSS", self.growth(warm, |s| s.master_kib)),
            (
                "largest worker RSS",
                self.growth(warm, |s| s.worker_kib_max),
            ),
            ("zone resident", self.growth(warm, |s| s.zone_kib)),
        ] {
            if g > 1.10 {
                v.push(format!("{what} grew {g:.3}x after the warm-up"));
            }
        }
        let [busy, rescued, failed] = self.counters;
        if busy != rescued + failed {
            v.push(format!(
                "busy {busy} != rescued {rescued} + failed {failed}"
            ));
        }
        if rescued != self.log_rescued || failed != self.log_failed {
            v.push(format!(
                "counters rescued {rescued}, failed {failed}; access log {}, {}",
                self.log_rescued, self.log_failed
            ));
        }
        if rescued == 0 {
            v.push("no rescue after the upgrade: the churn did not run".into());
        }
        v
    }

    pub fn json(&self) -> Value {
        json!({
            "seconds": self.seconds,
            "statuses": self.statuses.iter().map(|(k, v)| (k.to_string(), *v)).collect::<BTreeMap<_, _>>(),
            "logged": self.logged,
            "two_hop_502": self.two_hop_502,
            "one_hop_502": self.one_hop_502,
            "reloads": self.reloads,
            "upgrade_at_s": self.upgrade_at_s,
            "killed": self.killed,
            "counters": {"busy": self.counters[0], "rescued": self.counters[1], "failed": self.counters[2]},
            "access_log": {"rescued": self.log_rescued, "failed": self.log_failed},
            "samples": self.samples.iter().map(|s| json!({
                "at_s": s.at_s, "master_kib": s.master_kib, "workers": s.workers,
                "worker_kib_max": s.worker_kib_max, "zone_kib": s.zone_kib, "counted": s.counted,
            })).collect::<Vec<_>>(),
        })
    }
}

/// VmRSS of `pid`, KiB (0 if it is gone).
fn rss_kib(pid: libc::pid_t) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches(" kB").parse().ok())
        })
        .unwrap_or(0)
}

/// The children of `parent`, from /proc.
fn children(parent: libc::pid_t) -> Vec<libc::pid_t> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // `pid (comm) state ppid ...`: after the last ')'.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, r)| r.split_whitespace().nth(1))
            .and_then(|p| p.parse::<libc::pid_t>().ok());
        if ppid == Some(parent) {
            out.push(pid);
        }
    }
    out
}

/// The module's zone in `pid`: its one 32 MiB shared mapping (the
/// upstream zones of the harness are smaller), as `(start, end)`.
pub fn zone_mapping(pid: libc::pid_t) -> Option<(u64, u64)> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    maps.lines()
        .filter_map(|l| {
            let (s, e) = l.split_whitespace().next()?.split_once('-')?;
            Some((
                u64::from_str_radix(s, 16).ok()?,
                u64::from_str_radix(e, 16).ok()?,
            ))
        })
        .find(|(s, e)| e - s == 32 << 20)
}

/// The resident KiB of the module's zone in `pid` ([`zone_mapping`]); 0
/// if it has none.
pub fn zone_kib(pid: libc::pid_t) -> u64 {
    let Some((start, _)) = zone_mapping(pid) else {
        return 0;
    };
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap_or_default();
    let header = format!("{start:x}-");
    let mut in_zone = false;
    for line in smaps.lines() {
        // A mapping's header: `START-END perms ...`.
        let first = line.split_whitespace().next().unwrap_or("");
        if first.contains('-') && first.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
            in_zone = first.starts_with(&header);
        } else if let (true, Some(kb)) = (in_zone, line.strip_prefix("Rss:")) {
            return kb.trim().trim_end_matches(" kB").parse().unwrap_or(0);
        }
    }
    0
}

/// The upstreams of the zone's last setup line (`counters of N upstreams`).
fn counted(log: &str) -> usize {
    log.lines()
        .rev()
        .find_map(|l| {
            l.split_once(": counters of ")?
                .1
                .split_once(" upstreams")?
                .0
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

fn sample(nginx: &Nginx, started: Instant) -> Sample {
    let master = nginx.pid();
    let kids = children(master);
    Sample {
        at_s: started.elapsed().as_secs_f64(),
        master_kib: rss_kib(master),
        workers: kids.len(),
        worker_kib_max: kids.iter().map(|&p| rss_kib(p)).max().unwrap_or(0),
        zone_kib: zone_kib(master),
        counted: counted(&nginx.error_log()),
    }
}

/// Runs the soak.
pub async fn run(o: &Options) -> Report {
    let churn = churn::Options {
        upstreams: o.upstreams,
        workers: o.workers,
        reclaim: o.reclaim,
        ..churn::Options::default()
    };
    let dns = DnsServer::start().await;
    for k in 0..o.upstreams {
        dns.set_a(&churn::name(k), ADDR_A);
    }
    let backend = Backend::start().await;
    let mut config = Config::new(
        Flavor::with_module(),
        churn::http_config(Variant::On, &churn, &dns, &backend),
    )
    .workers(o.workers);
    config.daemon = true;
    let mut nginx = Nginx::start(&config);
    let client = Client::new(nginx.url(""));
    churn::wait_ready(&client, o.upstreams).await;
    for k in 0..o.upstreams {
        dns.set(&churn::name(k), Answer::rotate(&[ADDR_B, ADDR_A]));
    }
    backend.set_reclaim_after(o.reclaim, churn.seed, churn.reclaim_delay);

    // The load: closed-loop clients that stop at `stop` and hold off while
    // `pause` is set (counting what is in flight).
    let stop = Arc::new(AtomicBool::new(false));
    let pause = Arc::new(AtomicBool::new(false));
    let in_flight = Arc::new(AtomicUsize::new(0));
    let next = Arc::new(AtomicUsize::new(0));
    let statuses = Arc::new(Mutex::new(BTreeMap::<u16, usize>::new()));
    let mut tasks = Vec::new();
    for _ in 0..o.connections {
        let (client, stop, pause, in_flight, next, statuses, ups) = (
            client.clone(),
            stop.clone(),
            pause.clone(),
            in_flight.clone(),
            next.clone(),
            statuses.clone(),
            o.upstreams,
        );
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Acquire) {
                if pause.load(Ordering::Acquire) {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                }
                in_flight.fetch_add(1, Ordering::AcqRel);
                let i = next.fetch_add(1, Ordering::Relaxed);
                let r = client.get(&format!("/u{}/soak/{i}", i % ups)).await;
                *statuses.lock().unwrap().entry(r.status()).or_insert(0) += 1;
                in_flight.fetch_sub(1, Ordering::AcqRel);
            }
        }));
    }

    let started = Instant::now();
    let mut samples = vec![sample(&nginx, started)];
    let (mut next_sample, mut next_hup) = (o.sample_every, o.hup_every);
    let (upgrade_at, kill_at) = (o.duration.mul_f64(0.4), o.duration.mul_f64(0.7));
    let (mut upgraded, mut killed, mut reloads) = (None, 0, 0);
    while started.elapsed() < o.duration {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = started.elapsed();
        if now >= next_sample {
            samples.push(sample(&nginx, started));
            next_sample += o.sample_every;
        }
        if upgraded.is_none() && now >= upgrade_at {
            // Quiescent: nothing in flight, every answer logged.
            pause.store(true, Ordering::Release);
            while in_flight.load(Ordering::Acquire) > 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
            nginx.binary_upgrade().await;
            // Once the new master runs: samples after this are its own.
            upgraded = Some((started.elapsed().as_secs_f64(), epoch_now()));
            pause.store(false, Ordering::Release);
            next_hup = now + o.hup_every * 2;
            continue;
        }
        if killed == 0 && now >= kill_at {
            // Quiescent, as for the upgrade: what the kill loses is then
            // no answer and no count (a worker killed inside a rescue is
            // t/tests/mid_selection/'s). The newest worker: the one the
            // master started last, not one draining after a reload.
            pause.store(true, Ordering::Release);
            while in_flight.load(Ordering::Acquire) > 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let live = children(nginx.pid());
            let newest = nginx
                .error_log()
                .lines()
                .rev()
                .filter_map(|l| l.split("start worker process ").nth(1))
                .filter_map(|p| p.trim().parse::<libc::pid_t>().ok())
                .find(|p| live.contains(p));
            if let Some(w) = newest {
                // SAFETY: kill(2) with plain integers: a worker of the
                // nginx this run started.
                unsafe { libc::kill(w, libc::SIGKILL) };
                killed = w;
            }
            pause.store(false, Ordering::Release);
        }
        if now >= next_hup {
            nginx.signal(libc::SIGHUP);
            reloads += 1;
            next_hup += o.hup_every;
        }
    }
    stop.store(true, Ordering::Release);
    for t in tasks {
        let _ = t.await;
    }
    let seconds = started.elapsed().as_secs_f64();
    backend.set_reclaim(0.0, churn.seed);
    // Let the last reload settle and the last lines be written.
    tokio::time::sleep(Duration::from_secs(3)).await;
    samples.push(sample(&nginx, started));

    let counters = churn::counters(&client).await.unwrap_or_default();
    let (upgrade_at_s, upgrade_wall) = upgraded.unwrap_or((0.0, f64::MAX));
    let entries: Vec<Entry> = nginx
        .access_log()
        .into_iter()
        .filter(|e| e.path.contains("/soak/"))
        .collect();
    let t = tally(&entries);
    let after: Vec<&Entry> = entries.iter().filter(|e| e.msec >= upgrade_wall).collect();
    let resnapshotted = |status: u16| {
        after
            .iter()
            .filter(|e| e.status == status && e.resnapshots.unwrap_or(0) > 0)
            .count() as u64
    };
    let log = nginx.error_log();
    // nginx's own lines about the worker this run killed: its exit on
    // signal 9 (and, were it holding a shared lock, the lock freed).
    let killed_pid = format!(" {killed} ");
    let fatal = errorlog::fatal_lines(&log)
        .into_iter()
        .filter(|l| {
            killed == 0
                || !(l.contains(&format!("worker process {killed} exited on signal 9"))
                    || l.contains(&format!("was locked by {killed}"))
                    || l.contains(&killed_pid) && l.contains("locked"))
        })
        .map(str::to_owned)
        .collect();
    drop(client);
    let _ = nginx.stop_unchecked();
    let statuses = statuses.lock().unwrap().clone();
    Report {
        samples,
        seconds,
        statuses,
        logged: entries.len(),
        two_hop_502: t.two_hop_502,
        one_hop_502: t.one_hop_502,
        reloads,
        upgrade_at_s,
        killed,
        counters,
        log_rescued: resnapshotted(200),
        log_failed: resnapshotted(502),
        fatal,
    }
}
