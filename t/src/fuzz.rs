//! Generated-input checks of every parser and renderer that meets input
//! from outside (issue 28 item 3), on stable Rust with no fuzzing crate: a
//! seeded generator ([`crate::rng::Rng`]) builds inputs from each target's
//! dictionary of meaningful pieces, random bytes and awkward characters,
//! and each input is checked against an independent statement of what the
//! answer must be, not only for panics.
//!
//! Every target takes its input as bytes (decoded the same way each time),
//! so a failing input is saved as a file and replayed: `t/fuzz-corpus/
//! TARGET/` holds inputs kept from past failures and hand-picked edges, run
//! before the generated ones on every run. `cargo xtask fuzz` runs the
//! documented count (10^6 per target); `t/tests/fuzz.rs` a shorter one in
//! CI.
//!
//! Targets:
//! - `directive`: `generation_retry_resnapshot`'s arguments
//!   ([`generation_retry_core::directive`]), against a model of the grammar;
//! - `status_query`: the status endpoint's query string (`wants_json`),
//!   against a second reading of "an argument `format=json`";
//! - `prometheus`: the text rendering over arbitrary upstream names, read
//!   back by a strict parser of the exposition format: every line valid,
//!   every label value unescaped back to the name, every series present;
//! - `json`: the JSON rendering over the same names, read back by
//!   serde_json, names and modes compared;
//! - `error_line`, `access_line`: diagnose's readers of nginx's error log
//!   and of an access log in the harness's format: arbitrary lines give no
//!   panic, and well-formed lines with random values give those values
//!   back.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::Instant;

use generation_retry_core::directive::{parse_resnapshot, warning, ArgError, DIRECTIVE, MAX_MAX};
use generation_retry_core::metrics::{
    render_json, render_prometheus, wants_json, Counters, Protocol, UpstreamStats, FAMILIES,
};
use generation_retry_diagnose::access::AccessParser;
use generation_retry_diagnose::errorlog;

use crate::rng::Rng;

/// A target: how it builds an input, and what must hold of it.
pub struct Target {
    pub name: &'static str,
    generate: fn(&mut Gen) -> Vec<u8>,
    /// `Ok(true)` when the input's answer was compared with what it must
    /// be, `Ok(false)` when only its not failing was checked.
    check: fn(&[u8]) -> Result<bool, String>,
}

/// Every target, in the order runs report them.
pub const TARGETS: &[Target] = &[
    Target {
        name: "directive",
        generate: gen_directive,
        check: check_directive,
    },
    Target {
        name: "status_query",
        generate: gen_query,
        check: check_query,
    },
    Target {
        name: "prometheus",
        generate: gen_names,
        check: check_prometheus,
    },
    Target {
        name: "json",
        generate: gen_names,
        check: check_json,
    },
    Target {
        name: "error_line",
        generate: gen_error_line,
        check: check_error_line,
    },
    Target {
        name: "access_line",
        generate: gen_access_line,
        check: check_access_line,
    },
];

/// What one target's run did.
#[derive(Debug)]
pub struct Report {
    pub target: &'static str,
    /// Corpus inputs replayed.
    pub replayed: usize,
    /// Generated inputs checked.
    pub generated: usize,
    /// Inputs (replayed or generated) whose answer was compared with the
    /// expected one, not only run.
    pub compared: usize,
    pub seconds: f64,
    /// Failing inputs: where each was saved, and why it failed.
    pub failures: Vec<(PathBuf, String)>,
}

impl Report {
    pub fn per_second(&self) -> f64 {
        (self.replayed + self.generated) as f64 / self.seconds.max(1e-9)
    }
}

