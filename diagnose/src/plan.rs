//! What to read, and how: the command line, completed by nginx's own
//! configuration (`--nginx-conf`). With the configuration, the access logs
//! and their formats, the error logs, each upstream's resolving names,
//! static addresses and `fail_timeout` come from it; a flag given on the
//! command line wins over it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use crate::access::{self, AccessParser};
use crate::cli::{self, Cli};
use crate::collect::{Options, Route};
use crate::input;
use crate::logformat::{FormatError, LogFormat};
use crate::nginxconf::{AccessLog, Module, NginxConf};

/// One access log and the format it is written with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccessFile {
    pub path: PathBuf,
    pub format: String,
}

/// The files to read and the options to read them with.
#[derive(Clone, Debug)]
pub struct Plan {
    pub access: Vec<AccessFile>,
    pub errors: Vec<PathBuf>,
    pub options: Options,
    /// What the configuration offered that cannot be used, and how to fix
    /// it (a format without `$upstream_addr`, a log that is not there).
    pub notes: Vec<String>,
}

/// Why no plan could be made: the exit status and the message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanError {
    pub status: i32,
    pub message: String,
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for PlanError {}

fn usage(message: String) -> PlanError {
    PlanError {
        status: cli::EXIT_USAGE,
        message,
    }
}

/// The format an operator can log with so that the diagnosis has all it
/// reads, for a `module`'s access log written so far with `format`: the
/// same format, with what it lacks added at its end (`$msec` for
/// milliseconds, `$request_time` or `$session_time` for each request's
/// start, `$connection` to join error lines, `$status`, `$upstream_addr`).
pub fn suggested_format(module: Module, format: &str) -> String {
    let mut f = format.trim().to_string();
    let have = LogFormat::tokenize(&f);
    let took = match module {
        Module::Http => "request_time",
        Module::Stream => "session_time",
    };
    for v in ["msec", "status", took, "connection", "upstream_addr"] {
        if !have.has(v) {
            f.push_str(if v == "upstream_addr" {
                " \"$upstream_addr\""
            } else {
                " $"
            });
            if v != "upstream_addr" {
                f.push_str(v);
            }
        }
    }
    f
}

/// The line to put in nginx's configuration for an access log whose
/// format lacks what the diagnosis needs.
fn fix_for(log: &AccessLog, format: &str, e: &FormatError) -> String {
    let block = match log.module {
        Module::Http => "http",
        Module::Stream => "stream",
    };
    format!(
        "access log {} (log_format {}): {e}. Log what the diagnosis needs with, in the {block} \
         block:\n    log_format upstreams '{}';\n    access_log {} upstreams;",
        log.path.display(),
        log.format_name,
        suggested_format(log.module, format).replace('\'', "\\'"),
        log.path.display()
    )
}

/// A static `server` address as `$upstream_addr` logs it: with its port
/// (http's default 80 added), or `unix:...`; `None` for a host name
/// (resolved once at start, to addresses the configuration does not show).
fn logged_address(module: Module, address: &str) -> Option<String> {
    if address.starts_with("unix:") || access::is_address(address) {
        return Some(address.to_string());
    }
    let bare = address.trim_start_matches('[').trim_end_matches(']');
    match (module, bare.parse::<std::net::IpAddr>()) {
        (Module::Http, Ok(std::net::IpAddr::V4(ip))) => Some(format!("{ip}:80")),
        (Module::Http, Ok(std::net::IpAddr::V6(ip))) => Some(format!("[{ip}]:80")),
        _ => None,
    }
}

/// The note for a configured log that is not on this machine.
fn missing_log(kind: &str, path: &Path) -> String {
    if path.is_relative() {
        format!(
            "{kind} log {} of the configuration is relative to nginx's prefix (`nginx -V` shows \
             --prefix): give --{kind}-log with its full path",
            path.display()
        )
    } else {
        format!(
            "{kind} log {} of the configuration is not here (is this the machine nginx runs \
             on?): give --{kind}-log",
            path.display()
        )
    }
}

