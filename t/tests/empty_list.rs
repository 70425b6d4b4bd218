//! A request that meets an empty peer list: the name of the upstream's
//! only `server ... resolve` answers NXDOMAIN, so the list never gets a
//! peer. nginx refuses it (`no live upstreams`, 502) with every balancer
//! that falls back to round-robin, stock, patched and with the module on.
//!
//! Tengine 3.2.0 does not: its round-robin scan starts at a peer index
//! taken modulo the number of peers, and with none it dereferences a NULL
//! peer, so the worker exits on signal 11, with or without this module
//! (which calls Tengine's balancer as it is). The Tengine patch set's
//! `0005-Upstream-no-peer-from-an-empty-round-robin-list.patch` fixes it,
//! and its patched binary is held to nginx's outcome here. When Tengine
//! fixes its own code, the stock expectation below fails, loudly, and is to
//! become nginx's.

use std::time::{Duration, Instant};

use generation_retry_t::actors::dns::{Answer, DnsServer};
use generation_retry_t::actors::load::Client;
use generation_retry_t::nginx::{is_tengine, Config, Flavor, Nginx};

const NAME: &str = "empty.test";

/// Balancers whose empty list reaches round-robin's scan.
const BALANCERS: &[&str] = &["", "hash $request_uri;", "ip_hash;", "random;"];

fn config(flavor: Flavor, balancer: &str, module: bool) -> Config {
    let on = if module {
        "generation_retry_resnapshot on;"
    } else {
        ""
    };
    Config::new(
        flavor,
        format!(
            "upstream be {{
                zone be 64k;
                resolver ${{DNS}} valid=1s ipv6=off;
                {balancer}
                server {NAME}:9 resolve;
                {on}
            }}
            server {{
                listen 127.0.0.1:${{PORT}};
                location / {{ proxy_pass http://be; }}
            }}"
        ),
    )
}

/// One request per balancer to an nginx whose list is empty (the DNS
/// server has told it NXDOMAIN); returns each balancer's status (0: the
/// connection was closed without an answer) and the nginx, not finished.
async fn ask(flavor: fn() -> Flavor, module: bool) -> Vec<(String, u16, Nginx)> {
    let mut out = Vec::new();
    for balancer in BALANCERS {
        let dns = DnsServer::start().await;
        dns.set(NAME, Answer::NxDomain);
        let since = Instant::now();
        let nginx = Nginx::start(&config(flavor(), balancer, module).var("DNS", dns.addr()));
        // Empty from the start; once nginx has been told NXDOMAIN it stays so.
        dns.wait_answered(NAME, &Answer::NxDomain, since, Duration::from_secs(10))
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", nginx.error_log()));
        eprintln!("ready {:?}", since.elapsed());
        let r = Client::new(nginx.url("")).get("/empty").await;
        eprintln!("asked {:?}", since.elapsed());
        out.push((format!("[{balancer}]"), r.status(), nginx));
    }
    out
}

/// nginx's outcome: a 502 and `no live upstreams`, no crash.
fn refused(answers: Vec<(String, u16, Nginx)>, what: &str) {
    for (balancer, status, nginx) in answers {
        let log = nginx.error_log();
        assert_eq!(status, 502, "{what} {balancer}:\n{log}");
        assert!(
            log.contains("no live upstreams"),
            "{what} {balancer}:\n{log}"
        );
        nginx.finish();
    }
}

/// Non-regression guard: stock nginx, no module.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stock_refuses_a_request_to_an_empty_list_except_tengine_which_crashes() {
    let answers = ask(Flavor::stock, false).await;
    if !is_tengine() {
        refused(answers, "stock nginx");
        return;
    }
    crashed(answers, "stock Tengine");
}

/// Tengine's outcome: no answer, and the worker exited on signal 11. Each
/// nginx is stopped in a thread of its own: a master whose worker died in
/// the scan takes seconds to stop (its next worker does not exit on
/// SIGTERM and is killed).
fn crashed(answers: Vec<(String, u16, Nginx)>, what: &str) {
    std::thread::scope(|s| {
        for (balancer, status, nginx) in answers {
            s.spawn(move || {
                assert_eq!(
                    status, 0,
                    "{what} {balancer} answered {status}: has Tengine fixed its empty-list \
                     crash? Then expect nginx's 502 here"
                );
                let log = nginx.finish_crashed();
                assert!(
                    log.contains("exited on signal 11"),
                    "{what} {balancer}:\n{log}"
                );
            });
        }
    });
}

/// Non-regression guard: the patched nginx, no module.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_patched_nginx_refuses_a_request_to_an_empty_list() {
    refused(ask(Flavor::patched, false).await, "patched");
}

/// With the module on, the list is still Tengine's to scan: the module
/// refuses nothing itself, and cannot make Tengine's stock code safe.
///
/// Non-regression guard: a behaviour the module must leave alone (an
/// empty list is refused as without it).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_the_module_a_request_to_an_empty_list_is_refused_as_without() {
    let answers = ask(Flavor::with_module, true).await;
    if !is_tengine() {
        refused(answers, "module on");
        return;
    }
    crashed(answers, "Tengine with the module");
    // Into the patched Tengine, the module is safe.
    refused(
        ask(Flavor::patched_with_module, true).await,
        "patched with the module",
    );
}
