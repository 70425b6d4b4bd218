//! The two outputs: a report for people (the verdict, a table per upstream
//! and family with one example's evidence, the unparseable-line counts, the
//! verdict again) and JSON for scripts.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{json, Map, Value};

use crate::classify::{self, Family, Incident};
use crate::collect::{clip, ErrorKind, LogKind, OffsetBasis};
use crate::timefmt::format_offset;
use crate::Analysis;

/// Counts and first/last incident of one upstream and family.
struct Row<'a> {
    count: usize,
    first: &'a Incident,
    last: &'a Incident,
}

/// Per upstream, per family.
fn table(incidents: &[Incident]) -> BTreeMap<&str, BTreeMap<Family, Row<'_>>> {
    let mut out: BTreeMap<&str, BTreeMap<Family, Row<'_>>> = BTreeMap::new();
    for i in incidents {
        out.entry(i.upstream.as_str())
            .or_default()
            .entry(i.family)
            .and_modify(|r| {
                r.count += 1;
                if i.time_ms < r.first.time_ms {
                    r.first = i;
                }
                if i.time_ms >= r.last.time_ms {
                    r.last = i;
                }
            })
            .or_insert(Row {
                count: 1,
                first: i,
                last: i,
            });
    }
    out
}

/// The verdict line. Refusals of family `unknown` are counted apart: the
/// logs do not say whether they are the race, so with any of them "none"
/// says only that none was shown to be.
pub fn verdict(incidents: &[Incident]) -> String {
    let total = incidents.len();
    let count = |f: Family| incidents.iter().filter(|i| i.family == f).count();
    let two = count(Family::GenerationRetry);
    let one = count(Family::GenerationFirst);
    let unknown = count(Family::Unknown);
    let apart = format!("{unknown} unknown (their evidence is missing, see their reasons)");
    match (two + one, unknown) {
        (0, 0) => format!("none of {total} 502/504s are the generation race."),
        (0, _) => format!("none of {total} 502/504s shown to be the generation race; {apart}."),
        (race, k) => format!(
            "{race} of {total} 502/504s are the generation race (2-hop {two}, 1-hop {one}); the \
             module generation_retry, or nginx-src-patches, removes them{}.",
            if k == 0 {
                String::new()
            } else {
                format!("; {apart}")
            }
        ),
    }
}

fn addresses(list: &[String]) -> String {
    if list.is_empty() {
        "(none)".to_string()
    } else {
        list.join(" ")
    }
}

/// The report for people. Its first line is the verdict, and so is its
/// last (for `head -1` and `tail -1` alike).
pub fn human(analysis: &Analysis) -> String {
    let data = &analysis.data;
    let incidents = &analysis.incidents;
    let mut out = String::new();
    let _ = writeln!(out, "{}\n", verdict(incidents));
    let from_errors = incidents.iter().filter(|i| i.access.is_none()).count();
    let _ = writeln!(
        out,
        "generation-retry-diagnose: {} 502/504s ({} in the access log, {} from the error \
         log alone); window {} ms around each",
        incidents.len(),
        incidents.len() - from_errors,
        from_errors,
        data.options.window_ms
    );
    for (upstream, rows) in table(incidents) {
        let _ = writeln!(out, "\nupstream {upstream}");
        let _ = writeln!(
            out,
            "  {:<18} {:>6}  {:<28}  last",
            "family", "count", "first"
        );
        for (family, row) in &rows {
            let _ = writeln!(
                out,
                "  {:<18} {:>6}  {:<28}  {}",
                family.name(),
                row.count,
                row.first.time_text,
                row.last.time_text
            );
        }
        let text = |source| {
            let t = analysis.text(source).unwrap_or("(not read back)");
            clip(t, 400).to_string()
        };
        for (family, row) in &rows {
            let i = row.first;
            let _ = writeln!(out, "  example of {}: {}", family.name(), i.reason);
            if let Some(f) = i.access.and_then(|a| data.failures.get(a)) {
                let _ = writeln!(out, "    access:  {}", text(f.source));
            }
            for e in i.own_errors.iter().filter_map(|e| data.errors.get(*e)) {
                let _ = writeln!(out, "    error:   {}", text(e.source));
            }
            for e in i.nearby.iter().filter_map(|e| data.errors.get(*e)) {
                let _ = writeln!(out, "    nearby:  {}", text(e.source));
            }
            let _ = writeln!(
                out,
                "    addresses: {} -> {}",
                addresses(&i.before),
                addresses(&i.after)
            );
        }
    }
    let _ = writeln!(out, "\nunparseable lines:");
    for f in &data.files {
        let kind = match f.kind {
            LogKind::Access => "access",
            LogKind::Error => "error",
        };
        let _ = write!(out, "  {} ({kind}): {} of {}", f.name, f.unparsed, f.lines);
        if let Some((n, text)) = &f.first_unparsed {
            let _ = write!(out, ", first (line {n}): {text}");
        }
        out.push('\n');
    }
    if data.module_lines > 0 {
        let _ = writeln!(
            out,
            "ignored {} line(s) of the module generation_retry (not needed here)",
            data.module_lines
        );
    }
    for note in notes(analysis) {
        let _ = writeln!(out, "note: {note}");
    }
    let _ = writeln!(out, "\n{}", verdict(incidents));
    out
}

