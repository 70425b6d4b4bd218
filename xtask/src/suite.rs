//! nginx's own test suite (nginx-tests, Perl's `Test::Nginx` under
//! `prove`) on a built version, four ways at once: the stock nginx, the
//! stock nginx with the module loaded and `generation_retry_resnapshot on`
//! at `http` and `stream` level (`TEST_NGINX_GLOBALS*`), and the patched
//! nginx; the last two also run this project's files ([`OURS`]), which
//! the fourth way runs on stock, where the race must fail them. A failure
//! in any way fails the step; the counts are printed.
//!
//! The files are those whose code the module and the patches touch or
//! wrap (docs/testing.md, "nginx's own tests", says why each): every
//! `upstream*.t` and `stream_upstream*.t` (balancers, zones, `resolve`,
//! keepalive, max_conns, sticky), and the proxy files about choosing and
//! retrying peers. The suite comes from the mirror's `nginx-tests-*.tar.gz`
//! (CI's `../shared/nginx`), or the checkout `GENERATION_RETRY_NGINX_TESTS`
//! names.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::build;
use crate::build::{Built, MODULE_FILE};
use crate::harness::Step;
use crate::source;
use crate::versions::Selection;
use crate::workspace::{At, Result};

/// A checkout of nginx-tests, instead of the mirror's tarball.
pub const TESTS_ENV: &str = "GENERATION_RETRY_NGINX_TESTS";

/// The files run (shell patterns, in the suite's directory).
pub const FILES: &[&str] = &[
    "upstream*.t",
    "stream_upstream*.t",
    "proxy.t",
    "proxy_implicit.t",
    "proxy_keepalive.t",
    "proxy_next_upstream*.t",
    "proxy_non_idempotent.t",
    "stream_proxy.t",
    "stream_proxy_next_upstream.t",
];

/// This project's files for nginx-tests (`nginx-src-patches/tests/`), the
/// race in nginx's own harness: tests 3 and 4 of each fail on stock nginx
/// (the retry after the change is refused), every test passes with the
/// module on and on the patched nginx.
pub const OURS: &[&str] = &[
    "upstream_resolve_retry.t",
    "stream_upstream_resolve_retry.t",
];

/// What stock nginx must say of [`OURS`]: the race reproduced, nothing else.
const STOCK_FAILS: &str = "Failed tests:  3-4";

/// Files started at once per way: they mostly wait (resolver timers,
/// slow backends), so many run on two cores.
const JOBS: &str = "12";

/// One way's result.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub files: u32,
    pub tests: u32,
    pub skipped_files: u32,
    pub passed: bool,
}

/// Reads prove's summary: `Files=46, Tests=440, ...`, `Result: PASS`, and
/// one `skipped:` line per skipped file.
pub fn parse(out: &str) -> Counts {
    let field = |name: &str| {
        out.lines()
            .rev()
            .find_map(|l| l.strip_prefix("Files="))
            .and_then(|l| {
                let l = format!("Files={l}");
                l.split(", ")
                    .find_map(|f| f.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
            })
            .unwrap_or(0)
    };
    Counts {
        files: field("Files"),
        tests: field("Tests"),
        skipped_files: out.lines().filter(|l| l.contains(" skipped: ")).count() as u32,
        passed: out.lines().any(|l| l.trim() == "Result: PASS"),
    }
}

/// The suite's directory: the checkout named, else the mirror's tarball
/// unpacked; `None` (said) when there is neither.
fn suite() -> Option<Result<PathBuf>> {
    if let Some(dir) = std::env::var_os(TESTS_ENV).filter(|v| !v.is_empty()) {
        let dir = PathBuf::from(dir);
        return Some(if dir.join("lib/Test/Nginx.pm").is_file() {
            Ok(dir)
        } else {
            err!("{TESTS_ENV}={}: no lib/Test/Nginx.pm there", dir.display())
        });
    }
    source::mirrored_tree("nginx-tests")
}

/// One way: `prove` over `files` with `binary`, and these globals.
fn way(
    dir: &Path,
    files: &[String],
    binary: &Path,
    module: Option<&Path>,
) -> Result<(Counts, String)> {
    let mut globals = String::new();
    if crate::prereq::is_root() {
        // As root, workers would switch to `nobody` and could not enter
        // the suite's 0700 temporary directories.
        globals.push_str("user root;");
    }
    let mut cmd = Command::new("prove");
    if let Some(m) = module {
        globals.push_str(&format!(" load_module {};", m.display()));
        cmd.env("TEST_NGINX_GLOBALS_HTTP", "generation_retry_resnapshot on;")
            .env(
                "TEST_NGINX_GLOBALS_STREAM",
                "generation_retry_resnapshot on;",
            );
    }
    let out = cmd
        .current_dir(dir)
        .env("TEST_NGINX_BINARY", binary)
        .env("TEST_NGINX_GLOBALS", globals.trim())
        .args(["-j", JOBS])
        .args(files)
        .output()
        .running("prove (apt-get install perl)")?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok((parse(&text), text))
}

/// Whether prove's run of [`OURS`] on stock nginx failed exactly as the
/// race makes it: every file, and in each only tests 3 and 4 (a line
/// `Failed tests:  3-4, 6` is a crash's alert check too, not the race).
fn race_reproduced(c: &Counts, text: &str) -> bool {
    let failed: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("Failed tests:"))
        .collect();
    !c.passed
        && c.files == OURS.len() as u32
        && c.skipped_files == 0
        && failed.len() == OURS.len()
        && failed.iter().all(|l| *l == STOCK_FAILS)
}

