//! What the mid-selection tests share: nginx with two workers (worker 0
//! re-resolves, worker 1 serves the race) on one re-resolving name, a
//! connection pinned to each, the DNS flips worker 0 applies while gdb
//! holds worker 1, and the functions gdb stops in.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use generation_retry_t::actors::backend::{Backend, ADDR_A, ADDR_B};
use generation_retry_t::actors::dns::{Answer, DnsServer};
use generation_retry_t::actors::load::{Client, Connection, Response};
use generation_retry_t::memcheck::patience;
use generation_retry_t::nginx::gdb::{worker_pids, Breakpoint};
use generation_retry_t::nginx::{Config, Flavor, Nginx};
use generation_retry_t::scenarios::http::NAME;
use generation_retry_t::shared::{KEEPALIVE_LOCATION, UPSTREAM};

/// One re-resolving peer with keepalive, two workers, each with its own
/// listening socket (`reuseport`), and the worker's pid on every answer.
const TEMPLATE: &str = r#"
    upstream ${UPSTREAM} {
        zone ${UPSTREAM} 128k;
        resolver ${DNS} valid=1s ipv6=off;
        resolver_timeout 3s;
        server app.test:${BPORT} resolve;
        ${POOL}
        generation_retry_resnapshot on max=${MAX};
    }
    server {
        listen 127.0.0.1:${PORT} reuseport;
        add_header X-Worker $pid always;
        location / {
            proxy_pass http://${UPSTREAM};
            ${KEEPALIVE}
        }
        location = /status {
            generation_retry_status;
        }
    }
"#;

/// The round-robin selection every balancer here ends in.
pub(crate) const SELECT: &str = "ngx_http_upstream_get_round_robin_peer";

/// The upstream's own `peer.init` (under keepalive's).
pub(crate) const INIT: &str = "ngx_http_upstream_init_round_robin_peer";

/// nginx with two workers on [`TEMPLATE`], its DNS and backend, and a
/// connection pinned to each worker.
pub(crate) struct Run {
    pub(crate) nginx: Nginx,
    pub(crate) dns: DnsServer,
    pub(crate) backend: Backend,
    /// A connection served by worker 0 (which re-resolves), and one served
    /// by worker 1.
    pub(crate) on_0: Connection,
    /// Lent to the race while it runs.
    pub(crate) on_1: Option<Connection>,
}

/// The two workers' pids, in nginx's order (worker 0 first).
pub(crate) async fn workers(nginx: &Nginx) -> [libc::pid_t; 2] {
    let pids = worker_pids(nginx, 2).await;
    [pids[0], pids[1]]
}

