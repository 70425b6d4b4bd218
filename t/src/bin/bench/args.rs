//! The bench's command line: the cost bench's knobs, and `--churn`'s.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use generation_retry_t::actors::backend::Wire;
use generation_retry_t::scenarios::churn;

/// What the module costs, as ratios from one run (stock, module on, module
/// off); with --churn, the benchmark at scale.
#[derive(Parser, Debug)]
#[command(bin_name = "cargo xtask bench")]
#[command(args_override_self = true, allow_negative_numbers = true)]
pub struct Args {
    /// Rounds, each variant once a round [default: 5; with --churn: 3]
    #[arg(long, value_name = "N", value_parser = at_least_one)]
    rounds: Option<usize>,
    /// Seconds of each throughput and latency measurement
    #[arg(long, value_name = "S", value_parser = seconds, default_value = "5")]
    pub duration: Duration,
    /// Requests per second of the latency's open loop
    #[arg(long, value_name = "RPS", value_parser = rate, default_value = "1000")]
    pub rate: f64,
    /// Closed-loop connections [default: 32; with --churn: 64]
    #[arg(long, value_name = "C", value_parser = at_least_one)]
    connections: Option<usize>,
    /// Retries timed, plain and rescued (0: none)
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub races: usize,
    /// Requests counted under callgrind when valgrind is installed (0: none)
    #[arg(long, value_name = "N", default_value_t = 2000)]
    pub callgrind_requests: usize,
    /// Where to write results [default: target/bench]
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// The churn bench instead: many upstreams, each with a moving name
    #[arg(long)]
    pub churn: bool,
    /// Counts of upstreams, one run each
    #[arg(long, value_name = "N,M", value_parser = counts, default_value = "40,1000",
          help_heading = "With --churn")]
    pub upstreams: std::vec::Vec<usize>,
    /// Protocols to run it through, comma-separated: all, or proxy, fastcgi, uwsgi, scgi,
    /// memcached, grpc, http2
    #[arg(long, value_name = "all|P,Q", value_parser = wires, default_value = "proxy",
          help_heading = "With --churn")]
    pub protocols: std::vec::Vec<Wire>,
    /// Requests in all, per run
    #[arg(long, value_name = "N", value_parser = at_least_one,
          default_value_t = churn::Options::default().requests, help_heading = "With --churn")]
    requests: usize,
    /// nginx's worker processes
    #[arg(long, value_name = "W", value_parser = workers,
          default_value_t = churn::Options::default().workers, help_heading = "With --churn")]
    workers: u32,
    /// Probability the backend closes a reused connection
    #[arg(long, value_name = "P", value_parser = probability,
          default_value_t = churn::Options::default().reclaim, help_heading = "With --churn")]
    reclaim: f64,
}

impl Args {
    pub fn rounds(&self) -> usize {
        self.rounds.unwrap_or(if self.churn { 3 } else { 5 })
    }

    pub fn connections(&self) -> usize {
        self.connections.unwrap_or(32)
    }

    /// `--churn`'s options (one run per count of upstreams and protocol).
    pub fn churn(&self) -> Option<churn::Options> {
        let d = churn::Options::default();
        self.churn.then(|| churn::Options {
            requests: self.requests,
            connections: self.connections.unwrap_or(d.connections),
            workers: self.workers,
            reclaim: self.reclaim,
            ..d
        })
    }
}

/// A number, 0 taken as 1.
fn at_least_one(v: &str) -> Result<usize, String> {
    v.parse::<usize>()
        .map(|n| n.max(1))
        .map_err(|e| e.to_string())
}

fn workers(v: &str) -> Result<u32, String> {
    at_least_one(v).and_then(|n| u32::try_from(n).map_err(|e| e.to_string()))
}

fn seconds(v: &str) -> Result<Duration, String> {
    at_least_one(v).map(|s| Duration::from_secs(s as u64))
}

fn rate(v: &str) -> Result<f64, String> {
    at_least_one(v).map(|r| r as f64)
}

fn counts(v: &str) -> Result<Vec<usize>, String> {
    v.split(',').map(|n| at_least_one(n.trim())).collect()
}

fn probability(v: &str) -> Result<f64, String> {
    let p = v.parse::<f64>().ok().filter(|p| (0.0..=1.0).contains(p));
    p.ok_or_else(|| "expected a probability".into())
}

/// `all`, or protocols by their directive's prefix (`proxy`, `fastcgi`,
/// ...), comma-separated.
fn wires(v: &str) -> Result<Vec<Wire>, String> {
    if v == "all" {
        return Ok(Wire::ALL.to_vec());
    }
    v.split(',')
        .map(|name| {
            Wire::ALL
                .into_iter()
                .find(|w| w.name() == name.trim())
                .ok_or_else(|| {
                    let known: Vec<&str> = Wire::ALL.iter().map(|w| w.name()).collect();
                    format!("unknown `{name}`; expected all or {}", known.join(","))
                })
        })
        .collect()
}
