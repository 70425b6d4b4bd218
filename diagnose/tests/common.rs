//! Builders for small synthetic logs whose timestamps the tests control,
//! and a scratch directory for file-based tests.

#![allow(dead_code)]

use std::path::PathBuf;

use generation_retry_diagnose::access::AccessParser;
use generation_retry_diagnose::classify::Family;
use generation_retry_diagnose::collect::{Collector, LogKind, Options, Source};
use generation_retry_diagnose::{analyze, Analysis};

/// 2026-12-01T07:00:00Z in milliseconds.
pub const T0: i64 = 1_796_108_400_000;

/// An access format with everything the joins can use.
pub const FORMAT: &str =
    r#"$remote_addr - - [$time_local] "$request" $status "$upstream_addr" $msec $connection"#;

/// The same without `$connection`.
pub const FORMAT_NO_CONN: &str =
    r#"$remote_addr - - [$time_local] "$request" $status "$upstream_addr" $msec"#;

/// Only what is required.
pub const FORMAT_BARE: &str = r#"$msec $status "$upstream_addr""#;

/// Seconds only: `$time_local` is the only time.
pub const FORMAT_LOCAL: &str =
    r#"$remote_addr - - [$time_local] "$request" $status "$upstream_addr" $connection"#;

/// `$msec` as the only time, with `$connection`.
pub const FORMAT_MSEC: &str = r#"$msec $status "$upstream_addr" $connection"#;

/// `$upstream_addr` without quotes around it.
pub const FORMAT_UNQUOTED: &str = "$msec $status $upstream_addr $connection";

pub const A: &str = "10.0.0.1:80";
pub const B: &str = "10.0.0.2:80";

/// `ms` after [`T0`] as `$msec`.
pub fn msec(ms: i64) -> String {
    let t = T0 + ms;
    format!("{}.{:03}", t / 1_000, t % 1_000)
}

/// `ms` after [`T0`] (under a minute) as the error log's time.
pub fn error_time(ms: i64) -> String {
    assert!((0..60_000).contains(&ms), "helper covers one minute");
    format!("2026/12/01 07:00:{:02}", ms / 1_000)
}

/// `ms` after [`T0`] (under a minute) as `$time_local`.
pub fn time_local(ms: i64) -> String {
    assert!((0..60_000).contains(&ms), "helper covers one minute");
    format!("01/Dec/2026:07:00:{:02} +0000", ms / 1_000)
}

/// Two logs built line by line.
#[derive(Default)]
pub struct Logs {
    pub access: Vec<String>,
    pub error: Vec<String>,
}

impl Logs {
    pub fn new() -> Logs {
        Logs::default()
    }

    /// An access line in [`FORMAT`] (or the others: see [`Logs::render`]).
    pub fn access(&mut self, ms: i64, status: u16, upstream_addr: &str, path: &str, conn: u64) {
        self.access.push(format!(
            "10.9.9.9 - - [{}] \"GET {path} HTTP/1.1\" {status} \"{upstream_addr}\" {} {conn}",
            time_local(ms),
            msec(ms)
        ));
    }

    /// A 200 served by `addr`.
    pub fn ok(&mut self, ms: i64, addr: &str) {
        self.access(ms, 200, addr, "/ok", 1_000 + ms as u64);
    }

    /// An error line with http context.
    pub fn error(
        &mut self,
        ms: i64,
        level: &str,
        conn: u64,
        message: &str,
        path: &str,
        upstream: &str,
    ) {
        self.error.push(format!(
            "{} [{level}] 11#11: *{conn} {message}, client: 10.9.9.9, server: , request: \"GET {path} HTTP/1.1\", upstream: \"http://{upstream}{path}\", host: \"example.com\"",
            error_time(ms)
        ));
    }

    /// `no live upstreams` for upstream `be`.
    pub fn no_live(&mut self, ms: i64, conn: u64, path: &str) {
        self.error(
            ms,
            "error",
            conn,
            "no live upstreams while connecting to upstream",
            path,
            "be",
        );
    }

    /// A context-free error line.
    pub fn raw_error(&mut self, ms: i64, level: &str, message: &str) {
        self.error
            .push(format!("{} [{level}] 11#11: {message}", error_time(ms)));
    }

