//! The race of nginx/nginx#1656 through every other protocol nginx's http
//! upstream speaks: FastCGI, uwsgi, SCGI, memcached, gRPC and HTTP/2
//! (`proxy_http_version 2`, nginx 1.29.4 and later; before, `nginx -t`
//! refusing it is what its rows check), each against a backend speaking it
//! on loopback (`actors::backend::Wire`). The peer layer is the same for
//! all of them, so is the refusal; these prove it, and that each
//! protocol's own retry rules survive a re-snapshot.
//!
//! Per protocol (`cargo test -p generation-retry-t --test protocols
//! fastcgi::`): stock nginx gives the 2-hop 502; the module `on` rescues and
//! counts; `off` counts and changes nothing; the patched nginx rescues; and
//! what nginx would not resend (`*_next_upstream off`, a POST once sent,
//! `*_next_upstream_tries 1`) is not resent by the module either.
//!
//! FastCGI (`fastcgi_keep_conn on`), memcached, gRPC and HTTP/2 keep
//! connections alive: the race is HTTP's (one re-resolving peer, the held
//! request on a cached connection). uwsgi and SCGI do not: two peers, the
//! re-resolving one and a static one, give the retry, and a fresh snapshot
//! holds both, so hop 2 may be either. Then stream UDP, which nginx never
//! retries, and nginx's HTTP/2 stale stream id.

use std::net::SocketAddr;

use generation_retry_t::actors::backend::{Wire, ADDR_C};
use generation_retry_t::nginx::{test_config, Config, Flavor};
use generation_retry_t::scenarios::http::{patched_rescue_line, Lab, Race, Spec};
use generation_retry_t::scoring::accesslog::Hop;
use generation_retry_t::scoring::errorlog::{NO_LIVE, STALE_STREAM};
use generation_retry_t::scoring::metrics::{log, Counter, Protocol, StatusExt};
use generation_retry_t::shared::UPSTREAM;
use reqwest::Method;

const ON: &str = "generation_retry_resnapshot on;";
const OFF: &str = "generation_retry_resnapshot off;";
/// Races per row.
const RACES: usize = 2;

/// Stock's failure: 502, `$upstream_addr` "FIRST:P, be", and error.log's
/// `upstream prematurely closed connection` then `no live upstreams` on the
/// request's connection.
fn assert_two_hop(lab: &Lab, race: &Race) {
    let wire = lab.backend.wire();
    assert_eq!(race.response.status(), 502, "{wire:?} {race:?}");
    assert_eq!(
        race.entry.upstream_addr(),
        format!("{}, {UPSTREAM}", lab.upstream_addr(race.first_hop)),
        "{wire:?}"
    );
    assert!(
        lab.two_hop_pair(&race.path).is_some(),
        "{wire:?} {}: no prematurely-closed / no-live pair:\n{}",
        race.path,
        lab.nginx.error_log()
    );
}

/// A rescue: 200 answered by hop 2, hop 1 where the backend held the first
/// attempt, hop 2 on the fresh list (the new address, or the static peer
/// where the protocol needs one), never the old address nor `be`.
fn assert_rescued(lab: &Lab, race: &Race) {
    let wire = lab.backend.wire();
    let mut fresh = vec![lab.upstream_addr(race.new)];
    if !wire.keepalive() {
        fresh.push(lab.upstream_addr(ADDR_C));
    }
    let [Hop::Addr(a), Hop::Addr(b)] = race.entry.hops.as_slice() else {
        panic!(
            "{wire:?} {}: hops {:?}\n{}",
            race.path,
            race.entry.hops,
            lab.nginx.error_log()
        );
    };
    assert_eq!(a.to_string(), lab.upstream_addr(race.first_hop), "{wire:?}");
    assert!(
        fresh.contains(&b.to_string()),
        "{wire:?}: hop 2 {b}, fresh {fresh:?}"
    );
    let ip = match b {
        SocketAddr::V4(v4) => *v4.ip(),
        SocketAddr::V6(_) => unreachable!("IPv4 only"),
    };
    assert_eq!(race.response.status(), 200, "{wire:?} {race:?}");
    assert_eq!(race.response.body, lab.backend.body(ip), "{wire:?}");
}

