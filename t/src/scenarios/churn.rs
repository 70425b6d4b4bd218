//! Churn at scale: many upstreams, every one a re-resolving name that a
//! GSLB moves about once a second, keepalive to backends that reclaim a
//! share of reused connections (the routine first-attempt failure nginx
//! retries), and a fixed number of requests spread evenly over the
//! upstreams by closed-loop clients. What `cargo xtask bench --churn` runs
//! for stock nginx, nginx with the module (`on`) and the patched nginx.
//!
//! Each upstream has its own `zone` and name (`cK.churn.test`), so each
//! has its own generation: a swap of one name refuses the retries of that
//! upstream's requests alone, as in production where every service is a
//! name of its own. The request count is fixed, not the duration, so each
//! variant serves the same work and its rate is the one that varies.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::actors::backend::{Backend, Wire, ADDR_A, ADDR_B, ADDR_C};
use crate::actors::dns::{Answer, DnsServer};
use crate::actors::load::Client;
use crate::nginx::{Config, Flavor, Nginx};
use crate::scenarios::http::patched_rescue_line;
use crate::scenarios::lab::epoch_now;
use crate::scoring::accesslog::{tally, Entry};
use crate::scoring::errorlog;
use crate::scoring::metrics::{log, Counter, StatusExt};
use crate::shared::status_handler;

/// What a churn run does.
#[derive(Clone, Debug)]
pub struct Options {
    /// Upstreams, each with its own moving name.
    pub upstreams: usize,
    /// Requests in all, spread round-robin over the upstreams.
    pub requests: usize,
    /// Closed-loop clients.
    pub connections: usize,
    /// nginx's `worker_processes`.
    pub workers: u32,
    /// The resolver's `valid=` seconds: each name is re-resolved (and
    /// moved) about every `valid` + 1 seconds.
    pub valid: u32,
    /// Probability that the backend closes a reused connection instead of
    /// answering: the first-attempt failure nginx then retries.
    pub reclaim: f64,
    /// A reclaimed request fails after a delay drawn in [0, this].
    pub reclaim_delay: Duration,
    pub seed: u64,
    /// The protocol nginx speaks to the backend.
    pub wire: Wire,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            upstreams: 40,
            requests: 200_000,
            connections: 64,
            workers: 2,
            valid: 1,
            reclaim: 0.05,
            reclaim_delay: Duration::from_millis(100),
            seed: 1656,
            wire: Wire::Http,
        }
    }
}

/// The nginx a churn run measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    Stock,
    /// The module, `generation_retry_resnapshot on` for every upstream.
    On,
    /// The patched nginx (`nginx-src-patches/`).
    Patched,
}

impl Variant {
    pub const ALL: [Variant; 3] = [Variant::Stock, Variant::On, Variant::Patched];

    pub fn name(self) -> &'static str {
        match self {
            Variant::Stock => "stock",
            Variant::On => "module-on",
            Variant::Patched => "patched",
        }
    }

    fn flavor(self) -> Flavor {
        match self {
            Variant::Stock => Flavor::stock(),
            Variant::On => Flavor::with_module(),
            Variant::Patched => Flavor::patched(),
        }
    }
}

/// What one run measured.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub variant: Variant,
    pub wire: Wire,
    pub upstreams: usize,
    pub requests: usize,
    /// Wall time of the load.
    pub seconds: f64,
    pub rps: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// Answers other than 200, as the clients saw them.
    pub not_ok: usize,
    /// The load's access log lines (each request's, once all are written).
    pub logged: usize,
    /// `no live upstreams` 502s after one or more real attempts (the
    /// access log's `ADDR, NAME` shape) and at the first selection.
    pub two_hop_502: usize,
    pub one_hop_502: usize,
    /// HTTP/2 requests (gRPC's, `proxy_http_version 2`'s) that nginx's own
    /// stale stream id failed ([`errorlog::STALE_STREAM`]), not the race:
    /// stock nginx has them with the module or without; the patched
    /// nginx, which fixes it, must have none.
    pub stale_stream_502: usize,
    /// Attempts nginx logged as failed (`... while reading response header
    /// from upstream`): how often it had to retry.
    pub attempt_failures: usize,
    /// DNS answers that moved a name.
    pub swaps: usize,
    /// The module's counters summed over the upstreams, since the load
    /// started (`None` without the module).
    pub busy: Option<u64>,
    pub rescued: Option<u64>,
    pub failed: Option<u64>,
    /// The module's rescue lines, or the patched nginx's re-selection lines.
    pub rescue_lines: usize,
}