/// Caveats about the inputs that weaken the diagnosis.
fn notes(analysis: &Analysis) -> Vec<String> {
    let data = &analysis.data;
    let mut notes = data.notes.clone();
    let has = |k: LogKind| data.files.iter().any(|f| f.kind == k);
    if !has(LogKind::Access) {
        notes.push(
            "no access log: without it no address timeline exists and address changes \
             cannot be seen; give --access-log"
                .to_string(),
        );
    } else if data.access_entries == 0 {
        notes.push(
            "no access line matched its log_format: is it the format the log was written with?"
                .into(),
        );
    }
    if has(LogKind::Error) {
        notes.extend(offset_notes(analysis));
        let mut unattributed: BTreeMap<&str, usize> = BTreeMap::new();
        for e in &data.errors {
            if let ErrorKind::Resolver { name, .. } = e.kind {
                let name = data.strings.get(name);
                if classify::resolver_upstreams(data, name).is_empty() {
                    *unattributed.entry(name).or_default() += 1;
                }
            }
        }
        if !unattributed.is_empty() {
            let list: Vec<String> = unattributed
                .iter()
                .take(5)
                .map(|(n, c)| format!("{n} ({c})"))
                .collect();
            notes.push(format!(
                "resolver errors for {} are tied to no upstream; if an upstream has `server \
                 NAME resolve`, pass --upstream-server UPSTREAM=NAME so they count for it",
                list.join(", ")
            ));
        }
        if has(LogKind::Access) && !data.has_connection {
            notes.push(
                "the access format has no $connection: error lines are joined to access \
                 lines by request line and client, or by time"
                    .into(),
            );
        }
    }
    notes
}

/// What the report says about the error log's time zone.
fn offset_notes(analysis: &Analysis) -> Vec<String> {
    let data = &analysis.data;
    let mut notes = Vec::new();
    let applied = format_offset(data.error_offset_s);
    let zone = match data.access_offsets.len() {
        1 => data.access_offsets.first().copied(),
        _ => None,
    };
    let pairs = |p: &(i32, usize, usize)| {
        format!(
            "{} of {} `no live upstreams` lines meet their access 502 at {}",
            p.1,
            p.2,
            format_offset(p.0)
        )
    };
    match data.offset_basis {
        Some(OffsetBasis::Given) => {
            if let Some(p) = data.pairs_offset.filter(|p| p.0 != data.error_offset_s) {
                notes.push(format!(
                    "the error-log offset looks wrong: --error-log-utc-offset {applied} was \
                     given, but {}; joins and windows may miss",
                    pairs(&p)
                ));
            } else if let Some(z) = zone.filter(|z| *z != data.error_offset_s) {
                notes.push(format!(
                    "the error-log offset may be wrong: --error-log-utc-offset {applied} was \
                     given, but the access log's times are in {}; if nginx wrote both in the \
                     same zone, pass --error-log-utc-offset {}",
                    format_offset(z),
                    format_offset(z)
                ));
            }
        }
        Some(OffsetBasis::Pairs) => {
            let p = data.pairs_offset.unwrap_or((data.error_offset_s, 0, 0));
            let mut note = format!("error-log times read as {applied}, learnt: {}", pairs(&p));
            if let Some(z) = zone.filter(|z| *z != data.error_offset_s) {
                let _ = write!(
                    note,
                    " (the access log's zone is {}, which does not fit)",
                    format_offset(z)
                );
            }
            notes.push(note);
        }
        Some(OffsetBasis::AccessZone) => notes.push(format!(
            "error-log times read as {applied}, the zone of the access log's times"
        )),
        Some(OffsetBasis::Default) | None => {
            if data.access_offsets.len() > 1 {
                let zones: Vec<String> = data
                    .access_offsets
                    .iter()
                    .map(|o| format_offset(*o))
                    .collect();
                notes.push(format!(
                    "access-log times are in several zones ({}); error-log times are read as \
                     {applied}: pass --error-log-utc-offset",
                    zones.join(", ")
                ));
            } else if data.files.iter().any(|f| f.kind == LogKind::Access) {
                notes.push(format!(
                    "error-log times read as {applied}: nothing to learn their zone from (no \
                     $time_local or $time_iso8601, no `no live upstreams` line paired with its \
                     502); if the error log is in local time, pass --error-log-utc-offset"
                ));
            }
        }
    }
    notes
}

/// The JSON output.
pub fn json(analysis: &Analysis) -> Value {
    let incidents: Vec<Value> = analysis
        .incidents
        .iter()
        .map(|i| {
            json!({
                "time": i.time_text,
                "request": i.request,
                "connection": i.connection,
                "upstream": i.upstream,
                "upstream_addr": i.upstream_addr,
                "status": i.status,
                "family": i.family.name(),
                "reason": i.reason,
            })
        })
        .collect();
    let counts = |list: &mut dyn Iterator<Item = &Incident>| {
        let mut by: BTreeMap<Family, usize> = Family::ALL.iter().map(|f| (*f, 0)).collect();
        for i in list {
            *by.entry(i.family).or_default() += 1;
        }
        Value::Object(
            by.into_iter()
                .map(|(f, n)| (f.name().to_string(), json!(n)))
                .collect::<Map<String, Value>>(),
        )
    };
    let mut by_upstream = Map::new();
    for u in analysis
        .incidents
        .iter()
        .map(|i| i.upstream.as_str())
        .collect::<std::collections::BTreeSet<_>>()
    {
        by_upstream.insert(
            u.to_string(),
            counts(&mut analysis.incidents.iter().filter(|i| i.upstream == u)),
        );
    }
    let unparsed = |k: LogKind| -> u64 {
        analysis
            .data
            .files
            .iter()
            .filter(|f| f.kind == k)
            .map(|f| f.unparsed)
            .sum()
    };
    json!({
        "incidents": incidents,
        "summary": {
            "total": analysis.incidents.len(),
            "by_family": counts(&mut analysis.incidents.iter()),
            "by_upstream": Value::Object(by_upstream),
            "unparsed": {
                "access": unparsed(LogKind::Access),
                "error": unparsed(LogKind::Error),
            },
        },
        "notes": notes(analysis),
    })
}
