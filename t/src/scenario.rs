//! Scenarios shared by the tests (and later the lab): an nginx proxying to
//! `server app.test:P resolve;` in a zone, the DNS server answering for
//! app.test, and the two-address backend.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use crate::backend::{Backend, ADDR_A, ADDR_B};
use crate::dns::{Answer, DnsServer};
use crate::load::{Client, Response};
use crate::nginx::{Config, Flavor, Nginx};
use crate::{accesslog::Entry, errorlog};

/// The name the GSLB answers for.
pub const NAME: &str = "app.test";

/// The seed's setting, on loopback: one re-resolving peer, a zone, keepalive.
/// `${DNS}`, `${BPORT}`, `${UPSTREAM_EXTRA}` and `${STATUS}` are filled by
/// [`Lab::start`].
pub const SINGLE_PEER_HTTP: &str = r#"
    upstream be {
        zone be 128k;
        resolver ${DNS} valid=1s ipv6=off;
        resolver_timeout 3s;
        server app.test:${BPORT} resolve;
        keepalive 16;
        ${UPSTREAM_EXTRA}
    }
    server {
        listen 127.0.0.1:${PORT};
        location / {
            proxy_pass http://be;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
        location = /status {
            ${STATUS}
        }
    }
"#;

/// nginx, DNS and backend wired together.
pub struct Lab {
    pub dns: DnsServer,
    pub backend: Backend,
    pub nginx: Nginx,
    pub client: Client,
    /// The address the DNS currently answers.
    pub current: Ipv4Addr,
}

impl Lab {
    /// Starts DNS answering [`ADDR_A`], the backend, and nginx with
    /// [`SINGLE_PEER_HTTP`]; waits until nginx proxies to [`ADDR_A`].
    pub async fn start(flavor: Flavor, upstream_extra: &str) -> Lab {
        Lab::start_with(flavor, SINGLE_PEER_HTTP, upstream_extra).await
    }

    pub async fn start_with(flavor: Flavor, http: &str, upstream_extra: &str) -> Lab {
        let dns = DnsServer::start().await;
        dns.set_a(NAME, ADDR_A);
        let backend = Backend::start().await;
        let status = if flavor.module.is_some() {
            "generation_retry_status;"
        } else {
            "return 404;"
        };
        let config = Config::new(flavor, http)
            .var("STATUS", status)
            .var("DNS", dns.addr())
            .var("BPORT", backend.port())
            .var("UPSTREAM_EXTRA", upstream_extra);
        let nginx = Nginx::start(&config);
        let client = Client::new(nginx.url(""));
        let lab = Lab {
            dns,
            backend,
            nginx,
            client,
            current: ADDR_A,
        };
        lab.wait_proxying_to(ADDR_A, "/ready").await;
        lab
    }

    /// Polls with requests until one is answered by `ip`: proof that nginx's
    /// peer list holds the address the DNS gave it. Bounded: 10 s.
    pub async fn wait_proxying_to(&self, ip: Ipv4Addr, tag: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        let want = format!("{ip}\n");
        for k in 0.. {
            let r = self.client.get(&format!("{tag}/{k}")).await;
            if r.status() == 200 && r.body == want {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "nginx never proxied to {ip}; last answer {r:?}\n{}",
                self.nginx.error_log()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Waits (bounded) for the access log line of `path`.
    pub async fn access_entry(&self, path: &str) -> Entry {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if let Some(e) = self.nginx.access_entry(path) {
                return e;
            }
            assert!(Instant::now() < deadline, "no access log line for {path}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// The deterministic race, once:
    ///
    /// 1. a request on a warm keepalive connection to the current address is
    ///    held by the backend;
    /// 2. the DNS answer flips to the other address, and the test waits until
    ///    nginx has asked, been told, and proxies new requests there;
    /// 3. the backend closes the held connection without answering, so nginx
    ///    retries (a failed cached connection gets its try back) and selects
    ///    again, now under a changed peer-list generation.
    pub async fn race_once(&mut self, i: usize) -> Race {
        let old = self.current;
        let new = if old == ADDR_A { ADDR_B } else { ADDR_A };

        // A cached connection to `old`: its next request is a reused one.
        self.wait_proxying_to(old, &format!("/warm/{i}")).await;

        let hold = self.backend.arm_hold();
        let path = format!("/race/{i}");
        let client = self.client.clone();
        let request = {
            let path = path.clone();
            tokio::spawn(async move { client.get(&path).await })
        };
        let held = hold
            .caught(Duration::from_secs(10))
            .await
            .unwrap_or_else(|e| panic!("race {i}: {e}"));
        assert_eq!(held.addr, old, "race {i}: held on the wrong address");
        assert_eq!(held.path, path);

        let since = Instant::now();
        self.dns.set_a(NAME, new);
        self.dns
            .wait_answered(NAME, &Answer::A(vec![new]), since, Duration::from_secs(10))
            .await
            .unwrap_or_else(|e| panic!("race {i}: {e}"));
        self.wait_proxying_to(new, &format!("/probe/{i}")).await;
        self.current = new;

        held.close();
        let response = request.await.expect("client task");
        let entry = self.access_entry(&path).await;
        Race {
            old,
            new,
            path,
            response,
            entry,
        }
    }

    /// `ADDR:PORT` of a backend address, as `$upstream_addr` shows it.
    pub fn upstream_addr(&self, ip: Ipv4Addr) -> String {
        self.backend.upstream_addr(ip)
    }

    /// The error.log pair of the 2-hop shape for `path`: the connection id if
    /// `upstream prematurely closed connection` is followed by `no live
    /// upstreams` on the same connection.
    pub fn two_hop_pair(&self, path: &str) -> Option<u64> {
        errorlog::two_hop_pair(&self.nginx.error_log(), &format!(" {path} HTTP/"))
    }

    /// The module's JSON status object for `upstream`.
    pub async fn status(&self, upstream: &str) -> serde_json::Value {
        let r = self.client.get("/status?format=json").await;
        assert_eq!(r.status(), 200, "status endpoint: {r:?}");
        let v: serde_json::Value = serde_json::from_str(&r.body)
            .unwrap_or_else(|e| panic!("status JSON: {e}: {}", r.body));
        v["upstreams"]
            .as_array()
            .and_then(|a| a.iter().find(|u| u["upstream"] == upstream))
            .cloned()
            .unwrap_or_else(|| panic!("no upstream {upstream} in {}", r.body))
    }

    /// Stops nginx, failing on fatal error.log lines.
    pub fn finish(self) {
        self.nginx.finish();
    }
}

/// What one race produced.
#[derive(Debug)]
pub struct Race {
    pub old: Ipv4Addr,
    pub new: Ipv4Addr,
    pub path: String,
    pub response: Response,
    pub entry: Entry,
}
