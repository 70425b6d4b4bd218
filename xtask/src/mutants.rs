//! `cargo xtask mutants [--only NAME,...] [--list]`: the mutation check.
//!
//! Each mutant of [`MUTANTS`] is one small deliberate fault in the module
//! or in the core patches: an exact text of a file replaced. For each, this
//! command applies it to a private copy of the repository, builds what
//! changed (the module, or the patched nginx for a patch), runs the tests
//! that should catch it against that build, and restores the file. A
//! mutant is caught when one of its tests fails; the command ends with a
//! table and fails when a mutant was missed, did not build or did not
//! apply (its text must occur exactly once: a mutant that does not apply is
//! an error, never a skip).
//!
//! Nothing here touches the working tree, so it can run beside other work:
//!
//! - `target/mutants/tree`: a copy of the tracked files (`git ls-files`,
//!   with their working-tree contents), made once per run; mutants are
//!   applied there one at a time;
//! - `target/mutants/target`: that copy's cargo target directory; the
//!   module is built there as `cargo xtask build` builds it (vendored: its
//!   nginx is the same nginx 1.28.0 with the same flags as the stock one, so
//!   the module loads into `target/nginx/1.28.0`'s nginx);
//! - `target/mutants/install/NAME`: what the tests run against
//!   (`GENERATION_RETRY_NGINX_DIR`): links to `target/nginx/1.28.0`'s stock
//!   and patched nginx and the mutant's module, or for a patch mutant the
//!   patched nginx rebuilt from the mutated patch;
//! - `target/mutants/logs/NAME.log`: every test's output;
//!   `target/mutants/results.md`: the table.
//!
//! The tests themselves are the `t` crate of the working tree, run from the
//! workspace root with `GENERATION_RETRY_NGINX_DIR` pointing at the
//! mutant's install, with the matrix's shorter repeats
//! ([`matrix_env`]). First the same tests run against the unmutated copy
//! (the baseline): a test that fails there would "catch" anything.
//!
//! The do-nothing mutant (the module loads and its directives parse, but it
//! never wraps a selection) runs every test binary instead, and is caught
//! only when every test that still passes declares itself a non-regression
//! guard: a line of its doc comment starts `/// Non-regression guard:`,
//! followed by why passing without the module's work is right ([`guards`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::build::{self, MODULE_FILE};
use crate::harness::{matrix_env, test_binaries};
use crate::test_wrap;
use crate::tree::{copy_if_changed, files};
use crate::versions::{DEFAULT, FLAGS};
use crate::workspace::{cargo, root, target_dir, Result};

mod catalogue;

#[cfg(test)]
use catalogue::SLOT_ADD;
pub use catalogue::{Mutant, MUTANTS};

/// Test binaries the do-nothing mutant leaves out: `external.rs`,
/// `install.rs` and `dist.rs` test the module as their own builds of the
/// working tree make it (a clean copy, a release tarball, an nginx
/// configured on its own), not this copy's.
const NOT_THE_MUTANTS: &[&str] = &["external", "install", "dist"];

/// The line that makes a test a declared non-regression guard.
pub const GUARD: &str = "/// Non-regression guard:";

/// The tests are the working tree's, which others may be editing: a test
/// binary that does not build is tried again this many times, this far
/// apart, before the mutant is left unjudged.
const BUILD_ATTEMPTS: u32 = 6;
const BUILD_RETRY: Duration = Duration::from_secs(60);

/// How long one `cargo test` may run before it is stopped (and its
/// unfinished tests count as timed out).
const TEST_LIMIT: Duration = Duration::from_secs(20 * 60);

