//! The fuzzing, done as a property test (no fuzzing crate): a small
//! xorshift generator makes 20,000 random byte lines (random bytes, and
//! valid access/error lines mutated by truncation, inserted quotes,
//! commas, brackets, separators and non-UTF-8 bytes) and feeds them to the
//! access-line parser, the error-line parser, the `log_format` parser and
//! the whole collect-and-classify pass. None may panic: a panic fails the
//! test. The seed is fixed, so a failure reproduces. A second test writes
//! such lines as gzip files (whole, cut short, and with flipped bytes) and
//! runs the command over them.

use generation_retry_diagnose::access::{self, AccessParser};
use generation_retry_diagnose::collect::{Collector, LogKind, Options};
use generation_retry_diagnose::errorlog;
use generation_retry_diagnose::logformat::LogFormat;
use generation_retry_diagnose::{analyze, report};

/// xorshift64*.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

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

fn mutate(rng: &mut Rng, base: &[u8]) -> Vec<u8> {
    let mut line = base.to_vec();
    for _ in 0..=rng.below(4) {
        match rng.below(6) {
            0 => line.truncate(rng.below(line.len() + 1)),
            1 | 2 => {
                let at = rng.below(line.len() + 1);
                let ins = INSERTS[rng.below(INSERTS.len())];
                line.splice(at..at, ins.iter().copied());
            }
            3 => {
                if !line.is_empty() {
                    let at = rng.below(line.len());
                    line[at] = rng.next() as u8;
                }
            }
            4 => {
                if !line.is_empty() {
                    let at = rng.below(line.len());
                    let end = (at + rng.below(8)).min(line.len());
                    line.drain(at..end);
                }
            }
            _ => {
                let at = rng.below(line.len() + 1);
                let digit = b'0' + rng.below(10) as u8;
                line.splice(at..at, std::iter::repeat_n(digit, rng.below(30)));
            }
        }
    }
    line
}

fn random_bytes(rng: &mut Rng) -> Vec<u8> {
    (0..rng.below(200)).map(|_| rng.next() as u8).collect()
}

#[test]
fn parsers_never_panic_on_20000_random_lines() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let parser = AccessParser::new(FORMAT).expect("valid format");
    let mut collector = Collector::new(
        Some(AccessParser::new(FORMAT).expect("valid")),
        Options::default(),
    );
    let afile = collector.start_file("access", LogKind::Access);
    let efile = collector.start_file("error", LogKind::Error);
    let mut parsed = [0usize; 2];
    for n in 0..20_000 {
        let bytes = if n % 5 == 0 {
            random_bytes(&mut rng)
        } else {
            let seed = SEEDS[rng.below(SEEDS.len())];
            mutate(&mut rng, seed.as_bytes())
        };
        let line = String::from_utf8_lossy(&bytes);
        if let Some(e) = parser.parse_line(&line) {
            parsed[0] += 1;
            let _ = access::last_group_hops(e.upstream_addr);
            let _ = access::unescape(e.request.unwrap_or(""));
        }
        if let Some(e) = errorlog::parse_line(&line, rng.below(3) as i32 * 3_600 - 3_600) {
            parsed[1] += 1;
            let _ = errorlog::upstream_host(e.upstream.as_deref().unwrap_or(""));
        }
        let _ = LogFormat::parse(&line);
        let _ = LogFormat::tokenize(&line).match_line(SEEDS[0]);
        let _ = access::last_group_hops(&line);
        collector.line(afile, &bytes);
        collector.line(efile, &bytes);
    }
    // The mutations keep many lines valid, so the parsers' deeper paths ran.
    assert!(parsed[0] > 500 && parsed[1] > 500, "parsed {parsed:?}");
    let analysis = analyze(collector.finish());
    assert!(!analysis.incidents.is_empty());
    let _ = report::human(&analysis);
    let _ = report::json(&analysis).to_string();
}

fn gzip(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(data).expect("in memory");
    enc.finish().expect("in memory")
}

/// Random and mutated lines through the whole command, from gzip files:
/// whole (all read: exit 0, or 4 for the error log alone), truncated and
/// corrupted (exit 1 naming the file, or as whole when the damage still
/// decodes; 3 when no access line survives). Never a panic.
#[test]
fn gzip_input_never_panics() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let dir = std::env::temp_dir().join(format!("grd-fuzz-gz-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let mut ran = 0;
    for round in 0..12 {
        let mut text = Vec::new();
        for n in 0..400 {
            let line = if n % 7 == 0 {
                random_bytes(&mut rng)
            } else {
                let seed = SEEDS[rng.below(SEEDS.len())];
                mutate(&mut rng, seed.as_bytes())
            };
            text.extend_from_slice(&line);
            text.push(b'\n');
        }
        let mut gz = gzip(&text);
        match round % 3 {
            1 => gz.truncate(rng.below(gz.len())),
            2 => {
                for _ in 0..=rng.below(6) {
                    let at = rng.below(gz.len());
                    gz[at] ^= 1 << rng.below(8);
                }
            }
            _ => {}
        }
        let path = dir.join(format!("log{round}.gz"));
        std::fs::write(&path, &gz).expect("write");
        let p = path.display().to_string();
        for (args, whole) in [
            (
                vec!["--access-log", &p, "--log-format", FORMAT, "--json"],
                0,
            ),
            // An error log alone is read, but no access log: 4.
            (vec!["--error-log", &p], 4),
        ] {
            let args: Vec<std::ffi::OsString> = args.iter().map(Into::into).collect();
            let (mut out, mut err) = (Vec::new(), Vec::new());
            let status = generation_retry_diagnose::run(&args, &mut out, &mut err);
            let err = String::from_utf8_lossy(&err);
            match status {
                0 | 3 | 4 => assert!(!out.is_empty()),
                1 => assert!(err.contains(&p), "{err}"),
                other => panic!("status {other}: {err}"),
            }
            if round % 3 == 0 {
                assert_eq!(status, whole, "a whole gzip file reads: {err}");
            }
            ran += 1;
        }
    }
    assert_eq!(ran, 24);
    let _ = std::fs::remove_dir_all(&dir);
}
