//! Access-log entries: one line matched against the operator's
//! `log_format`, its time turned into UTC milliseconds, and its
//! `$upstream_addr` split into groups and hops.
//!
//! `$upstream_addr` holds one group per upstream the request went through
//! (internal redirects), separated by `" : "`; within a group the attempts
//! are separated by `", "`. An attempt is an address (`IPv4:port`,
//! `[IPv6]:port`, `unix:...`) or, when the selection was refused (`no live
//! upstreams`), the upstream group's name.

use std::net::SocketAddr;

use crate::logformat::{FormatError, LogFormat};
use crate::timefmt;

/// Which variable gives an entry's time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeSource {
    /// `$msec`: seconds with milliseconds.
    Msec,
    /// `$time_iso8601`: seconds, with a zone offset.
    Iso8601,
    /// `$time_local`: seconds, with a zone offset.
    Local,
}

/// One access-log line, reduced to what the diagnosis reads; the values
/// borrow from the line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccessEntry<'a> {
    /// Milliseconds since the epoch, UTC.
    pub time_ms: i64,
    /// The zone offset nginx's local time had, in seconds east of UTC:
    /// from `$time_local` or `$time_iso8601` (also when `$msec` gives the
    /// time); `None` when the format has neither.
    pub offset_s: Option<i32>,
    /// The time as logged.
    pub time_text: &'a str,
    /// `$status`.
    pub status: u16,
    /// `$upstream_addr` as logged (`-` when no upstream was involved).
    pub upstream_addr: &'a str,
    /// `$request`, if in the format and not `-`.
    pub request: Option<&'a str>,
    /// `$remote_addr`, if in the format and not `-`.
    pub remote_addr: Option<&'a str>,
    /// `$connection`, if in the format.
    pub connection: Option<u64>,
    /// `$request_id`, if in the format and not `-`.
    pub request_id: Option<&'a str>,
    /// `$server_port`, if in the format: which stream `server` took the
    /// session.
    pub server_port: Option<u16>,
    /// `$request_time` in milliseconds, if in the format: the request
    /// started this long before `time_ms`.
    pub request_time_ms: Option<i64>,
}

/// Parses lines of one `log_format`.
#[derive(Clone, Debug)]
pub struct AccessParser {
    format: LogFormat,
    time: (usize, TimeSource),
    /// `$time_local` or `$time_iso8601`, for the zone when `$msec` gives
    /// the time.
    zone: Option<(usize, TimeSource)>,
    status: usize,
    upstream_addr: usize,
    request: Option<usize>,
    remote_addr: Option<usize>,
    connection: Option<usize>,
    request_id: Option<usize>,
    server_port: Option<usize>,
    request_time: Option<usize>,
    /// The `log_format` string as given.
    text: String,
}

impl AccessParser {
    /// Builds a parser for a `log_format` string (see [`LogFormat::parse`]).
    pub fn new(format: &str) -> Result<AccessParser, FormatError> {
        let text = format.to_string();
        let format = LogFormat::parse(format)?;
        let time = [
            ("msec", TimeSource::Msec),
            ("time_iso8601", TimeSource::Iso8601),
            ("time_local", TimeSource::Local),
        ]
        .into_iter()
        .find_map(|(name, source)| format.position(name).map(|i| (i, source)));
        let zone = [
            ("time_local", TimeSource::Local),
            ("time_iso8601", TimeSource::Iso8601),
        ]
        .into_iter()
        .find_map(|(name, source)| format.position(name).map(|i| (i, source)));
        let missing = |name: &str| FormatError::Missing(vec![name.to_string()]);
        Ok(AccessParser {
            zone,
            time: time.ok_or_else(|| missing("msec|time_iso8601|time_local"))?,
            status: format.position("status").ok_or_else(|| missing("status"))?,
            upstream_addr: format
                .position("upstream_addr")
                .ok_or_else(|| missing("upstream_addr"))?,
            request: format.position("request"),
            remote_addr: format.position("remote_addr"),
            connection: format.position("connection"),
            request_id: format.position("request_id"),
            server_port: format.position("server_port"),
            // A stream session's `$session_time` plays the same part.
            request_time: format
                .position("request_time")
                .or_else(|| format.position("session_time")),
            format,
            text,
        })
    }

    /// The `log_format` string it was built from.
    pub fn format(&self) -> &str {
        &self.text
    }

    /// Whether the format has `$connection` (joins then use it).
    pub fn has_connection(&self) -> bool {
        self.connection.is_some()
    }

