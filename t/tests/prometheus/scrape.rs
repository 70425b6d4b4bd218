//! A short lab run scraped every second by a real Prometheus with the
//! rules loaded, across a reload that removes an upstream: `increase()`
//! equals the module's counts and the error log's rescue lines, no counter
//! resets, the removed upstream goes stale, and the names come back.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use generation_retry_t::actors::backend::{ADDR_A, ADDR_B};
use generation_retry_t::actors::dns::Answer;
use generation_retry_t::actors::load::{open_loop, Client};
use generation_retry_t::actors::prometheus::{Series, Server};
use generation_retry_t::nginx::{free_port, Flavor};
use generation_retry_t::scenarios::http::{wait_peers, Lab, Spec, NAME};
use generation_retry_t::scoring::metrics::{log, Counter, Protocol, StatusExt, FAMILIES};
use reqwest::Method;
use serde_json::Value;

use generation_retry_t::scenarios::lab::epoch_now;

use super::common::{prometheus_config, promtool_accepts, series_per_upstream, ODD_NAMES};
use super::dashboard::check_dashboard;
use super::lab::{http_extra, stream_upstreams, LOCATIONS, OBS_NAME};
use super::loaded_rules::check_rules;

/// A PromQL string literal of `s` (double-quoted, Go escapes).
fn quoted(s: &str) -> String {
    serde_json::to_string(s).expect("a string")
}