impl Outcome {
    /// The run's row as JSON.
    pub fn json(&self) -> Value {
        json!({
            "variant": self.variant.name(), "protocol": self.wire.name(),
            "upstreams": self.upstreams,
            "requests": self.requests, "seconds": self.seconds, "rps": self.rps,
            "p50_ms": self.p50_ms, "p99_ms": self.p99_ms, "not_ok": self.not_ok, "logged": self.logged,
            "two_hop_502": self.two_hop_502, "one_hop_502": self.one_hop_502,
            "stale_stream_502": self.stale_stream_502,
            "attempt_failures": self.attempt_failures, "swaps": self.swaps,
            "busy": self.busy, "rescued": self.rescued, "failed": self.failed,
            "rescue_lines": self.rescue_lines,
        })
    }

    /// What must hold for a variant that fixes the race: no generation
    /// 502 at all and, with the module, every refusal rescued. Each
    /// failure is a sentence naming the run.
    pub fn violations(&self) -> Vec<String> {
        let mut v = Vec::new();
        let what = format!(
            "{} with {} upstreams ({})",
            self.variant.name(),
            self.upstreams,
            self.wire.name()
        );
        if self.logged != self.requests {
            v.push(format!(
                "{what}: {} access log lines for {} requests: the 502 counts are incomplete",
                self.logged, self.requests
            ));
        }
        let known = self.two_hop_502 + self.one_hop_502 + self.stale_stream_502;
        let other = self.not_ok - self.not_ok.min(known);
        if other > 0 {
            v.push(format!(
                "{what}: {other} answers were neither 200 nor a generation 502 (the load or the \
                 machine failed, not the race: out of file descriptors? `ulimit -n`)"
            ));
        }
        if self.variant == Variant::Stock {
            return v;
        }
        if self.two_hop_502 + self.one_hop_502 > 0 {
            v.push(format!(
                "{what}: {} 2-hop and {} 1-hop `no live upstreams` 502s, expected none",
                self.two_hop_502, self.one_hop_502
            ));
        }
        if self.variant == Variant::Patched && self.stale_stream_502 > 0 {
            v.push(format!(
                "{what}: {} `{}` 502s, which the patched nginx fixes",
                self.stale_stream_502,
                errorlog::STALE_STREAM
            ));
        }
        if self.variant == Variant::On && (self.busy != self.rescued || self.failed != Some(0)) {
            v.push(format!(
                "{what}: busy {:?}, rescued {:?}, failed {:?}: expected every refusal rescued",
                self.busy, self.rescued, self.failed
            ));
        }
        v
    }
}

/// The name of upstream `k`, which the DNS moves.
pub(crate) fn name(k: usize) -> String {
    format!("c{k}.churn.test")
}

/// The `http {}` inside: one upstream and one location per name, all
/// through one resolver, passing requests with `o.wire`'s directive. A
/// protocol nginx keeps alive has the name alone and keepalive; one it
/// does not (uwsgi, SCGI) has a static peer beside the name, the second
/// try of a failed first attempt, and neither is ever marked failed (a
/// failed name would leave the race to the static peer alone).
pub(crate) fn http_config(v: Variant, o: &Options, dns: &DnsServer, backend: &Backend) -> String {
    let mut http = format!(
        "    resolver {} valid={}s ipv6=off;\n    resolver_timeout 3s;\n",
        dns.addr(),
        o.valid
    );
    if v == Variant::On {
        http.push_str("    generation_retry_resnapshot on;\n");
    }
    let port = backend.port();
    for k in 0..o.upstreams {
        let servers = if o.wire.keepalive() {
            format!("server {}:{port} resolve; keepalive 16;", name(k))
        } else {
            format!(
                "server {}:{port} resolve max_fails=0; server {ADDR_C}:{port} max_fails=0;",
                name(k)
            )
        };
        http.push_str(&format!(
            "    upstream u{k} {{ zone u{k} 64k; {servers} }}\n"
        ));
    }
    http.push_str("    server {\n        listen 127.0.0.1:${PORT};\n");
    for k in 0..o.upstreams {
        let pass = o
            .wire
            .pass()
            .replace("${SCHEME}", "http")
            .replace("${UPSTREAM}", &format!("u{k}"));
        http.push_str(&format!(
            "        location /u{k}/ {{ {pass} {} }}\n",
            o.wire.keepalive_location()
        ));
    }
    http.push_str(&format!(
        "        location = /status {{ {} }}\n    }}\n",
        status_handler(v == Variant::On)
    ));
    http
}

