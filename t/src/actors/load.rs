//! Clients: single requests, gRPC calls ([`grpc_call`]), and an open-loop
//! constant-rate generator (like vegeta: requests leave on a fixed schedule
//! whatever the responses do, so a slow or failing server cannot slow the
//! load down and hide failures).

use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::Method;

mod grpc;

pub use grpc::grpc_call;

/// A response, or the transport error that replaced it.
#[derive(Clone, Debug)]
pub struct Response {
    pub status: Option<u16>,
    pub headers: reqwest::header::HeaderMap,
    pub body: String,
    pub latency: Duration,
    pub error: Option<String>,
}

impl Response {
    pub fn status(&self) -> u16 {
        self.status.unwrap_or(0)
    }
}

/// An HTTP client for one nginx.
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
}

impl Client {
    /// `base` like `http://127.0.0.1:PORT`.
    pub fn new(base: impl Into<String>) -> Client {
        Client::build(base.into(), None)
    }

    /// A client whose connections leave from `source` (any 127/8 address):
    /// balancers that hash the client address (ip_hash uses its first three
    /// octets) then see different clients.
    pub fn with_source(base: impl Into<String>, source: std::net::IpAddr) -> Client {
        Client::build(base.into(), Some(source))
    }

    /// A client that opens a new connection for every request: for load
    /// across a worker change, where a pooled connection the old worker
    /// closes while idle would fail a request on the client side (a
    /// keepalive race of the client, not a request nginx dropped).
    pub fn without_keepalive(base: impl Into<String>) -> Client {
        Client::build_with(base.into(), None, 0)
    }

    fn build(base: String, source: Option<std::net::IpAddr>) -> Client {
        Client::build_with(base, source, 256)
    }

    fn build_with(base: String, source: Option<std::net::IpAddr>, idle: usize) -> Client {
        let http = reqwest::Client::builder()
            .no_proxy()
            .local_address(source)
            .timeout(Duration::from_secs(30))
            .pool_max_idle_per_host(idle)
            .build()
            .expect("reqwest client");
        Client { http, base }
    }

    pub async fn request(&self, method: Method, path: &str, body: Option<Vec<u8>>) -> Response {
        let start = Instant::now();
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(body) = body {
            req = req.body(body);
        }
        match req.send().await {
            Ok(resp) => {
                let status = resp.status().as_u16();
                let headers = resp.headers().clone();
                let body = resp.text().await.unwrap_or_default();
                Response {
                    status: Some(status),
                    headers,
                    body,
                    latency: start.elapsed(),
                    error: None,
                }
            }
            Err(e) => Response {
                status: None,
                headers: Default::default(),
                body: String::new(),
                latency: start.elapsed(),
                error: Some(e.to_string()),
            },
        }
    }

    /// A HEAD over a plain socket, read to the end: `body` is whatever the
    /// server sent after the header (an HTTP client would not read it, so a
    /// body sent in error would go unseen). Plain-HTTP bases only.
    pub async fn head(&self, path: &str) -> Response {
        let started = Instant::now();
        let failed = |e: String| Response {
            status: None,
            headers: Default::default(),
            body: String::new(),
            latency: started.elapsed(),
            error: Some(e),
        };
        let Some(authority) = self.base.strip_prefix("http://") else {
            return failed(format!("head: not a plain-HTTP base: {}", self.base));
        };
        let request =
            format!("HEAD {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n");
        let exchange = async {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let mut s = tokio::net::TcpStream::connect(authority).await?;
            s.write_all(request.as_bytes()).await?;
            let mut raw = Vec::new();
            s.read_to_end(&mut raw).await?;
            Ok::<_, std::io::Error>(raw)
        };
        let raw = match tokio::time::timeout(Duration::from_secs(30), exchange).await {
            Ok(Ok(raw)) => raw,
            Ok(Err(e)) => return failed(format!("head: {e}")),
            Err(_) => return failed("head: timed out".into()),
        };
        match parse_head(&raw) {
            Some((status, headers, body)) => Response {
                status: Some(status),
                headers,
                body: String::from_utf8_lossy(body).into_owned(),
                latency: started.elapsed(),
                error: None,
            },
            None => failed(format!(
                "head: not an HTTP response: {:?}",
                String::from_utf8_lossy(&raw)
            )),
        }
    }

    pub async fn get(&self, path: &str) -> Response {
        self.request(Method::GET, path, None).await
    }
}

/// One HTTP/1.1 keepalive connection to nginx, kept for its life: every
/// request goes on it, so one nginx worker serves them all (an HTTP client's
/// pool may open a new connection whenever it likes, and a new connection
/// may land on any worker). GETs only; responses must carry Content-Length.
pub struct Connection {
    stream: tokio::net::TcpStream,
    authority: String,
    buf: Vec<u8>,
}

impl Connection {
    pub async fn open(addr: std::net::SocketAddr) -> std::io::Result<Connection> {
        Ok(Connection {
            stream: tokio::net::TcpStream::connect(addr).await?,
            authority: addr.to_string(),
            buf: Vec::new(),
        })
    }

