//! nginx's error.log: the lines every test must not contain, and the
//! per-connection lines that identify the race.

use crate::scoring::metrics::log;

/// Markers that fail any test that ran nginx.
/// `[crit]` is there too: nginx logs at `crit` what it cannot do for a
/// request or a connection (a failed syscall, a broken SSL state), which
/// the module must never cause either.
pub const FATAL_MARKERS: &[&str] = &["[alert]", "[emerg]", "[crit]", "exited on signal"];

/// Lines containing a fatal marker.
pub fn fatal_lines(text: &str) -> Vec<&str> {
    text.lines()
        .filter(|l| FATAL_MARKERS.iter().any(|m| l.contains(m)))
        .collect()
}

/// How many upstreams' counters each setup of the module's zone freed, in
/// order: its `notice` at each start and reload (`... counters of N
/// upstreams, M freed`).
pub fn zone_freed(log: &str) -> Vec<usize> {
    log.lines()
        .filter_map(|l| {
            l.split(" upstreams, ")
                .nth(1)?
                .strip_suffix(" freed")?
                .parse()
                .ok()
        })
        .collect()
}

/// The module's notice at each start and reload: the configuration's
/// number and how many upstreams the zone holds counters for.
pub fn zone_usage(log: &str) -> Vec<(u64, usize)> {
    log.lines()
        .filter_map(|l| {
            let rest = l
                .split_once("generation_retry: shared zone \"generation_retry\", configuration ")?
                .1;
            let (conf, rest) = rest.split_once(": counters of ")?;
            let (n, _) = rest.split_once(" upstreams")?;
            Some((conf.parse().ok()?, n.parse().ok()?))
        })
        .collect()
}

/// One error.log line, where it names a connection (`*N`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line<'a> {
    pub level: &'a str,
    pub conn: Option<u64>,
    /// The text after `*N `, or after `pid#tid: ` when there is no `*N`.
    pub message: &'a str,
    pub whole: &'a str,
}

/// `2026/11/29 17:00:00 [error] 12#12: *5 upstream prematurely closed ...`
pub fn parse_line(line: &str) -> Option<Line<'_>> {
    let open = line.find('[')?;
    let close = open + line[open..].find(']')?;
    let level = &line[open + 1..close];
    let rest = line[close + 1..].trim_start();
    let (_pid, rest) = rest.split_once(": ")?;
    let (conn, message) = match rest.strip_prefix('*') {
        Some(r) => {
            let (n, m) = r.split_once(' ')?;
            (n.parse().ok(), m)
        }
        None => (None, rest),
    };
    Some(Line {
        level,
        conn,
        message,
        whole: line,
    })
}

pub fn lines(text: &str) -> Vec<Line<'_>> {
    text.lines().filter_map(parse_line).collect()
}

/// Lines whose message starts with `prefix`.
pub fn with_message<'a>(text: &'a str, prefix: &str) -> Vec<Line<'a>> {
    lines(text)
        .into_iter()
        .filter(|l| l.message.starts_with(prefix))
        .collect()
}

pub const PREMATURELY_CLOSED: &str = "upstream prematurely closed connection";

/// An error line of a failed attempt at a peer (closed, reset, timed out,
/// refused): what nginx's retry then handles. Not `no live upstreams`, which
/// is a refused selection, nor this module's own lines.
pub fn is_upstream_attempt_failure(message: &str) -> bool {
    !message.starts_with(NO_LIVE)
        && !message.starts_with(log::MARKER)
        && (message.contains(" from upstream") || message.contains(" to upstream"))
}
pub const NO_LIVE: &str = "no live upstreams";

/// nginx's HTTP/2 upstreams (`grpc_pass`, and `proxy_http_version 2` from
/// 1.29.4; every nginx of the matrix, up to its development branch), on an
/// attempt after one on a cached connection: the request's frames were
/// rewritten in place for that connection's stream id (3, 5, ...), and a
/// fresh connection's attempt (stream 1) sends them unrewritten; the
/// backend answers on the stale id and nginx fails the request
/// (`invalid_header`, a 502). Its own defect, with the module or without
/// (tests/protocols/ proves it on stock; nginx-src-patches fixes it).
pub const STALE_STREAM: &str = "upstream sent frame for unknown stream";

/// For the request whose error lines mention `request_marker` (its URI):
/// the connection id if its lines are, in order, `upstream prematurely
/// closed connection` then `no live upstreams`.
pub fn two_hop_pair(text: &str, request_marker: &str) -> Option<u64> {
    let mine: Vec<Line<'_>> = lines(text)
        .into_iter()
        .filter(|l| l.whole.contains(request_marker))
        .collect();
    let first = mine
        .iter()
        .position(|l| l.message.starts_with(PREMATURELY_CLOSED))?;
    let conn = mine[first].conn?;
    mine[first + 1..]
        .iter()
        .any(|l| l.conn == Some(conn) && l.message.starts_with(NO_LIVE))
        .then_some(conn)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scoring::metrics::{NoLiveCause, Protocol};

    const LOG: &str = "\
2026/11/29 17:00:00 [notice] 10#10: start worker process 11
2026/11/29 17:00:01 [error] 11#11: *7 upstream prematurely closed connection while reading response header from upstream, client: 127.0.0.1, server: , request: \"GET /race/1 HTTP/1.1\", upstream: \"http://127.0.0.2:9000/race/1\", host: \"127.0.0.1:8000\"
2026/11/29 17:00:01 [error] 11#11: *7 no live upstreams while connecting to upstream, client: 127.0.0.1, server: , request: \"GET /race/1 HTTP/1.1\", upstream: \"http://be/race/1\", host: \"127.0.0.1:8000\"
2026/11/29 17:00:02 [error] 11#11: *9 no live upstreams while connecting to upstream, client: 127.0.0.1, server: , request: \"GET /race/2 HTTP/1.1\", upstream: \"http://be/race/2\", host: \"127.0.0.1:8000\"
";

    #[test]
    fn parses_level_connection_and_message() {
        let l = lines(LOG);
        assert_eq!(l.len(), 4);
        assert_eq!(l[0].level, "notice");
        assert_eq!(l[0].conn, None);
        assert_eq!(l[1].conn, Some(7));
        assert!(l[1].message.starts_with(PREMATURELY_CLOSED));
    }

    #[test]
    fn pairs_by_connection_in_order() {
        assert_eq!(two_hop_pair(LOG, "/race/1 "), Some(7));
        // A lone no-live line is the 1-hop shape, not the pair.
        assert_eq!(two_hop_pair(LOG, "/race/2 "), None);
        assert_eq!(with_message(LOG, NO_LIVE).len(), 2);
    }

    #[test]
    fn attempt_failures_exclude_refused_selections() {
        let l = lines(LOG);
        assert!(is_upstream_attempt_failure(l[1].message));
        assert!(!is_upstream_attempt_failure(l[2].message));
        assert!(is_upstream_attempt_failure(
            "recv() failed (104: Connection reset by peer) while reading response header from upstream"
        ));
        assert!(!is_upstream_attempt_failure(
            &(log::no_live_marker(Protocol::Http, "be", NoLiveCause::Empty)
                + " while connecting to upstream")
        ));
    }

    #[test]
    fn fatal_markers() {
        assert!(fatal_lines(LOG).is_empty());
        let bad = "2026/11/29 17:00:00 [alert] 10#10: worker process 11 exited on signal 11\n";
        assert_eq!(fatal_lines(bad).len(), 1);
        assert_eq!(fatal_lines("x [emerg] y\n").len(), 1);
        assert_eq!(fatal_lines("x [crit] y\n").len(), 1);
    }
}
