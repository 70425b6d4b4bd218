//! Error-log lines: the stock nginx layout
//! `YYYY/MM/DD HH:MM:SS [level] PID#TID: *CID message, client: X, server: Y,
//! request: "...", upstream: "...", host: "..."` split into its parts and
//! sorted into the kinds the diagnosis needs.
//!
//! The `*CID ` and the `, key: value` context are optional; stream lines
//! end with `upstream: "be"` and `bytes from/to client:...`. The module's
//! own lines (`generation_retry: ...`) are recognised so they can be
//! counted and left out: the diagnosis must work without them.

use crate::timefmt;

/// What an error line says, as far as the diagnosis cares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `no live upstreams`: a refused selection.
    NoLive,
    /// `NAME could not be resolved (N: ...)`: a resolver failure for
    /// `name`. `nxdomain` when N is 3 (`Host not found`) for the name
    /// itself: only then does nginx empty the name's peer list; other
    /// failures (2: Server failure, 110: Operation timed out, ...) keep the
    /// old addresses, and so does one SRV target failing (`... while
    /// resolving service S of NAME`, whose name here is NAME).
    Resolver { name: String, nxdomain: bool },
    /// `upstream server temporarily disabled`: a peer reached max_fails.
    Disabled,
    /// A failed attempt at a peer (connect, read, timeout, reset, close).
    PeerError,
    /// A line of the generation_retry module itself.
    Module,
    /// Anything else.
    Other,
}

/// The prefix of the module's own lines.
pub const MODULE_MARKER: &str = "generation_retry: ";

const NO_LIVE: &str = "no live upstreams";
const RESOLVE_FAILED: &str = " could not be resolved (";
const DISABLED: &str = "upstream server temporarily disabled";
/// The connection's log actions (` while ACTION`) during which a failure
/// makes nginx try the next peer (`ngx_http_upstream_next`) and count it
/// against the peer: ngx_http_upstream.c and ngx_stream_proxy_module.c set
/// these before connecting, handshaking, sending the request and reading
/// the header. Failures `while reading upstream` (the body) or `while
/// sending to client` do not.
const PEER_ACTIONS: [&str; 4] = [
    " while connecting to upstream",
    " while SSL handshaking to upstream",
    " while sending request to upstream",
    " while reading response header from upstream",
];
/// Messages of a failed attempt at a peer, for lines without an action:
/// ngx_event_connect.c (`connect() to ADDR failed`), ngx_http_upstream.c
/// (`connect() failed`, `kevent() reported that connect() failed`,
/// `upstream prematurely closed connection`, `upstream timed out`,
/// `upstream sent ...`) and the os/unix I/O calls through
/// `ngx_connection_error` (recv, readv, send, writev, sendfile).
const PEER_ERRORS: [&str; 12] = [
    "connect() to ",
    "connect() failed",
    "kevent() reported that connect() failed",
    "upstream prematurely closed connection",
    "upstream timed out",
    "upstream sent ",
    "recv() failed",
    "readv() failed",
    "send() failed",
    "writev() failed",
    "sendfile() failed",
    "SSL_do_handshake() failed",
];
/// Levels nginx writes peer failures with: `error` for the common errnos,
/// `crit` (connect) and `alert` (`ngx_connection_error`) for the others.
const PEER_LEVELS: [&str; 4] = ["error", "warn", "crit", "alert"];

/// One parsed error-log line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorLine {
    /// Milliseconds since the epoch, UTC (the log's local time shifted by
    /// the offset given to [`parse_line`]).
    pub time_ms: i64,
    /// The time as logged.
    pub time_text: String,
    /// `error`, `warn`, ...
    pub level: String,
    /// The `*CID` connection number, if any.
    pub connection: Option<u64>,
    /// Everything after `PID#TID: *CID `.
    pub message: String,
    /// The message before its context (` while ...`, `, client: ...`).
    pub head: String,
    /// `client: X`.
    pub client: Option<String>,
    /// `server: Y`.
    pub server: Option<String>,
    /// `request: "..."`, unquoted.
    pub request: Option<String>,
    /// `upstream: "..."`, unquoted.
    pub upstream: Option<String>,
    /// What the line says.
    pub kind: Kind,
}

