//! The module's error-log lines. They are a contract with operators (who
//! grep them) and with the tests (which look for them), so both the module
//! and `t/` build them here.

use crate::metrics::{NoLiveCause, Protocol};
use crate::rescue::{Failure, Fault};

/// Every line the module logs starts with this, but the configuration
/// warning of [`no_zone`], which names the directive as nginx's own do.
pub const MARKER: &str = "generation_retry: ";

/// The debug-level line of each selection, before its number (debug lines
/// show with `error_log ... debug` on an nginx built `--with-debug`):
/// `generation_retry: get peer, selection 2: Rescued { .. }`. The init,
/// inner get, re-snapshot and free lines start with [`MARKER`].
pub const TRACE_GET: &str = "generation_retry: get peer, selection ";

/// After the upstream's name in a rescue line.
const CHANGED: &str = " peer list changed (generation ";

/// The level of a rescue line, as nginx writes it: `info`, the level nginx
/// gives per-request events that need no action (and the core patches
/// their re-snapshot); a rescued request succeeded, `rescued_total` counts
/// it.
pub const RESCUE_LEVEL: &str = "[info]";

/// The start of a rescue line ([`RESCUE_LEVEL`]):
/// `generation_retry: upstream "be" peer list changed`.
pub fn rescued_marker(protocol: Protocol, upstream: &str) -> String {
    format!(
        "{MARKER}{}upstream \"{upstream}\"{}",
        protocol.log_prefix(),
        CHANGED.trim_end_matches(" (generation ")
    )
}

/// A rescue: `... peer list changed (generation 3 -> 4), selected
/// 127.0.0.2:8080 on a fresh snapshot`.
pub fn rescued(protocol: Protocol, upstream: &str, from: usize, to: usize, peer: &str) -> String {
    format!(
        "{MARKER}{}upstream \"{upstream}\"{CHANGED}{from} -> {to}), \
         selected {peer} on a fresh snapshot",
        protocol.log_prefix()
    )
}

/// Whether an error-log line is a rescue line, of any upstream.
pub fn is_rescue_line(line: &str) -> bool {
    line.contains(RESCUE_LEVEL) && line.contains(MARKER) && line.contains(CHANGED)
}

/// The start of a `no live upstreams` line (`[error]`) of a given cause:
/// `generation_retry: upstream "be": cause=empty`.
pub fn no_live_marker(protocol: Protocol, upstream: &str, cause: NoLiveCause) -> String {
    format!("{}{}", no_live_prefix(protocol, upstream), cause.label())
}

/// `generation_retry: upstream "be": cause=`, whatever the cause.
pub fn no_live_prefix(protocol: Protocol, upstream: &str) -> String {
    format!(
        "{MARKER}{}upstream \"{upstream}\": cause=",
        protocol.log_prefix()
    )
}

/// A selection that ended in `no live upstreams`, with why.
pub fn no_live(protocol: Protocol, upstream: &str, cause: NoLiveCause, why: Failure) -> String {
    let marker = no_live_marker(protocol, upstream, cause);
    match why {
        Failure::NotGeneration => marker,
        Failure::Observed { from, to } => {
            format!("{marker}, generation {from} -> {to}, observe only")
        }
        Failure::FreshListRefused { at } => {
            format!("{marker}, after re-snapshot at generation {at}")
        }
        Failure::StillMoving { max } => {
            format!("{marker}, generation still moving after {max} re-snapshots (max={max})")
        }
        Failure::AllTried { at } => {
            format!(
                "{marker}, every peer at generation {at} has an address this request already tried"
            )
        }
    }
}

/// A generation-busy selection whose re-snapshot met an error (`[error]`);
/// nginx answers it as it answers the balancer's own error (500), and
/// logs no `no live upstreams`.
pub fn errored(protocol: Protocol, upstream: &str, fault: Fault) -> String {
    let what = match fault {
        Fault::ReinitFailed => "re-snapshot failed: the balancer's peer.init returned an error",
        Fault::FreshSelectError => "the selection on the fresh snapshot returned an error",
    };
    format!(
        "{MARKER}{}upstream \"{upstream}\": {what}",
        protocol.log_prefix()
    )
}