/// The files of a prove run that died in `Test::Nginx::port` before their
/// first test: the port the file asked for and nine random ones of its
/// 500-port block all taken (most files ask for 8080 and 8081, and up to
/// 38 files of four ways run at once in 8000-8499). Such a file ran
/// nothing, so its result says nothing of nginx. Named by prove's summary,
/// `NAME (Wstat: 25088 (exited 98) Tests: 0 Failed: 0)` (98 is
/// `EADDRINUSE`, the `$!` of `die`), and only when the run says `Port limit
/// exceeded` (prove's `-j` output does not say which file said it, so a
/// file that exited 98 before its first test for another reason in the
/// same run runs again too; failing again, it fails the way).
fn out_of_ports(text: &str) -> Vec<String> {
    if !text.contains("Port limit exceeded") {
        return Vec::new();
    }
    summary_failures(text)
        .into_iter()
        .filter(|(_, l)| l.contains("(exited 98) Tests: 0 "))
        .map(|(name, _)| name.to_string())
        .collect()
}

/// Each file prove's `Test Summary Report` lists as failed, with its
/// line. A file listed only because a TODO test passed (`(Wstat: 0 Tests:
/// N Failed: 0)`, then `TODO passed:` and its numbers) did not fail: prove
/// still says PASS for it.
fn summary_failures(text: &str) -> Vec<(&str, &str)> {
    // (name, line, listed only for TODO tests that passed)
    let mut listed: Vec<(&str, &str, bool)> = Vec::new();
    let report = text
        .lines()
        .skip_while(|l| l.trim() != "Test Summary Report")
        .take_while(|l| !l.starts_with("Files="));
    for l in report {
        if !l.starts_with(char::is_whitespace) {
            if let Some(name) = l
                .split_whitespace()
                .next()
                .filter(|_| l.contains(" (Wstat: "))
            {
                let clean = l.contains("(Wstat: 0 ") && l.trim_end().ends_with(" Failed: 0)");
                listed.push((name, l, clean));
            }
        } else if let Some(last) = listed.last_mut() {
            let t = l.trim();
            last.2 &= t.starts_with("TODO passed:")
                || t.chars()
                    .all(|c| c.is_ascii_digit() || matches!(c, ',' | '-' | ' '));
        }
    }
    listed
        .into_iter()
        .filter(|(_, _, todo_only)| !todo_only)
        .map(|(name, l, _)| (name, l))
        .collect()
}

/// One way's result with the files that found no port run again: their
/// tests added, and passed only if every file that failed the first time
/// was one of them and the second run passed.
fn rerun(
    first: Counts,
    text: &str,
    lost: &[String],
    again: Counts,
    again_text: &str,
) -> (Counts, String) {
    let only_ports = summary_failures(text)
        .iter()
        .all(|(name, _)| lost.iter().any(|l| l == name));
    let counts = Counts {
        files: first.files,
        tests: first.tests + again.tests,
        skipped_files: first.skipped_files + again.skipped_files,
        passed: only_ports && again.passed,
    };
    let text = format!(
        "{text}\nxtask: run again alone: {}\n{again_text}",
        lost.join(" ")
    );
    (counts, text)
}

