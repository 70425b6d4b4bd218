//! The race as gRPC clients meet it ([`GrpcLab`]). A gRPC call is an
//! HTTP/2 `POST` whose body nginx does not buffer
//! (`r->request_body_no_buffering` in the gRPC module), and nginx retries
//! such a request only if it was never sent (`u->request_sent &&
//! r->request_body_no_buffering` in `ngx_http_upstream_next`; a POST once
//! sent is not idempotent either). So the failed attempt on a reused
//! keepalive connection, the scripted race of HTTP, ends a gRPC call with
//! the 502 of that attempt (no retry, no race: [`GrpcLab::sent_call`]).
//! What reaches gRPC calls is a connect that fails while the name moves
//! ([`GrpcLab::connect_race`]):
//!
//! 1. the name points at a dead pod's address, [`DEAD`]: a
//!    [`BlackHole`] at the backend's port, whose full accept queue drops
//!    SYNs;
//! 2. a gRPC call: nginx snapshots the list and connects to [`DEAD`];
//!    the connect hangs, as the kernel's table shows (SYN-SENT);
//! 3. the name moves to a live address and nginx applies it (the DNS
//!    server answered it, and a request answered without the upstream,
//!    `/applied`, came after the answer's datagram);
//! 4. the hole closes: the connect's next SYN is refused, and nginx
//!    retries the unsent call (the backup server, 127.0.0.4, gives it a
//!    second try) under a changed generation: stock's 2-hop 502.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

use super::{Lab, Race, Spec};
use crate::actors::backend::{Wire, ADDR_A, ADDR_B};
use crate::actors::load::{grpc_call, Response};
use crate::actors::tcp::BlackHole;
use crate::memcheck::patience;

/// The dead pod's address: no other part of the suite uses it.
pub const DEAD: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 12);

/// The name, and a static backup that gives a call its second try (a
/// failed connect is a try; one peer would give none).
pub const GRPC_SERVERS: &str =
    "server app.test:${BPORT} resolve;\n        server 127.0.0.4:${BPORT} backup;";

/// The server's lines: HTTP/2 from clients (h2c with prior knowledge; the
/// listener still takes HTTP/1.1, which the readiness probes speak), and
/// `/applied` answered without the upstream.
const GRPC_SERVER: &str = "http2 on; location = /applied { return 204; }";

impl Spec {
    /// gRPC calls to [`GRPC_SERVERS`], without keepalive: every attempt
    /// connects.
    pub fn grpc_calls(flavor: crate::nginx::Flavor, extra: &str) -> Spec {
        Spec {
            servers: GRPC_SERVERS.into(),
            keepalive: false,
            location_extra: String::new(),
            wire: Wire::Grpc,
            ..Spec::single_peer(flavor, "", extra)
        }
    }
}

/// A [`Lab`] whose clients call gRPC over HTTP/2, and the dead pod.
pub struct GrpcLab {
    pub lab: Lab,
    hole: BlackHole,
}

impl GrpcLab {
    /// Starts `spec` ([`Spec::grpc_calls`], or [`Spec::wire`] for gRPC)
    /// with HTTP/2 on nginx's listener, and the hole at [`DEAD`].
    pub async fn start(spec: Spec) -> GrpcLab {
        let lab = Lab::start_spec_with(spec, &[("SERVER_EXTRA", GRPC_SERVER.into())]).await;
        let hole = BlackHole::at(SocketAddr::from((DEAD, lab.backend.port()))).await;
        GrpcLab { lab, hole }
    }

    /// One unary call of `path`, on a connection of its own.
    pub fn call(&self, path: &str) -> JoinHandle<Response> {
        let (addr, path) = (self.lab.nginx.addr(), path.to_string());
        let payload = format!("call {path}").into_bytes();
        tokio::spawn(async move { grpc_call(addr, &path, &payload).await })
    }

    /// The connect race, once (see the module's doc): the call of
    /// `/race/I` (service `race`, method `I`) first tried [`DEAD`].
    pub async fn connect_race(&mut self, i: usize) -> Race {
        let wait = patience(Duration::from_secs(10));
        let new = if self.lab.current == ADDR_A {
            ADDR_B
        } else {
            ADDR_A
        };
        self.hole.open().await;
        self.lab.point(&[DEAD]).await;
        let path = format!("/race/{i}");
        let call = self.call(&path);
        self.hole
            .wait_connecting(wait)
            .await
            .unwrap_or_else(|e| panic!("race {i}: {e}\n{}", self.lab.nginx.error_log()));
        self.lab.point(&[new]).await;
        self.lab.current = new;
        let released = Instant::now();
        self.hole.close();
        self.finish_race(DEAD, new, DEAD, path, call, released)
            .await
    }

    /// A call sent on a reused keepalive connection ([`Spec::wire`] for
    /// gRPC) that the backend holds and then closes without answering,
    /// after the name moved (`flip`) or not. nginx does not resend it.
    pub async fn sent_call(&mut self, i: usize, flip: bool) -> Race {
        let wait = patience(Duration::from_secs(10));
        let old = self.lab.current;
        let new = match (flip, old == ADDR_A) {
            (false, _) => old,
            (true, true) => ADDR_B,
            (true, false) => ADDR_A,
        };
        self.lab.wait_proxying_to(old, &format!("/warm/{i}")).await;
        let hold = self.lab.backend.arm_hold();
        let path = format!("/sent/{i}");
        let call = self.call(&path);
        let held = hold
            .caught(wait)
            .await
            .unwrap_or_else(|e| panic!("call {i}: {e}"));
        assert_eq!((held.addr, held.path.as_str()), (old, path.as_str()));
        if flip {
            self.lab.point(&[new]).await;
            self.lab.current = new;
        }
        let released = Instant::now();
        held.close();
        self.finish_race(old, new, old, path, call, released).await
    }

    async fn finish_race(
        &self,
        old: Ipv4Addr,
        new: Ipv4Addr,
        first_hop: Ipv4Addr,
        path: String,
        call: JoinHandle<Response>,
        released: Instant,
    ) -> Race {
        let response = call.await.expect("the call's task");
        let after_release = released.elapsed();
        let entry = self.lab.access_entry(&path).await;
        Race {
            old,
            new,
            first_hop,
            after_release,
            path,
            response,
            entry,
        }
    }
}