/// `[warn]`: a refusal or a failed attempt of a request on the wrapper's
/// lean path that could not be taken to its full state (`why`), so this
/// request goes on as without the module. Not expected with nginx's own
/// modules.
pub fn unexamined(protocol: Protocol, upstream: &str, why: &str) -> String {
    format!(
        "{MARKER}{}upstream \"{upstream}\": this request goes on as without the module: {why}",
        protocol.log_prefix()
    )
}

/// `[warn]` at configuration: the directive in an upstream without `zone`.
pub fn no_zone(
    directive: &str,
    protocol: Protocol,
    upstream: &str,
    file: &str,
    line: usize,
) -> String {
    format!(
        "\"{directive}\" has no effect in {}upstream \"{upstream}\" without \"zone\": \
         there is no peer-list generation to follow in {file}:{line}",
        protocol.log_prefix()
    )
}

/// `[warn]` at configuration: the directive at `http` or `stream` level,
/// where no upstream takes it (the ones with a `zone` all have their own).
pub fn top_level_unused(directive: &str, protocol: Protocol, file: &str, line: usize) -> String {
    format!(
        "\"{directive}\" has no effect at {} level: no upstream without its own \
         \"{directive}\" has \"zone\" in {file}:{line}",
        protocol.label()
    )
}

/// `[emerg]` at configuration: the status handler and another content
/// handler in one location, where only one could answer.
pub fn status_conflict(directive: &str, location: &str) -> String {
    format!(
        "\"{directive}\" and another content handler (such as \"proxy_pass\") \
         in location \"{location}\": only one can answer"
    )
}

/// `[warn]` at configuration: the counters zone has no slot left.
pub fn zone_full(
    zone: &str,
    bytes: usize,
    slots: usize,
    protocol: Protocol,
    upstream: &str,
) -> String {
    format!(
        "{MARKER}shared zone \"{zone}\" ({} MiB) is full with the counters of {slots} \
         upstreams; {} upstream \"{upstream}\" is still rescued but not counted: \
         counters of upstreams no longer configured are freed at a reload once the workers \
         of older configurations have exited",
        bytes >> 20,
        protocol.label()
    )
}

/// `notice`, at each start and reload: how many upstreams the zone holds
/// counters for (this configuration's and those older workers may still
/// count into) and how many it freed.
pub fn zone_usage(zone: &str, configuration: u64, upstreams: usize, freed: usize) -> String {
    format!(
        "{MARKER}shared zone \"{zone}\", configuration {configuration}: counters of \
         {upstreams} upstreams, {freed} freed"
    )
}

/// At a reload, when `unknown` live children of the master have not
/// recorded their configuration in the zone (`notice` when they were just
/// forked, `warn` when the table of `capacity` entries is full): counters
/// of removed upstreams are not freed at this reload.
pub fn zone_workers_unknown(zone: &str, unknown: usize, capacity: usize) -> String {
    let (processes, after) = if unknown == 1 {
        ("process has not recorded its", "it has")
    } else {
        ("processes have not recorded their", "they have")
    };
    format!(
        "{MARKER}shared zone \"{zone}\": {unknown} {processes} configuration (the table \
         holds {capacity}); counters of upstreams no longer configured are kept until a \
         reload after {after}"
    )
}