/// Every upstream answers (each name resolved), bounded.
pub(crate) async fn wait_ready(client: &Client, upstreams: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    for k in 0..upstreams {
        let mut i = 0;
        while client.get(&format!("/u{k}/ready/{i}")).await.status() != 200 {
            assert!(
                Instant::now() < deadline,
                "upstream u{k} never answered: its name was not resolved"
            );
            i += 1;
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// The module's counters summed over every http upstream (`None` without
/// the module or when the status page cannot be read).
pub(crate) async fn counters(client: &Client) -> Option<[u64; 3]> {
    let r = client.get("/status?format=json").await;
    if r.status() != 200 {
        return None;
    }
    let v: Value = serde_json::from_str(&r.body).ok()?;
    let mut sum = [0u64; 3];
    for u in v["upstreams"].as_array()? {
        let busy = u.counter(Counter::BusyFirst)? + u.counter(Counter::BusyRetry)?;
        sum[0] += busy;
        sum[1] += u.counter(Counter::Rescued)?;
        sum[2] += u.counter(Counter::Failed)?;
    }
    Some(sum)
}

/// The access log's lines of the load, once all `n` are written (a
/// worker logs a request just after its answer left), bounded.
async fn logged(nginx: &Nginx, n: usize) -> Vec<Entry> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let entries: Vec<Entry> = nginx
            .access_log()
            .into_iter()
            .filter(|e| e.path.contains("/churn/"))
            .collect();
        if entries.len() >= n || Instant::now() >= deadline {
            return entries;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Runs `v` under the churn of `o`.
pub async fn run(v: Variant, o: &Options) -> Outcome {
    let dns = DnsServer::start().await;
    for k in 0..o.upstreams {
        dns.set_a(&name(k), ADDR_A);
    }
    let backend = Backend::start_wire(o.wire).await;
    let config = Config::new(v.flavor(), http_config(v, o, &dns, &backend)).workers(o.workers);
    let nginx = Nginx::start(&config);
    let client = Client::new(nginx.url(""));
    wait_ready(&client, o.upstreams).await;
    let before = counters(&client).await;
    let log_start = nginx.error_log().len();

    for k in 0..o.upstreams {
        dns.set(&name(k), Answer::rotate(&[ADDR_B, ADDR_A]));
    }
    backend.set_reclaim_after(o.reclaim, o.seed, o.reclaim_delay);

    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let start_wall = epoch_now();
    let mut tasks = Vec::with_capacity(o.connections);
    for _ in 0..o.connections {
        let (client, next, n, ups) = (client.clone(), next.clone(), o.requests, o.upstreams);
        tasks.push(tokio::spawn(async move {
            let mut seen = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    return seen;
                }
                let r = client.get(&format!("/u{}/churn/{i}", i % ups)).await;
                seen.push((r.status(), r.latency.as_secs_f64() * 1000.0));
            }
        }));
    }
    let mut seen = Vec::with_capacity(o.requests);
    for t in tasks {
        seen.extend(t.await.expect("churn client"));
    }
    let seconds = started.elapsed().as_secs_f64();
    let end_wall = epoch_now();
    backend.set_reclaim(0.0, o.seed);

    let after = counters(&client).await;
    let entries = logged(&nginx, o.requests).await;
    let t = tally(&entries);
    let error_log = nginx.error_log();
    let load_log = error_log
        .get(log_start..)
        .expect("the error log only grows while nginx runs");
    let lines = errorlog::lines(load_log);
    let attempt_failures = lines
        .iter()
        .filter(|l| l.level == "error" && errorlog::is_upstream_attempt_failure(l.message))
        .count();
    let stale_stream_502 = lines
        .iter()
        .filter(|l| l.message.starts_with(errorlog::STALE_STREAM))
        .count();
    let rescue_lines = match v {
        Variant::Stock => 0,
        Variant::On => load_log.lines().filter(|l| log::is_rescue_line(l)).count(),
        // `upstream "uK" peers changed, selecting again`, whatever K: one
        // pass over the log, not one per upstream.
        Variant::Patched => {
            let line = patched_rescue_line("u");
            let (head, tail) = line
                .split_once("\" ")
                .expect("the line quotes the upstream");
            load_log
                .lines()
                .filter(|l| {
                    l.split_once(head)
                        .is_some_and(|(_, rest)| rest.contains(tail))
                })
                .count()
        }
    };
    // The answers that moved a name while the load ran.
    let swaps = (0..o.upstreams)
        .map(|k| {
            dns.swaps(&name(k))
                .iter()
                .filter(|t| (start_wall..=end_wall).contains(*t))
                .count()
        })
        .sum();
    nginx.finish();

    let mut ms: Vec<f64> = seen.iter().map(|(_, ms)| *ms).collect();
    ms.sort_by(f64::total_cmp);
    let at = |p: f64| ms[((ms.len() - 1) as f64 * p).round() as usize];
    let since = |k: usize| Some(after?[k].saturating_sub(before?[k]));
    Outcome {
        variant: v,
        wire: o.wire,
        upstreams: o.upstreams,
        requests: seen.len(),
        seconds,
        rps: seen.len() as f64 / seconds,
        p50_ms: at(0.50),
        p99_ms: at(0.99),
        not_ok: seen.iter().filter(|(s, _)| *s != 200).count(),
        logged: entries.len(),
        two_hop_502: t.two_hop_502,
        one_hop_502: t.one_hop_502,
        stale_stream_502,
        attempt_failures,
        swaps,
        busy: since(0),
        rescued: since(1),
        failed: since(2),
        rescue_lines,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(v: Variant) -> Outcome {
        Outcome {
            variant: v,
            wire: Wire::Http,
            upstreams: 40,
            requests: 10,
            seconds: 1.0,
            rps: 10.0,
            p50_ms: 1.0,
            p99_ms: 2.0,
            not_ok: 0,
            logged: 10,
            two_hop_502: 0,
            one_hop_502: 0,
            stale_stream_502: 0,
            attempt_failures: 3,
            swaps: 2,
            busy: Some(2),
            rescued: Some(2),
            failed: Some(0),
            rescue_lines: 2,
        }
    }

    #[test]
    fn a_fix_that_leaves_a_generation_502_or_an_unrescued_refusal_is_named() {
        assert!(outcome(Variant::On).violations().is_empty());
        let mut two_hop = outcome(Variant::Patched);
        two_hop.two_hop_502 = 1;
        assert_eq!(two_hop.violations().len(), 1);
        assert!(two_hop.violations()[0].starts_with("patched with 40 upstreams"));
        let mut unrescued = outcome(Variant::On);
        unrescued.rescued = Some(1);
        assert_eq!(unrescued.violations().len(), 1);
        let mut stock = outcome(Variant::Stock);
        stock.two_hop_502 = 5;
        stock.not_ok = 5;
        assert!(stock.violations().is_empty());
        stock.not_ok = 6;
        assert_eq!(
            stock.violations().len(),
            1,
            "an answer that is not the race's"
        );
    }

    #[test]
    fn nginx_s_stale_stream_id_is_excused_but_not_in_the_patched_nginx() {
        for v in [Variant::Stock, Variant::On] {
            let mut o = outcome(v);
            o.stale_stream_502 = 3;
            o.not_ok = 3;
            assert!(o.violations().is_empty(), "{:?}", o.violations());
        }
        let mut patched = outcome(Variant::Patched);
        patched.stale_stream_502 = 3;
        patched.not_ok = 3;
        assert_eq!(patched.violations().len(), 1, "{:?}", patched.violations());
    }
}
