//! Command-line arguments, parsed by hand: `--flag VALUE` or
//! `--flag=VALUE`, repeatable log flags, `-h`/`--help`.

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

use crate::logformat::{FormatError, LogFormat};
use crate::timefmt;

/// The usage text of `--help`.
pub const HELP: &str = "\
generation-retry-diagnose: tell which 502/504s in stock nginx logs are the
upstream generation race (`no live upstreams` while a `server ... resolve`
name's addresses change, nginx/nginx#1656).

USAGE:
    generation-retry-diagnose --access-log PATH --log-format 'FORMAT' [--error-log PATH] [OPTIONS]

LOGS (each repeatable; plain or gzip, rotated files in any order):
    --access-log PATH      an access log written with FORMAT
    --error-log PATH       an error log (stock layout)

OPTIONS:
    --log-format 'FORMAT'  the access log's log_format string; it must contain
                           $status, $upstream_addr and one of $msec,
                           $time_iso8601, $time_local ($connection, $request,
                           $remote_addr, $request_id help joining lines)
    --window-ms N          how far around an incident to look for address
                           changes (default 2000)
    --fail-timeout-ms N    how long a failed or disabled peer stays out, as
                           the upstream's fail_timeout (default 10000)
    --upstream-server UPSTREAM=NAME
                           upstream UPSTREAM has `server NAME resolve`, so
                           resolver errors for NAME concern it (repeatable;
                           an upstream named NAME needs no flag)
    --error-log-utc-offset +HHMM
                           the zone the error log's times are in (default:
                           learnt from the logs, else +0000)
    --json                 print JSON instead of the report
    -h, --help             print this help

EXIT STATUS: 0 done, 1 a log could not be read, 2 bad arguments.
";

/// A checked command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cli {
    /// `--access-log`, in order.
    pub access_logs: Vec<PathBuf>,
    /// `--error-log`, in order.
    pub error_logs: Vec<PathBuf>,
    /// `--log-format`, checked (present whenever there are access logs).
    pub log_format: Option<String>,
    /// `--json`.
    pub json: bool,
    /// `--window-ms`.
    pub window_ms: i64,
    /// `--error-log-utc-offset`, in seconds east of UTC.
    pub error_offset_s: Option<i32>,
    /// `--fail-timeout-ms`.
    pub fail_timeout_ms: i64,
    /// `--upstream-server UPSTREAM=NAME`, in order.
    pub servers: Vec<(String, String)>,
}

/// What the command line asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// Diagnose.
    Run(Cli),
    /// Print [`HELP`].
    Help,
}

/// A bad command line, with the message to show.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (see --help)", self.0)
    }
}

impl std::error::Error for UsageError {}

fn usage(msg: impl Into<String>) -> UsageError {
    UsageError(msg.into())
}

