//! The access log the harness configures, and its classification into the
//! seed's shapes: a `no live upstreams` 502 shows as an `$upstream_addr`
//! whose last entry is the upstream's name (`be`) instead of an address.
//!
//! - 2-hop: `"127.0.0.2:P, be"`: one real attempt, then the retry's selection
//!   was refused.
//! - 1-hop: `"be"`: the first selection was refused.

use std::net::SocketAddr;

/// The `log_format` every harness nginx uses, named [`LOG_FORMAT_NAME`];
/// with the module loaded it ends with `$generation_retry_resnapshots`,
/// else with `-`.
pub fn log_format(module: bool) -> String {
    let last = if module {
        "$generation_retry_resnapshots"
    } else {
        "-"
    };
    format!(
        r#"'$msec $status "$upstream_addr" "$request" $request_time "$upstream_status" {last}'"#
    )
}
pub const LOG_FORMAT_NAME: &str = "generation_retry";

/// One `$upstream_addr` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hop {
    /// A peer nginx connected (or tried to connect) to.
    Addr(SocketAddr),
    /// The upstream group's name: the selection was refused (`no live upstreams`).
    Group(String),
}

/// One access log line.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// `$msec`: seconds since the epoch, with milliseconds.
    pub msec: f64,
    pub status: u16,
    pub hops: Vec<Hop>,
    pub method: String,
    pub path: String,
    pub request_time: f64,
    /// `$generation_retry_resnapshots` (None without the module).
    pub resnapshots: Option<u32>,
}

/// The shape of a request's outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// Not a `no live upstreams` failure.
    Other,
    /// Refused at the first selection.
    OneHop,
    /// Refused at a retry's selection after `attempts` real attempts (>= 1).
    TwoHop { attempts: usize },
}

impl Entry {
    pub fn shape(&self) -> Shape {
        match self.hops.last() {
            Some(Hop::Group(_)) => {
                let attempts = self
                    .hops
                    .iter()
                    .filter(|h| matches!(h, Hop::Addr(_)))
                    .count();
                if attempts == 0 {
                    Shape::OneHop
                } else {
                    Shape::TwoHop { attempts }
                }
            }
            _ => Shape::Other,
        }
    }

