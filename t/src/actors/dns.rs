//! The GSLB stand-in: an authoritative DNS server on 127.0.0.1 (UDP), built on
//! hickory-server, whose answers the test replaces at run time.
//!
//! Each name has one [`Answer`]; setting a name replaces its whole answer
//! (a GSLB swapping its single A record), never adds to it. A name may
//! answer A, AAAA or SRV records (`server NAME service=... resolve`: the
//! SRV name `_SERVICE._tcp.NAME` and an A answer per target); a query of
//! another type is told NOERROR with no record. Every query is
//! logged with the answer given, so a test can wait until nginx has asked
//! and received a given address instead of sleeping.

use std::collections::HashMap;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hickory_server::proto::op::{Metadata, ResponseCode};
use hickory_server::proto::rr::rdata::{A, AAAA, SRV};
use hickory_server::proto::rr::{Name, RData, Record, RecordType};
use hickory_server::server::{Request, RequestHandler, ResponseHandler, ResponseInfo};
use hickory_server::zone_handler::MessageResponseBuilder;
use hickory_server::Server;
use tokio::net::UdpSocket;
use tokio::sync::Notify;

/// What the server answers for a name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// NOERROR with these A records (one record: the GSLB case).
    A(Vec<Ipv4Addr>),
    /// NOERROR with these AAAA records (`resolver ... ipv6=on`).
    Aaaa(Vec<Ipv6Addr>),
    /// NOERROR with these SRV records.
    Srv(Vec<Srv>),
    /// NXDOMAIN: nginx empties the peer list.
    NxDomain,
    /// SERVFAIL: nginx keeps the old peers.
    ServFail,
    /// The next answer of the list at each A query, round and round: a GSLB
    /// alternating between data centres at every re-resolve (see
    /// [`Answer::rotate`]), or a schedule of faults. Logged as the answer
    /// actually given.
    Cycle(Vec<Answer>),
}

impl Answer {
    /// One A record per answer, the next address of `ips` each time.
    pub fn rotate(ips: &[Ipv4Addr]) -> Answer {
        Answer::Cycle(ips.iter().map(|ip| Answer::A(vec![*ip])).collect())
    }
}

/// One SRV record: nginx puts the targets of the lowest `priority` in
/// the upstream's primary list and the rest in its backup list, each at
/// its own `port`, weighted by `weight`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Srv {
    pub priority: u16,
    pub weight: u16,
    pub port: u16,
    /// A name this server answers too (its A or AAAA records).
    pub target: String,
}

/// One query and what it was told.
#[derive(Clone, Debug)]
pub struct Query {
    pub at: Instant,
    /// The same moment as seconds since the epoch, to line up with nginx's
    /// `$msec`.
    pub wall: f64,
    pub name: String,
    pub qtype: RecordType,
    pub answer: Answer,
}

#[derive(Default)]
struct State {
    answers: Mutex<HashMap<String, Answer>>,
    log: Mutex<Vec<Query>>,
    changed: Notify,
}

impl State {
    /// The answer for `name`, advancing a rotation on A queries.
    fn answer(&self, name: &str, qtype: RecordType) -> Answer {
        let mut answers = self.answers.lock().unwrap();
        match answers.get_mut(name) {
            None => Answer::NxDomain,
            Some(Answer::Cycle(list)) if list.is_empty() => Answer::A(Vec::new()),
            Some(Answer::Cycle(list)) => {
                let first = list[0].clone();
                if qtype == RecordType::A {
                    list.rotate_left(1);
                }
                first
            }
            Some(other) => other.clone(),
        }
    }
}

/// TTL of every answer; nginx's `resolver ... valid=` overrides it anyway.
const TTL: u32 = 1;

struct Handler(Arc<State>);

