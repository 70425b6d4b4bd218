//! Stream UDP (`listen ... udp`, `proxy_responses 1`): nginx does not
//! retry a UDP session once its datagram is sent. A peer that refuses it
//! (ICMP port unreachable) or never answers ends the session on that peer,
//! `proxy_next_upstream on` or not: `ngx_stream_proxy_process` takes a
//! failed receive for the end of the stream and a timeout for the end of
//! the session (1.28 to 1.31.x alike); only a failed `connect()` is
//! retried, and connecting a UDP socket does not fail on loopback. So a UDP
//! session never selects twice and never meets a changed generation: there
//! is no race to rescue. What this proves, stock and with the module: a
//! session to a dead peer is not retried to the live one (one hop, its
//! datagram never reaches the backend); the re-resolving peer follows its
//! name over UDP; the module counts nothing. Should nginx start retrying
//! UDP, the one-hop checks fail, and the race gets its rows.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use generation_retry_t::actors::backend::{ADDR_A, ADDR_B, ADDR_C};
use generation_retry_t::actors::dns::DnsServer;
use generation_retry_t::actors::load::Client;
use generation_retry_t::memcheck::patience;
use generation_retry_t::nginx::{free_port_at, refusing_port, Config, Flavor, Nginx};
use generation_retry_t::scenarios::http::status_object;
use generation_retry_t::scenarios::lab::epoch_now;
use generation_retry_t::scoring::metrics::{Counter, StatusExt};
use generation_retry_t::scoring::streamlog::{parse_stream_log, StreamEntry};
use generation_retry_t::shared::status_server;
use tokio::net::UdpSocket;

const NAME: &str = "udp.test";
/// nginx's UDP listeners' address: no other test binds UDP on it (the
/// DNS servers and clients bind 127.0.0.1), so the TCP port held for
/// it by [`free_port_at`] is free for UDP too.
const LISTEN: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 21);

/// Echoes `IP\n` for every datagram on [`ADDR_B`] and [`ADDR_C`] (one
/// port), recording each payload; and a silent socket on [`ADDR_A`]
/// that records what it reads and never answers.
struct Udp {
    port: u16,
    silent_port: u16,
    seen: Arc<Mutex<HashMap<String, Ipv4Addr>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Udp {
    fn drop(&mut self) {
        self.tasks.iter().for_each(|t| t.abort());
    }
}

async fn bind_pair() -> (UdpSocket, UdpSocket) {
    for _ in 0..50 {
        let b = UdpSocket::bind((ADDR_B, 0)).await.expect("bind");
        let port = b.local_addr().unwrap().port();
        if let Ok(c) = UdpSocket::bind((ADDR_C, port)).await {
            return (b, c);
        }
    }
    panic!("no UDP port free on both addresses");
}

impl Udp {
    async fn start() -> Udp {
        let seen = Arc::new(Mutex::new(HashMap::new()));
        let (b, c) = bind_pair().await;
        let port = b.local_addr().unwrap().port();
        let silent = UdpSocket::bind((ADDR_A, 0)).await.expect("bind");
        let silent_port = silent.local_addr().unwrap().port();
        let mut tasks = Vec::new();
        for (sock, ip, answer) in [
            (b, ADDR_B, true),
            (c, ADDR_C, true),
            (silent, ADDR_A, false),
        ] {
            let seen = seen.clone();
            tasks.push(tokio::spawn(async move {
                let mut buf = [0u8; 2048];
                while let Ok((n, from)) = sock.recv_from(&mut buf).await {
                    let payload = String::from_utf8_lossy(&buf[..n]).into_owned();
                    seen.lock().unwrap().insert(payload, ip);
                    if answer {
                        let _ = sock.send_to(format!("{ip}\n").as_bytes(), from).await;
                    }
                }
            }));
        }
        Udp {
            port,
            silent_port,
            seen,
            tasks,
        }
    }

    fn reached(&self, payload: &str) -> Option<Ipv4Addr> {
        self.seen.lock().unwrap().get(payload).copied()
    }
}

/// One session, sent: a datagram from a fresh client port. The socket
/// is kept for the whole test, so its port is never another session's
/// (the stream log names a session by it).
struct Session {
    sock: UdpSocket,
    port: u16,
    sent: f64,
}

impl Session {
    async fn send(listen: SocketAddr, payload: &str) -> Session {
        let sock = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .expect("bind");
        let port = sock.local_addr().unwrap().port();
        let sent = epoch_now() - 0.001;
        sock.send_to(payload.as_bytes(), listen)
            .await
            .expect("send");
        Session { sock, port, sent }
    }

    /// The reply's text, or `None` if none came within `wait`.
    async fn reply(&self, wait: Duration) -> Option<String> {
        let mut buf = [0u8; 2048];
        tokio::time::timeout(patience(wait), self.sock.recv(&mut buf))
            .await
            .ok()
            .and_then(Result::ok)
            .map(|n| String::from_utf8_lossy(&buf[..n]).into_owned())
    }

