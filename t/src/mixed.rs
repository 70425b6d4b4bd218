//! One nginx with many upstreams failing in every way at once, the way an
//! operator's logs look: the scenario `generation-retry-diagnose` is scored
//! on (`t/tests/diagnose_mixed.rs`), with the ground truth from the module.
//!
//! Two workers, nine upstreams behind one server, each under its own
//! location (`/NAME/...`), each with a `zone` and the module in observe
//! mode (`generation_retry_resnapshot off` at `http` level), so nginx fails
//! exactly as stock does and the module writes each `no live upstreams`'
//! `cause=` before it. The families at once:
//!
//! | upstream | what fails | family of its `no live upstreams` |
//! |---|---|---|
//! | `move1` | one resolving peer whose address moves at every re-resolve; the backend reclaims reused connections | generation (2-hop) |
//! | `move2` | a resolving name of several records that change | generation (2-hop) |
//! | `nx` | a resolving name answered NXDOMAIN between addresses | empty, and generation |
//! | `wipe` | two refusing peers with `max_fails=1` | unavailable (and `other` for the attempts) |
//! | `conns` | `max_conns=1` on a slow peer | unavailable |
//! | `down` | every peer `down` | unavailable |
//! | `refused` | one refusing peer | `other` |
//! | `slow` | a timeout (read or connect) | `other` (504) |
//! | `reset` | a peer that resets each connection | `other` |
//!
//! Each request has its own path (`/NAME/SEQ`), chosen among the upstreams
//! by the seed, so the access log and the module's lines join on it. nginx
//! writes the same requests in three formats at once: the harness's
//! (`$msec` and `$request_time`), the same without `$request_time`, and
//! `combined` plus `"$upstream_addr"` (no `$msec`).
//!
//! [`Layout`] holds the two sets: what the diagnosis rules may be tuned on
//! and what they are scored on. The held-out set differs in: `move1`
//! rotating over three addresses instead of two; `move2` cycling {A,B,C},
//! {A}, {B,C} instead of {A,B}, {B,C}, with `max_fails=3 fail_timeout=2s`
//! instead of `max_fails=0`; `nx` answering A, NXDOMAIN, C, B, NXDOMAIN
//! instead of A, B, NXDOMAIN; `wipe` a resolving name (`fail_timeout=3s`)
//! instead of two static peers; `conns` two peers instead of one; `down`
//! three peers instead of one; `slow` a connect timeout instead of a read
//! timeout. The seed fixes which upstream each request goes to and the
//! backends' reclaim draws; DNS and fault timing follow the clock, so runs
//! of one seed differ. In both sets the load goes on 2.5 s after every name
//! stops changing (`STILL_TAIL`), so that every race has traffic after it.

use std::ffi::OsString;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use reqwest::Method;
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::accesslog::Entry;
use crate::backend::{Backend, ADDR_A, ADDR_B, ADDR_C};
use crate::dns::{Answer, DnsServer};
use crate::labels::{self, Score, Truth, Truths};
use crate::load::{open_loop, Client};
use crate::nginx::{free_port, Config, Flavor, Nginx};
use crate::rng::Rng;
use crate::shared::KEEPALIVE_LOCATION;
use crate::stream::{BlackHole, EchoBackend, Session};

/// Which set of upstreams and faults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// The set the rules may be studied and tuned on.
    Tuning,
    /// The set the test scores: other schedules, peer counts and faults,
    /// never used to tune a rule.
    HeldOut,
}

impl Layout {
    pub fn name(self) -> &'static str {
        match self {
            Layout::Tuning => "tuning",
            Layout::HeldOut => "held-out",
        }
    }
}

/// The knobs of one mixed run.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    pub layout: Layout,
    pub seed: u64,
    /// Requests per second over all upstreams, open loop.
    pub rate: f64,
    /// How long the names change under load; the load runs
    /// `STILL_TAIL` longer, with every name still.
    pub duration: Duration,
}

/// The three access logs nginx writes, by file name under `logs/`, with
/// their `log_format` name (the first is the harness's own).
pub const ACCESS_LOGS: [(&str, &str); 3] = [
    ("access.log", crate::accesslog::LOG_FORMAT_NAME),
    ("no-request-time.log", "no_request_time"),
    ("combined.log", "combined_upstream"),
];

