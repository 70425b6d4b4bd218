//! A binary upgrade under load, scraped by a real Prometheus: the new
//! master's counters start at 0, which Prometheus sees as exactly one
//! reset, and `increase()` counts across it.

use std::time::Duration;

use generation_retry_t::actors::prometheus::{Series, Server};
use generation_retry_t::nginx::Flavor;
use generation_retry_t::scenarios::http::{Lab, Spec};
use generation_retry_t::scoring::metrics::{Counter, StatusExt};

use super::common::prometheus_config;

/// A binary upgrade (USR2, then QUIT to the old master) under load, scraped
/// every second by a real Prometheus: the new master's shared memory is
/// new, so its counters start at 0 (docs/monitoring.md), and Prometheus
/// sees that as exactly one reset of `rescued_total`, after which
/// `increase()` counts on from the new master's rescues. No request of the
/// load fails for the module's sake: the only 502s allowed are the new
/// worker's list before its first DNS answer, at most 2%
/// (`Lab::assert_upgrade_lost_only_the_empty_list`).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_binary_upgrade_is_one_reset_to_prometheus() {
    let mut lab = Lab::start_spec(Spec {
        daemon: true,
        ..Spec::single_peer(Flavor::with_module(), "", "generation_retry_resnapshot on;")
    })
    .await;
    let nginx = format!("127.0.0.1:{}", lab.nginx.port());
    let prom = Server::start(&prometheus_config(&[&nginx])).await;
    let rescued = format!(
        "{}{{instance=\"{nginx}\",upstream=\"be\",protocol=\"http\"}}",
        Counter::Rescued.metric()
    );
    let value_is = |want: f64| move |s: &[Series]| s.len() == 1 && s[0].value() == want;
    prom.wait_for(
        "a first scrape",
        &rescued,
        Duration::from_secs(10),
        value_is(0.0),
    )
    .await;
    for i in 0..2 {
        let race = lab.race_once(i).await;
        lab.assert_rescued(&race);
    }
    prom.wait_for(
        "the old master's 2 rescues",
        &rescued,
        Duration::from_secs(10),
        value_is(2.0),
    )
    .await;

    let sent = lab.upgrade_under_load().await;
    lab.assert_upgrade_lost_only_the_empty_list(&sent);

    lab.reload_clients();
    assert_eq!(
        lab.status("be").await.count(Counter::Rescued),
        0,
        "the new master's counters"
    );
    let race = lab.race_once(2).await;
    lab.assert_rescued(&race);
    prom.wait_for(
        "the new master's rescue",
        &rescued,
        Duration::from_secs(10),
        value_is(1.0),
    )
    .await;
    let resets = prom.must(&format!("resets({rescued}[5m])"), None).await;
    assert_eq!(
        resets.first().map(Series::value),
        Some(1.0),
        "resets of rescued_total across the upgrade: {resets:?}"
    );
    // 2 before, 1 after: increase() counts across the reset.
    let increase = prom.must(&format!("increase({rescued}[5m])"), None).await;
    let inc = increase.first().map(Series::value).unwrap_or(0.0);
    assert!(
        inc >= 3.0 - 1e-9,
        "increase({rescued}[5m]) = {inc}, 3 rescues"
    );
    lab.finish();
}
