//! The application stand-in: a tokio server listening on 127.0.0.2 and
//! 127.0.0.3 with the same port, so that a DNS flip between the two is a
//! pure IP swap. It speaks HTTP/1.1 with keepalive, or any other protocol
//! nginx's http upstream speaks ([`Wire`]: FastCGI, uwsgi, SCGI, memcached,
//! gRPC, HTTP/2), with the same faults and the same record of what it saw.
//!
//! Faults it can inject, as real backends and L4 boxes do:
//! - hold the next request that arrives on a reused connection, then close
//!   that connection without answering, when the test says so ([`Hold`]);
//! - keepalive reclaim: close a reused connection without answering (any
//!   connection, for a protocol nginx does not keep alive), with
//!   probability `p` per request on it (seeded, so runs repeat);
//! - an idle timeout (close connections idle longer than it);
//! - a response delay.
//!
//! It counts connections and requests per address and method, and logs every
//! request with its outcome, so a test can assert a POST ran exactly once.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_rustls::rustls::{self, pki_types::pem::PemObject, HandshakeKind};
use tokio_rustls::TlsAcceptor;

use crate::rng::Rng;

mod h2;
mod wire;

use wire::Reader;
pub use wire::{grpc_message, Wire};

/// The two addresses the DNS name alternates between.
pub const ADDR_A: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);
pub const ADDR_B: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 3);
/// A third address, for a static second peer beside the re-resolving one.
pub const ADDR_C: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 4);
const ADDRS: [Ipv4Addr; 3] = [ADDR_A, ADDR_B, ADDR_C];

/// Requests under this path are answered `503`, from every address (but
/// by memcached, which has no status: a value is a 200).
pub const UNAVAILABLE_PATH: &str = "/503/";

/// What happened to a request the backend read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Answered: 200, or 503 under [`UNAVAILABLE_PATH`].
    Answered,
    /// Connection closed without an answer (reclaim or a released hold).
    Dropped,
}

/// One request as the backend saw it.
#[derive(Clone, Debug)]
pub struct Seen {
    pub at: Instant,
    pub addr: Ipv4Addr,
    pub conn: u64,
    /// 0 for the first request on a connection, 1 for the second, ...
    pub index_on_conn: u64,
    pub method: String,
    pub path: String,
    pub outcome: Outcome,
}

/// A request the backend is holding.
#[derive(Debug)]
pub struct Held {
    pub addr: Ipv4Addr,
    pub path: String,
    release: oneshot::Sender<()>,
}

impl Held {
    /// Closes the held connection without answering.
    pub fn close(self) {
        let _ = self.release.send(());
    }
}

/// An armed hold: resolves to the request it caught.
pub struct Hold(oneshot::Receiver<Held>);

impl Hold {
    /// Waits until a request on a reused connection has been caught.
    pub async fn caught(self, timeout: Duration) -> Result<Held, String> {
        match tokio::time::timeout(timeout, self.0).await {
            Ok(Ok(held)) => Ok(held),
            Ok(Err(_)) => Err("backend stopped before a request was held".into()),
            Err(_) => Err(format!(
                "no request arrived on a reused connection within {timeout:?}"
            )),
        }
    }
}

#[derive(Default)]
struct Faults {
    reclaim_p: f64,
    /// A reclaimed request is closed after a delay drawn in [0, this].
    reclaim_delay_max: Duration,
    rng: Rng,
    delay: Duration,
    idle_timeout: Option<Duration>,
    hold: Option<(oneshot::Sender<Held>, bool)>,
    fail_next: u32,
    /// Paths reclaimed on a protocol nginx does not keep alive: their
    /// retry is answered, as a reused connection's retry on a fresh one is.
    reclaimed: std::collections::HashSet<String>,
}

#[derive(Default)]
struct State {
    wire: Wire,
    tls: Option<TlsAcceptor>,
    /// TLS handshakes: (full, resumed).
    handshakes: Mutex<(u64, u64)>,
    /// Per TLS connection (by [`Seen::conn`]): whether it resumed a session.
    resumed_by_conn: Mutex<HashMap<u64, bool>>,
    conn_seq: AtomicU64,
    connections: Mutex<HashMap<Ipv4Addr, u64>>,
    seen: Mutex<Vec<Seen>>,
    faults: Mutex<Faults>,
}