    /// Whether the format has `$request_time`.
    pub fn has_request_time(&self) -> bool {
        self.request_time.is_some()
    }

    /// Whether the format has `$request`.
    pub fn has_request(&self) -> bool {
        self.request.is_some()
    }

    /// Which variable gives the time.
    pub fn time_source(&self) -> TimeSource {
        self.time.1
    }

    /// Parses one line; `None` if it does not match the format or a needed
    /// value (time, status) does not parse.
    pub fn parse_line<'a>(&self, line: &'a str) -> Option<AccessEntry<'a>> {
        let values = self.format.match_line(line)?;
        let get = |i: usize| values.get(i).copied();
        let present = |i: Option<usize>| i.and_then(get).filter(|v| !v.is_empty() && *v != "-");
        let time_text = get(self.time.0)?;
        let (time_ms, offset_s) = match self.time.1 {
            TimeSource::Msec => {
                let zone = self.zone.and_then(|(i, source)| {
                    let text = get(i)?;
                    let parsed = match source {
                        TimeSource::Local => timefmt::parse_time_local(text),
                        _ => timefmt::parse_iso8601(text),
                    };
                    parsed.map(|(_, off)| off)
                });
                (timefmt::parse_msec(time_text)?, zone)
            }
            TimeSource::Iso8601 => {
                let (ms, off) = timefmt::parse_iso8601(time_text)?;
                (ms, Some(off))
            }
            TimeSource::Local => {
                let (ms, off) = timefmt::parse_time_local(time_text)?;
                (ms, Some(off))
            }
        };
        let status = get(self.status)?;
        if status.len() != 3 || !status.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        Some(AccessEntry {
            time_ms,
            offset_s,
            time_text,
            status: status.parse().ok()?,
            upstream_addr: get(self.upstream_addr)?,
            request: present(self.request),
            remote_addr: present(self.remote_addr),
            connection: self.connection.and_then(get).and_then(|v| v.parse().ok()),
            request_id: present(self.request_id),
            server_port: present(self.server_port).and_then(|v| v.parse().ok()),
            request_time_ms: present(self.request_time).and_then(timefmt::parse_msec),
        })
    }
}

/// One attempt in an `$upstream_addr` group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hop<'a> {
    /// A peer nginx connected (or tried to connect) to.
    Addr(&'a str),
    /// An upstream group's name: that selection was refused.
    Name(&'a str),
}

impl<'a> Hop<'a> {
    /// Classifies one hop's text.
    pub fn parse(text: &'a str) -> Hop<'a> {
        if is_address(text) {
            Hop::Addr(text)
        } else {
            Hop::Name(text)
        }
    }

    /// The hop's text.
    pub fn text(self) -> &'a str {
        match self {
            Hop::Addr(s) | Hop::Name(s) => s,
        }
    }
}

/// Whether a hop is an address: `IPv4:port`, `[IPv6]:port` or `unix:...`.
pub fn is_address(hop: &str) -> bool {
    hop.starts_with("unix:") || hop.parse::<SocketAddr>().is_ok()
}

/// The groups of `$upstream_addr` (one per upstream of the request's
/// internal redirects); none for `-` or an empty value.
pub fn groups(upstream_addr: &str) -> impl Iterator<Item = &str> {
    let value = upstream_addr.trim();
    let none = value.is_empty() || value == "-";
    value.split(" : ").filter(move |_| !none)
}

/// The hops of one group, in order; `-` and empty hops are skipped.
pub fn hops(group: &str) -> Vec<Hop<'_>> {
    group
        .split(", ")
        .map(str::trim)
        .filter(|h| !h.is_empty() && *h != "-")
        .map(Hop::parse)
        .collect()
}

/// The hops of the last group: the upstream that produced the response.
pub fn last_group_hops(upstream_addr: &str) -> Vec<Hop<'_>> {
    groups(upstream_addr).last().map(hops).unwrap_or_default()
}

