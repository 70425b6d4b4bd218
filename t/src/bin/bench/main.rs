//! `cargo xtask bench`: what the module costs, as ratios from one run.
//!
//! No faults, a fixed address, keepalive on. Stock, `module on` and `module
//! off` take turns (the order rotates every round, so drift on a noisy
//! machine spreads over all three): closed-loop throughput at saturation
//! (wrk when installed, else the harness's own closed loop) and latency at a
//! fixed open-loop rate. Then the cost of a rescue: time from the backend
//! closing a reused connection to the client's answer, for an ordinary
//! retry versus a rescued one, sorted by whether the retry's attempt found
//! a cached connection. And, when valgrind is installed, the one number a
//! noisy machine cannot blur: instructions per proxied request under
//! callgrind (the nginx process alone, counted between
//! `callgrind_control -z` and `-d` after a warm-up), stock vs module; and
//! where a rescue's instructions go, function by function.
//!
//! `--churn` runs the benchmark at scale instead (`generation_retry_t::scenarios::churn`):
//! many upstreams, each with a moving name, stock vs module vs patched.
//!
//! This file runs the cost bench and prints its tables; [`args`] reads the
//! command line, [`measure`] holds the three variants, the throughput
//! measurement, the statistics and where results go, [`rescue`] times the
//! retries, [`callgrind`] counts instructions, [`churn`] is `--churn`.

mod args;
mod callgrind;
mod churn;
mod measure;
mod rescue;
#[cfg(test)]
mod tests;

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use generation_retry_t::actors::load::{closed_loop, open_loop};
use generation_retry_t::scenarios::http::Lab;
use reqwest::Method;
use serde_json::json;

