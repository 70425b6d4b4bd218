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

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{Hash, Hasher};

use crate::access::{self, AccessParser, Hop, TimeSource};
use crate::errorlog::{self, Kind};
use crate::timefmt;
use crate::timeline::Timeline;

/// Settings of a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// How far around an incident to look for address changes, in
    /// milliseconds.
    pub window_ms: i64,
    /// The error log's offset east of UTC in seconds, if the operator gave
    /// it (`--error-log-utc-offset`); else the tool works it out.
    pub error_offset_s: Option<i32>,
    /// How far back failures of a peer still count (nginx's
    /// `fail_timeout`, default 10 s), in milliseconds.
    pub fail_timeout_ms: i64,
    /// `(upstream, NAME)` pairs: `upstream` has `server NAME resolve`
    /// (`--upstream-server`, or the configuration).
    pub servers: Vec<(String, String)>,
    /// `(upstream, ADDRESS)` pairs: `upstream` has `server ADDRESS` (from
    /// the configuration), so the address is its peer.
    pub peers: Vec<(String, String)>,
    /// The http locations of each `server` block of the configuration:
    /// which upstream a request's location proxies to (see [`route_of`]).
    pub routes: Vec<Vec<Route>>,
    /// `(upstream, NAME)` pairs from the configuration: like `servers`,
    /// but an upstream the logs never name is not made one of theirs.
    pub conf_servers: Vec<(String, String)>,
    /// Per upstream, its `fail_timeout` in milliseconds where the
    /// configuration gives one (the longest of its servers'), else
    /// [`Options::fail_timeout_ms`].
    pub fail_timeouts: BTreeMap<String, i64>,
    /// Per upstream, the fewest `max_fails=` of its servers where the
    /// configuration gives them (0: a failure never takes a peer out):
    /// how many peer errors within fail_timeout disable a peer.
    pub max_fails: BTreeMap<String, u32>,
    /// Upstreams the configuration gives no `resolve` server, or no
    /// `zone`: their peer list has no generation that moves, so no refusal
    /// of theirs is the generation's.
    pub static_upstreams: BTreeSet<String>,
    /// Stream listen ports and the upstream their `server` block proxies
    /// to (from the configuration; a port two blocks disagree on is left
    /// out): with `$server_port`, a session's addresses are its upstream's.
    pub stream_routes: BTreeMap<u16, String>,
    /// Upstreams with a `backup` server: a primary out of service sends
    /// nginx to the backups, so it is no sign that none was usable.
    pub with_backup: BTreeSet<String>,
    /// Per upstream with a `backup` server whose primaries are all static,
    /// those primaries (as logged): a retry they could not take was
    /// refused on the backups' list, which they are not part of.
    pub primary_peers: BTreeMap<String, BTreeSet<String>>,
}

impl Options {
    /// Whether `addr` is one of upstream `u`'s static primaries (see
    /// [`Options::primary_peers`]).
    pub fn is_primary(&self, u: &str, addr: &str) -> bool {
        self.primary_peers.get(u).is_some_and(|p| p.contains(addr))
    }
}

impl Default for Options {
    fn default() -> Options {
        Options {
            window_ms: 2_000,
            error_offset_s: None,
            fail_timeout_ms: 10_000,
            servers: Vec::new(),
            peers: Vec::new(),
            fail_timeouts: BTreeMap::new(),
            max_fails: BTreeMap::new(),
            static_upstreams: BTreeSet::new(),
            with_backup: BTreeSet::new(),
            stream_routes: BTreeMap::new(),
            primary_peers: BTreeMap::new(),
            routes: Vec::new(),
            conf_servers: Vec::new(),
        }
    }
}

/// An http `location` of one `server` block: its modifier (`""`, `=`,
/// `^~`, `~`, `~*`, `@`), its path, and the upstream it proxies to (`None`
/// for anything else: files, fastcgi, a `proxy_pass` to an address).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    pub modifier: String,
    pub path: String,
    pub upstream: Option<String>,
}

