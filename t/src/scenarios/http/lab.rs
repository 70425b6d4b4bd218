//! The [`Lab`]: nginx, DNS and backend wired together, started from a
//! [`Spec`] and waited for until nginx proxies to the name's address;
//! reloaded, reconfigured and finished.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use super::spec::{without_default_keepalive, Ready, Spec, NAME, PROXY_HTTP};
use crate::actors::backend::{Backend, ADDR_A};
use crate::actors::dns::{Answer, DnsServer};
use crate::actors::load::probe_clients;
use crate::actors::load::Client;
use crate::memcheck::patience;
use crate::nginx::{Config, Flavor, Nginx};
use crate::scoring::accesslog::Entry;
use crate::shared::status_handler;
/// nginx, DNS and backend wired together.
pub struct Lab {
    pub dns: DnsServer,
    pub backend: Backend,
    pub nginx: Nginx,
    pub client: Client,
    /// Clients from 127.0.K.1 for probes (see [`probe_clients`]).
    probes: Vec<Client>,
    /// The address the DNS currently answers.
    pub current: Ipv4Addr,
    pub(super) keepalive: bool,
    /// What nginx was started with (see [`Lab::reconfigure`]).
    pub(super) config: Config,
}

impl Lab {
    /// Starts DNS answering [`ADDR_A`], the backend, and nginx with
    /// [`PROXY_HTTP`] and [`SINGLE_PEER_SERVERS`](super::SINGLE_PEER_SERVERS); waits until nginx
    /// proxies to [`ADDR_A`].
    pub async fn start(flavor: Flavor, upstream_extra: &str) -> Lab {
        Lab::start_spec(Spec::single_peer(flavor, "", upstream_extra)).await
    }

    pub async fn start_spec(spec: Spec) -> Lab {
        Lab::start_spec_with(spec, &[]).await
    }

    /// As [`Lab::start_spec`], with more `${NAME}` values for the template.
    pub async fn start_spec_with(spec: Spec, vars: &[(&str, String)]) -> Lab {
        let Spec {
            flavor,
            servers,
            pre,
            extra,
            keepalive,
            http_extra,
            location_extra,
            tls,
            wrapper,
            daemon,
            ready,
            stream,
            valid,
            wire,
            records,
            ipv6,
        } = spec;
        let dns = DnsServer::start().await;
        dns.set_a(NAME, ADDR_A);
        let backend = if tls {
            Backend::start_tls().await
        } else {
            Backend::start_wire(wire).await
        };
        for (name, answer) in records(backend.port()) {
            dns.set(&name, answer);
        }
        let (scheme, location_extra) = if tls {
            (
                "https",
                format!("proxy_ssl_session_reuse on; {location_extra}"),
            )
        } else {
            ("http", location_extra)
        };
        let status = status_handler(flavor.module.is_some());
        let servers = without_default_keepalive(servers, keepalive, &pre, &extra);
        let families = if ipv6 { "ipv6=on ipv4=off" } else { "ipv6=off" };
        let http = PROXY_HTTP
            .replace("valid=1s", &format!("valid={valid}s"))
            .replace("ipv6=off", families);
        let mut config = Config::new(flavor, http)
            .var("SERVERS", servers)
            .stream(stream);
        config.daemon = daemon;
        if !wrapper.is_empty() {
            // A cost measurement: log the same line with and without module.
            let wrapper: Vec<&str> = wrapper.iter().map(String::as_str).collect();
            config = config.wrapped(&wrapper);
            config.plain_log = true;
        }
        for (k, v) in vars {
            config = config.var(k, v);
        }
        let config = config
            .var("STATUS", status)
            .var("DNS", dns.addr())
            .var("BPORT", backend.port())
            .var("UPSTREAM_PRE", pre)
            .var("UPSTREAM_EXTRA", extra)
            .var("HTTP_EXTRA", http_extra)
            .var("LOCATION_EXTRA", location_extra)
            .var("PASS", wire.pass())
            .var("SCHEME", scheme)
            .var("SERVER_EXTRA", "");
        let since = Instant::now();
        let nginx = Nginx::start(&config);
        let (client, probes) = clients(&nginx);
        let lab = Lab {
            dns,
            backend,
            nginx,
            client,
            probes,
            current: ADDR_A,
            keepalive,
            config,
        };
        match ready {
            Ready::Proxying => {
                if crate::nginx::is_tengine() {
                    // Tengine 3.2.0's worker dies on a request that meets
                    // the empty list before the first answer
                    // (tests/empty_list.rs): no probe until nginx was
                    // told an address, whose datagram its one worker
                    // reads before the probe's connection.
                    lab.dns
                        .wait_any_address(since, patience(Duration::from_secs(10)))
                        .await
                        .unwrap_or_else(|e| panic!("{e}\n{}", lab.nginx.error_log()));
                }
                lab.wait_proxying_to(ADDR_A, "/ready").await
            }
            Ready::Answered => lab.wait_applied(ADDR_A, since).await,
        }
        lab
    }