    /// The stream log's line for this session: its client port and
    /// listener, logged after it was sent (bounded wait: a session
    /// that timed out is logged when it ends).
    async fn entry(&self, nginx: &Nginx, listen: u16) -> StreamEntry {
        let deadline = Instant::now() + patience(Duration::from_secs(10));
        loop {
            if let Some(e) = parse_stream_log(&nginx.stream_log())
                .into_iter()
                .rev()
                .find(|e| e.port == self.port && e.server_port == listen && e.msec >= self.sent)
            {
                return e;
            }
            assert!(
                Instant::now() < deadline,
                "no stream log line for client port {}",
                self.port
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Sessions until one is answered by `ip`: nginx holds the address.
async fn until_answered_by(
    nginx: &Nginx,
    listen: SocketAddr,
    ip: Ipv4Addr,
    tag: &str,
    kept: &mut Vec<Session>,
) {
    let deadline = Instant::now() + patience(Duration::from_secs(15));
    for k in 0.. {
        let s = Session::send(listen, &format!("{tag}-{k}")).await;
        let answered = s.reply(Duration::from_secs(1)).await == Some(format!("{ip}\n"));
        kept.push(s);
        if answered {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "never answered by {ip}\n{}",
            nginx.error_log()
        );
    }
}

/// `refused_ip`: the dead peer that refuses (ICMP), on an address of
/// this test's own where nothing binds UDP.
async fn not_retried(flavor: Flavor, refused_ip: Ipv4Addr) {
    let dns = DnsServer::start().await;
    dns.set_a(NAME, ADDR_B);
    let udp = Udp::start().await;
    let refused = (refused_ip, refusing_port(refused_ip));
    let silent = (ADDR_A, udp.silent_port);
    let module = flavor.module.is_some();
    let ports = [free_port_at(LISTEN), free_port_at(LISTEN)];
    let on = if module {
        "generation_retry_resnapshot on;"
    } else {
        ""
    };
    let mut stream = format!("    resolver {} valid=1s ipv6=off;\n", dns.addr());
    for (i, ((ip, port), listen)) in [(refused, ports[0]), (silent, ports[1])]
        .into_iter()
        .enumerate()
    {
        stream.push_str(&format!(
            "    upstream u{i} {{ zone u{i} 64k; server {ip}:{port} max_fails=0; \
             server {NAME}:{} resolve; {on} }}\n    \
             server {{ listen {LISTEN}:{listen} udp; proxy_pass u{i}; \
             proxy_responses 1; proxy_timeout 1s; proxy_next_upstream on; }}\n",
            udp.port
        ));
    }
    let config = Config::new(flavor, format!("    {}\n", status_server(module))).stream(stream);
    let nginx = Nginx::start(&config);
    let http = Client::new(nginx.url(""));
    let mut kept = Vec::new();
    for (i, (dead, port)) in [(refused, ports[0]), (silent, ports[1])]
        .into_iter()
        .enumerate()
    {
        let listen = SocketAddr::from((LISTEN, port));
        until_answered_by(&nginx, listen, ADDR_B, &format!("ready{i}"), &mut kept).await;
        // Round-robin alternates the two peers: within a few sessions
        // one goes to the dead peer.
        let dead_addr = format!("{}:{}", dead.0, dead.1);
        let mut dead_hit = false;
        for k in 0..6 {
            let payload = format!("u{i}-{k}");
            let s = Session::send(listen, &payload).await;
            let quick = s.reply(Duration::from_secs(1)).await;
            let e = s.entry(&nginx, port).await;
            if e.upstream_addr != dead_addr {
                // A live peer's answer, if a loaded machine delayed it.
                let reply = match quick {
                    Some(r) => Some(r),
                    None => s.reply(Duration::from_secs(5)).await,
                };
                assert_eq!(reply, Some(format!("{ADDR_B}\n")), "u{i}: {e:?}");
                kept.push(s);
                continue;
            }
            dead_hit = true;
            assert_eq!(quick, None, "u{i}: {e:?}");
            let reached = udp.reached(&payload);
            assert!(
                reached != Some(ADDR_B),
                "u{i}: {payload} reached the live peer"
            );
            if i == 1 {
                assert_eq!(reached, Some(ADDR_A), "the silent peer read it");
            }
            // A refused datagram ends the session as done (200, no
            // reply); a silent peer's ends it at proxy_timeout (502).
            assert_eq!(e.status, if i == 0 { 200 } else { 502 }, "u{i}: {e:?}");
            kept.push(s);
            break;
        }
        assert!(dead_hit, "u{i}: no session went to the dead peer");
    }
    // The re-resolving peer follows its name over UDP.
    dns.set_a(NAME, ADDR_C);
    let listen = SocketAddr::from((LISTEN, ports[0]));
    until_answered_by(&nginx, listen, ADDR_C, "moved", &mut kept).await;
    if module {
        for i in 0..2 {
            let s = status_object(&http, "stream", Some(&format!("u{i}")))
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(s.count(Counter::BusyRetry), 0, "{s}");
            assert_eq!(s.count(Counter::BusyFirst), 0, "{s}");
            assert_eq!(s.count(Counter::Resnapshots), 0, "{s}");
        }
    }
    nginx.finish();
}

/// Non-regression guard: stock nginx does not retry a UDP session.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stock_does_not_retry_a_udp_session() {
    not_retried(Flavor::stock(), Ipv4Addr::new(127, 0, 0, 22)).await
}

/// Non-regression guard: nginx never retries a UDP session, so neither
/// does the module; with the module doing nothing this holds too.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn module_leaves_udp_sessions_as_nginx_does() {
    not_retried(Flavor::with_module(), Ipv4Addr::new(127, 0, 0, 23)).await
}