/// Undoes nginx's access-log escaping (`\xHH`), for comparing a logged
/// `$request` with the error log's raw `request: "..."`.
pub fn unescape(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && bytes.get(i + 1) == Some(&b'x') {
            let hex = bytes
                .get(i + 2..i + 4)
                .and_then(|h| std::str::from_utf8(h).ok());
            if let Some(b) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(b);
                i += 4;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const FULL: &str = r#"$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" "$upstream_addr" $msec $connection $request_id"#;

    fn parser(format: &str) -> AccessParser {
        AccessParser::new(format).expect("valid format")
    }

    #[test]
    fn quotes_dashes_and_optional_fields() {
        let p = parser(FULL);
        assert!(p.has_connection());
        assert_eq!(p.time_source(), TimeSource::Msec);
        let line = r#"10.1.1.1 - - [01/Dec/2026:07:00:00 +0000] "GET /q?a=\x22b\x22 HTTP/1.1" 502 157 "-" "curl/8" "10.0.0.1:80, be" 1796108400.250 42 -"#;
        let e = p.parse_line(line).expect("parses");
        assert_eq!(e.time_ms, 1_796_108_400_250);
        assert_eq!(e.offset_s, Some(0), "the zone of $time_local");
        assert_eq!(e.time_text, "1796108400.250");
        assert_eq!(e.status, 502);
        assert_eq!(e.upstream_addr, "10.0.0.1:80, be");
        assert_eq!(e.request, Some(r"GET /q?a=\x22b\x22 HTTP/1.1"));
        assert_eq!(e.remote_addr, Some("10.1.1.1"));
        assert_eq!(e.connection, Some(42));
        assert_eq!(e.request_id, None, "`-` is no value");
        assert_eq!(unescape(e.request.unwrap_or("")), "GET /q?a=\"b\" HTTP/1.1");
    }

    #[test]
    fn time_local_and_iso8601_entries() {
        let p = parser(r#"[$time_local] $status "$upstream_addr""#);
        let e = p
            .parse_line(r#"[01/Dec/2026:08:00:00 +0100] 504 "10.0.0.1:80""#)
            .expect("parses");
        assert_eq!((e.time_ms, e.offset_s), (1_796_108_400_000, Some(3_600)));
        let p = parser(r#"$time_iso8601 $status "$upstream_addr""#);
        let e = p
            .parse_line(r#"2026-12-01T07:00:01+00:00 502 "be""#)
            .expect("parses");
        assert_eq!(e.time_ms, 1_796_108_401_000);
        assert_eq!(e.request, None);
        assert_eq!(e.connection, None);
    }

    #[test]
    fn bad_values_do_not_parse() {
        let p = parser(r#"$msec $status "$upstream_addr""#);
        assert!(p.parse_line(r#"1.5 502 "be""#).is_some());
        assert!(p.parse_line(r#"x.5 502 "be""#).is_none(), "bad time");
        assert!(p.parse_line(r#"1.5 5020 "be""#).is_none(), "bad status");
        assert!(p.parse_line(r#"1.5 -02 "be""#).is_none(), "bad status");
        assert!(p.parse_line(r#"1.5 502 be"#).is_none(), "no quotes");
    }

    #[test]
    fn groups_and_hops() {
        let v = "10.0.0.1:80, 10.0.0.2:80 : [2001:db8::1]:8080, be : unix:/run/s.sock, api";
        let g: Vec<&str> = groups(v).collect();
        assert_eq!(
            g,
            [
                "10.0.0.1:80, 10.0.0.2:80",
                "[2001:db8::1]:8080, be",
                "unix:/run/s.sock, api"
            ]
        );
        assert_eq!(
            last_group_hops(v),
            [Hop::Addr("unix:/run/s.sock"), Hop::Name("api")]
        );
        assert_eq!(
            hops(g[1]),
            [Hop::Addr("[2001:db8::1]:8080"), Hop::Name("be")]
        );
        assert_eq!(last_group_hops("be"), [Hop::Name("be")]);
        assert!(last_group_hops("-").is_empty());
        assert_eq!(groups("-").count(), 0);
        assert!(!is_address("10.0.0.1"), "no port: a name");
        assert!(!is_address("be:80"));
        assert!(!is_address("[::1]"));
        assert!(is_address("[::1]:80"));
        assert!(!is_address("300.0.0.1:80"));
    }

    #[test]
    fn msec_with_a_zone_variable_reports_the_zone() {
        let p = parser(r#"[$time_local] $msec $status "$upstream_addr""#);
        let e = p
            .parse_line(r#"[01/Dec/2026:09:00:00 +0200] 1796108400.250 502 "be""#)
            .expect("parses");
        assert_eq!((e.time_ms, e.offset_s), (1_796_108_400_250, Some(7_200)));
        let p = parser(r#"$msec $status "$upstream_addr""#);
        let e = p.parse_line(r#"1796108400.250 502 "be""#).expect("parses");
        assert_eq!(e.offset_s, None);
    }
}
