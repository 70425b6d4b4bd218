//! The fuzzing, as proptest property tests: random byte lines, and valid
//! lines mutated (truncation, inserted quotes, commas, brackets, separators,
//! digits, non-UTF-8 bytes), through every parser and the whole command,
//! also as gzip files (whole, cut short, with flipped bits). None may panic.
//! Runs reproduce; a failure shrinks to a short input.

use std::cell::RefCell;
use std::io::Read;

use flate2::{read::GzEncoder, Compression};
use generation_retry_diagnose::access::{self, AccessParser};
use generation_retry_diagnose::collect::{Collector, LogKind, Options};
use generation_retry_diagnose::logformat::LogFormat;
use generation_retry_diagnose::{analyze, errorlog, input, report};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::{select, Index};
use proptest::test_runner::{RngAlgorithm, RngSeed, TestCaseResult, TestRunner};

const FORMAT: &str = r#"$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" "$upstream_addr" $msec $connection ${request_id}"#;

const SEEDS: [&str; 8] = [
    r#"10.1.1.1 - - [01/Dec/2026:07:00:00 +0000] "GET /p HTTP/1.1" 502 157 "-" "curl/8" "10.0.0.1:80, be" 1796108400.123 7 abc"#,
    r#"10.1.1.1 - - [01/Dec/2026:07:00:00 +0000] "GET /p HTTP/1.1" 200 5 "-" "curl/8" "10.0.0.2:80" 1796108400.500 8 -"#,
    r#"10.1.1.1 - - [01/Dec/2026:07:00:01 +0000] "GET /q HTTP/1.1" 502 157 "-" "-" "[2001:db8::1]:80, be : unix:/s, api" 1796108401.000 9 -"#,
    r#"10.1.1.1 - - [01/Dec/2026:07:00:01 +0000] "GET / HTTP/1.1" 502 157 "-" "-" "be" 1796108401.100 10 -"#,
    r#"2026/12/01 07:00:01 [error] 11#11: *7 no live upstreams while connecting to upstream, client: 10.1.1.1, server: , request: "GET /p HTTP/1.1", upstream: "http://be/p", host: "h""#,
    "2026/12/01 07:00:01 [error] 11#11: *9 no live upstreams while connecting to upstream, client: 1.1.1.1, server: 0.0.0.0:9000, upstream: \"be\", bytes from/to client:0/0, bytes from/to upstream:0/0",
    "2026/12/01 07:00:00 [error] 11#11: be.example.com could not be resolved (3: Host not found)",
    r#"2026/12/01 07:00:00 [warn] 11#11: *3 upstream server temporarily disabled while connecting to upstream, client: 1.1.1.1, server: , request: "GET / HTTP/1.1", upstream: "http://[::1]:80/", host: "h""#,
];

const INSERTS: [&[u8]; 14] = [
    b"\"", b",", b", ", b" : ", b"[", b"]", b"\\x22", b"$", b"${", b"}", b"\xff", b"\xc3", b"*",
    b": ",
];

/// Runs `test` on `cases` values of `strategy` from a fixed seed (or
/// `PROPTEST_RNG_SEED`), writing no failure file into the source tree.
fn check<S: Strategy>(cases: u32, strategy: S, test: impl Fn(S::Value) -> TestCaseResult) {
    let mut config = ProptestConfig::with_cases(cases); // and the PROPTEST_* variables
    config.failure_persistence = None;
    config.rng_algorithm = RngAlgorithm::ChaCha;
    config.max_shrink_iters = 10_000; // not 4 × cases: shrink a line down to its bytes
    if config.rng_seed == RngSeed::Random {
        config.rng_seed = RngSeed::Fixed(0x9e37_79b9_7f4a_7c15);
    }
    let seed = config.rng_seed;
    if let Err(e) = TestRunner::new(config).run(&strategy, test) {
        panic!("{e}\n(PROPTEST_RNG_SEED={seed})");
    }
}

/// A line's bytes, shown as an escaped byte string when a case fails.
struct Line(Vec<u8>);

impl std::fmt::Debug for Line {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "b\"{}\"", self.0.escape_ascii())
    }
}

/// One in `one_in` lines is random bytes (under 200), the others a seed
/// line with one to four edits, each a splice at an [`Index`] into the line
/// as it is then: bytes cut (up to the end), bytes put in.
fn line(one_in: u32) -> impl Strategy<Value = Line> {
    let edit = prop_oneof![
        1 => Just((usize::MAX, vec![])), // truncation
        2 => select(INSERTS.to_vec()).prop_map(|s| (0, s.to_vec())),
        1 => any::<u8>().prop_map(|b| (1, vec![b])), // a byte replaced (or appended)
        1 => (0..8usize).prop_map(|n| (n, vec![])),
        1 => (b'0'..=b'9', 0..30usize).prop_map(|(d, n)| (0, vec![d; n])),
    ];
    let edits = vec((any::<Index>(), edit), 1..=4);
    prop_oneof![
        1 => vec(any::<u8>(), 0..200).prop_map(Line),
        one_in - 1 => (select(SEEDS.to_vec()), edits).prop_map(|(seed, edits)| {
            let mut line = seed.as_bytes().to_vec();
            for (at, (cut, put)) in edits {
                let at = at.index(line.len() + 1);
                line.splice(at..at.saturating_add(cut).min(line.len()), put);
            }
            Line(line)
        }),
    ]
}

