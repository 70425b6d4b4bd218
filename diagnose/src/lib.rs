//! generation-retry-diagnose: reads an operator's stock nginx access and
//! error logs and tells which 502/504s are the upstream generation race
//! (`no live upstreams` while a `server NAME resolve` name's addresses
//! change, nginx/nginx#1656), and which have other causes.
//!
//! The binary is a thin wrapper around [`run`]; everything else is here so
//! tests can drive it:
//!
//! - [`logformat`]: the `log_format` string as a line matcher;
//! - [`access`], [`errorlog`]: line parsers;
//! - [`input`]: plain or gzip files, line by line;
//! - [`collect`]: the streaming pass keeping only what classification needs;
//! - [`timeline`]: addresses served per upstream, per second;
//! - [`classify`]: joins and families;
//! - [`report`]: the human report and the JSON.

pub mod access;
pub mod classify;
pub mod cli;
pub mod collect;
pub mod errorlog;
pub mod input;
pub mod logformat;
pub mod report;
pub mod timefmt;
pub mod timeline;

use std::ffi::OsString;
use std::io::Write;
use std::path::Path;

use access::AccessParser;
use classify::Incident;
use cli::{Cli, Command};
use collect::{Collected, Collector, LogKind, Options};
use input::InputError;

/// The outcome of a run: what was kept, and the classified incidents.
#[derive(Clone, Debug)]
pub struct Analysis {
    /// What the streaming pass kept.
    pub data: Collected,
    /// Every 502/504, by time.
    pub incidents: Vec<Incident>,
}

/// Classifies what a [`Collector`] gathered.
pub fn analyze(data: Collected) -> Analysis {
    let incidents = classify::classify(&data);
    Analysis { data, incidents }
}

/// Reads the files a command line names and classifies them.
pub fn analyze_files(cli: &Cli) -> Result<Analysis, Box<dyn std::error::Error>> {
    let parser = match &cli.log_format {
        Some(f) => Some(AccessParser::new(f)?),
        None => None,
    };
    let options = Options {
        window_ms: cli.window_ms,
        error_offset_s: cli.error_offset_s,
    };
    let mut collector = Collector::new(parser, options);
    let files = cli
        .access_logs
        .iter()
        .map(|p| (p, LogKind::Access))
        .chain(cli.error_logs.iter().map(|p| (p, LogKind::Error)));
    for (path, kind) in files {
        read_file(&mut collector, path, kind)?;
    }
    Ok(analyze(collector.finish()))
}

/// Streams one file into the collector.
pub fn read_file(collector: &mut Collector, path: &Path, kind: LogKind) -> Result<(), InputError> {
    let id = collector.start_file(&path.display().to_string(), kind);
    input::for_each_line(path, |line| collector.line(id, line))
}

/// Runs the command line `args` (without the program name), writing the
/// report to `out` and errors to `err`. Returns the exit status: 0 done,
/// 1 a log could not be read, 2 bad arguments.
pub fn run(args: &[OsString], out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let cli = match cli::parse_args(args) {
        Ok(Command::Help) => {
            return match out.write_all(cli::HELP.as_bytes()) {
                Ok(()) => 0,
                Err(_) => 1,
            };
        }
        Ok(Command::Run(cli)) => cli,
        Err(e) => {
            let _ = writeln!(err, "generation-retry-diagnose: {e}");
            return 2;
        }
    };
    let analysis = match analyze_files(&cli) {
        Ok(a) => a,
        Err(e) => {
            let _ = writeln!(err, "generation-retry-diagnose: {e}");
            return 1;
        }
    };
    let text = if cli.json {
        let mut s = report::json(&analysis).to_string();
        s.push('\n');
        s
    } else {
        report::human(&analysis)
    };
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => 0,
        Err(_) => 1,
    }
}