/// A short lab run scraped every second by a real Prometheus with
/// contrib/prometheus's rules loaded, and a reload in the middle that
/// removes an upstream. The lab: `be` (on) rescues one scripted race and
/// the races of load under DNS swaps and keepalive reclaim, and has one
/// scripted rescue fail (the fresh list empty); `obs` (off) lets the same
/// load's races fail; `down` and `nx` refuse as `unavailable` and `empty`;
/// a target that is down and one that counts nothing stand beside nginx.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_real_prometheus_scrapes_a_lab_run_across_a_reload() {
    let started = Instant::now();
    let (empty_port, dead_port) = (free_port(), free_port());
    let spec = Spec::single_peer(Flavor::with_module(), "", "generation_retry_resnapshot on;")
        .http_extra(&http_extra(true, empty_port))
        .stream(&stream_upstreams());
    let mut lab = Lab::start_spec_with(spec, &[("SERVER_EXTRA", LOCATIONS.to_string())]).await;
    lab.dns.set_a(OBS_NAME, ADDR_A);
    wait_peers(&lab.client, "http", "obs", 1).await;

    let nginx = format!("127.0.0.1:{}", lab.nginx.port());
    let empty = format!("127.0.0.1:{empty_port}");
    let dead = format!("127.0.0.1:{dead_port}");
    let prom = Server::start(&prometheus_config(&[&nginx, &empty, &dead])).await;
    let sel = |upstream: &str, protocol: &str| {
        format!(
            "instance=\"{nginx}\",upstream={},protocol=\"{protocol}\"",
            quoted(upstream)
        )
    };
    let rescued_be = format!("{}{{{}}}", Counter::Rescued.metric(), sel("be", "http"));
    let failed_obs = format!("{}{{{}}}", Counter::Failed.metric(), sel("obs", "http"));
    let gone_series = format!(
        "{{__name__=~\"nginx_generation_retry_.+\",{}}}",
        sel("gone", "http")
    );

    // The first scrape, before anything was rescued: every counter's first
    // sample is 0, so increase() has nothing to extrapolate at the start.
    prom.wait_for(
        "a first scrape",
        &rescued_be,
        Duration::from_secs(10),
        |s| s.len() == 1 && s[0].value() == 0.0,
    )
    .await;
    let n = series_per_upstream();
    prom.wait_for("gone's series", &gone_series, Duration::from_secs(5), |s| {
        s.len() == n
    })
    .await;

    // One scripted rescue, so be's counters are past 0 before the reload.
    let race = lab.race_once(0).await;
    lab.assert_rescued(&race);

    // The lab's faults on both names, and load through be and obs (a few
    // requests to down and nx), with a reload in the middle.
    lab.dns.set(NAME, Answer::rotate(&[ADDR_A, ADDR_B]));
    lab.dns.set(OBS_NAME, Answer::rotate(&[ADDR_B, ADDR_A]));
    lab.backend
        .set_reclaim_after(0.2, 1656, Duration::from_millis(300));
    // The load runs in half-second rounds until told to stop, so the run
    // lasts as long as the conditions below take, and no longer.
    let stop = Arc::new(AtomicBool::new(false));
    let load = {
        let (client, stop) = (Client::without_keepalive(lab.nginx.url("")), stop.clone());
        tokio::spawn(async move {
            let mut sent = Vec::new();
            while !stop.load(Ordering::SeqCst) {
                let base = sent.len() as u64;
                let round = open_loop(&client, 200.0, Duration::from_millis(500), |i| {
                    let i = base + i;
                    let path = match i % 20 {
                        7 => format!("/down/{i}"),
                        17 => format!("/nx/{i}"),
                        k if k % 2 == 0 => format!("/load/{i}"),
                        _ => format!("/obs/{i}"),
                    };
                    (Method::GET, path, None)
                })
                .await;
                sent.extend(round);
            }
            sent
        })
    };
    // Reload once Prometheus has seen be rescue and obs fail.
    prom.wait_for(
        "be rescued and obs failed before the reload",
        &format!("{rescued_be} > 0 or {failed_obs} > 0"),
        Duration::from_secs(10),
        |s| s.len() == 2,
    )
    .await;
    let reload_at = epoch_now();
    let before = (
        lab.status("be").await.count(Counter::Rescued),
        lab.status("obs").await.count(Counter::Failed),
    );
    lab.reconfigure(&[("HTTP_EXTRA", &http_extra(false, empty_port))]);
    // The removed upstream's series go stale at the first scrape after the
    // reload: absent from an instant query at once, not 5 minutes later.
    prom.wait_for(
        "gone's series going stale",
        &gone_series,
        Duration::from_secs(5),
        |s| s.is_empty(),
    )
    .await;
    let be_peers = format!("nginx_generation_retry_peers{{{}}}", sel("be", "http"));
    assert_eq!(
        prom.must(&be_peers, None).await.len(),
        1,
        "be went stale too"
    );
    let gone_before = prom
        .must(
            &format!(
                "last_over_time(nginx_generation_retry_peers{{{}}}[5m])",
                sel("gone", "http")
            ),
            None,
        )
        .await;
    assert_eq!(gone_before.len(), 1, "gone never had a series");
    // The new workers count on: be rescues again, obs fails again.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = (
            lab.status("be").await.count(Counter::Rescued),
            lab.status("obs").await.count(Counter::Failed),
        );
        if now.0 > before.0 && now.1 > before.1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "after the reload: rescued, failed {now:?}, before {before:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop.store(true, Ordering::SeqCst);

    let sent = load.await.expect("load task");
    let of = |prefix: &'static str| sent.iter().filter(move |s| s.path.starts_with(prefix));
    let be_failed: Vec<_> = of("/load/")
        .filter(|s| s.response.status() != 200)
        .collect();
    assert!(
        be_failed.is_empty(),
        "be (on) failed requests: {be_failed:#?}"
    );
    let obs_502 = of("/obs/").filter(|s| s.response.status() == 502).count();
    assert!(
        of("/obs/").all(|s| matches!(s.response.status(), 200 | 502)),
        "obs answered other than 200 or 502"
    );
    assert!(obs_502 >= 1, "obs (off) let no race fail");
    assert!(of("/down/").all(|s| s.response.status() == 502));
    assert!(of("/nx/").all(|s| s.response.status() == 502));

    // The faults off, the name steady, then one rescue that fails: the
    // name answers NXDOMAIN while a request is held, so its fresh snapshot
    // is empty.
    lab.backend.set_reclaim(0.0, 1656);
    lab.dns.set_a(NAME, lab.current);
    lab.dns.set_a(OBS_NAME, ADDR_A);
    lab.wait_proxying_to(lab.current, "/steady").await;
    let race = lab.race_to_nxdomain(1).await;
    assert_eq!(race.response.status(), 502, "{race:?}");

    // Quiescent: the module's own counts and the error log.
    let status: Value =
        serde_json::from_str(&lab.client.get("/status?format=json").await.body).expect("JSON");
    let module = |name: &str, c: Counter| {
        status["upstreams"]
            .as_array()
            .and_then(|a| {
                a.iter()
                    .find(|u| u["upstream"] == name && u["protocol"] == "http")
            })
            .unwrap_or_else(|| panic!("no http upstream {name}: {status}"))
            .count(c)
    };
    let rescued = module("be", Counter::Rescued);
    let error_log = lab.nginx.error_log();
    let rescue_lines = error_log
        .lines()
        .filter(|l| log::is_rescue_line(l))
        .collect::<Vec<_>>();
    let be_lines = rescue_lines
        .iter()
        .filter(|l| l.contains(&log::rescued_marker(Protocol::Http, "be")))
        .count();
    assert_eq!(
        be_lines,
        rescue_lines.len(),
        "a rescue line of another upstream"
    );
    assert_eq!(
        rescued, be_lines as u64,
        "rescued_total vs the rescue lines"
    );
    assert!(
        rescued >= 2,
        "only {rescued} rescues: the load's races did not run"
    );
    assert_eq!(module("be", Counter::Failed), 1);
    let obs_failed = module("obs", Counter::Failed);
    assert!(obs_failed >= 1);

    // Prometheus has the last values...
    for (series, want) in [(&rescued_be, rescued), (&failed_obs, obs_failed)] {
        prom.wait_for("the last values", series, Duration::from_secs(5), |s| {
            s.len() == 1 && s[0].value() == want as f64
        })
        .await;
    }
    // ... and increase() over the whole run, evaluated at the last
    // sample's own time (no extrapolation at either end: the first sample
    // is 0 and the last is the evaluation time), is the module's count,
    // exactly. Likewise for obs's failures.
    for (series, want) in [(&rescued_be, rescued), (&failed_obs, obs_failed)] {
        let at = prom.must(&format!("timestamp({series})"), None).await[0].value();
        let inc = prom
            .must(&format!("increase({series}[5m])"), Some(at))
            .await;
        assert_eq!(inc.len(), 1, "{series}");
        assert!(
            (inc[0].value() - want as f64).abs() < 1e-9,
            "increase({series}[5m]) = {} at {at}, the module counted {want}",
            inc[0].value()
        );
        let raw = prom.must(&format!("{series}[5m]"), Some(at)).await;
        let samples = &raw[0].samples;
        assert_eq!(samples.first().map(|s| s.1), Some(0.0), "{samples:?}");
        assert!(samples.windows(2).all(|w| w[0].1 <= w[1].1), "{samples:?}");
        assert!(
            samples.first().unwrap().0 < reload_at && samples.last().unwrap().0 > reload_at,
            "{series} was not scraped across the reload"
        );
    }
    // be was past 0 before the reload: a reload that lost its counters
    // would show as a reset.
    let raw = prom.must(&format!("{rescued_be}[5m]"), None).await;
    assert!(
        raw[0]
            .samples
            .iter()
            .any(|&(t, v)| t < reload_at && v >= 1.0),
        "{raw:?}"
    );

    // No counter of any upstream kept across the reload reset (one query
    // per family: resets() drops the metric's name).
    let mut resets = Vec::new();
    for f in FAMILIES.iter().filter(|f| f.name.ends_with("_total")) {
        let q = format!("resets({}{{instance=\"{nginx}\"}}[5m])", f.name);
        resets.extend(prom.must(&q, None).await);
    }
    let counters_per_upstream: usize = FAMILIES
        .iter()
        .filter(|f| f.name.ends_with("_total"))
        .map(|f| f.series.len())
        .sum();
    let upstreams_now = 4 + 2 * ODD_NAMES.len() + 1;
    assert_eq!(
        resets.len(),
        counters_per_upstream * (upstreams_now + 1),
        "the counters of every upstream (gone's too, before it left)"
    );
    let reset: Vec<_> = resets.iter().filter(|s| s.value() != 0.0).collect();
    assert!(reset.is_empty(), "counters reset: {reset:#?}");
    // The endpoint answered the scrapes, the reload's included: at most
    // one missed, which on a loaded 2-core machine can be Prometheus's own
    // 1 s timeout rather than the endpoint.
    let missed = prom
        .must(
            &format!(
                "count_over_time(up{{instance=\"{nginx}\"}}[5m]) \
                 - sum_over_time(up{{instance=\"{nginx}\"}}[5m])"
            ),
            None,
        )
        .await;
    let missed = missed.first().map(Series::value);
    assert!(
        missed.is_some_and(|m| m <= 1.0),
        "scrapes missed: {missed:?}"
    );

    // Every upstream's name, as Prometheus stored it.
    let names: BTreeSet<(String, String)> = prom
        .must(
            &format!("group by (upstream, protocol) (nginx_generation_retry_peers{{instance=\"{nginx}\"}})"),
            None,
        )
        .await
        .iter()
        .map(|s| (s.label("upstream").to_string(), s.label("protocol").to_string()))
        .collect();
    let mut expected: BTreeSet<(String, String)> = ["be", "obs", "down", "nx"]
        .iter()
        .map(|u| (u.to_string(), "http".to_string()))
        .collect();
    expected.insert(("be".into(), "stream".into()));
    for (_, name) in ODD_NAMES {
        expected.insert((name.to_string(), "http".into()));
        expected.insert((name.to_string(), "stream".into()));
    }
    assert_eq!(names, expected);
    assert_eq!(expected.len(), upstreams_now);

    // The page of the run, as scraped, passes promtool.
    promtool_accepts(
        &lab.client.get("/status").await.body,
        "the lab's status page",
    );

    check_rules(&prom, &nginx, &empty, &dead).await;
    let exprs = check_dashboard(&prom, &nginx).await;
    eprintln!(
        "prometheus lab: {} requests, be rescued {rescued} (lines {be_lines}), obs failed \
         {obs_failed} ({obs_502} 502s), {} dashboard expressions, {:.1} s",
        sent.len(),
        exprs,
        started.elapsed().as_secs_f64()
    );
    drop(prom);
    lab.finish();
}
