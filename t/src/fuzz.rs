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
//!
//! This file runs the targets and builds their inputs ([`Gen`]); each
//! target's generator and check live by what they read: `module_input`
//! (`directive`, `status_query`), `render` (`prometheus`, `json`),
//! `diagnose` (`error_line`, `access_line`).

mod diagnose;
mod module_input;
mod render;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::Instant;

use diagnose::{check_access_line, check_error_line, gen_access_line, gen_error_line};
use module_input::{check_directive, check_query, gen_directive, gen_query};
use render::{check_json, check_prometheus, gen_names};

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
