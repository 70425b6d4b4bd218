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

use crate::actors::dns::{Answer, DnsServer};
use crate::actors::load::Client;
use crate::actors::tcp::{BlackHole, EchoBackend, Reply, Session, HOLE, NEW, OLD};
use crate::memcheck::patience;
use crate::nginx::{free_port, Config, Flavor, Nginx};
use crate::rng::Rng;
use crate::scoring::errorlog;
use crate::scoring::streamlog::{parse_stream_log, StreamEntry};
use crate::shared::{status_server, UPSTREAM};
/// The re-resolving name.
pub const NAME: &str = "tcp.test";

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
                crate::scenarios::http::wait_peers(&http, "stream", &name, spec.peers).await;
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
        crate::scenarios::http::status_object(&self.http, protocol, Some(name))
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
