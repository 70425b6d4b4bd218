//! What the Prometheus tests share: the odd upstream names, the job and
//! the runbooks' address, the series per upstream, `promtool check
//! metrics`, the runbook sections of docs/monitoring.md, and the server's
//! prometheus.yml.

use std::collections::BTreeSet;

use generation_retry_t::actors::prometheus::{contrib, promtool, repository_file};
use generation_retry_t::scoring::metrics::FAMILIES;

/// Upstream names nginx.conf can spell, as written there (a quoted string,
/// with nginx's escapes) and as nginx reads them: every character the text
/// format must escape in a label value (`\`, `"`, newline), characters it
/// must not (tab, braces, `=`, `,`, `#`), and non-ASCII.
pub(crate) const ODD_NAMES: &[(&str, &str)] = &[
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
pub(crate) const JOB: &str = "nginx-generation-retry";

/// Where this Prometheus says the runbooks are (the external label
/// `generation_retry_runbooks`, which every alert's runbook_url starts
/// with).
pub(crate) const RUNBOOKS: &str = "https://runbooks.test/ops/generation-retry/docs/monitoring.md";

/// Series each upstream has on the status page (a labelled family has one
/// per label value).
pub(crate) fn series_per_upstream() -> usize {
    FAMILIES.iter().map(|f| f.series.len()).sum()
}

/// `promtool check metrics` on `body`: it must pass and say nothing.
pub(crate) fn promtool_accepts(body: &str, what: &str) {
    let said = promtool(&["check", "metrics"], body);
    assert!(
        said.ok && said.stdout.trim().is_empty() && said.stderr.trim().is_empty(),
        "promtool check metrics rejects {what}: {said:?}"
    );
}

/// The anchors of docs/monitoring.md's headings, as GitHub makes them.
pub(crate) fn doc_anchors() -> BTreeSet<String> {
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

/// prometheus.yml: every second, the status endpoints of `targets` as
/// docs/monitoring.md says (one job, one target per nginx), the rules of
/// contrib/prometheus loaded.
pub(crate) fn prometheus_config(targets: &[&str]) -> String {
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
