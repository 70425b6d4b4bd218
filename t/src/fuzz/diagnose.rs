//! diagnose's readers of nginx's error log and of an access log in the
//! harness's format: arbitrary lines give no panic, and well-formed lines
//! with random values give those values back.

use generation_retry_diagnose::access::AccessParser;
use generation_retry_diagnose::errorlog;

use super::Gen;
const ERROR_DICT: &[&str] = &[
    "2026/12/03 17:00:00 ",
    "[error] ",
    "[warn] ",
    "[info] ",
    "[crit] ",
    "[alert] ",
    "12#0: ",
    "*1 ",
    "*18446744073709551616 ",
    "no live upstreams",
    " while connecting to upstream",
    ", client: 127.0.0.1",
    ", server: ",
    ", request: \"GET / HTTP/1.1\"",
    ", upstream: \"http://u/\"",
    ", host: \"x\"",
    "connect() failed (111: Connection refused)",
    "upstream timed out",
    "\"",
    ", ",
    ": ",
];

/// Half arbitrary lines from the dictionary, half well-formed lines with
/// random values (their fields are compared in the check).
pub(super) fn gen_error_line(g: &mut Gen) -> Vec<u8> {
    if g.below(2) == 0 {
        return g.bytes(ERROR_DICT, 12);
    }
    // Field values without the separators nginx does not escape.
    let safe = |g: &mut Gen| -> String {
        g.text(&["a", "b", "1", ".", "/", "-", "é"], 6)
            .chars()
            .filter(|c| !matches!(c, '"' | ',' | '\n' | '\r' | '\0') && !c.is_control())
            .collect()
    };
    let (client, request, upstream) = (safe(g), safe(g), safe(g));
    format!(
        "2026/12/0{} 1{}:0{}:{:02} [error] {}#0: *{} no live upstreams while connecting to \
         upstream, client: {client}, server: , request: \"{request}\", upstream: \
         \"{upstream}\", host: \"h\"",
        1 + g.below(9),
        g.below(10),
        g.below(10),
        g.below(60),
        g.below(100_000),
        g.below(1_000_000),
    )
    .into_bytes()
}

pub(super) fn check_error_line(input: &[u8]) -> Result<bool, String> {
    let line = String::from_utf8_lossy(input);
    let parsed = errorlog::parse_line(&line, 3600);
    // Well-formed lines (the generator's second kind) give their fields
    // back.
    let well_formed = line.contains("no live upstreams while connecting to upstream, client: ")
        && line.ends_with(", host: \"h\"")
        && line.starts_with("2026/12/0");
    if well_formed {
        let p = parsed.ok_or_else(|| format!("{line:?}: not parsed"))?;
        let field = |name: &str| {
            line.split_once(&format!("{name}: ")).map(|(_, r)| {
                r.split(", ")
                    .next()
                    .unwrap_or("")
                    .trim_matches('"')
                    .to_owned()
            })
        };
        if p.level != "error"
            || p.client != field("client")
            || p.request != field("request")
            || p.upstream != field("upstream")
        {
            return Err(format!("{line:?}: parsed {p:?}"));
        }
    }
    Ok(well_formed)
}

/// The harness's access-log format (t/src/scoring/accesslog.rs), which diagnose
/// reads.
fn access_parser() -> &'static AccessParser {
    static P: std::sync::OnceLock<AccessParser> = std::sync::OnceLock::new();
    P.get_or_init(|| {
        let format = crate::scoring::accesslog::log_format(true);
        let format = format
            .split_once('\'')
            .and_then(|(_, r)| r.rsplit_once('\''))
            .map_or(format.as_str(), |(f, _)| f)
            .to_owned();
        AccessParser::new(&format).unwrap_or_else(|e| panic!("{format}: {e:?}"))
    })
}

const ACCESS_DICT: &[&str] = &[
    "127.0.0.1",
    " ",
    "\"",
    "\\x22",
    "-",
    "502",
    "200",
    "1796108400.123",
    "[03/Dec/2026:17:00:00 +0100]",
    "\"GET / HTTP/1.1\"",
    "127.0.0.2:80, u",
    "127.0.0.2:80 : 127.0.0.3:80",
];

/// Half arbitrary lines, half lines in the format with random values
/// (`$msec $status "$upstream_addr" "$request" $request_time
/// "$upstream_status" N`), whose fields the check compares.
pub(super) fn gen_access_line(g: &mut Gen) -> Vec<u8> {
    if g.below(2) == 0 {
        return g.bytes(ACCESS_DICT, 16);
    }
    let safe = |g: &mut Gen| -> String {
        g.text(
            &["127.0.0.2:80", ", ", " : ", "u", "GET /", " HTTP/1.1", "é"],
            5,
        )
        .chars()
        .filter(|c| *c != '"' && !c.is_control())
        .collect()
    };
    let (addr, request, statuses) = (safe(g), safe(g), safe(g));
    format!(
        "17961084{:02}.{:03} {} \"{addr}\" \"{request}\" {}.{:03} \"{statuses}\" {}",
        g.below(100),
        g.below(1000),
        100 + g.below(500),
        g.below(10),
        g.below(1000),
        g.below(3),
    )
    .into_bytes()
}

pub(super) fn check_access_line(input: &[u8]) -> Result<bool, String> {
    let line = String::from_utf8_lossy(input);
    let parsed = access_parser().parse_line(&line);
    if let Some(e) = &parsed {
        if !(100..=999).contains(&e.status) || !line.contains(e.upstream_addr) {
            return Err(format!("{line:?}: parsed {e:?}"));
        }
    }
    // A line of the generator's second kind: its fields must come back.
    let parts: Vec<&str> = line.split('"').collect();
    let well_formed = line.starts_with("17961084")
        && parts.len() == 7
        && !line.chars().any(char::is_control)
        && parts[2] == " "
        && parts[4].split(' ').count() == 3;
    if well_formed {
        let e = parsed.ok_or_else(|| format!("{line:?}: not parsed"))?;
        let status = parts[0].split(' ').nth(1).unwrap_or("");
        if e.status.to_string() != status
            || e.upstream_addr != parts[1]
            || e.request != Some(parts[3]).filter(|r| !r.is_empty() && *r != "-")
        {
            return Err(format!("{line:?}: parsed {e:?}"));
        }
    }
    Ok(well_formed)
}