/// Lower case, no trailing dot: the key of the answers map.
fn key(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

#[async_trait::async_trait]
impl RequestHandler for Handler {
    async fn handle_request<R: ResponseHandler, T: hickory_server::net::runtime::Time>(
        &self,
        request: &Request,
        mut response: R,
    ) -> ResponseInfo {
        let builder = MessageResponseBuilder::from_message_request(request);
        let Some(query) = request.queries.queries().first() else {
            let msg = builder.error_msg(&request.metadata, ResponseCode::FormErr);
            return send(&mut response, msg, request).await;
        };
        let name = Name::from(query.name().clone());
        let qtype = query.query_type();
        let answer = self.0.answer(&key(&name.to_ascii()), qtype);

        let mut meta = Metadata::response_from_request(&request.metadata);
        meta.authoritative = true;
        let records: Vec<Record> = match (&answer, qtype) {
            (Answer::A(ips), RecordType::A) => ips
                .iter()
                .map(|ip| Record::from_rdata(name.clone(), TTL, RData::A(A(*ip))))
                .collect(),
            (Answer::Aaaa(ips), RecordType::AAAA) => ips
                .iter()
                .map(|ip| Record::from_rdata(name.clone(), TTL, RData::AAAA(AAAA(*ip))))
                .collect(),
            (Answer::Srv(srvs), RecordType::SRV) => srvs
                .iter()
                .map(|s| {
                    let fqdn = format!("{}.", key(&s.target));
                    let target = Name::from_ascii(&fqdn).expect("an SRV target name");
                    let srv = SRV::new(s.priority, s.weight, s.port, target);
                    Record::from_rdata(name.clone(), TTL, RData::SRV(srv))
                })
                .collect(),
            _ => Vec::new(),
        };
        meta.response_code = match answer {
            Answer::A(_) | Answer::Aaaa(_) | Answer::Srv(_) => ResponseCode::NoError,
            Answer::NxDomain => ResponseCode::NXDomain,
            Answer::ServFail => ResponseCode::ServFail,
            Answer::Cycle(_) => ResponseCode::ServFail, // nested cycles are not supported
        };

        // Timestamped before the answer leaves (so nothing nginx does with it
        // can precede the recorded time), logged after (so a waiter that sees
        // the entry knows the answer was sent).
        let at = Instant::now();
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        let msg = builder.build(meta, records.iter(), [], [], []);
        let info = send(&mut response, msg, request).await;

        self.0.log.lock().unwrap().push(Query {
            at,
            wall,
            name: key(&name.to_ascii()),
            qtype,
            answer,
        });
        self.0.changed.notify_waiters();
        info
    }
}

async fn send<'a, R: ResponseHandler>(
    response: &mut R,
    msg: hickory_server::zone_handler::MessageResponse<
        '_,
        'a,
        impl Iterator<Item = &'a Record> + Send + 'a,
        impl Iterator<Item = &'a Record> + Send + 'a,
        impl Iterator<Item = &'a Record> + Send + 'a,
        impl Iterator<Item = &'a Record> + Send + 'a,
    >,
    request: &Request,
) -> ResponseInfo {
    match response.send_response(msg).await {
        Ok(info) => info,
        Err(_) => {
            let mut meta = Metadata::response_from_request(&request.metadata);
            meta.response_code = ResponseCode::ServFail;
            hickory_server::proto::op::Header {
                metadata: meta,
                counts: Default::default(),
            }
            .into()
        }
    }
}

/// A running DNS server. Stops when dropped.
pub struct DnsServer {
    addr: SocketAddr,
    state: Arc<State>,
    _server: Server<Handler>,
}

impl DnsServer {
    /// Binds 127.0.0.1 on a free UDP port and starts serving.
    pub async fn start() -> DnsServer {
        let socket = UdpSocket::bind("127.0.0.1:0")
            .await
            .expect("bind DNS socket");
        let addr = socket.local_addr().unwrap();
        let state = Arc::new(State::default());
        let mut server = Server::new(Handler(state.clone()));
        server.register_socket(socket);
        DnsServer {
            addr,
            state,
            _server: server,
        }
    }

    /// Until every answer given so far has left the server's socket.
    /// hickory queues a UDP answer for the socket's task to send, so an
    /// answer logged as given may still be in that queue (a loaded CI
    /// machine sent one after the test had gone on). A query of our own,
    /// answered through the same queue, comes out after them: its answer
    /// back means theirs were sent.
    pub async fn flush(&self) {
        // ID 0x4752, recursion desired, one question: `flush.test` A IN.
        const QUERY: &[u8] = b"\x47\x52\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\
            \x05flush\x04test\x00\x00\x01\x00\x01";
        let socket = UdpSocket::bind("127.0.0.1:0").await.expect("bind");
        socket.connect(self.addr).await.expect("connect");
        let mut reply = [0u8; 512];
        let deadline = Instant::now() + crate::memcheck::patience(Duration::from_secs(10));
        while Instant::now() < deadline {
            socket.send(QUERY).await.expect("send the flush query");
            let wait = tokio::time::timeout(Duration::from_millis(200), socket.recv(&mut reply));
            if let Ok(Ok(n)) = wait.await {
                if n >= 2 && reply[..2] == QUERY[..2] {
                    return;
                }
            }
        }
        panic!(
            "the DNS server at {} never answered the flush query",
            self.addr
        );
    }

