//! The running parts of the mixed scenario besides nginx: the backends,
//! the black holes and echo servers, the resetting listener, the closed
//! ports, and the addresses of their own that the faulty peers take.

use std::net::Ipv4Addr;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use super::stream::STREAM_HOLES;
use crate::actors::backend::Backend;
use crate::actors::dns::DnsServer;
use crate::actors::tcp::{BlackHole, EchoBackend};
use crate::nginx::free_port;
/// Addresses of their own for the refusing and resetting peers.
pub(super) const WIPE_A: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 6);
pub(super) const WIPE_B: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 7);
pub(super) const REFUSED: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 8);
pub(super) const RESET: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 9);

/// A listener that resets every connection once a request arrives
/// (`SO_LINGER` 0, then close): nginx logs `recv() failed (104: Connection
/// reset by peer)`.
pub(super) struct Resetter {
    pub(super) port: u16,
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
pub(super) struct Parts {
    pub(super) dns: DnsServer,
    pub(super) moving: [Backend; 3],
    pub(super) conns: Backend,
    pub(super) slow: Backend,
    pub(super) hole: BlackHole,
    pub(super) reset: Resetter,
    /// Ports nobody listens on: `wipe`'s two and `refused`'s.
    pub(super) closed: [u16; 2],
    /// The stream part: the race upstreams' dead primaries and their backups' echo
    /// servers, `snx`'s echo servers, and a listen port per upstream.
    pub(super) stream_holes: Vec<BlackHole>,
    pub(super) stream_echo: [EchoBackend; 4],
    pub(super) stream_ports: [u16; 6],
}

impl Parts {
    pub(super) async fn start() -> Parts {
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
