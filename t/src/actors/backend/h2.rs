//! The backend speaking HTTP/2 without TLS (what `grpc_pass grpc://` and
//! `proxy_http_version 2` connect to), served by the `h2` crate. Each
//! request's body is read to its end, then [`decide`] says what happens
//! to it, as for the byte protocols. An answer is, for gRPC, a 200 with
//! `content-type: application/grpc`, one length-prefixed message and a
//! `grpc-status: 0` trailer; for HTTP/2, the body the HTTP/1.1 backend
//! sends. A drop or a released hold closes the whole connection, as a
//! backend that dies mid-request does. nginx sends one request at a time
//! on a connection, so the index of a request on its connection means what
//! it means for HTTP/1.1.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use super::{decide, status_for, Action, State, Wire};

/// Serves one connection until the client closes it or a request is
/// dropped or held and released.
pub(super) async fn serve(stream: TcpStream, ip: Ipv4Addr, conn: u64, state: Arc<State>) {
    let Ok(mut h2) = h2::server::handshake(stream).await else {
        return;
    };
    let (close_tx, mut close_rx) = mpsc::unbounded_channel::<Respond>();
    for index in 0u64.. {
        // Accepting drives the connection: the spawned handlers' frames
        // move while this waits for the next stream.
        let next = tokio::select! {
            next = h2.accept() => next,
            Some(respond) = close_rx.recv() => {
                // The connection goes first: the stream's handle, dropped
                // while the connection lived, would send RST_STREAM
                // (CANCEL), which nginx takes for a rejected request (an
                // invalid header, not retried), not for a dead backend.
                drop(h2);
                drop(respond);
                return;
            }
        };
        let Some(Ok((request, respond))) = next else {
            return;
        };
        let state = state.clone();
        let close = close_tx.clone();
        tokio::spawn(async move {
            if let Some(respond) = handle(request, respond, ip, conn, index, &state).await {
                let _ = close.send(respond);
            }
        });
    }
}

type Respond = h2::server::SendResponse<Bytes>;

/// One request: its unanswered stream when the connection is to be closed.
async fn handle(
    request: http::Request<h2::RecvStream>,
    mut respond: Respond,
    ip: Ipv4Addr,
    conn: u64,
    index: u64,
    state: &State,
) -> Option<Respond> {
    let method = request.method().to_string();
    let path = request.uri().path().to_string();
    let mut body = request.into_body();
    while let Some(chunk) = body.data().await {
        let Ok(chunk) = chunk else {
            return Some(respond);
        };
        let _ = body.flow_control().release_capacity(chunk.len());
    }
    let pause = |d: Duration| async move {
        if !d.is_zero() {
            tokio::time::sleep(d).await;
        }
    };
    match decide(state, ip, conn, index, &method, &path) {
        Action::Drop(delay) => {
            pause(delay).await;
            Some(respond)
        }
        Action::Hold(release) => {
            let _ = release.await;
            Some(respond)
        }
        Action::Answer(delay) => {
            pause(delay).await;
            let grpc = state.wire == Wire::Grpc;
            let response = http::Response::builder()
                .status(status_for(&path).0)
                .header(
                    "content-type",
                    if grpc {
                        "application/grpc"
                    } else {
                        "text/plain"
                    },
                )
                .header("x-backend", ip.to_string())
                .body(())
                .expect("a valid response head");
            let Ok(mut send) = respond.send_response(response, false) else {
                return None; // the connection is gone
            };
            let body = Bytes::from(state.wire.body(ip).into_bytes());
            let _ = if grpc {
                let mut trailers = http::HeaderMap::new();
                trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
                send.send_data(body, false)
                    .and_then(|()| send.send_trailers(trailers))
            } else {
                send.send_data(body, true)
            };
            None
        }
    }
}