/// Runs `target`: its corpus (`corpus/NAME/*`), then `n` generated inputs
/// from `seed`. Failing inputs are saved in `failures/NAME-INDEX.bin` (at
/// most 10 per target, so one bug does not fill a disk).
pub fn run(target: &Target, corpus: &Path, failures: &Path, n: usize, seed: u64) -> Report {
    let started = Instant::now();
    let mut report = Report {
        target: target.name,
        replayed: 0,
        generated: 0,
        compared: 0,
        seconds: 0.0,
        failures: Vec::new(),
    };
    let fail = |input: &[u8], why: String, index: String, report: &mut Report| {
        if report.failures.len() >= 10 {
            return;
        }
        let _ = std::fs::create_dir_all(failures);
        let path = failures.join(format!("{}-{index}.bin", target.name));
        let _ = std::fs::write(&path, input);
        report.failures.push((path, why));
    };
    let mut kept: Vec<PathBuf> = std::fs::read_dir(corpus.join(target.name))
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    kept.sort();
    for (i, path) in kept.iter().enumerate() {
        let input = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        match checked(target, &input) {
            Ok(compared) => report.compared += usize::from(compared),
            Err(why) => fail(
                &input,
                format!("{}: {why}", path.display()),
                format!("kept-{i}"),
                &mut report,
            ),
        }
        report.replayed += 1;
    }
    let mut g = Gen(Rng::new(seed));
    for i in 0..n {
        let input = (target.generate)(&mut g);
        match checked(target, &input) {
            Ok(compared) => report.compared += usize::from(compared),
            Err(why) => fail(&input, why, format!("seed-{seed:x}-{i}"), &mut report),
        }
        report.generated += 1;
    }
    report.seconds = started.elapsed().as_secs_f64();
    report
}

thread_local! {
    /// The input being checked, and its target's name: what the panic hook
    /// of [`save_inputs_that_abort`] saves.
    static CURRENT: std::cell::RefCell<(&'static str, Vec<u8>)> =
        const { std::cell::RefCell::new(("", Vec::new())) };
}

/// For a build where a panic aborts (the release profile has
/// `panic = "abort"`, so `catch_unwind` catches nothing): a panic hook
/// that saves the input being checked as `failures/TARGET-abort.bin`
/// before the process ends, and says where.
pub fn save_inputs_that_abort(failures: &Path) {
    let failures = failures.to_path_buf();
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        CURRENT.with(|c| {
            if let Ok(c) = c.try_borrow() {
                let _ = std::fs::create_dir_all(&failures);
                let path = failures.join(format!("{}-abort.bin", c.0));
                if std::fs::write(&path, &c.1).is_ok() {
                    eprintln!("fuzz: the failing input is saved in {}", path.display());
                }
            }
        });
        previous(info);
    }));
}

/// The check, with a panic turned into a failure (where panics unwind).
fn checked(target: &Target, input: &[u8]) -> Result<bool, String> {
    CURRENT.with(|c| {
        let mut c = c.borrow_mut();
        c.0 = target.name;
        c.1.clear();
        c.1.extend_from_slice(input);
    });
    match catch_unwind(AssertUnwindSafe(|| (target.check)(input))) {
        Ok(r) => r,
        Err(p) => Err(format!(
            "panicked: {}",
            p.downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| p.downcast_ref::<&str>().copied())
                .unwrap_or("(no message)")
        )),
    }
}

/// The input builder.
pub struct Gen(Rng);

impl Gen {
    fn below(&mut self, n: usize) -> usize {
        (self.0.next_u64() % n.max(1) as u64) as usize
    }

    /// An awkward character: controls, quotes, backslashes, separators,
    /// multi-byte and non-BMP text, the line separators JSON keeps.
    fn awkward(&mut self) -> char {
        const SET: &[char] = &[
            '\0', '\n', '\r', '\t', '"', '\\', '\'', '{', '}', ',', '=', '&', ' ', '#', '\u{7f}',
            '\u{85}', 'é', '\u{2028}', '\u{2029}', '\u{feff}', '\u{fffd}', '😀', '\u{1b}',
        ];
        SET[self.below(SET.len())]
    }

