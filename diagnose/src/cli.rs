//! Command-line arguments, parsed by clap (derive API): `--flag VALUE` or
//! `--flag=VALUE`, repeatable log flags, `-h`/`--help`, `-V`/`--version`.
//! Each value is checked as it is parsed; what concerns several flags is
//! checked after, in [`parse_args`]. Usage errors exit with clap's status,
//! 2.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::error::ErrorKind;
use clap::{ArgAction, CommandFactory, Parser};

use crate::input;
use crate::logformat::LogFormat;
use crate::timefmt;

/// The run completed (whatever it found, even no 502/504 at all).
pub const EXIT_OK: i32 = 0;
/// A log could not be read (or the output not written).
pub const EXIT_UNREADABLE: i32 = 1;
/// nginx's `fail_timeout` default, what `--fail-timeout-ms` defaults to.
pub const DEFAULT_FAIL_TIMEOUT_MS: i64 = 10_000;
/// Bad arguments (clap's own status for usage errors).
pub const EXIT_USAGE: i32 = 2;
/// Access logs were read, but none of their lines matched `--log-format`.
pub const EXIT_NO_MATCH: i32 = 3;
/// No access log was read: only error logs given, or every access log
/// empty.
pub const EXIT_NO_ACCESS_LOG: i32 = 4;

const ABOUT: &str = "\
Tell which 502/504s in stock nginx logs are the upstream generation race \
(`no live upstreams` while a `server ... resolve` name's addresses change, \
nginx/nginx#1656), and which have other causes.";

const USAGE: &str = "generation-retry-diagnose --nginx-conf FILE [OPTIONS]
       generation-retry-diagnose --access-log PATH --log-format FORMAT [--error-log PATH] [OPTIONS]";

const AFTER_HELP: &str = "\
Logs are plain or gzip (told by their magic bytes, also on standard input), \
rotated files in any order. `-` as a PATH reads standard input (at most one \
log may be `-`; a file named `-` is `./-`).

FAMILIES (each 502/504 gets one):
  generation-retry  a retry refused because the peer list changed (2-hop): the race
  generation-first  the first selection refused while the addresses changed: the race
  unavailable       no peer of an unchanged list usable (down, max_fails, max_conns)
  empty             the name stopped resolving (NXDOMAIN): the list was empty
  other             the peer itself failed (the last hop is an address), or no upstream
  unknown           a refusal no evidence decides; its reason names the flag to pass

OUTPUT: the one-line verdict first (\"N of M 502/504s are the generation race \
...\" or \"none of M 502/504s are the generation race.\", with \"; K unknown\" \
when evidence is missing), then per upstream \
and family a count and one example with its evidence, the unparseable lines, \
notes, and the verdict again as the last line. With --json, JSON instead.

EXIT STATUS:
  0  the analysis ran, whatever it found (also no 502/504 at all)
  1  a log could not be read (missing file, truncated or corrupt gzip)
  2  bad arguments
  3  access logs were read, but no line matched their format
  4  no access log was read: only error logs given, every access log empty, or
     none of --nginx-conf's access logs usable (then no report, only the reason)
With 3 and 4 (but for --nginx-conf's) the report is still printed, and stderr
says what is wrong.";

/// The arguments as clap reads them; [`parse_args`] checks them into a
/// [`Cli`].
#[derive(Parser, Debug)]
#[command(
    name = "generation-retry-diagnose",
    version,
    about = ABOUT,
    override_usage = USAGE,
    after_help = AFTER_HELP,
    max_term_width = 100
)]
struct Args {
    /// nginx's configuration: `nginx -T`'s output (`nginx -T | ...
    /// --nginx-conf -`) or its main file, read with its includes. From it:
    /// the access logs with their formats, the error logs, each
    /// upstream's resolving names, addresses and fail_timeout. Flags given
    /// beside it win.
    #[arg(long = "nginx-conf", value_name = "FILE", allow_hyphen_values = true)]
    nginx_conf: Option<PathBuf>,

