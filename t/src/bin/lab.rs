//! `cargo xtask lab`: stock nginx 1.28.0 beside nginx with the module (and
//! the workarounds people use today) under the same load and faults; prints
//! the table, writes results.json, results.csv and chart.svg, then checks
//! every arm it ran against its claims (`lab::Claim`) and exits non-zero
//! naming each claim a run failed.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use generation_retry_t::nginx::Flavor;
use generation_retry_t::scenarios::lab::{self, Arm, ArmResult, Options};

/// Stock nginx beside nginx with the module (and today's workarounds) under
/// the same load and faults; checks each arm's claims.
#[derive(Parser, Debug)]
#[command(bin_name = "cargo xtask lab", after_help = arms_help())]
#[command(args_override_self = true, allow_negative_numbers = true)]
struct Args {
    /// Requests per second, open loop
    #[arg(long, value_name = "N", value_parser = positive,
          default_value_t = Options::default().rate)]
    rate: f64,
    /// Seconds of load per arm (8 with --quick)
    #[arg(long, value_name = "S", value_parser = seconds, default_value = "20")]
    duration: Duration,
    /// Arms to run, comma-separated (names below) [default: all]
    #[arg(long, value_name = "A,B,...", value_parser = arm_list)]
    arms: Option<std::vec::Vec<Arm>>,
    /// Resolver valid= seconds (the seed used 5)
    #[arg(long, value_name = "S", value_parser = clap::value_parser!(u32).range(1..),
          default_value_t = Options::default().valid)]
    valid: u32,
    /// Probability a reused connection is reclaimed
    #[arg(long, value_name = "P", value_parser = probability,
          default_value_t = Options::default().reclaim)]
    reclaim: f64,
    /// Seed of the fault injection
    #[arg(long, value_name = "N", default_value_t = Options::default().seed)]
    seed: u64,
    /// About a minute: 8 s per arm, the quick arms (below)
    #[arg(long)]
    quick: bool,
    /// Where to write results [default: target/lab/<UTC time>]
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Do not check the arms' claims (stated for the defaults and for 10 s at
    /// 250 rps, reclaim 0.1; under memcheck printed, not enforced)
    #[arg(long)]
    no_check: bool,
}

impl Args {
    /// The load and faults: `--quick` runs 8 s whatever `--duration` says.
    fn options(&self) -> Options {
        Options {
            rate: self.rate,
            duration: if self.quick {
                Duration::from_secs(8)
            } else {
                self.duration
            },
            valid: self.valid,
            reclaim: self.reclaim,
            seed: self.seed,
            ..Options::default()
        }
    }

    /// `--arms`, else every arm (`--quick`'s), the patched ones only when
    /// `patched` (the patched nginx is built).
    fn arms(&self, patched: bool) -> Vec<Arm> {
        let default = |a: &&Arm| (!self.quick || a.quick()) && (!a.patched() || patched);
        self.arms
            .clone()
            .unwrap_or_else(|| Arm::ALL.iter().filter(default).copied().collect())
    }
}

/// The arm names and `--quick`'s, from the arm table.
fn arms_help() -> String {
    let names = |f: fn(&Arm) -> bool| {
        let n: Vec<&str> = Arm::ALL.iter().filter(|a| f(a)).map(|a| a.name()).collect();
        n.join(", ")
    };
    format!(
        "Arms: {}.\n\n--quick runs {} (and {} when built).",
        names(|_| true),
        names(|a| a.quick() && !a.patched()),
        names(|a| a.quick() && a.patched()),
    )
}

fn positive(v: &str) -> Result<f64, String> {
    let x = v.parse::<f64>().ok().filter(|x| x.is_finite() && *x > 0.0);
    x.ok_or_else(|| "not a positive number".into())
}

fn seconds(v: &str) -> Result<Duration, String> {
    let d = Duration::try_from_secs_f64(positive(v)?)
        .ok()
        .filter(|d| !d.is_zero());
    d.ok_or_else(|| "not a positive number of seconds".into())
}