    /// `127.0.0.1:PORT`, for nginx's `resolver` directive.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Replaces the whole answer for `name`.
    pub fn set(&self, name: &str, answer: Answer) {
        self.state.answers.lock().unwrap().insert(key(name), answer);
    }

    /// Replaces the answer for `name` with the single A record `ip`.
    pub fn set_a(&self, name: &str, ip: Ipv4Addr) {
        self.set(name, Answer::A(vec![ip]));
    }

    /// The addresses of successive A answers for `name` and when each was
    /// given, with repeats of the same answer folded: a swap is an entry.
    pub fn answers_for(&self, name: &str) -> Vec<(Instant, Vec<Ipv4Addr>)> {
        let name = key(name);
        let mut out: Vec<(Instant, Vec<Ipv4Addr>)> = Vec::new();
        for q in self.log() {
            if q.name != name || q.qtype != RecordType::A {
                continue;
            }
            if let Answer::A(ips) = q.answer {
                if out.last().map(|(_, last)| last != &ips).unwrap_or(true) {
                    out.push((q.at, ips));
                }
            }
        }
        out
    }

    /// Epoch seconds of every change of the answer to `name`'s A queries
    /// (an address swap, an NXDOMAIN starting or ending), after the first.
    pub fn swaps(&self, name: &str) -> Vec<f64> {
        let name = key(name);
        let mut last: Option<Answer> = None;
        let mut out = Vec::new();
        for q in self.log() {
            if q.name != name || q.qtype != RecordType::A {
                continue;
            }
            if last.as_ref().is_some_and(|l| *l != q.answer) {
                out.push(q.wall);
            }
            last = Some(q.answer);
        }
        out
    }

    /// Every query so far.
    pub fn log(&self) -> Vec<Query> {
        self.state.log.lock().unwrap().clone()
    }

    /// Waits until a query for `name` made after `since` was answered with
    /// exactly `answer`, and that answer sent ([`DnsServer::flush`]);
    /// returns that query.
    pub async fn wait_answered(
        &self,
        name: &str,
        answer: &Answer,
        since: Instant,
        timeout: Duration,
    ) -> Result<Query, String> {
        self.wait_for(Some(name), since, timeout, &format!("{answer:?}"), |a| {
            a == answer
        })
        .await
    }

    /// Waits until a query for any name made after `since` was answered
    /// with at least one address (A or AAAA: a name's or an SRV target's),
    /// and that answer sent; returns that query.
    pub async fn wait_any_address(
        &self,
        since: Instant,
        timeout: Duration,
    ) -> Result<Query, String> {
        let address = |a: &Answer| match a {
            Answer::A(ips) => !ips.is_empty(),
            Answer::Aaaa(ips) => !ips.is_empty(),
            _ => false,
        };
        self.wait_for(None, since, timeout, "an address", address)
            .await
    }

    /// Waits for a query of `name` (any, `None`) made after `since`
    /// whose answer is `answered`.
    async fn wait_for(
        &self,
        name: Option<&str>,
        since: Instant,
        timeout: Duration,
        what: &str,
        answered: impl Fn(&Answer) -> bool,
    ) -> Result<Query, String> {
        let name = name.map(key);
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.state.changed.notified();
            if let Some(q) = self.log().into_iter().find(|q| {
                q.at >= since && name.as_ref().is_none_or(|n| *n == q.name) && answered(&q.answer)
            }) {
                self.flush().await;
                return Ok(q);
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return Err(format!(
                    "no query for {} answered {what} within {timeout:?}; log: {:?}",
                    name.as_deref().unwrap_or("any name"),
                    self.log()
                ));
            }
        }
    }
}
