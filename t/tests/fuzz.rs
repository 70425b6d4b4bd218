//! CI's run of the generated-input checks (t/src/fuzz.rs): each target's
//! corpus of kept inputs, then 20,000 generated ones from a fixed seed
//! (`cargo xtask fuzz` runs 10^6 each). A failing input is saved under
//! `target/fuzz/failures/` and named in the failure.

use std::path::Path;

use generation_retry_t::fuzz::{run, TARGETS};

const INPUTS: usize = 20_000;

/// Non-regression guard: the parsers and renderers as functions, no nginx.
#[test]
fn every_parser_and_renderer_answers_generated_inputs_as_they_must() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut failed = Vec::new();
    for t in TARGETS {
        let r = run(
            t,
            &root.join("fuzz-corpus"),
            &root.join("../target/fuzz/failures"),
            INPUTS,
            0x5EED_F022,
        );
        assert!(
            r.replayed > 0,
            "{}: no corpus in t/fuzz-corpus/{}",
            t.name,
            t.name
        );
        // Each target compares answers, not only survival: at least a
        // third of its inputs (half are well-formed for the log readers).
        assert!(
            r.compared * 3 >= r.replayed + r.generated,
            "{}: only {} of {} inputs compared",
            t.name,
            r.compared,
            r.replayed + r.generated
        );
        println!(
            "{}: {} kept + {} generated, {:.0} inputs/s",
            t.name,
            r.replayed,
            r.generated,
            r.per_second()
        );
        failed.extend(
            r.failures
                .into_iter()
                .map(|(p, why)| format!("{}: {why}", p.display())),
        );
    }
    assert!(failed.is_empty(), "failing inputs:\n{}", failed.join("\n"));
}
