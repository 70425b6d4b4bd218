//! The rules as the real server evaluates them over the lab's data: every
//! alert active exactly where the lab made it true, every rule healthy
//! and returning data, and the recorded series saying what the lab did.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use generation_retry_t::actors::prometheus::{Series, Server};
use serde_json::Value;

use super::common::{doc_anchors, RUNBOOKS};

/// What an alert's series is about: `upstream/protocol` or the instance,
/// or the job for an alert without either.
fn subject(s: &BTreeMap<String, String>, nginx: &str) -> String {
    let instance = s.get("instance").map(String::as_str).unwrap_or("");
    match s.get("upstream") {
        Some(u) if instance == nginx => format!("{u}/{}", s["protocol"]),
        Some(u) => format!("{u}/{} at {instance}", s["protocol"]),
        None if !instance.is_empty() => instance.to_string(),
        None => format!("job {}", s.get("job").map(String::as_str).unwrap_or("")),
    }
}

/// The rules loaded into the server, over the lab's data: every alert
/// active exactly where the lab made it true (`nginx`'s upstreams, the
/// `empty` and `dead` targets), every rule healthy, each alert with its
/// annotations and runbook section, each expression returning data, and
/// the recorded series saying what the lab did.
pub(crate) async fn check_rules(prom: &Server, nginx: &str, empty: &str, dead: &str) {
    let mut want: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    want.insert("GenerationRetryObserveModeFailing", set(&["obs/http"]));
    want.insert("GenerationRetryRescuesFailing", set(&["be/http"]));
    want.insert("GenerationRetryNoLiveUnavailable", set(&["down/http"]));
    want.insert("GenerationRetryNoLiveEmpty", set(&["be/http", "nx/http"]));
    want.insert("GenerationRetryStatusDown", set(&[dead]));
    // By design silent while the job has targets (checked below through
    // the selector it wraps).
    want.insert("GenerationRetryStatusAbsent", BTreeSet::new());
    want.insert("GenerationRetryNoUpstreamsCounted", set(&[empty]));
    let active = |alerts: &Value| -> BTreeMap<String, BTreeSet<String>> {
        let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for a in alerts["alerts"].as_array().into_iter().flatten() {
            let labels: BTreeMap<String, String> =
                serde_json::from_value(a["labels"].clone()).unwrap_or_default();
            out.entry(labels["alertname"].clone())
                .or_default()
                .insert(subject(&labels, nginx));
        }
        out
    };
    let want_active: BTreeMap<String, BTreeSet<String>> = want
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let alerts = prom.api("/api/v1/alerts", &[]).await.expect("alerts");
        let now = active(&alerts);
        if now == want_active {
            // Rendered with this Prometheus's external label: clickable.
            for a in alerts["alerts"].as_array().into_iter().flatten() {
                let name = a["labels"]["alertname"].as_str().unwrap_or_default();
                assert_eq!(
                    a["annotations"]["runbook_url"],
                    format!("{RUNBOOKS}#{}", name.to_lowercase()),
                    "{a}"
                );
            }
            break;
        }
        assert!(
            Instant::now() < deadline,
            "active alerts {now:#?}, expected {want_active:#?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let rules = prom.api("/api/v1/rules", &[]).await.expect("rules");
    let anchors = doc_anchors();
    let mut alerts_seen = BTreeSet::new();
    let mut recorded = Vec::new();
    for rule in rules["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|g| g["rules"].as_array().into_iter().flatten())
    {
        let name = rule["name"].as_str().unwrap_or_default().to_string();
        let query = rule["query"].as_str().unwrap_or_default().to_string();
        assert_eq!(rule["health"], "ok", "{rule}");
        assert!(
            rule["lastError"].as_str().unwrap_or("").is_empty(),
            "{rule}"
        );
        let answer = prom.must(&query, None).await;
        if rule["type"] == "alerting" {
            for a in ["summary", "description", "runbook_url"] {
                assert!(
                    rule["annotations"][a]
                        .as_str()
                        .is_some_and(|s| !s.is_empty()),
                    "{name} has no {a}"
                );
            }
            let runbook = rule["annotations"]["runbook_url"].as_str().unwrap_or("");
            let anchor = runbook
                .rsplit_once('#')
                .map_or("", |(_, a)| a)
                .trim_end_matches('\'');
            assert!(anchors.contains(anchor), "{name}: runbook {runbook}");
            let expected = want
                .get(name.as_str())
                .unwrap_or_else(|| panic!("the test knows no alert {name}: add it to `want`"));
            let got: BTreeSet<String> = answer.iter().map(|s| subject(&s.labels, nginx)).collect();
            assert_eq!(&got, expected, "{name}: {query}");
            if expected.is_empty() {
                // absent(S) is empty exactly when S has data.
                let inner = query
                    .strip_prefix("absent(")
                    .and_then(|q| q.strip_suffix(')'))
                    .unwrap_or_else(|| {
                        panic!("{name}: silent in the lab, but not absent(): {query}")
                    });
                let data = prom.must(inner, None).await;
                let instances: BTreeSet<&str> = data.iter().map(|s| s.label("instance")).collect();
                assert_eq!(
                    instances,
                    [nginx, empty, dead].into_iter().collect(),
                    "{inner}"
                );
            }
            alerts_seen.insert(name);
        } else {
            assert!(
                !answer.is_empty(),
                "recording rule {name} returns nothing: {query}"
            );
            recorded.push(name);
        }
    }
    assert_eq!(
        alerts_seen,
        want.keys().map(|k| k.to_string()).collect::<BTreeSet<_>>()
    );
    assert_eq!(recorded.len(), 6, "{recorded:?}");
    // The recorded series themselves, once evaluated, and what they say.
    for name in &recorded {
        prom.wait_for(name, name, Duration::from_secs(5), |s| !s.is_empty())
            .await;
    }
    // The rules are evaluated every second: wait for an evaluation that
    // has the last scrape of the failed rescue in it.
    let query = format!(
        "instance_upstream_protocol:nginx_generation_retry_rescued_per_busy:ratio_rate5m\
         {{instance=\"{nginx}\"}}"
    );
    let be_failed_seen = |series: &[Series]| {
        series
            .iter()
            .any(|s| subject(&s.labels, nginx) == "be/http" && s.value() < 1.0)
    };
    let mut ratio = BTreeMap::new();
    for s in prom
        .wait_for(
            "the share rescued with be's failed rescue in it",
            &query,
            Duration::from_secs(10),
            be_failed_seen,
        )
        .await
    {
        ratio.insert(subject(&s.labels, nginx), s.value());
    }
    // Only where there were busy selections: be rescued all but one, obs
    // none.
    assert_eq!(
        ratio.keys().map(String::as_str).collect::<Vec<_>>(),
        ["be/http", "obs/http"],
        "{ratio:?}"
    );
    let be_ratio = ratio["be/http"];
    assert!(
        be_ratio > 0.5 && be_ratio < 1.0,
        "be's share rescued {be_ratio}"
    );
    assert_eq!(ratio["obs/http"], 0.0, "obs rescues nothing");
}
