//! What the backend speaks: HTTP/1.1, FastCGI, uwsgi, SCGI, memcached's
//! text protocol or gRPC ([`Wire`]), and how each frames a request and an
//! answer. The byte protocols are written here by hand: each is a few
//! dozen lines of framing, and a server crate for any of them would bring
//! an application framework for what is a record reader. gRPC is served by
//! the `h2` crate ([`super::grpc`]).

use std::net::Ipv4Addr;

use tokio::io::{AsyncRead, AsyncReadExt};

/// The upstream protocol between nginx and the backend.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Wire {
    /// `proxy_pass`: HTTP/1.1, keepalive.
    #[default]
    Http,
    /// `fastcgi_pass`: FastCGI records, `fastcgi_keep_conn on` honoured.
    FastCgi,
    /// `uwsgi_pass`: the uwsgi packet; one request per connection.
    Uwsgi,
    /// `scgi_pass`: a netstring of headers; one request per connection.
    Scgi,
    /// `memcached_pass`: `get KEY`, answered `VALUE`/`END`; keepalive.
    Memcached,
    /// `grpc_pass`: HTTP/2 (h2c), a length-prefixed message and a
    /// `grpc-status` trailer; keepalive.
    Grpc,
    /// `proxy_pass` with `proxy_http_version 2` (from the version
    /// [`crate::since`] names): HTTP/2 (h2c); keepalive.
    Http2,
}

impl Wire {
    /// Every protocol nginx's http upstream speaks, as the suite names them.
    pub const ALL: [Wire; 7] = [
        Wire::Http,
        Wire::FastCgi,
        Wire::Uwsgi,
        Wire::Scgi,
        Wire::Memcached,
        Wire::Grpc,
        Wire::Http2,
    ];

    /// The protocol's name in the suite: the directive prefix, but
    /// `http2` for `proxy_http_version 2`.
    pub fn name(self) -> &'static str {
        match self {
            Wire::Http2 => "http2",
            w => w.prefix(),
        }
    }

    /// The first nginx version that speaks it ([`crate::since`]).
    pub fn since(self) -> (u32, u32, u32) {
        crate::since::since(self.name())
    }

    /// Whether it is HTTP/2, served by [`super::h2`].
    pub fn http2(self) -> bool {
        matches!(self, Wire::Grpc | Wire::Http2)
    }

    /// The directive prefix: `proxy`, `fastcgi`, ... (`${prefix}_pass`,
    /// `${prefix}_next_upstream`, ...).
    pub fn prefix(self) -> &'static str {
        match self {
            Wire::Http | Wire::Http2 => "proxy",
            Wire::FastCgi => "fastcgi",
            Wire::Uwsgi => "uwsgi",
            Wire::Scgi => "scgi",
            Wire::Memcached => "memcached",
            Wire::Grpc => "grpc",
        }
    }

    /// Whether nginx keeps connections to such a backend alive (uwsgi and
    /// SCGI close after every response: nginx reads them to the end).
    pub fn keepalive(self) -> bool {
        !matches!(self, Wire::Uwsgi | Wire::Scgi)
    }

    /// Whether nginx passes a request body (memcached serves GET and HEAD
    /// only).
    pub fn has_body(self) -> bool {
        self != Wire::Memcached
    }

    /// The location lines that pass a request to `${UPSTREAM}` this way,
    /// with what the backend reads (method and URI); `${SCHEME}` is
    /// `http` or `https` for [`Wire::Http`].
    pub fn pass(self) -> &'static str {
        match self {
            Wire::Http => "proxy_pass ${SCHEME}://${UPSTREAM};",
            Wire::FastCgi => {
                "fastcgi_pass ${UPSTREAM}; fastcgi_param REQUEST_METHOD $request_method; \
                 fastcgi_param REQUEST_URI $request_uri; \
                 fastcgi_param CONTENT_LENGTH $content_length;"
            }
            Wire::Uwsgi => {
                "uwsgi_pass ${UPSTREAM}; uwsgi_param REQUEST_METHOD $request_method; \
                 uwsgi_param REQUEST_URI $request_uri; \
                 uwsgi_param CONTENT_LENGTH $content_length;"
            }
            Wire::Scgi => {
                "scgi_pass ${UPSTREAM}; scgi_param REQUEST_METHOD $request_method; \
                 scgi_param REQUEST_URI $request_uri;"
            }
            Wire::Memcached => "set $memcached_key $uri; memcached_pass ${UPSTREAM};",
            Wire::Grpc => "grpc_pass grpc://${UPSTREAM};",
            Wire::Http2 => "proxy_pass http://${UPSTREAM}; proxy_http_version 2;",
        }
    }

    /// The location lines that let nginx keep this backend's connections
    /// alive (with `keepalive N` in the upstream).
    pub fn keepalive_location(self) -> &'static str {
        match self {
            Wire::Http => crate::shared::KEEPALIVE_LOCATION,
            Wire::FastCgi => "fastcgi_keep_conn on;",
            Wire::Uwsgi | Wire::Scgi | Wire::Memcached | Wire::Grpc | Wire::Http2 => "",
        }
    }

    /// The body the client gets for an answer from `ip`: the address and a
    /// newline; for gRPC, that as one length-prefixed message (nginx passes
    /// gRPC's framing through).
    pub fn body(self, ip: Ipv4Addr) -> String {
        let text = format!("{ip}\n");
        match self {
            Wire::Grpc => String::from_utf8(grpc_message(text.as_bytes())).expect("ASCII"),
            _ => text,
        }
    }
}

