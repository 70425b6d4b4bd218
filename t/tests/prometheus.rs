//! The status endpoint as Prometheus sees it, with the real thing (Debian's
//! `prometheus` package: the server and `promtool`), and what
//! `contrib/prometheus` and `contrib/grafana` give an operator:
//!
//! - `promtool check metrics` accepts the exposition of hundreds of http
//!   and stream upstreams with odd names (quotes, backslashes, newlines,
//!   tabs, non-ASCII), and the names come back exactly;
//! - `promtool check rules` and `promtool test rules` pass on the alert and
//!   recording rules, every alert has a firing and a silent case, and the
//!   unit tests catch a broken rule;
//! - a real Prometheus server scrapes a short lab run every second (rescues,
//!   observe-mode failures, the other causes, a reload that removes an
//!   upstream) with the rules loaded: `increase()` of the rescues equals the
//!   module's count and the error log's rescue lines, no counter of a kept
//!   upstream resets across the reload, the removed upstream goes stale,
//!   every alert is active exactly where the lab made it true, and every
//!   expression of the rules and of the dashboard parses and returns data.
//!
//! Nothing stands in for Prometheus; without it these tests fail and say
//! what to install.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use generation_retry_t::backend::{ADDR_A, ADDR_B};
use generation_retry_t::dns::Answer;
use generation_retry_t::load::{open_loop, Client};
use generation_retry_t::metrics::{log, Counter, Protocol, StatusExt, FAMILIES};
use generation_retry_t::nginx::{free_port, Config, Flavor, Nginx};
use generation_retry_t::prometheus::{contrib, promtool, repository_file, Series, Server};
use generation_retry_t::scenario::{wait_peers, Lab, Spec, NAME};
use reqwest::Method;
use serde_json::Value;

