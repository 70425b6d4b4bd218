//! A gRPC client, calling as gRPC libraries do: HTTP/2 with prior knowledge
//! (h2c, which nginx's plain listener takes with `http2 on;`), one unary call
//! per connection (a fresh channel): a `POST` with `content-type:
//! application/grpc`, `te: trailers` and one length-prefixed message, the
//! stream's end on its DATA frame. Through `grpc_pass` nginx neither
//! buffers such a body (`r->request_body_no_buffering`) nor resends a POST
//! once sent, so the only attempts it retries are those it never sent.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::Response;
use crate::actors::backend::grpc_message;

/// One unary call of `path` (`/Service/Method`) carrying `payload`, to
/// nginx at `addr`: the HTTP status, the headers with the trailers
/// (`grpc-status`) merged in, the body (the message with its prefix, or
/// nginx's error page), or the transport error. Bounded: 30 s.
pub async fn grpc_call(addr: SocketAddr, path: &str, payload: &[u8]) -> Response {
    let started = Instant::now();
    let called = tokio::time::timeout(Duration::from_secs(30), call(addr, path, payload)).await;
    let (status, headers, body, error) = match called {
        Ok(Ok((status, headers, body))) => (Some(status), headers, body, None),
        Ok(Err(e)) => (None, Default::default(), Vec::new(), Some(e)),
        Err(_) => (
            None,
            Default::default(),
            Vec::new(),
            Some("timed out".into()),
        ),
    };
    Response {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
        latency: started.elapsed(),
        error,
    }
}

async fn call(
    addr: SocketAddr,
    path: &str,
    payload: &[u8],
) -> Result<(u16, http::HeaderMap, Vec<u8>), String> {
    let e = |what: &'static str| move |err: h2::Error| format!("gRPC {what}: {err}");
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|err| format!("gRPC connect {addr}: {err}"))?;
    let (client, connection) = h2::client::handshake(tcp).await.map_err(e("handshake"))?;
    let driver = tokio::spawn(async move {
        let _ = connection.await;
    });
    let mut client = client.ready().await.map_err(e("ready"))?;
    let request = http::Request::builder()
        .method("POST")
        .uri(format!("http://{addr}{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .header("grpc-accept-encoding", "identity")
        .header("user-agent", "generation-retry-t-grpc")
        .body(())
        .expect("a valid request head");
    let (response, mut send) = client
        .send_request(request, false)
        .map_err(e("send headers"))?;
    send.send_data(Bytes::from(grpc_message(payload)), true)
        .map_err(e("send message"))?;
    let response = response.await.map_err(e("response"))?;
    let status = response.status().as_u16();
    let mut headers = response.headers().clone();
    let mut body = response.into_body();
    let mut bytes = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.map_err(e("body"))?;
        let _ = body.flow_control().release_capacity(chunk.len());
        bytes.extend_from_slice(&chunk);
    }
    if let Some(trailers) = body.trailers().await.map_err(e("trailers"))? {
        headers.extend(trailers);
    }
    driver.abort();
    Ok((status, headers, bytes))
}