/// Where prove runs: every entry of the suite's directory linked (nginx's
/// files find `lib/` and their data through it) and [`OURS`] copied, so
/// that the suite itself (the mirror's unpacked copy, or the operator's
/// checkout) is never written to. Made anew for each version.
fn run_dir(suite: &Path) -> Result<PathBuf> {
    let dir = crate::workspace::target_dir().join("nginx-tests-run");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).at(&dir)?;
    let entries = std::fs::read_dir(suite).at(suite)?;
    for e in entries.flatten() {
        let name = e.file_name();
        if OURS.iter().any(|o| name == *o) {
            continue;
        }
        std::os::unix::fs::symlink(e.path(), dir.join(&name)).at(&dir)?;
    }
    let from = crate::workspace::root().join("nginx-src-patches/tests");
    for name in OURS {
        std::fs::copy(from.join(name), dir.join(name)).at(from.join(name))?;
    }
    Ok(dir)
}

/// [`FILES`] as the suite's directory has them (never [`OURS`]), sorted.
fn expand(dir: &Path) -> Result<Vec<String>> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .at(dir)?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| FILES.iter().any(|p| matches(p, n)) && !OURS.contains(&n.as_str()))
        .collect();
    names.sort();
    if names.is_empty() {
        return err!("{}: none of {FILES:?}", dir.display());
    }
    Ok(names)
}

/// A shell pattern with at most one `*`.
fn matches(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        Some((head, tail)) => {
            name.len() >= head.len() + tail.len() && name.starts_with(head) && name.ends_with(tail)
        }
        None => pattern == name,
    }
}

