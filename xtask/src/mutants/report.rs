//! What became of each mutant: its verdict and report, and the Markdown
//! table of them all (`target/mutants/results.md`).

/// What became of one mutant.
#[derive(Debug, PartialEq)]
pub(super) enum Verdict {
    Caught,
    Missed,
    /// The mutated sources did not build.
    BuildFailed,
    /// Its tests could not be run (a test binary that did not build, a
    /// test that did not run): the mutant is not judged.
    Error(String),
}

pub(super) struct Report {
    pub(super) name: &'static str,
    pub(super) file: &'static str,
    pub(super) tests: Vec<String>,
    pub(super) caught_by: Vec<String>,
    pub(super) seconds: f64,
    pub(super) verdict: Verdict,
    /// Do-nothing: tests that passed without declaring themselves guards.
    pub(super) undeclared: Vec<String>,
}

/// The results as a Markdown table.
pub(super) fn table(reports: &[Report]) -> String {
    let mut s = String::from(
        "| mutant | file | tests run | caught by | result | s |\n|---|---|---|---|---|---|\n",
    );
    for r in reports {
        let caught = if r.caught_by.is_empty() {
            "-".to_string()
        } else {
            r.caught_by.join(", ")
        };
        let verdict = match &r.verdict {
            Verdict::Caught => "caught",
            Verdict::Missed => "**missed**",
            Verdict::BuildFailed => "**did not build**",
            Verdict::Error(_) => "**not judged**",
        };
        s.push_str(&format!(
            "| {} | `{}` | {} | {} | {} | {:.0} |\n",
            r.name,
            r.file.rsplit('/').next().unwrap_or(r.file),
            r.tests.join(", "),
            caught,
            verdict,
            r.seconds
        ));
    }
    s
}
