//! The module loaded into the patched nginx leaves the patch's own history
//! alone: three hand-backs of tried peers, and no crash.

use std::time::{Duration, Instant};

use generation_retry_t::actors::backend::{ADDR_A, ADDR_B, ADDR_C};
use generation_retry_t::actors::dns::Answer;
use generation_retry_t::memcheck::patience;
use generation_retry_t::nginx::Flavor;
use generation_retry_t::scenarios::http::{patched_rescue_line, Lab, Spec, NAME};
use generation_retry_t::shared::{KEEPALIVE_LOCATION, UPSTREAM};
use reqwest::Method;

use super::common::{assert_answered_by, RETRY_POST};

/// The module loaded into the patched nginx leaves the patch's own history
/// alone. After a re-snapshot the patch calls `peer.init` again (the
/// module's: the request starts lean), wraps `get` with its history, and
/// hands each re-offered tried peer back through `pc->free` with the
/// balancer's data. Before the fix the first hand-back took the request to
/// the module's full state (its `free` and data on the peer connection),
/// so the second hand-back called the module's `free` with round-robin's
/// data, and the worker crashed. Here three hand-backs are certain: the
/// POST fails at both primaries (the static 127.0.0.4 and the name at
/// 127.0.0.2), the name then resolves to both of them, and only the
/// static backup at 127.0.0.3 is untried; the patch rescues the request
/// there, once.
///
/// Non-regression guard: the patch's own history, which the module must
/// leave alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_module_in_the_patched_nginx_leaves_its_hand_backs_alone() {
    if !Flavor::patched_available() {
        println!("no patched nginx for this version: nothing to run");
        return;
    }
    let servers = format!(
        "server {ADDR_C}:${{BPORT}} max_fails=0;\n        \
         server app.test:${{BPORT}} resolve max_fails=0;\n        \
         server {ADDR_B}:${{BPORT}} max_fails=0 backup;\n        \
         keepalive 16;"
    );
    let spec = Spec {
        servers,
        location_extra: format!("{RETRY_POST} {KEEPALIVE_LOCATION}"),
        keepalive: false,
        ..Spec::single_peer(
            Flavor::patched_with_module(),
            "",
            "generation_retry_resnapshot on;",
        )
    };
    let lab = Lab::start_spec(spec).await;
    lab.wait_proxying_to(ADDR_A, "/warm").await;
    let wait = patience(Duration::from_secs(10));

    // The POST's first attempt is held, then closed; its retry at the other
    // primary is held too.
    let hold = lab.backend.arm_hold_any();
    let client = lab.client.clone();
    let request = tokio::spawn(async move {
        client
            .request(Method::POST, "/twice", Some(b"item=1".to_vec()))
            .await
    });
    let first = hold.caught(wait).await.unwrap();
    let hold = lab.backend.arm_hold_any();
    let first_addr = first.addr;
    first.close();
    let second = hold.caught(wait).await.unwrap();
    let mut tried = [first_addr, second.addr];
    tried.sort();
    assert_eq!(tried, [ADDR_A, ADDR_C], "the POST tried both primaries");

    // The name now resolves to both tried addresses: a new generation whose
    // primaries are all tried.
    let since = Instant::now();
    let both = Answer::A(vec![ADDR_A, ADDR_C]);
    lab.dns.set(NAME, both.clone());
    lab.dns
        .wait_answered(NAME, &both, since, wait)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", lab.nginx.error_log()));
    // One round trip through the one worker: it has applied the answer.
    let _ = lab.client.get("/applied").await;
    second.close();

    let response = request.await.expect("client task");
    assert_answered_by(&lab, &response, ADDR_B);
    let reached: Vec<_> = lab
        .backend
        .seen()
        .into_iter()
        .filter(|s| s.path == "/twice")
        .map(|s| s.addr)
        .collect();
    assert_eq!(reached, [first_addr, tried_other(first_addr), ADDR_B]);
    let lines = lab.request_errors("/twice");
    let rescue = patched_rescue_line(UPSTREAM);
    assert_eq!(
        lines.iter().filter(|l| l.contains(&rescue)).count(),
        1,
        "{lines:#?}"
    );
    // Fails on a crashed worker ("exited on signal").
    lab.finish();
}

/// The other primary of the test above.
fn tried_other(addr: std::net::Ipv4Addr) -> std::net::Ipv4Addr {
    if addr == ADDR_A {
        ADDR_C
    } else {
        ADDR_A
    }
}
