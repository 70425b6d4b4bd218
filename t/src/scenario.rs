//! Scenarios shared by the tests (and later the lab): an nginx proxying to
//! `server app.test:P resolve;` in a zone, the DNS server answering for
//! app.test, and the two-address backend.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use crate::backend::{Backend, ADDR_A, ADDR_B};
use crate::dns::{Answer, DnsServer};
use crate::load::{open_loop, Client, Response, Sent};
use crate::memcheck::patience;
use crate::metrics::{log, NoLiveCause, Protocol};
use crate::nginx::{Config, Flavor, Nginx};
use crate::shared::{probe_clients, status_handler, KEEPALIVE_LOCATION, UPSTREAM};
use crate::{accesslog::Entry, errorlog};

/// The name the GSLB answers for.
pub const NAME: &str = "app.test";

/// nginx proxying `/` to `upstream be` ([`UPSTREAM`]), whose peers
/// re-resolve through the harness DNS, and serving the module's status on
/// `/status` (`return 404` without the module). Every `${NAME}` is filled
/// by [`Lab::start_spec`] (`${UPSTREAM}` by [`Config`] itself).
pub const PROXY_HTTP: &str = r#"
    ${HTTP_EXTRA}
    upstream ${UPSTREAM} {
        zone ${UPSTREAM} 128k;
        resolver ${DNS} valid=1s ipv6=off;
        resolver_timeout 3s;
        ${UPSTREAM_PRE}
        ${SERVERS}
        ${UPSTREAM_EXTRA}
    }
    server {
        listen 127.0.0.1:${PORT};
        location / {
            proxy_pass ${SCHEME}://${UPSTREAM};
            ${LOCATION_EXTRA}
        }
        location = /status {
            ${STATUS}
        }
        ${SERVER_EXTRA}
    }
"#;

/// The seed's setting, on loopback: one re-resolving peer and keepalive.
pub const SINGLE_PEER_SERVERS: &str = "server app.test:${BPORT} resolve;\n        keepalive 16;";

/// Two peers and no keepalive: the re-resolving one and a static one at
/// [`crate::backend::ADDR_C`] (`max_fails=0` so an injected failure does
/// not take it out). A failed first attempt is retried because two peers
/// give two tries.
pub const TWO_PEERS_SERVERS: &str =
    "server app.test:${BPORT} resolve;\n        server 127.0.0.4:${BPORT} max_fails=0;";

/// nginx 1.29.7 turned upstream `keepalive` on by default (32 connections
/// per worker). A spec without keepalive then says `keepalive 0;`, so it
/// means the same thing on every version: a failed attempt is never on a
/// cached connection, whose failure nginx would not count as a try.
fn without_default_keepalive(servers: String, keepalive: bool, pre: &str, extra: &str) -> String {
    let named = [servers.as_str(), pre, extra]
        .iter()
        .any(|t| t.contains("keepalive "));
    if keepalive || named || crate::nginx::version() < (1, 29, 7) {
        servers
    } else {
        format!("{servers}\n        keepalive 0;")
    }
}

/// The line the core patches of `nginx-src-patches/` log (`info`, on the
/// request's or session's connection) when they re-snapshot: the patched
/// nginx's counterpart of the module's rescue line.
pub fn patched_rescue_line(upstream: &str) -> String {
    format!("upstream \"{upstream}\" peers changed, selecting again")
}

/// What to start: nginx flavor, configuration template and its fill-ins.
#[derive(Clone, Debug)]
pub struct Spec {
    pub flavor: Flavor,
    /// The `server` (and `keepalive`) lines of `upstream be`.
    pub servers: String,
    /// Lines before the `server` lines of `upstream be` (a balancer, ...).
    pub pre: String,
    /// Lines at the end of `upstream be`.
    pub extra: String,
    /// Whether the upstream keeps connections alive (decides how the race
    /// gets its failed first attempt).
    pub keepalive: bool,
    /// Lines at http level, before the upstream.
    pub http_extra: String,
    /// Lines in the proxying location.
    pub location_extra: String,
    /// HTTPS to the backend, with `proxy_ssl_session_reuse on`.
    pub tls: bool,
    /// Run nginx under this command (see [`Config::wrapped`]).
    pub wrapper: Vec<String>,
    /// Run nginx as a daemon (see [`Config::daemon`]).
    pub daemon: bool,
    /// How [`Lab::start_spec`] knows nginx is ready.
    pub ready: Ready,
    /// The inside of a `stream {}` block beside `http {}` (none when
    /// empty; see [`Config::stream`]).
    pub stream: String,
    /// The resolver's `valid=` seconds: 1, so that a DNS change is applied
    /// within a second; a cost measurement takes more, so that no
    /// re-resolve runs while it counts.
    pub valid: u32,
}

