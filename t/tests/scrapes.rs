//! The status endpoint under load: 10,000 scrapes, 250 at a time, while
//! proxied load meets DNS swaps and keepalive reclaim (so generation races
//! happen and the counters move between and during the scrapes), in nginx
//! with two workers counting into the shared zone. Every scrape must answer
//! 200 with a parseable body, no counter may ever go down, the counters must
//! have moved while being scraped, and the quiescent end state must add up.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use generation_retry_t::actors::backend::{Backend, Wire, ADDR_A, ADDR_B};
use generation_retry_t::actors::dns::{Answer, DnsServer};
use generation_retry_t::actors::load::{assert_all_ok, open_loop, Client};
use generation_retry_t::nginx::{Config, Flavor, Nginx};
use generation_retry_t::scenarios::http::{NAME, PROXY_HTTP, SINGLE_PEER_SERVERS};
use generation_retry_t::scoring::metrics::{self, Counter};
use reqwest::Method;
use serde_json::Value;
use tokio::sync::Barrier;

/// Scrapes in flight at once (one task each).
const CONCURRENCY: usize = 250;
/// Scrapes per task: 250 x 40 = 10,000.
const ROUNDS: usize = 40;
/// Pause between rounds, so the scrapes span several swaps.
const PAUSE: Duration = Duration::from_millis(300);

/// Garbage query strings: the endpoint must still answer Prometheus text.
const GARBAGE: &[&str] = &[
    "?format=%%%&&=&format",
    "?format=",
    "?format=jsonx",
    "?%00%ff=\u{1}",
    "?format=json&format=text",
    "?a=b&c",
    "?&&&&",
];

/// One series' key: `(which view, series name)`. The text and JSON views
/// are kept apart (each is monotonic on its own).
type Series = (&'static str, String);

/// Prometheus text: every `name{labels} value` line (the tests' one
/// reader, `scoring::metrics::parse_exposition`), every value a number.
fn parse_text(body: &str) -> Result<BTreeMap<Series, f64>, String> {
    let mut out = BTreeMap::new();
    for (name, labels, value) in metrics::parse_exposition(body)? {
        let value: f64 = value
            .parse()
            .map_err(|e| format!("{name} {labels:?}: value {value:?}: {e}"))?;
        let labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
        out.insert(("text", format!("{name}{{{}}}", labels.join(","))), value);
    }
    if out.is_empty() {
        return Err(format!("no series in {body:?}"));
    }
    Ok(out)
}

/// The JSON view: each upstream object's numbers, flattened
/// (`upstream=be,protocol=http,mode=on/busy.retry`).
fn parse_json(body: &str) -> Result<BTreeMap<Series, f64>, String> {
    let v: Value = serde_json::from_str(body).map_err(|e| format!("{e}: {body:?}"))?;
    let ups = v["upstreams"]
        .as_array()
        .ok_or_else(|| format!("no upstreams array: {body:?}"))?;
    let mut out = BTreeMap::new();
    for u in ups {
        let obj = u.as_object().ok_or("upstream is not an object")?;
        let id: Vec<String> = obj
            .iter()
            .filter_map(|(k, v)| v.as_str().map(|s| format!("{k}={s}")))
            .collect();
        let id = id.join(",");
        flatten(u, "", &mut |path, n| {
            out.insert(("json", format!("{id}/{path}")), n);
        });
    }
    if out.is_empty() {
        return Err(format!("no numbers in {body:?}"));
    }
    Ok(out)
}

fn flatten(v: &Value, path: &str, f: &mut impl FnMut(&str, f64)) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                flatten(v, &p, f);
            }
        }
        Value::Number(n) => f(path, n.as_f64().unwrap_or(f64::NAN)),
        _ => {}
    }
}

/// Counters, not gauges: `_total` in the text view, everything but
/// `generation` and `peers` in the JSON view.
fn is_counter(s: &Series) -> bool {
    match s.0 {
        "text" => s.1.contains("_total{"),
        _ => !(s.1.ends_with("/generation") || s.1.ends_with("/peers")),
    }
}

/// What one task saw, in its own (sequential) order.
struct Seen {
    scrapes: Vec<BTreeMap<Series, f64>>,
    problems: Vec<String>,
    heads: usize,
}

/// Scrapes in flight now, and the most ever.
#[derive(Default)]
struct InFlight {
    now: AtomicUsize,
    max: AtomicUsize,
}