fn all_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// Parses one line; `None` if it is not in nginx's error-log layout.
/// `offset_s` is the server's offset east of UTC (error-log times carry no
/// zone).
pub fn parse_line(line: &str, offset_s: i32) -> Option<ErrorLine> {
    let time_text = line.get(..19)?;
    let time_ms = timefmt::parse_error_time(time_text, offset_s)?;
    let rest = line.get(19..)?.strip_prefix(" [")?;
    let (level, rest) = rest.split_once("] ")?;
    if level.is_empty() || !level.bytes().all(|b| b.is_ascii_lowercase()) {
        return None;
    }
    let (pid_tid, rest) = rest.split_once(": ")?;
    let (pid, tid) = pid_tid.split_once('#')?;
    if !all_digits(pid) || !all_digits(tid) {
        return None;
    }
    let (connection, message) = match rest.strip_prefix('*') {
        Some(after) => {
            let (cid, msg) = after.split_once(' ')?;
            (Some(cid.parse().ok().filter(|_| all_digits(cid))?), msg)
        }
        None => (None, rest),
    };
    let context_start = [", client: ", ", upstream: "]
        .iter()
        .filter_map(|m| message.find(m))
        .min();
    let pairs = context_start
        .map(|i| parse_context(&message[i..]))
        .unwrap_or_default();
    // A key given twice (a message that itself holds `, upstream: "..."`,
    // or modules adding context) counts by its last value: nginx's own
    // context comes last.
    let value = |key: &str| {
        pairs
            .iter()
            .rev()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.to_string())
    };
    let head_end = [context_start, message.find(" while ")]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(message.len());
    let head = &message[..head_end];
    let kind = classify(level, message, head);
    Some(ErrorLine {
        time_ms,
        time_text: time_text.to_string(),
        level: level.to_string(),
        connection,
        message: message.to_string(),
        head: head.to_string(),
        client: value("client"),
        server: value("server"),
        request: value("request"),
        upstream: value("upstream"),
        kind,
    })
}

/// Sorts a message into a [`Kind`].
fn classify(level: &str, message: &str, head: &str) -> Kind {
    if message.starts_with(MODULE_MARKER) {
        Kind::Module
    } else if message.starts_with(NO_LIVE) {
        Kind::NoLive
    } else if let Some(i) = head.find(RESOLVE_FAILED) {
        let before = head[..i].trim();
        let name = before.rsplit(' ').next().unwrap_or(before);
        let code = head[i + RESOLVE_FAILED.len()..].split(':').next();
        // `T could not be resolved (3: ...) while resolving service S of
        // NAME`: one SRV target of NAME failed; NAME keeps its peers.
        let target = message[head.len()..].find(SRV_TARGET).map(|j| {
            let of = &message[head.len() + j + SRV_TARGET.len()..];
            let name = of.split_once(" of ").map_or("", |(_, n)| n);
            name.split([',', ' ']).next().unwrap_or("")
        });
        match target {
            Some(owner) if !owner.is_empty() => Kind::Resolver {
                name: owner.trim_matches('"').to_string(),
                nxdomain: false,
            },
            _ => Kind::Resolver {
                name: name.trim_matches('"').to_string(),
                nxdomain: code == Some("3"),
            },
        }
    } else if message.starts_with(DISABLED) {
        Kind::Disabled
    } else if PEER_LEVELS.contains(&level) && is_peer_error(message, head) {
        Kind::PeerError
    } else {
        Kind::Other
    }
}

const SRV_TARGET: &str = " while resolving service ";

/// Whether a message is a failed attempt at a peer: by its action if it
/// has one, else by its wording.
fn is_peer_error(message: &str, head: &str) -> bool {
    let action = &message[head.len()..];
    if action.starts_with(" while ") {
        PEER_ACTIONS.iter().any(|a| action.starts_with(a))
    } else {
        PEER_ERRORS.iter().any(|p| head.starts_with(p))
    }
}

