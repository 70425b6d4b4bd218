//! Counters live in shared memory and survive a reload for upstreams that
//! still exist: the zone is reused and each upstream finds its slot again.

use std::time::Duration;

use generation_retry_t::nginx::Flavor;
use generation_retry_t::scenarios::http::{Lab, Spec};
use generation_retry_t::scenarios::lab::{run_arm, Arm, Options};
use generation_retry_t::scoring::metrics::{Counter, StatusExt};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn counters_survive_reload_and_keep_counting() {
    let mut lab = Lab::start_spec(Spec::single_peer(
        Flavor::with_module(),
        "",
        "generation_retry_resnapshot on;",
    ))
    .await;
    let race = lab.race_once(0).await;
    lab.assert_rescued(&race);
    assert_eq!(lab.status("be").await.count(Counter::Rescued), 1);

    for i in 1..=3 {
        lab.reload();
        let race = lab.race_once(i).await;
        lab.assert_rescued(&race);
        let s = lab.status("be").await;
        assert_eq!(
            s.count(Counter::Rescued),
            (i + 1) as u64,
            "after reload {i}: {s}"
        );
        assert_eq!(
            s.count(Counter::BusyRetry),
            (i + 1) as u64,
            "after reload {i}: {s}"
        );
    }
    lab.finish();
}

/// A reload that removes an upstream, adds one and switches `be` from `off`
/// to `on`: `be` keeps its counters (the refusal it let through while
/// `off`) and rescues from then on; the removed upstream leaves the status,
/// the added one starts at zero.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reload_adds_and_removes_upstreams_and_switches_off_to_on() {
    let other = |name: &str| {
        format!(
            "upstream {name} {{ zone {name} 64k; server 127.0.0.5:1; \
             generation_retry_resnapshot on; }}"
        )
    };
    let mut lab = Lab::start_spec(
        Spec::single_peer(
            Flavor::with_module(),
            "",
            "generation_retry_resnapshot off;",
        )
        .http_extra(&other("gone")),
    )
    .await;
    let race = lab.race_once(0).await;
    assert_eq!(race.response.status(), 502, "{race:?}");
    let s = lab.status("be").await;
    assert_eq!(
        (s["mode"].as_str(), s.count(Counter::Failed)),
        (Some("off"), 1),
        "{s}"
    );
    assert_eq!(lab.status("gone").await.count(Counter::Rescued), 0);

    lab.reconfigure(&[
        ("UPSTREAM_EXTRA", "generation_retry_resnapshot on;"),
        ("HTTP_EXTRA", &other("added")),
    ]);
    let s = lab.status("be").await;
    assert_eq!(s["mode"], "on", "{s}");
    assert_eq!(
        s.count(Counter::BusyRetry),
        1,
        "the off-era refusal was kept: {s}"
    );
    assert_eq!(s.count(Counter::Failed), 1, "{s}");
    let body = lab.client.get("/status?format=json").await.body;
    assert!(
        !body.contains("\"gone\""),
        "a removed upstream is still shown: {body}"
    );
    let added = lab.status("added").await;
    assert_eq!(added.count(Counter::BusyRetry), 0, "{added}");

    let race = lab.race_once(1).await;
    lab.assert_rescued(&race);
    let s = lab.status("be").await;
    assert_eq!(s.count(Counter::Rescued), 1, "{s}");
    assert_eq!(s.count(Counter::BusyRetry), 2, "{s}");
    assert_eq!(s.count(Counter::Failed), 1, "{s}");
    lab.finish();
}

/// SIGHUP every 2 s for 30 s under the lab's load, DNS swaps and
/// reclaim, module on: no crash, no alert (the run fails on either), no
/// generation 502, and the counters kept counting across every reload (the
/// shared count equals the rescues the workers logged). The thresholds
/// are per minute, scaled; `GENERATION_RETRY_SOAK_SECONDS` sets its length
/// (20 s or more),
/// and `cargo xtask soak` reloads every 2 s for ten minutes (with an
/// upgrade and a killed worker), which CI has no time for.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reload_every_two_seconds_under_load() {
    let seconds = generation_retry_t::soak_seconds(30);
    let opts = Options {
        rate: 200.0,
        duration: Duration::from_secs(seconds),
        reclaim: 0.1,
        reload_every: Some(Duration::from_secs(2)),
        ..Options::default()
    };
    let r = run_arm(Arm::ModuleOn, &opts, |_| {}).await;
    println!(
        "reload run: {} requests, {} reloads, {} swaps, {} first-attempt failures, \
         busy {:?}, rescued {:?} (logged {}), 2-hop {}, 1-hop {}, other {}",
        r.requests,
        r.reloads,
        r.swaps,
        r.first_attempt_failures,
        r.busy,
        r.rescued,
        r.rescued_logged,
        r.two_hop_502,
        r.one_hop_502,
        r.other_errors
    );
    // Per minute: at least 25 reloads, 10 swaps and 20 first-attempt
    // failures (about 30, 40 and 120 happen).
    let per_minute = |n: u64| n * seconds / 60;
    assert!(
        r.reloads as u64 >= per_minute(25),
        "only {} reloads happened: {r:?}",
        r.reloads
    );
    assert!(
        r.swaps as u64 >= per_minute(10),
        "the DNS fault did not run: {r:?}"
    );
    assert!(r.rescued_logged > 0, "no rescue happened: {r:?}");
    assert_eq!(
        r.rescued,
        Some(r.rescued_logged as u64),
        "counters lost across reloads: {r:?}"
    );
    assert!(
        r.first_attempt_failures as u64 >= per_minute(20),
        "the reclaim fault did not run: {r:?}"
    );
    assert_eq!(r.two_hop_502, 0, "{r:?}");
    assert_eq!(r.one_hop_502, 0, "{r:?}");
    assert_eq!(r.post_received_twice, 0);
}

/// Binary upgrade (USR2, then QUIT to the old master) with the module loaded
/// keeps serving: a steady load only meets the new master's not yet
/// resolved list (see below), and the new master's worker rescues the race.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn binary_upgrade_keeps_serving() {
    let mut lab = Lab::start_spec(Spec {
        daemon: true,
        ..Spec::single_peer(Flavor::with_module(), "", "generation_retry_resnapshot on;")
    })
    .await;
    let sent = lab.upgrade_under_load().await;
    lab.assert_upgrade_lost_only_the_empty_list(&sent);

    lab.reload_clients();
    let race = lab.race_once(0).await;
    lab.assert_rescued(&race);
    lab.finish();
}
