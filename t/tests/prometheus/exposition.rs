//! The status page's text exposition as Prometheus reads it: `promtool
//! check metrics` accepts hundreds of http and stream upstreams with odd
//! names, and every name comes back exactly, from the text and the JSON.

use std::collections::{BTreeMap, BTreeSet};

use generation_retry_t::actors::load::Client;
use generation_retry_t::actors::prometheus::promtool;
use generation_retry_t::nginx::{Config, Flavor, Nginx};
use generation_retry_t::scoring::metrics::{self, FAMILIES};
use serde_json::Value;

use super::common::{promtool_accepts, series_per_upstream, ODD_NAMES};

/// One sample: name, labels, value.
type Sample = (String, BTreeMap<String, String>, f64);

/// Every sample of a text exposition, with its label values unescaped
/// (`scoring::metrics::parse_exposition`, the tests' one reader).
fn parse_exposition(body: &str) -> Result<Vec<Sample>, String> {
    metrics::parse_exposition(body)?
        .into_iter()
        .map(|(name, labels, value)| {
            let value = value
                .parse()
                .map_err(|e| format!("{name} {value:?}: {e}"))?;
            Ok((name, labels.into_iter().collect(), value))
        })
        .collect()
}

/// `upstream NAME { ... }` for each name, in the zone `zone`, `on` or
/// `off` in turn.
fn static_upstreams(names: &[String], zone: &str) -> String {
    names
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let mode = if i % 2 == 0 { "on" } else { "off" };
            format!(
                "upstream {n} {{ zone {zone} 8m; server 127.0.0.5:1; \
                 generation_retry_resnapshot {mode}; }}\n"
            )
        })
        .collect()
}

/// 200 http and 200 stream upstreams, and the odd names in both
/// protocols: `promtool check metrics` accepts the page, and every name
/// comes back exactly, from the text and from the JSON.
///
/// Non-regression guard: the page's format and escaping, every counter at
/// 0; nothing here needs a selection wrapped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promtool_accepts_the_exposition_of_many_upstreams_with_odd_names() {
    let plain: Vec<String> = (0..200).map(|i| format!("up{i}")).collect();
    let odd: Vec<String> = ODD_NAMES.iter().map(|(w, _)| w.to_string()).collect();
    let written: Vec<String> = plain.iter().chain(&odd).cloned().collect();
    let http = format!(
        "server {{ listen 127.0.0.1:${{PORT}}; location = /status {{ generation_retry_status; }} }}\n{}",
        static_upstreams(&written, "http_pool")
    );
    let config =
        Config::new(Flavor::with_module(), http).stream(static_upstreams(&written, "stream_pool"));
    let nginx = Nginx::start(&config);
    let client = Client::new(nginx.url(""));

    let r = client.get("/status").await;
    assert_eq!(r.status(), 200, "{r:?}");
    assert_eq!(
        r.headers.get("content-type").and_then(|v| v.to_str().ok()),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    promtool_accepts(&r.body, "the status page of 416 upstreams");

    let read: Vec<String> = plain
        .iter()
        .cloned()
        .chain(ODD_NAMES.iter().map(|(_, n)| n.to_string()))
        .collect();
    let expected: BTreeSet<(String, String)> = ["http", "stream"]
        .iter()
        .flat_map(|p| read.iter().map(move |n| (n.clone(), p.to_string())))
        .collect();
    assert_eq!(expected.len(), 2 * (200 + ODD_NAMES.len()));

    // Text: every sample parses, names round-trip, each upstream has every
    // series of every family.
    let samples = parse_exposition(&r.body).unwrap_or_else(|e| panic!("{e}"));
    let mut per_upstream: BTreeMap<(String, String), usize> = BTreeMap::new();
    for (name, labels, _) in &samples {
        assert!(FAMILIES.iter().any(|f| f.name == name), "{name}");
        let key = (labels["upstream"].clone(), labels["protocol"].clone());
        *per_upstream.entry(key).or_default() += 1;
    }
    let seen: BTreeSet<_> = per_upstream.keys().cloned().collect();
    assert_eq!(
        seen.symmetric_difference(&expected).collect::<Vec<_>>(),
        Vec::<&(String, String)>::new(),
        "upstream names changed on their way through the text format"
    );
    assert!(
        per_upstream.values().all(|&n| n == series_per_upstream()),
        "{per_upstream:?}"
    );

    // JSON: the same names.
    let json: Value =
        serde_json::from_str(&client.get("/status?format=json").await.body).expect("JSON");
    let from_json: BTreeSet<(String, String)> = json["upstreams"]
        .as_array()
        .expect("upstreams")
        .iter()
        .map(|u| {
            (
                u["upstream"].as_str().unwrap_or_default().to_string(),
                u["protocol"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert_eq!(from_json, expected);

    // The check bites: the same page with one quote left unescaped fails.
    let broken = r.body.replacen("quo\\\"te", "quo\"te", 1);
    assert_ne!(broken, r.body);
    let said = promtool(&["check", "metrics"], &broken);
    assert!(!said.ok, "promtool accepted a broken page: {said:?}");
    nginx.finish();
}
