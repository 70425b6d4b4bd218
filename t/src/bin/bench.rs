//! `cargo xtask bench`: what the module costs, as ratios from one run.
//!
//! No faults, a fixed address, keepalive on. Stock, `module on` and `module
//! off` take turns (the order rotates every round, so drift on a noisy
//! machine spreads over all three): closed-loop throughput at saturation
//! (wrk when installed, else the harness's own closed loop) and latency at a
//! fixed open-loop rate. Then the cost of a rescue: time from the backend
//! closing a reused connection to the client's answer, for an ordinary
//! cached-connection retry versus a rescued one. And, when valgrind is
//! installed, the one number a noisy machine cannot blur: instructions per
//! proxied request under callgrind (the nginx process alone), stock vs
//! module, from the difference of two runs of N and 2N requests so that
//! start-up and shut-down cancel out.

use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::time::Duration;

use generation_retry_t::load::{closed_loop, open_loop, Client};
use generation_retry_t::nginx::Flavor;
use generation_retry_t::scenario::{Lab, Spec};
use reqwest::Method;
use serde_json::json;

struct Args {
    rounds: usize,
    duration: Duration,
    rate: f64,
    connections: usize,
    races: usize,
    callgrind_requests: usize,
    out: Option<PathBuf>,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        rounds: 5,
        duration: Duration::from_secs(5),
        rate: 1000.0,
        connections: 32,
        races: 10,
        callgrind_requests: 2000,
        out: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |n: &str| it.next().ok_or(format!("{n} needs a value"));
        let int = |v: String, n: &str| {
            v.parse::<usize>()
                .map_err(|_| format!("{n}: bad number `{v}`"))
        };
        match arg.as_str() {
            "--rounds" => a.rounds = int(value("--rounds")?, "--rounds")?.max(1),
            "--duration" => {
                a.duration =
                    Duration::from_secs(int(value("--duration")?, "--duration")?.max(1) as u64)
            }
            "--rate" => a.rate = int(value("--rate")?, "--rate")?.max(1) as f64,
            "--connections" => {
                a.connections = int(value("--connections")?, "--connections")?.max(1)
            }
            "--races" => a.races = int(value("--races")?, "--races")?,
            "--callgrind-requests" => {
                a.callgrind_requests = int(value("--callgrind-requests")?, "--callgrind-requests")?
            }
            "--out" => a.out = Some(PathBuf::from(value("--out")?)),
            _ => {
                return Err(
                    "cargo xtask bench [--rounds N] [--duration S] [--rate RPS] \
                            [--connections C] [--races N] [--out DIR]"
                        .into(),
                )
            }
        }
    }
    Ok(a)
}

#[derive(Clone, Copy, PartialEq)]
enum Variant {
    Stock,
    On,
    Off,
}

impl Variant {
    const ALL: [Variant; 3] = [Variant::Stock, Variant::On, Variant::Off];

