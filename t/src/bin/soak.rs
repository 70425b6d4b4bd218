//! `cargo xtask soak [--nginx VERSION] [--seconds N] [--upstreams N]`:
//! the soak of `generation_retry_t::scenarios::soak` (ten minutes by default), its
//! samples as a table, its verdict; results in `target/bench/soak.json`.
//! Exits 1 on any violation.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use generation_retry_t::scenarios::soak::{run, Options};

/// The soak: churn under reloads, an upgrade and a killed worker; fails on
/// a generation 502, a fatal log line, growing memory or counters that
/// disagree.
#[derive(Parser, Debug)]
#[command(bin_name = "cargo xtask soak")]
#[command(args_override_self = true, allow_negative_numbers = true)]
struct Args {
    /// Seconds of load
    #[arg(long, value_name = "N", default_value_t = Options::default().duration.as_secs())]
    seconds: u64,
    /// Upstreams, each with a moving name
    #[arg(long, value_name = "N", default_value_t = Options::default().upstreams)]
    upstreams: usize,
    /// Closed-loop clients
    #[arg(long, value_name = "N", default_value_t = Options::default().connections)]
    connections: usize,
    /// Seconds of warm-up, whose memory samples are not held to flatness
    #[arg(long, value_name = "N", default_value_t = Options::default().warm_up.as_secs())]
    warm_up: u64,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 4)]
async fn main() -> ExitCode {
    let a = Args::parse();
    let o = Options {
        duration: Duration::from_secs(a.seconds),
        upstreams: a.upstreams,
        connections: a.connections,
        warm_up: Duration::from_secs(a.warm_up),
        ..Options::default()
    };
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &str) -> Result<Args, clap::Error> {
        Args::try_parse_from(std::iter::once("soak").chain(args.split_whitespace()))
    }

    #[test]
    fn the_defaults_are_the_old_ones() {
        let a = parse("").unwrap();
        assert_eq!(
            (a.seconds, a.upstreams, a.connections, a.warm_up),
            (600, 40, 32, 60)
        );
        let a = parse("--seconds 60 --upstreams=4 --connections 8 --warm-up 5 --seconds 30");
        let a = a.unwrap();
        assert_eq!(
            (a.seconds, a.upstreams, a.connections, a.warm_up),
            (30, 4, 8, 5)
        );
        let e = parse("--seconds x").unwrap_err().to_string();
        assert!(e.contains("--seconds"), "{e}");
    }

    #[test]
    fn a_misspelled_option_is_an_error_naming_it() {
        let e = parse("--warmup 5").unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::UnknownArgument);
        assert!(e.to_string().contains("--warmup"), "{e}");
    }
}
