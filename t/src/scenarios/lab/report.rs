//! What an arm measured ([`ArmResult`]), and the run's table, CSV, JSON
//! and chart of it.

use std::fmt::Write as _;
use std::time::Duration;

use serde_json::{json, Value};

/// What one arm measured.
#[derive(Clone, Debug, Default)]
pub struct ArmResult {
    pub arm: String,
    pub requests: usize,
    /// Requests (sessions) of the load found in nginx's log: fewer than
    /// `requests` means the tallies below miss some.
    pub logged: usize,
    /// GETs (and stream sessions) whose answer was not the one asked for,
    /// whatever the reason.
    pub retryable_failed: usize,
    pub status_502: usize,
    pub two_hop_502: usize,
    pub one_hop_502: usize,
    pub other_errors: usize,
    pub first_attempt_failures: usize,
    /// Configuration reloads nginx carried out (error.log `reconfiguring`).
    pub reloads: usize,
    pub swaps: usize,
    /// Milliseconds from the last swap to each no-live 502.
    pub ms_after_swap: Vec<f64>,
    pub rescued: Option<u64>,
    /// Rescues logged in error.log (one `warn` line each, by every worker
    /// of every configuration): with counters that survive reloads, equal
    /// to `rescued`.
    pub rescued_logged: usize,
    pub busy: Option<u64>,
    /// Generation-busy selections that ended failed (module arms).
    pub failed: Option<u64>,
    /// no_live by cause (generation, unavailable, empty), module arms.
    pub no_live: Option<[u64; 3]>,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub post_sent: usize,
    pub post_delivered: usize,
    pub post_received_twice: usize,
    /// Seconds from the arm's start: swaps, and no-live 502s.
    pub swap_times: Vec<f64>,
    pub failure_times: Vec<f64>,
    /// nginx's logs of the run, whole (HTTP arms; empty for stream).
    pub logs: Logs,
}

/// An arm's nginx logs as written: the access log (in
/// [`crate::scoring::accesslog::log_format`]) and the error log, readiness probes
/// included. Debug-printed as their sizes.
#[derive(Clone, Default)]
pub struct Logs {
    pub access: String,
    pub error: String,
    /// `nginx -T` of the arm's configuration.
    pub conf: String,
}

impl std::fmt::Debug for Logs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Logs {{ access: {} bytes, error: {} bytes }}",
            self.access.len(),
            self.error.len()
        )
    }
}

impl ArmResult {
    pub fn to_json(&self) -> Value {
        let (min, max) = min_max(&self.ms_after_swap);
        json!({
            "arm": self.arm,
            "requests": self.requests,
            "logged": self.logged,
            "retryable_failed": self.retryable_failed,
            "status_502": self.status_502,
            "two_hop_502": self.two_hop_502,
            "one_hop_502": self.one_hop_502,
            "other_errors": self.other_errors,
            "first_attempt_failures": self.first_attempt_failures,
            "swaps": self.swaps,
            "ms_after_swap_min": min,
            "ms_after_swap_max": max,
            "rescued": self.rescued,
            "busy": self.busy,
            "failed": self.failed,
            "no_live_generation": self.no_live.map(|n| n[0]),
            "no_live_unavailable": self.no_live.map(|n| n[1]),
            "no_live_empty": self.no_live.map(|n| n[2]),
            "p50_ms": round2(self.p50_ms),
            "p99_ms": round2(self.p99_ms),
            "post_sent": self.post_sent,
            "post_delivered": self.post_delivered,
            "post_received_twice": self.post_received_twice,
            "swap_times_s": self.swap_times.iter().map(|t| round2(*t)).collect::<Vec<_>>(),
            "failure_times_s": self.failure_times.iter().map(|t| round2(*t)).collect::<Vec<_>>(),
        })
    }
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

fn min_max(v: &[f64]) -> (Option<f64>, Option<f64>) {
    let min = v.iter().copied().reduce(f64::min).map(round2);
    let max = v.iter().copied().reduce(f64::max).map(round2);
    (min, max)
}

/// The table printed at the end of a run.
pub fn render_table(results: &[ArmResult]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<26} {:>8} {:>6} {:>6} {:>6} {:>6} {:>8} {:>6} {:>13} {:>8} {:>6} {:>12} {:>8} {:>8} {:>9}",
        "arm", "requests", "502", "2-hop", "1-hop", "other", "1st-fail", "swaps",
        "ms after swap", "rescued", "busy", "no-live g/u/e", "p50 ms", "p99 ms", "POST d/s"
    );
    for r in results {
        let (min, max) = min_max(&r.ms_after_swap);
        let after = match (min, max) {
            (Some(a), Some(b)) => format!("{a:.0}-{b:.0}"),
            _ => "-".into(),
        };
        let opt = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
        let _ = writeln!(
            out,
            "{:<26} {:>8} {:>6} {:>6} {:>6} {:>6} {:>8} {:>6} {:>13} {:>8} {:>6} {:>12} {:>8.1} {:>8.1} {:>9}",
            r.arm,
            r.requests,
            r.status_502,
            r.two_hop_502,
            r.one_hop_502,
            r.other_errors,
            r.first_attempt_failures,
            r.swaps,
            after,
            opt(r.rescued),
            opt(r.busy),
            r.no_live
                .map_or("-".to_string(), |n| format!("{}/{}/{}", n[0], n[1], n[2])),
            r.p50_ms,
            r.p99_ms,
            format!("{}/{}", r.post_delivered, r.post_sent),
        );
    }
    out
}