    fn name(self) -> &'static str {
        match self {
            Variant::Stock => "stock",
            Variant::On => "module-on",
            Variant::Off => "module-off",
        }
    }

    fn spec(self) -> Spec {
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
struct Samples {
    rps: Vec<f64>,
    p50: Vec<f64>,
    p99: Vec<f64>,
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    if s.is_empty() {
        return 0.0;
    }
    s[s.len() / 2]
}

fn spread(v: &[f64]) -> (f64, f64) {
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (min, max)
}

/// `wrk` output's `Requests/sec:` line.
fn wrk_rps(out: &str) -> Option<f64> {
    out.lines()
        .find_map(|l| l.trim().strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse().ok())
}

fn have(tool: &str) -> bool {
    Command::new(tool).arg("--version").output().is_ok()
}

/// Instructions the nginx process executed per request over `n` requests,
/// counted in one process: after start-up and `WARM_UP` requests (whose
/// number of readiness probes varies from run to run) callgrind's counters
/// are zeroed, `n` requests are served, and the counts are dumped
/// (`callgrind_control -z`, `-d`). What is left is the requests alone,
/// plus the timers that fire meanwhile. Also returns the dump, for a
/// per-function breakdown (`callgrind_annotate`).
async fn instructions(v: Variant, n: usize) -> (f64, PathBuf) {
    const WARM_UP: usize = 200;
    let dir =
        std::env::temp_dir().join(format!("generation-retry-callgrind-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("callgrind dir");
    let file = dir.join(format!("{}.out", v.name()));
    let spec = Spec {
        wrapper: vec![
            "valgrind".into(),
            "-q".into(),
            "--tool=callgrind".into(),
            format!("--callgrind-out-file={}", file.display()),
        ],
        ..v.spec()
    };
    let lab = Lab::start_spec(spec).await;
    for i in 0..WARM_UP {
        assert_eq!(lab.client.get(&format!("/warm/{i}")).await.status(), 200);
    }
    let pid = lab.nginx.pid().to_string();
    callgrind_control(&["-z", &pid]);
    for i in 0..n {
        assert_eq!(lab.client.get(&format!("/cg/{i}")).await.status(), 200);
    }
    callgrind_control(&["-d", &pid]);
    lab.finish();
    // The dump on demand is the file's first part: `FILE.1`.
    let dump = PathBuf::from(format!("{}.1", file.display()));
    let text = std::fs::read_to_string(&dump)
        .unwrap_or_else(|e| panic!("callgrind dump {}: {e}", dump.display()));
    let total: u64 = text
        .lines()
        .find_map(|l| {
            l.strip_prefix("summary: ")
                .or_else(|| l.strip_prefix("totals: "))
        })
        .and_then(|v| v.trim().parse().ok())
        .expect("callgrind summary line");
    (total as f64 / n as f64, dump)
}

/// Runs `callgrind_control` on a process, which must succeed.
fn callgrind_control(args: &[&str]) {
    let out = Command::new("callgrind_control")
        .args(args)
        .output()
        .expect("run callgrind_control");
    assert!(
        out.status.success(),
        "callgrind_control {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

async fn throughput(url: &str, client: &Client, a: &Args, wrk: bool) -> f64 {
    if wrk {
        let out = tokio::task::spawn_blocking({
            let (url, c, d) = (url.to_string(), a.connections, a.duration.as_secs());
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
        let (n, bad) = closed_loop(client, a.connections, a.duration, "/bench").await;
        assert_eq!(bad, 0, "non-200 answers under a fault-free load");
        n as f64 / a.duration.as_secs_f64()
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let a = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let wrk = have("wrk");
    let (major, minor, patch) = generation_retry_t::nginx::version();
    eprintln!(
        "bench: nginx {major}.{minor}.{patch}, {} rounds x {:?}, throughput by {} with {} connections, latency at {} rps",
        a.rounds,
        a.duration,
        if wrk {
            "wrk"
        } else {
            "the harness closed loop"
        },
        a.connections,
        a.rate
    );
    let mut samples: Vec<Samples> = Variant::ALL.iter().map(|_| Samples::default()).collect();
    for round in 0..a.rounds {
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
                a.rounds,
                v.name(),
                rps,
                s.p50.last().unwrap(),
                s.p99.last().unwrap()
            );
            lab.finish();
        }
    }

    // The cost of a rescue.
    let (mut plain, mut rescued) = (Vec::new(), Vec::new());
    if a.races > 0 {
        let mut lab = Lab::start_spec(Variant::On.spec()).await;
        for i in 0..a.races {
            let (r, t) = lab.retry_without_flip(i).await;
            assert_eq!(r.status(), 200);
            plain.push(t.as_secs_f64() * 1000.0);
            let race = lab.race_once(i).await;
            assert_eq!(race.response.status(), 200);
            rescued.push(race.after_release.as_secs_f64() * 1000.0);
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
        let (p, r) = (median(&plain), median(&rescued));
        println!(
            "\nrescue cost: close-to-answer median {p:.3} ms for a plain cached retry, \
             {r:.3} ms for a rescued one (ratio {:.3}, {} each)",
            r / p,
            a.races
        );
        json!({"plain_retry_ms_median": p, "rescued_retry_ms_median": r, "ratio": r / p,
               "plain_samples": plain, "rescued_samples": rescued})
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

    let out = a.out.unwrap_or_else(|| {
        std::env::var_os("GENERATION_RETRY_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../target")))
            .join("bench")
    });
    let doc = json!({
        "tool": if wrk { "wrk" } else { "closed-loop" },
        "rounds": a.rounds, "duration_s": a.duration.as_secs(), "connections": a.connections,
        "latency_rate": a.rate, "variants": rows, "rescue": rescue,
        "callgrind": callgrind,
    });
    if let Err(e) = std::fs::create_dir_all(&out).and_then(|_| {
        std::fs::write(
            out.join("bench.json"),
            serde_json::to_string_pretty(&doc).unwrap() + "\n",
        )
    }) {
        eprintln!("bench: cannot write {}: {e}", out.display());
        return ExitCode::FAILURE;
    }
    println!("results: {}", out.join("bench.json").display());
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    #[test]
    fn parses_wrk_and_medians() {
        let out = "Running 5s test @ http://127.0.0.1:1/\n  1 threads and 32 connections\n\
                   Requests/sec:  12345.67\nTransfer/sec:      1.00MB\n";
        assert_eq!(super::wrk_rps(out), Some(12345.67));
        assert_eq!(super::wrk_rps("nothing"), None);
        assert_eq!(super::median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(super::spread(&[3.0, 1.0, 2.0]), (1.0, 3.0));
    }
}