/// A running backend on [`ADDR_A`] and [`ADDR_B`]. Stops when dropped.
pub struct Backend {
    port: u16,
    state: Arc<State>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Backend {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl Backend {
    /// Listens on 127.0.0.2:P, 127.0.0.3:P and 127.0.0.4:P for a free P.
    pub async fn start() -> Backend {
        Backend::start_with(Wire::Http, None).await
    }

    /// The same, speaking `wire`.
    pub async fn start_wire(wire: Wire) -> Backend {
        Backend::start_with(wire, None).await
    }

    /// The same over TLS (a self-signed certificate for app.test), with
    /// session resumption, so a proxy's `proxy_ssl_session_reuse` shows in
    /// [`Backend::handshakes`].
    pub async fn start_tls() -> Backend {
        Backend::start_with(Wire::Http, Some(tls_acceptor())).await
    }

    async fn start_with(wire: Wire, tls: Option<TlsAcceptor>) -> Backend {
        let listeners = bind_same_port(&ADDRS).await;
        let port = listeners[0].local_addr().unwrap().port();
        let state = Arc::new(State {
            wire,
            tls,
            ..State::default()
        });
        let tasks = listeners
            .into_iter()
            .map(|l| tokio::spawn(accept_loop(l, state.clone())))
            .collect();
        Backend { port, state, tasks }
    }

    pub fn wire(&self) -> Wire {
        self.state.wire
    }

    /// The body a client gets for an answer from `ip`.
    pub fn body(&self, ip: Ipv4Addr) -> String {
        self.state.wire.body(ip)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `ADDR:PORT` as nginx writes it in `$upstream_addr`.
    pub fn upstream_addr(&self, ip: Ipv4Addr) -> String {
        format!("{ip}:{}", self.port)
    }

    /// Holds the next request that arrives on a reused (keepalive) connection.
    pub fn arm_hold(&self) -> Hold {
        self.arm(true)
    }

    /// Holds the next request, on any connection.
    pub fn arm_hold_any(&self) -> Hold {
        self.arm(false)
    }

    fn arm(&self, reused_only: bool) -> Hold {
        let (tx, rx) = oneshot::channel();
        self.state.faults.lock().unwrap().hold = Some((tx, reused_only));
        Hold(rx)
    }

    /// Closes a reused connection without answering with probability `p`
    /// per request on it (any connection, for a [`Wire`] nginx does not
    /// keep alive: its failed attempts are first requests, and a path
    /// reclaimed once is answered when retried); `seed` makes the choices
    /// repeatable.
    pub fn set_reclaim(&self, p: f64, seed: u64) {
        self.set_reclaim_after(p, seed, Duration::ZERO);
    }

    /// As [`Backend::set_reclaim`], closing each reclaimed request after a
    /// delay drawn in [0, `delay_max`]: the request was in flight for that
    /// long, as one is while a slow backend works on it.
    pub fn set_reclaim_after(&self, p: f64, seed: u64, delay_max: Duration) {
        let mut f = self.state.faults.lock().unwrap();
        f.reclaim_p = p;
        f.rng = Rng::new(seed);
        f.reclaim_delay_max = delay_max;
    }

    /// Closes the next `n` requests' connections without answering.
    pub fn fail_next(&self, n: u32) {
        self.state.faults.lock().unwrap().fail_next = n;
    }

    pub fn set_delay(&self, delay: Duration) {
        self.state.faults.lock().unwrap().delay = delay;
    }

    pub fn set_idle_timeout(&self, timeout: Option<Duration>) {
        self.state.faults.lock().unwrap().idle_timeout = timeout;
    }

    /// TLS handshakes so far: (full, resumed).
    pub fn handshakes(&self) -> (u64, u64) {
        *self.state.handshakes.lock().unwrap()
    }

    /// Whether the TLS connection `conn` (as [`Seen::conn`] numbers it)
    /// resumed a session: `None` for a plain connection, or one whose
    /// handshake did not complete.
    pub fn resumed(&self, conn: u64) -> Option<bool> {
        self.state
            .resumed_by_conn
            .lock()
            .unwrap()
            .get(&conn)
            .copied()
    }

    /// Every request read so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.state.seen.lock().unwrap().clone()
    }

    /// Connections accepted on `ip`.
    pub fn connections(&self, ip: Ipv4Addr) -> u64 {
        *self
            .state
            .connections
            .lock()
            .unwrap()
            .get(&ip)
            .unwrap_or(&0)
    }

    /// Requests answered on `ip` with `method`.
    pub fn answered(&self, ip: Ipv4Addr, method: &str) -> usize {
        self.state
            .seen
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.addr == ip && s.method == method && s.outcome == Outcome::Answered)
            .count()
    }

    /// Paths that reached the backend more than once for `method`, answered
    /// or not (must stay empty for POST: a POST received, dropped and
    /// received again ran twice even if it was answered once).
    pub fn received_twice(&self, method: &str) -> Vec<String> {
        self.received_by_path(method)
            .into_iter()
            .filter(|(_, c)| *c > 1)
            .map(|(p, _)| p)
            .collect()
    }

    /// How many times each path was answered for `method`.
    pub fn answered_by_path(&self, method: &str) -> HashMap<String, usize> {
        self.by_path(method, |s| s.outcome == Outcome::Answered)
    }

    /// The addresses `path` was received at, in order: where each attempt
    /// of a request went.
    pub fn reached(&self, path: &str) -> Vec<Ipv4Addr> {
        self.seen()
            .iter()
            .filter(|s| s.path == path)
            .map(|s| s.addr)
            .collect()
    }

    /// How many times each path reached the backend for `method`.
    pub fn received_by_path(&self, method: &str) -> HashMap<String, usize> {
        self.by_path(method, |_| true)
    }

    fn by_path(&self, method: &str, keep: impl Fn(&Seen) -> bool) -> HashMap<String, usize> {
        let mut n: HashMap<String, usize> = HashMap::new();
        for s in self.state.seen.lock().unwrap().iter() {
            if s.method == method && keep(s) {
                *n.entry(s.path.clone()).or_default() += 1;
            }
        }
        n
    }
}

/// One listener on each of `addrs`, all with the same free port.
pub(crate) async fn bind_same_port(addrs: &[Ipv4Addr]) -> Vec<TcpListener> {
    'retry: for _ in 0..50 {
        let first = TcpListener::bind((addrs[0], 0))
            .await
            .unwrap_or_else(|e| panic!("bind {}: {e}", addrs[0]));
        let port = first.local_addr().unwrap().port();
        let mut all = vec![first];
        for ip in &addrs[1..] {
            match TcpListener::bind((*ip, port)).await {
                Ok(l) => all.push(l),
                Err(_) => continue 'retry,
            }
        }
        return all;
    }
    panic!("no port free on all of {addrs:?} after 50 tries");
}

