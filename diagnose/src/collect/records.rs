//! The fixed-size records the streaming pass keeps: where a line is
//! ([`Source`]), a 502/504 access entry ([`Failure`]), an error line
//! ([`KeptError`]), per-file counts ([`FileStats`]), the table of distinct
//! short strings ([`Strings`]), and the hashes and clipping they use.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};

// For the links of the docs.
#[cfg(doc)]
use super::{Collected, Collector};
#[cfg(doc)]
use crate::errorlog::Kind;

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
    /// An access log's format: the index in [`Collected::parsers`].
    pub parser: Option<usize>,
}

/// Where a line is: its file (the index in [`Collected::files`]) and its
/// line number (from 1), packed in one word.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Source(u64);

impl Source {
    const LINE_BITS: u32 = 44;

    /// The source of line `line` of file `file`.
    pub fn new(file: usize, line: u64) -> Source {
        let file = (file as u64).min((1 << (64 - Self::LINE_BITS)) - 1);
        Source(file << Self::LINE_BITS | line.min((1 << Self::LINE_BITS) - 1))
    }

    /// The file's index.
    pub fn file(self) -> usize {
        (self.0 >> Self::LINE_BITS) as usize
    }

    /// The line number, from 1.
    pub fn line(self) -> u64 {
        self.0 & ((1 << Self::LINE_BITS) - 1)
    }
}

/// A 64-bit hash of a value, for joins (0 stands for "none").
pub fn key(value: &str) -> u64 {
    let mut h = DefaultHasher::new();
    value.hash(&mut h);
    h.finish().max(1)
}

pub(super) const NONE: u64 = 0;
pub(super) const NO_CONNECTION: u64 = u64::MAX;
pub(super) const NO_OFFSET: i32 = i32::MIN;

/// A 502/504 access entry, reduced to fixed-size fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Failure {
    /// Milliseconds since the epoch, UTC.
    pub time_ms: i64,
    pub(super) connection: u64,
    pub(super) request_key: u64,
    pub(super) client_key: u64,
    /// Where the line is.
    pub source: Source,
    pub(super) offset_s: i32,
    /// `$upstream_addr`, an id in [`Collected::strings`].
    pub upstream_addr: u32,
    /// The status.
    pub status: u16,
    /// `$request_time` in milliseconds, or [`NO_REQUEST_TIME`].
    pub(super) request_time_ms: i32,
}

/// A [`Failure`] whose format has no `$request_time`.
pub(super) const NO_REQUEST_TIME: i32 = -1;

impl Failure {
    /// When the request started (`$msec` less `$request_time`), if the
    /// format has `$request_time`.
    pub fn start_ms(&self) -> Option<i64> {
        (self.request_time_ms != NO_REQUEST_TIME)
            .then(|| self.time_ms - i64::from(self.request_time_ms))
    }

    /// `$connection`, if in the format.
    pub fn connection(&self) -> Option<u64> {
        (self.connection != NO_CONNECTION).then_some(self.connection)
    }

    /// The hash of the unescaped `$request`, if in the format.
    pub fn request_key(&self) -> Option<u64> {
        (self.request_key != NONE).then_some(self.request_key)
    }

    /// The hash of `$remote_addr`, if in the format.
    pub fn client_key(&self) -> Option<u64> {
        (self.client_key != NONE).then_some(self.client_key)
    }

    /// The zone offset of the logged time (`$time_local`, `$time_iso8601`).
    pub fn offset_s(&self) -> Option<i32> {
        (self.offset_s != NO_OFFSET).then_some(self.offset_s)
    }
}

/// What a kept error line says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// `no live upstreams`.
    NoLive,
    /// `NAME could not be resolved (...)`; `name` is an id in
    /// [`Collected::strings`], `nxdomain` see [`Kind::Resolver`].
    Resolver { name: u32, nxdomain: bool },
    /// `upstream server temporarily disabled`.
    Disabled,
    /// A failed attempt at a peer.
    PeerError,
}

/// An error line, reduced to fixed-size fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeptError {
    /// Milliseconds since the epoch, UTC (the error log's offset applied
    /// by [`Collector::finish`]).
    pub time_ms: i64,
    pub(super) connection: u64,
    pub(super) request_key: u64,
    pub(super) client_key: u64,
    /// Where the line is.
    pub source: Source,
    pub(super) upstream: u32,
    /// What it says.
    pub kind: ErrorKind,
}

pub(super) const NO_STRING: u32 = u32::MAX;

impl KeptError {
    /// The `*CID` connection number.
    pub fn connection(&self) -> Option<u64> {
        (self.connection != NO_CONNECTION).then_some(self.connection)
    }

    /// The hash of `request: "..."`.
    pub fn request_key(&self) -> Option<u64> {
        (self.request_key != NONE).then_some(self.request_key)
    }

    /// The hash of `client: ...`.
    pub fn client_key(&self) -> Option<u64> {
        (self.client_key != NONE).then_some(self.client_key)
    }

    /// The host of `upstream: "..."` (an address or an upstream's name),
    /// an id in [`Collected::strings`].
    pub fn upstream(&self) -> Option<u32> {
        (self.upstream != NO_STRING).then_some(self.upstream)
    }
}

/// Distinct short strings, each kept once.
#[derive(Clone, Debug, Default)]
pub struct Strings {
    ids: HashMap<Box<str>, u32>,
    list: Vec<Box<str>>,
    bytes: usize,
}

impl Strings {
    /// The id of `s`, adding it if new.
    pub fn id(&mut self, s: &str) -> u32 {
        if let Some(id) = self.ids.get(s) {
            return *id;
        }
        let id = u32::try_from(self.list.len()).unwrap_or(NO_STRING - 1);
        self.list.push(s.into());
        self.ids.insert(s.into(), id);
        self.bytes += 2 * s.len() + 64;
        id
    }

    /// The string of an id (`""` for an unknown id).
    pub fn get(&self, id: u32) -> &str {
        self.list.get(id as usize).map_or("", |s| s)
    }

    /// The id of `s`, if kept.
    pub fn lookup(&self, s: &str) -> Option<u32> {
        self.ids.get(s).copied()
    }

    /// How many strings.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Bytes held, approximately.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

/// The longest line kept as evidence.
pub const KEEP_LINE: usize = 4_096;
/// The longest unparseable example kept.
pub(super) const KEEP_EXAMPLE: usize = 300;

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
