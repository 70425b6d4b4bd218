//! The zone with no room for a reload's new upstream, forced with gdb on
//! the master's allocation: said once at `warn`, still rescued, not
//! counted.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use generation_retry_t::actors::backend::{Backend, ADDR_A, ADDR_B};
use generation_retry_t::actors::dns::DnsServer;
use generation_retry_t::actors::load::{Client, Response};
use generation_retry_t::memcheck::patience;
use generation_retry_t::nginx::gdb::Breakpoint;
use generation_retry_t::nginx::{Config, Flavor, Nginx};
use generation_retry_t::scenarios::http::NAME;
use generation_retry_t::scoring::metrics::{log, Counter, Protocol, StatusExt};
use generation_retry_t::shared::{KEEPALIVE_LOCATION, UPSTREAM};

use super::common::{point, ready};

/// Two upstreams on one moving name, one worker; `${NEWCOMER}` and
/// `${NEW_LOCATION}` are empty at the start and filled at the reload.
const FULL_TEMPLATE: &str = r#"
    upstream ${UPSTREAM} {
        zone ${UPSTREAM} 128k;
        resolver ${DNS} valid=1s ipv6=off;
        resolver_timeout 3s;
        server app.test:${BPORT} resolve;
        keepalive 16;
        generation_retry_resnapshot on;
    }
    ${NEWCOMER}
    server {
        listen 127.0.0.1:${PORT};
        location /be/ {
            proxy_pass http://${UPSTREAM};
            ${KEEPALIVE}
        }
        ${NEW_LOCATION}
        location = /status {
            generation_retry_status;
        }
    }
"#;

/// The race of `Lab::race_once` through `prefix` (a location of one
/// upstream on the name): a cached connection to `from`, the request held
/// there, the name moved to `to` and applied, the held attempt closed.
async fn race_through(
    nginx: &Nginx,
    backend: &Backend,
    dns: &DnsServer,
    prefix: &str,
    (from, to): (Ipv4Addr, Ipv4Addr),
) -> Response {
    let client = Client::new(nginx.url(""));
    let warm = client.get(&format!("{prefix}warm")).await;
    assert_eq!(warm.body, format!("{from}\n"), "{prefix}: {warm:?}");
    let hold = backend.arm_hold();
    let request = {
        let c = client.clone();
        let path = format!("{prefix}race");
        tokio::spawn(async move { c.get(&path).await })
    };
    let held = hold
        .caught(patience(Duration::from_secs(10)))
        .await
        .unwrap();
    assert_eq!(held.addr, from, "{prefix}");
    point(dns, to).await;
    // Applied: a new connection's request reaches `to`.
    let probe = Client::without_keepalive(nginx.url(""));
    let deadline = Instant::now() + patience(Duration::from_secs(10));
    for k in 0.. {
        if probe.get(&format!("{prefix}probe/{k}")).await.body == format!("{to}\n") {
            break;
        }
        assert!(Instant::now() < deadline, "{prefix}: {to} never applied");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    held.close();
    request.await.unwrap()
}

/// The zone with no room for a new upstream's counters, forced at a
/// reload under gdb: the master's allocation of that upstream's counters
/// (`ngx_slab_calloc` of more than the upstream zone's own 8 bytes)
/// returns NULL, as in a full zone. The reload goes on; nginx says so at
/// `warn`, once, naming the upstream and what frees room; the new
/// upstream's race is still rescued, though not counted (no status
/// object); the upstream that had counters keeps counting; nothing
/// crashes, nothing at `alert`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_full_zone_at_a_reload_still_rescues_and_says_so() {
    let dns = DnsServer::start().await;
    dns.set_a(NAME, ADDR_A);
    let backend = Backend::start().await;
    let config = |newcomer: bool| {
        let (upstream, location) = if newcomer {
            (
                format!(
                    "upstream newcomer {{ zone newcomer 128k; resolver {} valid=1s ipv6=off; \
                     server app.test:{} resolve; keepalive 16; \
                     generation_retry_resnapshot on; }}",
                    dns.addr(),
                    backend.port()
                ),
                format!("location /new/ {{ proxy_pass http://newcomer; {KEEPALIVE_LOCATION} }}"),
            )
        } else {
            (String::new(), String::new())
        };
        Config::new(Flavor::with_module(), FULL_TEMPLATE)
            .var("DNS", dns.addr())
            .var("BPORT", backend.port())
            .var("KEEPALIVE", KEEPALIVE_LOCATION)
            .var("NEWCOMER", upstream)
            .var("NEW_LOCATION", location)
    };
    let nginx = Nginx::start(&config(false));
    ready(&nginx, "/be/ready/").await;

    // The reload, with the master's allocation of newcomer's counters
    // failing.
    let bp = Breakpoint::attach(nginx.pid(), "ngx_slab_calloc if size > 64", 0)
        .await
        .unwrap();
    let gdb = tokio::spawn(async move {
        let stopped = bp.hit(patience(Duration::from_secs(20))).await?;
        stopped.release_returning(0).await
    });
    nginx.reconfigure(&config(true));
    gdb.await.unwrap().unwrap();

    let full = log::zone_full("generation_retry", 0, 0, Protocol::Http, "newcomer");
    let said = full
        .split("; ")
        .nth(1)
        .expect("the full-zone line's wording")
        .to_owned();
    let log = nginx.error_log();
    let lines: Vec<&str> = log.lines().filter(|l| l.contains(&said)).collect();
    assert_eq!(lines.len(), 1, "{said:?} once:\n{log}");
    assert!(lines[0].contains("[warn]"), "{}", lines[0]);

    let r = race_through(&nginx, &backend, &dns, "/new/", (ADDR_A, ADDR_B)).await;
    assert_eq!(
        (r.status(), r.body.as_str()),
        (200, &*format!("{ADDR_B}\n"))
    );
    let log = nginx.error_log();
    assert!(
        log.contains(&log::rescued_marker(Protocol::Http, "newcomer")),
        "newcomer's race was not rescued:\n{log}"
    );
    let r = race_through(&nginx, &backend, &dns, "/be/", (ADDR_B, ADDR_A)).await;
    assert_eq!(
        (r.status(), r.body.as_str()),
        (200, &*format!("{ADDR_A}\n"))
    );

    let client = Client::new(nginx.url(""));
    let page = client.get("/status?format=json").await;
    let v: serde_json::Value = serde_json::from_str(&page.body).unwrap();
    let names: Vec<&str> = v["upstreams"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|u| u["upstream"].as_str())
        .collect();
    assert_eq!(names, [UPSTREAM], "{}", page.body);
    let be = &v["upstreams"][0];
    assert_eq!(be.count(Counter::Rescued), 1, "{be}");
    assert_eq!(be.count(Counter::Failed), 0, "{be}");
    drop(client);
    nginx.finish();
}