    /// `$upstream_addr` as nginx wrote it.
    pub fn upstream_addr(&self) -> String {
        self.hops
            .iter()
            .map(|h| match h {
                Hop::Addr(a) => a.to_string(),
                Hop::Group(g) => g.clone(),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Parses one line; `None` for a line not in [`LOG_FORMAT`].
pub fn parse_line(line: &str) -> Option<Entry> {
    let (msec, rest) = line.split_once(' ')?;
    let (status, rest) = rest.split_once(' ')?;
    let rest = rest.strip_prefix('"')?;
    let (upstream, rest) = rest.split_once("\" \"")?;
    let (request, rest) = rest.split_once("\" ")?;
    let (request_time, rest) = rest.split_once(' ')?;
    let resnapshots = rest
        .rsplit_once(' ')
        .and_then(|(_, last)| last.parse().ok());
    let mut req = request.split(' ');
    Some(Entry {
        msec: msec.parse().ok()?,
        status: status.parse().ok()?,
        hops: parse_upstream_addr(upstream),
        method: req.next()?.to_string(),
        path: req.next().unwrap_or("").to_string(),
        request_time: request_time.parse().ok()?,
        resnapshots,
    })
}

/// Splits `$upstream_addr`: `, ` between attempts, ` : ` between upstream
/// groups of internal redirects; `-` means no upstream was involved.
pub fn parse_upstream_addr(value: &str) -> Vec<Hop> {
    if value == "-" || value.is_empty() {
        return Vec::new();
    }
    value
        .split(" : ")
        .flat_map(|group| group.split(", "))
        .map(|h| match h.parse::<SocketAddr>() {
            Ok(a) => Hop::Addr(a),
            Err(_) => Hop::Group(h.to_string()),
        })
        .collect()
}

/// Parses a whole log, skipping lines in other formats.
pub fn parse(text: &str) -> Vec<Entry> {
    text.lines().filter_map(parse_line).collect()
}

/// Counts by shape over 502 responses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub requests: usize,
    pub ok: usize,
    pub status_502: usize,
    pub one_hop_502: usize,
    pub two_hop_502: usize,
    pub other_errors: usize,
}

pub fn tally(entries: &[Entry]) -> Tally {
    let mut t = Tally::default();
    for e in entries {
        t.requests += 1;
        match e.status {
            200..=399 => t.ok += 1,
            502 => {
                t.status_502 += 1;
                match e.shape() {
                    Shape::OneHop => t.one_hop_502 += 1,
                    Shape::TwoHop { .. } => t.two_hop_502 += 1,
                    Shape::Other => t.other_errors += 1,
                }
            }
            _ => t.other_errors += 1,
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO_HOP: &str =
        r#"1764430000.123 502 "127.0.0.2:8080, be" "GET /race/3 HTTP/1.1" 0.412 "502, 502""#;

    #[test]
    fn two_hop_no_live_upstreams() {
        let e = parse_line(TWO_HOP).unwrap();
        assert_eq!(e.status, 502);
        assert_eq!(e.method, "GET");
        assert_eq!(e.path, "/race/3");
        assert_eq!(e.shape(), Shape::TwoHop { attempts: 1 });
        assert_eq!(e.upstream_addr(), "127.0.0.2:8080, be");
        assert!((e.msec - 1764430000.123).abs() < 1e-6);
        assert_eq!(e.resnapshots, None);
        let with = parse_line(
            r#"1.0 200 "127.0.0.2:80, 127.0.0.3:80" "GET / HTTP/1.1" 0.001 "502, 200" 1"#,
        )
        .unwrap();
        assert_eq!(with.resnapshots, Some(1));
    }

    #[test]
    fn one_hop_and_success_and_no_upstream() {
        let one = parse_line(r#"1.5 502 "be" "POST /x HTTP/1.1" 0.000 "502""#).unwrap();
        assert_eq!(one.shape(), Shape::OneHop);
        let ok =
            parse_line(r#"1.5 200 "127.0.0.2:80, 127.0.0.3:80" "GET / HTTP/1.1" 0.001 "502, 200""#)
                .unwrap();
        assert_eq!(ok.shape(), Shape::Other);
        assert_eq!(ok.hops.len(), 2);
        let none = parse_line(r#"1.5 405 "-" "PUT /status HTTP/1.1" 0.000 "-""#).unwrap();
        assert!(none.hops.is_empty());
        assert_eq!(none.shape(), Shape::Other);
    }

    #[test]
    fn internal_redirect_groups_are_flattened() {
        let hops = parse_upstream_addr("127.0.0.2:80, be : 127.0.0.3:80");
        assert_eq!(hops.len(), 3);
        assert_eq!(hops[1], Hop::Group("be".into()));
        let e = Entry {
            msec: 0.0,
            status: 200,
            hops,
            method: "GET".into(),
            path: "/".into(),
            request_time: 0.0,
            resnapshots: None,
        };
        // The final answer came from a real peer: not a no-live failure.
        assert_eq!(e.shape(), Shape::Other);
    }

    #[test]
    fn tally_counts_shapes_and_skips_foreign_lines() {
        let log = format!(
            "{TWO_HOP}\n\
             1.0 502 \"be\" \"GET /a HTTP/1.1\" 0.000 \"502\"\n\
             1.0 200 \"127.0.0.3:8080\" \"GET /b HTTP/1.1\" 0.001 \"200\"\n\
             1.0 502 \"127.0.0.3:8080\" \"GET /c HTTP/1.1\" 0.001 \"502\"\n\
             1.0 504 \"127.0.0.3:8080\" \"GET /d HTTP/1.1\" 0.001 \"504\"\n\
             garbage line\n"
        );
        let t = tally(&parse(&log));
        assert_eq!(
            t,
            Tally {
                requests: 5,
                ok: 1,
                status_502: 3,
                one_hop_502: 1,
                two_hop_502: 1,
                other_errors: 2,
            }
        );
    }
}
