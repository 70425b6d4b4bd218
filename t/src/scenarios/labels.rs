//! `generation-retry-diagnose` held against ground truth: a lab arm's logs,
//! labelled by the module, and the tool's verdict on the same logs with
//! the module's lines taken out.
//!
//! The labels: an arm that runs the module in observe mode (`off`) fails
//! exactly as stock nginx does, and the module writes one
//! `generation_retry: upstream "be": cause=...` line before each of
//! nginx's `no live upstreams`, in the request's context. So each 502 of
//! the access log has a true family:
//!
//! - a `cause=generation` line: `generation-retry` when `$upstream_addr`
//!   holds an address before the name, `generation-first` for the bare name;
//! - `cause=unavailable`: `unavailable`; `cause=empty`: `empty`;
//! - no line: `other` (an attempt that failed on its own).
//!
//! The tool's own `unknown` (a refusal no evidence decides: see
//! [`UNKNOWN`]) is no true family: it is never placed right (no true
//! family is called so), counts against the family each such 502 truly
//! has, and is counted apart ([`Score::unknown`]) so that a score says how
//! many of its misses are the tool saying it cannot tell.
//!
//! A stock arm has no module to label it; [`Truth::ByConstruction`] says
//! what its configuration allows instead: one re-resolving peer of one
//! address (never marked down: a single peer) whose name always resolves
//! once it has resolved, so each no-live 502 of the arm's traffic is the
//! generation's and each other 502 is `other`. The readiness probes before
//! the traffic (`/ready/K`, sent until one is answered 200) fail only
//! while the name has not resolved yet: a no-live 502 of theirs is
//! `empty`.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::scenarios::lab::ArmResult;
use crate::scoring::accesslog::{self, Entry, Hop, Shape};

/// The share of each family the tool must place right on labelled logs.
pub const MIN_SHARE: f64 = 0.99;

/// The five families, as the tool names them.
pub const FAMILIES: [&str; 5] = [
    "generation-retry",
    "generation-first",
    "unavailable",
    "empty",
    "other",
];

/// The tool's family for a refusal it has no evidence to decide. The
/// truth always has a cause, so a 502 the tool calls `unknown` is scored
/// as misplaced in its true family, never as right.
pub const UNKNOWN: &str = "unknown";

/// Where the true family of each 502 comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Truth {
    /// The module's `cause=` lines (an arm with the module loaded).
    ModuleLines,
    /// The arm's configuration (stock: see the module docs).
    ByConstruction,
}

/// How the tool did on one arm's logs.
#[derive(Clone, Debug, Default)]
pub struct Score {
    pub arm: String,
    /// Per family, in [`FAMILIES`] order: (true members, placed right).
    pub families: [(usize, usize); 5],
    /// The first misplaced incidents: request, true family, the tool's.
    pub misplaced: Vec<String>,
    /// 502s the tool called [`UNKNOWN`] (each also misplaced in its true
    /// family).
    pub unknown: usize,
    /// 502/504s of the access log, and incidents the tool reported.
    pub errors_logged: usize,
    pub incidents: usize,
    /// 502s whose label could not be read (a no-live 502 with no `cause=`
    /// line, or a `cause=` line with no 502): each makes the score void.
    pub unlabelled: Vec<String>,
    /// The tool's exit status and what it wrote to stderr.
    pub status: i32,
    pub stderr: String,
}

impl Score {
    /// True members of `family`.
    pub fn total(&self, family: &str) -> usize {
        FAMILIES
            .iter()
            .position(|f| *f == family)
            .map_or(0, |i| self.families[i].0)
    }

    /// What keeps the score from showing at least `min` (0.99) of every
    /// family placed right, one sentence each; empty when nothing does.
    pub fn failures(&self, min: f64) -> Vec<String> {
        let mut out = Vec::new();
        if self.status != 0 {
            out.push(format!(
                "{}: the tool exited {}: {}",
                self.arm, self.status, self.stderr
            ));
        }
        if !self.unlabelled.is_empty() {
            out.push(format!(
                "{}: {} 502s without a label: {}",
                self.arm,
                self.unlabelled.len(),
                self.unlabelled.join("; ")
            ));
        }
        if self.incidents != self.errors_logged {
            out.push(format!(
                "{}: the access log has {} 502/504s, the tool reported {} incidents",
                self.arm, self.errors_logged, self.incidents
            ));
        }
        for (f, (total, right)) in FAMILIES.iter().zip(self.families) {
            if total > 0 && (right as f64) < min * total as f64 {
                out.push(format!(
                    "{}: {f}: {right} of {total} placed right ({:.1}%, {:.0}% required)",
                    self.arm,
                    100.0 * right as f64 / total as f64,
                    100.0 * min
                ));
            }
        }
        if !out.is_empty() && !self.misplaced.is_empty() {
            out.push(format!(
                "{}: misplaced (request: true -> tool): {}",
                self.arm,
                self.misplaced.join("; ")
            ));
        }
        out
    }

