//! The three variants the cost bench compares, and how one is measured:
//! throughput (wrk or the harness's closed loop), the statistics of the
//! samples, and where the results are written.

use std::path::PathBuf;
use std::process::{Command, ExitCode};

use generation_retry_t::actors::load::{closed_loop, Client};
use generation_retry_t::nginx::Flavor;
use generation_retry_t::scenarios::http::Spec;

use crate::args::Args;

#[derive(Clone, Copy, PartialEq)]
pub enum Variant {
    Stock,
    On,
    Off,
}

impl Variant {
    pub const ALL: [Variant; 3] = [Variant::Stock, Variant::On, Variant::Off];

    pub fn name(self) -> &'static str {
        match self {
            Variant::Stock => "stock",
            Variant::On => "module-on",
            Variant::Off => "module-off",
        }
    }

    pub fn spec(self) -> Spec {
        match self {
            Variant::Stock => Spec::single_peer(Flavor::stock(), "", ""),
            Variant::On => {
                Spec::single_peer(Flavor::with_module(), "", "generation_retry_resnapshot on;")
            }
            Variant::Off => Spec::single_peer(
                Flavor::with_module(),
                "",
                "generation_retry_resnapshot off;",
            ),
        }
    }
}

#[derive(Default)]
pub struct Samples {
    pub rps: Vec<f64>,
    pub p50: Vec<f64>,
    pub p99: Vec<f64>,
}

pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    if s.is_empty() {
        return 0.0;
    }
    s[s.len() / 2]
}

pub fn spread(v: &[f64]) -> (f64, f64) {
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (min, max)
}

/// `wrk` output's `Requests/sec:` line.
pub fn wrk_rps(out: &str) -> Option<f64> {
    out.lines()
        .find_map(|l| l.trim().strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse().ok())
}

pub fn have(tool: &str) -> bool {
    Command::new(tool).arg("--version").output().is_ok()
}

pub async fn throughput(url: &str, client: &Client, a: &Args, wrk: bool) -> f64 {
    if wrk {
        let out = tokio::task::spawn_blocking({
            let (url, c, d) = (url.to_string(), a.connections(), a.duration.as_secs());
            move || {
                Command::new("wrk")
                    .args(["-t1", &format!("-c{c}"), &format!("-d{d}s"), &url])
                    .output()
                    .expect("run wrk")
            }
        })
        .await
        .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        wrk_rps(&text).unwrap_or_else(|| panic!("no Requests/sec in wrk output:\n{text}"))
    } else {
        let (n, bad) = closed_loop(client, a.connections(), a.duration, "/bench").await;
        assert_eq!(bad, 0, "non-200 answers under a fault-free load");
        n as f64 / a.duration.as_secs_f64()
    }
}

/// `--out`, or `target/bench`.
pub fn out_dir(a: &Args) -> PathBuf {
    a.out.clone().unwrap_or_else(|| {
        std::env::var_os("GENERATION_RETRY_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../target")))
            .join("bench")
    })
}

/// Writes `doc` to `path` and says where.
pub fn write_results(path: &std::path::Path, doc: &serde_json::Value) -> ExitCode {
    if let Err(e) = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|_| std::fs::write(path, serde_json::to_string_pretty(doc).unwrap() + "\n"))
    {
        eprintln!("bench: cannot write {}: {e}", path.display());
        return ExitCode::FAILURE;
    }
    println!("results: {}", path.display());
    ExitCode::SUCCESS
}
