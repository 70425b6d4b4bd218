//! The stream (TCP) race, on loopback, without timing luck.
//!
//! Stream has no keepalive, so the failed first attempt is a connect that
//! fails. Each upstream `be<i>` has two peers:
//!
//! - `127.0.0.2:A max_conns=1`, the primary: a [`BlackHole`], a listener
//!   whose accept queue is full, so the kernel drops nginx's SYN and the
//!   connect hangs until the test closes the listener (the next SYN
//!   retransmission is then refused);
//! - `tcp.test:B resolve backup`: the [`EchoBackend`] at whichever of
//!   127.0.0.3 / 127.0.0.4 the DNS answers.
//!
//! One race per upstream (its primary is then marked failed for
//! `fail_timeout`, so a fresh upstream makes the next race independent):
//!
//! 1. a client opens the race session; nginx snapshots the peer list and
//!    connects to the black hole, taking its single `max_conns` slot;
//! 2. probes through the same upstream go to the backup while the slot is
//!    taken: one answered by the old address proves the race session holds
//!    the primary (a probe that reached the black hole would hang);
//! 3. the DNS answer flips and probes continue until one is answered by the
//!    new address: nginx has applied it, the generation moved;
//! 4. the black hole closes: the race session's connect is refused, and its
//!    retry selects under a changed generation. Stock nginx fails it with
//!    `no live upstreams` (the client's connection is closed); with the
//!    module or the patch it reaches the new address and its bytes come
//!    back intact.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::task::JoinHandle;

use crate::backend::bind_same_port;
use crate::dns::{Answer, DnsServer};
use crate::errorlog;
use crate::load::Client;
use crate::memcheck::patience;
use crate::nginx::{free_port, Config, Flavor, Nginx};
use crate::rng::Rng;
use crate::shared::{status_server, UPSTREAM};

/// The re-resolving name.
pub const NAME: &str = "tcp.test";
/// The black hole's address.
pub const HOLE: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);
/// The two addresses the name alternates between.
pub const OLD: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 3);
pub const NEW: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 4);

