//! `cargo xtask fuzz [--inputs N] [--seed S] [--target NAME]`: every
//! target of `generation_retry_t::fuzz` (its corpus, then N generated
//! inputs, 10^6 by default), with the executions per second; exits 1 if
//! any input failed, having saved it under `target/fuzz/failures/`.

use std::path::Path;
use std::process::ExitCode;

use clap::Parser;
use generation_retry_t::fuzz::{run, save_inputs_that_abort, TARGETS};

/// Every fuzz target: its corpus, then generated inputs; failing inputs
/// saved under target/fuzz/failures/.
#[derive(Parser, Debug)]
#[command(bin_name = "cargo xtask fuzz")]
#[command(args_override_self = true, allow_negative_numbers = true)]
struct Args {
    /// Generated inputs per target
    #[arg(long, value_name = "N", default_value_t = 1_000_000)]
    inputs: usize,
    /// Seed of the generated inputs (0x5EEDF022)
    #[arg(long, value_name = "S", default_value_t = 0x5EED_F022)]
    seed: u64,
    /// Only the target of this name [default: every target]
    #[arg(long, value_name = "NAME")]
    target: Option<String>,
}

fn main() -> ExitCode {
    let a = Args::parse();
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
        .filter(|t| a.target.as_deref().is_none_or(|o| o == t.name))
    {
        let r = run(t, &corpus, &failures, a.inputs, a.seed);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &str) -> Result<Args, clap::Error> {
        Args::try_parse_from(std::iter::once("fuzz").chain(args.split_whitespace()))
    }

    #[test]
    fn the_defaults_are_the_old_ones() {
        let a = parse("").unwrap();
        assert_eq!((a.inputs, a.seed, a.target), (1_000_000, 0x5EED_F022, None));
        let a = parse("--inputs 10 --seed=7 --target dns").unwrap();
        assert_eq!(
            (a.inputs, a.seed, a.target.as_deref()),
            (10, 7, Some("dns"))
        );
        let e = parse("--inputs 1e6").unwrap_err().to_string();
        assert!(e.contains("--inputs"), "{e}");
    }

    #[test]
    fn a_misspelled_option_is_an_error_naming_it() {
        let e = parse("--input 10").unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::UnknownArgument);
        assert!(e.to_string().contains("--input"), "{e}");
    }
}
