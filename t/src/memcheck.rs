//! nginx under valgrind memcheck: with `GENERATION_RETRY_VALGRIND=<dir>` in
//! the environment, every nginx the harness starts in the foreground runs
//! as one process (`master_process off`) under memcheck, logging to
//! `<dir>/<prefix name>.log`, and fails its test when it stops if the log
//! shows any memory error (invalid read, write or free, use of
//! uninitialised memory, ...) or any definitely lost block.
//!
//! Suppressions (`ci/valgrind.supp`) cover only what stock nginx 1.28.0
//! itself reports under the same command; each is explained there.
//!
//! [`parse`] is the project's one reader of memcheck logs: the harness
//! fails a test on its [`Report`], and `cargo xtask valgrind` sums the
//! same reports over every log of a run.

use std::fs;
use std::path::{Path, PathBuf};

/// The environment variable naming the log directory.
pub const ENV: &str = "GENERATION_RETRY_VALGRIND";

/// The exit code valgrind uses when it found errors (any code nginx never
/// uses itself).
pub const ERROR_EXITCODE: u16 = 99;

/// The log directory, when memcheck runs are asked for.
pub fn log_dir() -> Option<PathBuf> {
    std::env::var_os(ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// A harness bound scaled for the run: nginx under memcheck runs tens of
/// times slower (every first path through freshly translated code), so
/// each bounded wait on nginx grows sixfold there and stays as it is
/// otherwise.
pub fn patience(bound: std::time::Duration) -> std::time::Duration {
    if log_dir().is_some() {
        bound * 6
    } else {
        bound
    }
}

/// The suppressions for nginx's own known behaviour.
pub fn suppressions() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../ci/valgrind.supp")
}

/// The memcheck command (without the program) logging to `log`.
pub fn command(log: &Path) -> Vec<String> {
    vec![
        "valgrind".into(),
        "--tool=memcheck".into(),
        format!("--error-exitcode={ERROR_EXITCODE}"),
        format!("--log-file={}", log.display()),
        format!("--suppressions={}", suppressions().display()),
        "--leak-check=full".into(),
        "--show-leak-kinds=definite".into(),
        "--errors-for-leak-kinds=definite".into(),
        "--num-callers=40".into(),
        // nginx unloads the module (dlclose) when it destroys the cycle
        // pool at exit, before the leak check: keep its symbols so leak
        // stacks still name the module's frames.
        "--keep-debuginfo=yes".into(),
        // nginx forks nothing with `master_process off` and `daemon off`;
        // should it, the child is not ours to check.
        "--child-silent-after-fork=yes".into(),
    ]
}

/// What one memcheck log says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// valgrind printed its final `ERROR SUMMARY` (nginx exited normally;
    /// a killed process leaves no summary).
    pub complete: bool,
    /// From `ERROR SUMMARY: N errors`; counts definite leaks too (they are
    /// errors with `--errors-for-leak-kinds=definite`).
    pub errors: u64,
    /// From `ERROR SUMMARY: ... (suppressed: S from T)`: errors the
    /// suppressions hid.
    pub suppressed: u64,
    /// From the `LEAK SUMMARY`: `definitely lost: B bytes in N blocks`.
    pub definitely_lost_bytes: u64,
    pub definitely_lost_blocks: u64,
    /// Each error and each definite leak record as valgrind printed it,
    /// without the `==pid==` prefixes.
    pub excerpts: Vec<String>,
    /// `Process terminating with default action of signal ...`.
    pub killed_by_signal: Option<String>,
}

impl Report {
    pub fn clean(&self) -> bool {
        self.complete
            && self.errors == 0
            && self.definitely_lost_blocks == 0
            && self.killed_by_signal.is_none()
    }

    /// One paragraph for a failing test.
    pub fn describe(&self, log: &Path) -> String {
        let mut s = format!(
            "valgrind memcheck ({}): {} errors, definitely lost {} bytes in {} blocks{}{}\n",
            log.display(),
            self.errors,
            self.definitely_lost_bytes,
            self.definitely_lost_blocks,
            if self.complete {
                ""
            } else {
                ", no ERROR SUMMARY (nginx did not exit normally)"
            },
            match &self.killed_by_signal {
                Some(sig) => format!(", {sig}"),
                None => String::new(),
            },
        );
        for e in &self.excerpts {
            let module = if involves_module(e) {
                " [module in stack]"
            } else {
                ""
            };
            s.push_str(&format!("---{module}\n{e}\n"));
        }
        s
    }
}

/// Whether a stack names the module's shared object or its symbols.
pub fn involves_module(excerpt: &str) -> bool {
    excerpt.contains("generation_retry")
}

/// The first line of each record that counts against a run.
const ERROR_KINDS: &[&str] = &[
    "Invalid read",
    "Invalid write",
    "Invalid free",
    "Mismatched free",
    "Conditional jump or move depends on uninitialised",
    "Use of uninitialised value",
    "Syscall param",
    "Source and destination overlap",
    "Argument '",
    "Jump to the invalid address",
    "Process terminating",
];