/// What `logs` holds for the log `given` on the command line: the same
/// path, or a rotation of it (`access.log.1`, `access.log.2.gz`), also
/// when one is spelt relative and the other absolute.
fn configured<'a>(logs: &'a BTreeMap<PathBuf, String>, given: &Path) -> Option<&'a String> {
    let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let given = absolute(given);
    let given = given.to_string_lossy();
    logs.iter().find_map(|(p, v)| {
        let p = absolute(p);
        let p = p.to_string_lossy();
        let rotated = given
            .strip_prefix(p.as_ref())
            .and_then(|rest| rest.strip_prefix('.'))
            .and_then(|rest| rest.split('.').next())
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        (given == p || rotated).then_some(v)
    })
}

/// Whether a configured log path names a file this tool can read (not
/// `syslog:`, `memory:`, `stderr`, nor a path built from variables).
fn is_file_path(p: &Path) -> bool {
    let s = p.to_string_lossy();
    !(s.starts_with("syslog:") || s.starts_with("memory:") || s == "stderr" || s.contains('$'))
}

/// Makes the plan from the command line, reading `--nginx-conf` (from
/// standard input when `-`).
pub fn plan(cli: &Cli) -> Result<Plan, Box<dyn std::error::Error>> {
    let conf = match &cli.nginx_conf {
        Some(p) => {
            let mut text = Vec::new();
            input::for_each_line(p, |line| {
                text.extend_from_slice(line);
                text.push(b'\n');
            })?;
            let text = String::from_utf8_lossy(&text);
            if text.trim().is_empty() {
                return Err(Box::new(usage(format!(
                    "--nginx-conf {}: empty: no configuration was read (did `nginx -T` fail? \
                     it needs the rights to read every file)",
                    input::display_name(p)
                ))));
            }
            let dir = p.parent().unwrap_or(Path::new("."));
            let conf = NginxConf::parse(&text, dir)
                .map_err(|e| usage(format!("--nginx-conf {}: {e}", input::display_name(p))))?;
            Some(conf)
        }
        None => None,
    };
    Ok(plan_with(cli, conf.as_ref())?)
}