/// Of 1 to 80 lines: the 10 s the hand-made generator's 20,000 lines took
/// in one pass (which classifying made slower than many small ones).
const PARSER_CASES: usize = 1_800;

/// Each line through every parser, each case's lines through a
/// collect-and-classify pass and both reports.
#[test]
fn parsers_never_panic_on_random_lines() {
    let parser = AccessParser::new(FORMAT).expect("valid format");
    // Lines, access lines, error lines, cases with a 502 or 504.
    let counts = RefCell::new([0usize; 4]);
    let case = (vec(line(5), 1..=80), -1i32..=1);
    check(PARSER_CASES as u32, case, |(lines, hour)| {
        let mut collector = Collector::new(Some(parser.clone()), Options::default());
        let afile = collector.start_file("access", LogKind::Access);
        let efile = collector.start_file("error", LogKind::Error);
        for Line(bytes) in &lines {
            counts.borrow_mut()[0] += 1;
            let line = String::from_utf8_lossy(bytes);
            if let Some(e) = parser.parse_line(&line) {
                counts.borrow_mut()[1] += 1;
                let _ = access::last_group_hops(e.upstream_addr);
                let _ = access::unescape(e.request.unwrap_or(""));
            }
            if let Some(e) = errorlog::parse_line(&line, hour * 3_600) {
                counts.borrow_mut()[2] += 1;
                let _ = errorlog::upstream_host(e.upstream.as_deref().unwrap_or(""));
            }
            let _ = LogFormat::parse(&line);
            let _ = LogFormat::tokenize(&line).match_line(SEEDS[0]);
            let _ = access::last_group_hops(&line);
            collector.line(afile, bytes);
            collector.line(efile, bytes);
        }
        let analysis = analyze(collector.finish());
        counts.borrow_mut()[3] += usize::from(!analysis.incidents.is_empty());
        let _ = report::human(&analysis);
        let _ = report::json(&analysis).to_string();
        Ok(())
    });
    // The mutations keep many lines valid (over one in 40 each), so the
    // parsers' deeper paths ran, and most passes had incidents to classify.
    let c = counts.into_inner();
    assert!(c[1] * 40 > c[0] && c[2] * 40 > c[0], "{c:?}");
    assert!(c[3] * 2 > PARSER_CASES, "{c:?}");
}

/// A gzip file whole, cut short, or with bits flipped (at a byte, which bit).
#[derive(Clone, Debug)]
enum Damage {
    Whole,
    Truncated(Index),
    Flipped(Vec<(Index, u8)>),
}

/// The lines as gzip files through the whole command: whole, all read (exit
/// 0, 3 when no access line parses, 4 when all are blank; 4 for an error log
/// alone); damaged, exit 1 naming the file, or as whole. Never a panic. 64
/// cases: a second or so.
#[test]
fn gzip_input_never_panics() {
    let dir = crate::common::scratch("fuzz-gz");
    let path = dir.join("log.gz");
    let p = path.display().to_string();
    let parser = AccessParser::new(FORMAT).expect("valid format");
    let damage = prop_oneof![
        Just(Damage::Whole),
        any::<Index>().prop_map(Damage::Truncated),
        vec((any::<Index>(), 0..8u8), 1..=6).prop_map(Damage::Flipped),
    ];
    let line = line(7).prop_map(|Line(l)| Line([l, b"\n".to_vec()].concat()));
    check(64, (vec(line, 1..=400), damage), |(lines, damage)| {
        let text: Vec<u8> = lines.into_iter().flat_map(|Line(l)| l).collect();
        let mut gz = Vec::new();
        GzEncoder::new(&text[..], Compression::fast())
            .read_to_end(&mut gz)
            .expect("in memory");
        let n = gz.len();
        match &damage {
            Damage::Whole => {}
            Damage::Truncated(at) => gz.truncate(at.index(n)),
            Damage::Flipped(flips) => flips
                .iter()
                .for_each(|(at, bit)| gz[at.index(n)] ^= 1 << bit),
        }
        std::fs::write(&path, &gz).expect("write");
        // The access lines the command would read in the text.
        let mut plain = Collector::new(Some(parser.clone()), Options::default());
        let file = plain.start_file("text", LogKind::Access);
        input::read_lines(&text[..], |l| plain.line(file, l)).expect("in memory");
        let parsed = plain.finish().access_entries > 0;
        let access = ["--access-log", &p, "--log-format", FORMAT, "--json"];
        let if_whole = if parsed { [0, 0] } else { [3, 4] };
        // An error log alone is read, but no access log: 4.
        for (args, whole) in [(&access[..], if_whole), (&["--error-log", &p][..], [4, 4])] {
            let args: Vec<std::ffi::OsString> = args.iter().map(Into::into).collect();
            let (mut out, mut err) = (Vec::new(), Vec::new());
            let status = generation_retry_diagnose::run(&args, &mut out, &mut err);
            let err = String::from_utf8_lossy(&err);
            match status {
                0 | 3 | 4 => assert!(!out.is_empty()),
                1 => assert!(err.contains(&p), "{err}"),
                other => panic!("status {other}: {err}"),
            }
            if matches!(damage, Damage::Whole) {
                assert!(whole.contains(&status), "a whole gzip file reads: {err}");
            }
        }
        Ok(())
    });
    let _ = std::fs::remove_dir_all(&dir);
}