/// Parses a memcheck log (text format).
pub fn parse(text: &str) -> Report {
    let mut r = Report::default();
    // Strip `==PID== ` and split into blank-line separated records.
    let mut record: Vec<&str> = Vec::new();
    let mut records: Vec<Vec<&str>> = Vec::new();
    for line in text.lines() {
        let body = match line.strip_prefix("==") {
            Some(rest) => match rest.split_once("== ") {
                Some((_pid, b)) => b,
                None => rest.split_once("==").map(|(_, b)| b).unwrap_or(""),
            },
            None => continue,
        };
        if body.trim().is_empty() {
            if !record.is_empty() {
                records.push(std::mem::take(&mut record));
            }
        } else {
            record.push(body);
        }
    }
    if !record.is_empty() {
        records.push(record);
    }
    for rec in records {
        let head = rec[0];
        let text = rec.join("\n");
        if head.contains("are definitely lost in loss record") {
            r.excerpts.push(text);
            continue;
        }
        if let Some(sig) = head.strip_prefix("Process terminating with default action of ") {
            r.killed_by_signal = Some(sig.to_string());
        }
        if ERROR_KINDS.iter().any(|k| head.starts_with(k)) {
            r.excerpts.push(text);
        }
        for line in &rec {
            let line = line.trim();
            if let Some(rest) = line.strip_prefix("ERROR SUMMARY: ") {
                r.complete = true;
                r.errors = first_number(rest);
                r.suppressed = rest
                    .split_once("suppressed: ")
                    .map_or(0, |(_, s)| first_number(s));
            } else if let Some(rest) = line.strip_prefix("definitely lost: ") {
                let (bytes, blocks) = bytes_in_blocks(rest);
                r.definitely_lost_bytes = bytes;
                r.definitely_lost_blocks = blocks;
            }
        }
    }
    r
}

/// Reads and parses a log; a missing log is an incomplete report.
pub fn read(log: &Path) -> Report {
    fs::read_to_string(log)
        .map(|t| parse(&t))
        .unwrap_or_default()
}

fn first_number(s: &str) -> u64 {
    s.split_whitespace()
        .next()
        .map(|n| n.replace(',', ""))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// `1,234 bytes in 5 blocks`
fn bytes_in_blocks(s: &str) -> (u64, u64) {
    let words: Vec<&str> = s.split_whitespace().collect();
    let num = |w: Option<&&str>| {
        w.map(|n| n.replace(',', ""))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    (num(words.first()), num(words.get(3)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLEAN: &str = "\
==4242== Memcheck, a memory error detector
==4242== Command: nginx -p /tmp/x -c /tmp/x/nginx.conf
==4242== 
==4242== HEAP SUMMARY:
==4242==     in use at exit: 95,133 bytes in 12 blocks
==4242==   total heap usage: 1,105 allocs, 1,093 frees, 2,001,402 bytes allocated
==4242== 
==4242== LEAK SUMMARY:
==4242==    definitely lost: 0 bytes in 0 blocks
==4242==    indirectly lost: 0 bytes in 0 blocks
==4242==      possibly lost: 0 bytes in 0 blocks
==4242==    still reachable: 95,133 bytes in 12 blocks
==4242==         suppressed: 0 bytes in 0 blocks
==4242== Reachable blocks (those to which a pointer was found) are not shown.
==4242== 
==4242== For lists of detected and suppressed errors, rerun with: -s
==4242== ERROR SUMMARY: 0 errors from 0 contexts (suppressed: 3 from 3)
";

    const DIRTY: &str = "\
==77== Memcheck, a memory error detector
==77== 
==77== Invalid read of size 8
==77==    at 0x4C2F1A0: peer_get (in /t/modules/ngx_http_upstream_generation_retry_module.so)
==77==    by 0x12345: ngx_event_connect_peer (ngx_event_connect.c:36)
==77==  Address 0x5a0 is 16 bytes inside a block of size 64 free'd
==77== 
==77== LEAK SUMMARY:
==77==    definitely lost: 1,024 bytes in 2 blocks
==77== 
==77== 1,024 bytes in 2 blocks are definitely lost in loss record 9 of 20
==77==    at 0x483877F: malloc (vg_replace_malloc.c:307)
==77==    by 0x1: ngx_alloc (ngx_alloc.c:22)
==77== 
==77== ERROR SUMMARY: 2 errors from 2 contexts (suppressed: 0 from 0)
";

    #[test]
    fn a_clean_log_is_clean() {
        let r = parse(CLEAN);
        assert!(r.clean(), "{r:?}");
        assert!(r.excerpts.is_empty());
        assert_eq!(r.suppressed, 3);
    }

    #[test]
    fn summaries_are_read_with_thousands_separators() {
        let r = parse(
            "==9== LEAK SUMMARY:\n\
             ==9==    definitely lost: 1,024 bytes in 2 blocks\n\
             ==9== ERROR SUMMARY: 1,003 errors from 2 contexts (suppressed: 4,000 from 1)\n",
        );
        assert!(r.complete);
        assert_eq!((r.errors, r.suppressed), (1003, 4000));
        assert_eq!(
            (r.definitely_lost_bytes, r.definitely_lost_blocks),
            (1024, 2)
        );
        assert!(!parse("==9== Memcheck, a memory error detector\n").complete);
    }

    #[test]
    fn errors_and_leaks_are_counted_with_their_stacks() {
        let r = parse(DIRTY);
        assert!(!r.clean());
        assert_eq!(r.errors, 2);
        assert_eq!(
            (r.definitely_lost_bytes, r.definitely_lost_blocks),
            (1024, 2)
        );
        assert_eq!(r.excerpts.len(), 2);
        assert!(involves_module(&r.excerpts[0]));
        assert!(!involves_module(&r.excerpts[1]));
        assert!(r.describe(Path::new("x.log")).contains("[module in stack]"));
    }

    #[test]
    fn a_log_without_summary_is_not_clean() {
        let r = parse("==1== Memcheck, a memory error detector\n==1== \n");
        assert!(!r.complete);
        assert!(!r.clean());
        let killed = parse(
            "==1== Process terminating with default action of signal 11 (SIGSEGV)\n\
             ==1==  Access not within mapped region at address 0x0\n==1== \n\
             ==1== ERROR SUMMARY: 0 errors from 0 contexts\n",
        );
        assert_eq!(
            killed.killed_by_signal.as_deref(),
            Some("signal 11 (SIGSEGV)")
        );
        assert!(!killed.clean());
    }
}