/// `cargo xtask mutants [--only NAME,...] [--list]`.
pub fn command(args: &[String]) -> Result {
    let mut only: Option<Vec<String>> = None;
    let mut list = false;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--list" => list = true,
            "--only" => {
                let v = it.next().ok_or("--only needs NAME,...")?;
                only = Some(v.split(',').map(str::to_string).collect());
            }
            a if a.starts_with("--only=") => {
                only = Some(
                    a["--only=".len()..]
                        .split(',')
                        .map(str::to_string)
                        .collect(),
                );
            }
            other => return Err(format!("mutants: unknown argument `{other}`")),
        }
    }
    let selected: Vec<&Mutant> = match &only {
        None => MUTANTS.iter().collect(),
        Some(names) => {
            let unknown: Vec<&String> = names
                .iter()
                .filter(|n| !MUTANTS.iter().any(|m| m.name == n.as_str()))
                .collect();
            if !unknown.is_empty() {
                return Err(format!(
                    "no mutant named {unknown:?}; `cargo xtask mutants --list` lists them"
                ));
            }
            MUTANTS
                .iter()
                .filter(|m| names.iter().any(|n| n == m.name))
                .collect()
        }
    };
    if list {
        print_list(&selected);
        return Ok(());
    }
    run_all(&selected)
}

fn print_list(mutants: &[&Mutant]) {
    for m in mutants {
        println!("{:<34} {}", m.name, m.file);
        println!("{:<34} tests: {}", "", tests_run(m).join(", "));
    }
}

/// The tests a mutant runs, as the table shows them.
fn tests_run(m: &Mutant) -> Vec<String> {
    if m.whole_suite {
        return vec![format!(
            "every t/tests binary but {}",
            NOT_THE_MUTANTS.join(", ")
        )];
    }
    let mut out: Vec<String> = m.tests.iter().map(|(b, t)| format!("{b}::{t}")).collect();
    if m.core {
        out.push("core unit tests".into());
    }
    out
}

/// Where everything of a run lives: `target/mutants`.
fn mutants_dir() -> PathBuf {
    target_dir().join("mutants")
}

/// What became of one mutant.
#[derive(Debug, PartialEq)]
enum Verdict {
    Caught,
    Missed,
    /// The mutated sources did not build.
    BuildFailed,
    /// Its tests could not be run (a test binary that did not build, a
    /// test that did not run): the mutant is not judged.
    Error(String),
}

struct Report {
    name: &'static str,
    file: &'static str,
    tests: Vec<String>,
    caught_by: Vec<String>,
    seconds: f64,
    verdict: Verdict,
    /// Do-nothing: tests that passed without declaring themselves guards.
    undeclared: Vec<String>,
}

fn run_all(selected: &[&Mutant]) -> Result {
    let started = Instant::now();
    let dir = mutants_dir();
    let tree = dir.join("tree");
    let logs = dir.join("logs");
    fs::create_dir_all(&logs).map_err(|e| format!("{}: {e}", logs.display()))?;
    sync_tree(&tree)?;
    // Every mutant applies before anything is built.
    for m in selected {
        let text = read(&tree.join(m.file))?;
        check_applies(m, &text)?;
    }
    // The versions, the default first, each with its own baseline.
    let mut versions: Vec<&str> = Vec::new();
    for m in selected {
        if !versions.contains(&m.version) {
            versions.push(m.version);
        }
    }
    versions.sort_by_key(|v| *v != DEFAULT);

    let mut reports = Vec::new();
    for version in versions {
        let group: Vec<&Mutant> = selected
            .iter()
            .copied()
            .filter(|m| m.version == version)
            .collect();
        let ctx = Context::prepare(version, &tree, &dir)?;
        baseline(&group, &ctx, &tree, &logs)?;
        for m in group {
            eprintln!("xtask: mutant {} (nginx {version}): {}", m.name, m.file);
            let report = run_one(m, &tree, &ctx).unwrap_or_else(|e| Report {
                name: m.name,
                file: m.file,
                tests: tests_run(m),
                caught_by: Vec::new(),
                seconds: 0.0,
                verdict: Verdict::Error(e),
                undeclared: Vec::new(),
            });
            eprintln!(
                "xtask: mutant {}: {:?}{} ({:.0} s)",
                m.name,
                report.verdict,
                if report.caught_by.is_empty() {
                    String::new()
                } else {
                    format!(" by {}", report.caught_by.join(", "))
                },
                report.seconds
            );
            reports.push(report);
        }
    }

    let table = table(&reports);
    println!("\n{table}");
    let results = dir.join("results.md");
    fs::write(&results, &table).map_err(|e| format!("{}: {e}", results.display()))?;
    for r in reports.iter().filter(|r| !r.undeclared.is_empty()) {
        println!(
            "{}: {} tests pass without declaring `{GUARD}`:",
            r.name,
            r.undeclared.len()
        );
        for t in &r.undeclared {
            println!("  {t}");
        }
    }
    for r in &reports {
        if let Verdict::Error(e) = &r.verdict {
            println!("{}: not judged: {e}", r.name);
        }
    }
    let count = |f: &dyn Fn(&Verdict) -> bool| reports.iter().filter(|r| f(&r.verdict)).count();
    println!(
        "mutants: {} caught, {} missed, {} did not build, {} not judged, in {:.0} s (table: {})",
        count(&|v| *v == Verdict::Caught),
        count(&|v| *v == Verdict::Missed),
        count(&|v| *v == Verdict::BuildFailed),
        count(&|v| matches!(v, Verdict::Error(_))),
        started.elapsed().as_secs_f64(),
        results.display()
    );
    let bad: Vec<&str> = reports
        .iter()
        .filter(|r| r.verdict != Verdict::Caught)
        .map(|r| r.name)
        .collect();
    if bad.is_empty() {
        Ok(())
    } else {
        Err(format!("not caught: {}", bad.join(", ")))
    }
}