/// What a mixed run leaves to score.
pub struct Run {
    /// `nginx -T` as nginx printed it, paths under `prefix`.
    pub conf_dump: String,
    /// nginx's prefix when it ran (the logs' paths in `conf_dump` start
    /// with it).
    pub prefix: PathBuf,
    /// Each of [`ACCESS_LOGS`], in its order.
    pub access: Vec<String>,
    /// Each of [`STREAM_LOGS`], in its order (the readiness sessions
    /// included).
    pub stream: Vec<String>,
    /// Sessions sent, per stream upstream.
    pub stream_sessions: Vec<(&'static str, usize)>,
    /// The error log, the module's `cause=` lines in it.
    pub error: String,
    /// Requests sent, per upstream, in [`UPSTREAMS`] order.
    pub sent: Vec<(&'static str, usize)>,
}

/// The upstreams, in the order of the table above.
pub const UPSTREAMS: [&str; 9] = [
    "move1", "move2", "nx", "wipe", "conns", "down", "refused", "slow", "reset",
];

/// Each upstream's share of the load, in [`UPSTREAMS`] order: the races
/// need the most (a race takes a reclaimed request in flight across a
/// re-resolve).
const SHARES: [f64; 9] = [0.22, 0.22, 0.16, 0.08, 0.10, 0.05, 0.05, 0.06, 0.06];

/// Addresses of their own for the refusing and resetting peers.
const WIPE_A: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 6);
const WIPE_B: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 7);
const REFUSED: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 8);
const RESET: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 9);

/// A listener that resets every connection once a request arrives
/// (`SO_LINGER` 0, then close): nginx logs `recv() failed (104: Connection
/// reset by peer)`.
struct Resetter {
    port: u16,
    task: JoinHandle<()>,
}

impl Resetter {
    async fn start() -> Resetter {
        let listener = TcpListener::bind((RESET, 0)).await.expect("bind 127.0.0.9");
        let port = listener.local_addr().expect("local address").port();
        let task = tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buf = [0u8; 1024];
                    let _ = s.read(&mut buf).await;
                    // A zero linger does not block the drop (the warning's
                    // case is a positive one): the close sends a reset.
                    #[allow(deprecated)]
                    let _ = s.set_linger(Some(Duration::ZERO));
                    drop(s);
                });
            }
        });
        Resetter { port, task }
    }
}