/// Upstream names nginx.conf can spell, as written there (a quoted string,
/// with nginx's escapes) and as nginx reads them: every character the text
/// format must escape in a label value (`\`, `"`, newline), characters it
/// must not (tab, braces, `=`, `,`, `#`), and non-ASCII.
const ODD_NAMES: &[(&str, &str)] = &[
    (r#""quo\"te""#, "quo\"te"),
    (r#""back\\slash""#, "back\\slash"),
    (r#""new\nline""#, "new\nline"),
    (r#""tail\\""#, "tail\\"),
    (r#""tab\there""#, "tab\there"),
    (
        r#""x{y=\"z\"},w=1 # not a comment""#,
        "x{y=\"z\"},w=1 # not a comment",
    ),
    ("\"ünïcödé-上游-🚀\"", "ünïcödé-上游-🚀"),
    (r#""all\\\"of\nthem é""#, "all\\\"of\nthem é"),
];

/// The job name docs/monitoring.md recommends, and recording.yml names.
const JOB: &str = "nginx-generation-retry";

/// Where this Prometheus says the runbooks are (the external label
/// `generation_retry_runbooks`, which every alert's runbook_url starts
/// with).
const RUNBOOKS: &str = "https://runbooks.test/ops/generation-retry/docs/monitoring.md";

/// Series each upstream has on the status page (a labelled family has one
/// per label value).
fn series_per_upstream() -> usize {
    FAMILIES.iter().map(|f| f.series.len()).sum()
}

/// The content of a quoted label value, unescaped as the text format
/// says (`\\`, `\"`, `\n`); `None` on any other escape.
fn unescape(value: &str) -> Option<String> {
    let mut out = String::new();
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next()? {
            '\\' => out.push('\\'),
            '"' => out.push('"'),
            'n' => out.push('\n'),
            _ => return None,
        }
    }
    Some(out)
}

/// One sample line of the text format: name, labels, value.
type Sample = (String, BTreeMap<String, String>, f64);

/// Every sample of a text exposition, with its label values unescaped.
fn parse_exposition(body: &str) -> Result<Vec<Sample>, String> {
    let mut out = Vec::new();
    for line in body.lines().filter(|l| !l.starts_with('#')) {
        let (name, rest) = line
            .split_once('{')
            .ok_or_else(|| format!("no labels: {line:?}"))?;
        let mut labels = BTreeMap::new();
        let mut rest = rest;
        loop {
            let (key, after) = rest
                .split_once("=\"")
                .ok_or_else(|| format!("label: {line:?}"))?;
            // The value ends at the first quote not escaped.
            let mut end = None;
            let mut escaped = false;
            for (i, c) in after.char_indices() {
                match (escaped, c) {
                    (false, '\\') => escaped = true,
                    (false, '"') => {
                        end = Some(i);
                        break;
                    }
                    _ => escaped = false,
                }
            }
            let end = end.ok_or_else(|| format!("unterminated value: {line:?}"))?;
            let value = unescape(&after[..end]).ok_or_else(|| format!("bad escape: {line:?}"))?;
            labels.insert(key.to_string(), value);
            rest = &after[end + 1..];
            match rest.chars().next() {
                Some(',') => rest = &rest[1..],
                Some('}') => {
                    rest = &rest[1..];
                    break;
                }
                _ => return Err(format!("after a label: {line:?}")),
            }
        }
        let value: f64 = rest
            .trim()
            .parse()
            .map_err(|e| format!("value of {line:?}: {e}"))?;
        out.push((name.to_string(), labels, value));
    }
    Ok(out)
}

/// `promtool check metrics` on `body`: it must pass and say nothing.
fn promtool_accepts(body: &str, what: &str) {
    let said = promtool(&["check", "metrics"], body);
    assert!(
        said.ok && said.stdout.trim().is_empty() && said.stderr.trim().is_empty(),
        "promtool check metrics rejects {what}: {said:?}"
    );
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

/// The names of the alerts in alerts.yml (`- alert: NAME` lines).
fn alert_names() -> Vec<String> {
    let text = fs::read_to_string(contrib("prometheus/alerts.yml")).expect("alerts.yml");
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
        .map(|n| n.trim().to_string())
        .collect()
}

/// For each alert of alerts.test.yml: (cases where it fires, cases where
/// it stays silent), read from `alertname:` and the `exp_alerts` line
/// after it.
fn unit_cases() -> BTreeMap<String, (usize, usize)> {
    let text = fs::read_to_string(contrib("prometheus/alerts.test.yml")).expect("test file");
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let mut cases: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for (i, l) in lines.iter().enumerate() {
        let Some(name) = l.strip_prefix("alertname: ") else {
            continue;
        };
        let next = lines.get(i + 1).copied().unwrap_or_default();
        let entry = cases.entry(name.trim().to_string()).or_default();
        match next {
            "exp_alerts: []" => entry.1 += 1,
            "exp_alerts:" => entry.0 += 1,
            other => panic!("alertname {name} followed by {other:?}"),
        }
    }
    cases
}

/// The anchors of docs/monitoring.md's headings, as GitHub makes them.
fn doc_anchors() -> BTreeSet<String> {
    repository_file("docs/monitoring.md")
        .lines()
        .filter(|l| l.starts_with('#'))
        .map(|l| {
            l.trim_start_matches('#')
                .trim()
                .to_lowercase()
                .chars()
                .filter_map(|c| match c {
                    ' ' => Some('-'),
                    c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                    _ => None,
                })
                .collect()
        })
        .collect()
}

/// `promtool check rules` and `promtool test rules` pass on
/// contrib/prometheus; every alert has a firing and a silent unit case and
/// a runbook section; and the unit tests catch a broken rule: the
/// off-to-on term of GenerationRetryRescuesFailing removed, and every
/// alert's expression replaced by one that never fires and by one that
/// always does.
///
/// Non-regression guard: the rule files and promtool alone, no nginx.
#[test]
fn rules_pass_promtool_and_their_unit_tests() {
    let alerts = contrib("prometheus/alerts.yml");
    let recording = contrib("prometheus/recording.yml");
    let tests = contrib("prometheus/alerts.test.yml");
    let path = |p: &std::path::Path| p.display().to_string();

    let said = promtool(&["check", "rules", &path(&alerts), &path(&recording)], "");
    assert!(said.ok, "{said:?}");
    assert!(said.stdout.contains("SUCCESS: 7 rules found"), "{said:?}");
    assert!(said.stdout.contains("SUCCESS: 6 rules found"), "{said:?}");

    // The scrape job is named in one place, recording.yml's
    // nginx_generation_retry:up, which the alerts and the dashboard read.
    let selector = format!("job=\"{JOB}\"");
    let count = |rel: &str| {
        let text = fs::read_to_string(contrib(rel)).unwrap();
        text.matches(&selector).count() + text.matches(&format!("job=\\\"{JOB}\\\"")).count()
    };
    assert_eq!(
        [
            count("prometheus/alerts.yml"),
            count("prometheus/recording.yml"),
            count("grafana/generation-retry.json")
        ],
        [0, 1, 0],
        "the job selector belongs to recording.yml alone"
    );

    let said = promtool(&["test", "rules", &path(&tests)], "");
    assert!(said.ok && said.stdout.contains("SUCCESS"), "{said:?}");

    let names = alert_names();
    assert_eq!(names.len(), 7, "{names:?}");
    let cases = unit_cases();
    let anchors = doc_anchors();
    for name in &names {
        let (firing, silent) = cases.get(name).copied().unwrap_or_default();
        assert!(
            firing >= 1 && silent >= 1,
            "{name}: {firing} firing and {silent} silent cases in alerts.test.yml"
        );
        assert!(
            anchors.contains(&name.to_lowercase()),
            "docs/monitoring.md has no section {name}"
        );
    }
    let unknown: Vec<_> = cases.keys().filter(|c| !names.contains(c)).collect();
    assert!(unknown.is_empty(), "cases of no alert: {unknown:?}");

    // A copy whose RescuesFailing looks at the mode now instead of over
    // the whole window, so it takes an observe period's failures for
    // failed rescues: the unit tests must fail, naming the switch from off
    // to on.
    let dir = std::env::temp_dir().join(format!("generation-retry-rules-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    for f in [&alerts, &recording, &tests] {
        fs::copy(f, dir.join(f.file_name().unwrap())).unwrap();
    }
    let text = fs::read_to_string(&alerts).unwrap();
    let broken = text.replacen(
        "min_over_time(nginx_generation_retry_mode{mode=\"on\"}[10m])",
        "nginx_generation_retry_mode{mode=\"on\"}",
        1,
    );
    assert_ne!(
        broken, text,
        "the whole-window mode term is gone from alerts.yml"
    );
    fs::write(dir.join("alerts.yml"), broken).unwrap();
    let said = promtool(&["test", "rules", &path(&dir.join("alerts.test.yml"))], "");
    assert!(!said.ok, "the unit tests missed a broken rule: {said:?}");
    assert!(
        format!("{}{}", said.stdout, said.stderr).contains("switching from off to on"),
        "{said:?}"
    );

    // Every alert, broken both ways: an expression that never returns a
    // series (its firing cases must fail) and one that always does (its
    // silent cases must fail), each failure naming the alert.
    let mut missed = Vec::new();
    for name in &names {
        for (how, expr) in [
            ("never fires", "absent(vector(1))"),
            ("always fires", "vector(1)"),
        ] {
            fs::write(dir.join("alerts.yml"), with_expr(&text, name, expr)).unwrap();
            let said = promtool(&["test", "rules", &path(&dir.join("alerts.test.yml"))], "");
            if said.ok || !format!("{}{}", said.stdout, said.stderr).contains(name.as_str()) {
                missed.push(format!("{name} ({how}): {said:?}"));
            }
        }
    }
    let _ = fs::remove_dir_all(&dir);
    assert!(
        missed.is_empty(),
        "the unit tests missed broken alerts:\n{}",
        missed.join("\n")
    );
}

/// alerts.yml with alert `name`'s `expr:` (its line and the block under
/// it) replaced by `expr`.
fn with_expr(text: &str, name: &str, expr: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.trim() == format!("- alert: {name}"))
        .unwrap_or_else(|| panic!("no alert {name} in alerts.yml"));
    let start = at
        + 1
        + lines[at + 1..]
            .iter()
            .position(|l| l.trim_start().starts_with("expr:"))
            .unwrap_or_else(|| panic!("{name} has no expr"));
    let indent = lines[start].len() - lines[start].trim_start().len();
    let end = start
        + 1
        + lines[start + 1..]
            .iter()
            .position(|l| l.len() - l.trim_start().len() <= indent && !l.trim().is_empty())
            .unwrap_or(lines.len() - start - 1);
    let replaced = format!("{}expr: {expr}", " ".repeat(indent));
    let mut out: Vec<&str> = lines[..start].to_vec();
    out.push(&replaced);
    out.extend_from_slice(&lines[end..]);
    out.join("\n") + "\n"
}

// ---------------------------------------------------------------------
// The real server over a lab run.

/// The second re-resolving name: `upstream obs`'s.
const OBS_NAME: &str = "obs.test";

/// The lab's other http upstreams (before `upstream be`): `obs` in
/// observe mode with the same faults as `be`; `down`, whose one peer is
/// marked down (cause `unavailable`); `nx`, whose name answers NXDOMAIN
/// (cause `empty`); `gone`, removed by the reload; the odd names; and a
/// server on `empty_port` whose `/status` answers 200 with nothing (an
/// endpoint that counts no upstream).
fn http_extra(with_gone: bool, empty_port: u16) -> String {
    let odd: String = ODD_NAMES
        .iter()
        .map(|(w, _)| {
            format!(
                "upstream {w} {{ zone others 1m; server 127.0.0.5:1; \
                 generation_retry_resnapshot on; }}\n    "
            )
        })
        .collect();
    let gone = if with_gone {
        "upstream gone { zone others 1m; server 127.0.0.5:1; generation_retry_resnapshot on; }"
    } else {
        ""
    };
    format!(
        "upstream obs {{
        zone obs 128k;
        resolver ${{DNS}} valid=1s ipv6=off;
        resolver_timeout 3s;
        server {OBS_NAME}:${{BPORT}} resolve;
        keepalive 16;
        generation_retry_resnapshot off;
    }}
    upstream down {{ zone others 1m; server 127.0.0.5:1 down; generation_retry_resnapshot on; }}
    upstream nx {{
        zone nx 64k;
        resolver ${{DNS}} valid=1s ipv6=off;
        server nx.test:${{BPORT}} resolve;
        generation_retry_resnapshot on;
    }}
    {gone}
    {odd}
    server {{
        listen 127.0.0.1:{empty_port};
        location = /status {{ default_type text/plain; return 200 \"\"; }}
    }}"
    )
}

/// Locations of `be`'s server for the other upstreams.
const LOCATIONS: &str = "location /obs/ { proxy_pass http://obs; \
     proxy_http_version 1.1; proxy_set_header Connection \"\"; }
        location /down/ { proxy_pass http://down; }
        location /nx/ { proxy_pass http://nx; }";

/// The lab's stream upstreams: `be` (sharing the http one's name) and the
/// odd names, unused: their series are all there is of `protocol="stream"`.
fn stream_upstreams() -> String {
    let mut s = String::from(
        "upstream be { zone stream_be 64k; server 127.0.0.5:1; generation_retry_resnapshot on; }\n",
    );
    for (w, _) in ODD_NAMES {
        s.push_str(&format!(
            "upstream {w} {{ zone stream_odd 1m; server 127.0.0.5:1; \
             generation_retry_resnapshot off; }}\n"
        ));
    }
    s
}

/// prometheus.yml: every second, the status endpoints of `targets` as
/// docs/monitoring.md says (one job, one target per nginx), the rules of
/// contrib/prometheus loaded.
fn prometheus_config(targets: &[&str]) -> String {
    let targets: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
    format!(
        "global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
  external_labels:
    generation_retry_runbooks: {RUNBOOKS}
rule_files:
  - {alerts}
  - {recording}
scrape_configs:
  - job_name: {JOB}
    metrics_path: /status
    static_configs:
      - targets: [{targets}]
",
        alerts = contrib("prometheus/alerts.yml").display(),
        recording = contrib("prometheus/recording.yml").display(),
        targets = targets.join(", "),
    )
}

fn epoch_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// A PromQL string literal of `s` (double-quoted, Go escapes).
fn quoted(s: &str) -> String {
    serde_json::to_string(s).expect("a string")
}

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

/// The rules loaded into the server, over the lab's data: every alert
/// active exactly where the lab made it true (`nginx`'s upstreams, the
/// `empty` and `dead` targets), every rule healthy, each alert with its
/// annotations and runbook section, each expression returning data, and
/// the recorded series saying what the lab did.
async fn check_rules(prom: &Server, nginx: &str, empty: &str, dead: &str) {
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

/// The dashboard over the lab's data: its variables, and every panel's
/// expression with the lab's values (`nginx`, `be`, `http`) and with
/// "All", parse and return data. Returns how many expressions it has.
async fn check_dashboard(prom: &Server, nginx: &str) -> usize {
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
