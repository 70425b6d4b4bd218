//! The cost of a rescue: each retry's time from the backend's close to the
//! client's answer, whether it found a cached connection, and the table
//! of plain against rescued retries.

use std::time::Duration;

use generation_retry_t::scenarios::http::Lab;
use serde_json::json;

/// One retry of the rescue-cost runs: from the backend closing the first
/// attempt's connection to the client's answer, and whether the retry's
/// attempt went out on a connection nginx had cached (a new one costs a
/// connect and an accept).
#[derive(Clone, Copy)]
pub struct Retry {
    pub ms: f64,
    pub reused: bool,
}

impl Retry {
    /// The retry of the request for `path`: the backend saw it twice, the
    /// second time on a connection that had served `index_on_conn`
    /// requests before it.
    pub fn of(lab: &Lab, path: &str, t: Duration) -> Retry {
        let seen: Vec<_> = lab
            .backend
            .seen()
            .into_iter()
            .filter(|s| s.path == path)
            .collect();
        assert_eq!(
            seen.len(),
            2,
            "{path}: expected a first attempt and a retry"
        );
        Retry {
            ms: t.as_secs_f64() * 1000.0,
            reused: seen[1].index_on_conn > 0,
        }
    }
}

/// Two requests at once to the current address, each held 20 ms: nginx
/// opens two connections and caches both, so the next failed attempt's
/// retry finds one.
pub async fn spare_connection(lab: &Lab, i: usize) {
    lab.backend.set_delay(Duration::from_millis(20));
    let (p0, p1) = (format!("/spare/{i}/0"), format!("/spare/{i}/1"));
    let (x, y) = tokio::join!(lab.client.get(&p0), lab.client.get(&p1));
    lab.backend.set_delay(Duration::ZERO);
    assert_eq!((x.status(), y.status()), (200, 200));
}

/// Median, 10th and 90th percentile of `v` (zeros when empty).
fn spread3(v: &[f64]) -> (f64, f64, f64) {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    if s.is_empty() {
        return (0.0, 0.0, 0.0);
    }
    let at = |p: f64| s[((s.len() - 1) as f64 * p).round() as usize];
    (at(0.5), at(0.1), at(0.9))
}

/// The rescue cost table: plain and rescued retries, by whether the
/// retry's attempt had a cached connection, with the ratio of the rescued
/// median to the plain one of the same kind.
pub fn rescue_report(plain: &[Retry], rescued: &[Retry]) -> serde_json::Value {
    println!(
        "\nrescue cost: close-to-answer, ms (the retry's attempt on a new or a cached connection)"
    );
    println!(
        "{:<26} {:>5} {:>8} {:>8} {:>8} {:>8}",
        "retry", "n", "median", "p10", "p90", "ratio"
    );
    let mut rows = Vec::new();
    for reused in [false, true] {
        let kind = if reused { "cached" } else { "new" };
        let ms = |v: &[Retry]| -> Vec<f64> {
            v.iter()
                .filter(|r| r.reused == reused)
                .map(|r| r.ms)
                .collect()
        };
        let (p, r) = (ms(plain), ms(rescued));
        let (pm, p10, p90) = spread3(&p);
        let (rm, r10, r90) = spread3(&r);
        let ratio = if p.is_empty() || r.is_empty() {
            None
        } else {
            Some(rm / pm)
        };
        for (name, n, (m, lo, hi), ratio) in [
            ("plain", p.len(), (pm, p10, p90), None),
            ("rescued", r.len(), (rm, r10, r90), ratio),
        ] {
            if n == 0 {
                continue;
            }
            println!(
                "{:<26} {n:>5} {m:>8.3} {lo:>8.3} {hi:>8.3} {:>8}",
                format!("{name}, {kind} connection"),
                ratio.map_or(String::new(), |x| format!("{x:.3}"))
            );
            rows.push(
                json!({"retry": name, "connection": kind, "n": n, "median_ms": m,
                             "p10_ms": lo, "p90_ms": hi, "ratio_to_plain": ratio}),
            );
        }
    }
    let all = |v: &[Retry]| v.iter().map(|r| r.ms).collect::<Vec<_>>();
    json!({"rows": rows, "plain_samples": all(plain), "rescued_samples": all(rescued),
           "plain_reused": plain.iter().map(|r| r.reused).collect::<Vec<_>>(),
           "rescued_reused": rescued.iter().map(|r| r.reused).collect::<Vec<_>>()})
}