async fn accept_loop(listener: TcpListener, state: Arc<State>) {
    let SocketAddr::V4(local) = listener.local_addr().unwrap() else {
        unreachable!("bound to IPv4")
    };
    let ip = *local.ip();
    while let Ok((stream, _)) = listener.accept().await {
        let conn = state.conn_seq.fetch_add(1, Ordering::Relaxed);
        *state.connections.lock().unwrap().entry(ip).or_default() += 1;
        let _ = stream.set_nodelay(true);
        let state = state.clone();
        tokio::spawn(async move {
            match state.tls.clone() {
                None if state.wire.http2() => h2::serve(stream, ip, conn, state).await,
                None => serve(stream, ip, conn, state).await,
                Some(acceptor) => {
                    let Ok(tls) = acceptor.accept(stream).await else {
                        return;
                    };
                    {
                        let resumed =
                            tls.get_ref().1.handshake_kind() == Some(HandshakeKind::Resumed);
                        let mut h = state.handshakes.lock().unwrap();
                        if resumed {
                            h.1 += 1
                        } else {
                            h.0 += 1
                        }
                        state.resumed_by_conn.lock().unwrap().insert(conn, resumed);
                    }
                    serve(tls, ip, conn, state).await
                }
            }
        });
    }
}

fn tls_acceptor() -> TlsAcceptor {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures");
    let certs = rustls::pki_types::CertificateDer::pem_file_iter(format!("{dir}/backend.crt"))
        .expect("read backend.crt")
        .collect::<Result<Vec<_>, _>>()
        .expect("parse backend.crt");
    let key = rustls::pki_types::PrivateKeyDer::from_pem_file(format!("{dir}/backend.key"))
        .expect("read backend.key");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .expect("TLS config");
    TlsAcceptor::from(Arc::new(config))
}