/// [`plan`] with the configuration already read.
pub fn plan_with(cli: &Cli, conf: Option<&NginxConf>) -> Result<Plan, PlanError> {
    let mut notes = Vec::new();
    let mut options = Options {
        window_ms: cli.window_ms,
        error_offset_s: cli.error_offset_s,
        fail_timeout_ms: cli.fail_timeout_ms.unwrap_or(cli::DEFAULT_FAIL_TIMEOUT_MS),
        servers: cli.servers.clone(),
        ..Options::default()
    };
    let mut access = Vec::new();
    let mut errors = cli.error_logs.clone();
    let Some(conf) = conf else {
        for (i, p) in cli.access_logs.iter().enumerate() {
            access.push(AccessFile {
                path: p.clone(),
                // parse_args saw to it.
                format: cli.log_format(Some(i)).cloned().unwrap_or_default(),
            });
        }
        return Ok(Plan {
            access,
            errors,
            options,
            notes,
        });
    };
    options.configured = true;
    for u in &conf.upstreams {
        for s in &u.servers {
            if s.resolve {
                options
                    .conf_servers
                    .push((u.name.clone(), s.host().to_string()));
            } else if let Some(addr) = logged_address(u.module, &s.address) {
                options.peers.push((u.name.clone(), addr));
            }
        }
        // An http and a stream upstream may share a name: such a name
        // gets none of these (the logs do not say which one failed).
        let shared = conf.upstreams.iter().filter(|o| o.name == u.name).count() > 1;
        if !shared {
            // The fewest of the servers that count failures (0 only when
            // none does).
            let counting = u.servers.iter().map(|s| s.max_fails).filter(|n| *n > 0);
            if let Some(fewest) = counting.min().or(u.servers.first().map(|_| 0)) {
                options.max_fails.insert(u.name.clone(), fewest);
            }
            if !u.zone || (!u.servers.is_empty() && u.servers.iter().all(|s| !s.resolve)) {
                options.static_upstreams.insert(u.name.clone());
            }
            if u.servers.iter().any(|s| s.backup) {
                options.with_backup.insert(u.name.clone());
                // Its primaries, where every one is static (a resolving
                // primary's addresses are not known from the configuration).
                let primaries: Option<BTreeSet<String>> = u
                    .servers
                    .iter()
                    .filter(|s| !s.backup)
                    .map(|s| {
                        (!s.resolve)
                            .then(|| logged_address(u.module, &s.address))
                            .flatten()
                    })
                    .collect();
                if let Some(p) = primaries.filter(|p| !p.is_empty()) {
                    options.primary_peers.insert(u.name.clone(), p);
                }
            }
        }
        let longest = u.servers.iter().map(|s| s.fail_timeout_ms).max();
        if let (None, Some(ms)) = (cli.fail_timeout_ms, longest) {
            options
                .fail_timeouts
                .insert(u.name.clone(), i64::try_from(ms).unwrap_or(i64::MAX));
        }
    }
    // Stream ports to the stream upstream their block proxies to; a port
    // two blocks disagree on tells nothing.
    let mut disagreed = Vec::new();
    for (port, upstream) in &conf.stream_routes {
        if conf.upstream(Module::Stream, upstream).is_none() {
            continue;
        }
        match options.stream_routes.get(port) {
            Some(u) if u != upstream => disagreed.push(*port),
            _ => {
                options.stream_routes.insert(*port, upstream.clone());
            }
        }
    }
    for port in disagreed {
        options.stream_routes.remove(&port);
    }
    options.conf_servers.sort();
    options.conf_servers.dedup();
    let mut routes = vec![Vec::new(); conf.http_servers];
    for l in &conf.locations {
        let upstream = l
            .proxy_pass
            .as_ref()
            .filter(|u| conf.upstream(Module::Http, u).is_some())
            .cloned();
        if let Some(server) = routes.get_mut(l.server) {
            server.push(Route {
                modifier: l.modifier.clone(),
                path: l.path.clone(),
                upstream,
            });
        }
    }
    options.routes = routes;
    // The configured access logs, and whether their formats will do
    // (`--log-format` given beside the configuration is taken for all).
    let mut usable: BTreeMap<PathBuf, String> = BTreeMap::new();
    let mut unusable: BTreeMap<PathBuf, String> = BTreeMap::new();
    for log in &conf.access_logs {
        if !is_file_path(&log.path) {
            notes.push(format!(
                "access log {} is not a file this tool can read; left out",
                log.path.display()
            ));
            continue;
        }
        let Some(format) = cli.log_format(None).or(log.format.as_ref()) else {
            notes.push(format!(
                "access log {}: log_format {} is not in the configuration; left out (give \
                 --log-format)",
                log.path.display(),
                log.format_name
            ));
            continue;
        };
        match AccessParser::new(format) {
            Ok(_) => {
                usable.insert(log.path.clone(), format.clone());
            }
            Err(e) => {
                let fix = fix_for(log, format, &e);
                unusable.insert(log.path.clone(), fix.clone());
                notes.push(fix);
            }
        }
    }
    if cli.access_logs.is_empty() {
        for (path, format) in &usable {
            if path.is_file() {
                access.push(AccessFile {
                    path: path.clone(),
                    format: format.clone(),
                });
            } else {
                notes.push(missing_log("access", path));
            }
        }
    } else {
        let formats: Vec<&String> = {
            let mut f: Vec<&String> = usable.values().collect();
            f.sort();
            f.dedup();
            f
        };
        for (i, p) in cli.access_logs.iter().enumerate() {
            let format = match cli.log_format(Some(i)) {
                Some(f) => f.clone(),
                None => match configured(&usable, p) {
                    Some(f) => f.clone(),
                    None => {
                        if let Some(fix) = configured(&unusable, p) {
                            return Err(usage(format!("--access-log {}: {fix}", p.display())));
                        }
                        if formats.len() != 1 {
                            return Err(usage(format!(
                                "--access-log {}: not an access_log of the configuration, whose \
                                 usable access logs have {} formats: give --log-format",
                                p.display(),
                                formats.len()
                            )));
                        }
                        formats[0].clone()
                    }
                },
            };
            access.push(AccessFile {
                path: p.clone(),
                format,
            });
        }
    }
    if errors.is_empty() {
        for p in conf.error_logs.iter().filter(|p| is_file_path(p)) {
            if p.is_file() {
                errors.push(p.clone());
            } else {
                notes.push(missing_log("error", p));
            }
        }
    }
    if access.is_empty() {
        let mut message = String::from(
            "no access log to read: the configuration's access logs cannot be used, and none \
             was given with --access-log",
        );
        for n in &notes {
            message.push_str("\n  ");
            message.push_str(n);
        }
        return Err(PlanError {
            status: cli::EXIT_NO_ACCESS_LOG,
            message,
        });
    }
    Ok(Plan {
        access,
        errors,
        options,
        notes,
    })
}
