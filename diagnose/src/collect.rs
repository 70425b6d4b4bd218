//! The streaming pass over the logs: every line is parsed and then either
//! dropped or reduced to what classification needs, so memory stays flat
//! in the size of the logs.
//!
//! Kept: the access entries with status 502 or 504 (and their lines), the
//! error lines of the kinds the classifier reads (no live upstreams,
//! resolver, disabled, peer errors), the per-second address
//! [`Timeline`], and per-file line counts with the first unparseable line.

use std::collections::BTreeSet;

use crate::access::{AccessEntry, AccessParser};
use crate::errorlog::{self, ErrorLine, Kind};
use crate::timeline::Timeline;

/// Settings of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// How far around an incident to look, in milliseconds.
    pub window_ms: i64,
    /// The error log's offset east of UTC, in seconds.
    pub error_offset_s: i32,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            window_ms: 2_000,
            error_offset_s: 0,
        }
    }
}

/// Which log a file is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogKind {
    /// An access log (`--access-log`).
    Access,
    /// An error log (`--error-log`).
    Error,
}

/// Line counts of one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileStats {
    /// The file's name as given.
    pub name: String,
    /// Which log it is.
    pub kind: LogKind,
    /// Lines read (blank lines included).
    pub lines: u64,
    /// Lines that did not parse.
    pub unparsed: u64,
    /// The first of them: its line number and (clipped) text.
    pub first_unparsed: Option<(u64, String)>,
}

/// A 502/504 access entry and its line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The parsed entry.
    pub entry: AccessEntry,
    /// The line as logged (clipped to [`KEEP_LINE`] bytes).
    pub line: String,
}

/// A kept error line and its text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeptError {
    /// The parsed line.
    pub error: ErrorLine,
    /// The line as logged (clipped to [`KEEP_LINE`] bytes).
    pub line: String,
}

/// The longest line kept as evidence.
pub const KEEP_LINE: usize = 4_096;
/// The longest unparseable example kept.
const KEEP_EXAMPLE: usize = 300;