    /// One line: the arm, and per family right/total.
    pub fn line(&self) -> String {
        let cells: Vec<String> = FAMILIES
            .iter()
            .zip(self.families)
            .map(|(f, (t, r))| format!("{f} {r}/{t}"))
            .collect();
        match self.unknown {
            0 => format!("{}: {}", self.arm, cells.join(", ")),
            n => format!("{}: {}; {n} {UNKNOWN}", self.arm, cells.join(", ")),
        }
    }
}

/// Runs the tool on `r`'s logs, the module's lines taken out of the error
/// log, and scores its families against `truth`.
pub fn score(r: &ArmResult, truth: Truth) -> Score {
    let dir = scratch_dir(&r.arm);
    let access = dir.join("access.log");
    let error = dir.join("error.log");
    std::fs::write(&access, &r.logs.access).expect("write access.log");
    // The configuration, as an operator would pass it: without it, no
    // refusal is `empty` (a `down` server shows nowhere else).
    let conf = dir.join("nginx.conf");
    std::fs::write(&conf, &r.logs.conf).expect("write nginx.conf");
    let module = truth == Truth::ModuleLines;
    let args: Vec<OsString> = vec![
        "--nginx-conf".into(),
        conf.into(),
        "--access-log".into(),
        access.into(),
        "--error-log".into(),
        error.into(),
        "--log-format".into(),
        accesslog::log_format(module).into(),
        "--json".into(),
    ];
    let truths = Truths::http(&r.logs.access, &r.logs.error);
    score_in(&dir, &args, &r.arm, truths, &r.logs.error, truth)
}

/// Writes `labelled_error` without the module's lines to `dir/error.log`
/// (beside what the caller wrote there and named in `args`), runs the tool
/// with `args`, removes `dir` (unless kept) and scores the tool's
/// placements against the truth of `access` (the harness's format).
pub fn score_in(
    dir: &Path,
    args: &[OsString],
    name: &str,
    truths: Truths,
    labelled_error: &str,
    truth: Truth,
) -> Score {
    std::fs::write(dir.join("error.log"), strip_labels(labelled_error)).expect("write error.log");
    if std::env::var_os(KEEP).is_some() {
        std::fs::write(dir.join("error.labelled.log"), labelled_error).expect("write the labels");
    }
    let placed = run_tool(args);
    if std::env::var_os(KEEP).is_none() {
        let _ = std::fs::remove_dir_all(dir);
    }
    tally(name, truths, truth, &placed)
}

/// What the truth is read from: the logged failures, each named by a key
/// (an http request's path; a stream session's `*N`), and the module's
/// `cause=` per key.
pub struct Truths {
    pub entries: Vec<Entry>,
    pub causes: BTreeMap<String, String>,
    /// Stream sessions: only incidents without a request are counted
    /// (the error log also holds the other protocol's failures, which the
    /// tool reports from their error lines alone).
    pub stream: bool,
}

impl Truths {
    /// An http access log in the harness's format (each request its own
    /// path) and the error log with the module's lines.
    pub fn http(access: &str, labelled_error: &str) -> Truths {
        Truths {
            entries: accesslog::parse(access),
            causes: causes(labelled_error),
            stream: false,
        }
    }

    /// Stream sessions, each an [`Entry`] whose path is `*N` (its
    /// `$connection`), and the module's stream lines by the same `*N`.
    pub fn stream(entries: Vec<Entry>, labelled_error: &str) -> Truths {
        let causes = labelled_error
            .lines()
            .filter(|l| l.contains(MODULE_MARK) && l.contains("stream upstream \""))
            .filter_map(|l| {
                let cause = l.split("cause=").nth(1)?;
                let cause = cause.split([',', ' ']).next()?.to_string();
                let id = l.split(' ').find(|w| w.starts_with('*'))?.to_string();
                Some((id, cause))
            })
            .collect();
        Truths {
            entries,
            causes,
            stream: true,
        }
    }
}

