//! The HTTP arms: GETs (and a share of POSTs) at `opts.rate` through
//! `upstream be`, one re-resolving peer with keepalive, while the DNS
//! answer swaps at every re-resolve and the backend reclaims reused
//! connections.

use std::time::{Duration, Instant};

use reqwest::Method;

use super::READY_PATH;
use super::{
    module_status, open_loop, summarise, Arm, ArmResult, Arrivals, Baseline, Logs, Observed,
    Options, Outcome, Posts,
};
use crate::actors::backend::{Backend, Wire, ADDR_A, ADDR_B};
use crate::actors::dns::DnsServer;
use crate::actors::load::{Client, Response};
use crate::nginx::{Config, Nginx};
use crate::scenarios::http::{NAME, PROXY_HTTP, SINGLE_PEER_SERVERS};
use crate::shared::{status_handler, KEEPALIVE_LOCATION, UPSTREAM};

/// One request of the load.
struct Sent {
    post: bool,
    path: String,
    response: Response,
}

pub(super) async fn run(
    arm: Arm,
    opts: &Options,
    progress: impl Fn(f64) + Send + Sync + 'static,
) -> ArmResult {
    let row = arm.row();
    let dns = DnsServer::start().await;
    dns.set_a(NAME, ADDR_A);
    let backend = Backend::start().await;
    let config = config(arm, opts, &dns, &backend);
    let nginx = Nginx::start(&config);
    let client = Client::new(nginx.url(""));
    wait_ready(&client).await;
    let baseline = Baseline::take(arm, &client, &nginx, "http").await;

    if let Some(schedule) = row.dns.schedule(ADDR_A, ADDR_B) {
        dns.set(NAME, schedule);
    }
    if row.reclaim {
        backend.set_reclaim_after(opts.reclaim, opts.seed, opts.reclaim_delay);
    }

    let post_every = if opts.post_share > 0.0 {
        (1.0 / opts.post_share).round().max(1.0) as u64
    } else {
        u64::MAX
    };
    let (start_wall, sent) = open_loop(opts, &nginx, Arrivals::Even, progress, |i| {
        let client = client.clone();
        let post = i % post_every == post_every - 1;
        async move {
            let (path, response) = if post {
                let path = format!("/lab/post/{i}");
                let body = Some(b"order=1".to_vec());
                let r = client.request(Method::POST, &path, body).await;
                (path, r)
            } else {
                let path = format!("/lab/get/{i}");
                let r = client.request(Method::GET, &path, None).await;
                (path, r)
            };
            Sent {
                post,
                path,
                response,
            }
        }
    })
    .await;

    let status = module_status(arm, &client, "http").await;
    // The access log entries of the load, once every sent request is logged.
    let entries = nginx.access_entries("/lab/", sent.len()).await;
    let error_log = nginx.error_log();
    let logs = Logs {
        access: nginx.access_log_text(),
        error: error_log.clone(),
        conf: nginx.dump(&config),
    };
    let swaps = dns.swaps(NAME);
    nginx.finish();

    summarise(
        arm,
        Observed {
            outcomes: sent
                .iter()
                .map(|s| Outcome {
                    ok: s.response.status() == 200,
                    retryable: !s.post,
                    latency: s.response.latency,
                })
                .collect(),
            status_502: sent.iter().filter(|s| s.response.status() == 502).count(),
            entries,
            error_log,
            baseline,
            swaps,
            start_wall,
            status,
            posts: posts(&sent, &backend),
            logs,
        },
    )
}

/// nginx's configuration for `arm`: [`PROXY_HTTP`] with the seed's single
/// re-resolving peer and keepalive, and what the arm's row adds.
fn config(arm: Arm, opts: &Options, dns: &DnsServer, backend: &Backend) -> Config {
    let (servers, location, server_extra) = pieces(arm);
    let http = PROXY_HTTP.replace("valid=1s", &format!("valid={}s", opts.valid));
    Config::new(arm.flavor(), http)
        .var("SERVER_EXTRA", server_extra)
        .var("DNS", dns.addr())
        .var("BPORT", backend.port())
        .var("SERVERS", servers)
        .var("UPSTREAM_PRE", "")
        .var("UPSTREAM_EXTRA", "")
        .var("HTTP_EXTRA", "")
        .var("LOCATION_EXTRA", location)
        .var("SCHEME", "http")
        .var("PASS", Wire::Http.pass())
        .var("STATUS", status_handler(arm.resnapshot().is_some()))
}

/// The arm's `server` (and upstream) lines, location lines and extra
/// server-level lines.
fn pieces(arm: Arm) -> (String, String, String) {
    let row = arm.row();
    let mut servers =
        SINGLE_PEER_SERVERS.replace("resolve;", &format!("resolve{};", row.server_params));
    if !row.upstream_line.is_empty() {
        servers = format!("{servers}\n        {}", row.upstream_line);
    }
    if let Some(v) = arm.resnapshot() {
        servers = format!("{servers}\n        generation_retry_resnapshot {v};");
    }
    let location = format!("{KEEPALIVE_LOCATION} {}", row.location_line);
    let location = location.trim_end();
    if row.retry_once {
        (
            servers,
            format!("{location} error_page 502 = @retry_once;"),
            format!(
                "location @retry_once {{\n            \
                 if ($request_method !~ ^(GET|HEAD|OPTIONS)$) {{ return 502; }}\n            \
                 proxy_pass http://{UPSTREAM}; {KEEPALIVE_LOCATION}\n        }}"
            ),
        )
    } else {
        (servers, location.to_string(), String::new())
    }
}

/// The POSTs sent, how often the backend answered each, and how many it
/// received more than once (answered or not).
fn posts(sent: &[Sent], backend: &Backend) -> Posts {
    let answered = backend.answered_by_path("POST");
    let received = backend.received_by_path("POST");
    Posts {
        sent: sent.iter().filter(|s| s.post).count(),
        delivered: sent
            .iter()
            .filter(|s| s.post)
            .map(|s| answered.get(&s.path).copied().unwrap_or(0))
            .sum(),
        received_twice: received.values().filter(|n| **n > 1).count(),
    }
}

/// Readiness: a request answered 200 (the name resolved).
async fn wait_ready(client: &Client) {
    let deadline = Instant::now() + Duration::from_secs(10);
    for k in 0.. {
        if client.get(&format!("{READY_PATH}{k}")).await.status() == 200 {
            return;
        }
        assert!(Instant::now() < deadline, "nginx never became ready");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