    /// Text from `dict`'s pieces, awkward characters, random ASCII and
    /// random code points, up to `parts` pieces.
    fn text(&mut self, dict: &[&str], parts: usize) -> String {
        let mut s = String::new();
        for _ in 0..self.below(parts + 1) {
            match self.below(6) {
                0 | 1 if !dict.is_empty() => s.push_str(dict[self.below(dict.len())]),
                2 => s.push(self.awkward()),
                3 => s.push((b' ' + self.below(95) as u8) as char),
                4 => s.push(char::from_u32(self.0.next_u64() as u32 % 0x11_0000).unwrap_or('x')),
                _ => s.push_str(&self.below(100_000).to_string()),
            }
        }
        s
    }

    /// Bytes: [`Gen::text`], now and then with a byte that is not UTF-8.
    fn bytes(&mut self, dict: &[&str], parts: usize) -> Vec<u8> {
        let mut b = self.text(dict, parts).into_bytes();
        if self.below(8) == 0 {
            let at = self.below(b.len() + 1);
            b.insert(at, 0x80 + self.below(0x80) as u8);
        }
        b
    }
}

// ---- directive ----

const DIRECTIVE_DICT: &[&str] = &[
    "on",
    "off",
    "max=",
    "max=1",
    "max=16",
    "max=17",
    "max=0",
    "max=01",
    "max=-1",
    "max=+2",
    "MAX=2",
    "On",
    "0",
    "16",
    "9999999999",
    "99999999999",
    " ",
    "max",
];

/// Up to four arguments, separated by NUL in the input.
fn gen_directive(g: &mut Gen) -> Vec<u8> {
    let n = g.below(5);
    let mut out = Vec::new();
    for i in 0..n {
        if i > 0 {
            out.push(0);
        }
        out.extend(g.bytes(DIRECTIVE_DICT, 3));
    }
    out
}

fn split_args(input: &[u8]) -> Vec<&[u8]> {
    if input.is_empty() {
        return Vec::new();
    }
    input.split(|&b| b == 0).collect()
}

/// The grammar, stated again: `on|off [max=N]`, N decimal digits only,
/// 1..=MAX_MAX.
fn model_directive(args: &[&[u8]]) -> Result<(bool, u32), &'static str> {
    if args.is_empty() || args.len() > 2 {
        return Err("arity");
    }
    let on = match args[0] {
        b"on" => true,
        b"off" => false,
        _ => return Err("switch"),
    };
    let Some(&max) = args.get(1) else {
        return Ok((on, 2));
    };
    let Some(digits) = max.strip_prefix(b"max=") else {
        return Err("parameter");
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err("max");
    }
    // Leading zeros are digits: "max=01" is 1. Past 10 digits nothing is
    // in range.
    let trimmed: &[u8] = {
        let nz = digits
            .iter()
            .position(|&d| d != b'0')
            .unwrap_or(digits.len());
        &digits[nz..]
    };
    if trimmed.len() > 2 || digits.len() > 10 {
        return Err("max");
    }
    let n: u32 = std::str::from_utf8(trimmed)
        .unwrap_or("0")
        .parse()
        .unwrap_or(0);
    if !(1..=MAX_MAX).contains(&n) {
        return Err("max");
    }
    Ok((on, n))
}

fn check_directive(input: &[u8]) -> Result<bool, String> {
    let args = split_args(input);
    let got = parse_resnapshot(&args);
    let want = model_directive(&args);
    match (&got, want) {
        (Ok(r), Ok((on, max))) if r.enabled == on && r.max == max => {
            let warned = warning(&args, *r).is_some();
            if warned != (!on && args.len() == 2) {
                return Err(format!("{args:?}: warning {warned} for {r:?}"));
            }
            Ok(true)
        }
        (Err(e), Err(kind)) => {
            let matches = matches!(
                (e, kind),
                (ArgError::Arity(_), "arity")
                    | (ArgError::InvalidSwitch(_), "switch")
                    | (ArgError::UnknownParameter(_), "parameter")
                    | (ArgError::InvalidMax(_), "max")
            );
            let message = e.message(DIRECTIVE);
            if !matches || !message.contains(&format!("\"{DIRECTIVE}\" directive")) {
                return Err(format!(
                    "{args:?}: {e:?} ({message}), the grammar says {kind}"
                ));
            }
            Ok(true)
        }
        _ => Err(format!(
            "{args:?}: parsed {got:?}, the grammar says {want:?}"
        )),
    }
}

