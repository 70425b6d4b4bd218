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
//! `--churn` runs the benchmark at scale instead (`generation_retry_t::churn`):
//! many upstreams, each with a moving name, stock vs module vs patched.

use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::time::Duration;

use generation_retry_t::churn;
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
    /// `--churn`: the churn bench instead (`churn::Options`, one run per
    /// count of upstreams and variant).
    churn: Option<ChurnArgs>,
}

struct ChurnArgs {
    upstreams: Vec<usize>,
    opts: churn::Options,
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
        churn: None,
    };
    let mut churn_on = false;
    let mut upstreams = vec![40, 1000];
    let mut c = churn::Options::default();
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
            "--churn" => churn_on = true,
            "--upstreams" => {
                upstreams = value("--upstreams")?
                    .split(',')
                    .map(|n| int(n.trim().to_string(), "--upstreams").map(|n| n.max(1)))
                    .collect::<Result<_, _>>()?
            }
            "--requests" => c.requests = int(value("--requests")?, "--requests")?.max(1),
            "--workers" => c.workers = int(value("--workers")?, "--workers")?.max(1) as u32,
            "--reclaim" => {
                let v = value("--reclaim")?;
                c.reclaim = v
                    .parse::<f64>()
                    .ok()
                    .filter(|p| (0.0..=1.0).contains(p))
                    .ok_or(format!("--reclaim: expected a probability, got `{v}`"))?
            }
            _ => {
                return Err(
                    "cargo xtask bench [--rounds N] [--duration S] [--rate RPS] \
                            [--connections C] [--races N] [--callgrind-requests N] [--out DIR]\n\
                     cargo xtask bench --churn [--upstreams N,M] [--requests N] [--rounds N] \
                            [--connections C] [--workers W] [--reclaim P] [--out DIR]"
                        .into(),
                )
            }
        }
    }
    if churn_on {
        let given = |o: &str| std::env::args().any(|x| x == o);
        if given("--connections") {
            c.connections = a.connections;
        }
        if !given("--rounds") {
            a.rounds = 3;
        }
        a.churn = Some(ChurnArgs { upstreams, opts: c });
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
    let (file, wrapper) = callgrind(v.name(), &[]);
    let spec = Spec {
        wrapper,
        // The name resolved once: no re-resolve (a resolver exchange of
        // thousands of instructions, about one a second of a run that
        // callgrind slows to tens of seconds) counts with the requests.
        valid: 3600,
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

/// Functions whose inclusive instructions per retry the rescue breakdown
/// reports (a rescue runs each): the module's full-path
/// `get` (the retry's whole selection: with a rescue, the refusal, the
/// re-snapshot and the second selection), `decide` (a refusal's handling:
/// the re-snapshot, the second selection, the tally and the line),
/// `settle` (the tally and the rescue line alone), the balancer's init
/// (which a re-snapshot calls again), and nginx's error log writer.
const RESCUE_FUNCTIONS: [(&str, &str); 5] = [
    ("module get (whole selection)", "peer::get_peer"),
    ("refusal handled (decide)", "peer::decide"),
    ("tally and rescue line", "peer::settle"),
    (
        "round-robin init",
        "ngx_http_upstream_init_round_robin_peer",
    ),
    ("error log lines", "ngx_log_error_core"),
];

/// Where a rescue's instructions go: nginx with the module under callgrind
/// with collection off, switched on (`callgrind_control -i on`) just
/// before the backend closes the held first attempt and off once the
/// client has its answer, so that only the retries count: `n` plain
/// retries in one dump, `n` rescued ones in another. Every plain retry is
/// given a spare cached connection, as every rescued one has (the probe
/// that saw the new address left it), so both retries' attempts go out on
/// a cached connection. Both kinds take the request's full state when the
/// first attempt is freed as failed; what a rescue adds is in its `get`.
/// The name re-resolves every second here (the race needs it): a
/// re-resolve that lands in a window counts with it, in either kind.
async fn rescue_instructions(n: usize) -> Vec<(&'static str, f64, f64)> {
    let (file, wrapper) = callgrind("rescue", &["--instr-atstart=no"]);
    let spec = Spec {
        wrapper,
        ..Variant::On.spec()
    };
    let mut lab = Lab::start_spec(spec).await;
    let pid = lab.nginx.pid().to_string();
    let on = || callgrind_control(&["-i", "on", &pid]);
    let mut per_kind = Vec::new();
    for (k, kind) in ["plain", "rescued"].into_iter().enumerate() {
        callgrind_control(&["-z", &pid]);
        for i in 0..n {
            let status = if kind == "plain" {
                spare_connection(&lab, i).await;
                let (r, t) = lab.retry_without_flip_then(i, |_| on()).await;
                callgrind_control(&["-i", "off", &pid]);
                let retry = Retry::of(&lab, &format!("/plain/{i}"), t);
                assert!(retry.reused, "plain retry {i} had no cached connection");
                r.status()
            } else {
                let race = lab.race_once_then(i, |_| on()).await;
                callgrind_control(&["-i", "off", &pid]);
                let retry = Retry::of(&lab, &race.path, race.after_release);
                assert!(retry.reused, "rescued retry {i} had no cached connection");
                race.response.status()
            };
            assert_eq!(status, 200, "{kind} retry {i}");
        }
        callgrind_control(&["-d", &pid]);
        let dump = PathBuf::from(format!("{}.{}", file.display(), k + 1));
        let out = Command::new("callgrind_annotate")
            .args(["--inclusive=yes", "--threshold=100"])
            .arg(&dump)
            .output()
            .expect("run callgrind_annotate");
        assert!(
            out.status.success(),
            "callgrind_annotate {}: {}",
            dump.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        per_kind.push(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    lab.finish();
    RESCUE_FUNCTIONS
        .iter()
        .map(|(label, f)| {
            let per = |text: &str| inclusive(text, f).unwrap_or(0) as f64 / n as f64;
            assert!(
                inclusive(&per_kind[1], f).is_some(),
                "no `{f}` in the rescues' callgrind dump: renamed or inlined?"
            );
            (*label, per(&per_kind[0]), per(&per_kind[1]))
        })
        .collect()
}

/// The sum of `callgrind_annotate` lines' counts (the first column) for
/// functions whose name ends with `function` (so that `get_peer` is not
/// `get_peer_data`), generic parameters and a legacy Rust symbol's hash
/// (`::h` and 16 hex digits) left out; `None` when no line names it.
fn inclusive(annotate: &str, function: &str) -> Option<u64> {
    let counts: Vec<u64> = annotate
        .lines()
        .filter_map(|l| {
            let (count, rest) = l.trim_start().split_once(' ')?;
            let name = rest.split_once(':').map_or(rest, |(_, n)| n);
            let name = name.split(" [").next().unwrap_or(name).trim();
            let name = name
                .split('<')
                .next()
                .unwrap_or(name)
                .trim_end_matches("::");
            let name = match name.rsplit_once("::h") {
                Some((head, hash))
                    if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) =>
                {
                    head
                }
                _ => name,
            };
            name.ends_with(function)
                .then(|| count.replace(',', "").parse::<u64>().ok())
                .flatten()
        })
        .collect();
    (!counts.is_empty()).then(|| counts.iter().sum())
}

/// nginx under callgrind with `options`, writing `NAME.out` in this run's
/// callgrind directory: the file, and the command to run nginx under.
fn callgrind(name: &str, options: &[&str]) -> (PathBuf, Vec<String>) {
    let dir =
        std::env::temp_dir().join(format!("generation-retry-callgrind-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("callgrind dir");
    let file = dir.join(format!("{name}.out"));
    let mut wrapper: Vec<String> = ["valgrind", "-q", "--tool=callgrind"]
        .iter()
        .chain(options)
        .map(|s| s.to_string())
        .collect();
    wrapper.push(format!("--callgrind-out-file={}", file.display()));
    (file, wrapper)
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

/// One retry of the rescue-cost runs: from the backend closing the first
/// attempt's connection to the client's answer, and whether the retry's
/// attempt went out on a connection nginx had cached (a new one costs a
/// connect and an accept).
#[derive(Clone, Copy)]
struct Retry {
    ms: f64,
    reused: bool,
}

impl Retry {
    /// The retry of the request for `path`: the backend saw it twice, the
    /// second time on a connection that had served `index_on_conn`
    /// requests before it.
    fn of(lab: &Lab, path: &str, t: Duration) -> Retry {
        let seen: Vec<_> = lab
            .backend
            .seen()
            .into_iter()
            .filter(|s| s.path == path)
            .collect();
        assert_eq!(
            seen.len(),
            2,
            "{path}: expected a first attempt and a retry"
        );
        Retry {
            ms: t.as_secs_f64() * 1000.0,
            reused: seen[1].index_on_conn > 0,
        }
    }
}

/// Two requests at once to the current address, each held 20 ms: nginx
/// opens two connections and caches both, so the next failed attempt's
/// retry finds one.
async fn spare_connection(lab: &Lab, i: usize) {
    lab.backend.set_delay(Duration::from_millis(20));
    let (p0, p1) = (format!("/spare/{i}/0"), format!("/spare/{i}/1"));
    let (x, y) = tokio::join!(lab.client.get(&p0), lab.client.get(&p1));
    lab.backend.set_delay(Duration::ZERO);
    assert_eq!((x.status(), y.status()), (200, 200));
}

/// Median, 10th and 90th percentile of `v` (zeros when empty).
fn spread3(v: &[f64]) -> (f64, f64, f64) {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    if s.is_empty() {
        return (0.0, 0.0, 0.0);
    }
    let at = |p: f64| s[((s.len() - 1) as f64 * p).round() as usize];
    (at(0.5), at(0.1), at(0.9))
}

/// The rescue cost table: plain and rescued retries, by whether the
/// retry's attempt had a cached connection, with the ratio of the rescued
/// median to the plain one of the same kind.
fn rescue_report(plain: &[Retry], rescued: &[Retry]) -> serde_json::Value {
    println!(
        "\nrescue cost: close-to-answer, ms (the retry's attempt on a new or a cached connection)"
    );
    println!(
        "{:<26} {:>5} {:>8} {:>8} {:>8} {:>8}",
        "retry", "n", "median", "p10", "p90", "ratio"
    );
    let mut rows = Vec::new();
    for reused in [false, true] {
        let kind = if reused { "cached" } else { "new" };
        let ms = |v: &[Retry]| -> Vec<f64> {
            v.iter()
                .filter(|r| r.reused == reused)
                .map(|r| r.ms)
                .collect()
        };
        let (p, r) = (ms(plain), ms(rescued));
        let (pm, p10, p90) = spread3(&p);
        let (rm, r10, r90) = spread3(&r);
        let ratio = if p.is_empty() || r.is_empty() {
            None
        } else {
            Some(rm / pm)
        };
        for (name, n, (m, lo, hi), ratio) in [
            ("plain", p.len(), (pm, p10, p90), None),
            ("rescued", r.len(), (rm, r10, r90), ratio),
        ] {
            if n == 0 {
                continue;
            }
            println!(
                "{:<26} {n:>5} {m:>8.3} {lo:>8.3} {hi:>8.3} {:>8}",
                format!("{name}, {kind} connection"),
                ratio.map_or(String::new(), |x| format!("{x:.3}"))
            );
            rows.push(
                json!({"retry": name, "connection": kind, "n": n, "median_ms": m,
                             "p10_ms": lo, "p90_ms": hi, "ratio_to_plain": ratio}),
            );
        }
    }
    let all = |v: &[Retry]| v.iter().map(|r| r.ms).collect::<Vec<_>>();
    json!({"rows": rows, "plain_samples": all(plain), "rescued_samples": all(rescued),
           "plain_reused": plain.iter().map(|r| r.reused).collect::<Vec<_>>(),
           "rescued_reused": rescued.iter().map(|r| r.reused).collect::<Vec<_>>()})
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
    if let Some(c) = &a.churn {
        return churn_bench(c, &a).await;
    }
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
        "rounds": a.rounds, "duration_s": a.duration.as_secs(), "connections": a.connections,
        "latency_rate": a.rate, "variants": rows, "rescue": rescue,
        "callgrind": callgrind, "rescue_instructions": rescue_breakdown,
    });
    write_results(&out.join("bench.json"), &doc)
}

/// `--out`, or `target/bench`.
fn out_dir(a: &Args) -> PathBuf {
    a.out.clone().unwrap_or_else(|| {
        std::env::var_os("GENERATION_RETRY_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../target")))
            .join("bench")
    })
}

/// Writes `doc` to `path` and says where.
fn write_results(path: &std::path::Path, doc: &serde_json::Value) -> ExitCode {
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

/// `--churn`: for each count of upstreams, stock, the module and the
/// patched nginx (when built) under the same churn, `--rounds` times with
/// the order rotated every round; a table of each variant's medians
/// (rate, latency) and sums (502s, retries, counters) with the ratios of
/// the medians to stock's at that count. Fails when a fixing variant left
/// a generation 502 or an unrescued refusal in any run, or when stock met
/// no race at all (the run then proves nothing: more requests, or a
/// higher `--reclaim`).
async fn churn_bench(c: &ChurnArgs, a: &Args) -> ExitCode {
    let (major, minor, patch) = generation_retry_t::nginx::version();
    let variants: Vec<churn::Variant> = churn::Variant::ALL
        .into_iter()
        .filter(|v| *v != churn::Variant::Patched || Flavor::patched_available())
        .collect();
    if !Flavor::patched_available() {
        eprintln!("bench --churn: no patched nginx for this version: stock and module-on only");
    }
    eprintln!(
        "bench --churn: nginx {major}.{minor}.{patch}, {} rounds of {} requests over {:?} \
         upstreams, {} clients, {} workers, reclaim {} (delay up to {:?}), names moved every {} s",
        a.rounds,
        c.opts.requests,
        c.upstreams,
        c.opts.connections,
        c.opts.workers,
        c.opts.reclaim,
        c.opts.reclaim_delay,
        c.opts.valid + 1
    );
    let mut rows = Vec::new();
    let mut runs = Vec::new();
    let mut failures = Vec::new();
    let mut table = vec![format!(
        "{:<10} {:>9} {:>9} {:>9} {:>6} {:>8} {:>6} {:>8} {:>6} {:>6} {:>6} {:>7} {:>6} {:>7} {:>7}",
        "variant", "upstreams", "requests", "req/s", "ratio", "p50 ms", "ratio", "p99 ms",
        "ratio", "2-hop", "1-hop", "retried", "swaps", "busy", "rescued"
    )];
    for &n in &c.upstreams {
        let opts = churn::Options {
            upstreams: n,
            ..c.opts.clone()
        };
        let mut got: Vec<Vec<churn::Outcome>> = variants.iter().map(|_| Vec::new()).collect();
        for round in 0..a.rounds {
            for k in 0..variants.len() {
                let idx = (round + k) % variants.len();
                let o = churn::run(variants[idx], &opts).await;
                eprintln!(
                    "round {}/{} {:<10} {n:>5} upstreams {:>7.0} req/s  p50 {:.3} ms  \
                     p99 {:.3} ms  2-hop {}  1-hop {}  busy {:?}  rescued {:?}",
                    round + 1,
                    a.rounds,
                    o.variant.name(),
                    o.rps,
                    o.p50_ms,
                    o.p99_ms,
                    o.two_hop_502,
                    o.one_hop_502,
                    o.busy,
                    o.rescued
                );
                failures.extend(o.violations());
                runs.push(o.json());
                got[idx].push(o);
            }
        }
        let med = |os: &[churn::Outcome], f: fn(&churn::Outcome) -> f64| {
            median(&os.iter().map(f).collect::<Vec<_>>())
        };
        let sum = |os: &[churn::Outcome], f: fn(&churn::Outcome) -> usize| -> usize {
            os.iter().map(f).sum()
        };
        let total = |os: &[churn::Outcome], f: fn(&churn::Outcome) -> Option<u64>| {
            os.iter().map(f).sum::<Option<u64>>()
        };
        let base = &got[0];
        let (rps0, p500, p990) = (
            med(base, |o| o.rps),
            med(base, |o| o.p50_ms),
            med(base, |o| o.p99_ms),
        );
        if sum(base, |o| o.two_hop_502 + o.one_hop_502) == 0 {
            failures.push(format!(
                "stock with {n} upstreams met no generation 502: the run shows nothing; \
                 give it more --requests or a higher --reclaim"
            ));
        }
        // The module met the race too (its zero 502s are rescues, not luck).
        if let Some(on) = variants.iter().position(|v| *v == churn::Variant::On) {
            if got[on].iter().filter_map(|o| o.busy).sum::<u64>() == 0 {
                failures.push(format!(
                    "module-on with {n} upstreams counted no refusal: it met no race"
                ));
            }
        }
        for (v, os) in variants.iter().zip(&got) {
            let (rps, p50, p99) = (
                med(os, |o| o.rps),
                med(os, |o| o.p50_ms),
                med(os, |o| o.p99_ms),
            );
            let (busy, rescued) = (total(os, |o| o.busy), total(os, |o| o.rescued));
            // The patched nginx has no counters: its re-selection lines.
            let rescued = rescued
                .or((*v == churn::Variant::Patched).then(|| sum(os, |o| o.rescue_lines) as u64));
            let count = |x: Option<u64>| x.map_or("-".to_string(), |x| x.to_string());
            let (two_hop, one_hop) = (sum(os, |o| o.two_hop_502), sum(os, |o| o.one_hop_502));
            table.push(format!(
                "{:<10} {:>9} {:>9} {:>9.0} {:>6.3} {:>8.3} {:>6.3} {:>8.3} {:>6.3} {:>6} {:>6} {:>7} {:>6} {:>7} {:>7}",
                v.name(),
                n,
                sum(os, |o| o.requests),
                rps,
                rps / rps0,
                p50,
                p50 / p500,
                p99,
                p99 / p990,
                two_hop,
                one_hop,
                sum(os, |o| o.attempt_failures),
                sum(os, |o| o.swaps),
                count(busy),
                count(rescued),
            ));
            rows.push(json!({
                "variant": v.name(), "upstreams": n, "rounds": os.len(),
                "requests": sum(os, |o| o.requests),
                "rps_median": rps, "rps_ratio": rps / rps0,
                "p50_ms_median": p50, "p50_ratio": p50 / p500,
                "p99_ms_median": p99, "p99_ratio": p99 / p990,
                "two_hop_502": two_hop, "one_hop_502": one_hop,
                "busy": busy, "rescued": rescued,
            }));
        }
    }
    println!("\n{}", table.join("\n"));
    println!(
        "\n(medians of {} rounds; 502s, retried (attempts nginx logged as failed), swaps (DNS \
         answers that moved a name), busy and rescued are sums; the patched nginx's rescued \
         column counts its re-selection lines)",
        a.rounds
    );
    let doc = json!({
        "nginx": format!("{major}.{minor}.{patch}"), "rounds": a.rounds,
        "requests": c.opts.requests, "connections": c.opts.connections,
        "workers": c.opts.workers, "reclaim": c.opts.reclaim,
        "reclaim_delay_ms": c.opts.reclaim_delay.as_millis() as u64,
        "valid_s": c.opts.valid, "rows": rows, "runs": runs, "failures": failures,
    });
    let written = write_results(&out_dir(a).join("churn.json"), &doc);
    if failures.is_empty() {
        written
    } else {
        for f in &failures {
            eprintln!("bench --churn: {f}");
        }
        ExitCode::FAILURE
    }
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

    #[test]
    fn inclusive_counts_from_callgrind_annotate() {
        let out = "\
5,076,054 (100.0%)  PROGRAM TOTALS
  817,470 (16.10%)  ???:ngx_http_upstream_generation_retry_module::peer::get_peer<x::Http> [/m.so]
      400 ( 0.01%)  ???:ngx_http_upstream_generation_retry_module::peer::get_peer::h0123456789abcdef [/m.so]
    1,000 ( 0.02%)  ???:mod::peer::get_peer_data [/m.so]
   12,345 ( 0.24%)  src/core/ngx_log.c:ngx_log_error_core [/usr/sbin/nginx]
";
        assert_eq!(super::inclusive(out, "peer::get_peer"), Some(817_870));
        assert_eq!(super::inclusive(out, "ngx_log_error_core"), Some(12_345));
        assert_eq!(super::inclusive(out, "peer::decide"), None);
    }
}