/// One gRPC message: uncompressed, a 4-byte big-endian length, the bytes.
pub fn grpc_message(payload: &[u8]) -> Vec<u8> {
    let mut m = vec![0u8];
    let len = u32::try_from(payload.len()).expect("one gRPC message: 4 GiB");
    m.extend_from_slice(&len.to_be_bytes());
    m.extend_from_slice(payload);
    m
}

/// A request as the backend read it.
pub(super) struct Request {
    pub method: String,
    pub path: String,
    /// The backend closes the connection after answering.
    pub close: bool,
    /// FastCGI's request id, echoed in the answer's records.
    pub id: u16,
}

/// Reads from a stream into a buffer that outlives one request (a
/// keepalive connection's next request may already be in it).
pub(super) struct Reader<'a, S> {
    pub stream: &'a mut S,
    pub buf: &'a mut Vec<u8>,
}

impl<S: AsyncRead + Unpin> Reader<'_, S> {
    /// Until the buffer holds `n` bytes; `None` on EOF or an error.
    async fn need(&mut self, n: usize) -> Option<()> {
        while self.buf.len() < n {
            let mut chunk = [0u8; 4096];
            let got = self.stream.read(&mut chunk).await.ok()?;
            if got == 0 {
                return None;
            }
            self.buf.extend_from_slice(&chunk[..got]);
        }
        Some(())
    }

    /// The next `n` bytes, consumed.
    async fn take(&mut self, n: usize) -> Option<Vec<u8>> {
        self.need(n).await?;
        Some(self.buf.drain(..n).collect())
    }

    /// Bytes up to and including `end`, consumed.
    async fn until(&mut self, end: &[u8]) -> Option<Vec<u8>> {
        loop {
            if let Some(pos) = find(self.buf, end) {
                return Some(self.buf.drain(..pos + end.len()).collect());
            }
            let want = self.buf.len() + 1;
            self.need(want).await?;
        }
    }

    /// One request in `wire`'s framing (not HTTP/2's). `None` on EOF
    /// or a malformed request.
    pub async fn request(&mut self, wire: Wire) -> Option<Request> {
        match wire {
            Wire::Http => self.http().await,
            Wire::FastCgi => self.fastcgi().await,
            Wire::Uwsgi => self.uwsgi().await,
            Wire::Scgi => self.scgi().await,
            Wire::Memcached => self.memcached().await,
            Wire::Grpc | Wire::Http2 => unreachable!("HTTP/2 is served by h2"),
        }
    }

    /// A head and a Content-Length body.
    async fn http(&mut self) -> Option<Request> {
        let head = self.until(b"\r\n\r\n").await?;
        let head = String::from_utf8_lossy(&head).into_owned();
        let mut lines = head.split("\r\n");
        let mut first = lines.next()?.split(' ');
        let method = first.next()?.to_string();
        let path = first.next()?.to_string();
        let version = first.next().unwrap_or("HTTP/1.0");
        let mut length = 0usize;
        let mut close = version == "HTTP/1.0";
        for line in lines {
            let Some((k, v)) = line.split_once(':') else {
                continue;
            };
            let (k, v) = (k.trim().to_ascii_lowercase(), v.trim().to_ascii_lowercase());
            match k.as_str() {
                "content-length" => length = v.parse().ok()?,
                "connection" if v == "close" => close = true,
                "connection" if v == "keep-alive" => close = false,
                _ => {}
            }
        }
        self.take(length).await?;
        Some(Request {
            method,
            path,
            close,
            id: 0,
        })
    }

    /// FastCGI: BEGIN_REQUEST, PARAMS records up to an empty one, STDIN
    /// records up to an empty one.
    async fn fastcgi(&mut self) -> Option<Request> {
        const BEGIN_REQUEST: u8 = 1;
        const PARAMS: u8 = 4;
        const STDIN: u8 = 5;
        let (mut id, mut keep_conn, mut params) = (0u16, false, Vec::new());
        loop {
            let h = self.take(8).await?;
            let (kind, rid) = (h[1], u16::from_be_bytes([h[2], h[3]]));
            let len = usize::from(u16::from_be_bytes([h[4], h[5]]));
            let content = self.take(len + usize::from(h[6])).await?;
            let content = &content[..len];
            match kind {
                BEGIN_REQUEST => {
                    id = rid;
                    keep_conn = content.get(2)? & 1 == 1;
                }
                PARAMS => params.extend_from_slice(content),
                STDIN if len == 0 => break,
                STDIN => {}
                _ => return None,
            }
        }
        let vars = fastcgi_pairs(&params)?;
        Some(Request {
            method: var(&vars, "REQUEST_METHOD"),
            path: var(&vars, "REQUEST_URI"),
            close: !keep_conn,
            id,
        })
    }

    /// uwsgi: modifier1, a little-endian u16 size, modifier2, then that
    /// many bytes of (u16 length, key, u16 length, value), then the body.
    async fn uwsgi(&mut self) -> Option<Request> {
        let h = self.take(4).await?;
        let size = usize::from(u16::from_le_bytes([h[1], h[2]]));
        let block = self.take(size).await?;
        let mut vars = Vec::new();
        let mut rest = &block[..];
        while !rest.is_empty() {
            let mut item = || -> Option<String> {
                let n = usize::from(u16::from_le_bytes([*rest.first()?, *rest.get(1)?]));
                let s = String::from_utf8_lossy(rest.get(2..2 + n)?).into_owned();
                rest = &rest[2 + n..];
                Some(s)
            };
            let k = item()?;
            let v = item()?;
            vars.push((k, v));
        }
        self.cgi_body(&vars).await
    }

    /// SCGI: `LEN:` then LEN bytes of NUL-terminated names and values
    /// (CONTENT_LENGTH first), `,`, then the body.
    async fn scgi(&mut self) -> Option<Request> {
        let digits = self.until(b":").await?;
        let len: usize = std::str::from_utf8(&digits[..digits.len() - 1])
            .ok()?
            .parse()
            .ok()?;
        let block = self.take(len + 1).await?;
        if block[len] != b',' {
            return None;
        }
        let fields: Vec<String> = block[..len]
            .split(|b| *b == 0)
            .map(|f| String::from_utf8_lossy(f).into_owned())
            .collect();
        let vars: Vec<(String, String)> = fields
            .chunks_exact(2)
            .map(|kv| (kv[0].clone(), kv[1].clone()))
            .collect();
        self.cgi_body(&vars).await
    }

    /// The body of a request whose CGI variables are `vars` (uwsgi, SCGI:
    /// CONTENT_LENGTH bytes), consumed; the request, one per connection.
    async fn cgi_body(&mut self, vars: &[(String, String)]) -> Option<Request> {
        self.take(var(vars, "CONTENT_LENGTH").parse().unwrap_or(0))
            .await?;
        Some(Request {
            method: var(vars, "REQUEST_METHOD"),
            path: var(vars, "REQUEST_URI"),
            close: true,
            id: 0,
        })
    }

    /// memcached: `get KEY\r\n` (nginx sends nothing else).
    async fn memcached(&mut self) -> Option<Request> {
        let line = self.until(b"\r\n").await?;
        let line = String::from_utf8_lossy(&line[..line.len() - 2]).into_owned();
        let key = line.strip_prefix("get ")?;
        Some(Request {
            method: "GET".into(),
            path: key.to_string(),
            close: false,
            id: 0,
        })
    }
}