async fn scraper(
    client: Client,
    task: usize,
    barrier: Arc<Barrier>,
    in_flight: Arc<InFlight>,
) -> Seen {
    let mut seen = Seen {
        scrapes: Vec::with_capacity(ROUNDS),
        problems: Vec::new(),
        heads: 0,
    };
    for round in 0..ROUNDS {
        barrier.wait().await;
        let path = match (task + round) % 3 {
            0 => "/status?format=json".to_string(),
            1 => "/status".to_string(),
            _ => format!("/status{}", GARBAGE[(task + round) % GARBAGE.len()]),
        };
        let n = in_flight.now.fetch_add(1, Ordering::SeqCst) + 1;
        in_flight.max.fetch_max(n, Ordering::SeqCst);
        let r = client.get(&path).await;
        in_flight.now.fetch_sub(1, Ordering::SeqCst);
        // Parsed as what it says it is (a garbage query may still ask for
        // JSON first, as `?format=json&format=text` does).
        let kind = r
            .headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let parsed = if r.status() != 200 {
            Err(format!("status {} ({:?})", r.status(), r.error))
        } else if kind == "application/json" {
            parse_json(&r.body)
        } else if kind == "text/plain; version=0.0.4; charset=utf-8" {
            parse_text(&r.body)
        } else {
            Err(format!("content type {kind:?}"))
        };
        match parsed {
            Ok(m) => seen.scrapes.push(m),
            Err(e) => seen
                .problems
                .push(format!("task {task} round {round} {path}: {e}")),
        }
        if round % 10 == task % 10 {
            let h = client.head("/status").await;
            if h.status() != 200 || !h.body.is_empty() {
                seen.problems
                    .push(format!("task {task} HEAD: {} {:?}", h.status(), h.body));
            }
            seen.heads += 1;
        }
        tokio::time::sleep(PAUSE).await;
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ten_thousand_concurrent_scrapes_under_generation_races() {
    let dns = DnsServer::start().await;
    dns.set_a(NAME, ADDR_A);
    let backend = Backend::start().await;
    let config = Config::new(Flavor::with_module(), PROXY_HTTP)
        .workers(2)
        .var(
            "SERVERS",
            format!("{SINGLE_PEER_SERVERS}\n        generation_retry_resnapshot on;"),
        )
        .var("DNS", dns.addr())
        .var("BPORT", backend.port())
        .var("PASS", Wire::Http.pass())
        .var("UPSTREAM_PRE", "")
        .var("UPSTREAM_EXTRA", "")
        .var("HTTP_EXTRA", "")
        .var(
            "LOCATION_EXTRA",
            "proxy_http_version 1.1; proxy_set_header Connection \"\";",
        )
        .var("SCHEME", "http")
        .var("SERVER_EXTRA", "")
        .var("STATUS", "generation_retry_status;");
    let nginx = Nginx::start(&config);
    let client = Client::new(nginx.url(""));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while client.get("/ready").await.status() != 200 {
        assert!(std::time::Instant::now() < deadline, "never proxied");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // The lab's faults: a swap at every re-resolve, reclaimed keepalive
    // connections; proxied GETs at 300 rps for the whole scrape run.
    dns.set(NAME, Answer::rotate(&[ADDR_B, ADDR_A]));
    backend.set_reclaim_after(0.1, 1656, Duration::from_millis(300));
    let expected_run = (PAUSE + Duration::from_millis(100)) * ROUNDS as u32;
    let load = {
        let client = client.clone();
        tokio::spawn(async move {
            open_loop(&client, 300.0, expected_run, |i| {
                (Method::GET, format!("/load/{i}"), None)
            })
            .await
        })
    };

    let scrape_client = Client::new(nginx.url(""));
    let barrier = Arc::new(Barrier::new(CONCURRENCY));
    let in_flight = Arc::new(InFlight::default());
    let tasks: Vec<_> = (0..CONCURRENCY)
        .map(|t| {
            let (c, b, f) = (scrape_client.clone(), barrier.clone(), in_flight.clone());
            tokio::spawn(scraper(c, t, b, f))
        })
        .collect();
    let mut seen = Vec::with_capacity(CONCURRENCY);
    for t in tasks {
        seen.push(t.await.expect("scrape task"));
    }
    let sent = load.await.expect("load task");

    // Quiescent: the load is over; one last scrape of each view.
    let final_text = parse_text(&client.get("/status").await.body).expect("final text");
    let final_json = parse_json(&client.get("/status?format=json").await.body).expect("final json");
    let swaps = dns.swaps(NAME).len();
    nginx.finish();

    let problems: Vec<&String> = seen.iter().flat_map(|s| &s.problems).collect();
    assert!(
        problems.is_empty(),
        "{} bad scrapes, first: {:#?}",
        problems.len(),
        &problems[..problems.len().min(5)]
    );
    let scrapes: usize = seen.iter().map(|s| s.scrapes.len()).sum();
    let heads: usize = seen.iter().map(|s| s.heads).sum();
    assert_eq!(scrapes, CONCURRENCY * ROUNDS);
    let max_in_flight = in_flight.max.load(Ordering::SeqCst);
    assert!(
        max_in_flight >= CONCURRENCY / 2,
        "at most {max_in_flight} scrapes were in flight at once"
    );

    // Monotonic: within each task's sequential scrapes, and the final
    // scrape at least every value any scrape saw.
    let mut distinct: BTreeMap<Series, BTreeSet<u64>> = BTreeMap::new();
    let mut went_down = Vec::new();
    for (task, s) in seen.iter().enumerate() {
        let mut last: BTreeMap<&Series, f64> = BTreeMap::new();
        for m in &s.scrapes {
            for (k, &v) in m.iter().filter(|(k, _)| is_counter(k)) {
                if let Some(&prev) = last.get(k) {
                    if v < prev {
                        went_down.push(format!("task {task}: {k:?} {prev} -> {v}"));
                    }
                }
                last.insert(k, v);
                distinct.entry(k.clone()).or_default().insert(v as u64);
                let fin = match k.0 {
                    "text" => final_text.get(k),
                    _ => final_json.get(k),
                };
                match fin {
                    Some(&f) if f >= v => {}
                    other => went_down.push(format!("{k:?}: seen {v}, final {other:?}")),
                }
            }
        }
    }
    assert!(went_down.is_empty(), "counters went down: {went_down:#?}");

    // The races ran and the counters moved while being scraped.
    let g = |s: &str| {
        final_json
            .iter()
            .find(|(k, _)| {
                let (id, path) = k.1.split_once('/').unwrap_or_default();
                id.split(',').any(|p| p == "upstream=be") && path == s
            })
            .map(|(_, &v)| v as u64)
            .unwrap_or_else(|| panic!("no be/{s} in {final_json:?}"))
    };
    let c = |counter: Counter| g(&counter.json_path().join("."));
    let busy = c(Counter::BusyFirst) + c(Counter::BusyRetry);
    let (resnapshots, rescued, failed) = (
        c(Counter::Resnapshots),
        c(Counter::Rescued),
        c(Counter::Failed),
    );
    let moving = distinct
        .iter()
        .filter(|(k, v)| {
            k.0 == "json"
                && k.1
                    .ends_with(&format!("/{}", Counter::BusyRetry.json_path().join(".")))
                && v.len() >= 2
        })
        .count();
    assert!(swaps >= 5, "only {swaps} DNS swaps: the fault did not run");
    assert!(busy >= 1, "no generation-busy selection: no race happened");
    assert!(moving >= 1, "busy never changed while being scraped");

    // The quiescent numbers add up (docs/metrics.md, Identities): every busy selection
    // was rescued or failed, exactly once; each rescue took a re-snapshot,
    // and each busy selection at most max (2) of them; every generation
    // no-live is a failed one. Checked only once quiescent: with two
    // workers, a scrape in one may read the counters between two
    // increments of one selection in the other (busy, then rescued).
    assert_eq!(
        rescued + failed,
        busy,
        "rescued {rescued} + failed {failed} != busy {busy}"
    );
    assert!(
        rescued <= resnapshots && resnapshots <= 2 * busy,
        "{final_json:?}"
    );
    assert!(c(Counter::NoLiveGeneration) <= failed, "{final_json:?}");
    // The two views agree.
    let text = |m: &str| {
        final_text
            .iter()
            .find(|(k, _)| k.1.starts_with(m) && k.1.contains("upstream=\"be\""))
            .map(|(_, &v)| v as u64)
            .unwrap_or_else(|| panic!("no {m} for be"))
    };
    assert_eq!(text(Counter::Rescued.metric()), rescued);
    assert_eq!(text(Counter::Resnapshots.metric()), resnapshots);
    assert_eq!(text(Counter::Failed.metric()), failed);

    // Every proxied GET got its 200 through the races and the reclaims.
    assert_all_ok(&sent);
    let ok = sent.len();
    eprintln!(
        "scrapes: {scrapes} GET (+{heads} HEAD), up to {max_in_flight} in flight; \
         proxied {ok}, all 200; swaps {swaps}; busy {busy}, resnapshots {resnapshots}, \
         rescued {rescued}, failed {failed}; busy.retry took {} distinct values while scraped",
        distinct
            .iter()
            .filter(|(k, _)| k.0 == "json"
                && k.1
                    .ends_with(&format!("/{}", Counter::BusyRetry.json_path().join("."))))
            .map(|(_, v)| v.len())
            .max()
            .unwrap_or(0)
    );
}
