//! The alert and recording rules of contrib/prometheus under promtool alone
//! (no nginx): `check rules` and `test rules` pass, every alert has a
//! firing and a silent case and a runbook section, and the unit tests
//! catch a broken rule.

use std::collections::BTreeMap;
use std::fs;

use generation_retry_t::actors::prometheus::{contrib, promtool};

use super::common::{doc_anchors, JOB};

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