/// One version's builds for the mutants of it: its stock and patched nginx
/// (`target/nginx/VERSION`), the copy's module built for it, and how a
/// mutant's module or patched nginx is rebuilt.
struct Context {
    version: &'static str,
    /// `target/nginx/VERSION`: its stock and patched nginx.
    main_install: PathBuf,
    /// The unmutated copy's module for this version.
    base_module: PathBuf,
    /// The objs the module binds to (for the default, nginx-sys's own).
    objs: PathBuf,
    /// The copy's cargo target directory for this version.
    target: PathBuf,
    /// Another version's pristine source and its identity, for its
    /// patched nginx.
    source: Option<(PathBuf, String)>,
}

impl Context {
    fn prepare(version: &'static str, tree: &Path, dir: &Path) -> Result<Context> {
        let built = build::build_version(version, None)?;
        eprintln!("xtask: mutants: baseline build (nginx {version})");
        if version == DEFAULT {
            let target = dir.join("target");
            let base = build::cargo_build_module_in(tree, Some(&target))?;
            return Ok(Context {
                version,
                main_install: built.install,
                base_module: base.module,
                objs: base.nginx_build_dir,
                target,
                source: None,
            });
        }
        let objs = built.install.join("stock-build/src/objs");
        let target = dir.join(format!("target-{version}"));
        let base_module = build::cargo_build_against_in(tree, &objs, &target)?;
        let src = crate::versions::source(version, None)?;
        Ok(Context {
            version,
            main_install: built.install,
            base_module,
            objs,
            target,
            source: Some((src.tree, src.identity)),
        })
    }

    /// The copy's module, as mutated now.
    fn module(&self, tree: &Path) -> Result<PathBuf> {
        match self.source {
            None => build::cargo_build_module_in(tree, Some(&self.target)).map(|o| o.module),
            Some(_) => build::cargo_build_against_in(tree, &self.objs, &self.target),
        }
    }

    /// The patched nginx from the copy's patches in `patches`, into
    /// `install`.
    fn patched(&self, patches: &Path, install: &Path) -> Result<PathBuf> {
        match &self.source {
            None => build::patched_default_from(patches, &self.objs, install),
            Some((source, identity)) => {
                let flags: Vec<String> = FLAGS.iter().map(|f| f.to_string()).collect();
                crate::patched::build_with(
                    self.version,
                    &crate::patched::patches_in(patches)?,
                    source,
                    identity,
                    &flags,
                    install,
                )
            }
        }
    }
}

