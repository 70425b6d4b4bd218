//! generation-retry-diagnose: reads an operator's stock nginx access and
//! error logs and tells which 502/504s are the upstream generation race
//! (`no live upstreams` while a `server NAME resolve` name's addresses
//! change, nginx/nginx#1656), and which have other causes.
//!
//! Its neighbours: the nginx module (the repository's root package), which
//! in observe mode writes a `generation_retry: ... cause=` line before each
//! `no live upstreams` (this tool needs none of them: it counts the
//! module's lines and leaves them out); and the test bench `t/`, which
//! scores this tool on lab logs labelled by those `cause=` lines.
//!
//! The binary is a thin wrapper around [`run`]; everything else is here so
//! tests can drive it:
//!
//! - [`cli`]: the command line; [`nginxconf`]: what `nginx -T` says
//!   (logs, formats, upstreams, routes); [`plan`]: the two joined into
//!   what to read and how;
//! - [`logformat`]: the `log_format` string as a line matcher;
//! - [`timefmt`]: nginx's time stamps to milliseconds and back;
//! - [`access`], [`errorlog`]: line parsers;
//! - [`input`]: plain or gzip files (or standard input), line by line;
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
pub mod nginxconf;
pub mod plan;
pub mod report;
pub mod timefmt;
pub mod timeline;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::OsString;
use std::io::Write;
use std::path::Path;

use access::AccessParser;
use classify::{Family, Incident};
use cli::Cli;
use collect::{clip, Collected, Collector, LogKind, Source, KEEP_LINE};
use input::InputError;

/// The outcome of a run: what was kept, the classified incidents, and the
/// text of the lines the report shows.
#[derive(Clone, Debug)]
pub struct Analysis {
    /// What the streaming pass kept.
    pub data: Collected,
    /// Every 502/504, by time.
    pub incidents: Vec<Incident>,
    /// The text of the lines the report shows (see [`Analysis::wanted`]).
    pub evidence: HashMap<Source, String>,
    /// Lines whose request the incidents wait for: the incidents' indices.
    pending: HashMap<Source, Vec<usize>>,
}

/// Classifies what a [`Collector`] gathered.
pub fn analyze(data: Collected) -> Analysis {
    let incidents = classify::classify(&data);
    Analysis {
        data,
        incidents,
        evidence: HashMap::new(),
        pending: HashMap::new(),
    }
}

impl Analysis {
    /// The example the report shows per upstream and family: the index of
    /// its first incident.
    pub fn examples(&self) -> BTreeMap<(&str, Family), usize> {
        let mut out: BTreeMap<(&str, Family), usize> = BTreeMap::new();
        for (i, inc) in self.incidents.iter().enumerate() {
            out.entry((inc.upstream.as_str(), inc.family)).or_insert(i);
        }
        out
    }

    /// The lines to read back, by file: the examples' access, own and
    /// nearby lines, and, with `requests`, every incident's access or
    /// `no live upstreams` line for its request. Give each one to
    /// [`Analysis::supply`].
    pub fn wanted(&mut self, requests: bool) -> BTreeMap<usize, BTreeSet<u64>> {
        let mut sources: Vec<Source> = Vec::new();
        let examples: BTreeSet<usize> = self.examples().into_values().collect();
        for &i in &examples {
            let inc = &self.incidents[i];
            sources.extend(
                inc.access
                    .and_then(|a| self.data.failures.get(a))
                    .map(|f| f.source),
            );
            sources.extend(
                inc.own_errors
                    .iter()
                    .chain(&inc.nearby)
                    .filter_map(|e| self.data.errors.get(*e))
                    .map(|e| e.source),
            );
        }
        let mut pending: HashMap<Source, Vec<usize>> = HashMap::new();
        for (i, inc) in self.incidents.iter().enumerate() {
            if !requests && !examples.contains(&i) {
                continue;
            }
            let source = match (inc.access, inc.no_live) {
                (Some(a), _) => self.data.failures.get(a).map(|f| f.source),
                (None, Some(e)) => self.data.errors.get(e).map(|e| e.source),
                _ => None,
            };
            if let Some(s) = source {
                pending.entry(s).or_default().push(i);
                sources.push(s);
            }
        }
        self.pending = pending;
        let mut out: BTreeMap<usize, BTreeSet<u64>> = BTreeMap::new();
        for s in sources {
            out.entry(s.file()).or_default().insert(s.line());
        }
        out
    }