// ---- status query ----

const QUERY_DICT: &[&str] = &[
    "format=json",
    "format=",
    "json",
    "&",
    "=",
    "format=JSON",
    "format=json&",
    "&format=json",
    "format=jsonx",
    "xformat=json",
    "%66ormat=json",
    "format=prometheus",
    "?",
];

fn gen_query(g: &mut Gen) -> Vec<u8> {
    g.bytes(QUERY_DICT, 6)
}

fn check_query(input: &[u8]) -> Result<bool, String> {
    // "An argument is exactly format=json": at the start or after `&`,
    // and at the end or before `&`.
    let needle = b"format=json";
    let mut want = false;
    for start in 0..input.len() {
        if input[start..].starts_with(needle)
            && (start == 0 || input[start - 1] == b'&')
            && matches!(input.get(start + needle.len()), None | Some(b'&'))
        {
            want = true;
        }
    }
    let got = wants_json(input);
    if got != want {
        return Err(format!(
            "{:?}: wants_json {got}, expected {want}",
            String::from_utf8_lossy(input)
        ));
    }
    Ok(true)
}

// ---- renderers ----

const NAME_DICT: &[&str] = &[
    "backend",
    "\\",
    "\"",
    "\\n",
    "\n",
    "}",
    "{",
    "=",
    "\",upstream=\"",
    "# HELP",
    " 1",
    "😀",
    "\u{2028}",
    "\0",
    "\\\"",
];

/// Up to five upstream names, NUL-separated; a name holds any other byte.
fn gen_names(g: &mut Gen) -> Vec<u8> {
    let n = g.below(6);
    let mut out = Vec::new();
    for i in 0..n {
        if i > 0 {
            out.push(0);
        }
        let name = g.bytes(NAME_DICT, 5);
        out.extend(name.into_iter().filter(|&b| b != 0));
    }
    out
}

/// The stats the renderers get: names as the module gets them (bytes from
/// nginx's configuration, read lossily), counters and gauges derived from
/// the index, so the check knows them.
fn stats_of(input: &[u8]) -> Vec<UpstreamStats> {
    split_args(input)
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let mut counters = Counters::default();
            for (k, c) in counters.iter_mut().enumerate() {
                *c = (i as u64 + 1) * 1_000 + k as u64;
            }
            UpstreamStats {
                name: String::from_utf8_lossy(name).into_owned(),
                protocol: if i % 2 == 0 {
                    Protocol::Http
                } else {
                    Protocol::Stream
                },
                rescue: i % 3 != 0,
                counters,
                generation: u64::MAX - i as u64,
                peers: i as u64,
            }
        })
        .collect()
}

/// One sample line of the Prometheus text format, parsed strictly: the
/// metric name, its labels (values unescaped), the value.
type Sample = (String, Vec<(String, String)>, u64);

fn parse_sample(line: &str) -> Result<Sample, String> {
    let name_end = line
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .ok_or("no labels or value")?;
    let name = &line[..name_end];
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return Err("bad metric name".into());
    }
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(r) = rest.strip_prefix('{') {
        rest = r;
        loop {
            if let Some(r) = rest.strip_prefix('}') {
                rest = r;
                break;
            }
            let eq = rest.find('=').ok_or("label without =")?;
            let label = &rest[..eq];
            if label.is_empty()
                || !label.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                || label.starts_with(|c: char| c.is_ascii_digit())
            {
                return Err(format!("bad label name {label:?}"));
            }
            rest = rest[eq + 1..]
                .strip_prefix('"')
                .ok_or("label value not quoted")?;
            let mut value = String::new();
            let mut chars = rest.char_indices();
            let end = loop {
                match chars.next() {
                    None => return Err("unterminated label value".into()),
                    Some((i, '"')) => break i,
                    Some((_, '\\')) => match chars.next() {
                        Some((_, '\\')) => value.push('\\'),
                        Some((_, '"')) => value.push('"'),
                        Some((_, 'n')) => value.push('\n'),
                        other => return Err(format!("bad escape {other:?}")),
                    },
                    Some((_, '\n')) => return Err("raw newline in a label value".into()),
                    Some((_, c)) => value.push(c),
                }
            };
            if labels.iter().any(|(l, _)| l == label) {
                return Err(format!("label {label} twice"));
            }
            labels.push((label.to_owned(), value));
            rest = &rest[end + 1..];
            if let Some(r) = rest.strip_prefix(',') {
                rest = r;
            } else if !rest.starts_with('}') {
                return Err("labels not separated by ,".into());
            }
        }
    }
    let value = rest.strip_prefix(' ').ok_or("no space before the value")?;
    let value = value.parse().map_err(|e| format!("value {value:?}: {e}"))?;
    Ok((name.to_owned(), labels, value))
}