/// The unmutated copy against every test the group's mutants use: a test
/// that fails there would "catch" anything.
fn baseline(group: &[&Mutant], ctx: &Context, tree: &Path, logs: &Path) -> Result {
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
        Err(format!(
            "the baseline on nginx {} (nothing mutated) fails {failed:?}: no mutant can be \
             judged (see {})",
            ctx.version,
            log.display()
        ))
    }
}

/// Applies `m` to the copy, builds, tests, and restores the file whatever
/// happened.
fn run_one(m: &Mutant, tree: &Path, ctx: &Context) -> Result<Report> {
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
        let binaries: Vec<String> = test_binaries()?
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
            .filter(|t| !guards.contains(*t))
            .cloned()
            .collect();
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
            passed.len() - report.undeclared.len()
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

/// Puts a file of the copy back as it was when dropped.
struct Restore {
    path: PathBuf,
    text: String,
}

impl Drop for Restore {
    fn drop(&mut self) {
        if let Err(e) = fs::write(&self.path, &self.text) {
            eprintln!("xtask: cannot restore {}: {e}", self.path.display());
        }
    }
}

/// `find` occurs exactly once in `text` (see [`locate`]): where.
fn check_applies(m: &Mutant, text: &str) -> Result<std::ops::Range<usize>> {
    let found = locate(text, m.find);
    match found.as_slice() {
        [one] => Ok(one.clone()),
        _ => Err(format!(
            "mutant {}: its text occurs {} times in {}, not once:\n{}",
            m.name,
            found.len(),
            m.file,
            m.find
        )),
    }
}

/// Where `find` occurs in `text`, any run of whitespace between its tokens
/// standing for any other (a line break for a space, a continuation
/// line's indent); its leading indent, if any, must be the line's whole
/// indent. The spans run from that indent to its last token's end, plus
/// the newline `find` ends with.
fn locate(text: &str, find: &str) -> Vec<std::ops::Range<usize>> {
    let tokens: Vec<&str> = find.split_whitespace().collect();
    let Some(first) = tokens.first() else {
        return Vec::new();
    };
    let trailing = find.len() - find.trim_end().len();
    let mut found = Vec::new();
    let lead = &find[..find.len() - find.trim_start().len()];
    for (start, _) in text.match_indices(first) {
        // `find`'s indent is the line's whole indent in the text: it tells
        // apart the same statement at two depths (rustfmt only moves an
        // indent with the code's nesting).
        if !lead.is_empty() {
            let before = &text[..start];
            let line_start = before.rfind('\n').map_or(0, |i| i + 1);
            if !before.ends_with(lead) || line_start + lead.len() != start {
                continue;
            }
        }
        let mut at = start + first.len();
        let mut ok = true;
        for t in &tokens[1..] {
            let rest = &text[at..];
            let skipped = rest.len() - rest.trim_start().len();
            if skipped == 0 || !rest[skipped..].starts_with(t) {
                ok = false;
                break;
            }
            at += skipped + t.len();
        }
        if !ok {
            continue;
        }
        if trailing > 0 {
            let rest = &text[at..];
            let ws = rest.len() - rest.trim_start().len();
            if ws == 0 && !rest.is_empty() {
                continue;
            }
            // As much of the whitespace as `find` has lines: the newline
            // ending it, not the next line's indent.
            let newline = rest[..ws].find('\n').map_or(ws, |i| i + 1);
            at += if find.ends_with('\n') {
                newline
            } else {
                ws.min(trailing)
            };
        }
        found.push(start - lead.len()..at);
    }
    found
}

fn read(path: &Path) -> Result<String> {
    fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

fn write(path: &Path, text: &str) -> Result {
    fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

fn append(log: &Path, text: &str) {
    if let Ok(mut f) = fs::OpenOptions::new().create(true).append(true).open(log) {
        let _ = f.write_all(text.as_bytes());
    }
}

/// `tree` made equal to the tracked files of the workspace as they are in
/// the working tree (unchanged files keep their times, so cargo rebuilds
/// only what differs from the last run).
fn sync_tree(tree: &Path) -> Result {
    let out = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(root())
        .output()
        .map_err(|e| format!("cannot run git ls-files: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "git ls-files: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let tracked: BTreeSet<PathBuf> = String::from_utf8_lossy(&out.stdout)
        .split('\0')
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .collect();
    let mut wanted = BTreeSet::new();
    for rel in &tracked {
        let from = root().join(rel);
        // A tracked file deleted in the working tree is left out.
        if from.is_file() {
            copy_if_changed(&from, &tree.join(rel))?;
            wanted.insert(tree.join(rel));
        }
    }
    if tree.is_dir() {
        for f in files(tree, &|_| false)? {
            if !wanted.contains(&f) {
                fs::remove_file(&f).map_err(|e| format!("{}: {e}", f.display()))?;
            }
        }
    }
    Ok(())
}

/// A mutant's install directory: `stock`, `patched` and the test-only
/// wrapper module linked to the default build's (or `patched` the
/// mutant's own, already in place), and the module copied there.
fn install(dir: &Path, main: &Path, module: &Path, patched: Option<&Path>) -> Result<PathBuf> {
    let link = |rel: &str| -> Result {
        let at = dir.join(rel);
        if let Some(parent) = at.parent() {
            fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        }
        let _ = fs::remove_file(&at);
        std::os::unix::fs::symlink(main.join(rel), &at)
            .map_err(|e| format!("{}: {e}", at.display()))
    };
    link("stock/sbin/nginx")?;
    link(&format!("modules/{}", test_wrap::FILE))?;
    match patched {
        Some(p) => {
            let want = dir.join("patched/sbin/nginx");
            if p != want {
                return Err(format!(
                    "patched nginx at {}, not {}",
                    p.display(),
                    want.display()
                ));
            }
        }
        None => link("patched/sbin/nginx")?,
    }
    let so = dir.join("modules").join(MODULE_FILE);
    let _ = fs::remove_file(&so);
    copy_if_changed(module, &so)?;
    Ok(dir.to_path_buf())
}

/// What a test run said, by test.
#[derive(Default)]
struct Results {
    passed: Vec<String>,
    failed: Vec<String>,
}

/// The listed tests, one `cargo test` per binary, each name exact; every
/// name must have run.
fn run_listed(tests: &[(&str, &str)], install_dir: &Path, log: &Path) -> Result<Results> {
    let mut by_binary: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (b, t) in tests {
        by_binary.entry(b).or_default().push(t);
    }
    let mut all = Results::default();
    for (b, names) in by_binary {
        let r = cargo_test(b, &names, install_dir, log)?;
        for n in names {
            let id = format!("{b}::{n}");
            if !r.passed.contains(&id) && !r.failed.contains(&id) {
                return Err(format!("{id} did not run (see {})", log.display()));
            }
        }
        all.passed.extend(r.passed);
        all.failed.extend(r.failed);
    }
    Ok(all)
}

/// `cargo test -p generation-retry-t --test BINARY [-- --exact NAMES]`
/// from the workspace root against `install_dir`; its output appended to
/// `log`. Tests that did not finish in [`TEST_LIMIT`] count as failed
/// (`... (timed out)`). Fails when the binary did not build.
fn cargo_test(binary: &str, names: &[&str], install_dir: &Path, log: &Path) -> Result<Results> {
    let mut attempt = 1;
    let (ok, lines) = loop {
        let mut cmd = cargo();
        cmd.args(["test", "-p", "generation-retry-t", "--test", binary]);
        if !names.is_empty() {
            cmd.args(["--", "--exact"]).args(names);
        }
        cmd.env("GENERATION_RETRY_NGINX_DIR", install_dir);
        matrix_env(&mut cmd);
        let (ok, lines) = run_logged(&mut cmd, log)?;
        let started = lines.iter().any(|l| l.starts_with("running "));
        if ok || started || attempt == BUILD_ATTEMPTS {
            break (ok, lines);
        }
        // The working tree's `t` did not build: someone may be editing it.
        eprintln!(
            "xtask: mutants: t/tests/{binary}.rs did not build (attempt {attempt} of \
             {BUILD_ATTEMPTS}); again in {} s",
            BUILD_RETRY.as_secs()
        );
        std::thread::sleep(BUILD_RETRY);
        attempt += 1;
    };
    let mut r = parse_results(&lines, binary);
    let finished = lines.iter().any(|l| l.starts_with("test result: "));
    if !ok && !finished {
        let timed_out = names
            .iter()
            .map(|n| format!("{binary}::{n}"))
            .filter(|id| !r.passed.contains(id) && !r.failed.contains(id))
            .map(|id| format!("{id} (timed out)"))
            .collect::<Vec<_>>();
        if lines.iter().any(|l| l == TIMED_OUT) {
            r.failed.extend(timed_out);
            if names.is_empty() {
                r.failed.push(format!("{binary} (timed out)"));
            }
            return Ok(r);
        }
        return Err(format!(
            "`cargo test --test {binary}` ran no test (did it build? see {})",
            log.display()
        ));
    }
    Ok(r)
}

/// `generation-retry-core`'s unit tests in the copy (`core::NAME` for each).
fn run_core(tree: &Path, target: &Path, log: &Path) -> Result<Results> {
    let mut cmd = cargo();
    cmd.current_dir(tree)
        .args([
            "test",
            "-p",
            "generation-retry-core",
            "--lib",
            "--target-dir",
        ])
        .arg(target);
    let (ok, lines) = run_logged(&mut cmd, log)?;
    let r = parse_results(&lines, "core");
    if !ok && r.failed.is_empty() {
        return Err(format!(
            "core's unit tests did not run (see {})",
            log.display()
        ));
    }
    Ok(r)
}

/// The line [`run_logged`] adds when it stopped a command at [`TEST_LIMIT`].
const TIMED_OUT: &str = "xtask: mutants: stopped at the time limit";

/// Runs `cmd` in a process group of its own, stdout and stderr appended to
/// `log`; returns whether it succeeded and its stdout's lines. Stopped
/// (the whole group) after [`TEST_LIMIT`].
fn run_logged(cmd: &mut Command, log: &Path) -> Result<(bool, Vec<String>)> {
    use std::os::unix::process::CommandExt;
    append(log, &format!("$ {cmd:?}\n"));
    let stderr = File::options()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| format!("{}: {e}", log.display()))?;
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(stderr)
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = mpsc::channel();
    let log_path = log.to_path_buf();
    let reader = std::thread::spawn(move || {
        let mut lines = Vec::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            append(&log_path, &format!("{line}\n"));
            lines.push(line);
        }
        let _ = tx.send(());
        lines
    });
    let started = Instant::now();
    let mut stopped = false;
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            break status;
        }
        if !stopped && started.elapsed() > TEST_LIMIT {
            stopped = true;
            let _ = Command::new("kill")
                .args(["-KILL", &format!("-{}", child.id())])
                .status();
        }
        let _ = rx.recv_timeout(Duration::from_millis(200));
    };
    let mut lines = reader.join().unwrap_or_default();
    if stopped {
        append(log, &format!("{TIMED_OUT}\n"));
        lines.push(TIMED_OUT.to_string());
    }
    Ok((status.success() && !stopped, lines))
}

/// libtest's `test NAME ... ok` and `test NAME ... FAILED` lines, as
/// `PREFIX::NAME`.
fn parse_results(lines: &[String], prefix: &str) -> Results {
    let mut r = Results::default();
    for line in lines {
        let Some((name, result)) = line
            .strip_prefix("test ")
            .and_then(|rest| rest.rsplit_once(" ... "))
        else {
            continue;
        };
        let id = format!("{prefix}::{name}");
        if result.starts_with("ok") {
            r.passed.push(id);
        } else if result.starts_with("FAILED") {
            r.failed.push(id);
        }
    }
    r
}

/// Every declared guard of `t/tests`, as `BINARY::NAME`.
fn declared_guards() -> Result<BTreeSet<String>> {
    let mut all = BTreeSet::new();
    for b in test_binaries()? {
        let text = read(&root().join("t/tests").join(format!("{b}.rs")))?;
        all.extend(guards(&text).into_iter().map(|t| format!("{b}::{t}")));
    }
    Ok(all)
}

/// The tests of a test binary's source that declare themselves
/// non-regression guards: a line of the doc comment right above the test
/// starts with [`GUARD`]. A test written as `fn $frag` in a `macro_rules!`
/// stands for the names its invocations give `$frag`, read from each entry
/// (one per line: the identifiers before its `=>`, in the order of the
/// matcher's `$frag:ident`s).
pub fn guards(source: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut in_macro: Option<String> = None;
    let mut guarded = false;
    for line in source.lines() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("macro_rules!") {
            in_macro = Some(ident_at(rest.trim_start()));
            guarded = false;
            continue;
        }
        if t.starts_with(GUARD) {
            guarded = true;
            continue;
        }
        if t.starts_with("///") || t.starts_with("#[") || t.is_empty() && guarded {
            continue;
        }
        if let (true, Some(name)) = (guarded, fn_name(t)) {
            match (name.strip_prefix('$'), &in_macro) {
                (Some(frag), Some(mac)) => out.extend(macro_names(source, mac, frag)),
                _ => {
                    out.insert(name);
                }
            }
        }
        guarded = false;
    }
    out
}

