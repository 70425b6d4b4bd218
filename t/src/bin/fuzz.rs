//! `cargo xtask fuzz [--inputs N] [--seed S] [--target NAME]`: every
//! target of `generation_retry_t::fuzz` (its corpus, then N generated
//! inputs, 10^6 by default), with the executions per second; exits 1 if
//! any input failed, having saved it under `target/fuzz/failures/`.

use std::path::Path;
use std::process::ExitCode;

use generation_retry_t::fuzz::{run, save_inputs_that_abort, TARGETS};

fn main() -> ExitCode {
    let mut inputs = 1_000_000usize;
    let mut seed = 0x5EED_F022u64;
    let mut only: Option<String> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| {
            args.next()
                .unwrap_or_else(|| panic!("{name} needs a value"))
        };
        match a.as_str() {
            "--inputs" => inputs = value("--inputs").parse().expect("--inputs N"),
            "--seed" => seed = value("--seed").parse().expect("--seed S"),
            "--target" => only = Some(value("--target")),
            other => {
                eprintln!("fuzz: unknown argument {other:?} (--inputs N, --seed S, --target NAME)");
                return ExitCode::from(2);
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let corpus = root.join("fuzz-corpus");
    let failures = root.join("../target/fuzz/failures");
    save_inputs_that_abort(&failures);
    let mut failed = false;
    println!(
        "{:<14} {:>7} {:>10} {:>10} {:>8} {:>10}  failures",
        "target", "corpus", "generated", "compared", "seconds", "inputs/s"
    );
    for t in TARGETS
        .iter()
        .filter(|t| only.as_deref().is_none_or(|o| o == t.name))
    {
        let r = run(t, &corpus, &failures, inputs, seed);
        println!(
            "{:<14} {:>7} {:>10} {:>10} {:>8.1} {:>10.0}  {}",
            r.target,
            r.replayed,
            r.generated,
            r.compared,
            r.seconds,
            r.per_second(),
            r.failures.len()
        );
        for (path, why) in &r.failures {
            println!("  {}: {why}", path.display());
            failed = true;
        }
    }
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