pub fn render_csv(results: &[ArmResult]) -> String {
    let cols = [
        "arm",
        "requests",
        "status_502",
        "two_hop_502",
        "one_hop_502",
        "other_errors",
        "first_attempt_failures",
        "swaps",
        "ms_after_swap_min",
        "ms_after_swap_max",
        "rescued",
        "busy",
        "no_live_generation",
        "no_live_unavailable",
        "no_live_empty",
        "p50_ms",
        "p99_ms",
        "post_sent",
        "post_delivered",
        "post_received_twice",
    ];
    let mut out = cols.join(",") + "\n";
    for r in results {
        let v = r.to_json();
        let row: Vec<String> = cols
            .iter()
            .map(|c| match &v[*c] {
                Value::Null => String::new(),
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect();
        out.push_str(&row.join(","));
        out.push('\n');
    }
    out
}

/// An SVG with, per arm, a histogram of no-live 502s by time since the last
/// swap (100 ms bins) and a timeline of swaps (ticks) and 502s (dots).
pub fn render_svg(results: &[ArmResult], duration: Duration) -> String {
    let row_h = 70.0;
    let (hist_x, hist_w) = (200.0, 300.0);
    let (tl_x, tl_w) = (580.0, 560.0);
    let height = 60.0 + row_h * results.len() as f64;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"1160\" height=\"{height}\" \
         font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{hist_x}\" y=\"20\">no-live 502s by ms after the last swap</text>\n\
         <text x=\"{hist_x}\" y=\"34\" font-size=\"10\">0-2000 ms, 100 ms bins, each row to its own scale</text>\n\
         <text x=\"{tl_x}\" y=\"20\">timeline: swaps (grey) and no-live 502s (red), 0-{}s</text>\n",
        duration.as_secs()
    );
    let bins = 20usize;
    for (i, r) in results.iter().enumerate() {
        let peak = histogram(&r.ms_after_swap, bins)
            .into_iter()
            .max()
            .unwrap_or(0);
        let max_bin = peak.max(1);
        let y0 = 40.0 + row_h * i as f64;
        let base = y0 + row_h - 15.0;
        let _ = writeln!(
            s,
            "<text x=\"10\" y=\"{}\">{} ({} no-live)</text>",
            y0 + 30.0,
            r.arm,
            r.failure_times.len()
        );
        let _ = writeln!(
            s,
            "<text x=\"{}\" y=\"{}\" font-size=\"10\">max {peak}/bin</text>",
            hist_x + hist_w + 4.0,
            y0 + 20.0
        );
        let _ = writeln!(
            s,
            "<line x1=\"{hist_x}\" y1=\"{base}\" x2=\"{}\" y2=\"{base}\" stroke=\"black\"/>",
            hist_x + hist_w
        );
        let bw = hist_w / bins as f64;
        for (b, n) in histogram(&r.ms_after_swap, bins).into_iter().enumerate() {
            if n == 0 {
                continue;
            }
            let h = (row_h - 25.0) * n as f64 / max_bin as f64;
            let _ = writeln!(
                s,
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{h:.1}\" fill=\"steelblue\"><title>{}-{} ms: {n}</title></rect>",
                hist_x + bw * b as f64,
                base - h,
                bw - 1.0,
                b * 100,
                (b + 1) * 100
            );
        }
        let _ = writeln!(
            s,
            "<line x1=\"{tl_x}\" y1=\"{base}\" x2=\"{}\" y2=\"{base}\" stroke=\"black\"/>",
            tl_x + tl_w
        );
        let secs = duration.as_secs_f64().max(1.0);
        for t in &r.swap_times {
            let x = tl_x + tl_w * (t / secs).min(1.0);
            let _ = writeln!(
                s,
                "<line x1=\"{x:.1}\" y1=\"{}\" x2=\"{x:.1}\" y2=\"{base}\" stroke=\"#bbb\"/>",
                y0 + 10.0
            );
        }
        for t in &r.failure_times {
            let x = tl_x + tl_w * (t / secs).clamp(0.0, 1.0);
            let _ = writeln!(
                s,
                "<circle cx=\"{x:.1}\" cy=\"{}\" r=\"3\" fill=\"crimson\"/>",
                base - 12.0
            );
        }
    }
    s.push_str("</svg>\n");
    s
}

fn histogram(ms: &[f64], bins: usize) -> Vec<usize> {
    let mut h = vec![0; bins];
    for m in ms {
        let b = (*m / 100.0).floor();
        if b >= 0.0 && (b as usize) < bins {
            h[b as usize] += 1;
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(arm: &str, ms: &[f64]) -> ArmResult {
        ArmResult {
            arm: arm.into(),
            requests: 100,
            status_502: ms.len(),
            two_hop_502: ms.len(),
            ms_after_swap: ms.to_vec(),
            rescued: Some(3),
            swap_times: vec![1.0, 3.0],
            failure_times: vec![1.1],
            ..ArmResult::default()
        }
    }

    #[test]
    fn json_csv_table_and_svg_carry_the_numbers() {
        let rs = [result("stock", &[12.0, 486.0]), result("module-on", &[])];
        let j = rs[0].to_json();
        assert_eq!(j["two_hop_502"], 2);
        assert_eq!(j["ms_after_swap_min"], 12.0);
        assert_eq!(j["ms_after_swap_max"], 486.0);
        assert_eq!(rs[1].to_json()["ms_after_swap_min"], Value::Null);
        let csv = render_csv(&rs);
        assert_eq!(csv.lines().count(), 3);
        assert!(csv.lines().nth(1).unwrap().starts_with("stock,100,2,2,"));
        let table = render_table(&rs);
        assert!(table.contains("12-486"));
        let svg = render_svg(&rs, Duration::from_secs(10));
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("fill=\"steelblue\"").count(), 2);
        assert_eq!(histogram(&[0.0, 99.9, 100.0, 5000.0], 20)[..2], [2, 1]);
    }
}