fn probability(v: &str) -> Result<f64, String> {
    let p = v.parse::<f64>().ok().filter(|p| (0.0..=1.0).contains(p));
    p.ok_or_else(|| "not a probability (0 to 1)".into())
}

fn arm_list(v: &str) -> Result<Vec<Arm>, String> {
    let arm = |n: &str| Arm::parse(n.trim()).ok_or(format!("unknown arm `{n}`"));
    v.split(',').map(arm).collect()
}

/// `YYYYmmdd-HHMMSS` in UTC.
fn utc_stamp() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The arm's progress bar, drawn over the previous one.
fn progress_line(i: usize, n: usize, arm: &str, f: f64) {
    let width = 30;
    let done = (f * width as f64).round() as usize;
    eprint!(
        "\r[{}/{n}] {arm:<26} [{}{}] {:>3.0}%",
        i + 1,
        "#".repeat(done),
        ".".repeat(width - done.min(width)),
        f * 100.0
    );
    let _ = std::io::stderr().flush();
}

#[tokio::main(flavor = "multi_thread", worker_threads = 4)]
async fn main() -> ExitCode {
    let args = Args::parse();
    let patched = Flavor::patched_available();
    let arms = args.arms(patched);
    if arms.iter().any(|a| a.patched()) && !patched {
        eprintln!(
            "the patched arm needs {} (cargo xtask build)",
            generation_retry_t::nginx::install_dir()
                .join("patched")
                .display()
        );
        return ExitCode::from(2);
    }
    let o = &args.options();
    let (major, minor, patch) = generation_retry_t::nginx::version();
    eprintln!(
        "lab: nginx {major}.{minor}.{patch}, {} arms, {} rps for {:?} each, valid={}s, reclaim p={} (in flight up to {:?}), {}% POST, seed {}",
        arms.len(),
        o.rate,
        o.duration,
        o.valid,
        o.reclaim,
        o.reclaim_delay,
        o.post_share * 100.0,
        o.seed
    );
    let mut results: Vec<ArmResult> = Vec::new();
    let n = arms.len();
    for (i, arm) in arms.iter().copied().enumerate() {
        let name = arm.name();
        // Redrawn in place on a terminal; into a file or a CI log only the
        // finished bar is written, one line per arm.
        let tty = std::io::stderr().is_terminal();
        let r = lab::run_arm(arm, o, move |f| {
            if tty {
                progress_line(i, n, name, f)
            }
        })
        .await;
        progress_line(i, n, name, 1.0);
        eprintln!();
        results.push(r);
    }

    println!("\n{}", lab::render_table(&results));
    let out = args.out.unwrap_or_else(|| {
        let target = std::env::var_os("GENERATION_RETRY_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../target")));
        target.join("lab").join(utc_stamp())
    });
    if let Err(e) = write_results(&out, &results, o) {
        eprintln!("lab: cannot write results to {}: {e}", out.display());
        return ExitCode::FAILURE;
    }
    println!("results: {}", out.display());
    if args.no_check {
        ExitCode::SUCCESS
    } else {
        check(&arms, &results, o)
    }
}