/// A TCP echo server on [`OLD`] and [`NEW`] with the same port: it greets
/// each connection with its own address and a newline, then echoes every
/// byte until the client half-closes.
pub struct EchoBackend {
    port: u16,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for EchoBackend {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl EchoBackend {
    pub async fn start() -> EchoBackend {
        let listeners = bind_same_port(&[OLD, NEW]).await;
        let port = listeners[0].local_addr().unwrap().port();
        let tasks = listeners
            .into_iter()
            .zip([OLD, NEW])
            .map(|(l, ip)| {
                tokio::spawn(async move {
                    while let Ok((s, _)) = l.accept().await {
                        tokio::spawn(echo(s, ip));
                    }
                })
            })
            .collect();
        EchoBackend { port, tasks }
    }

    pub fn port(&self) -> u16 {
        self.port
    }
}

async fn echo(mut s: TcpStream, ip: Ipv4Addr) {
    if s.write_all(format!("{ip}\n").as_bytes()).await.is_err() {
        return;
    }
    let (mut r, mut w) = s.split();
    let _ = tokio::io::copy(&mut r, &mut w).await;
    let _ = w.shutdown().await;
}

/// A listener whose accept queue is full: connects to it hang (the kernel
/// drops their SYNs) until it closes, after which they are refused.
pub struct BlackHole {
    addr: SocketAddr,
    open: Option<(TcpListener, TcpStream)>,
}

impl BlackHole {
    /// Opens on [`HOLE`] at a free port and proves the fault: a connect
    /// does not complete.
    pub async fn start() -> BlackHole {
        let probe = TcpListener::bind((HOLE, 0)).await.expect("bind 127.0.0.2");
        let addr = probe.local_addr().unwrap();
        drop(probe);
        let mut hole = BlackHole { addr, open: None };
        hole.open().await;
        let attempt =
            tokio::time::timeout(Duration::from_millis(300), TcpStream::connect(addr)).await;
        assert!(
            attempt.is_err(),
            "a connect to the full listener {addr} completed: {attempt:?}"
        );
        hole
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Listens again (no-op when open), with backlog 0 and one queued
    /// connection that is never accepted, so the queue is full.
    pub async fn open(&mut self) {
        if self.open.is_some() {
            return;
        }
        let socket = TcpSocket::new_v4().expect("socket");
        socket.set_reuseaddr(true).expect("SO_REUSEADDR");
        socket.bind(self.addr).expect("bind the black hole");
        let listener = socket.listen(0).expect("listen(0)");
        let filler = tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(self.addr))
            .await
            .expect("the first connect to the black hole fills its queue")
            .expect("connect the filler");
        self.open = Some((listener, filler));
    }

    /// Closes: SYNs retransmitted from now on are refused.
    pub fn close(&mut self) {
        self.open = None;
    }
}

/// What a client session got back.
#[derive(Debug)]
pub struct Reply {
    /// The client's port (`$remote_port` in the stream log).
    pub port: u16,
    /// Everything read until EOF (empty when nginx closed the connection).
    pub bytes: Vec<u8>,
    pub error: Option<String>,
}

impl Reply {
    /// The backend address of the greeting, and the echoed bytes after it.
    pub fn split(&self) -> Option<(Ipv4Addr, &[u8])> {
        let nl = self.bytes.iter().position(|&b| b == b'\n')?;
        let ip = std::str::from_utf8(&self.bytes[..nl]).ok()?.parse().ok()?;
        Some((ip, &self.bytes[nl + 1..]))
    }
}

/// A session that has connected; its exchange runs in the background.
pub struct Session {
    pub port: u16,
    task: JoinHandle<Reply>,
}

impl Session {
    /// Connects to `addr`, then sends `payload`, half-closes and reads to
    /// EOF in the background.
    pub async fn open(addr: SocketAddr, payload: Vec<u8>) -> Session {
        let mut s =
            tokio::time::timeout(patience(Duration::from_secs(5)), TcpStream::connect(addr))
                .await
                .expect("connect to nginx in time")
                .expect("connect to nginx");
        let port = s.local_addr().unwrap().port();
        let task = tokio::spawn(async move {
            let mut reply = Reply {
                port,
                bytes: Vec::new(),
                error: None,
            };
            let (mut r, mut w) = s.split();
            let send = async {
                w.write_all(&payload).await?;
                w.shutdown().await
            };
            let (sent, read) = tokio::join!(send, r.read_to_end(&mut reply.bytes));
            if let Err(e) = sent.and(read.map(|_| ())) {
                reply.error = Some(e.to_string());
            }
            reply
        });
        Session { port, task }
    }

    /// The reply, bounded by `timeout`.
    pub async fn reply(self, timeout: Duration) -> Result<Reply, String> {
        match tokio::time::timeout(timeout, self.task).await {
            Ok(r) => r.map_err(|e| e.to_string()),
            Err(_) => Err(format!("no reply within {timeout:?}")),
        }
    }
}

/// One line of the stream access log.
#[derive(Clone, Debug, PartialEq)]
pub struct StreamEntry {
    pub port: u16,
    /// `$upstream_addr`: every attempt, comma-separated.
    pub upstream_addr: String,
    pub status: u16,
    pub bytes_received: u64,
    pub bytes_sent: u64,
    /// When the session ended (seconds since the epoch).
    pub msec: f64,
    /// `$server_port`: the listener the session came in on.
    pub server_port: u16,
}

pub fn parse_stream_log(text: &str) -> Vec<StreamEntry> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split('|').collect();
            Some(StreamEntry {
                port: f.first()?.parse().ok()?,
                upstream_addr: f.get(1)?.to_string(),
                status: f.get(2)?.parse().ok()?,
                bytes_received: f.get(3)?.parse().ok()?,
                bytes_sent: f.get(4)?.parse().ok()?,
                msec: f.get(6)?.parse().ok()?,
                server_port: f.get(7)?.parse().ok()?,
            })
        })
        .collect()
}

/// The stream block: `slots` upstreams `be0..`, each with its own listen
/// port `${SPORT<i>}`. The resolver is the stream level's, shared by every
/// upstream: one query, joined by all of them, resolves the backup
/// everywhere at once (a `resolver` in each upstream would be a resolver,
/// and a query, per upstream).
fn stream_block(slots: usize) -> String {
    let mut s = String::from("    resolver ${DNS} valid=1s ipv6=off;\n    ${STREAM_TOP}\n");
    for i in 0..slots {
        s.push_str(&format!(
            "    upstream {UPSTREAM}{i} {{\n        zone {UPSTREAM}{i} 64k;\n        ${{PRE}}\n        \
             server 127.0.0.2:${{APORT}} max_conns=1 ${{PRIMARY}};\n        \
             server {NAME}:${{BPORT}} resolve backup;\n        ${{EXTRA}}\n    }}\n    \
             server {{\n        listen 127.0.0.1:${{SPORT{i}}};\n        proxy_pass {UPSTREAM}{i};\n        \
             proxy_connect_timeout 20s;\n        proxy_half_close on;\n    }}\n"
        ));
    }
    s
}

/// What to start.
#[derive(Clone, Debug)]
pub struct StreamSpec {
    pub flavor: Flavor,
    /// Races the nginx can run (one upstream each).
    pub slots: usize,
    /// Lines at stream level.
    pub top: String,
    /// Lines before the `server` lines of each upstream (a balancer).
    pub pre: String,
    /// Parameters added to the primary's `server` line (`max_fails=0`).
    pub primary: String,
    /// Peers each upstream holds once resolved (2: the primary and the
    /// backup; more when `pre` adds servers).
    pub peers: u64,
    /// Lines at the end of each upstream.
    pub extra: String,
    /// Lines at http level (beside the status server).
    pub http_extra: String,
}

