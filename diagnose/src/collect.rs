//! The streaming pass over the logs: every line is parsed and then either
//! dropped or reduced to a small fixed-size record, so memory stays flat in
//! the size of the logs.
//!
//! Kept: one [`Failure`] record (about 60 bytes, no text) per access entry
//! with status 502 or 504; one [`KeptError`] record per error line of the
//! kinds the classifier reads (no live upstreams, resolver, disabled, peer
//! errors); the per-second address [`Timeline`]; a table of distinct short
//! strings (`$upstream_addr` values of failures, upstream hosts, resolver
//! names); per-file line counts with the first unparseable line. Request
//! lines and clients are kept as 64-bit hashes, for joins. The text of a
//! line is never kept here: each record knows its [`Source`], and the
//! report reads back the few lines it shows as evidence
//! ([`crate::Analysis::wanted`]).
//!
//! The parts: `options` (the run's settings and routes), `records` (what
//! is kept per line), `collector` (the pass itself), `offset` (the error
//! log's offset), and here [`Collected`], what the pass hands over.

mod collector;
mod offset;
mod options;
mod records;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;

pub use collector::Collector;
pub use offset::OffsetBasis;
pub use options::{route_of, Options, Route};
pub use records::{
    clip, key, ErrorKind, Failure, FileStats, KeptError, LogKind, Source, Strings, KEEP_LINE,
};

use crate::access::{AccessParser, TimeSource};
use crate::timefmt;
use crate::timeline::Timeline;

/// Everything the classifier reads, sorted by time.
#[derive(Clone, Debug, Default)]
pub struct Collected {
    /// The run's settings.
    pub options: Options,
    /// The access logs' formats (the report reads requests back with
    /// them); each access file names its own.
    pub parsers: Vec<AccessParser>,
    /// Whether every access format has `$connection`.
    pub has_connection: bool,
    /// Whether every access format has `$request`.
    pub has_request: bool,
    /// Access entries with status 502 or 504, by time.
    pub failures: Vec<Failure>,
    /// Error lines of kinds NoLive, Resolver, Disabled, PeerError, by time.
    pub errors: Vec<KeptError>,
    /// `$upstream_addr` values of failures, upstream hosts of error lines,
    /// resolver names.
    pub strings: Strings,
    /// Addresses per second, and upstream universes.
    pub timeline: Timeline,
    /// One per file, in the order read.
    pub files: Vec<FileStats>,
    /// What the configuration offered that could not be used, and how to
    /// fix it (see [`crate::plan::Plan::notes`]).
    pub notes: Vec<String>,
    /// The module's own error lines (left out of the diagnosis).
    pub module_lines: u64,
    /// Access entries parsed.
    pub access_entries: u64,
    /// The earliest and the latest time (UTC milliseconds) of an access
    /// entry parsed, of any status: the span the access logs read cover,
    /// outside which "nothing of U was selected" says nothing.
    pub access_span: Option<(i64, i64)>,
    /// The zone offsets access-log times were written with.
    pub access_offsets: BTreeSet<i32>,
    /// The error log's offset east of UTC, in seconds, as applied.
    pub error_offset_s: i32,
    /// Where [`Collected::error_offset_s`] came from.
    pub offset_basis: Option<OffsetBasis>,
    /// What the pairs say: the offset, how many pairs agree, how many
    /// pairs voted at all.
    pub pairs_offset: Option<(i32, usize, usize)>,
}

impl Collected {
    /// The format of access file `file`.
    pub fn parser_of(&self, file: usize) -> Option<&AccessParser> {
        let i = self.files.get(file)?.parser?;
        self.parsers.get(i)
    }

    /// The time of a failure as logged.
    pub fn failure_time_text(&self, f: &Failure) -> String {
        let source = self
            .parser_of(f.source.file())
            .map(AccessParser::time_source);
        match (source, f.offset_s()) {
            (Some(TimeSource::Local), Some(off)) => timefmt::format_time_local(f.time_ms, off),
            (Some(TimeSource::Iso8601), Some(off)) => timefmt::format_iso8601(f.time_ms, off),
            _ => timefmt::format_msec(f.time_ms),
        }
    }

    /// The time of an error line as logged.
    pub fn error_time_text(&self, e: &KeptError) -> String {
        timefmt::format_error_time(e.time_ms, self.error_offset_s)
    }

    /// A failure's `$upstream_addr`.
    pub fn upstream_addr(&self, f: &Failure) -> &str {
        self.strings.get(f.upstream_addr)
    }

    /// An error line's upstream host.
    pub fn error_upstream(&self, e: &KeptError) -> Option<&str> {
        e.upstream().map(|id| self.strings.get(id))
    }

    /// Bytes the collected state holds: every record, string and
    /// timeline entry (the allocations' capacities, approximately).
    pub fn kept_bytes(&self) -> usize {
        let files: usize = self
            .files
            .iter()
            .map(|f| {
                std::mem::size_of::<FileStats>()
                    + f.name.len()
                    + f.first_unparsed.as_ref().map_or(0, |(_, t)| t.len())
            })
            .sum();
        self.failures.capacity() * std::mem::size_of::<Failure>()
            + self.errors.capacity() * std::mem::size_of::<KeptError>()
            + self.strings.bytes()
            + self.timeline.bytes()
            + files
            + 16 * self.access_offsets.len()
    }
}