/// The error log without the module's lines: what the tool reads.
fn strip_labels(error_log: &str) -> String {
    error_log
        .lines()
        .filter(|l| !l.contains(MODULE_MARK))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// What the tool said of a set of logs: each request path's family and
/// reason.
#[derive(Clone, Debug, Default)]
struct Placements {
    /// The tool's exit status and what it wrote to stderr.
    pub status: i32,
    pub stderr: String,
    /// Incidents reported: http requests, stream sessions.
    pub incidents: usize,
    pub sessions: usize,
    pub by_path: BTreeMap<String, (String, String)>,
}

/// Runs the tool (`--json` among `args`) and reads its placements.
fn run_tool(args: &[OsString]) -> Placements {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let status = generation_retry_diagnose::run(args, &mut out, &mut err);
    let mut placed = Placements {
        status,
        stderr: String::from_utf8_lossy(&err).into_owned(),
        ..Placements::default()
    };
    if status != 0 {
        return placed;
    }
    let verdict: Value = serde_json::from_slice(&out).expect("the tool's --json output");
    let incidents = verdict["incidents"]
        .as_array()
        .map(|a| a.as_slice())
        .unwrap_or_default();
    placed.sessions = incidents
        .iter()
        .filter(|i| i["request"].as_str().is_none_or(str::is_empty))
        .count();
    placed.incidents = incidents.len() - placed.sessions;
    placed.by_path = incidents
        .iter()
        .filter_map(|i| {
            // A request by its path; a stream session by its `*N`.
            let path = match i["request"].as_str()?.split(' ').nth(1) {
                Some(path) => path.to_string(),
                None => format!("*{}", i["connection"].as_u64()?),
            };
            let family = i["family"].as_str()?.to_string();
            let reason = i["reason"].as_str().unwrap_or_default().to_string();
            Some((path, (family, reason)))
        })
        .collect();
    placed
}

/// Scores `placed` against the true families of the 502/504s of `access`
/// (the harness's format), labelled by `labelled_error` (the error log
/// with the module's lines) under `truth`.
fn tally(name: &str, truths: Truths, truth: Truth, placed: &Placements) -> Score {
    let mut score = Score {
        arm: name.to_string(),
        status: placed.status,
        stderr: placed.stderr.clone(),
        incidents: if truths.stream {
            placed.sessions
        } else {
            placed.incidents
        },
        ..Score::default()
    };
    if placed.status != 0 {
        return score;
    }
    let Truths {
        entries,
        mut causes,
        ..
    } = truths;
    for e in entries {
        if e.status != 502 && e.status != 504 {
            continue;
        }
        score.errors_logged += 1;
        let cause = causes.remove(&e.path);
        let Some(family) = true_family(&e, truth, cause.as_deref()) else {
            score
                .unlabelled
                .push(format!("{} {:?}", e.path, e.upstream_addr()));
            continue;
        };
        let i = FAMILIES
            .iter()
            .position(|f| *f == family)
            .expect("a family");
        score.families[i].0 += 1;
        let (tool, reason) = placed
            .by_path
            .get(&e.path)
            .map_or(("(none)", ""), |(f, r)| (f.as_str(), r.as_str()));
        // `unknown` is the tool saying it cannot tell: no true family is
        // called so (FAMILIES lacks it), so it is never right; it is
        // counted apart.
        if tool == UNKNOWN {
            score.unknown += 1;
        }
        if tool == family {
            score.families[i].1 += 1;
        } else if score.misplaced.len() < 10 {
            score.misplaced.push(format!(
                "{} {:?}: {family} -> {tool} ({reason})",
                e.path,
                e.upstream_addr()
            ));
        }
    }
    score.unlabelled.extend(
        causes
            .into_iter()
            .map(|(path, cause)| format!("cause={cause} logged for {path}, which has no 502")),
    );
    score
}

/// The variable naming where to keep the scored logs.
const KEEP: &str = "GENERATION_RETRY_KEEP_LOGS";

/// What marks the module's own error-log lines.
const MODULE_MARK: &str = "generation_retry: ";

/// The module's `cause=` of each request path in `error_log`.
fn causes(error_log: &str) -> BTreeMap<String, String> {
    error_log
        .lines()
        .filter(|l| l.contains(MODULE_MARK))
        .filter_map(|l| {
            let cause = l.split("cause=").nth(1)?;
            let cause = cause.split([',', ' ']).next()?.to_string();
            let request = l.split("request: \"").nth(1)?;
            let path = request.split(' ').nth(1)?.to_string();
            Some((path, cause))
        })
        .collect()
}

/// The true family of the 502/504 `e`, from the module's `cause` for its
/// request (see the module docs); `None` when the label is missing.
fn true_family(e: &Entry, truth: Truth, cause: Option<&str>) -> Option<&'static str> {
    let generation = match e.shape() {
        Shape::TwoHop { .. } => "generation-retry",
        Shape::OneHop => "generation-first",
        Shape::Other => "other",
    };
    match (truth, cause) {
        (Truth::ByConstruction, _)
            if generation != "other" && e.path.starts_with(crate::scenarios::lab::READY_PATH) =>
        {
            Some("empty")
        }
        (Truth::ByConstruction, _) => Some(generation),
        (Truth::ModuleLines, None) => {
            // A no-live 502 always has its cause line.
            matches!(e.hops.last(), Some(Hop::Addr(_)) | None).then_some("other")
        }
        // A cause line for a 502 that is not a no-live one contradicts
        // itself: no label.
        (Truth::ModuleLines, Some(_)) if generation == "other" => None,
        (Truth::ModuleLines, Some("generation")) => Some(generation),
        (Truth::ModuleLines, Some("unavailable")) => Some("unavailable"),
        (Truth::ModuleLines, Some("empty")) => Some("empty"),
        (Truth::ModuleLines, Some(_)) => None,
    }
}