/// `[emerg]`: the counters did not fit in the module's zone. The zone is
/// sized from the page size and nginx's slab structures
/// ([`crate::zone::SlabLayout`]), so this means nginx laid its slab pool out
/// in a way the module does not know.
pub fn zone_too_small(zone: &str, size: usize, payload: usize, page: usize) -> String {
    format!(
        "{MARKER}shared zone \"{zone}\" of {size} bytes cannot hold the counters \
         ({payload} bytes on {page}-byte pages); the module sized it for this nginx's \
         slab layout and it does not match: please report it with \"nginx -V\" \
         and \"getconf PAGESIZE\""
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::directive::DIRECTIVE;

    /// Every line, with the examples of docs/metrics.md ("Error-log lines"),
    /// as the module wrote it before these functions existed: the text is a
    /// contract with operators' greps, pinned here and in the docs.
    fn every_line() -> Vec<String> {
        let be = |cause, why| no_live(Protocol::Http, "be", cause, why);
        vec![
            rescued(Protocol::Http, "be", 5, 6, "127.0.0.3:8080"),
            be(
                NoLiveCause::Generation,
                Failure::Observed { from: 5, to: 6 },
            ),
            be(NoLiveCause::Generation, Failure::StillMoving { max: 2 }),
            errored(Protocol::Http, "be", Fault::ReinitFailed),
            errored(Protocol::Http, "be", Fault::FreshSelectError),
            unexamined(Protocol::Http, "be", "the request pool is exhausted"),
            be(
                NoLiveCause::Unavailable,
                Failure::FreshListRefused { at: 6 },
            ),
            be(NoLiveCause::Unavailable, Failure::AllTried { at: 6 }),
            be(NoLiveCause::Unavailable, Failure::NotGeneration),
            be(NoLiveCause::Empty, Failure::NotGeneration),
            no_zone(DIRECTIVE, Protocol::Http, "NAME", "FILE", 0).replace(":0", ":LINE"),
            top_level_unused(DIRECTIVE, Protocol::Http, "FILE", 0).replace(":0", ":LINE"),
            format!(
                "{} in FILE:LINE",
                crate::directive::warning(
                    &["off", "max=3"],
                    crate::directive::Resnapshot {
                        enabled: false,
                        max: 3
                    }
                )
                .unwrap()
            ),
            status_conflict(crate::directive::STATUS_DIRECTIVE, "/status"),
            zone_full(
                "generation_retry",
                32 << 20,
                250_000,
                Protocol::Http,
                "NAME",
            ),
            zone_workers_unknown("generation_retry", 2, 1024),
            zone_usage("generation_retry", 7, 120, 40),
            zone_too_small("generation_retry", 65_536, 16_416, 65_536),
        ]
    }

    #[test]
    fn the_lines_are_pinned() {
        assert_eq!(
            every_line(),
            [
                "generation_retry: upstream \"be\" peer list changed (generation 5 -> 6), \
                 selected 127.0.0.3:8080 on a fresh snapshot",
                "generation_retry: upstream \"be\": cause=generation, generation 5 -> 6, observe only",
                "generation_retry: upstream \"be\": cause=generation, \
                 generation still moving after 2 re-snapshots (max=2)",
                "generation_retry: upstream \"be\": re-snapshot failed: \
                 the balancer's peer.init returned an error",
                "generation_retry: upstream \"be\": \
                 the selection on the fresh snapshot returned an error",
                "generation_retry: upstream \"be\": this request goes on as without the module: \
                 the request pool is exhausted",
                "generation_retry: upstream \"be\": cause=unavailable, after re-snapshot at generation 6",
                "generation_retry: upstream \"be\": cause=unavailable, \
                 every peer at generation 6 has an address this request already tried",
                "generation_retry: upstream \"be\": cause=unavailable",
                "generation_retry: upstream \"be\": cause=empty",
                "\"generation_retry_resnapshot\" has no effect in upstream \"NAME\" without \"zone\": \
                 there is no peer-list generation to follow in FILE:LINE",
                "\"generation_retry_resnapshot\" has no effect at http level: no upstream without \
                 its own \"generation_retry_resnapshot\" has \"zone\" in FILE:LINE",
                "\"max=3\" has no effect with \"off\" in \"generation_retry_resnapshot\" directive, \
                 \"off\" never re-snapshots in FILE:LINE",
                "\"generation_retry_status\" and another content handler (such as \"proxy_pass\") \
                 in location \"/status\": only one can answer",
                "generation_retry: shared zone \"generation_retry\" (32 MiB) is full with the \
                 counters of 250000 upstreams; http upstream \"NAME\" is still rescued but not \
                 counted: counters of upstreams no longer configured are freed at a reload once \
                 the workers of older configurations have exited",
                "generation_retry: shared zone \"generation_retry\": 2 processes have not recorded \
                 their configuration (the table holds 1024); counters of upstreams no longer \
                 configured are kept until a reload after they have",
                "generation_retry: shared zone \"generation_retry\", configuration 7: counters \
                 of 120 upstreams, 40 freed",
                "generation_retry: shared zone \"generation_retry\" of 65536 bytes cannot hold \
                 the counters (16416 bytes on 65536-byte pages); the module sized it for this \
                 nginx's slab layout and it does not match: please report it with \"nginx -V\" \
                 and \"getconf PAGESIZE\"",
            ]
        );
    }

    /// One process is one (the first reload of a module in a running
    /// nginx said "1 processes have not recorded their configuration").
    #[test]
    fn one_unrecorded_process_is_said_in_the_singular() {
        let line = zone_workers_unknown("z", 1, 8);
        assert!(
            line.contains(": 1 process has not recorded its configuration (")
                && line.ends_with("kept until a reload after it has"),
            "{line}"
        );
    }

    #[test]
    fn the_docs_show_every_line_as_written() {
        let docs = include_str!("../../../docs/metrics.md");
        for line in every_line() {
            assert!(
                docs.contains(&format!("`{line}`")),
                "docs/metrics.md lacks `{line}`"
            );
        }
    }

    /// The rescue line's level is one truth: the module writes it at
    /// `info` (module/src/peer.rs), as docs/metrics.md's table says, and
    /// docs/directives.md's example must say so too (it said `warn`).
    #[test]
    fn the_docs_give_the_rescue_line_its_level() {
        let line = rescued(Protocol::Http, "app", 5, 6, "10.0.0.7:8080");
        let directives = include_str!("../../../docs/directives.md");
        let shown: Vec<&str> = directives.lines().filter(|l| l.contains(&line)).collect();
        assert!(!shown.is_empty(), "docs/directives.md lacks `{line}`");
        for l in shown {
            assert!(l.trim_start().starts_with("[info] "), "{l}");
        }
        let rescued = rescued(Protocol::Http, "be", 5, 6, "127.0.0.3:8080");
        let metrics = include_str!("../../../docs/metrics.md");
        let row = metrics.lines().find(|l| l.contains(&rescued)).unwrap();
        assert!(row.starts_with("| `info` |"), "{row}");
    }

    #[test]
    fn markers_start_their_lines() {
        let rescued = rescued(Protocol::Stream, "be0", 3, 4, "127.0.0.2:9000");
        assert_eq!(
            rescued,
            "generation_retry: stream upstream \"be0\" peer list changed (generation 3 -> 4), \
             selected 127.0.0.2:9000 on a fresh snapshot"
        );
        assert!(rescued.starts_with(&rescued_marker(Protocol::Stream, "be0")));
        let logged = format!("2026/12/01 07:00:00 [info] 1#1: *3 {rescued} while connecting");
        assert!(is_rescue_line(&logged));
        assert!(!is_rescue_line(&logged.replace("[info]", "[warn]")));
        for cause in NoLiveCause::ALL {
            for why in [
                Failure::NotGeneration,
                Failure::Observed { from: 1, to: 2 },
                Failure::FreshListRefused { at: 2 },
                Failure::StillMoving { max: 2 },
                Failure::AllTried { at: 2 },
            ] {
                let line = no_live(Protocol::Http, "be", cause, why);
                assert!(line.starts_with(&no_live_marker(Protocol::Http, "be", cause)));
                assert!(line.starts_with(&no_live_prefix(Protocol::Http, "be")));
                assert!(line.starts_with(MARKER));
            }
        }
    }
}