    /// GET `path` on this connection; an error if it was closed or the
    /// answer took longer than 30 s.
    pub async fn get(&mut self, path: &str) -> Result<Response, String> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let started = Instant::now();
        let request = format!("GET {path} HTTP/1.1\r\nHost: {}\r\n\r\n", self.authority);
        let exchange = async {
            self.stream
                .write_all(request.as_bytes())
                .await
                .map_err(|e| format!("GET {path}: {e}"))?;
            loop {
                if let Some((status, headers, rest)) = parse_head(&self.buf) {
                    let len: usize = headers
                        .get("content-length")
                        .and_then(|v| v.to_str().ok()?.parse().ok())
                        .ok_or_else(|| format!("GET {path}: no Content-Length"))?;
                    if rest.len() >= len {
                        let body = String::from_utf8_lossy(&rest[..len]).into_owned();
                        let used = self.buf.len() - rest.len() + len;
                        self.buf.drain(..used);
                        return Ok((status, headers, body));
                    }
                }
                let mut chunk = [0u8; 16384];
                match self.stream.read(&mut chunk).await {
                    Ok(0) => return Err(format!("GET {path}: the connection was closed")),
                    Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                    Err(e) => return Err(format!("GET {path}: {e}")),
                }
            }
        };
        let (status, headers, body) = tokio::time::timeout(Duration::from_secs(30), exchange)
            .await
            .map_err(|_| format!("GET {path}: no answer within 30 s"))??;
        Ok(Response {
            status: Some(status),
            headers,
            body,
            latency: started.elapsed(),
            error: None,
        })
    }
}

/// A raw response's status, header fields, and the bytes after the header.
fn parse_head(raw: &[u8]) -> Option<(u16, reqwest::header::HeaderMap, &[u8])> {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..end]).ok()?;
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let mut headers = reqwest::header::HeaderMap::new();
    for line in lines {
        let (name, value) = line.split_once(':')?;
        headers.append(
            reqwest::header::HeaderName::from_bytes(name.trim().as_bytes()).ok()?,
            reqwest::header::HeaderValue::from_str(value.trim()).ok()?,
        );
    }
    Some((status, headers, &raw[end + 4..]))
}

/// One request of an open-loop run.
#[derive(Clone, Debug)]
pub struct Sent {
    /// When it was scheduled, from the start of the run.
    pub at: Duration,
    pub method: Method,
    pub path: String,
    pub response: Response,
}

/// Fails, showing the first failure, unless every request got a 200.
pub fn assert_all_ok(sent: &[Sent]) {
    let failed: Vec<_> = sent.iter().filter(|s| s.response.status() != 200).collect();
    assert!(
        failed.is_empty(),
        "{} of {} failed, first: {:?}",
        failed.len(),
        sent.len(),
        failed.first()
    );
}

/// Sends `rate` requests per second for `duration`, on schedule. `make(i)`
/// gives request `i`'s method, path and body. Returns every request in
/// schedule order once all have completed.
pub async fn open_loop<F>(client: &Client, rate: f64, duration: Duration, make: F) -> Vec<Sent>
where
    F: Fn(u64) -> (Method, String, Option<Vec<u8>>),
{
    assert!(rate > 0.0, "rate must be positive");
    let interval = Duration::from_secs_f64(1.0 / rate);
    let total = (duration.as_secs_f64() * rate).round() as u64;
    let start = tokio::time::Instant::now();
    let mut tasks = Vec::with_capacity(total as usize);
    let client = Arc::new(client.clone());
    for i in 0..total {
        let at = interval.mul_f64(i as f64);
        tokio::time::sleep_until(start + at).await;
        let (method, path, body) = make(i);
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            let response = client.request(method.clone(), &path, body).await;
            Sent {
                at,
                method,
                path,
                response,
            }
        }));
    }
    let mut out = Vec::with_capacity(tasks.len());
    for t in tasks {
        out.push(t.await.expect("request task"));
    }
    out
}

/// Closed loop: `connections` clients each send GET `path` back to back
/// for `duration`. Returns (completed requests, non-200 answers).
pub async fn closed_loop(
    client: &Client,
    connections: usize,
    duration: Duration,
    path: &str,
) -> (u64, u64) {
    let deadline = tokio::time::Instant::now() + duration;
    let mut tasks = Vec::with_capacity(connections);
    for _ in 0..connections {
        let client = client.clone();
        let path = path.to_string();
        tasks.push(tokio::spawn(async move {
            let (mut ok, mut bad) = (0u64, 0u64);
            while tokio::time::Instant::now() < deadline {
                if client.get(&path).await.status() == 200 {
                    ok += 1;
                } else {
                    bad += 1;
                }
            }
            (ok, bad)
        }));
    }
    let mut total = (0, 0);
    for t in tasks {
        let (ok, bad) = t.await.expect("closed-loop task");
        total.0 += ok + bad;
        total.1 += bad;
    }
    total
}

/// How many probe clients [`probe_clients`] gives.
pub const PROBES: u8 = 16;

/// Clients of `base` from 127.0.K.1, K = 1..=[`PROBES`], so that
/// balancers that hash the client address see different clients (see
/// [`Client::with_source`]).
pub fn probe_clients(base: &str) -> Vec<Client> {
    (1..=PROBES)
        .map(|k| Client::with_source(base, std::net::Ipv4Addr::new(127, 0, k, 1).into()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::parse_head;

    #[test]
    fn a_head_response_and_what_follows_it() {
        let (status, headers, rest) =
            parse_head(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nbody").unwrap();
        assert_eq!(status, 200);
        assert_eq!(headers["content-type"], "text/plain");
        assert_eq!(rest, b"body");
        assert!(parse_head(b"HTTP/1.1 200 OK\r\n").is_none());
    }
}