impl StreamSpec {
    pub fn new(flavor: Flavor, slots: usize) -> StreamSpec {
        StreamSpec {
            flavor,
            slots,
            top: String::new(),
            pre: String::new(),
            primary: String::new(),
            peers: 2,
            extra: String::new(),
            http_extra: String::new(),
        }
    }
}

/// nginx with stream upstreams, DNS, the echo backend and the black hole.
pub struct StreamLab {
    pub dns: DnsServer,
    pub backend: EchoBackend,
    pub hole: BlackHole,
    pub nginx: Nginx,
    /// HTTP client for the status endpoint.
    pub http: Client,
    ports: Vec<u16>,
    next: usize,
    current: Ipv4Addr,
    /// Whether nginx has the module (and so a status page to check).
    module: bool,
}

/// What one stream race produced.
#[derive(Debug)]
pub struct StreamRace {
    pub upstream: String,
    /// The backup's address when the session started, and after the flip.
    pub old: Ipv4Addr,
    pub new: Ipv4Addr,
    pub payload: Vec<u8>,
    pub reply: Reply,
    pub entry: StreamEntry,
    /// The race session's error.log lines.
    pub errors: Vec<String>,
}

impl StreamRace {
    /// Reached the new address and got every byte back.
    pub fn delivered(&self) -> bool {
        self.reply.split() == Some((self.new, &self.payload[..]))
    }
}