/// `cargo xtask nginx-tests [--nginx VERSION|all] [--nginx-source PATH]`:
/// the build, then only nginx's own tests on it: stock, with the module,
/// patched, and the race on stock.
pub fn command(sel: &Selection) -> Result {
    let mut failed = Vec::new();
    for built in build::build_selection(sel)? {
        match step_for(Some(&built), &[]) {
            Some(step) if !step.ok => failed.push(step.what),
            Some(_) => {}
            None => println!(
                "xtask: {}: nginx's own tests are not run on forks (docs/testing.md, \"nginx's own tests\")",
                built.version
            ),
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        err!("failed: {}", failed.join(", "))
    }
}

/// [`step`] on a built nginx, unless a test filter was
/// given (it names this project's tests) or the codebase is a fork:
/// nginx-tests checks nginx's balancing, and stock Tengine's differs (its
/// round-robin starts at a random peer), so its files fail on stock
/// Tengine itself; Angie has no module (docs/testing.md, "nginx's own
/// tests").
pub fn step_for(built: Option<&Built>, extra: &[String]) -> Option<Step> {
    let built = built?;
    if !extra.is_empty() || source::is_fork(&built.version) {
        return None;
    }
    Some(step(built))
}

/// The suite on `built`, all ways at once; one line of the closing table.
pub fn step(built: &Built) -> Step {
    let mut step = Step::new(format!("nginx-tests {}", built.version));
    let started = Instant::now();
    let dir = match suite() {
        Some(Ok(d)) => d,
        Some(Err(e)) => {
            eprintln!("xtask: error: nginx-tests: {e}");
            return step;
        }
        None if !source::mirrors().is_empty() => {
            eprintln!(
                "xtask: error: nginx-tests: no single nginx-tests-COMMIT.tar.gz in the \
                 mirror ({}), and {TESTS_ENV} unset",
                source::MIRROR_ENV
            );
            return step;
        }
        None => {
            // No mirror and no checkout: not a failure (CI has its mirror,
            // where a missing suite fails), but said in the table as not
            // run, never as passed.
            let why = format!("no nginx-tests (no mirror, {TESTS_ENV} unset)");
            println!(
                "xtask: nginx-tests: {why}: nginx's own tests not run on {}",
                built.version
            );
            step.ok = true;
            step.not_run = Some(why);
            return step;
        }
    };
    let (theirs, dir) = match expand(&dir).and_then(|t| Ok((t, run_dir(&dir)?))) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("xtask: error: nginx-tests: {e}");
            return step;
        }
    };
    let ours: Vec<String> = OURS.iter().map(|o| o.to_string()).collect();
    let all: Vec<String> = theirs.iter().chain(&ours).cloned().collect();
    let stock = built.install.join("stock/sbin/nginx");
    let patched = built.install.join("patched/sbin/nginx");
    let module = built.install.join("modules").join(MODULE_FILE);
    let mut ways: Vec<(&str, &[String], &Path, Option<&Path>)> = vec![
        ("stock", &theirs, &stock, None),
        ("stock, the race", &ours, &stock, None),
        ("module on", &all, &stock, Some(&module)),
    ];
    if patched.is_file() {
        ways.push(("patched", &all, &patched, None));
    }
    let results: Vec<(&str, Result<(Counts, String)>)> = std::thread::scope(|s| {
        let handles: Vec<_> = ways
            .iter()
            .map(|(name, files, binary, module)| {
                (*name, s.spawn(|| way(&dir, files, binary, *module)))
            })
            .collect();
        handles
            .into_iter()
            .map(|(name, h)| {
                (
                    name,
                    h.join()
                        .unwrap_or_else(|_| Err("prove's runner panicked".into())),
                )
            })
            .collect()
    });
    // A file that found no free port (the ways share Test::Nginx's
    // 500-port blocks) ran nothing: it runs again alone, now that the
    // others are done, and the line says so.
    let results: Vec<(&str, Result<(Counts, String)>)> = results
        .into_iter()
        .zip(&ways)
        .map(|((name, r), (_, _, binary, module))| {
            let r = r.and_then(|(c, text)| {
                let lost = out_of_ports(&text);
                if lost.is_empty() {
                    return Ok((c, text));
                }
                println!(
                    "xtask: nginx-tests {} {name}: {} found no free port in Test::Nginx's \
                     range (\"Port limit exceeded\") and ran no test: run again alone",
                    built.version,
                    lost.join(", ")
                );
                let (again, again_text) = way(&dir, &lost, binary, *module)?;
                Ok(rerun(c, &text, &lost, again, &again_text))
            });
            (name, r)
        })
        .collect();
    step.ok = true;
    // With the module or patched, the same files must run as on stock,
    // plus ours: a `try_run` that could not start nginx (a module that
    // does not load) skips a file and prove still says PASS.
    let expected = match (results.first(), results.get(1)) {
        (Some((_, Ok((stock, _)))), Some((_, Ok((race, _))))) => {
            Some((stock.tests + race.tests, stock.skipped_files))
        }
        _ => None,
    };
    for (name, r) in results {
        match r {
            Ok((c, text)) if name == "stock, the race" => {
                // Stock nginx reproduces the race in each of our files:
                // exactly their tests 3 and 4 fail.
                let reproduced = race_reproduced(&c, &text);
                println!(
                    "xtask: nginx-tests {} {name}: {} of {} files fail as the race makes them \
                     ({STOCK_FAILS}), {}",
                    built.version,
                    text.matches(STOCK_FAILS).count(),
                    OURS.len(),
                    if reproduced {
                        "as expected"
                    } else {
                        "NOT as expected"
                    }
                );
                if reproduced {
                    step.totals.passed += 1;
                } else {
                    println!("{text}");
                    step.totals.failed += 1;
                    step.ok = false;
                }
            }
            Ok((c, text)) => {
                let same = name == "stock" || expected == Some((c.tests, c.skipped_files));
                println!(
                    "xtask: nginx-tests {} {name}: {} tests in {} files ({} skipped), {}{}",
                    built.version,
                    c.tests,
                    c.files,
                    c.skipped_files,
                    if c.passed { "PASS" } else { "FAIL" },
                    if same {
                        String::new()
                    } else {
                        format!(", but stock and ours ran (tests, skipped) {expected:?}")
                    }
                );
                if c.passed && same {
                    step.totals.passed += u64::from(c.tests);
                } else {
                    println!("{text}");
                    step.totals.failed += 1;
                    step.ok = false;
                }
            }
            Err(e) => {
                eprintln!("xtask: error: nginx-tests {} {name}: {e}", built.version);
                step.ok = false;
            }
        }
    }
    step.tests_ended(started);
    step
}

#[cfg(test)]
mod tests;