/// Cuts `s` to at most `max` bytes, on a character boundary.
pub fn clip(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Everything the classifier reads, sorted by time.
#[derive(Clone, Debug, Default)]
pub struct Collected {
    /// The run's settings.
    pub options: Options,
    /// Whether the access format has `$connection`.
    pub has_connection: bool,
    /// Whether the access format has `$request`.
    pub has_request: bool,
    /// Access entries with status 502 or 504, by time.
    pub failures: Vec<Failure>,
    /// Error lines of kinds NoLive, Resolver, Disabled, PeerError, by time.
    pub errors: Vec<KeptError>,
    /// Addresses per second, and upstream universes.
    pub timeline: Timeline,
    /// One per file, in the order read.
    pub files: Vec<FileStats>,
    /// The module's own error lines (left out of the diagnosis).
    pub module_lines: u64,
    /// Access entries parsed.
    pub access_entries: u64,
    /// The zone offsets access-log times were written with.
    pub access_offsets: BTreeSet<i32>,
}

/// Feeds lines in, one file after another, then [`Collector::finish`].
#[derive(Debug)]
pub struct Collector {
    parser: Option<AccessParser>,
    data: Collected,
}

impl Collector {
    /// A collector for access lines in `parser`'s format (`None` if there
    /// are no access logs: access lines then count as unparsed).
    pub fn new(parser: Option<AccessParser>, options: Options) -> Collector {
        let mut data = Collected {
            options,
            ..Collected::default()
        };
        if let Some(p) = &parser {
            data.has_connection = p.has_connection();
            data.has_request = p.has_request();
        }
        Collector { parser, data }
    }

    /// Starts a file; its lines go to [`Collector::line`] with the id
    /// returned.
    pub fn start_file(&mut self, name: &str, kind: LogKind) -> usize {
        self.data.files.push(FileStats {
            name: name.to_string(),
            kind,
            lines: 0,
            unparsed: 0,
            first_unparsed: None,
        });
        self.data.files.len() - 1
    }

    /// Takes one line (bytes, any content) of file `file`.
    pub fn line(&mut self, file: usize, bytes: &[u8]) {
        let text = String::from_utf8_lossy(bytes);
        let Some(kind) = self.data.files.get(file).map(|f| f.kind) else {
            return;
        };
        let parsed = if text.trim().is_empty() {
            true
        } else {
            match kind {
                LogKind::Access => self.access(&text),
                LogKind::Error => self.error(&text),
            }
        };
        if let Some(stats) = self.data.files.get_mut(file) {
            stats.lines += 1;
            if !parsed {
                stats.unparsed += 1;
                if stats.first_unparsed.is_none() {
                    stats.first_unparsed =
                        Some((stats.lines, clip(&text, KEEP_EXAMPLE).to_string()));
                }
            }
        }
    }

    fn access(&mut self, text: &str) -> bool {
        let Some(entry) = self.parser.as_ref().and_then(|p| p.parse_line(text)) else {
            return false;
        };
        self.data.access_entries += 1;
        if let Some(off) = entry.offset_s {
            if self.data.access_offsets.len() < 8 {
                self.data.access_offsets.insert(off);
            }
        }
        self.data
            .timeline
            .observe(&entry.upstream_addr, entry.time_ms);
        if entry.status == 502 || entry.status == 504 {
            self.data.failures.push(Failure {
                entry,
                line: clip(text, KEEP_LINE).to_string(),
            });
        }
        true
    }

    fn error(&mut self, text: &str) -> bool {
        let Some(error) = errorlog::parse_line(text, self.data.options.error_offset_s) else {
            return false;
        };
        match error.kind {
            Kind::Module => self.data.module_lines += 1,
            Kind::Other => {}
            Kind::NoLive | Kind::Resolver { .. } | Kind::Disabled | Kind::PeerError => {
                if error.kind == Kind::NoLive {
                    if let Some(u) = error.upstream.as_deref() {
                        self.data.timeline.note_name(errorlog::upstream_host(u));
                    }
                }
                self.data.errors.push(KeptError {
                    error,
                    line: clip(text, KEEP_LINE).to_string(),
                });
            }
        }
        true
    }

    /// Sorts what was kept by time and hands it over.
    pub fn finish(mut self) -> Collected {
        self.data.failures.sort_by_key(|f| f.entry.time_ms);
        self.data.errors.sort_by_key(|e| e.error.time_ms);
        self.data
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_only_what_classification_needs() {
        let parser = AccessParser::new(r#"$msec $status "$upstream_addr""#).expect("valid");
        let mut c = Collector::new(Some(parser), Options::default());
        let a = c.start_file("access.log", LogKind::Access);
        let e = c.start_file("error.log", LogKind::Error);
        c.line(a, b"2.0 200 \"10.0.0.1:80\"");
        c.line(a, b"1.0 502 \"be\"");
        c.line(a, b"garbage \xff");
        c.line(a, b"");
        c.line(a, b"nonsense");
        c.line(
            e,
            b"2026/12/01 07:00:00 [notice] 1#1: start worker process 2",
        );
        c.line(e, b"2026/12/01 07:00:00 [warn] 1#1: *1 generation_retry: x");
        c.line(
            e,
            b"2026/12/01 07:00:00 [error] 1#1: *1 no live upstreams while connecting to upstream, client: 1.1.1.1, server: , upstream: \"api\"",
        );
        let d = c.finish();
        assert_eq!(d.failures.len(), 1);
        assert_eq!(d.failures[0].line, "1.0 502 \"be\"");
        assert_eq!(d.errors.len(), 1, "notice and module lines are not kept");
        assert_eq!(d.module_lines, 1);
        assert_eq!(d.access_entries, 2);
        assert_eq!(d.files[a].lines, 5);
        assert_eq!(d.files[a].unparsed, 2);
        assert_eq!(
            d.files[a].first_unparsed,
            Some((3, "garbage \u{fffd}".into()))
        );
        assert_eq!(d.files[e].unparsed, 0);
        assert!(d.timeline.is_name("api") && d.timeline.is_name("be"));
    }

    #[test]
    fn clip_respects_characters() {
        assert_eq!(clip("héllo", 2), "h");
        assert_eq!(clip("héllo", 3), "hé");
        assert_eq!(clip("abc", 10), "abc");
    }
}
