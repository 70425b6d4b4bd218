//! The backend's own fault controls, checked on raw sockets (no nginx):
//! what they promise is what the race and lab scenarios rely on.

use std::time::{Duration, Instant};

use generation_retry_t::actors::backend::{Backend, ADDR_A};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const REQUEST: &[u8] = b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n";

/// Reads one response (this backend always sends Content-Length).
async fn read_response(s: &mut TcpStream) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    loop {
        let n = s.read(&mut chunk).await.unwrap();
        assert!(
            n > 0,
            "closed before a full response: {:?}",
            String::from_utf8_lossy(&buf)
        );
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf);
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("Content-Length: "))
                .unwrap()
                .parse()
                .unwrap();
            if body.len() >= len {
                return buf;
            }
        }
    }
}

/// Non-regression guard: a check of the test backend itself; no nginx module is
/// involved.
#[tokio::test]
async fn response_delay_holds_the_answer() {
    let b = Backend::start().await;
    b.set_delay(Duration::from_millis(150));
    let mut s = TcpStream::connect((ADDR_A, b.port())).await.unwrap();
    let start = Instant::now();
    s.write_all(REQUEST).await.unwrap();
    let resp = read_response(&mut s).await;
    assert!(resp.starts_with(b"HTTP/1.1 200"));
    assert!(
        start.elapsed() >= Duration::from_millis(150),
        "{:?}",
        start.elapsed()
    );
}

/// Non-regression guard: a check of the test backend itself; no nginx module is
/// involved.
#[tokio::test]
async fn idle_timeout_closes_a_kept_alive_connection() {
    let b = Backend::start().await;
    b.set_idle_timeout(Some(Duration::from_millis(100)));
    let mut s = TcpStream::connect((ADDR_A, b.port())).await.unwrap();
    s.write_all(REQUEST).await.unwrap();
    read_response(&mut s).await;
    // The backend closes the idle connection: the read ends with EOF, well
    // before this bound.
    let mut byte = [0u8; 1];
    let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut byte))
        .await
        .expect("the idle connection was not closed")
        .unwrap_or(0);
    assert_eq!(n, 0);
    assert_eq!(b.connections(ADDR_A), 1);
}

/// The HEAD check of the status endpoint can fail: this backend answers a
/// HEAD with a body, as a faulty handler would, and `Client::head` sees it.
///
/// Non-regression guard: a check of the test backend itself; no nginx module is
/// involved.
#[tokio::test]
async fn a_body_sent_after_a_head_is_seen() {
    let backend = Backend::start().await;
    let client = generation_retry_t::actors::load::Client::new(format!(
        "http://{}",
        backend.upstream_addr(ADDR_A)
    ));
    let r = client.head("/h").await;
    assert_eq!(r.status(), 200, "{r:?}");
    assert_eq!(r.headers["x-backend"], "127.0.0.2");
    assert_eq!(r.body, "127.0.0.2\n");
}
