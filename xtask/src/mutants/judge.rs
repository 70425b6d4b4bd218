//! One mutant judged: the baseline (the unmutated copy passes every test
//! the mutants of a version use), then the mutant applied, built, its tests
//! run, and the verdict; the file restored whatever happened.

use std::fs;
use std::path::Path;
use std::time::Instant;

use super::apply::{check_applies, read, write, Restore};
use super::builds::{install, Context};
use super::cargo_test::{append, cargo_test, run_core, run_listed};
use super::guards::{declared_guards, is_declared, stale};
use super::report::{Report, Verdict};
use super::{mutants_dir, tests_run, Mutant, NOT_THE_MUTANTS};
use crate::harness::suite_modules;
use crate::workspace::Result;

/// The unmutated copy against every test the group's mutants use: a test
/// that fails there would "catch" anything.
pub(super) fn baseline(group: &[&Mutant], ctx: &Context, tree: &Path, logs: &Path) -> Result {
    let install_dir = install(
        &mutants_dir().join(format!("install/baseline-{}", ctx.version)),
        &ctx.main_install,
        &ctx.base_module,
        None,
    )?;
    let mut union: Vec<(&str, &str)> = Vec::new();
    for m in group {
        for t in m.tests {
            if !union.contains(t) {
                union.push(*t);
            }
        }
    }
    let core = group.iter().any(|m| m.core);
    if union.is_empty() && !core {
        return Ok(());
    }
    eprintln!(
        "xtask: mutants: baseline tests on nginx {} ({} and core: {core})",
        ctx.version,
        union.len()
    );
    let log = logs.join(format!("baseline-{}.log", ctx.version));
    let r = run_listed(&union, &install_dir, &log)?;
    let mut failed = r.failed;
    if core {
        failed.extend(run_core(tree, &ctx.target, &log)?.failed);
    }
    if failed.is_empty() {
        Ok(())
    } else {
        err!(
            "the baseline on nginx {} (nothing mutated) fails {failed:?}: no mutant can be \
             judged (see {})",
            ctx.version,
            log.display()
        )
    }
}

/// Applies `m` to the copy, builds, tests, and restores the file whatever
/// happened.
pub(super) fn run_one(m: &Mutant, tree: &Path, ctx: &Context) -> Result<Report> {
    let started = Instant::now();
    let path = tree.join(m.file);
    let original = read(&path)?;
    let span = check_applies(m, &original)?;
    let _restore = Restore {
        path: path.clone(),
        text: original.clone(),
    };
    let mut mutated = original.clone();
    mutated.replace_range(span, m.replace);
    write(&path, &mutated)?;

    let dir = mutants_dir();
    let log = dir.join("logs").join(format!("{}.log", m.name));
    let _ = fs::remove_file(&log);
    let mut report = Report {
        name: m.name,
        file: m.file,
        tests: tests_run(m),
        caught_by: Vec::new(),
        seconds: 0.0,
        verdict: Verdict::Missed,
        undeclared: Vec::new(),
    };
    let install_dir = dir.join("install").join(m.name);
    let built = if m.is_patch() {
        let patches = path.parent().expect("a patch is in a directory");
        ctx.patched(patches, &install_dir).and_then(|patched| {
            install(
                &install_dir,
                &ctx.main_install,
                &ctx.base_module,
                Some(&patched),
            )
        })
    } else {
        ctx.module(tree)
            .and_then(|module| install(&install_dir, &ctx.main_install, &module, None))
    };
    let install_dir = match built {
        Ok(d) => d,
        Err(e) => {
            append(&log, &format!("build failed:\n{e}\n"));
            eprintln!("xtask: mutant {}: build failed: {e}", m.name);
            report.verdict = Verdict::BuildFailed;
            report.seconds = started.elapsed().as_secs_f64();
            return Ok(report);
        }
    };

    if m.whole_suite {
        let binaries: Vec<String> = suite_modules()?
            .into_iter()
            .filter(|b| !NOT_THE_MUTANTS.contains(&b.as_str()))
            .collect();
        let mut passed = Vec::new();
        let mut failed = Vec::new();
        for b in &binaries {
            let r = cargo_test(b, &[], &install_dir, &log)?;
            passed.extend(r.passed);
            failed.extend(r.failed);
        }
        let guards = declared_guards()?;
        report.undeclared = passed
            .iter()
            .filter(|t| !is_declared(&guards, t))
            .cloned()
            .collect();
        let seen: Vec<String> = passed.iter().chain(&failed).cloned().collect();
        report.undeclared.extend(
            stale(&guards, &binaries, &seen)
                .into_iter()
                .map(|g| format!("{g} (a declared guard that names no test)")),
        );
        report.tests = vec![format!(
            "every t/tests binary but {} ({} tests)",
            NOT_THE_MUTANTS.join(", "),
            passed.len() + failed.len()
        )];
        report.caught_by = vec![format!(
            "{} of {} failed; {} passed, {} of them declared guards",
            failed.len(),
            passed.len() + failed.len(),
            passed.len(),
            passed.iter().filter(|t| is_declared(&guards, t)).count()
        )];
        // Some tests must fail, or the install itself may be broken.
        report.verdict = if report.undeclared.is_empty() && !failed.is_empty() {
            Verdict::Caught
        } else {
            Verdict::Missed
        };
    } else {
        let r = run_listed(m.tests, &install_dir, &log)?;
        report.caught_by = r.failed;
        if m.core {
            match run_core(tree, &ctx.target, &log) {
                // Named in the log; the table counts them.
                Ok(r) if !r.failed.is_empty() => report.caught_by.push(format!(
                    "core unit tests ({} of {})",
                    r.failed.len(),
                    r.failed.len() + r.passed.len()
                )),
                Ok(_) => {}
                Err(e) => {
                    append(&log, &format!("core unit tests did not build:\n{e}\n"));
                    report.verdict = Verdict::BuildFailed;
                }
            }
        }
        if report.verdict != Verdict::BuildFailed && !report.caught_by.is_empty() {
            report.verdict = Verdict::Caught;
        }
    }
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}