fn check_prometheus(input: &[u8]) -> Result<bool, String> {
    let stats = stats_of(input);
    let text = render_prometheus(&stats);
    if !text.ends_with('\n') {
        return Err("no trailing newline".into());
    }
    let mut samples = Vec::new();
    for line in text.lines() {
        if let Some(comment) = line.strip_prefix("# ") {
            let mut w = comment.splitn(3, ' ');
            match (w.next(), w.next(), w.next()) {
                (Some("HELP"), Some(_), Some(_)) => {}
                (Some("TYPE"), Some(_), Some("counter" | "gauge")) => {}
                _ => return Err(format!("bad comment line {line:?}")),
            }
            continue;
        }
        samples.push(parse_sample(line).map_err(|e| format!("{line:?}: {e}"))?);
    }
    let per_upstream: usize = FAMILIES.iter().map(|f| f.series.len()).sum();
    if samples.len() != per_upstream * stats.len() {
        return Err(format!(
            "{} samples for {} upstreams, {per_upstream} each",
            samples.len(),
            stats.len()
        ));
    }
    // Series come family by family, upstream by upstream within a family.
    let mut i = 0;
    for f in FAMILIES {
        for s in &stats {
            for _ in f.series {
                let (metric, labels, _) = &samples[i];
                i += 1;
                let upstream = labels.iter().find(|(l, _)| l == "upstream");
                if metric != f.name || upstream.map(|(_, v)| v) != Some(&s.name) {
                    return Err(format!(
                        "sample {metric} {labels:?}: expected {} for {:?}",
                        f.name, s.name
                    ));
                }
            }
        }
    }
    Ok(true)
}

fn check_json(input: &[u8]) -> Result<bool, String> {
    let stats = stats_of(input);
    let text = render_json(&stats);
    let doc: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("not JSON ({e}): {text:?}"))?;
    let list = doc["upstreams"].as_array().ok_or("no upstreams array")?;
    if list.len() != stats.len() {
        return Err(format!(
            "{} objects for {} upstreams",
            list.len(),
            stats.len()
        ));
    }
    for (o, s) in list.iter().zip(&stats) {
        let mode = if s.rescue { "on" } else { "off" };
        if o["upstream"].as_str() != Some(s.name.as_str())
            || o["protocol"].as_str() != Some(s.protocol.label())
            || o["mode"].as_str() != Some(mode)
        {
            return Err(format!("{o} does not say {:?}/{mode}", s.name));
        }
    }
    Ok(true)
}

// ---- diagnose ----

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
fn gen_error_line(g: &mut Gen) -> Vec<u8> {
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

fn check_error_line(input: &[u8]) -> Result<bool, String> {
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

/// The harness's access-log format (t/src/accesslog.rs), which diagnose
/// reads.
fn access_parser() -> &'static AccessParser {
    static P: std::sync::OnceLock<AccessParser> = std::sync::OnceLock::new();
    P.get_or_init(|| {
        let format = crate::accesslog::log_format(true);
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
fn gen_access_line(g: &mut Gen) -> Vec<u8> {
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

fn check_access_line(input: &[u8]) -> Result<bool, String> {
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