/// What nginx does not resend was not resent: one hop, the first attempt's
/// 502, the backend reached once for the path, nothing re-snapshotted.
async fn assert_not_resent(lab: &Lab, race: &Race, method: &str, rule: &str) {
    let wire = lab.backend.wire();
    assert_eq!(race.response.status(), 502, "{wire:?} {rule}: {race:?}");
    assert_eq!(
        race.entry.upstream_addr(),
        lab.upstream_addr(race.first_hop),
        "{wire:?} {rule}: one hop"
    );
    let received = lab.backend.received_by_path(method);
    assert_eq!(received.get(&race.path), Some(&1), "{wire:?} {rule}");
    let s = lab.status(UPSTREAM).await;
    assert_eq!(s.count(Counter::Resnapshots), 0, "{wire:?} {rule}: {s}");
    assert_eq!(s.count(Counter::Rescued), 0, "{wire:?} {rule}: {s}");
}

/// Whether the nginx under test speaks `wire`; where it does not (HTTP/2
/// to upstreams before 1.29.4), proves it: `nginx -t` refuses its lines.
fn speaks(wire: Wire) -> bool {
    if generation_retry_t::nginx::version() >= wire.since() {
        return true;
    }
    let http = format!(
        "upstream {UPSTREAM} {{ server 127.0.0.1:1; }}\n    server {{ listen 127.0.0.1:${{PORT}}; \
         location / {{ {} }} }}",
        wire.pass()
    );
    let t = test_config(&Config::new(Flavor::stock(), http));
    assert!(
        !t.ok && t.stderr.contains("invalid value"),
        "{wire:?} is accepted by this nginx: {}",
        t.stderr
    );
    false
}

async fn stock_fails(wire: Wire) {
    if !speaks(wire) {
        return;
    }
    let mut lab = Lab::start_spec(Spec::wire(Flavor::stock(), wire, "")).await;
    for i in 0..RACES {
        let race = lab.race_once(i).await;
        assert_two_hop(&lab, &race);
    }
    lab.finish();
}

async fn module_on_rescues(wire: Wire) {
    if !speaks(wire) {
        return;
    }
    let mut lab = Lab::start_spec(Spec::wire(Flavor::with_module(), wire, ON)).await;
    for i in 0..RACES {
        let race = lab.race_once(i).await;
        assert_rescued(&lab, &race);
        assert_eq!(race.entry.resnapshots, Some(1), "{wire:?}");
        let s = lab.status(UPSTREAM).await;
        let n = (i + 1) as u64;
        assert_eq!(s.count(Counter::BusyRetry), n, "{wire:?}: {s}");
        assert_eq!(s.count(Counter::Rescued), n, "{wire:?}: {s}");
        assert_eq!(s.count(Counter::Failed), 0, "{wire:?}: {s}");
    }
    lab.assert_rescue_log(&log::rescued_marker(Protocol::Http, UPSTREAM), RACES);
    lab.finish();
}

async fn module_off_counts(wire: Wire) {
    if !speaks(wire) {
        return;
    }
    let mut lab = Lab::start_spec(Spec::wire(Flavor::with_module(), wire, OFF)).await;
    let race = lab.race_once(0).await;
    assert_two_hop(&lab, &race);
    let s = lab.status(UPSTREAM).await;
    assert_eq!(s.count(Counter::BusyRetry), 1, "{wire:?}: {s}");
    assert_eq!(s.count(Counter::Failed), 1, "{wire:?}: {s}");
    assert_eq!(s.count(Counter::NoLiveGeneration), 1, "{wire:?}: {s}");
    assert_eq!(s.count(Counter::Rescued), 0, "{wire:?}: {s}");
    lab.finish();
}

