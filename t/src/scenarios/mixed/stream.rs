//! The stream side of the mixed scenario: the six upstreams and their
//! logs, the DNS schedules of their names, their sessions' load and
//! readiness, and waiting for their logs.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use super::parts::{Parts, REFUSED, WIPE_A, WIPE_B};
use super::Layout;
use crate::actors::dns::{Answer, DnsServer};
use crate::actors::tcp::Session;
use crate::nginx::Nginx;
use crate::rng::Rng;
/// The stream upstreams, each behind its own listener (the table's stream
/// rows, in [`STREAM_UPSTREAMS`] order).
pub const STREAM_UPSTREAMS: [&str; 6] = ["srace", "srace2", "srace3", "snx", "swipe", "srefused"];

/// The dead primaries the race upstreams share (each upstream probes
/// each once per connect timeout plus `fail_timeout`).
pub(super) const STREAM_HOLES: usize = 6;

/// The backup names of the three race upstreams (each race upstream
/// yields about one race per primary per two seconds: three of them give
/// the run enough races to score).
pub(super) const RACE_NAMES: [&str; 3] = [crate::scenarios::stream::NAME, "tcp2.test", "tcp3.test"];

/// The stream access logs nginx writes, by file name under `logs/`, with
/// their `log_format` name: `$connection` names each session (the
/// module's `*N` lines carry it), `$server_port` tells its upstream (each
/// has its own listener), with and without `$session_time`.
pub const STREAM_LOGS: [(&str, &str); 2] = [
    ("stream-sessions.log", "sessions"),
    ("stream-no-session-time.log", "sessions_no_time"),
];

/// The `stream {}` inside: the module in observe mode, one resolver, the
/// two logs, and the six upstreams, each behind a listener with
/// `proxy_half_close on` (a client half-closes after its payload; without
/// it nginx ends a session whose connect waited, before the echo comes
/// back, and readiness never sees one):
///
/// - `srace`, `srace2`, `srace3`: six dead primaries (connects time out
///   after 1 s, then `fail_timeout=1s` out of service) and a resolving
///   backup that moves at every re-resolve: a session that tried a dead
///   primary retries into a changed list (generation, 2-hop);
/// - `snx`: a resolving name answered NXDOMAIN between addresses (empty);
/// - `swipe`: two refusing peers with `max_fails=1` (unavailable);
/// - `srefused`: one refusing peer (`other`).
pub(super) fn stream_config(layout: Layout, p: &Parts) -> String {
    let [e0, e1, e2, e3] = [
        p.stream_echo[0].port(),
        p.stream_echo[1].port(),
        p.stream_echo[2].port(),
        p.stream_echo[3].port(),
    ];
    let [c0, c1] = p.closed;
    let fail_timeout = if layout == Layout::HeldOut {
        "3s"
    } else {
        "2s"
    };
    let holes: String = p
        .stream_holes
        .iter()
        .map(|h| {
            format!(
                "server {}:{} fail_timeout=1s;\n        ",
                crate::actors::tcp::HOLE,
                h.port()
            )
        })
        .collect();
    let upstreams = [
        format!("{holes}server {}:{e0} resolve backup;", RACE_NAMES[0]),
        format!("{holes}server {}:{e2} resolve backup;", RACE_NAMES[1]),
        format!("{holes}server {}:{e3} resolve backup;", RACE_NAMES[2]),
        format!("server snx.test:{e1} resolve;"),
        format!(
            "server {WIPE_A}:{c1} max_fails=1 fail_timeout={fail_timeout};\n        \
             server {WIPE_B}:{c1} max_fails=1 fail_timeout={fail_timeout};"
        ),
        format!("server {REFUSED}:{c0} max_fails=0;"),
    ];
    let mut out = format!(
        "    resolver ${{DNS}} valid=1s ipv6=off;\n    generation_retry_resnapshot off;\n    \
         log_format {f0} '$msec $connection $status \"$upstream_addr\" $session_time $server_port';\n    \
         log_format {f1} '$msec $connection $status \"$upstream_addr\" $server_port';\n    \
         access_log ${{PREFIX}}/logs/{l0} {f0};\n    access_log ${{PREFIX}}/logs/{l1} {f1};\n",
        l0 = STREAM_LOGS[0].0,
        f0 = STREAM_LOGS[0].1,
        l1 = STREAM_LOGS[1].0,
        f1 = STREAM_LOGS[1].1,
    );
    for ((name, servers), port) in STREAM_UPSTREAMS.iter().zip(upstreams).zip(p.stream_ports) {
        out.push_str(&format!(
            "    upstream {name} {{\n        zone {name} 64k;\n        {servers}\n    }}\n    \
             server {{\n        listen 127.0.0.1:{port};\n        proxy_pass {name};\n        \
             proxy_connect_timeout 1s;\n        proxy_half_close on;\n    }}\n"
        ));
    }
    out
}