    /// An access log written with FORMAT; `-` reads standard input.
    /// Repeatable.
    #[arg(
        long = "access-log",
        value_name = "PATH",
        action = ArgAction::Append,
        allow_hyphen_values = true
    )]
    access_logs: Vec<PathBuf>,

    /// An error log in nginx's stock layout; `-` reads standard input.
    /// Repeatable.
    #[arg(
        long = "error-log",
        value_name = "PATH",
        action = ArgAction::Append,
        allow_hyphen_values = true
    )]
    error_logs: Vec<PathBuf>,

    /// The access log's log_format string. It must contain $status,
    /// $upstream_addr and one of $msec, $time_iso8601, $time_local;
    /// $connection, $request, $remote_addr, $request_id help joining lines,
    /// $request_time gives each request's start. Required with
    /// --access-log. Once for every access log, or once per --access-log,
    /// in the same order (logs in different formats).
    #[arg(
        long = "log-format",
        value_name = "FORMAT",
        value_parser = log_format,
        action = ArgAction::Append,
        allow_hyphen_values = true
    )]
    log_formats: Vec<String>,

    /// How far around an incident to look for address changes.
    #[arg(
        long = "window-ms",
        value_name = "N",
        default_value_t = 2_000,
        value_parser = window_ms,
        allow_hyphen_values = true,
        overrides_with = "window_ms"
    )]
    window_ms: i64,

    /// How long a failed or disabled peer stays out of service, as the
    /// upstreams' fail_timeout [default: 10000, or each upstream's from
    /// --nginx-conf].
    #[arg(
        long = "fail-timeout-ms",
        value_name = "N",
        value_parser = fail_timeout_ms,
        allow_hyphen_values = true,
        overrides_with = "fail_timeout_ms"
    )]
    fail_timeout_ms: Option<i64>,

    /// Upstream UPSTREAM has `server NAME resolve`, so resolver errors for
    /// NAME concern it. Repeatable; an upstream named like its server needs
    /// none.
    #[arg(
        long = "upstream-server",
        value_name = "UPSTREAM=NAME",
        action = ArgAction::Append,
        value_parser = upstream_server,
        allow_hyphen_values = true
    )]
    servers: Vec<(String, String)>,

    /// The zone the error log's times are in (they carry none). Default:
    /// learnt from the logs, else +0000.
    #[arg(
        long = "error-log-utc-offset",
        value_name = "+HHMM",
        value_parser = utc_offset,
        allow_hyphen_values = true,
        overrides_with = "error_offset_s"
    )]
    error_offset_s: Option<i32>,

    /// Print JSON instead of the report.
    #[arg(long, overrides_with = "json")]
    json: bool,

    /// Anything else: logs go after --access-log or --error-log.
    #[arg(hide = true)]
    stray: Vec<OsString>,
}

fn log_format(v: &str) -> Result<String, String> {
    LogFormat::parse(v).map_err(|e| e.to_string())?;
    Ok(v.to_string())
}

fn window_ms(v: &str) -> Result<i64, String> {
    match v.parse::<i64>() {
        Ok(n) if (1..=3_600_000).contains(&n) => Ok(n),
        _ => Err("not a number of milliseconds from 1 to 3600000".into()),
    }
}

fn fail_timeout_ms(v: &str) -> Result<i64, String> {
    match v.parse::<i64>() {
        Ok(n) if (0..=86_400_000).contains(&n) => Ok(n),
        _ => Err("not a number of milliseconds from 0 to 86400000".into()),
    }
}

fn upstream_server(v: &str) -> Result<(String, String), String> {
    match v.split_once('=') {
        Some((u, n)) if !u.is_empty() && !n.is_empty() => Ok((u.to_string(), n.to_string())),
        _ => Err("not UPSTREAM=NAME".into()),
    }
}

fn utc_offset(v: &str) -> Result<i32, String> {
    timefmt::parse_utc_offset(v).ok_or_else(|| "not an offset like +0100 or -0530".into())
}

/// A checked command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cli {
    /// `--access-log`, in order (`-` is standard input).
    pub access_logs: Vec<PathBuf>,
    /// `--error-log`, in order (`-` is standard input).
    pub error_logs: Vec<PathBuf>,
    /// `--log-format`, checked: none (with `--nginx-conf`), one for every
    /// access log, or one per `--access-log` in order.
    pub log_formats: Vec<String>,
    /// `--json`.
    pub json: bool,
    /// `--window-ms`.
    pub window_ms: i64,
    /// `--error-log-utc-offset`, in seconds east of UTC.
    pub error_offset_s: Option<i32>,
    /// `--fail-timeout-ms`, if given.
    pub fail_timeout_ms: Option<i64>,
    /// `--nginx-conf`.
    pub nginx_conf: Option<PathBuf>,
    /// `--upstream-server UPSTREAM=NAME`, in order.
    pub servers: Vec<(String, String)>,
}