async fn patched_rescues(wire: Wire) {
    if !speaks(wire) {
        return;
    }
    let mut lab = Lab::start_spec(Spec::wire(Flavor::patched(), wire, "")).await;
    for i in 0..RACES {
        let race = lab.race_once(i).await;
        assert_rescued(&lab, &race);
        let lines = lab.request_errors(&race.path);
        let patch = patched_rescue_line(UPSTREAM);
        assert_eq!(
            lines.iter().filter(|l| l.contains(&patch)).count(),
            1,
            "{wire:?}: {lines:#?}"
        );
        assert!(!lines.iter().any(|l| l.contains(NO_LIVE)), "{lines:#?}");
    }
    lab.finish();
}

/// With the module `on`: `*_next_upstream off`, a POST (where the protocol
/// carries one), and `*_next_upstream_tries 1` with two peers: each fails
/// its first attempt and is not retried, as on stock nginx.
async fn module_keeps_the_retry_rules(wire: Wire) {
    if !speaks(wire) {
        return;
    }
    let p = wire.prefix();
    let off = format!("{p}_next_upstream off;");
    let mut lab =
        Lab::start_spec(Spec::wire(Flavor::with_module(), wire, ON).location_extra(&off)).await;
    let race = lab.race_once(0).await;
    assert_not_resent(&lab, &race, "GET", &off).await;
    lab.finish();

    if wire.has_body() {
        let mut lab = Lab::start_spec(Spec::wire(Flavor::with_module(), wire, ON)).await;
        let race = lab.race_method(0, Method::POST).await;
        assert_not_resent(&lab, &race, "POST", "POST").await;
        lab.finish();
    }

    let tries = format!("{p}_next_upstream_tries 1;");
    let mut spec = Spec::two_peers(Flavor::with_module(), "", ON).location_extra(&tries);
    spec.wire = wire;
    let mut lab = Lab::start_spec(spec).await;
    let race = lab.race_once(0).await;
    assert_not_resent(&lab, &race, "GET", &tries).await;
    lab.finish();
}