impl Drop for Resetter {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The running parts of the scenario besides nginx.
struct Parts {
    dns: DnsServer,
    moving: [Backend; 3],
    conns: Backend,
    slow: Backend,
    hole: BlackHole,
    reset: Resetter,
    /// Ports nobody listens on: `wipe`'s two and `refused`'s.
    closed: [u16; 2],
    /// The stream part: the race upstreams' dead primaries and their backups' echo
    /// servers, `snx`'s echo servers, and a listen port per upstream.
    stream_holes: Vec<BlackHole>,
    stream_echo: [EchoBackend; 4],
    stream_ports: [u16; 6],
}

impl Parts {
    async fn start() -> Parts {
        let dns = DnsServer::start().await;
        let moving = [
            Backend::start().await,
            Backend::start().await,
            Backend::start().await,
        ];
        let conns = Backend::start().await;
        conns.set_delay(Duration::from_millis(150));
        let slow = Backend::start().await;
        slow.set_delay(Duration::from_secs(2));
        Parts {
            dns,
            moving,
            conns,
            slow,
            hole: BlackHole::start().await,
            reset: Resetter::start().await,
            closed: [free_port(), free_port()],
            stream_holes: {
                let mut holes = Vec::new();
                for _ in 0..STREAM_HOLES {
                    holes.push(BlackHole::start().await);
                }
                holes
            },
            stream_echo: [
                EchoBackend::start().await,
                EchoBackend::start().await,
                EchoBackend::start().await,
                EchoBackend::start().await,
            ],
            stream_ports: [
                free_port(),
                free_port(),
                free_port(),
                free_port(),
                free_port(),
                free_port(),
            ],
        }
    }
}

/// The stream upstreams, each behind its own listener (the table's stream
/// rows, in [`STREAM_UPSTREAMS`] order).
pub const STREAM_UPSTREAMS: [&str; 6] = ["srace", "srace2", "srace3", "snx", "swipe", "srefused"];

/// The dead primaries the race upstreams share (each upstream probes
/// each once per connect timeout plus `fail_timeout`).
const STREAM_HOLES: usize = 6;

/// The backup names of the three race upstreams (each race upstream
/// yields about one race per primary per two seconds: three of them give
/// the run enough races to score).
const RACE_NAMES: [&str; 3] = [crate::stream::NAME, "tcp2.test", "tcp3.test"];

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
fn stream_config(layout: Layout, p: &Parts) -> String {
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
                crate::stream::HOLE,
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
fn stream_schedules(layout: Layout, dns: &DnsServer) {
    use crate::stream::{NEW, OLD};
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
async fn stream_load(p: &Parts, seed: u64, rate: f64, duration: Duration) -> Vec<usize> {
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
async fn stream_ready(p: &Parts) {
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

/// The `upstream` blocks and the locations of `layout`.
fn upstreams(layout: Layout, p: &Parts) -> (String, String) {
    let [m1, m2, mn] = [p.moving[0].port(), p.moving[1].port(), p.moving[2].port()];
    let [c0, c1] = p.closed;
    let held = layout == Layout::HeldOut;
    let wipe = if held {
        // Held out: the wiped peers come from a name.
        format!("server wipe.test:{c0} resolve max_fails=1 fail_timeout=3s;")
    } else {
        format!(
            "server {WIPE_A}:{c0} max_fails=1 fail_timeout=2s;\n        \
             server {WIPE_B}:{c0} max_fails=1 fail_timeout=2s;"
        )
    };
    let conns = if held {
        format!(
            "server {ADDR_A}:{p} max_conns=1;\n        server {ADDR_B}:{p} max_conns=1;",
            p = p.conns.port()
        )
    } else {
        format!("server {ADDR_C}:{} max_conns=1;", p.conns.port())
    };
    let down = if held {
        format!(
            "server {ADDR_A}:{c1} down;\n        server {ADDR_B}:{c1} down;\n        \
             server {ADDR_C}:{c1} down;"
        )
    } else {
        format!("server {ADDR_C}:{c1} down;")
    };
    // A reclaimed request counts as a failure of its peer: with the
    // default `max_fails=1` the reclaims alone would keep move2's peers
    // out of service most of the time.
    let move2_fails = if held {
        "max_fails=3 fail_timeout=2s"
    } else {
        "max_fails=0"
    };
    let (slow, slow_location) = if held {
        (
            format!("server {}:{};", crate::stream::HOLE, p.hole.port()),
            "proxy_connect_timeout 300ms;",
        )
    } else {
        (
            format!("server {ADDR_A}:{};", p.slow.port()),
            "proxy_read_timeout 300ms;",
        )
    };
    let servers: [(&str, String, &str); 9] = [
        (
            "move1",
            format!("server move1.test:{m1} resolve;\n        keepalive 16;"),
            KEEPALIVE_LOCATION,
        ),
        (
            "move2",
            format!("server move2.test:{m2} resolve {move2_fails};\n        keepalive 16;"),
            KEEPALIVE_LOCATION,
        ),
        (
            "nx",
            format!("server nx.test:{mn} resolve;\n        keepalive 16;"),
            KEEPALIVE_LOCATION,
        ),
        ("wipe", wipe, ""),
        ("conns", conns, ""),
        ("down", down, ""),
        ("refused", format!("server {REFUSED}:{c1} max_fails=0;"), ""),
        ("slow", slow, slow_location),
        ("reset", format!("server {RESET}:{};", p.reset.port), ""),
    ];
    let mut blocks = String::new();
    let mut locations = String::new();
    for (name, servers, location) in servers {
        blocks.push_str(&format!(
            "    upstream {name} {{\n        zone {name} 64k;\n        {servers}\n    }}\n"
        ));
        locations.push_str(&format!(
            "        location /{name}/ {{\n            proxy_pass http://{name};\n            \
             {location}\n        }}\n"
        ));
    }
    (blocks, locations)
}

/// The DNS schedules once the load starts (before it, every name answers
/// its first address, so the readiness probes pass).
fn schedules(layout: Layout, dns: &DnsServer) {
    let a = |ips: &[Ipv4Addr]| Answer::A(ips.to_vec());
    let (move1, move2, nx) = match layout {
        Layout::Tuning => (
            Answer::rotate(&[ADDR_A, ADDR_B]),
            Answer::Cycle(vec![a(&[ADDR_A, ADDR_B]), a(&[ADDR_B, ADDR_C])]),
            Answer::Cycle(vec![a(&[ADDR_A]), a(&[ADDR_B]), Answer::NxDomain]),
        ),
        Layout::HeldOut => (
            Answer::rotate(&[ADDR_A, ADDR_B, ADDR_C]),
            Answer::Cycle(vec![
                a(&[ADDR_A, ADDR_B, ADDR_C]),
                a(&[ADDR_A]),
                a(&[ADDR_B, ADDR_C]),
            ]),
            Answer::Cycle(vec![
                a(&[ADDR_A]),
                Answer::NxDomain,
                a(&[ADDR_C]),
                a(&[ADDR_B]),
                Answer::NxDomain,
            ]),
        ),
    };
    dns.set("move1.test", move1);
    dns.set("move2.test", move2);
    dns.set("nx.test", nx);
}

/// How long the load goes on after every name answers one fixed set:
/// nginx takes that set at its next re-resolve (`valid=1s`), itself a last
/// change, so each list's last change is followed by a second or more of
/// traffic that shows it, as in any log but one cut at that moment.
/// Without it, a race near the run's end has little or nothing logged
/// after it to tell it from a peer going out of service, and which run
/// ends on one is the clock's draw: a CI run at a0a04e5 misplaced 9 of its
/// 84 races, all among the last 1.7 s of requests (diagnose/README.md,
/// "Accuracy", says where the tool stands on a cut log).
const STILL_TAIL: Duration = Duration::from_millis(2_500);

/// Every name of both schedules, fixed at one address set (not NXDOMAIN),
/// so that the list's last state serves and shows itself.
fn still_schedules(dns: &DnsServer) {
    dns.set_a("move1.test", ADDR_A);
    dns.set("move2.test", Answer::A(vec![ADDR_A, ADDR_B, ADDR_C]));
    dns.set_a("nx.test", ADDR_B);
    for name in RACE_NAMES {
        dns.set_a(name, crate::stream::NEW);
    }
    dns.set_a("snx.test", crate::stream::NEW);
}

/// nginx's configuration: the module in observe mode for every upstream,
/// one resolver, the three access logs.
fn config(layout: Layout, p: &Parts) -> Config {
    let (blocks, locations) = upstreams(layout, p);
    let http = format!(
        r#"
    resolver ${{DNS}} valid=1s ipv6=off;
    resolver_timeout 3s;
    generation_retry_resnapshot off;
    log_format no_request_time '$msec $status "$upstream_addr" "$request" "$upstream_status"';
    log_format combined_upstream '$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" "$upstream_addr"';
    access_log ${{PREFIX}}/logs/{nrt} no_request_time;
    access_log ${{PREFIX}}/logs/{comb} combined_upstream;
{blocks}
    server {{
        listen 127.0.0.1:${{PORT}};
{locations}
        location = /status {{
            generation_retry_status;
        }}
    }}
"#,
        nrt = ACCESS_LOGS[1].0,
        comb = ACCESS_LOGS[2].0,
    );
    Config::new(Flavor::with_module(), http)
        .stream(stream_config(layout, p))
        .var("DNS", p.dns.addr())
        .workers(2)
}

/// Runs the scenario of `opts` and returns its logs and configuration.
pub async fn run(opts: &Options) -> Run {
    let parts = Parts::start().await;
    let dns = &parts.dns;
    for name in ["move1.test", "move2.test", "nx.test"] {
        dns.set_a(name, ADDR_A);
    }
    dns.set("wipe.test", Answer::A(vec![WIPE_A, WIPE_B]));
    for name in RACE_NAMES {
        dns.set_a(name, crate::stream::OLD);
    }
    dns.set_a("snx.test", crate::stream::OLD);
    let config = config(opts.layout, &parts);
    let nginx = Nginx::start(&config);
    let client = Client::new(nginx.url(""));
    for name in ["move1", "move2", "nx"] {
        wait_ready(&client, name).await;
    }
    stream_ready(&parts).await;
    // Readiness sessions have ended, so they are logged.
    let ready_sessions =
        std::fs::read_to_string(nginx.prefix().join("logs").join(STREAM_LOGS[0].0))
            .unwrap_or_default()
            .lines()
            .count();
    let conf_dump = dump(&config, &nginx);

    schedules(opts.layout, dns);
    stream_schedules(opts.layout, dns);
    let load_for = opts.duration + STILL_TAIL;
    for (i, b) in parts.moving.iter().enumerate() {
        b.set_reclaim_after(0.25, opts.seed + i as u64, Duration::from_millis(900));
    }
    let choices: Vec<usize> = {
        let mut rng = Rng::new(opts.seed);
        let total = (load_for.as_secs_f64() * opts.rate).round() as usize;
        (0..total).map(|_| pick(&mut rng)).collect()
    };
    let (sent, sessions, ()) = tokio::join!(
        open_loop(&client, opts.rate, load_for, |i| {
            let name = UPSTREAMS[choices[i as usize]];
            (Method::GET, format!("/{name}/{i}"), None)
        }),
        stream_load(&parts, opts.seed, STREAM_RATE, load_for),
        async {
            tokio::time::sleep(opts.duration).await;
            still_schedules(dns);
        }
    );
    let access = logged(&nginx, sent.len()).await;
    let stream = stream_logged(&nginx, ready_sessions + sessions.iter().sum::<usize>()).await;
    let run = Run {
        conf_dump,
        prefix: nginx.prefix().to_path_buf(),
        access,
        stream,
        stream_sessions: STREAM_UPSTREAMS.iter().copied().zip(sessions).collect(),
        error: nginx.error_log(),
        sent: UPSTREAMS
            .iter()
            .enumerate()
            .map(|(k, name)| (*name, choices.iter().filter(|c| **c == k).count()))
            .collect(),
    };
    nginx.finish();
    run
}

/// The three access logs once each holds every one of the `n` load
/// requests (a worker writes a request's lines just after its response,
/// one log after the other).
async fn logged(nginx: &Nginx, n: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let texts: Vec<String> = ACCESS_LOGS
            .iter()
            .map(|(file, _)| {
                std::fs::read_to_string(nginx.prefix().join("logs").join(file)).unwrap_or_default()
            })
            .collect();
        let load = crate::accesslog::parse(&texts[0])
            .iter()
            .filter(|e| !e.path.contains("/ready-"))
            .count();
        let lines: Vec<usize> = texts.iter().map(|t| t.lines().count()).collect();
        if load >= n && lines.iter().all(|l| *l == lines[0]) {
            return texts;
        }
        assert!(
            Instant::now() < deadline,
            "the access logs hold {load} of {n} load requests, lines per log {lines:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Stream sessions a second, beside the http load.
const STREAM_RATE: f64 = 80.0;

/// The stream logs once each holds `n` sessions (a session is logged when
/// it ends: up to two connect timeouts after it started).
async fn stream_logged(nginx: &Nginx, n: usize) -> Vec<String> {
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

/// An upstream's index, drawn by [`SHARES`].
fn pick(rng: &mut Rng) -> usize {
    let mut u = rng.unit();
    for (k, share) in SHARES.iter().enumerate() {
        if u < *share {
            return k;
        }
        u -= share;
    }
    SHARES.len() - 1
}

/// `nginx -T` of the running configuration, as an operator would pass it.
fn dump(config: &Config, nginx: &Nginx) -> String {
    let out = Command::new(&config.flavor.binary)
        .arg("-T")
        .arg("-p")
        .arg(nginx.prefix())
        .arg("-c")
        .arg(nginx.prefix().join("nginx.conf"))
        .output()
        .expect("run nginx -T");
    assert!(
        out.status.success(),
        "nginx -T failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("nginx -T prints text")
}

/// Readiness: `/NAME/ready-K` answered 200 (the name resolved).
async fn wait_ready(client: &Client, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    for k in 0.. {
        if client.get(&format!("/{name}/ready-{k}")).await.status() == 200 {
            return;
        }
        assert!(Instant::now() < deadline, "{name} never became ready");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

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
fn stream_entry(line: &str) -> Option<Entry> {
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
        hops: crate::accesslog::parse_upstream_addr(upstream_addr),
        method: String::new(),
        path: format!("*{connection}"),
        request_time: 0.0,
        resnapshots: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_session_line_is_named_by_its_connection() {
        let e = stream_entry(r#"1796252587.597 41 502 "127.0.0.2:9, srace" 1.002"#).unwrap();
        assert_eq!(e.path, "*41");
        assert_eq!(e.status, 502);
        assert_eq!(e.shape(), crate::accesslog::Shape::TwoHop { attempts: 1 });
        assert!(stream_entry("garbage").is_none());
    }

    #[test]
    fn shares_sum_to_one_and_every_upstream_is_drawn() {
        assert!((SHARES.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        let mut rng = Rng::new(1);
        let mut seen = [0usize; 9];
        for _ in 0..10_000 {
            seen[pick(&mut rng)] += 1;
        }
        for (k, n) in seen.iter().enumerate() {
            let want = SHARES[k] * 10_000.0;
            assert!(
                (*n as f64 - want).abs() < want * 0.2,
                "{}: {n}",
                UPSTREAMS[k]
            );
        }
    }
}