/// A fresh directory for one arm's logs: under
/// `GENERATION_RETRY_KEEP_LOGS` when set (kept, to study a score), else
/// under the temporary directory (removed once scored).
pub fn scratch_dir(arm: &str) -> PathBuf {
    let name: String = arm
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let base = std::env::var_os(KEEP).map_or_else(std::env::temp_dir, PathBuf::from);
    let dir = base.join(format!(
        "generation-retry-labels-{}-{name}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    ));
    std::fs::create_dir_all(&dir).expect("create a scratch directory");
    dir
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A refusal the tool calls `unknown` is misplaced in its true family
    /// (here `unavailable`, by the module's `cause=` line), and the
    /// score's failures name it; the one it places right still counts.
    #[test]
    fn unknown_is_never_placed_right() {
        let line = |path: &str| {
            format!("1764662400.000 502 \"be\" \"GET {path} HTTP/1.1\" 0.001 \"-\" -\n")
        };
        let truths = Truths {
            entries: accesslog::parse(&format!("{}{}", line("/a"), line("/b"))),
            causes: [("/a", "unavailable"), ("/b", "unavailable")]
                .into_iter()
                .map(|(p, c)| (p.to_string(), c.to_string()))
                .collect(),
            stream: false,
        };
        let placed = Placements {
            incidents: 2,
            by_path: [("/a", UNKNOWN), ("/b", "unavailable")]
                .into_iter()
                .map(|(p, f)| (p.to_string(), (f.to_string(), "why".to_string())))
                .collect(),
            ..Placements::default()
        };
        let score = tally("arm", truths, Truth::ModuleLines, &placed);
        let unavailable = FAMILIES
            .iter()
            .position(|f| *f == "unavailable")
            .expect("a family");
        assert_eq!(score.families[unavailable], (2, 1));
        assert!(!FAMILIES.contains(&UNKNOWN));
        assert_eq!(score.unknown, 1);
        assert!(score.line().ends_with("; 1 unknown"), "{}", score.line());
        let failures = score.failures(MIN_SHARE).join("\n");
        assert!(
            failures.contains("unavailable: 1 of 2 placed right")
                && failures.contains("/a \"be\": unavailable -> unknown"),
            "{failures}"
        );
    }

    /// By construction, a stock arm's no-live 502 is the generation's, but
    /// a readiness probe's is the list still empty before the name's first
    /// answer (seen in CI: `/ready/0 "be"` under load).
    #[test]
    fn a_readiness_probe_before_the_first_answer_is_empty() {
        let line = |path: &str, addr: &str| {
            format!("1764662400.000 502 \"{addr}\" \"GET {path} HTTP/1.1\" 0.001 \"-\" -\n")
        };
        let entries = accesslog::parse(&format!(
            "{}{}{}",
            line("/ready/0", "be"),
            line("/get/7", "be"),
            line("/get/8", "127.0.0.2:80, be")
        ));
        let truths: Vec<_> = entries
            .iter()
            .map(|e| true_family(e, Truth::ByConstruction, None))
            .collect();
        assert_eq!(
            truths,
            [
                Some("empty"),
                Some("generation-first"),
                Some("generation-retry")
            ]
        );
    }
}
