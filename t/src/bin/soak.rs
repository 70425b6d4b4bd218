//! `cargo xtask soak [--nginx VERSION] [--seconds N] [--upstreams N]`:
//! the soak of `generation_retry_t::scenarios::soak` (ten minutes by default), its
//! samples as a table, its verdict; results in `target/bench/soak.json`.
//! Exits 1 on any violation.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use generation_retry_t::scenarios::soak::{run, Options};

#[tokio::main(flavor = "multi_thread", worker_threads = 4)]
async fn main() -> ExitCode {
    let mut o = Options::default();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut num = |name: &str| -> u64 {
            args.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{name} needs a number"))
        };
        match a.as_str() {
            "--seconds" => o.duration = Duration::from_secs(num("--seconds")),
            "--upstreams" => o.upstreams = num("--upstreams") as usize,
            "--connections" => o.connections = num("--connections") as usize,
            "--warm-up" => o.warm_up = Duration::from_secs(num("--warm-up")),
            other => {
                eprintln!(
                    "soak: unknown argument {other:?} \
                     (--seconds N, --upstreams N, --connections N, --warm-up N)"
                );
                return ExitCode::from(2);
            }
        }
    }
    println!(
        "soak: {} s, {} upstreams with moving names, {} clients, {} workers, reload every {} s, \
         USR2 at 40%, a worker killed at 70%",
        o.duration.as_secs(),
        o.upstreams,
        o.connections,
        o.workers,
        o.hup_every.as_secs()
    );
    let r = run(&o).await;
    println!(
        "\n{:>7} {:>11} {:>8} {:>15} {:>9} {:>8}",
        "t (s)", "master KiB", "workers", "max worker KiB", "zone KiB", "counted"
    );
    for s in &r.samples {
        println!(
            "{:>7.0} {:>11} {:>8} {:>15} {:>9} {:>8}",
            s.at_s, s.master_kib, s.workers, s.worker_kib_max, s.zone_kib, s.counted
        );
    }
    let answered: usize = r.statuses.values().sum();
    println!(
        "\n{answered} requests in {:.0} s ({:.0}/s), by status {:?}; {} logged; \
         generation 502s: {} 2-hop, {} 1-hop; {} reloads, USR2 at {:.0} s, worker {} killed",
        r.seconds,
        answered as f64 / r.seconds,
        r.statuses,
        r.logged,
        r.two_hop_502,
        r.one_hop_502,
        r.reloads,
        r.upgrade_at_s,
        r.killed
    );
    println!(
        "new master: busy {} = rescued {} + failed {}; its access log: {} rescued, {} failed",
        r.counters[0], r.counters[1], r.counters[2], r.log_rescued, r.log_failed
    );
    let out = std::env::var_os("GENERATION_RETRY_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../target")))
        .join("bench/soak.json");
    let _ = std::fs::create_dir_all(out.parent().unwrap());
    let _ = std::fs::write(
        &out,
        serde_json::to_string_pretty(&r.json()).unwrap() + "\n",
    );
    let v = r.violations(&o);
    if v.is_empty() {
        println!("soak: passed ({})", out.display());
        ExitCode::SUCCESS
    } else {
        for line in &v {
            println!("soak: FAILED: {line}");
        }
        ExitCode::FAILURE
    }
}