/// The upstream a request line (`GET /path HTTP/1.1`) went to, as far as
/// the locations of every `server` block (`servers`) tell without knowing
/// its host: in each block, the exact location, else the longest prefix;
/// a block with regular-expression locations answers only when that prefix
/// is `^~` (else a regex may take the request). A block where no location
/// matches says nothing. `None` unless every block that answers names the
/// same upstream.
pub fn route_of<'a>(servers: &'a [Vec<Route>], request: &str) -> Option<&'a str> {
    let uri = request.split(' ').nth(1)?;
    let path = uri.split('?').next().unwrap_or(uri);
    let mut answer: Option<&'a str> = None;
    for routes in servers {
        let chosen = match routes.iter().find(|r| r.modifier == "=" && r.path == path) {
            Some(r) => Some(r),
            None => {
                let best = routes
                    .iter()
                    .filter(|r| {
                        (r.modifier.is_empty() || r.modifier == "^~") && path.starts_with(&r.path)
                    })
                    .max_by_key(|r| r.path.len());
                let regex = routes.iter().any(|r| r.modifier.starts_with('~'));
                match best {
                    Some(b) if b.modifier == "^~" || !regex => Some(b),
                    None if !regex => None,
                    _ => return None,
                }
            }
        };
        let Some(r) = chosen else { continue };
        let u = r.upstream.as_deref()?;
        if answer.is_some_and(|a| a != u) {
            return None;
        }
        answer = Some(u);
    }
    answer
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

const NONE: u64 = 0;
const NO_CONNECTION: u64 = u64::MAX;
const NO_OFFSET: i32 = i32::MIN;

/// A 502/504 access entry, reduced to fixed-size fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Failure {
    /// Milliseconds since the epoch, UTC.
    pub time_ms: i64,
    connection: u64,
    request_key: u64,
    client_key: u64,
    /// Where the line is.
    pub source: Source,
    offset_s: i32,
    /// `$upstream_addr`, an id in [`Collected::strings`].
    pub upstream_addr: u32,
    /// The status.
    pub status: u16,
    /// `$request_time` in milliseconds, or [`NO_REQUEST_TIME`].
    request_time_ms: i32,
}

/// A [`Failure`] whose format has no `$request_time`.
const NO_REQUEST_TIME: i32 = -1;

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
    connection: u64,
    request_key: u64,
    client_key: u64,
    /// Where the line is.
    pub source: Source,
    upstream: u32,
    /// What it says.
    pub kind: ErrorKind,
}

const NO_STRING: u32 = u32::MAX;

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

/// Where the error log's offset came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OffsetBasis {
    /// `--error-log-utc-offset`.
    Given,
    /// `no live upstreams` lines paired with their access 502s (by
    /// connection, or by request line and client): the time difference.
    Pairs,
    /// The zone of the access log's `$time_local` / `$time_iso8601`:
    /// nginx writes both logs in its local time.
    AccessZone,
    /// Nothing to learn from: UTC.
    Default,
}

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