/// Holds every arm's result against its claims: prints each failed claim
/// and fails, or says how many held. Under memcheck (whose slowdown changes
/// what the load measures) the failures are printed, not enforced.
fn check(arms: &[Arm], results: &[ArmResult], o: &Options) -> ExitCode {
    let failed: Vec<String> = arms
        .iter()
        .zip(results)
        .flat_map(|(arm, r)| arm.check(r, o))
        .collect();
    let claims: usize = arms.iter().map(|a| a.claims().len()).sum();
    if failed.is_empty() {
        println!("claims: all {claims} held ({} arms)", arms.len());
        return ExitCode::SUCCESS;
    }
    let under_memcheck = generation_retry_t::memcheck::log_dir().is_some();
    println!(
        "claims: {} of {claims} failed{}:",
        failed.len(),
        if under_memcheck {
            " (under memcheck: not enforced)"
        } else {
            ""
        }
    );
    for f in &failed {
        println!("  {f}");
    }
    if under_memcheck {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn write_results(out: &PathBuf, results: &[ArmResult], o: &Options) -> std::io::Result<()> {
    std::fs::create_dir_all(out)?;
    let json: Vec<_> = results.iter().map(ArmResult::to_json).collect();
    let doc = serde_json::to_string_pretty(&serde_json::Value::Array(json)).unwrap();
    std::fs::write(out.join("results.json"), doc + "\n")?;
    std::fs::write(out.join("results.csv"), lab::render_csv(results))?;
    std::fs::write(out.join("chart.svg"), lab::render_svg(results, o.duration))?;
    let cmdline: Vec<String> = std::env::args().skip(1).collect();
    let (major, minor, patch) = generation_retry_t::nginx::version();
    std::fs::write(
        out.join("command.txt"),
        format!(
            "cargo xtask lab --nginx {major}.{minor}.{patch} {}\n",
            cmdline.join(" ")
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &str) -> Result<Args, clap::Error> {
        Args::try_parse_from(std::iter::once("lab").chain(args.split_whitespace()))
    }

    #[test]
    fn the_defaults_are_the_old_ones() {
        let a = parse("").unwrap();
        let o = a.options();
        assert_eq!(
            (o.rate, o.duration, o.valid),
            (300.0, Duration::from_secs(20), 1)
        );
        assert_eq!((o.reclaim, o.seed), (0.05, 1656));
        assert_eq!((&a.out, a.no_check), (&None, false));
        assert_eq!(a.arms(true), Arm::ALL);
        assert!(a.arms(false).iter().all(|a| !a.patched()));
        let quick = parse("--duration 300 --quick").unwrap();
        assert_eq!(quick.options().duration, Duration::from_secs(8));
        assert!(quick.arms(true).iter().all(|a| a.quick()));
    }

    #[test]
    fn values_as_before() {
        let a =
            parse("--rate=3000 --duration 0.5 --valid 5 --reclaim 1 --seed 7 --no-check").unwrap();
        let o = a.options();
        assert_eq!((o.rate, o.duration), (3000.0, Duration::from_millis(500)));
        assert_eq!((o.valid, o.reclaim, o.seed, a.no_check), (5, 1.0, 7, true));
        // A comma list, spaces around names allowed; the last --arms wins.
        let a = parse("--arms stock --arms module-off,stream:module-on").unwrap();
        assert_eq!(
            a.arms(false).iter().map(|a| a.name()).collect::<Vec<_>>(),
            ["module-off", "stream:module-on"]
        );
        assert_eq!(
            Args::try_parse_from(["lab", "--arms", "stock, module-on"])
                .unwrap()
                .arms(false)
                .len(),
            2
        );
        for bad in [
            "--rate 0",
            "--duration 0",
            "--valid 0",
            "--reclaim 1.5",
            "--rate x",
            "--rate -1",
            "--arms stock,nope",
            "--seed",
        ] {
            let e = parse(bad).unwrap_err().to_string();
            assert!(e.contains(bad.split(' ').next().unwrap()), "{bad}: {e}");
        }
        assert!(parse("--arms stock,nope")
            .unwrap_err()
            .to_string()
            .contains("unknown arm `nope`"));
    }

    #[test]
    fn the_documented_command_lines_parse() {
        // xtask/src/valgrind.rs's LAB_ARGS, docs/results.md's runs.
        for line in [
            "--arms stock,module-off,module-on,sibling:two-records,sibling:nxdomain,stream:module-on \
             --rate 100 --duration 6 --out target/x",
            "--arms stream:stock,stream:module-on,stream:patched --seed 3",
            "--rate 3000 --duration 300 --arms module-on",
            "--valid 5",
        ] {
            parse(line).unwrap();
        }
    }

    #[test]
    fn a_misspelled_option_is_an_error_naming_it() {
        let e = parse("--rtae 5").unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::UnknownArgument);
        assert!(e.to_string().contains("--rtae"), "{e}");
    }
}