macro_rules! protocol {
    ($name:ident, $wire:expr) => {
        mod $name {
            use super::*;

            /// Non-regression guard: stock nginx, without the module: the
            /// race is real for this protocol.
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn stock_fails_with_the_two_hop_502() {
                stock_fails($wire).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn module_on_rescues_and_counts() {
                module_on_rescues($wire).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn module_off_counts_and_changes_nothing() {
                module_off_counts($wire).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn patched_nginx_rescues() {
                patched_rescues($wire).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn module_keeps_the_retry_rules() {
                super::module_keeps_the_retry_rules($wire).await
            }
        }
    };
}

/// A retry on a fresh connection after a failed attempt on a cached one
/// (no DNS change): `(status, error.log lines)` of `/plain/0`, checked to
/// be two attempts at the current address, the second on a new connection
/// (its first request there).
async fn retry_on_a_fresh_connection(lab: &mut Lab) -> (u16, Vec<String>) {
    let wire = lab.backend.wire();
    let (response, _) = lab.retry_without_flip(0).await;
    let entry = lab.access_entry("/plain/0").await;
    let addr = lab.upstream_addr(lab.current);
    assert_eq!(entry.upstream_addr(), format!("{addr}, {addr}"), "{wire:?}");
    let seen: Vec<_> = lab
        .backend
        .seen()
        .into_iter()
        .filter(|s| s.path == "/plain/0")
        .collect();
    let [first, second] = seen.as_slice() else {
        panic!("{wire:?}: {seen:#?}");
    };
    assert!(first.index_on_conn > 0, "{wire:?}: {first:?}");
    assert!(
        second.conn != first.conn && second.index_on_conn == 0,
        "{wire:?}: the retry was not on a new connection: {second:?}"
    );
    if response.status() == 200 {
        assert_eq!(response.body, lab.backend.body(lab.current), "{wire:?}");
    }
    (response.status(), lab.request_errors("/plain/0"))
}

/// nginx's own HTTP/2 defect (gRPC, and `proxy_http_version 2` from
/// 1.29.4; `errorlog::STALE_STREAM`): a request whose attempt on a
/// cached connection failed is retried on a fresh connection with the
/// cached one's stream id, which the backend answers and nginx refuses,
/// a 502, without any DNS change. The race rows above warm a connection
/// to the new address before the retry, so their retry reuses it; a rescue
/// that opens a fresh connection meets this defect as any retry does. This
/// fails once nginx is fixed; the patched nginx carries the fix.
async fn stock_stale_stream_id(wire: Wire) {
    if !speaks(wire) {
        return;
    }
    let mut lab = Lab::start_spec(Spec::wire(Flavor::stock(), wire, "")).await;
    let (status, lines) = retry_on_a_fresh_connection(&mut lab).await;
    assert_eq!(status, 502, "{wire:?}: {lines:#?}");
    assert!(
        lines.iter().any(|l| l.contains(STALE_STREAM)),
        "{wire:?}: {lines:#?}"
    );
    lab.finish();
}

/// The patched nginx sends the retry on stream 1: answered.
async fn patched_stream_1(wire: Wire) {
    if !speaks(wire) {
        return;
    }
    let mut lab = Lab::start_spec(Spec::wire(Flavor::patched(), wire, "")).await;
    let (status, lines) = retry_on_a_fresh_connection(&mut lab).await;
    assert_eq!(status, 200, "{wire:?}: {lines:#?}");
    lab.finish();
}

/// Non-regression guard: stock nginx, without the module.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stock_grpc_retry_on_a_fresh_connection_reuses_a_stale_stream_id() {
    stock_stale_stream_id(Wire::Grpc).await
}

/// Non-regression guard: stock nginx, without the module.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stock_http2_retry_on_a_fresh_connection_reuses_a_stale_stream_id() {
    stock_stale_stream_id(Wire::Http2).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn patched_grpc_retry_on_a_fresh_connection_uses_stream_1() {
    patched_stream_1(Wire::Grpc).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn patched_http2_retry_on_a_fresh_connection_uses_stream_1() {
    patched_stream_1(Wire::Http2).await
}

protocol!(fastcgi, Wire::FastCgi);
protocol!(uwsgi, Wire::Uwsgi);
protocol!(scgi, Wire::Scgi);
protocol!(memcached, Wire::Memcached);
protocol!(grpc, Wire::Grpc);
protocol!(http2, Wire::Http2);

/// Stream UDP (`listen ... udp`, `proxy_responses 1`): nginx does not
/// retry a UDP session once its datagram is sent. A peer that refuses it
/// (ICMP port unreachable) or never answers ends the session on that peer,
/// `proxy_next_upstream on` or not: `ngx_stream_proxy_process` takes a
/// failed receive for the end of the stream and a timeout for the end of
/// the session (1.28 to 1.31.x alike); only a failed `connect()` is
/// retried, and connecting a UDP socket does not fail on loopback. So a UDP
/// session never selects twice and never meets a changed generation: there
/// is no race to rescue. What this proves, stock and with the module: a
/// session to a dead peer is not retried to the live one (one hop, its
/// datagram never reaches the backend); the re-resolving peer follows its
/// name over UDP; the module counts nothing. Should nginx start retrying
/// UDP, the one-hop checks fail, and the race gets its rows.
mod udp {
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

    fn epoch_now() -> f64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_secs_f64()
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

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn module_leaves_udp_sessions_as_nginx_does() {
        not_retried(Flavor::with_module(), Ipv4Addr::new(127, 0, 0, 23)).await
    }
}
