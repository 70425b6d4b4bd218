//! The Grafana dashboard over the lab's data in the real server: its
//! variables, and every panel's expression with the lab's values and with
//! "All", parse and return data.

use std::collections::BTreeSet;
use std::fs;

use generation_retry_t::actors::prometheus::{contrib, Server};
use serde_json::Value;

/// A regular expression matching exactly `s` (RE2 metacharacters escaped),
/// as it goes inside a PromQL string (each backslash doubled), as Grafana
/// interpolates a variable into `label=~"$var"`.
fn regex_of(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            let meta = "\\.+*?()|[]{}^$".contains(c);
            let escape: &[char] = if meta { &['\\', '\\'] } else { &[] };
            escape.iter().copied().chain(std::iter::once(c))
        })
        .collect()
}

/// The dashboard's template variables and built-ins replaced: `vars`
/// gives `$instance`, `$upstream`, `$protocol`; the built-ins get windows
/// that hold the lab's data.
fn substitute(expr: &str, vars: &[(&str, &str)]) -> String {
    let mut out = expr.to_string();
    let builtins = [
        ("$__rate_interval", "30s"),
        ("$__interval", "5s"),
        ("$__range", "5m"),
    ];
    for (k, v) in builtins {
        out = out.replace(k, v);
    }
    for (k, v) in vars {
        out = out
            .replace(&format!("${{{k}}}"), v)
            .replace(&format!("${k}"), v);
    }
    assert!(
        !out.contains('$'),
        "a variable the test does not know in {expr}"
    );
    out
}

/// Every `expr` under `targets` of every panel (rows' panels included).
fn dashboard_exprs(panels: &Value, out: &mut Vec<(String, String)>) {
    for p in panels.as_array().into_iter().flatten() {
        let title = p["title"].as_str().unwrap_or_default().to_string();
        for t in p["targets"].as_array().into_iter().flatten() {
            if let Some(e) = t["expr"].as_str() {
                out.push((title.clone(), e.to_string()));
            }
        }
        dashboard_exprs(&p["panels"], out);
    }
}

/// The dashboard over the lab's data: its variables, and every panel's
/// expression with the lab's values (`nginx`, `be`, `http`) and with
/// "All", parse and return data. Returns how many expressions it has.
pub(crate) async fn check_dashboard(prom: &Server, nginx: &str) -> usize {
    let dashboard: Value = serde_json::from_str(
        &fs::read_to_string(contrib("grafana/generation-retry.json")).expect("dashboard"),
    )
    .expect("dashboard JSON");
    let variables = dashboard["templating"]["list"]
        .as_array()
        .expect("variables");
    let names: BTreeSet<&str> = variables
        .iter()
        .filter_map(|v| v["name"].as_str())
        .collect();
    for v in ["datasource", "instance", "upstream", "protocol"] {
        assert!(names.contains(v), "no variable {v}: {names:?}");
    }
    let instance_re = regex_of(nginx);
    let specific = [
        ("instance", instance_re.as_str()),
        ("upstream", "be"),
        ("protocol", "http"),
    ];
    let all = [("instance", ".*"), ("upstream", ".*"), ("protocol", ".*")];
    for v in variables.iter().filter(|v| v["type"] == "query") {
        let definition = v["definition"].as_str().expect("definition");
        let (query, label) = definition
            .strip_prefix("label_values(")
            .and_then(|d| d.strip_suffix(')'))
            .and_then(|d| d.rsplit_once(", "))
            .unwrap_or_else(|| panic!("not label_values(QUERY, LABEL): {definition}"));
        assert_eq!(v["allValue"], ".*", "{definition}");
        let answer = prom.must(&substitute(query, &all), None).await;
        let values: BTreeSet<&str> = answer.iter().map(|s| s.label(label)).collect();
        let must_have = match label {
            "instance" => nginx,
            "upstream" => "be",
            _ => "http",
        };
        assert!(values.contains(must_have), "{definition}: {values:?}");
        assert!(
            !values.contains(""),
            "{definition}: a series without {label}"
        );
    }
    let mut exprs = Vec::new();
    dashboard_exprs(&dashboard["panels"], &mut exprs);
    assert!(exprs.len() >= 12, "{} expressions", exprs.len());
    for (title, expr) in &exprs {
        for vars in [&specific, &all] {
            let q = substitute(expr, vars);
            let answer = prom
                .query(&q, None)
                .await
                .unwrap_or_else(|e| panic!("panel {title:?}: {e}"));
            assert!(!answer.is_empty(), "panel {title:?} returns nothing: {q}");
        }
    }
    exprs.len()
}