/// Until the name resolved, then a request under `prefix` answered 200.
///
/// The wait is on the status endpoint (no upstream selection; its peer
/// count is read under the list's lock), not on proxied probes: with two
/// workers a probe can take its state in one worker while the other
/// applies the name's first resolution, and is then refused, re-snapshotted
/// and counted before the test starts (a CI run saw `busy.first` 1 where
/// the test counts from zero).
pub(crate) async fn ready(nginx: &Nginx, prefix: &str) {
    let any = Client::new(nginx.url(""));
    let deadline = Instant::now() + patience(Duration::from_secs(10));
    loop {
        let r = any.get("/status?format=json").await;
        let resolved = upstream_object(&r.body).is_some_and(|u| u["peers"].as_u64() > Some(0));
        if resolved {
            break;
        }
        assert!(Instant::now() < deadline, "{r:?}\n{}", nginx.error_log());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let r = any.get(&format!("{prefix}0")).await;
    assert_eq!(r.status(), 200, "{r:?}\n{}", nginx.error_log());
}

/// Which worker answered.
pub(crate) fn worker(r: &Response) -> libc::pid_t {
    r.headers["x-worker"].to_str().unwrap().parse().unwrap()
}

/// New connections until one lands on each worker (the kernel spreads
/// connections over the `reuseport` sockets by their addresses). After a
/// reload a worker of the generation before may still answer one, until
/// it has closed its listening sockets: that connection is dropped and
/// another opened (seen in a clean-clone CI run, under load).
pub(crate) async fn pinned(nginx: &Nginx, workers: [libc::pid_t; 2]) -> (Connection, Connection) {
    let (mut on_0, mut on_1) = (None, None);
    for k in 0..200 {
        let mut c = Connection::open(nginx.addr()).await.unwrap();
        let r = c.get(&format!("/pin/{k}")).await.unwrap();
        assert_eq!(r.status(), 200, "{r:?}");
        let pid = worker(&r);
        if pid == workers[0] {
            on_0 = on_0.or(Some(c));
        } else if pid == workers[1] {
            on_1 = on_1.or(Some(c));
        }
        if let (Some(_), Some(_)) = (&on_0, &on_1) {
            return (on_0.take().unwrap(), on_1.take().unwrap());
        }
    }
    panic!("200 connections and not one on each worker");
}

/// The module's JSON status object of `upstream be`.
pub(crate) async fn status(c: &mut Connection) -> serde_json::Value {
    let r = c.get("/status?format=json").await.unwrap();
    assert_eq!(r.status(), 200, "{r:?}");
    upstream_object(&r.body).unwrap_or_else(|| panic!("no upstream {UPSTREAM}: {}", r.body))
}

/// `upstream be`'s object in the status endpoint's JSON `body`.
fn upstream_object(body: &str) -> Option<serde_json::Value> {
    let v: serde_json::Value = serde_json::from_str(body).ok()?;
    v["upstreams"]
        .as_array()?
        .iter()
        .find(|u| u["upstream"] == UPSTREAM)
        .cloned()
}

/// Points the name at `ip` and waits until nginx asked and was told.
pub(crate) async fn point(dns: &DnsServer, ip: Ipv4Addr) {
    answer(dns, Answer::A(vec![ip])).await;
}

/// Sets the name's answer and waits until nginx was given it.
async fn answer(dns: &DnsServer, answer: Answer) {
    let since = Instant::now();
    dns.set(NAME, answer.clone());
    dns.wait_answered(NAME, &answer, since, patience(Duration::from_secs(10)))
        .await
        .unwrap();
}

/// Where gdb holds worker 1 in a function.
pub(crate) enum Stop {
    /// As it is called.
    AtEntry,
    /// As it returns, in its caller.
    AtReturn,
}

/// [`TEMPLATE`] with `max=` and http lines `before` it, against `dns`
/// and the backend's port; the upstream caches connections (`${POOL}`,
/// `keepalive 16;`).
pub(crate) fn run_config(dns: &DnsServer, bport: u16, max: u32, before: &str) -> Config {
    run_config_of(Flavor::with_module(), dns, bport, max, before)
}

/// [`run_config`] for `flavor`, an nginx that loads the module.
pub(crate) fn run_config_of(
    flavor: Flavor,
    dns: &DnsServer,
    bport: u16,
    max: u32,
    before: &str,
) -> Config {
    Config::new(flavor, format!("{before}{TEMPLATE}"))
        .workers(2)
        .var("DNS", dns.addr())
        .var("BPORT", bport)
        .var("MAX", max)
        .var("POOL", "keepalive 16;")
        .var("KEEPALIVE", KEEPALIVE_LOCATION)
}

impl Run {
    pub(crate) async fn start(max: u32) -> Run {
        let dns = DnsServer::start().await;
        dns.set_a(NAME, ADDR_A);
        let backend = Backend::start().await;
        let config = run_config(&dns, backend.port(), max, "");
        Run::start_with(dns, backend, &config).await
    }

    /// Two workers serving `config`, the name resolved, a connection
    /// pinned to each.
    pub(crate) async fn start_with(dns: DnsServer, backend: Backend, config: &Config) -> Run {
        let nginx = Nginx::start(config);
        let pids = workers(&nginx).await;
        ready(&nginx, "/ready/").await;
        let (on_0, on_1) = pinned(&nginx, pids).await;
        Run {
            nginx,
            dns,
            backend,
            on_0,
            on_1: Some(on_1),
        }
    }

    pub(crate) async fn generation(&mut self) -> u64 {
        status(&mut self.on_0).await["generation"].as_u64().unwrap()
    }

    /// Points the name at `ip` and waits, through worker 0 (which goes on
    /// serving while worker 1 is stopped), until worker 0 asked, was told,
    /// and applied it: the shared list's generation moved past `from`.
    /// Returns the new generation.
    pub(crate) async fn flip(&mut self, ip: Ipv4Addr, from: u64) -> u64 {
        self.flip_to(Answer::A(vec![ip]), from).await
    }

    /// As [`Run::flip`], to any answer.
    pub(crate) async fn flip_to(&mut self, to: Answer, from: u64) -> u64 {
        answer(&self.dns, to.clone()).await;
        let deadline = Instant::now() + patience(Duration::from_secs(10));
        loop {
            let g = self.generation().await;
            if g > from {
                return g;
            }
            assert!(
                Instant::now() < deadline,
                "the list never moved past generation {from} to {to:?}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Worker 1 serves a new request for `path` and is held at its next
    /// call of `function` (where `stop` says) while worker 0 applies a DNS
    /// change to ADDR_B; released, the request must be answered 200 by
    /// ADDR_B, by worker 1.
    pub(crate) async fn first_request_across_a_change(
        &mut self,
        function: &str,
        stop: Stop,
        path: &str,
    ) {
        let workers = workers(&self.nginx).await;
        let g0 = self.generation().await;
        let bp = Breakpoint::attach(workers[1], function, 0).await.unwrap();
        let mut on_1 = self.on_1.take().unwrap();
        let path_owned = path.to_string();
        let request = tokio::spawn(async move {
            let r = on_1.get(&path_owned).await;
            (on_1, r)
        });
        let mut stopped = bp.hit(patience(Duration::from_secs(20))).await.unwrap();
        if let Stop::AtReturn = stop {
            stopped = stopped.finish().await.unwrap();
        }
        self.flip(ADDR_B, g0).await;
        stopped.release().await.unwrap();
        let (on_1, r) = request.await.unwrap();
        self.on_1 = Some(on_1);
        let r = r.unwrap();
        assert_eq!(worker(&r), workers[1]);
        assert_eq!(
            (r.status(), r.body.as_str()),
            (200, &*format!("{ADDR_B}\n")),
            "{path}"
        );
    }
}