/// FastCGI name-value pairs: each length is one byte, or four (high bit
/// set) big-endian.
fn fastcgi_pairs(mut b: &[u8]) -> Option<Vec<(String, String)>> {
    fn len(b: &mut &[u8]) -> Option<usize> {
        let first = *b.first()?;
        if first & 0x80 == 0 {
            *b = &b[1..];
            Some(usize::from(first))
        } else {
            let n = u32::from_be_bytes(b.get(..4)?.try_into().ok()?) & 0x7fff_ffff;
            *b = &b[4..];
            usize::try_from(n).ok()
        }
    }
    let mut out = Vec::new();
    while !b.is_empty() {
        let (k, v) = (len(&mut b)?, len(&mut b)?);
        let name = String::from_utf8_lossy(b.get(..k)?).into_owned();
        let value = String::from_utf8_lossy(b.get(k..k + v)?).into_owned();
        b = &b[k + v..];
        out.push((name, value));
    }
    Some(out)
}

fn var(vars: &[(String, String)], name: &str) -> String {
    vars.iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.clone())
        .unwrap_or_default()
}

/// The bytes that answer `req` in `wire`'s framing with `status` ("200
/// OK") and `body`, and `x_backend` as a header where the protocol has
/// headers.
pub(super) fn answer(
    wire: Wire,
    req: &Request,
    status: &str,
    body: &str,
    x_backend: Ipv4Addr,
) -> Vec<u8> {
    let headers = format!(
        "Content-Type: text/plain\r\nContent-Length: {}\r\nX-Backend: {x_backend}\r\n",
        body.len()
    );
    match wire {
        Wire::Http => format!(
            "HTTP/1.1 {status}\r\n{headers}{}\r\n{body}",
            if req.close {
                "Connection: close\r\n"
            } else {
                ""
            }
        )
        .into_bytes(),
        // uWSGI answers with an HTTP status line.
        Wire::Uwsgi => format!("HTTP/1.1 {status}\r\n{headers}\r\n{body}").into_bytes(),
        // CGI style: a Status header.
        Wire::Scgi => format!("Status: {status}\r\n{headers}\r\n{body}").into_bytes(),
        Wire::FastCgi => {
            const END_REQUEST: u8 = 3;
            const STDOUT: u8 = 6;
            let record = |kind: u8, content: &[u8]| {
                let len = u16::try_from(content.len()).expect("one FastCGI record: 64 KiB");
                let mut r = vec![1, kind];
                r.extend_from_slice(&req.id.to_be_bytes());
                r.extend_from_slice(&len.to_be_bytes());
                r.extend_from_slice(&[0, 0]);
                r.extend_from_slice(content);
                r
            };
            let out = format!("Status: {status}\r\n{headers}\r\n{body}");
            let mut r = record(STDOUT, out.as_bytes());
            r.extend(record(STDOUT, b""));
            // appStatus 0, FCGI_REQUEST_COMPLETE.
            r.extend(record(END_REQUEST, &[0; 8]));
            r
        }
        Wire::Memcached => {
            format!("VALUE {} 0 {}\r\n{body}\r\nEND\r\n", req.path, body.len()).into_bytes()
        }
        Wire::Grpc | Wire::Http2 => unreachable!("HTTP/2 is served by h2"),
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}
