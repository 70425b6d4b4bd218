//! The status renderers over arbitrary upstream names: the Prometheus
//! text read back by a strict parser of the exposition format, the JSON
//! read back by serde_json.

use generation_retry_core::metrics::{
    render_json, render_prometheus, Counters, Protocol, UpstreamStats, FAMILIES,
};

use super::module_input::split_args;
use super::Gen;
use crate::scoring::metrics::parse_sample;
const NAME_DICT: &[&str] = &[
    "backend",
    "\\",
    "\"",
    "\\n",
    "\n",
    "}",
    "{",
    "=",
    "\",upstream=\"",
    "# HELP",
    " 1",
    "😀",
    "\u{2028}",
    "\0",
    "\\\"",
];

/// Up to five upstream names, NUL-separated; a name holds any other byte.
pub(super) fn gen_names(g: &mut Gen) -> Vec<u8> {
    let n = g.below(6);
    let mut out = Vec::new();
    for i in 0..n {
        if i > 0 {
            out.push(0);
        }
        let name = g.bytes(NAME_DICT, 5);
        out.extend(name.into_iter().filter(|&b| b != 0));
    }
    out
}

/// The stats the renderers get: names as the module gets them (bytes from
/// nginx's configuration, read lossily), counters and gauges derived from
/// the index, so the check knows them.
fn stats_of(input: &[u8]) -> Vec<UpstreamStats> {
    split_args(input)
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let mut counters = Counters::default();
            for (k, c) in counters.iter_mut().enumerate() {
                *c = (i as u64 + 1) * 1_000 + k as u64;
            }
            UpstreamStats {
                name: String::from_utf8_lossy(name).into_owned(),
                protocol: if i % 2 == 0 {
                    Protocol::Http
                } else {
                    Protocol::Stream
                },
                rescue: i % 3 != 0,
                counters,
                generation: u64::MAX - i as u64,
                peers: i as u64,
            }
        })
        .collect()
}

pub(super) fn check_prometheus(input: &[u8]) -> Result<bool, String> {
    let stats = stats_of(input);
    let text = render_prometheus(&stats);
    if !text.ends_with('\n') {
        return Err("no trailing newline".into());
    }
    let mut samples = Vec::new();
    for line in text.lines() {
        if let Some(comment) = line.strip_prefix("# ") {
            let mut w = comment.splitn(3, ' ');
            match (w.next(), w.next(), w.next()) {
                (Some("HELP"), Some(_), Some(_)) => {}
                (Some("TYPE"), Some(_), Some("counter" | "gauge")) => {}
                _ => return Err(format!("bad comment line {line:?}")),
            }
            continue;
        }
        let sample = parse_sample(line).map_err(|e| format!("{line:?}: {e}"))?;
        // Counters and gauges alike are whole numbers (`u64::MAX` too).
        sample
            .2
            .parse::<u64>()
            .map_err(|e| format!("{line:?}: {e}"))?;
        samples.push(sample);
    }
    let per_upstream: usize = FAMILIES.iter().map(|f| f.series.len()).sum();
    if samples.len() != per_upstream * stats.len() {
        return Err(format!(
            "{} samples for {} upstreams, {per_upstream} each",
            samples.len(),
            stats.len()
        ));
    }
    // Series come family by family, upstream by upstream within a family.
    let mut i = 0;
    for f in FAMILIES {
        for s in &stats {
            for _ in f.series {
                let (metric, labels, _) = &samples[i];
                i += 1;
                let upstream = labels.iter().find(|(l, _)| l == "upstream");
                if metric != f.name || upstream.map(|(_, v)| v) != Some(&s.name) {
                    return Err(format!(
                        "sample {metric} {labels:?}: expected {} for {:?}",
                        f.name, s.name
                    ));
                }
            }
        }
    }
    Ok(true)
}

pub(super) fn check_json(input: &[u8]) -> Result<bool, String> {
    let stats = stats_of(input);
    let text = render_json(&stats);
    let doc: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("not JSON ({e}): {text:?}"))?;
    let list = doc["upstreams"].as_array().ok_or("no upstreams array")?;
    if list.len() != stats.len() {
        return Err(format!(
            "{} objects for {} upstreams",
            list.len(),
            stats.len()
        ));
    }
    for (o, s) in list.iter().zip(&stats) {
        let mode = if s.rescue { "on" } else { "off" };
        if o["upstream"].as_str() != Some(s.name.as_str())
            || o["protocol"].as_str() != Some(s.protocol.label())
            || o["mode"].as_str() != Some(mode)
        {
            return Err(format!("{o} does not say {:?}/{mode}", s.name));
        }
    }
    Ok(true)
}