impl StreamLab {
    pub async fn start(spec: StreamSpec) -> StreamLab {
        let dns = DnsServer::start().await;
        dns.set_a(NAME, OLD);
        let backend = EchoBackend::start().await;
        let hole = BlackHole::start().await;
        let module = spec.flavor.module.is_some();
        let http = format!("{}\n    {}\n", spec.http_extra, status_server(module));
        let ports: Vec<u16> = (0..spec.slots).map(|_| free_port()).collect();
        let mut config = Config::new(spec.flavor, http)
            .stream(stream_block(spec.slots))
            .var("STREAM_TOP", &spec.top)
            .var("PRE", &spec.pre)
            .var("PRIMARY", &spec.primary)
            .var("EXTRA", &spec.extra)
            .var("DNS", dns.addr())
            .var("APORT", hole.port())
            .var("BPORT", backend.port());
        for (i, p) in ports.iter().enumerate() {
            config = config.var(&format!("SPORT{i}"), p);
        }
        let since = Instant::now();
        let nginx = Nginx::start(&config);
        let http = Client::new(nginx.url(""));
        // Ready when the backup is resolved: a race session initialised
        // before that would count one try only and never retry. nginx asked
        // and was answered (one query serves every upstream: they share the
        // stream level's resolver, which joins queries for the same name);
        // an HTTP round trip through the same worker afterwards means it
        // has read that answer too.
        dns.wait_answered(
            NAME,
            &Answer::A(vec![OLD]),
            since,
            patience(Duration::from_secs(10)),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", nginx.error_log()));
        http.get("/ready").await;
        if module {
            // Where the module can show it, see it: every upstream holds
            // both peers.
            for i in 0..spec.slots {
                let name = format!("{UPSTREAM}{i}");
                crate::scenario::wait_peers(&http, "stream", &name, spec.peers).await;
            }
        }
        StreamLab {
            dns,
            backend,
            hole,
            nginx,
            http,
            ports,
            next: 0,
            current: OLD,
            module,
        }
    }

    /// The listener of upstream `slot`.
    pub fn addr(&self, slot: usize) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.ports[slot]))
    }

    /// Probes `slot` until a probe is answered by `ip` (bounded: 10 s, six times that
    /// under memcheck).
    /// A probe that hangs reached the black hole: the race session does not
    /// hold the primary, and the scenario is broken.
    async fn wait_backup_is(&self, slot: usize, ip: Ipv4Addr) {
        let deadline = Instant::now() + patience(Duration::from_secs(10));
        let mut last = None;
        while Instant::now() < deadline {
            let probe = Session::open(self.addr(slot), b"probe".to_vec()).await;
            let reply = probe
                .reply(patience(Duration::from_secs(3)))
                .await
                .unwrap_or_else(|e| {
                    panic!("a probe of {UPSTREAM}{slot} hung ({e}): it reached the black hole")
                });
            if reply.split() == Some((ip, &b"probe"[..])) {
                return;
            }
            last = Some(reply);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!(
            "{UPSTREAM}{slot} never proxied to {ip}; last probe {last:?}\n{}",
            self.nginx.error_log()
        );
    }

    /// The stream race (see the module docs), on the next unused upstream.
    pub async fn race(&mut self) -> StreamRace {
        let slot = self.next;
        assert!(slot < self.ports.len(), "no unused upstream left");
        self.next += 1;
        self.hole.open().await;
        let old = self.current;
        let new = if old == OLD { NEW } else { OLD };
        let mut rng = Rng::new(slot as u64 + 1);
        let payload: Vec<u8> = (0..64 * 1024).map(|_| rng.next_u64() as u8).collect();

        let session = Session::open(self.addr(slot), payload.clone()).await;
        self.wait_backup_is(slot, old).await;
        self.dns.set_a(NAME, new);
        self.current = new;
        self.wait_backup_is(slot, new).await;
        self.hole.close();

        let reply = session
            .reply(patience(Duration::from_secs(15)))
            .await
            .unwrap_or_else(|e| panic!("race session on {UPSTREAM}{slot}: {e}"));
        let entry = self.stream_entry(self.ports[slot], reply.port).await;
        let errors = self.session_errors(slot);
        StreamRace {
            upstream: format!("{UPSTREAM}{slot}"),
            old,
            new,
            payload,
            reply,
            entry,
            errors,
        }
    }

    /// Waits (bounded) for the stream log line of the session from client
    /// port `port` to listener port `server_port`. The client port alone is
    /// not enough: the kernel hands an ephemeral port out again for another
    /// destination, so a probe of an earlier race on another upstream's
    /// listener may have had it. Within one race the pair is unique: the
    /// race session holds its port while the probes run.
    pub async fn stream_entry(&self, server_port: u16, port: u16) -> StreamEntry {
        let deadline = Instant::now() + patience(Duration::from_secs(5));
        loop {
            if let Some(e) = parse_stream_log(&self.nginx.stream_log())
                .into_iter()
                .find(|e| e.port == port && e.server_port == server_port)
            {
                return e;
            }
            assert!(
                Instant::now() < deadline,
                "no stream log line for 127.0.0.1:{server_port} from port {port}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// The error.log lines of the only session on `slot` that tried the
    /// black hole: the race session.
    fn session_errors(&self, slot: usize) -> Vec<String> {
        let log = self.nginx.error_log();
        // Angie quotes the server's address too.
        let server = format!("server: 127.0.0.1:{}", self.ports[slot]);
        let quoted = format!("server: \"127.0.0.1:{}\"", self.ports[slot]);
        let hole = format!("upstream: \"{HOLE}:{}\"", self.hole.port());
        let conn = errorlog::lines(&log)
            .into_iter()
            .find(|l| {
                (l.whole.contains(&server) || l.whole.contains(&quoted)) && l.whole.contains(&hole)
            })
            .and_then(|l| l.conn)
            .unwrap_or_else(|| {
                panic!("no error.log line of the race session on {UPSTREAM}{slot}\n{log}")
            });
        errorlog::lines(&log)
            .into_iter()
            .filter(|l| l.conn == Some(conn))
            .map(|l| l.whole.to_string())
            .collect()
    }

    /// The module's JSON status object for `protocol` upstream `name`.
    pub async fn status(&self, protocol: &str, name: &str) -> serde_json::Value {
        crate::scenario::status_object(&self.http, protocol, Some(name))
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Stops nginx, failing on fatal error.log lines; with the module,
    /// first checks every upstream's busy = rescued + failed.
    pub fn finish(self) {
        if self.module {
            self.nginx.assert_busy_is_rescued_plus_failed();
        }
        self.nginx.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_log_lines_parse_and_garbage_is_skipped() {
        let log = "40000|127.0.0.2:1, be0|502|0|0|-|1795984829.033|9000\n\
                   40001|127.0.0.2:1, 127.0.0.4:2|200|65536|65546|0.001|1795984830.5|9001\n\
                   40002|127.0.0.2:1, be0|502|0|0|-|1795984831.000\n\
                   garbage\n";
        let e = parse_stream_log(log);
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].port, 40000);
        assert_eq!(e[0].upstream_addr, "127.0.0.2:1, be0");
        assert_eq!(e[0].status, 502);
        assert_eq!(e[1].bytes_received, 65536);
        assert_eq!(e[1].bytes_sent, 65546);
        assert_eq!(e[1].msec, 1795984830.5);
        assert_eq!(e[1].server_port, 9001);
    }

    #[test]
    fn reply_splits_greeting_and_echo() {
        let r = Reply {
            port: 1,
            bytes: b"127.0.0.4\nhello".to_vec(),
            error: None,
        };
        assert_eq!(r.split(), Some((NEW, &b"hello"[..])));
        let closed = Reply {
            port: 1,
            bytes: Vec::new(),
            error: None,
        };
        assert_eq!(closed.split(), None);
    }
}
