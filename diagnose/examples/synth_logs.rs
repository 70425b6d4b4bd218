//! Writes a synthetic access log and error log for measuring the tool:
//! `cargo run --release -p generation-retry-diagnose --example synth_logs
//! -- DIR MEGABYTES`. 200 requests a second to two upstreams, `be`
//! (`server be.example.com resolve`, its two addresses replaced every
//! 20 s) and `api` (two fixed peers), in the format
//! [`FORMAT`]; a share of 502/504s of each family with the error lines
//! nginx writes for them: 2-hop and 1-hop races at `be`'s changes, an
//! `api` max_fails wipe-out, `be.example.com` answering NXDOMAIN for 2 s,
//! and 504 timeouts. Prints the number of lines and of 502/504s.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use generation_retry_diagnose::timefmt;

/// The access format the lines are written in.
pub const FORMAT: &str = r#"$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" "$upstream_addr" $msec $connection"#;

const T0: i64 = 1_796_108_400_000;
struct Out {
    access: BufWriter<File>,
    error: BufWriter<File>,
    bytes: u64,
    lines: u64,
    failures: u64,
    conn: u64,
}

impl Out {
    fn access(&mut self, ms: i64, status: u16, upstream_addr: &str, path: &str) -> u64 {
        self.conn += 1;
        let line = format!(
            "10.{}.{}.{} - - [{}] \"GET {path}?id={} HTTP/1.1\" {status} {} \"https://example.com/\" \"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36\" \"{upstream_addr}\" {}.{:03} {}\n",
            self.conn % 200,
            self.conn % 250,
            self.conn % 199,
            timefmt::format_time_local(ms, 0),
            self.conn * 7_919 % 100_000,
            if status == 200 { 5_120 } else { 157 },
            ms.div_euclid(1_000),
            ms.rem_euclid(1_000),
            self.conn
        );
        self.bytes += line.len() as u64;
        self.lines += 1;
        if status == 502 || status == 504 {
            self.failures += 1;
        }
        let _ = self.access.write_all(line.as_bytes());
        self.conn
    }

    fn error(
        &mut self,
        ms: i64,
        level: &str,
        conn: Option<u64>,
        message: &str,
        ctx: Option<(&str, &str)>,
    ) {
        let mut line = format!("{} [{level}] 11#11: ", timefmt::format_error_time(ms, 0));
        if let Some(c) = conn {
            line.push_str(&format!("*{c} "));
        }
        line.push_str(message);
        if let Some((path, upstream)) = ctx {
            line.push_str(&format!(
                ", client: 10.9.9.9, server: example.com, request: \"GET {path} HTTP/1.1\", upstream: \"http://{upstream}{path}\", host: \"example.com\""
            ));
        }
        line.push('\n');
        self.bytes += line.len() as u64;
        let _ = self.error.write_all(line.as_bytes());
    }
}

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dir = PathBuf::from(args.first().map_or("/tmp", String::as_str));
    let megabytes: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(100);
    let mut out = Out {
        access: BufWriter::with_capacity(1 << 20, File::create(dir.join("access.log"))?),
        error: BufWriter::with_capacity(1 << 20, File::create(dir.join("error.log"))?),
        bytes: 0,
        lines: 0,
        failures: 0,
        conn: 0,
    };
    let be_sets = [
        ["10.1.0.1:80", "10.1.0.2:80"],
        ["10.1.1.1:80", "10.1.1.2:80"],
    ];
    let api = ["10.2.0.1:80", "10.2.0.2:80"];
    let mut ms = T0;
    let mut n: u64 = 0;
    while out.bytes < megabytes * 1_000_000 {
        ms += 5;
        n += 1;
        let period = (ms - T0) / 20_000;
        let phase = (ms - T0) % 20_000;
        let set = be_sets[(period % 2) as usize];
        // Events, once per period each.
        if phase == 0 && period > 0 {
            let old = be_sets[((period + 1) % 2) as usize][0];
            if period % 2 == 0 {
                let c = out.access(ms + 40, 502, &format!("{old}, be"), "/race");
                out.error(ms, "error", Some(c), "upstream prematurely closed connection while reading response header from upstream", Some(("/race", old)));
                out.error(ms, "warn", Some(c), "upstream server temporarily disabled while reading response header from upstream", Some(("/race", old)));
                out.error(
                    ms,
                    "error",
                    Some(c),
                    "no live upstreams while connecting to upstream",
                    Some(("/race", "be")),
                );
            } else {
                let c = out.access(ms + 40, 502, "be", "/first");
                out.error(
                    ms,
                    "error",
                    Some(c),
                    "no live upstreams while connecting to upstream",
                    Some(("/first", "be")),
                );
            }
        }
        let wiped = (10_000..13_000).contains(&phase) && period % 2 == 0;
        let gone = (10_000..12_000).contains(&phase) && period % 2 == 1;
        if phase == 10_000 && wiped {
            for (i, peer) in api.iter().enumerate() {
                let c = 900_000_000 + n + i as u64;
                out.error(ms, "error", Some(c), &format!("connect() to {peer} failed (111: Connection refused) while connecting to upstream"), Some(("/api", peer)));
                out.error(
                    ms,
                    "warn",
                    Some(c),
                    "upstream server temporarily disabled while connecting to upstream",
                    Some(("/api", peer)),
                );
            }
        }
        if phase == 10_000 && gone {
            out.error(
                ms,
                "error",
                None,
                "be.example.com could not be resolved (3: Host not found)",
                None,
            );
        }
        if n.is_multiple_of(3) {
            if wiped && n.is_multiple_of(30) {
                let c = out.access(ms, 502, "api", "/api");
                out.error(
                    ms,
                    "error",
                    Some(c),
                    "no live upstreams while connecting to upstream",
                    Some(("/api", "api")),
                );
            } else if !wiped {
                out.access(ms, 200, api[(n / 3 % 2) as usize], "/api");
            }
        } else if gone {
            if n % 20 == 1 {
                let c = out.access(ms, 502, "be", "/gone");
                out.error(
                    ms,
                    "error",
                    Some(c),
                    "no live upstreams while connecting to upstream",
                    Some(("/gone", "be")),
                );
            }
        } else if n % 3_000 == 1 {
            let peer = set[(n % 2) as usize];
            let c = out.access(ms, 504, peer, "/slow");
            out.error(ms, "error", Some(c), "upstream timed out (110: Connection timed out) while reading response header from upstream", Some(("/slow", peer)));
        } else {
            out.access(ms, 200, set[(n % 2) as usize], "/page");
        }
    }
    // Names the upstreams' universes (a redirect seen once).
    out.access(
        ms + 5,
        200,
        &format!("{}, be : {}", be_sets[0][0], api[0]),
        "/u",
    );
    out.access(
        ms + 6,
        200,
        &format!("{}, be : {}", be_sets[0][1], api[1]),
        "/u",
    );
    out.access(
        ms + 7,
        200,
        &format!("{}, be : {}", be_sets[1][0], api[0]),
        "/u",
    );
    out.access(
        ms + 8,
        200,
        &format!("{}, be : {}", be_sets[1][1], api[1]),
        "/u",
    );
    out.access(ms + 9, 200, &format!("{}, api : {}", api[0], api[1]), "/u");
    out.access(ms + 10, 200, &format!("{}, api : {}", api[1], api[0]), "/u");
    out.access.flush()?;
    out.error.flush()?;
    println!(
        "{} access lines, {} 502/504s, {} bytes in all, {} s of traffic",
        out.lines,
        out.failures,
        out.bytes,
        (ms - T0) / 1_000
    );
    Ok(())
}