/// How a lab knows nginx holds the name's address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ready {
    /// A request was answered by the address.
    Proxying,
    /// nginx was answered the address by the DNS server (see
    /// [`Lab::wait_applied`]): for an upstream where the name is a backup,
    /// or unlikely to be picked, and no request would show it.
    Answered,
}

impl Spec {
    pub fn http_extra(mut self, lines: &str) -> Spec {
        self.http_extra = lines.into();
        self
    }

    /// A `stream {}` block with this inside, beside `http {}`.
    pub fn stream(mut self, lines: &str) -> Spec {
        self.stream = lines.into();
        self
    }

    /// HTTPS to the backend, reusing TLS sessions.
    pub fn tls(mut self) -> Spec {
        self.tls = true;
        self
    }

    /// Adds lines to the proxying location.
    pub fn location_extra(mut self, lines: &str) -> Spec {
        self.location_extra = format!("{} {lines}", self.location_extra);
        self
    }

    pub fn single_peer(flavor: Flavor, pre: &str, extra: &str) -> Spec {
        Spec {
            flavor,
            servers: SINGLE_PEER_SERVERS.into(),
            pre: pre.into(),
            extra: extra.into(),
            keepalive: true,
            http_extra: String::new(),
            location_extra: KEEPALIVE_LOCATION.into(),
            tls: false,
            wrapper: Vec::new(),
            daemon: false,
            ready: Ready::Proxying,
            stream: String::new(),
            valid: 1,
        }
    }

    pub fn two_peers(flavor: Flavor, pre: &str, extra: &str) -> Spec {
        Spec {
            flavor,
            servers: TWO_PEERS_SERVERS.into(),
            pre: pre.into(),
            extra: extra.into(),
            keepalive: false,
            http_extra: String::new(),
            location_extra: String::new(),
            tls: false,
            wrapper: Vec::new(),
            daemon: false,
            ready: Ready::Proxying,
            stream: String::new(),
            valid: 1,
        }
    }
}

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
    keepalive: bool,
    /// What nginx was started with (see [`Lab::reconfigure`]).
    config: Config,
}