use args::Args;
use callgrind::{instructions, rescue_instructions};
use churn::churn_bench;
use measure::{have, median, out_dir, spread, throughput, write_results, Samples, Variant};
use rescue::{rescue_report, spare_connection, Retry};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let a = Args::parse();
    if let Some(c) = a.churn() {
        return churn_bench(&c, &a).await;
    }
    let wrk = have("wrk");
    let (major, minor, patch) = generation_retry_t::nginx::version();
    eprintln!(
        "bench: nginx {major}.{minor}.{patch}, {} rounds x {:?}, throughput by {} with {} connections, latency at {} rps",
        a.rounds(),
        a.duration,
        if wrk {
            "wrk"
        } else {
            "the harness closed loop"
        },
        a.connections(),
        a.rate
    );
    let mut samples: Vec<Samples> = Variant::ALL.iter().map(|_| Samples::default()).collect();
    for round in 0..a.rounds() {
        for k in 0..Variant::ALL.len() {
            let idx = (round + k) % Variant::ALL.len();
            let v = Variant::ALL[idx];
            let lab = Lab::start_spec(v.spec()).await;
            let url = lab.nginx.url("/bench");
            let _ = closed_loop(&lab.client, 4, Duration::from_millis(500), "/warm").await;
            let rps = throughput(&url, &lab.client, &a, wrk).await;
            let sent = open_loop(&lab.client, a.rate, a.duration, |i| {
                (Method::GET, format!("/lat/{i}"), None)
            })
            .await;
            assert!(sent.iter().all(|s| s.response.status() == 200));
            let mut ms: Vec<f64> = sent
                .iter()
                .map(|s| s.response.latency.as_secs_f64() * 1000.0)
                .collect();
            ms.sort_by(f64::total_cmp);
            let s = &mut samples[idx];
            s.rps.push(rps);
            s.p50.push(ms[ms.len() / 2]);
            s.p99.push(ms[(ms.len() * 99 / 100).min(ms.len() - 1)]);
            eprintln!(
                "round {}/{} {:<10} {:>9.0} req/s  p50 {:.3} ms  p99 {:.3} ms",
                round + 1,
                a.rounds(),
                v.name(),
                rps,
                s.p50.last().unwrap(),
                s.p99.last().unwrap()
            );
            lab.finish();
        }
    }

    // The cost of a rescue. Every other plain retry has a spare cached
    // connection to its address, so that both kinds of retry are seen
    // with the retry's attempt on a new connection and on a cached one.
    let (mut plain, mut rescued) = (Vec::new(), Vec::new());
    if a.races > 0 {
        let mut lab = Lab::start_spec(Variant::On.spec()).await;
        for i in 0..a.races {
            if i % 2 == 1 {
                spare_connection(&lab, i).await;
            }
            let (r, t) = lab.retry_without_flip(i).await;
            assert_eq!(r.status(), 200);
            plain.push(Retry::of(&lab, &format!("/plain/{i}"), t));
            let race = lab.race_once(i).await;
            assert_eq!(race.response.status(), 200);
            rescued.push(Retry::of(&lab, &race.path, race.after_release));
        }
        lab.finish();
    }

    let stock_rps = median(&samples[0].rps);
    let stock_p50 = median(&samples[0].p50);
    let stock_p99 = median(&samples[0].p99);
    println!(
        "\n{:<10} {:>12} {:>19} {:>8} {:>10} {:>8} {:>10} {:>8}",
        "variant", "req/s (med)", "spread", "ratio", "p50 ms", "ratio", "p99 ms", "ratio"
    );
    let mut rows = Vec::new();
    for (v, s) in Variant::ALL.iter().zip(&samples) {
        let (lo, hi) = spread(&s.rps);
        let (rps, p50, p99) = (median(&s.rps), median(&s.p50), median(&s.p99));
        println!(
            "{:<10} {:>12.0} {:>9.0}-{:<9.0} {:>8.3} {:>10.3} {:>8.3} {:>10.3} {:>8.3}",
            v.name(),
            rps,
            lo,
            hi,
            rps / stock_rps,
            p50,
            p50 / stock_p50,
            p99,
            p99 / stock_p99
        );
        rows.push(json!({
            "variant": v.name(),
            "rps_median": rps, "rps_min": lo, "rps_max": hi, "rps_ratio": rps / stock_rps,
            "p50_ms_median": p50, "p50_ratio": p50 / stock_p50,
            "p99_ms_median": p99, "p99_ratio": p99 / stock_p99,
            "rps_samples": s.rps, "p50_samples": s.p50, "p99_samples": s.p99,
        }));
    }
    let rescue = if a.races > 0 {
        rescue_report(&plain, &rescued)
    } else {
        serde_json::Value::Null
    };

    let rescue_breakdown = if a.callgrind_requests > 0 && a.races > 0 && have("valgrind") {
        let n = a.races.min(50);
        let rows = rescue_instructions(n).await;
        println!(
            "\nwhere a rescue's instructions go (callgrind, inclusive, per retry, {n} of each):"
        );
        println!(
            "{:<30} {:>12} {:>12} {:>10}",
            "function", "plain retry", "rescued", "difference"
        );
        for (label, plain, rescued) in &rows {
            println!(
                "{label:<30} {plain:>12.0} {rescued:>12.0} {:>10.0}",
                rescued - plain
            );
        }
        serde_json::Value::Array(
            rows.iter()
                .map(|(l, p, r)| json!({"function": l, "plain": p, "rescued": r}))
                .collect(),
        )
    } else {
        serde_json::Value::Null
    };

    let callgrind = if a.callgrind_requests > 0 && have("valgrind") {
        let n = a.callgrind_requests;
        let mut per_request = Vec::new();
        let mut dumps = Vec::new();
        for v in Variant::ALL {
            let (per, dump) = instructions(v, n).await;
            per_request.push(per);
            dumps.push(dump);
        }
        println!(
            "\ninstructions per proxied request (callgrind, nginx process, {n} requests \
             after a warm-up; dumps: {}):",
            dumps
                .first()
                .and_then(|d| d.parent())
                .map_or(String::new(), |d| d.display().to_string())
        );
        let mut rows = Vec::new();
        for (v, per) in Variant::ALL.iter().zip(&per_request) {
            println!(
                "{:<10} {:>10.0}  ratio {:.4}",
                v.name(),
                per,
                per / per_request[0]
            );
            rows.push(json!({"variant": v.name(), "instructions_per_request": per,
                             "ratio": per / per_request[0]}));
        }
        serde_json::Value::Array(rows)
    } else {
        serde_json::Value::Null
    };

    let out = out_dir(&a);
    let doc = json!({
        "tool": if wrk { "wrk" } else { "closed-loop" },
        "rounds": a.rounds(), "duration_s": a.duration.as_secs(), "connections": a.connections(),
        "latency_rate": a.rate, "variants": rows, "rescue": rescue,
        "callgrind": callgrind, "rescue_instructions": rescue_breakdown,
    });
    write_results(&out.join("bench.json"), &doc)
}