/// Feeds lines in, one file after another, then [`Collector::finish`].
#[derive(Debug)]
pub struct Collector {
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
        for (u, _) in &data.options.servers {
            data.timeline.note_name(u);
        }
        for (u, addr) in &data.options.peers {
            data.timeline.own(u, addr);
        }
        let mut c = Collector { data };
        if let Some(p) = parser {
            c.add_parser(p);
        }
        c
    }

    /// Adds an access format; returns its index.
    fn add_parser(&mut self, parser: AccessParser) -> usize {
        let data = &mut self.data;
        if let Some(i) = data
            .parsers
            .iter()
            .position(|p| p.format() == parser.format())
        {
            return i;
        }
        // Joins by `$connection` (or `$request`) only when every access
        // file can give it.
        let first = data.parsers.is_empty();
        data.has_connection = parser.has_connection() && (first || data.has_connection);
        data.has_request = parser.has_request() && (first || data.has_request);
        data.parsers.push(parser);
        data.parsers.len() - 1
    }

    /// Starts a file; its lines go to [`Collector::line`] with the id
    /// returned. An access file is read with the collector's first format
    /// (see [`Collector::start_access_file`] for one of its own).
    pub fn start_file(&mut self, name: &str, kind: LogKind) -> usize {
        let parser = match kind {
            LogKind::Access => (!self.data.parsers.is_empty()).then_some(0),
            LogKind::Error => None,
        };
        self.data.files.push(FileStats {
            name: name.to_string(),
            kind,
            lines: 0,
            unparsed: 0,
            first_unparsed: None,
            parser,
        });
        self.data.files.len() - 1
    }

    /// Starts an access file written with `parser`'s format (one nginx's
    /// access logs each name their own `log_format`).
    pub fn start_access_file(&mut self, name: &str, parser: AccessParser) -> usize {
        let i = self.add_parser(parser);
        let id = self.start_file(name, LogKind::Access);
        self.data.files[id].parser = Some(i);
        id
    }

    /// Takes one line (bytes, any content) of file `file`.
    pub fn line(&mut self, file: usize, bytes: &[u8]) {
        // Nearly every line is valid UTF-8, which `from_utf8` checks faster
        // than `from_utf8_lossy` (the same text either way).
        let text = match std::str::from_utf8(bytes) {
            Ok(s) => std::borrow::Cow::Borrowed(s),
            Err(_) => String::from_utf8_lossy(bytes),
        };
        let Some(stats) = self.data.files.get_mut(file) else {
            return;
        };
        stats.lines += 1;
        let (kind, source) = (stats.kind, Source::new(file, stats.lines));
        let parsed = if text.trim().is_empty() {
            true
        } else {
            match kind {
                LogKind::Access => self.access(&text, source, file),
                LogKind::Error => self.error(&text, source),
            }
        };
        if let Some(stats) = self.data.files.get_mut(file) {
            if !parsed {
                stats.unparsed += 1;
                if stats.first_unparsed.is_none() {
                    stats.first_unparsed =
                        Some((stats.lines, clip(&text, KEEP_EXAMPLE).to_string()));
                }
            }
        }
    }

    fn access(&mut self, text: &str, source: Source, file: usize) -> bool {
        let Some(entry) = self.data.parser_of(file).and_then(|p| p.parse_line(text)) else {
            return false;
        };
        let data = &mut self.data;
        data.access_entries += 1;
        if let Some(off) = entry.offset_s {
            if data.access_offsets.len() < 8 {
                data.access_offsets.insert(off);
            }
        }
        let start_ms = entry.request_time_ms.map(|r| entry.time_ms - r);
        data.timeline
            .observe(entry.upstream_addr, entry.time_ms, start_ms);
        let routed = match (entry.request, entry.server_port) {
            (Some(r), _) => route_of(&data.options.routes, r),
            (None, Some(port)) => data.options.stream_routes.get(&port).map(String::as_str),
            (None, None) => None,
        };
        if let Some(u) = routed {
            data.timeline.route(entry.upstream_addr, u);
        }
        if entry.status == 502 || entry.status == 504 {
            data.failures.push(Failure {
                time_ms: entry.time_ms,
                connection: entry
                    .connection
                    .filter(|c| *c != NO_CONNECTION)
                    .unwrap_or(NO_CONNECTION),
                request_key: entry.request.map_or(NONE, |r| key(&access::unescape(r))),
                client_key: entry.remote_addr.map_or(NONE, key),
                source,
                offset_s: entry.offset_s.unwrap_or(NO_OFFSET),
                upstream_addr: data.strings.id(clip(entry.upstream_addr, 512)),
                status: entry.status,
                request_time_ms: entry
                    .request_time_ms
                    .and_then(|r| i32::try_from(r).ok())
                    .unwrap_or(NO_REQUEST_TIME),
            });
        }
        true
    }

    fn error(&mut self, text: &str, source: Source) -> bool {
        // Read as UTC; the offset is applied in `finish`, once known.
        let Some(error) = errorlog::parse_line(text, 0) else {
            return false;
        };
        let data = &mut self.data;
        let kind = match &error.kind {
            Kind::Module => {
                data.module_lines += 1;
                return true;
            }
            Kind::Other => return true,
            Kind::NoLive => ErrorKind::NoLive,
            Kind::Resolver { name, nxdomain } => ErrorKind::Resolver {
                name: data.strings.id(clip(name, 256)),
                nxdomain: *nxdomain,
            },
            Kind::Disabled => ErrorKind::Disabled,
            Kind::PeerError => ErrorKind::PeerError,
        };
        let host = error.upstream.as_deref().map(errorlog::upstream_host);
        if kind == ErrorKind::NoLive {
            if let Some(u) = host {
                data.timeline.note_name(u);
            }
        }
        data.errors.push(KeptError {
            time_ms: error.time_ms,
            connection: error
                .connection
                .filter(|c| *c != NO_CONNECTION)
                .unwrap_or(NO_CONNECTION),
            request_key: error.request.as_deref().map_or(NONE, key),
            client_key: error.client.as_deref().map_or(NONE, key),
            source,
            upstream: host.map_or(NO_STRING, |h| data.strings.id(clip(h, 256))),
            kind,
        });
        true
    }

    /// The collected state so far (for measuring it).
    pub fn collected(&self) -> &Collected {
        &self.data
    }

    /// Works out the error log's offset, applies it, sorts what was kept
    /// by time and hands it over.
    pub fn finish(mut self) -> Collected {
        let data = &mut self.data;
        data.failures.sort_by_key(|f| f.time_ms);
        data.pairs_offset = learn_offset(data);
        let zone = match data.access_offsets.len() {
            1 => data.access_offsets.first().copied(),
            _ => None,
        };
        let (offset, basis) = match (data.options.error_offset_s, data.pairs_offset, zone) {
            (Some(given), _, _) => (given, OffsetBasis::Given),
            (None, Some((pairs, _, _)), _) => (pairs, OffsetBasis::Pairs),
            (None, None, Some(zone)) => (zone, OffsetBasis::AccessZone),
            (None, None, None) => (0, OffsetBasis::Default),
        };
        data.error_offset_s = offset;
        data.offset_basis = Some(basis);
        for e in &mut data.errors {
            e.time_ms -= i64::from(offset) * 1_000;
        }
        data.errors.sort_by_key(|e| e.time_ms);
        data.timeline.seal();
        self.data
    }
}