impl Cli {
    /// The `--log-format` of the `i`th `--access-log` (the one given for
    /// all, or its own), if any; the one for all also applies to the
    /// configuration's access logs (`i`: `None`).
    pub fn log_format(&self, i: Option<usize>) -> Option<&String> {
        match (self.log_formats.as_slice(), i) {
            ([one], _) => Some(one),
            (many, Some(i)) => many.get(i),
            (_, None) => None,
        }
    }
}

/// The clap command: its help, its usage errors.
pub fn command() -> clap::Command {
    Args::command()
}

/// Parses the arguments (without the program name). `-h`, `--help`, `-V`
/// and `--version` come back as an error of kind
/// [`ErrorKind::DisplayHelp`] or [`ErrorKind::DisplayVersion`], whose
/// [`clap::Error::exit_code`] is 0 and whose text goes to standard output;
/// a bad command line is an error with exit code [`EXIT_USAGE`].
pub fn parse_args(args: &[OsString]) -> Result<Cli, clap::Error> {
    let argv =
        std::iter::once(OsString::from("generation-retry-diagnose")).chain(args.iter().cloned());
    let a = Args::try_parse_from(argv)?;
    let error = |kind, msg: String| Err(command().error(kind, msg));
    if let Some(first) = a.stray.first() {
        return error(
            ErrorKind::UnknownArgument,
            format!(
                "unexpected argument {}: give logs with --access-log or --error-log",
                first.to_string_lossy()
            ),
        );
    }
    let conf = a.nginx_conf.is_some();
    if a.access_logs.is_empty() && a.error_logs.is_empty() && !conf {
        return error(
            ErrorKind::MissingRequiredArgument,
            "no logs: give --nginx-conf FILE (`nginx -T` output), or --access-log PATH and/or \
             --error-log PATH"
                .into(),
        );
    }
    let (formats, logs) = (a.log_formats.len(), a.access_logs.len());
    if formats > 1 && formats != logs {
        return error(
            ErrorKind::WrongNumberOfValues,
            format!(
                "{formats} --log-format for {logs} --access-log: give one --log-format for \
                 every access log, or one per --access-log, in the same order"
            ),
        );
    }
    if !a.access_logs.is_empty() && a.log_formats.is_empty() && !conf {
        return error(
            ErrorKind::MissingRequiredArgument,
            "--access-log needs --log-format 'FORMAT': the access log's log_format string, \
             which must contain $status, $upstream_addr and one of $time_iso8601, \
             $time_local, $msec (nginx's `combined` has no $upstream_addr, so it is not \
             enough)"
                .into(),
        );
    }
    let stdin = a
        .access_logs
        .iter()
        .chain(&a.error_logs)
        .chain(&a.nginx_conf)
        .filter(|p| input::is_stdin(p))
        .count();
    if stdin > 1 {
        return error(
            ErrorKind::ArgumentConflict,
            "`-` (standard input) given more than once: at most one of --nginx-conf, \
             --access-log and --error-log may be `-`"
                .into(),
        );
    }
    Ok(Cli {
        access_logs: a.access_logs,
        error_logs: a.error_logs,
        log_formats: a.log_formats,
        json: a.json,
        window_ms: a.window_ms,
        error_offset_s: a.error_offset_s,
        fail_timeout_ms: a.fail_timeout_ms,
        nginx_conf: a.nginx_conf,
        servers: a.servers,
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    fn run(list: &[&str]) -> Cli {
        match parse_args(&args(list)) {
            Ok(c) => c,
            Err(e) => panic!("{list:?}: {e}"),
        }
    }

    fn error(list: &[&str]) -> String {
        match parse_args(&args(list)) {
            Err(e) => {
                assert_eq!(e.exit_code(), EXIT_USAGE, "{list:?}: {e}");
                e.to_string()
            }
            Ok(c) => panic!("{list:?} should fail: {c:?}"),
        }
    }

    #[test]
    fn command_is_well_formed() {
        command().debug_assert();
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
        assert_eq!(c.fail_timeout_ms, Some(30_000));
        assert_eq!(
            c.servers,
            [("be".to_string(), "be.example.com".to_string())]
        );
        assert!(c.json);
        let d = run(&["--error-log", "e.log"]);
        assert_eq!(
            (d.window_ms, d.json, d.log_format(None)),
            (2_000, false, None)
        );
        assert_eq!((d.error_offset_s, d.fail_timeout_ms), (None, None));
        let conf = run(&["--nginx-conf", "-", "--access-log", "a.log"]);
        assert_eq!(conf.nginx_conf, Some(PathBuf::from("-")));
        assert_eq!(conf.log_format(Some(0)), None);
        // A negative offset is a value, not a flag; a later value wins.
        let n = run(&[
            "--error-log",
            "e",
            "--error-log-utc-offset",
            "-05:30",
            "--window-ms",
            "1",
            "--window-ms",
            "700",
            "--json",
            "--json",
        ]);
        assert_eq!((n.error_offset_s, n.window_ms), (Some(-19_800), 700));
        let s = run(&[
            "--access-log",
            "-",
            "--log-format",
            "$msec $status $upstream_addr",
        ]);
        assert!(input::is_stdin(&s.access_logs[0]));
        assert!(!input::is_stdin(Path::new("./-")));
    }

    #[test]
    fn help_and_version() {
        for flag in ["-h", "--help"] {
            let e = parse_args(&args(&[flag])).expect_err("help is shown, not run");
            assert_eq!((e.kind(), e.exit_code()), (ErrorKind::DisplayHelp, 0));
            let text = e.to_string();
            for wanted in [
                "--access-log <PATH>",
                "--error-log-utc-offset <+HHMM>",
                "[default: 2000]",
                "generation-first",
                "EXIT STATUS",
                "3  access logs were read, but no line matched their format",
                "-V, --version",
            ] {
                assert!(text.contains(wanted), "{wanted}: {text}");
            }
            assert!(text.lines().all(|l| l.len() <= 100), "{text}");
        }
        let e = parse_args(&args(&["--version"])).expect_err("version is shown");
        assert_eq!((e.kind(), e.exit_code()), (ErrorKind::DisplayVersion, 0));
        assert_eq!(
            e.to_string(),
            format!("generation-retry-diagnose {}\n", env!("CARGO_PKG_VERSION"))
        );
        let e = parse_args(&args(&["-V"])).expect_err("version is shown");
        assert_eq!(e.kind(), ErrorKind::DisplayVersion);
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
        assert!(error(&["--access-log", "a", "--log-format", "$msec"])
            .contains("lacks $status, $upstream_addr"));
        // Two formats: one per access log, in order; not for one log.
        let (f1, f2) = (
            "$msec $status $upstream_addr",
            "$time_local $status $upstream_addr",
        );
        let two = ["--access-log", "a", "--log-format", f1, "--log-format", f2];
        assert!(error(&two).contains("2 --log-format for 1 --access-log"));
        let pair = run(&[&two[..], &["--access-log", "b"]].concat());
        assert_eq!(pair.log_format(Some(1)).map(String::as_str), Some(f2));
        assert_eq!(pair.log_format(None), None, "no one format for every log");
        assert!(error(&["--error-log"]).contains("--error-log <PATH>"));
        for bad in ["0", "x", "-5", "3600001"] {
            let e = error(&["--error-log", "e", "--window-ms", bad]);
            assert!(
                e.contains("--window-ms") && e.contains("from 1 to 3600000"),
                "{e}"
            );
        }
        assert!(error(&["--error-log", "e", "--error-log-utc-offset", "1"]).contains("offset"));
        assert!(error(&["--error-log", "e", "--bogus"]).contains("--bogus"));
        assert!(error(&["--error-log", "e", "--upstream-server", "be"]).contains("UPSTREAM=NAME"));
        assert!(error(&["--error-log", "e", "--fail-timeout-ms", "-1"]).contains("fail-timeout"));
        assert!(error(&["e.log"]).contains("unexpected argument e.log"));
        assert!(error(&["--error-log", "e", "--json=yes"]).contains("--json"));
        let two = error(&[
            "--access-log",
            "-",
            "--error-log",
            "-",
            "--log-format",
            "$msec $status $upstream_addr",
        ]);
        assert!(two.contains("at most one"), "{two}");
        assert!(error(&["--error-log", "-", "--error-log", "-"]).contains("standard input"));
        assert!(error(&["--nginx-conf", "-", "--error-log", "-"]).contains("at most one"));
    }
}
