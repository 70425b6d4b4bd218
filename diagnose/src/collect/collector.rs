//! The [`Collector`]: takes the logs line by line, parses each, keeps the
//! few records classification needs, and hands them over sorted by time
//! with the error log's offset applied.

use super::offset::learn_offset;
use super::records::{KEEP_EXAMPLE, NONE, NO_CONNECTION, NO_OFFSET, NO_REQUEST_TIME, NO_STRING};
use super::{
    clip, key, route_of, Collected, ErrorKind, Failure, FileStats, KeptError, LogKind, OffsetBasis,
    Options, Source,
};
use crate::access::{self, AccessParser};
use crate::errorlog::{self, Kind};

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
        data.access_span = Some(match data.access_span {
            Some((first, last)) => (first.min(entry.time_ms), last.max(entry.time_ms)),
            None => (entry.time_ms, entry.time_ms),
        });
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