    /// The text of a line [`Analysis::wanted`] asked for.
    pub fn supply(&mut self, source: Source, text: &str) {
        if let Some(list) = self.pending.remove(&source) {
            let request = self.request_of(source, text);
            for i in list {
                if let Some(inc) = self.incidents.get_mut(i) {
                    inc.request.clone_from(&request);
                }
            }
        }
        self.evidence
            .insert(source, clip(text, KEEP_LINE).to_string());
    }

    fn request_of(&self, source: Source, text: &str) -> String {
        let access = self
            .data
            .files
            .get(source.file())
            .is_some_and(|f| f.kind == LogKind::Access);
        if access {
            let entry = self
                .data
                .parser_of(source.file())
                .and_then(|p| p.parse_line(text));
            entry.and_then(|e| e.request).unwrap_or("").to_string()
        } else {
            errorlog::parse_line(text, 0)
                .and_then(|e| e.request)
                .unwrap_or_default()
        }
    }

    /// The text of a kept line, if read back.
    pub fn text(&self, source: Source) -> Option<&str> {
        self.evidence.get(&source).map(String::as_str)
    }
}

/// Reads the files a command line names (or its `--nginx-conf`) and
/// classifies them.
pub fn analyze_files(cli: &Cli) -> Result<Analysis, Box<dyn std::error::Error>> {
    let plan = plan::plan(cli)?;
    analyze_plan(&plan, cli.json)
}

/// Reads the files of a [`plan::Plan`] and classifies them; `requests`
/// reads back every incident's request line (for `--json`).
pub fn analyze_plan(
    plan: &plan::Plan,
    requests: bool,
) -> Result<Analysis, Box<dyn std::error::Error>> {
    let mut collector = Collector::new(None, plan.options.clone());
    let files: Vec<(&Path, LogKind)> = plan
        .access
        .iter()
        .map(|a| (a.path.as_path(), LogKind::Access))
        .chain(plan.errors.iter().map(|p| (p.as_path(), LogKind::Error)))
        .collect();
    // Standard input redirected from a file can be read back from here.
    let stdin_at = files
        .iter()
        .any(|(p, _)| input::is_stdin(p))
        .then(input::stdin_position)
        .flatten();
    for a in &plan.access {
        let parser = AccessParser::new(&a.format)?;
        let id = collector.start_access_file(&input::display_name(&a.path), parser);
        input::for_each_line(&a.path, |line| collector.line(id, line))?;
    }
    for p in &plan.errors {
        read_file(&mut collector, p, LogKind::Error)?;
    }
    let mut data = collector.finish();
    data.notes.extend(plan.notes.iter().cloned());
    let mut analysis = analyze(data);
    read_back(&mut analysis, &files, requests, stdin_at);
    Ok(analysis)
}

/// Reads the lines [`Analysis::wanted`] asks for from the files, in the
/// order the collector numbered them; each file only up to its last
/// wanted line. Only regular files are read again (a pipe is consumed);
/// standard input (`-`) only when `stdin_at` says where it began (see
/// [`input::stdin_position`]). A file that cannot be read again leaves its
/// lines unshown, it does not fail the run.
pub fn read_back(
    analysis: &mut Analysis,
    files: &[(&Path, LogKind)],
    requests: bool,
    stdin_at: Option<u64>,
) {
    for (file, lines) in analysis.wanted(requests) {
        let (Some((path, _)), Some(last)) = (files.get(file), lines.last().copied()) else {
            continue;
        };
        let mut n = 0u64;
        let each = |line: &[u8]| {
            n += 1;
            if lines.contains(&n) {
                analysis.supply(Source::new(file, n), &String::from_utf8_lossy(line));
            }
            n < last
        };
        if input::is_stdin(path) {
            if let Some(stdin) = stdin_at.and_then(input::stdin_from) {
                let _ = input::for_each_line_of(path, stdin, each);
            }
        } else if std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
            let _ = input::for_each_line_while(path, each);
        }
    }
}