impl Lab {
    /// Starts DNS answering [`ADDR_A`], the backend, and nginx with
    /// [`PROXY_HTTP`] and [`SINGLE_PEER_SERVERS`]; waits until nginx
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
        } = spec;
        let dns = DnsServer::start().await;
        dns.set_a(NAME, ADDR_A);
        let backend = if tls {
            Backend::start_tls().await
        } else {
            Backend::start().await
        };
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
        let http = PROXY_HTTP.replace("valid=1s", &format!("valid={valid}s"));
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
                        .wait_any_address(NAME, since, patience(Duration::from_secs(10)))
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
    /// [`NAME`] after `since`, then makes one round trip through nginx's
    /// one worker: the answer's datagram was in the resolver's socket
    /// before the request's connection was accepted, so the worker has
    /// read it, and applied it to the upstream, by the time it answers.
    pub async fn wait_applied(&self, ip: Ipv4Addr, since: Instant) {
        self.dns
            .wait_answered(
                NAME,
                &Answer::A(vec![ip]),
                since,
                patience(Duration::from_secs(10)),
            )
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", self.nginx.error_log()));
        let _ = self.client.get("/applied").await;
    }

    /// Polls with requests until one is answered by `ip`: proof that nginx's
    /// peer list holds the address the DNS gave it. Probes vary their path
    /// and source address, so hashing balancers reach every peer. Bounded:
    /// 10 s, six times that under memcheck.
    pub async fn wait_proxying_to(&self, ip: Ipv4Addr, tag: &str) {
        let deadline = Instant::now() + patience(Duration::from_secs(10));
        let want = format!("{ip}\n");
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

    /// The deterministic race, once:
    ///
    /// 1. a request on a warm keepalive connection to the current address is
    ///    held by the backend;
    /// 2. the DNS answer flips to the other address, and the test waits until
    ///    nginx has asked, been told, and applied it (new requests reach the
    ///    new address);
    /// 3. the backend closes the held connection without answering, so nginx
    ///    retries (a failed cached connection gets its try back) and selects
    ///    again, now under a changed peer-list generation.
    pub async fn race_once(&mut self, i: usize) -> Race {
        self.race_once_then(i, |_| {}).await
    }

    /// [`Lab::race_once`], calling `before_release` on the backend just
    /// before the held connection is closed (to fail the retry too, say).
    pub async fn race_once_then(
        &mut self,
        i: usize,
        before_release: impl FnOnce(&Backend),
    ) -> Race {
        self.race(i, false, before_release).await
    }

    /// [`Lab::race_once`], but the re-resolve answers NXDOMAIN: the list is
    /// emptied (its generation moves) while the first attempt is held, so
    /// the retry's fresh snapshot has no peer. Needs the module's status
    /// endpoint, which says when nginx applied the empty list. `Race::new`
    /// is `0.0.0.0`.
    pub async fn race_to_nxdomain(&mut self, i: usize) -> Race {
        self.race(i, true, |_| {}).await
    }

    async fn race(
        &mut self,
        i: usize,
        nxdomain: bool,
        before_release: impl FnOnce(&Backend),
    ) -> Race {
        let old = self.current;
        let new = match (nxdomain, old == ADDR_A) {
            (true, _) => Ipv4Addr::UNSPECIFIED,
            (false, true) => ADDR_B,
            (false, false) => ADDR_A,
        };

        let hold = if self.keepalive {
            // A cached connection to `old`: its next request is a reused one.
            self.wait_proxying_to(old, &format!("/warm/{i}")).await;
            self.backend.arm_hold()
        } else {
            self.backend.arm_hold_any()
        };
        let path = format!("/race/{i}");
        let client = self.client.clone();
        let request = {
            let path = path.clone();
            tokio::spawn(async move { client.get(&path).await })
        };
        let held = hold
            .caught(patience(Duration::from_secs(10)))
            .await
            .unwrap_or_else(|e| panic!("race {i}: {e}"));
        if self.keepalive {
            assert_eq!(held.addr, old, "race {i}: held on the wrong address");
        }
        assert_eq!(held.path, path);
        let first_hop = held.addr;

        // With the module, its status shows when nginx applied the answer:
        // the list's generation moves. (A probe answered by `new` can come
        // from a static peer at the same address before that.)
        let generation = self.generation().await;
        let since = Instant::now();
        let answer = if nxdomain {
            Answer::NxDomain
        } else {
            Answer::A(vec![new])
        };
        self.dns.set(NAME, answer.clone());
        self.dns
            .wait_answered(NAME, &answer, since, patience(Duration::from_secs(10)))
            .await
            .unwrap_or_else(|e| panic!("race {i}: {e}"));
        if let Some(before) = generation {
            self.wait_generation_past(before).await;
        }
        if nxdomain {
            self.wait_peers(0).await;
        } else {
            self.wait_proxying_to(new, &format!("/probe/{i}")).await;
            self.current = new;
        }

        before_release(&self.backend);
        let released = Instant::now();
        held.close();
        let response = request.await.expect("client task");
        let after_release = released.elapsed();
        let entry = self.access_entry(&path).await;
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

    /// The same failure without a DNS flip: a request on a reused keepalive
    /// connection is closed by the backend and nginx retries it under an
    /// unchanged generation (the ordinary cached-connection retry).
    /// Returns the time from the close to the client's response.
    pub async fn retry_without_flip(&mut self, i: usize) -> (Response, Duration) {
        self.retry_without_flip_then(i, |_| {}).await
    }

    /// [`Lab::retry_without_flip`], running `before_release` just before
    /// the backend closes the held connection (as [`Lab::race_once_then`]).
    pub async fn retry_without_flip_then(
        &mut self,
        i: usize,
        before_release: impl FnOnce(&Backend),
    ) -> (Response, Duration) {
        self.wait_proxying_to(self.current, &format!("/warm-plain/{i}"))
            .await;
        let hold = self.backend.arm_hold();
        let client = self.client.clone();
        let path = format!("/plain/{i}");
        let request = tokio::spawn(async move { client.get(&path).await });
        let held = hold
            .caught(patience(Duration::from_secs(10)))
            .await
            .unwrap_or_else(|e| panic!("retry {i}: {e}"));
        before_release(&self.backend);
        let released = Instant::now();
        held.close();
        let response = request.await.expect("client task");
        (response, released.elapsed())
    }

    /// A binary upgrade (USR2, then QUIT to the old master; nginx must run
    /// as a daemon, `Spec::daemon`) under a steady load: 100 GETs a second
    /// of `/steady/N`, each on a new connection (a pooled one that the old
    /// worker closes while idle would fail on the client's side of the
    /// keepalive race), for 6 s, the upgrade 1 s in. What the load got.
    pub async fn upgrade_under_load(&mut self) -> Vec<Sent> {
        let client = Client::without_keepalive(self.nginx.url(""));
        let load = tokio::spawn(async move {
            open_loop(&client, 100.0, Duration::from_secs(6), |i| {
                (reqwest::Method::GET, format!("/steady/{i}"), None)
            })
            .await
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        self.nginx.binary_upgrade().await;
        load.await.expect("the load")
    }

    /// What [`Lab::upgrade_under_load`] may lose: a new master is a new
    /// process tree with fresh shared memory, so its worker's peer list
    /// for `server NAME resolve` is empty until its first DNS answer, and
    /// requests in that window get `no live upstreams` (cause `empty`),
    /// with or without the module. That is the only failure allowed: every
    /// non-200 is such a 502, none is a transport error, nothing is a
    /// generation or unavailable refusal; and the window is the new
    /// worker's first DNS answer, milliseconds on loopback (1 request of
    /// 600 in one run the README cites), so a cap of 2% fails a run where the upgrade
    /// itself dropped the load.
    pub fn assert_upgrade_lost_only_the_empty_list(&self, sent: &[Sent]) {
        let failed: Vec<_> = sent.iter().filter(|s| s.response.status() != 200).collect();
        assert!(
            failed.iter().all(|s| s.response.status() == 502),
            "{failed:?}"
        );
        let log = self.nginx.error_log();
        // The load's refusals only: start-up probes before the first DNS
        // answer excuse nothing.
        let causes: Vec<&str> = log
            .lines()
            .filter(|l| l.contains(&log::no_live_prefix(Protocol::Http, UPSTREAM)))
            .filter(|l| l.contains(" /steady/"))
            .collect();
        let empty = log::no_live_marker(Protocol::Http, UPSTREAM, NoLiveCause::Empty);
        assert!(causes.iter().all(|l| l.contains(&empty)), "{causes:#?}");
        assert!(
            failed.len() <= causes.len(),
            "{} failed, {} empty-list refusals",
            failed.len(),
            causes.len()
        );
        assert!(
            failed.len() * 50 <= sent.len(),
            "{} of {} requests failed across the upgrade",
            failed.len(),
            sent.len()
        );
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

    /// Asserts `n` rescue lines (one `info` per rescue, as
    /// docs/directives.md says) in error.log and no
    /// `no live upstreams` for a raced request (readiness probes sent before
    /// the name's first resolution may meet the still-empty list; no raced
    /// request may). `rescue_line` is the module's or the patch's wording.
    pub fn assert_rescue_log(&self, rescue_line: &str, n: usize) {
        let log = self.nginx.error_log();
        assert_eq!(log.matches(rescue_line).count(), n, "one line per rescue");
        let levels: Vec<&str> = log
            .lines()
            .filter(|l| l.contains(rescue_line) && !l.contains("[info] "))
            .collect();
        assert!(levels.is_empty(), "rescues are logged at info: {levels:#?}");
        let raced_no_live: Vec<_> = errorlog::with_message(&log, errorlog::NO_LIVE)
            .into_iter()
            .filter(|l| l.whole.contains(" /race/"))
            .map(|l| l.whole)
            .collect();
        assert!(raced_no_live.is_empty(), "{raced_no_live:#?}");
    }

    /// The error.log lines of the request for `path` (every line nginx logs
    /// for a request names it: `request: "GET /race/0 HTTP/1.1"`), in order.
    pub fn request_errors(&self, path: &str) -> Vec<String> {
        let marker = format!(" {path} HTTP/");
        self.nginx
            .error_log()
            .lines()
            .filter(|l| l.contains(&marker))
            .map(str::to_string)
            .collect()
    }

    /// Asserts the rescued shape: 200 from the new address, with
    /// `$upstream_addr` "OLD:P, NEW:P".
    pub fn assert_rescued(&self, race: &Race) {
        assert_eq!(
            race.response.status(),
            200,
            "{}: {race:?}\n{}",
            race.path,
            self.nginx.error_log()
        );
        assert_eq!(
            race.response.body,
            format!("{}\n", race.new),
            "{}",
            race.path
        );
        let expected = format!(
            "{}, {}",
            self.upstream_addr(race.old),
            self.upstream_addr(race.new)
        );
        assert_eq!(race.entry.upstream_addr(), expected, "{}", race.path);
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

    /// The module's generation gauge of `be`; `None` without the module,
    /// or when the status does not list `be` (no directive applies to it).
    async fn generation(&self) -> Option<u64> {
        self.config.flavor.module.as_ref()?;
        let status = status_object(&self.client, "http", Some(UPSTREAM)).await;
        status.ok().and_then(|s| s["generation"].as_u64())
    }

    /// Polls the module's generation gauge of `be` until it has moved past
    /// `before` (bounded: 10 s, six times that under memcheck).
    async fn wait_generation_past(&self, before: u64) {
        let deadline = Instant::now() + patience(Duration::from_secs(10));
        loop {
            let now = self.generation().await;
            if now.is_some_and(|g| g != before) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the generation of {UPSTREAM} never moved past {before}\n{}",
                self.nginx.error_log()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Polls the module's peers gauge of `be` until it reads `n`.
    pub async fn wait_peers(&self, n: u64) {
        wait_peers(&self.client, "http", UPSTREAM, n).await;
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

    /// The module's JSON status object for `upstream`.
    pub async fn status(&self, upstream: &str) -> serde_json::Value {
        status_object(&self.client, "http", Some(upstream))
            .await
            .unwrap_or_else(|e| panic!("{e}"))
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

/// Polls the module's status until `protocol` upstream `name` holds `n`
/// peers (bounded: 10 s, six times that under memcheck).
pub async fn wait_peers(client: &Client, protocol: &str, name: &str, n: u64) {
    let deadline = Instant::now() + patience(Duration::from_secs(10));
    loop {
        let status = status_object(client, protocol, Some(name)).await;
        if matches!(&status, Ok(s) if s["peers"].as_u64() == Some(n)) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{protocol} upstream {name} never held {n} peers: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The module's JSON status object (from `/status?format=json`) of the
/// `protocol` upstream `name`, or of the first `protocol` upstream.
pub async fn status_object(
    client: &Client,
    protocol: &str,
    name: Option<&str>,
) -> Result<serde_json::Value, String> {
    let r = client.get("/status?format=json").await;
    if r.status() != 200 {
        return Err(format!("status endpoint: {r:?}"));
    }
    let v: serde_json::Value =
        serde_json::from_str(&r.body).map_err(|e| format!("status JSON: {e}: {}", r.body))?;
    v["upstreams"]
        .as_array()
        .and_then(|a| {
            a.iter()
                .find(|u| u["protocol"] == protocol && name.is_none_or(|n| u["upstream"] == n))
        })
        .cloned()
        .ok_or_else(|| format!("no {protocol} upstream {name:?} in {}", r.body))
}

/// The main client and the probe clients of an nginx.
fn clients(nginx: &Nginx) -> (Client, Vec<Client>) {
    (Client::new(nginx.url("")), probe_clients(&nginx.url("")))
}

/// What one race produced.
#[derive(Debug)]
pub struct Race {
    pub old: Ipv4Addr,
    pub new: Ipv4Addr,
    /// Where the held (failed) first attempt went.
    pub first_hop: Ipv4Addr,
    /// From closing the held connection to the client's response: the cost
    /// of nginx's retry (and of a rescue, when there was one).
    pub after_release: Duration,
    pub path: String,
    pub response: Response,
    pub entry: Entry,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`patched_rescue_line`] is what every version's http and stream
    /// patch logs.
    #[test]
    fn the_patched_rescue_line_is_the_patches_own() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../nginx-src-patches");
        let logged = patched_rescue_line("%V").replace('"', "\\\"");
        let mut patches = 0;
        for version in std::fs::read_dir(dir).expect("nginx-src-patches") {
            let version = version.unwrap().path();
            if !version.is_dir() {
                continue;
            }
            // The re-snapshot patches log it; the history patches after
            // them change what the re-snapshot selects, not its line.
            for patch in std::fs::read_dir(&version).unwrap() {
                let patch = patch.unwrap().path();
                let name = patch.file_name().unwrap().to_string_lossy().into_owned();
                if !name.contains("select-again") {
                    continue;
                }
                let text = std::fs::read_to_string(&patch).unwrap();
                assert!(
                    text.contains(&logged),
                    "{} does not log {logged}",
                    patch.display()
                );
                patches += 1;
            }
        }
        assert!(patches >= 2, "no patches found in {dir}");
    }
}