/// What to do with a request that has been read.
enum Action {
    Answer(Duration),
    Drop(Duration),
    Hold(oneshot::Receiver<()>),
}

/// Decides what happens to request `index` on connection `conn` at `ip`
/// (a hold the test armed, an injected failure, a reclaim, or an answer)
/// and records it in [`Backend::seen`].
fn decide(state: &State, ip: Ipv4Addr, conn: u64, index: u64, method: &str, path: &str) -> Action {
    let action = {
        let mut guard = state.faults.lock().unwrap();
        let f = &mut *guard;
        let hold_here = f
            .hold
            .as_ref()
            .is_some_and(|(_, reused_only)| index > 0 || !reused_only);
        if hold_here {
            let (tx, rx) = oneshot::channel();
            let held = Held {
                addr: ip,
                path: path.to_string(),
                release: tx,
            };
            match f.hold.take().unwrap().0.send(held) {
                Ok(()) => Action::Hold(rx),
                Err(_) => Action::Answer(f.delay), // nobody waits for it any more
            }
        } else if f.fail_next > 0 {
            f.fail_next -= 1;
            Action::Drop(Duration::ZERO)
        } else if (index > 0 || (!state.wire.keepalive() && !f.reclaimed.contains(path)))
            && f.reclaim_p > 0.0
            && f.rng.chance(f.reclaim_p)
        {
            if !state.wire.keepalive() {
                f.reclaimed.insert(path.to_string());
            }
            let delay = f.reclaim_delay_max.mul_f64(f.rng.unit());
            Action::Drop(delay)
        } else {
            Action::Answer(f.delay)
        }
    };
    let outcome = match &action {
        Action::Answer(_) => Outcome::Answered,
        Action::Drop(_) | Action::Hold(_) => Outcome::Dropped,
    };
    state.seen.lock().unwrap().push(Seen {
        at: Instant::now(),
        addr: ip,
        conn,
        index_on_conn: index,
        method: method.to_string(),
        path: path.to_string(),
        outcome,
    });
    action
}

/// The status line's text for `path`: a path under [`UNAVAILABLE_PATH`]
/// is answered 503 (Service Unavailable), what `*_next_upstream http_503`
/// retries.
fn status_for(path: &str) -> (u16, &'static str) {
    if path.starts_with(UNAVAILABLE_PATH) {
        (503, "503 Service Unavailable")
    } else {
        (200, "200 OK")
    }
}

/// Serves a connection of a byte protocol (every [`Wire`] but HTTP/2's).
async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    ip: Ipv4Addr,
    conn: u64,
    state: Arc<State>,
) {
    let mut buf = Vec::with_capacity(4096);
    for index in 0u64.. {
        let idle = state.faults.lock().unwrap().idle_timeout;
        let mut reader = Reader {
            stream: &mut stream,
            buf: &mut buf,
        };
        let read = reader.request(state.wire);
        let req = match idle {
            Some(t) if index > 0 => match tokio::time::timeout(t, read).await {
                Ok(r) => r,
                Err(_) => return, // idle too long: close, as a backend's idle timer does
            },
            _ => read.await,
        };
        let Some(req) = req else { return };
        match decide(&state, ip, conn, index, &req.method, &req.path) {
            Action::Drop(delay) => {
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                return;
            }
            Action::Hold(release) => {
                let _ = release.await;
                return;
            }
            Action::Answer(delay) => {
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                let body = state.wire.body(ip);
                let out = wire::answer(state.wire, &req, status_for(&req.path).1, &body, ip);
                if stream.write_all(&out).await.is_err() || req.close {
                    return;
                }
            }
        }
    }
}