/// Splits `, key: value, key: "value", ...` into pairs. Quoted values end
/// at a `"` followed by the end of the line or by `, key:`; so a request
/// line that itself holds a quote is still read whole. Stops at the first
/// piece it cannot read.
pub fn parse_context(mut s: &str) -> Vec<(&str, &str)> {
    let mut pairs = Vec::new();
    while let Some(rest) = s.strip_prefix(", ") {
        let Some(colon) = rest.find(':') else { break };
        let key = &rest[..colon];
        if key.is_empty() || !key.bytes().all(is_key_byte) {
            break;
        }
        let after = &rest[colon + 1..];
        let after = after.strip_prefix(' ').unwrap_or(after);
        let (value, next) = if let Some(quoted) = after.strip_prefix('"') {
            let Some(end) = quoted_end(quoted) else { break };
            (&quoted[..end], &quoted[end + 1..])
        } else {
            let end = after.find(", ").unwrap_or(after.len());
            (&after[..end], &after[end..])
        };
        pairs.push((key, value));
        s = next;
    }
    pairs
}

fn is_key_byte(b: u8) -> bool {
    b.is_ascii_lowercase() || b == b' ' || b == b'/' || b == b'_'
}

/// The index of the `"` that closes a quoted context value. Linear in the
/// length of `s`: the key test after each `"` reads only key bytes, and a
/// run of key bytes ends at the next `"` at the latest.
fn quoted_end(s: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = s[from..].find('"') {
        let end = from + i;
        let after = &s[end + 1..];
        if after.is_empty() || starts_with_key(after) {
            return Some(end);
        }
        from = end + 1;
    }
    None
}