    /// Waits (bounded) until the DNS server has answered nginx `ip` for
    /// [`NAME`] after `since` and sent that answer ([`DnsServer::wait_answered`]),
    /// then makes one round trip through nginx's one worker: the answer's
    /// datagram was in the resolver's socket before the request was sent,
    /// so the worker has read it, and applied it to the upstream, by the
    /// time it answers.
    pub async fn wait_applied(&self, ip: Ipv4Addr, since: Instant) {
        self.wait_answer_applied(&Answer::A(vec![ip]), since).await;
    }

    /// Points [`NAME`] at `ips` and waits until nginx's one worker applied
    /// them, as [`Lab::wait_applied`] proves it.
    pub async fn point(&self, ips: &[Ipv4Addr]) {
        let since = Instant::now();
        let answer = Answer::A(ips.to_vec());
        self.dns.set(NAME, answer.clone());
        self.wait_answer_applied(&answer, since).await;
    }

    async fn wait_answer_applied(&self, answer: &Answer, since: Instant) {
        self.dns
            .wait_answered(NAME, answer, since, patience(Duration::from_secs(10)))
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", self.nginx.error_log()));
        // The answer's datagram was read before this request's connection.
        let _ = self.client.get("/applied").await;
    }

    /// Polls with requests until one is answered by `ip`: proof that nginx's
    /// peer list holds the address the DNS gave it. Probes vary their path
    /// and source address, so hashing balancers reach every peer. Bounded:
    /// 10 s, six times that under memcheck.
    pub async fn wait_proxying_to(&self, ip: Ipv4Addr, tag: &str) {
        let deadline = Instant::now() + patience(Duration::from_secs(10));
        let want = self.backend.body(ip);
        for k in 0.. {
            let client = if self.keepalive {
                // Through the main client: it warms nginx's keepalive cache
                // exactly as the race needs.
                &self.client
            } else {
                &self.probes[k % self.probes.len()]
            };
            let r = client.get(&format!("{tag}/{k}")).await;
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
        let deadline = Instant::now() + patience(Duration::from_secs(5));
        loop {
            if let Some(e) = self.nginx.access_entry(path) {
                return e;
            }
            assert!(
                Instant::now() < deadline,
                "no access log line for {path}\n{}",
                self.nginx.error_log()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Reloads nginx (SIGHUP) and starts over with new clients: the old
    /// clients' keepalive connections belong to the old worker, which keeps
    /// serving them (with the old cycle's peer list) while it exits.
    pub fn reload(&mut self) {
        // Drop our connections to the old worker first, so it can exit.
        self.reload_clients();
        self.nginx.reload();
    }

    /// New clients (new connections, so new workers serve them).
    pub fn reload_clients(&mut self) {
        (self.client, self.probes) = clients(&self.nginx);
    }

    /// Reloads nginx with `${name}` of the configuration set to `value`
    /// for each pair (`UPSTREAM_EXTRA`, `HTTP_EXTRA`, ...), and drops the
    /// clients' connections to the old workers.
    pub fn reconfigure(&mut self, changes: &[(&str, &str)]) {
        let mut config = self.config.clone();
        for (name, value) in changes {
            config = config.set_var(name, value);
        }
        // Drop our connections to the old worker first, so it can exit.
        self.reload_clients();
        self.nginx.reconfigure(&config);
        self.config = config;
    }

    /// Stops nginx, failing on fatal error.log lines; with the module,
    /// first checks every upstream's busy = rescued + failed.
    pub fn finish(self) {
        if self.config.flavor.module.is_some() {
            self.nginx.assert_busy_is_rescued_plus_failed();
        }
        self.nginx.finish();
    }
}

/// The main client and the probe clients of an nginx.
fn clients(nginx: &Nginx) -> (Client, Vec<Client>) {
    (Client::new(nginx.url("")), probe_clients(&nginx.url("")))
}