/// Parses the arguments (without the program name).
pub fn parse_args(args: &[OsString]) -> Result<Command, UsageError> {
    let mut access_logs = Vec::new();
    let mut error_logs = Vec::new();
    let mut log_format: Option<String> = None;
    let mut json = false;
    let mut window_ms: i64 = 2_000;
    let mut error_offset_s = None;
    let mut fail_timeout_ms: i64 = 10_000;
    let mut servers = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let Some(text) = arg.to_str() else {
            return Err(usage(format!(
                "unexpected argument {}",
                arg.to_string_lossy()
            )));
        };
        let (flag, inline) = match text.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(OsString::from(v))),
            _ => (text, None),
        };
        let mut value = |name: &str| -> Result<OsString, UsageError> {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or_else(|| usage(format!("{name} needs a value")))
        };
        let string = |name: &str, v: OsString| -> Result<String, UsageError> {
            v.into_string()
                .map_err(|_| usage(format!("{name}: the value is not UTF-8")))
        };
        match flag {
            "-h" | "--help" => return Ok(Command::Help),
            "--json" if inline.is_none() => json = true,
            "--json" => return Err(usage("--json takes no value")),
            "--access-log" => access_logs.push(PathBuf::from(value(flag)?)),
            "--error-log" => error_logs.push(PathBuf::from(value(flag)?)),
            "--log-format" => {
                if log_format.is_some() {
                    return Err(usage("--log-format given twice"));
                }
                log_format = Some(string(flag, value(flag)?)?);
            }
            "--window-ms" => {
                let v = string(flag, value(flag)?)?;
                window_ms = match v.parse::<i64>() {
                    Ok(n) if (1..=3_600_000).contains(&n) => n,
                    _ => {
                        return Err(usage(format!(
                            "--window-ms: {v:?} is not a number of milliseconds from 1 to 3600000"
                        )))
                    }
                };
            }
            "--fail-timeout-ms" => {
                let v = string(flag, value(flag)?)?;
                fail_timeout_ms = match v.parse::<i64>() {
                    Ok(n) if (0..=86_400_000).contains(&n) => n,
                    _ => {
                        return Err(usage(format!(
                            "--fail-timeout-ms: {v:?} is not a number of milliseconds from 0 to 86400000"
                        )))
                    }
                };
            }
            "--upstream-server" => {
                let v = string(flag, value(flag)?)?;
                match v.split_once('=') {
                    Some((u, n)) if !u.is_empty() && !n.is_empty() => {
                        servers.push((u.to_string(), n.to_string()));
                    }
                    _ => {
                        return Err(usage(format!(
                            "--upstream-server: {v:?} is not UPSTREAM=NAME"
                        )))
                    }
                }
            }
            "--error-log-utc-offset" => {
                let v = string(flag, value(flag)?)?;
                error_offset_s = Some(timefmt::parse_utc_offset(&v).ok_or_else(|| {
                    usage(format!(
                        "--error-log-utc-offset: {v:?} is not an offset like +0100 or -0530"
                    ))
                })?);
            }
            _ if flag.starts_with('-') => {
                return Err(usage(format!("unknown option {flag}")));
            }
            _ => {
                return Err(usage(format!(
                    "unexpected argument {}: give logs with --access-log or --error-log",
                    OsStr::new(text).to_string_lossy()
                )))
            }
        }
    }
    if access_logs.is_empty() && error_logs.is_empty() {
        return Err(usage(
            "no logs: give --access-log PATH and/or --error-log PATH",
        ));
    }
    if !access_logs.is_empty() {
        match &log_format {
            None => {
                return Err(usage(
                    "--access-log needs --log-format 'FORMAT': the access log's log_format \
                     string, which must contain $status, $upstream_addr and one of \
                     $time_iso8601, $time_local, $msec (nginx's `combined` has no \
                     $upstream_addr, so it is not enough)",
                ))
            }
            Some(f) => {
                LogFormat::parse(f)
                    .map_err(|e: FormatError| usage(format!("--log-format: {e}")))?;
            }
        }
    }
    Ok(Command::Run(Cli {
        access_logs,
        error_logs,
        log_format,
        json,
        window_ms,
        error_offset_s,
        fail_timeout_ms,
        servers,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    fn run(list: &[&str]) -> Cli {
        match parse_args(&args(list)) {
            Ok(Command::Run(c)) => c,
            other => panic!("{list:?}: {other:?}"),
        }
    }

    fn error(list: &[&str]) -> String {
        match parse_args(&args(list)) {
            Err(e) => e.to_string(),
            other => panic!("{list:?} should fail: {other:?}"),
        }
    }

    #[test]
    fn flags() {
        let c = run(&[
            "--access-log",
            "a.log",
            "--access-log=a.log.1.gz",
            "--error-log",
            "e.log",
            "--log-format",
            "$msec $status \"$upstream_addr\"",
            "--window-ms=500",
            "--error-log-utc-offset",
            "+0100",
            "--json",
            "--fail-timeout-ms=30000",
            "--upstream-server",
            "be=be.example.com",
        ]);
        assert_eq!(
            c.access_logs,
            [PathBuf::from("a.log"), PathBuf::from("a.log.1.gz")]
        );
        assert_eq!(c.error_logs, [PathBuf::from("e.log")]);
        assert_eq!(c.window_ms, 500);
        assert_eq!(c.error_offset_s, Some(3_600));
        assert_eq!(c.fail_timeout_ms, 30_000);
        assert_eq!(
            c.servers,
            [("be".to_string(), "be.example.com".to_string())]
        );
        assert!(c.json);
        let d = run(&["--error-log", "e.log"]);
        assert_eq!((d.window_ms, d.json, d.log_format), (2_000, false, None));
        assert_eq!((d.error_offset_s, d.fail_timeout_ms), (None, 10_000));
        assert_eq!(parse_args(&args(&["-h"])), Ok(Command::Help));
    }

    #[test]
    fn bad_arguments() {
        assert!(error(&[]).contains("no logs"));
        assert!(error(&["--access-log", "a"]).contains("needs --log-format"));
        assert!(error(&["--access-log", "a"]).contains("$upstream_addr"));
        assert!(
            error(&["--access-log", "a", "--log-format", "$msec $status"])
                .contains("lacks $upstream_addr")
        );
        assert!(error(&["--error-log"]).contains("--error-log needs a value"));
        assert!(error(&["--error-log", "e", "--window-ms", "0"]).contains("--window-ms"));
        assert!(error(&["--error-log", "e", "--window-ms", "x"]).contains("--window-ms"));
        assert!(error(&["--error-log", "e", "--error-log-utc-offset", "1"]).contains("offset"));
        assert!(error(&["--error-log", "e", "--bogus"]).contains("unknown option --bogus"));
        assert!(error(&["--error-log", "e", "--upstream-server", "be"]).contains("UPSTREAM=NAME"));
        assert!(error(&["--error-log", "e", "--fail-timeout-ms", "-1"]).contains("fail-timeout"));
        assert!(error(&["e.log"]).contains("unexpected argument e.log"));
        assert!(error(&["--error-log", "e", "--json=yes"]).contains("--json takes no value"));
    }
}
