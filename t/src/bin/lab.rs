//! `cargo xtask lab`: stock nginx 1.28.0 beside nginx with the module (and
//! the workarounds people use today) under the same load and faults; prints
//! the table, writes results.json, results.csv and chart.svg, then checks
//! every arm it ran against its claims (`lab::Claim`) and exits non-zero
//! naming each claim a run failed.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use generation_retry_t::nginx::Flavor;
use generation_retry_t::scenarios::lab::{self, Arm, ArmResult, Options};

/// Where the option descriptions start.
const INDENT: usize = 20;
/// The width the arm lists are wrapped to.
const WIDTH: usize = 78;

/// The usage text; the arm names come from the arm table.
fn usage() -> String {
    let quick: Vec<&str> = Arm::ALL
        .iter()
        .filter(|a| a.quick() && !a.patched())
        .map(|a| a.name())
        .collect();
    let quick_patched: Vec<&str> = Arm::ALL
        .iter()
        .filter(|a| a.quick() && a.patched())
        .map(|a| a.name())
        .collect();
    let names: Vec<&str> = Arm::ALL.iter().map(|a| a.name()).collect();
    format!(
        "\
cargo xtask lab [options]

  --rate N          requests per second, open loop (default 300)
  --duration S      seconds of load per arm (default 20)
  --arms A,B,...    arms to run (default: all); names:
{}
  --valid S         resolver valid= seconds (default 1; the seed used 5)
  --reclaim P       probability a reused connection is reclaimed (default 0.05)
  --seed N          seed of the fault injection (default 1656)
  --quick           about a minute: 8 s per arm, {}
                    (and {} when built)
  --out DIR         where to write results (default target/lab/<UTC time>)
  --no-check        do not check the arms' claims (they are stated for the
                    defaults and for 10 s at 250 rps, reclaim 0.1; under
                    memcheck they are printed, not enforced)",
        wrap(&names, " "),
        quick.join(", "),
        quick_patched.join(", "),
    )
}

/// `words` joined by `sep`, in lines of at most [`WIDTH`] columns indented
/// by [`INDENT`].
fn wrap(words: &[&str], sep: &str) -> String {
    let mut lines: Vec<String> = vec![String::new()];
    for w in words {
        let line = lines.last_mut().expect("one line at least");
        if !line.is_empty() && INDENT + line.len() + sep.len() + w.len() > WIDTH {
            lines.push(w.to_string());
        } else {
            if !line.is_empty() {
                line.push_str(sep);
            }
            line.push_str(w);
        }
    }
    lines
        .iter()
        .map(|l| format!("{:INDENT$}{l}", ""))
        .collect::<Vec<_>>()
        .join("\n")
}

struct Args {
    opts: Options,
    arms: Vec<Arm>,
    out: Option<PathBuf>,
    /// Whether a failed claim fails the run.
    check: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut opts = Options {
        duration: Duration::from_secs(20),
        ..Options::default()
    };
    let mut arms: Option<Vec<Arm>> = None;
    let mut out = None;
    let mut quick = false;
    let mut check = true;
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--rate" => opts.rate = num(&value("--rate")?, "--rate")?,
            "--duration" => {
                opts.duration = Duration::from_secs_f64(num(&value("--duration")?, "--duration")?)
            }
            "--valid" => opts.valid = num(&value("--valid")?, "--valid")? as u32,
            "--reclaim" => opts.reclaim = num(&value("--reclaim")?, "--reclaim")?,
            "--seed" => opts.seed = num(&value("--seed")?, "--seed")? as u64,
            "--out" => out = Some(PathBuf::from(value("--out")?)),
            "--arms" => {
                let list = value("--arms")?;
                let parsed: Result<Vec<Arm>, String> = list
                    .split(',')
                    .map(|n| Arm::parse(n.trim()).ok_or(format!("unknown arm `{n}`")))
                    .collect();
                arms = Some(parsed?);
            }
            "--quick" => quick = true,
            "--no-check" => check = false,
            "-h" | "--help" => return Err(usage()),
            other => return Err(format!("unknown option `{other}`\n\n{}", usage())),
        }
    }
    if opts.rate <= 0.0
        || opts.duration.is_zero()
        || !(0.0..=1.0).contains(&opts.reclaim)
        || opts.valid == 0
    {
        return Err("rate and duration must be positive, valid >= 1, reclaim in 0..1".into());
    }
    let patched = Flavor::patched_available();
    let arms = arms.unwrap_or_else(|| {
        Arm::ALL
            .iter()
            .copied()
            .filter(|a| !quick || a.quick())
            .filter(|a| !a.patched() || patched)
            .collect()
    });
    if quick {
        opts.duration = Duration::from_secs(8);
    }
    if arms.iter().any(|a| a.patched()) && !patched {
        return Err("the patched arm needs target/nginx/1.28.0/patched (cargo xtask build)".into());
    }
    Ok(Args {
        opts,
        arms,
        out,
        check,
    })
}

fn num(v: &str, name: &str) -> Result<f64, String> {
    v.parse::<f64>()
        .ok()
        .filter(|x| x.is_finite() && *x >= 0.0)
        .ok_or(format!("{name}: `{v}` is not a non-negative number"))
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
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let o = &args.opts;
    let (major, minor, patch) = generation_retry_t::nginx::version();
    eprintln!(
        "lab: nginx {major}.{minor}.{patch}, {} arms, {} rps for {:?} each, valid={}s, reclaim p={} (in flight up to {:?}), {}% POST, seed {}",
        args.arms.len(),
        o.rate,
        o.duration,
        o.valid,
        o.reclaim,
        o.reclaim_delay,
        o.post_share * 100.0,
        o.seed
    );
    let mut results: Vec<ArmResult> = Vec::new();
    let n = args.arms.len();
    for (i, arm) in args.arms.iter().copied().enumerate() {
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
    if args.check {
        check(&args.arms, &results, o)
    } else {
        ExitCode::SUCCESS
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