/// Zone offsets run from -12:00 to +14:00 in steps of 15 minutes.
const OFFSET_STEP_S: i32 = 900;

/// Learns the error log's offset from `no live upstreams` lines (their
/// times read as UTC) and the access 502s of the same requests: every
/// line votes for each whole-quarter-hour offset that puts a matching 502
/// (same connection, else same request line and client) within a second
/// and a half of it. The offset most lines vote for wins if at least half
/// the voting lines, and more than any other offset, back it. Returns the
/// offset, its votes and the number of voting lines.
fn learn_offset(data: &Collected) -> Option<(i32, usize, usize)> {
    const MAX_LINES: usize = 20_000;
    const TOLERANCE_MS: i64 = 1_500;
    let refused = |f: &Failure| {
        f.status == 502
            && matches!(
                access::last_group_hops(data.upstream_addr(f)).last(),
                Some(Hop::Name(_))
            )
    };
    let mut by_key: HashMap<(u64, u64), Vec<i64>> = HashMap::new();
    let join_key = |conn: Option<u64>, req: Option<u64>, client: Option<u64>| {
        if data.has_connection {
            conn.map(|c| (c, 0))
        } else if data.has_request {
            req.map(|r| (r, client.unwrap_or(NONE)))
        } else {
            None
        }
    };
    for f in data.failures.iter().filter(|f| refused(f)) {
        if let Some(k) = join_key(f.connection(), f.request_key(), f.client_key()) {
            by_key.entry(k).or_default().push(f.time_ms);
        }
    }
    if by_key.is_empty() {
        return None;
    }
    let mut votes: BTreeMap<i32, usize> = BTreeMap::new();
    let mut voters = 0;
    let lines = data.errors.iter().filter(|e| e.kind == ErrorKind::NoLive);
    for e in lines.take(MAX_LINES) {
        let Some(times) =
            join_key(e.connection(), e.request_key(), e.client_key()).and_then(|k| by_key.get(&k))
        else {
            continue;
        };
        let mut voted = false;
        for step in -48..=56 {
            let offset = step * OFFSET_STEP_S;
            // The line's second, shifted, and its middle.
            let t = e.time_ms - i64::from(offset) * 1_000 + 500;
            let i = times.partition_point(|x| *x < t - TOLERANCE_MS);
            if times.get(i).is_some_and(|x| *x <= t + TOLERANCE_MS) {
                *votes.entry(offset).or_default() += 1;
                voted = true;
            }
        }
        voters += usize::from(voted);
    }
    let mut ranked: Vec<(usize, i32)> = votes.into_iter().map(|(o, n)| (n, o)).collect();
    ranked.sort_unstable_by(|a, b| b.cmp(a));
    let (best, offset) = *ranked.first()?;
    let runner_up = ranked.get(1).map_or(0, |r| r.0);
    let needed = if data.has_connection { 1 } else { 3 };
    (best >= needed && best * 2 >= voters && best > runner_up).then_some((offset, best, voters))
}

