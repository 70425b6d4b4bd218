//! The stream upstreams' stand-ins, on loopback: a TCP echo server on
//! [`OLD`] and [`NEW`] with the same port ([`EchoBackend`]), a listener on
//! [`HOLE`] whose connects hang until it closes ([`BlackHole`]), and the
//! client [`Session`] that talks to them through nginx.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::task::JoinHandle;

use crate::actors::backend::bind_same_port;
use crate::memcheck::patience;
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
        // Held for this process while the hole is closed (`nginx::ports`).
        BlackHole::at(SocketAddr::from((HOLE, crate::nginx::free_port_at(HOLE)))).await
    }

    /// Opens on `addr`, an address of the test's own that no other process
    /// listens on, and proves the fault.
    pub async fn at(addr: SocketAddr) -> BlackHole {
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

    /// Waits (bounded) until a connect to the hole hangs: a socket in
    /// SYN-SENT towards it (`/proc/net/tcp`), which only a client that
    /// tried it (nginx's connect) can hold: the filler is established.
    pub async fn wait_connecting(&self, timeout: Duration) -> Result<(), String> {
        let SocketAddr::V4(v4) = self.addr else {
            unreachable!("IPv4 only")
        };
        // The kernel prints an address as its 32 bits in host order, the
        // port as a number: `0C00007F:1F90` is 127.0.0.12:8080 on x86.
        let remote = format!(
            "{:08X}:{:04X}",
            u32::from_ne_bytes(v4.ip().octets()),
            v4.port()
        );
        const SYN_SENT: &str = "02";
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let table = std::fs::read_to_string("/proc/net/tcp").map_err(|e| e.to_string())?;
            let pending = table.lines().skip(1).any(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                f.get(2) == Some(&remote.as_str()) && f.get(3) == Some(&SYN_SENT)
            });
            if pending {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(format!(
                    "no connect to {} pending within {timeout:?}",
                    self.addr
                ));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
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

#[cfg(test)]
mod tests {
    use super::*;

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