    /// nginx's resolver line for an NXDOMAIN of `name`, at `error`.
    pub fn nxdomain(&mut self, ms: i64, name: &str) {
        self.raw_error(
            ms,
            "error",
            &format!("{name} could not be resolved (3: Host not found)"),
        );
    }

    /// The access lines rendered in another format: [`FORMAT_NO_CONN`]
    /// drops the trailing `$connection`, [`FORMAT_BARE`] keeps
    /// `$msec $status "$upstream_addr"`.
    pub fn render(&self, format: &str) -> Vec<String> {
        self.access
            .iter()
            .map(|l| {
                let (rest, conn) = l.rsplit_once(' ').expect("built line");
                match format {
                    FORMAT => l.clone(),
                    FORMAT_NO_CONN => rest.to_string(),
                    FORMAT_BARE => {
                        let (head, ms) = rest.rsplit_once(' ').expect("built line");
                        let q = head.find("\" ").expect("request end") + 2;
                        let fields = &head[q..];
                        format!("{ms} {fields}")
                    }
                    FORMAT_LOCAL => {
                        // `$remote_addr - - [$time_local] "$request" $status "$upstream_addr" $connection`
                        let (head, _ms) = rest.rsplit_once(' ').expect("built line");
                        format!("{head} {conn}")
                    }
                    FORMAT_MSEC => {
                        let (head, ms) = rest.rsplit_once(' ').expect("built line");
                        let q = head.find("\" ").expect("request end") + 2;
                        format!("{ms} {} {conn}", &head[q..])
                    }
                    FORMAT_UNQUOTED => {
                        // `$msec $status $upstream_addr $connection`, no quotes
                        let (head, ms) = rest.rsplit_once(' ').expect("built line");
                        let q = head.find("\" ").expect("request end") + 2;
                        let fields = head[q..].replace('"', "");
                        format!("{ms} {fields} {conn}")
                    }
                    other => panic!("no rendering for {other}"),
                }
            })
            .collect()
    }

    /// Runs the collector and classifier over both logs, then reads back
    /// the lines the report shows, as the CLI does from files.
    pub fn analyze_with(&self, format: &str, window_ms: i64) -> Analysis {
        self.analyze_opts(
            format,
            Options {
                window_ms,
                error_offset_s: Some(0),
                // The configuration's: no `down` server hides beside the
                // names (the logs alone cannot say `empty`).
                configured: true,
                ..Options::default()
            },
        )
    }

    /// [`Logs::analyze_with`] with any options.
    pub fn analyze_opts(&self, format: &str, options: Options) -> Analysis {
        let parser = AccessParser::new(format).expect("valid format");
        let mut c = Collector::new(Some(parser), options);
        let access = self.render(format);
        let a = c.start_file("access.log", LogKind::Access);
        for l in &access {
            c.line(a, l.as_bytes());
        }
        let e = c.start_file("error.log", LogKind::Error);
        for l in &self.error {
            c.line(e, l.as_bytes());
        }
        let mut analysis = analyze(c.finish());
        for f in &analysis.data.files {
            assert_eq!(f.unparsed, 0, "{}: {:?}", f.name, f.first_unparsed);
        }
        for (file, lines) in analysis.wanted(true) {
            let text = if file == a { &access } else { &self.error };
            for n in lines {
                let line = &text[n as usize - 1];
                analysis.supply(Source::new(file, n), line);
            }
        }
        analysis
    }

    pub fn analyze(&self) -> Analysis {
        self.analyze_with(FORMAT, 2_000)
    }
}

/// A fresh scratch directory for one test.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "generation-retry-diagnose-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// The family and reason of each incident of the access lines `access`
/// (in `format`) and the error lines `errors` (UTC), by `$upstream_addr`,
/// with what the configuration would give in `options`.
pub fn families_of(
    format: &str,
    access: &[String],
    errors: &[String],
    options: Options,
) -> Vec<(String, Family, String)> {
    let mut c = Collector::new(
        Some(AccessParser::new(format).expect("format")),
        Options {
            error_offset_s: Some(0),
            ..options
        },
    );
    let a = c.start_file("access.log", LogKind::Access);
    for l in access {
        c.line(a, l.as_bytes());
    }
    let e = c.start_file("error.log", LogKind::Error);
    for l in errors {
        c.line(e, l.as_bytes());
    }
    analyze(c.finish())
        .incidents
        .iter()
        .map(|i| (i.upstream_addr.clone(), i.family, i.reason.clone()))
        .collect()
}
