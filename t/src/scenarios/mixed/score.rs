//! Scoring `generation-retry-diagnose` on a mixed run's logs: each http
//! and stream access log in turn, with the module's lines as the truth.

use std::ffi::OsString;

use super::stream::STREAM_LOGS;
use super::{Run, ACCESS_LOGS};
use crate::scenarios::labels::{self, Score, Truth, Truths};
use crate::scoring::accesslog::Entry;
/// Scores the tool on `run`'s http access log number `log` (of
/// [`ACCESS_LOGS`]) and the error log without the module's lines, told
/// nothing but the configuration: `nginx -T` as nginx printed it, with the
/// other access logs (http and stream) taken out and the logs' paths moved
/// to where the scored copies are. The truth is read from the harness's
/// own log (the same requests) and the module's lines.
pub fn score(run: &Run, log: usize, name: &str) -> Score {
    let truths = Truths::http(&run.access[0], &run.error);
    score_file(run, ACCESS_LOGS[log].0, &run.access[log], truths, name)
}

/// The same for the stream access log number `log` (of [`STREAM_LOGS`]):
/// the truth is each session's `$connection` in the first stream log and
/// the module's stream lines of that `*N`.
pub fn score_stream(run: &Run, log: usize, name: &str) -> Score {
    let entries = run.stream[0].lines().filter_map(stream_entry).collect();
    let truths = Truths::stream(entries, &run.error);
    score_file(run, STREAM_LOGS[log].0, &run.stream[log], truths, name)
}

/// Writes `text` as the one access log `file` the configuration keeps,
/// and scores the tool on it (see [`score`]).
fn score_file(run: &Run, file: &str, text: &str, truths: Truths, name: &str) -> Score {
    let dir = labels::scratch_dir(name);
    std::fs::write(dir.join(file), text).expect("write the access log");
    let logs = format!("{}/logs/", run.prefix.display());
    let conf: String = run
        .conf_dump
        .lines()
        .filter(|l| {
            !l.trim_start().starts_with("access_log ") || l.contains(&format!("{logs}{file} "))
        })
        .map(|l| format!("{}\n", l.replace(&logs, &format!("{}/", dir.display()))))
        .collect();
    let conf_file = dir.join("nginx-T.txt");
    std::fs::write(&conf_file, conf).expect("write nginx -T");
    let args: Vec<OsString> = vec!["--nginx-conf".into(), conf_file.into(), "--json".into()];
    labels::score_in(&dir, &args, name, truths, &run.error, Truth::ModuleLines)
}

/// One stream session of [`STREAM_LOGS`]' first format (`$msec
/// $connection $status "$upstream_addr" $session_time $server_port`) as an
/// [`Entry`] named `*N`.
pub(super) fn stream_entry(line: &str) -> Option<Entry> {
    let mut quoted = line.split('"');
    let head = quoted.next()?;
    let upstream_addr = quoted.next()?;
    let mut words = head.split_whitespace();
    let msec = words.next()?.parse().ok()?;
    let connection: u64 = words.next()?.parse().ok()?;
    let status = words.next()?.parse().ok()?;
    Some(Entry {
        msec,
        status,
        hops: crate::scoring::accesslog::parse_upstream_addr(upstream_addr),
        method: String::new(),
        path: format!("*{connection}"),
        request_time: 0.0,
        resnapshots: None,
    })
}
