//! Memory stays flat in the size of the logs: 400,000 502 lines, with
//! long request lines and user agents, go through the collector; what it
//! keeps is one fixed-size record per 502 plus a rest that does not grow
//! with the lines (strings, file stats), except for the per-second
//! timeline, which grows with the time span the logs cover. Measured by
//! counting the kept records' and strings' bytes
//! ([`Collected::kept_bytes`]), not by the clock or RSS.

use generation_retry_diagnose::access::AccessParser;
use generation_retry_diagnose::collect::{Collector, Failure, KeptError, LogKind, Options};

const FORMAT: &str = r#"$remote_addr - - [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" "$upstream_addr" $msec $connection"#;
const FAILURES: u64 = 400_000;

#[test]
fn kept_state_is_fixed_per_failure_and_bounded_otherwise() {
    let parser = AccessParser::new(FORMAT).expect("valid");
    let mut c = Collector::new(Some(parser), Options::default());
    let a = c.start_file("access.log", LogKind::Access);
    let e = c.start_file("error.log", LogKind::Error);
    let agent = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) ".repeat(4);
    let t0: u64 = 1_796_108_400_000;
    let mut input_bytes: u64 = 0;
    let mut line = String::new();
    let mut checkpoints = Vec::new();
    for n in 0..FAILURES {
        // Two hours of traffic, 4 addresses, distinct long URLs.
        let ms = t0 + n * 36 / 10;
        let addr = format!("10.0.0.{}:80", n % 4);
        let upstream_addr = match n % 3 {
            0 => format!("{addr}, be"),
            1 => "be".to_string(),
            _ => addr,
        };
        line.clear();
        use std::fmt::Write;
        let _ = write!(
            line,
            "10.{}.{}.{} - - [01/Dec/2026:07:00:00 +0000] \"GET /api/v1/items/{n}?session={:016x}&page={} HTTP/1.1\" 502 157 \"https://example.com/{n}\" \"{agent}\" \"{upstream_addr}\" {}.{:03} {}",
            n % 200,
            n % 250,
            n % 199,
            n.wrapping_mul(0x9e37_79b9_7f4a_7c15),
            n % 97,
            ms / 1_000,
            ms % 1_000,
            n
        );
        input_bytes += line.len() as u64 + 1;
        c.line(a, line.as_bytes());
        if n % 4 == 0 {
            let err = format!(
                "2026/12/01 07:00:00 [error] 11#11: *{n} no live upstreams while connecting to upstream, client: 10.1.1.1, server: , request: \"GET /api/v1/items/{n}?session={:016x} HTTP/1.1\", upstream: \"http://be/api\", host: \"example.com\"",
                n.wrapping_mul(0x9e37_79b9_7f4a_7c15)
            );
            input_bytes += err.len() as u64 + 1;
            c.line(e, err.as_bytes());
        }
        if (n + 1) % 100_000 == 0 {
            let d = c.collected();
            let records = d.failures.capacity() * std::mem::size_of::<Failure>()
                + d.errors.capacity() * std::mem::size_of::<KeptError>();
            checkpoints.push((n + 1, d.kept_bytes(), d.kept_bytes() - records));
        }
    }
    let d = c.collected();
    assert_eq!(d.failures.len() as u64, FAILURES);
    assert_eq!(d.errors.len() as u64, FAILURES / 4);
    // The records are small and of fixed size.
    assert!(
        std::mem::size_of::<Failure>() <= 64,
        "{}",
        std::mem::size_of::<Failure>()
    );
    assert!(std::mem::size_of::<KeptError>() <= 64);
    // Beyond the records, the kept state does not grow with the lines,
    // only with the time span they cover (the per-second timeline): at
    // most 64 KiB plus 256 bytes per second of log, at every checkpoint.
    for (lines, _, rest) in &checkpoints {
        let span_s = (lines * 36 / 10 / 1_000) as usize;
        assert!(
            *rest <= 64 * 1024 + 256 * span_s,
            "{rest} bytes beyond the records after {lines} lines ({span_s} s): {checkpoints:?}"
        );
    }
    // ... and everything kept is a small fraction of what went in.
    let kept = d.kept_bytes() as u64;
    assert!(
        kept * 5 < input_bytes,
        "kept {kept} bytes of {input_bytes} read ({checkpoints:?})"
    );
    let finished = c.finish();
    assert!(finished.kept_bytes() as u64 <= kept + kept / 8);
}