#[cfg(test)]
thread_local! {
    /// Bytes [`starts_with_key`] has read, to check the scan is linear.
    static KEY_SCAN: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Whether `s` is `, key:...`: reads `, `, then key bytes up to the first
/// other byte, which must be `:`.
fn starts_with_key(s: &str) -> bool {
    let Some(rest) = s.strip_prefix(", ") else {
        return false;
    };
    let key = rest.bytes().take_while(|b| is_key_byte(*b)).count();
    #[cfg(test)]
    KEY_SCAN.with(|c| c.set(c.get() + key + 1));
    key > 0 && rest.as_bytes().get(key) == Some(&b':')
}

/// The host part of an `upstream: "..."` value: `http://be/p` gives `be`,
/// `http://127.0.0.2:9000/p` gives `127.0.0.2:9000`, stream's `be` stays.
pub fn upstream_host(value: &str) -> &str {
    let rest = match value.find("://") {
        Some(i) => &value[i + 3..],
        None => value,
    };
    if let Some(path) = rest.strip_prefix("unix:") {
        // `http://unix:/run/app.sock:/p`: the socket path ends at ":/".
        return match path.find(":/") {
            Some(i) => &rest[.."unix:".len() + i],
            None => rest,
        };
    }
    if rest.starts_with('[') {
        // `[v6]:port/...`
        let end = rest.find(']').map_or(rest.len(), |i| i + 1);
        let port_end = rest[end..].find('/').map_or(rest.len(), |i| end + i);
        return &rest[..port_end];
    }
    match rest.find('/') {
        Some(i) => &rest[..i],
        None => rest,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HTTP_NO_LIVE: &str = r#"2026/12/01 07:00:00 [error] 11#11: *7 no live upstreams while connecting to upstream, client: 10.1.1.1, server: example.com, request: "GET /p HTTP/1.1", upstream: "http://be/p", host: "example.com""#;
    const STREAM_NO_LIVE: &str = "2026/12/01 07:00:00 [error] 11#11: *9 no live upstreams while connecting to upstream, client: 10.1.1.1, server: 0.0.0.0:9000, upstream: \"be\", bytes from/to client:0/0, bytes from/to upstream:0/0";
    const DEC1_0700: i64 = 1_796_108_400_000;

    #[test]
    fn http_no_live() {
        let l = parse_line(HTTP_NO_LIVE, 0).expect("parses");
        assert_eq!(l.time_ms, DEC1_0700);
        assert_eq!(l.time_text, "2026/12/01 07:00:00");
        assert_eq!(l.level, "error");
        assert_eq!(l.connection, Some(7));
        assert_eq!(l.kind, Kind::NoLive);
        assert_eq!(l.head, "no live upstreams");
        assert!(l
            .message
            .starts_with("no live upstreams while connecting to upstream, client:"));
        assert_eq!(l.client.as_deref(), Some("10.1.1.1"));
        assert_eq!(l.server.as_deref(), Some("example.com"));
        assert_eq!(l.request.as_deref(), Some("GET /p HTTP/1.1"));
        assert_eq!(l.upstream.as_deref(), Some("http://be/p"));
        assert_eq!(upstream_host(l.upstream.as_deref().unwrap_or("")), "be");
    }

    #[test]
    fn stream_no_live() {
        let l = parse_line(STREAM_NO_LIVE, 3_600).expect("parses");
        assert_eq!(l.time_ms, DEC1_0700 - 3_600_000, "local time +0100");
        assert_eq!(l.connection, Some(9));
        assert_eq!(l.kind, Kind::NoLive);
        assert_eq!(l.server.as_deref(), Some("0.0.0.0:9000"));
        assert_eq!(l.request, None);
        assert_eq!(l.upstream.as_deref(), Some("be"));
        assert_eq!(upstream_host("be"), "be");
    }

    #[test]
    fn resolver_without_connection() {
        let line = "2026/12/01 07:00:00 [error] 11#11: be.example.com could not be resolved (3: Host not found)";
        let l = parse_line(line, 0).expect("parses");
        assert_eq!(l.connection, None);
        assert_eq!(
            l.kind,
            Kind::Resolver {
                name: "be.example.com".into(),
                nxdomain: true
            }
        );
        assert_eq!(
            l.head,
            "be.example.com could not be resolved (3: Host not found)"
        );
        assert_eq!(l.client, None);
    }

    #[test]
    fn disabled_and_connect_failed() {
        let disabled = r#"2026/12/01 07:00:00 [warn] 11#11: *3 upstream server temporarily disabled while connecting to upstream, client: 10.1.1.1, server: , request: "GET / HTTP/1.1", upstream: "http://10.0.0.1:80/", host: "h""#;
        let l = parse_line(disabled, 0).expect("parses");
        assert_eq!(l.kind, Kind::Disabled);
        assert_eq!(l.level, "warn");
        assert_eq!(l.server.as_deref(), Some(""));
        assert_eq!(
            upstream_host(l.upstream.as_deref().unwrap_or("")),
            "10.0.0.1:80"
        );
        let refused = r#"2026/12/01 07:00:00 [error] 11#11: *3 connect() failed (111: Connection refused) while connecting to upstream, client: 10.1.1.1, server: , request: "GET / HTTP/1.1", upstream: "http://10.0.0.1:80/", host: "h""#;
        let l = parse_line(refused, 0).expect("parses");
        assert_eq!(l.kind, Kind::PeerError);
        assert_eq!(l.head, "connect() failed (111: Connection refused)");
        // The same text at info level is not a peer error.
        let info = refused.replace("[error]", "[info]");
        assert_eq!(parse_line(&info, 0).map(|l| l.kind), Some(Kind::Other));
    }

    #[test]
    fn module_and_other_lines() {
        let m = r#"2026/12/01 07:00:00 [warn] 11#11: *3 generation_retry: upstream "be" peer list changed (generation 3 -> 4), selected 10.0.0.2:80 on a fresh snapshot"#;
        assert_eq!(parse_line(m, 0).map(|l| l.kind), Some(Kind::Module));
        let n = "2026/12/01 07:00:00 [notice] 10#10: start worker process 11";
        let l = parse_line(n, 0).expect("parses");
        assert_eq!(l.kind, Kind::Other);
        assert_eq!(l.connection, None);
        assert_eq!(l.message, "start worker process 11");
    }

    #[test]
    fn malformed_lines() {
        for bad in [
            "",
            "2026/12/01 07:00:00",
            "2026/12/01 07:00:00 [error] x#1: m",
            "2026/13/01 07:00:00 [error] 1#1: m",
            "2026/12/01 07:00:00 [Error] 1#1: m",
            "2026/12/01 07:00:00 [error] 1#1: *x m",
            "2026/12/01 07:00:00 [error] 1#1: *7",
        ] {
            assert_eq!(parse_line(bad, 0), None, "{bad:?}");
        }
    }

    #[test]
    fn quoted_values_with_quotes_inside() {
        let pairs = parse_context(
            r#", client: 1.2.3.4, request: "GET /a"b HTTP/1.1", upstream: "http://be/a"b", host: "h""#,
        );
        assert_eq!(
            pairs,
            [
                ("client", "1.2.3.4"),
                ("request", r#"GET /a"b HTTP/1.1"#),
                ("upstream", r#"http://be/a"b"#),
                ("host", "h")
            ]
        );
        assert_eq!(
            upstream_host("http://[2001:db8::1]:8080/x"),
            "[2001:db8::1]:8080"
        );
        assert_eq!(
            upstream_host("http://unix:/run/a.sock:/x"),
            "unix:/run/a.sock"
        );
        assert_eq!(upstream_host("127.0.0.2:9000"), "127.0.0.2:9000");
    }

    fn kind(message: &str) -> Option<Kind> {
        parse_line(&format!("2026/12/01 07:00:00 [error] 11#11: {message}"), 0).map(|l| l.kind)
    }

    #[test]
    fn resolver_codes_and_srv_targets() {
        let resolver = |name: &str, nxdomain| {
            Some(Kind::Resolver {
                name: name.into(),
                nxdomain,
            })
        };
        assert_eq!(
            kind("be.example.com could not be resolved (2: Server failure)"),
            resolver("be.example.com", false)
        );
        assert_eq!(
            kind("be.example.com could not be resolved (110: Operation timed out)"),
            resolver("be.example.com", false)
        );
        assert_eq!(
            kind("service http of be.example.com could not be resolved (3: Host not found)"),
            resolver("be.example.com", true)
        );
        assert_eq!(
            kind("t1.example.com could not be resolved (3: Host not found) while resolving service http of be.example.com"),
            resolver("be.example.com", false)
        );
    }

    #[test]
    fn peer_errors_follow_nginx_wording() {
        for m in [
            "connect() to 10.0.0.1:80 failed (111: Connection refused) while connecting to upstream, client: 1.1.1.1",
            "send() failed (32: Broken pipe) while sending request to upstream, client: 1.1.1.1",
            "writev() failed (104: Connection reset by peer) while sending request to upstream, client: 1.1.1.1",
            "upstream sent invalid header while reading response header from upstream, client: 1.1.1.1",
            "SSL_do_handshake() failed (SSL: error) while SSL handshaking to upstream, client: 1.1.1.1",
            "upstream timed out (110: Connection timed out) while connecting to upstream",
            "send() failed (104: Connection reset by peer)",
            "writev() failed (32: Broken pipe)",
        ] {
            assert_eq!(kind(m), Some(Kind::PeerError), "{m}");
        }
        let crit = "2026/12/01 07:00:00 [crit] 11#11: *1 connect() to 10.0.0.1:80 failed (13: Permission denied) while connecting to upstream";
        assert_eq!(parse_line(crit, 0).map(|l| l.kind), Some(Kind::PeerError));
        // A body read failing does not count against the peer.
        for m in [
            "upstream timed out (110: Connection timed out) while reading upstream, client: 1.1.1.1",
            "writev() failed (32: Broken pipe) while sending to client, client: 1.1.1.1",
            "open() \"/x\" failed (2: No such file or directory)",
        ] {
            assert_eq!(kind(m), Some(Kind::Other), "{m}");
        }
    }

    #[test]
    fn the_last_upstream_key_counts() {
        let line = r#"2026/12/01 07:00:00 [error] 11#11: *3 upstream sent "x", upstream: "http://10.0.0.9:80/" while reading response header from upstream, client: 1.1.1.1, server: , request: "GET / HTTP/1.1", upstream: "http://10.0.0.1:80/", host: "h""#;
        let l = parse_line(line, 0).expect("parses");
        assert_eq!(l.upstream.as_deref(), Some("http://10.0.0.1:80/"));
    }

    #[test]
    fn quoted_value_scan_is_linear() {
        // A request holding thousands of `", x` pieces without a colon:
        // each `"` is a candidate end, and the old key test searched the
        // whole rest of the line for a `:` after every one of them.
        let piece = "\", abcdefghij";
        let line = format!(
            "2026/12/01 07:00:00 [error] 11#11: *3 no live upstreams, client: 1.1.1.1, request: \"GET /{} HTTP/1.1\", upstream: \"http://be/\"",
            piece.repeat(4_000)
        );
        KEY_SCAN.with(|c| c.set(0));
        let l = parse_line(&line, 0).expect("parses");
        assert_eq!(l.upstream.as_deref(), Some("http://be/"));
        let scanned = KEY_SCAN.with(|c| c.get());
        assert!(
            scanned <= 2 * line.len(),
            "{scanned} bytes scanned for a {}-byte line",
            line.len()
        );
    }
}
