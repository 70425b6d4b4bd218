//! A dead primary handed back by a rescue is neither failed again nor
//! revived (the http twin of `stream.rs`'s), by the module and by the
//! patched nginx's own hand-back.

use std::time::{Duration, Instant};

use generation_retry_t::actors::backend::{ADDR_A, ADDR_B, ADDR_C};
use generation_retry_t::memcheck::patience;
use generation_retry_t::nginx::{refusing_port, Flavor};
use generation_retry_t::scenarios::http::{patched_rescue_line, Lab, Ready, Spec, NAME};
use generation_retry_t::scoring::metrics::{log, Counter, Protocol, StatusExt};
use generation_retry_t::shared::UPSTREAM;

use super::common::{assert_answered_by, hops, Fix};

/// A dead primary handed back is neither failed again nor revived (the
/// http twin of `stream.rs`'s; issue 41, defect C): a peer the request
/// tried before its re-snapshot, which the fresh snapshot offers again, is
/// handed back as an attempt never made. Its one real failure counts once
/// (handed back as failed, it counted twice: disabled after one failure
/// with `max_fails=2`), and is not forgotten (handed back as not failed
/// while the selection had opened its `fail_timeout` trial, round-robin's
/// `free` cleared its failures).
///
/// The dead primary at [`ADDR_C`] refuses connections, with `weight=100`
/// beside the name's 1, so that every selection where it is allowed picks
/// it, `max_fails=2` and `fail_timeout=1s` (the name has `max_fails=0`, so
/// that only the dead primary's line is said). The request's first
/// attempt fails there (its first failure), the retry is held at the
/// name's address; two seconds on, so that the fresh snapshot's selection
/// opens the dead primary's trial, the name moves and the held connection
/// closes. The rescue hands the dead primary back: no `upstream server
/// temporarily disabled` line. The next request goes to the dead primary
/// (still one failure of two), fails there and is retried to the new
/// address: its second failure, said in that line. `/applied` is answered
/// without the upstream, so no other request touches the dead primary. A
/// backup server (never reached) gives the request its third try, which
/// the rescue takes.
///
/// The patched nginx hands back the same way (`NGX_PEER_NEXT`, the check
/// undone): its twin holds it to the same expectations. It failed on the
/// series that handed back as failed: the line at the rescue, and the
/// next request straight to the new address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_primary_handed_back_is_neither_failed_again_nor_revived() {
    dead_primary_handed_back(Fix::Module).await;
}

/// The patched nginx, without the module: its history's hand-back.
///
/// Non-regression guard: the patched nginx, without the module.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patched_nginx_keeps_a_handed_back_dead_primary_dead() {
    if !Flavor::patched_available() {
        println!("no patched nginx for this version: nothing to run");
        return;
    }
    dead_primary_handed_back(Fix::Patched).await;
}

async fn dead_primary_handed_back(fix: Fix) {
    // A port at ADDR_C where nothing listens, nor can: connects are refused.
    let dead = std::net::SocketAddr::from((ADDR_C, refusing_port(ADDR_C)));
    let (flavor, on) = match fix {
        Fix::Module => (Flavor::with_module(), "generation_retry_resnapshot on;"),
        Fix::Patched => (Flavor::patched(), ""),
    };
    let spec = Spec {
        servers: format!(
            "server {dead} weight=100 max_fails=2 fail_timeout=1s;\n        \
             server app.test:${{BPORT}} resolve max_fails=0;\n        \
             server 127.0.0.5:${{BPORT}} backup;"
        ),
        keepalive: false,
        location_extra: String::new(),
        ready: Ready::Answered,
        ..Spec::single_peer(flavor, "", on)
    };
    let applied = "location = /applied { return 204; }".to_string();
    let lab = Lab::start_spec_with(spec, &[("SERVER_EXTRA", applied)]).await;
    let wait = patience(Duration::from_secs(10));

    let hold = lab.backend.arm_hold_any();
    let client = lab.client.clone();
    let request = tokio::spawn(async move { client.get("/dead/0").await });
    let held = hold.caught(wait).await.unwrap();
    assert_eq!(held.addr, ADDR_A, "the retry after the dead primary");
    // nginx's clock counts seconds: two on, the selection after the
    // change finds the failure more than fail_timeout old and opens the
    // dead primary's trial.
    tokio::time::sleep(Duration::from_millis(2200)).await;
    let since = Instant::now();
    lab.dns.set_a(NAME, ADDR_B);
    lab.wait_applied(ADDR_B, since).await;
    held.close();
    let response = request.await.expect("client task");
    assert_answered_by(&lab, &response, ADDR_B);
    let (a, b) = (lab.upstream_addr(ADDR_A), lab.upstream_addr(ADDR_B));
    assert_eq!(
        hops(&lab, "/dead/0").await,
        [dead.to_string(), a, b.clone()]
    );
    let lines = lab.request_errors("/dead/0");
    let disabled: Vec<_> = lines
        .iter()
        .filter(|l| l.contains("upstream server temporarily disabled"))
        .collect();
    assert_eq!(
        disabled.len(),
        0,
        "the dead primary's failures at the rescue: {lines:#?}"
    );
    let rescued = match fix {
        Fix::Module => log::rescued_marker(Protocol::Http, UPSTREAM),
        Fix::Patched => patched_rescue_line(UPSTREAM),
    };
    assert_eq!(
        lines.iter().filter(|l| l.contains(&rescued)).count(),
        1,
        "{lines:#?}"
    );
    if fix == Fix::Module {
        let s = lab.status(UPSTREAM).await;
        assert_eq!(
            (s.count(Counter::Rescued), s.count(Counter::Excluded)),
            (1, 1),
            "{s}"
        );
    }

    let next = lab.client.get("/dead/next").await;
    assert_eq!(next.status(), 200, "{next:?}");
    assert_eq!(
        hops(&lab, "/dead/next").await,
        [dead.to_string(), b],
        "{}",
        lab.nginx.error_log()
    );
    let lines = lab.request_errors("/dead/next");
    let disabled = lines
        .iter()
        .filter(|l| l.contains("upstream server temporarily disabled"))
        .count();
    assert_eq!(disabled, 1, "{lines:#?}");
    lab.finish();
}