/// Streams one file (`-`: standard input) into the collector.
pub fn read_file(collector: &mut Collector, path: &Path, kind: LogKind) -> Result<(), InputError> {
    let id = collector.start_file(&input::display_name(path), kind);
    input::for_each_line(path, |line| collector.line(id, line))
}

/// Why a run that read its logs still did not do its job: the exit status
/// ([`cli::EXIT_NO_MATCH`] or [`cli::EXIT_NO_ACCESS_LOG`]) and what to say
/// on standard error, naming `format` (the `--log-format`); `None` when
/// the access logs gave entries.
pub fn shortfall(data: &Collected) -> Option<(i32, String)> {
    if data.access_entries > 0 {
        return None;
    }
    let access: Vec<_> = data
        .files
        .iter()
        .filter(|f| f.kind == LogKind::Access)
        .collect();
    if access.is_empty() {
        return Some((
            cli::EXIT_NO_ACCESS_LOG,
            "no access log read: only error logs were given, and without an access log \
             no address change can be seen (races land in `other`); give --access-log"
                .into(),
        ));
    }
    let Some((f, (n, line))) = access
        .iter()
        .find_map(|f| f.first_unparsed.as_ref().map(|u| (f, u)))
    else {
        let names: Vec<&str> = access.iter().map(|f| f.name.as_str()).collect();
        return Some((
            cli::EXIT_NO_ACCESS_LOG,
            format!(
                "no access log read: every access log is empty ({})",
                names.join(", ")
            ),
        ));
    };
    let format = f
        .parser
        .and_then(|i| data.parsers.get(i))
        .map_or("", AccessParser::format);
    let lines: u64 = access.iter().map(|f| f.unparsed).sum();
    Some((
        cli::EXIT_NO_MATCH,
        format!(
            "none of the {lines} access-log lines matched their log_format '{format}': is it the \
             log_format the log was written with? The first line that did not ({} line \
             {n}): {line}",
            f.name
        ),
    ))
}

/// Runs the command line `args` (without the program name), writing the
/// report to `out` and errors to `err`. Returns the exit status:
/// [`cli::EXIT_OK`] 0 done; [`cli::EXIT_UNREADABLE`] 1 a log could not be
/// read; [`cli::EXIT_USAGE`] 2 bad arguments; [`cli::EXIT_NO_MATCH`] 3 no
/// access-log line matched the format; [`cli::EXIT_NO_ACCESS_LOG`] 4 no
/// access log read. With 3 and 4 the report is written too.
pub fn run(args: &[OsString], out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let cli = match cli::parse_args(args) {
        Ok(cli) => cli,
        // A usage error.
        Err(e) if e.use_stderr() => {
            let _ = write!(err, "{e}");
            return e.exit_code();
        }
        // `--help`, `--version`.
        Err(e) => {
            return match write!(out, "{e}").and_then(|()| out.flush()) {
                Ok(()) => e.exit_code(),
                Err(_) => cli::EXIT_UNREADABLE,
            };
        }
    };
    let analysis = match analyze_files(&cli) {
        Ok(a) => a,
        Err(e) => {
            let _ = writeln!(err, "generation-retry-diagnose: {e}");
            return match e.downcast_ref::<plan::PlanError>() {
                Some(p) => p.status,
                None => cli::EXIT_UNREADABLE,
            };
        }
    };
    let text = if cli.json {
        let mut s = report::json(&analysis).to_string();
        s.push('\n');
        s
    } else {
        report::human(&analysis)
    };
    if out
        .write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .is_err()
    {
        return cli::EXIT_UNREADABLE;
    }
    match shortfall(&analysis.data) {
        Some((status, message)) => {
            let _ = writeln!(err, "generation-retry-diagnose: {message}");
            status
        }
        None => cli::EXIT_OK,
    }
}
