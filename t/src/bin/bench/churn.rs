//! `bench --churn`: the churn of `generation_retry_t::scenarios::churn` for each count
//! of upstreams and variant, its table and its verdict.

use std::process::ExitCode;

use generation_retry_t::actors::backend::Wire;
use generation_retry_t::nginx::Flavor;
use generation_retry_t::scenarios::churn;
use serde_json::json;

use crate::args::Args;
use crate::measure::{median, out_dir, write_results};

/// `--churn`: for each count of upstreams, stock, the module and the
/// patched nginx (when built) under the same churn, `--rounds` times with
/// the order rotated every round; a table of each variant's medians
/// (rate, latency) and sums (502s, retries, counters) with the ratios of
/// the medians to stock's at that count. Fails when a fixing variant left
/// a generation 502 or an unrescued refusal in any run, or when stock met
/// no race at all (the run then proves nothing: more requests, or a
/// higher `--reclaim`).
pub async fn churn_bench(c: &churn::Options, a: &Args) -> ExitCode {
    let (major, minor, patch) = generation_retry_t::nginx::version();
    let variants: Vec<churn::Variant> = churn::Variant::ALL
        .into_iter()
        .filter(|v| *v != churn::Variant::Patched || Flavor::patched_available())
        .collect();
    if !Flavor::patched_available() {
        eprintln!("bench --churn: no patched nginx for this version: stock and module-on only");
    }
    eprintln!(
        "bench --churn: nginx {major}.{minor}.{patch}, {} rounds of {} requests over {:?} \
         upstreams through {:?}, {} clients, {} workers, reclaim {} (delay up to {:?}), names moved every {} s",
        a.rounds(),
        c.requests,
        a.upstreams,
        a.protocols,
        c.connections,
        c.workers,
        c.reclaim,
        c.reclaim_delay,
        c.valid + 1
    );
    let mut rows = Vec::new();
    let mut runs = Vec::new();
    let mut failures = Vec::new();
    let mut table = vec![format!(
        "{:<9} {:<10} {:>9} {:>9} {:>9} {:>6} {:>8} {:>6} {:>8} {:>6} {:>6} {:>6} {:>7} {:>6} {:>7} {:>7}",
        "protocol", "variant", "upstreams", "requests", "req/s", "ratio", "p50 ms", "ratio", "p99 ms",
        "ratio", "2-hop", "1-hop", "retried", "swaps", "busy", "rescued"
    )];
    let (wires, unspoken): (Vec<Wire>, Vec<Wire>) = a
        .protocols
        .iter()
        .partition(|w| (major, minor, patch) >= w.since());
    for w in unspoken {
        let (a, b, c) = w.since();
        eprintln!(
            "bench --churn: {} left out: nginx {a}.{b}.{c} and later speak it",
            w.name()
        );
    }
    if wires.is_empty() {
        eprintln!("bench --churn: no protocol left to run on nginx {major}.{minor}.{patch}");
        return ExitCode::FAILURE;
    }
    let runs_of = wires
        .iter()
        .flat_map(|w| a.upstreams.iter().map(move |n| (*w, *n)));
    for (wire, n) in runs_of {
        let p = wire.name();
        let opts = churn::Options {
            upstreams: n,
            wire,
            ..c.clone()
        };
        let mut got: Vec<Vec<churn::Outcome>> = variants.iter().map(|_| Vec::new()).collect();
        for round in 0..a.rounds() {
            for k in 0..variants.len() {
                let idx = (round + k) % variants.len();
                let o = churn::run(variants[idx], &opts).await;
                eprintln!(
                    "round {}/{} {p:<9} {:<10} {n:>5} upstreams {:>7.0} req/s  p50 {:.3} ms  \
                     p99 {:.3} ms  2-hop {}  1-hop {}  busy {:?}  rescued {:?}  \
                     stale-stream 502 {}",
                    round + 1,
                    a.rounds(),
                    o.variant.name(),
                    o.rps,
                    o.p50_ms,
                    o.p99_ms,
                    o.two_hop_502,
                    o.one_hop_502,
                    o.busy,
                    o.rescued,
                    o.stale_stream_502
                );
                failures.extend(o.violations());
                runs.push(o.json());
                got[idx].push(o);
            }
        }
        let med = |os: &[churn::Outcome], f: fn(&churn::Outcome) -> f64| {
            median(&os.iter().map(f).collect::<Vec<_>>())
        };
        let sum = |os: &[churn::Outcome], f: fn(&churn::Outcome) -> usize| -> usize {
            os.iter().map(f).sum()
        };
        let total = |os: &[churn::Outcome], f: fn(&churn::Outcome) -> Option<u64>| {
            os.iter().map(f).sum::<Option<u64>>()
        };
        let base = &got[0];
        let (rps0, p500, p990) = (
            med(base, |o| o.rps),
            med(base, |o| o.p50_ms),
            med(base, |o| o.p99_ms),
        );
        if sum(base, |o| o.two_hop_502 + o.one_hop_502) == 0 {
            failures.push(format!(
                "stock with {n} upstreams ({p}) met no generation 502: the run shows nothing; \
                 give it more --requests or a higher --reclaim"
            ));
        }
        // The module met the race too (its zero 502s are rescues, not luck).
        if let Some(on) = variants.iter().position(|v| *v == churn::Variant::On) {
            if got[on].iter().filter_map(|o| o.busy).sum::<u64>() == 0 {
                failures.push(format!(
                    "module-on with {n} upstreams ({p}) counted no refusal: it met no race"
                ));
            }
        }
        for (v, os) in variants.iter().zip(&got) {
            let (rps, p50, p99) = (
                med(os, |o| o.rps),
                med(os, |o| o.p50_ms),
                med(os, |o| o.p99_ms),
            );
            let (busy, rescued) = (total(os, |o| o.busy), total(os, |o| o.rescued));
            // The patched nginx has no counters: its re-selection lines.
            let rescued = rescued
                .or((*v == churn::Variant::Patched).then(|| sum(os, |o| o.rescue_lines) as u64));
            let count = |x: Option<u64>| x.map_or("-".to_string(), |x| x.to_string());
            let (two_hop, one_hop) = (sum(os, |o| o.two_hop_502), sum(os, |o| o.one_hop_502));
            table.push(format!(
                "{p:<9} {:<10} {:>9} {:>9} {:>9.0} {:>6.3} {:>8.3} {:>6.3} {:>8.3} {:>6.3} {:>6} {:>6} {:>7} {:>6} {:>7} {:>7}",
                v.name(),
                n,
                sum(os, |o| o.requests),
                rps,
                rps / rps0,
                p50,
                p50 / p500,
                p99,
                p99 / p990,
                two_hop,
                one_hop,
                sum(os, |o| o.attempt_failures),
                sum(os, |o| o.swaps),
                count(busy),
                count(rescued),
            ));
            rows.push(json!({
                "protocol": p, "variant": v.name(), "upstreams": n, "rounds": os.len(),
                "requests": sum(os, |o| o.requests),
                "rps_median": rps, "rps_ratio": rps / rps0,
                "p50_ms_median": p50, "p50_ratio": p50 / p500,
                "p99_ms_median": p99, "p99_ratio": p99 / p990,
                "two_hop_502": two_hop, "one_hop_502": one_hop,
                "stale_stream_502": sum(os, |o| o.stale_stream_502),
                "busy": busy, "rescued": rescued,
            }));
        }
    }
    println!("\n{}", table.join("\n"));
    println!(
        "\n(medians of {} rounds; 502s, retried (attempts nginx logged as failed), swaps (DNS \
         answers that moved a name), busy and rescued are sums; the patched nginx's rescued \
         column counts its re-selection lines)",
        a.rounds()
    );
    let doc = json!({
        "nginx": format!("{major}.{minor}.{patch}"), "rounds": a.rounds(),
        "requests": c.requests, "connections": c.connections,
        "workers": c.workers, "reclaim": c.reclaim,
        "reclaim_delay_ms": c.reclaim_delay.as_millis() as u64,
        "valid_s": c.valid, "rows": rows, "runs": runs, "failures": failures,
    });
    let written = write_results(&out_dir(a).join("churn.json"), &doc);
    if failures.is_empty() {
        written
    } else {
        for f in &failures {
            eprintln!("bench --churn: {f}");
        }
        ExitCode::FAILURE
    }
}