/// The DNS schedules of the stream names once the load starts.
pub(super) fn stream_schedules(layout: Layout, dns: &DnsServer) {
    use crate::actors::tcp::{NEW, OLD};
    let a = |ip: Ipv4Addr| Answer::A(vec![ip]);
    let nx = match layout {
        Layout::Tuning => Answer::Cycle(vec![a(OLD), a(NEW), Answer::NxDomain]),
        Layout::HeldOut => Answer::Cycle(vec![a(OLD), Answer::NxDomain, a(NEW), Answer::NxDomain]),
    };
    for name in RACE_NAMES {
        dns.set(name, Answer::rotate(&[OLD, NEW]));
    }
    dns.set("snx.test", nx);
}

/// Sessions at `rate` a second for `duration`, each to one stream
/// upstream's listener drawn by the seed (a fifth each to the three race
/// upstreams and `snx`, a tenth each to the others); returns how many went
/// to each.
pub(super) async fn stream_load(p: &Parts, seed: u64, rate: f64, duration: Duration) -> Vec<usize> {
    let mut rng = Rng::new(seed ^ 0x5eed);
    let total = (duration.as_secs_f64() * rate).round() as usize;
    let picks: Vec<usize> = (0..total)
        .map(|_| match rng.next_u64() % 10 {
            k @ 0..8 => k as usize / 2,
            k => k as usize - 4,
        })
        .collect();
    let interval = Duration::from_secs_f64(1.0 / rate);
    let start = tokio::time::Instant::now();
    let mut sessions = Vec::with_capacity(total);
    for (i, k) in picks.iter().enumerate() {
        tokio::time::sleep_until(start + interval.mul_f64(i as f64)).await;
        let addr = std::net::SocketAddr::from((Ipv4Addr::LOCALHOST, p.stream_ports[*k]));
        sessions.push(tokio::spawn(async move {
            let s = Session::open(addr, format!("session {i}\n").into_bytes()).await;
            let _ = s.reply(Duration::from_secs(10)).await;
        }));
    }
    for s in sessions {
        s.await.expect("a session task");
    }
    (0..STREAM_UPSTREAMS.len())
        .map(|k| picks.iter().filter(|p| **p == k).count())
        .collect()
}

/// Readiness of the stream names: a session through each race upstream's
/// listener and `snx`'s that an echo server answered, all four at once
/// (a race upstream's first session spends a connect timeout on each dead
/// primary).
pub(super) async fn stream_ready(p: &Parts) {
    let ready: Vec<_> = p.stream_ports[..=RACE_NAMES.len()]
        .iter()
        .map(|port| {
            let addr = std::net::SocketAddr::from((Ipv4Addr::LOCALHOST, *port));
            tokio::spawn(async move {
                let deadline = Instant::now() + Duration::from_secs(30);
                loop {
                    let s = Session::open(addr, b"ready".to_vec()).await;
                    let r = s.reply(Duration::from_secs(10)).await;
                    if r.as_ref().is_ok_and(|r| r.split().is_some()) {
                        return;
                    }
                    assert!(
                        Instant::now() < deadline,
                        "stream listener {addr} never ready: {r:?}"
                    );
                }
            })
        })
        .collect();
    for r in ready {
        r.await.expect("a readiness task");
    }
}

/// Stream sessions a second, beside the http load.
pub(super) const STREAM_RATE: f64 = 80.0;

/// The stream logs once each holds `n` sessions (a session is logged when
/// it ends: up to two connect timeouts after it started).
pub(super) async fn stream_logged(nginx: &Nginx, n: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let texts: Vec<String> = STREAM_LOGS
            .iter()
            .map(|(file, _)| {
                std::fs::read_to_string(nginx.prefix().join("logs").join(file)).unwrap_or_default()
            })
            .collect();
        let lines: Vec<usize> = texts.iter().map(|t| t.lines().count()).collect();
        if lines[0] >= n && lines.iter().all(|l| *l == lines[0]) {
            return texts;
        }
        assert!(
            Instant::now() < deadline,
            "the stream logs hold {lines:?} sessions of at least {n}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