/// The identifier at the start of `s` (a `$` before it kept).
fn ident_at(s: &str) -> String {
    s.chars()
        .enumerate()
        .take_while(|(i, c)| c.is_alphanumeric() || *c == '_' || (*i == 0 && *c == '$'))
        .map(|(_, c)| c)
        .collect()
}

/// The function a line declares (`pub async fn name(...`), if it does.
fn fn_name(line: &str) -> Option<String> {
    let mut words = line.split_whitespace();
    loop {
        match words.next()? {
            "pub" | "pub(crate)" | "async" | "unsafe" | "const" | "extern" => continue,
            "fn" => return Some(ident_at(words.next()?)).filter(|n| !n.is_empty()),
            _ => return None,
        }
    }
}

/// The names the invocations of `mac` give its `$frag:ident`.
fn macro_names(source: &str, mac: &str, frag: &str) -> Vec<String> {
    let Some(def) = source.find(&format!("macro_rules! {mac}")) else {
        return Vec::new();
    };
    let rest = &source[def..];
    let matcher = &rest[..rest.find(") =>").unwrap_or(rest.len())];
    let frags: Vec<String> = matcher
        .split('$')
        .skip(1)
        .filter_map(|p| p.split_once(":ident").map(|(n, _)| n.to_string()))
        .filter(|n| n.chars().all(|c| c.is_alphanumeric() || c == '_'))
        .collect();
    let Some(pos) = frags.iter().position(|f| f == frag) else {
        return Vec::new();
    };
    let mut names = Vec::new();
    let invocation = format!("{mac}! {{");
    for (at, _) in source.match_indices(&invocation) {
        // The whole macro's name, not the end of a longer one.
        let before = source[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let body = &source[at..];
        let body = &body[body.find('{').map_or(0, |i| i + 1)..];
        for entry in body.lines() {
            let entry = entry.trim();
            if entry.starts_with('}') {
                break;
            }
            let Some((idents, _)) = entry.split_once("=>") else {
                continue;
            };
            if let Some(name) = idents.split(',').map(str::trim).nth(pos) {
                names.push(name.to_string());
            }
        }
    }
    names
}

/// The results as a Markdown table.
fn table(reports: &[Report]) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The list cannot rot silently: every mutant applies to the sources as
    /// they are, and every test it names exists.
    #[test]
    fn every_mutant_applies_exactly_once() {
        for m in MUTANTS {
            let text = read(&root().join(m.file)).unwrap();
            check_applies(m, &text).unwrap();
            assert_ne!(m.find, m.replace, "{}", m.name);
        }
    }

    #[test]
    fn a_mutant_survives_rustfmt_moving_its_line_breaks() {
        let find = "    if let Some(slot) = conf.slot() {\n";
        let text = "fn f() {\n    let x = 1;\n    if let Some(slot) =\n        conf.slot()\n    {\n        go();\n";
        let spans = locate(text, find);
        assert_eq!(spans.len(), 1, "{spans:?}");
        let mut mutated = text.to_string();
        mutated.replace_range(spans[0].clone(), "    if true {\n");
        assert_eq!(
            mutated,
            "fn f() {\n    let x = 1;\n    if true {\n        go();\n"
        );
        // A changed token is no match.
        assert!(locate("    if let Some(slot) = conf.slots() {\n", find).is_empty());
        // Twice is found twice (and refused by check_applies).
        assert_eq!(locate(&format!("{find}{find}"), find).len(), 2);
    }

    #[test]
    fn every_named_test_exists() {
        let binaries = test_binaries().unwrap();
        for m in MUTANTS {
            assert!(
                m.whole_suite || m.core || !m.tests.is_empty(),
                "{} runs no test",
                m.name
            );
            for (b, t) in m.tests {
                assert!(
                    binaries.iter().any(|x| x == b),
                    "{}: no t/tests/{b}.rs",
                    m.name
                );
                let text = read(&root().join("t/tests").join(format!("{b}.rs"))).unwrap();
                let named = text.match_indices(t).any(|(i, _)| {
                    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
                    !word(text[..i].chars().next_back())
                        && !word(text[i + t.len()..].chars().next())
                });
                assert!(named, "{}: t/tests/{b}.rs has no test {t}", m.name);
            }
        }
    }

    #[test]
    fn names_are_unique_and_every_counter_has_its_mutant() {
        let names: BTreeSet<&str> = MUTANTS.iter().map(|m| m.name).collect();
        assert_eq!(names.len(), MUTANTS.len());
        for c in generation_retry_core::metrics::Counter::ALL {
            let site = format!("Counter::{c:?} {{");
            assert_eq!(
                MUTANTS
                    .iter()
                    .filter(|m| m.find == SLOT_ADD && m.replace.contains(&site))
                    .count(),
                1,
                "{c:?}"
            );
        }
    }

    #[test]
    fn guards_are_read_from_doc_comments_and_macros() {
        let src = r#"
/// Stock nginx fails.
///
/// Non-regression guard: stock has no module.
#[tokio::test(flavor = "multi_thread")]
async fn stock_fails() {}

/// Not a guard.
#[test]
fn module_rescues() {}

/// Non-regression guard: but the doc belongs to a comment line, not a fn
const X: u32 = 1;
fn after_const() {}

macro_rules! rows {
    ($($name:ident, $patched:ident => $since:expr, $d:expr,)*) => {$(
        #[test]
        fn $name() {}

        /// Non-regression guard: the patched nginx without the module.
        #[test]
        fn $patched() {}
    )*};
}

rows! {
    plain, patched_plain => (1, 0, 0), "",
    hashed, patched_hashed => (1, 0, 0), "hash;",
}
"#;
        let g: Vec<String> = guards(src).into_iter().collect();
        assert_eq!(g, ["patched_hashed", "patched_plain", "stock_fails"]);
    }

    #[test]
    fn results_are_read_from_libtest() {
        let lines: Vec<String> = [
            "running 3 tests",
            "test a ... ok",
            "test b ... FAILED",
            "test c ... ignored, needs the package",
            "test result: FAILED. 1 passed; 1 failed",
        ]
        .map(String::from)
        .to_vec();
        let r = parse_results(&lines, "bin");
        assert_eq!(r.passed, ["bin::a"]);
        assert_eq!(r.failed, ["bin::b"]);
    }
}