#[cfg(test)]
mod tests {
    use super::{route_of, Route};

    fn route(modifier: &str, path: &str, upstream: Option<&str>) -> Route {
        Route {
            modifier: modifier.into(),
            path: path.into(),
            upstream: upstream.map(String::from),
        }
    }

    #[test]
    fn routes_follow_nginxs_location_choice_or_say_nothing() {
        let one = vec![vec![
            route("", "/", Some("web")),
            route("", "/api/", Some("api")),
            route("=", "/api/health", Some("health")),
            route("", "/static/", None),
        ]];
        let at = |servers: &[Vec<Route>], uri: &str| {
            route_of(servers, &format!("GET {uri} HTTP/1.1")).map(String::from)
        };
        assert_eq!(at(&one, "/api/v1?x=1").as_deref(), Some("api"));
        assert_eq!(at(&one, "/api/health").as_deref(), Some("health"));
        assert_eq!(at(&one, "/index.html").as_deref(), Some("web"));
        // Files, not an upstream: the longest prefix wins, and says none.
        assert_eq!(at(&one, "/static/a.css"), None);
        // A regular expression may take what a plain prefix matches...
        let mut regex = one.clone();
        regex[0].push(route("~", "\\.php$", Some("php")));
        assert_eq!(at(&regex, "/api/v1"), None);
        // ...but not what `^~` or `=` takes.
        regex[0].push(route("^~", "/api/v2/", Some("api2")));
        assert_eq!(at(&regex, "/api/v2/x").as_deref(), Some("api2"));
        assert_eq!(at(&regex, "/api/health").as_deref(), Some("health"));
        // Two servers (the host is unknown): they must agree.
        let two = vec![one[0].clone(), vec![route("", "/api/", Some("other"))]];
        assert_eq!(at(&two, "/api/v1"), None);
        assert_eq!(at(&two, "/index.html").as_deref(), Some("web"));
        assert_eq!(route_of(&one, "garbage"), None);
    }

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
        let f = &d.failures[0];
        assert_eq!(d.upstream_addr(f), "be");
        assert_eq!((f.source.file(), f.source.line()), (a, 2));
        assert_eq!(d.failure_time_text(f), "1.000");
        assert_eq!(d.errors.len(), 1, "notice and module lines are not kept");
        assert_eq!(d.errors[0].source, Source::new(e, 3));
        assert_eq!(d.error_upstream(&d.errors[0]), Some("api"));
        assert_eq!(d.error_time_text(&d.errors[0]), "2026/12/01 07:00:00");
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
        assert_eq!(d.offset_basis, Some(OffsetBasis::Default));
    }

    #[test]
    fn sources_pack_file_and_line() {
        let s = Source::new(3, 12_345_678_901);
        assert_eq!((s.file(), s.line()), (3, 12_345_678_901));
        assert!(Source::new(0, 9) < Source::new(1, 1));
    }

    #[test]
    fn clip_respects_characters() {
        assert_eq!(clip("héllo", 2), "h");
        assert_eq!(clip("héllo", 3), "hé");
        assert_eq!(clip("abc", 10), "abc");
    }
}
