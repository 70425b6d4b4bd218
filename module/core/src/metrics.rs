//! The counters the module keeps per upstream, and their two renderings:
//! Prometheus text exposition format 0.0.4 and JSON. The metric names are a
//! public contract (see the README).

use std::fmt::Write;

/// One per-upstream counter; the discriminant indexes [`Counters`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum Counter {
    /// Generation-busy refusal at the request's first peer selection (1-hop).
    BusyFirst,
    /// Generation-busy refusal at a retry's selection (2-hop).
    BusyRetry,
    /// Fresh snapshots taken.
    Resnapshots,
    /// Generation-busy selections that a re-snapshot turned into a peer.
    Rescued,
    /// Generation-busy selections that still ended in `no live upstreams`.
    Failed,
    /// `no live upstreams` because the generation moved (and was not rescued).
    NoLiveGeneration,
    /// `no live upstreams` with peers present but none usable (down, failed,
    /// max_fails, max_conns).
    NoLiveUnavailable,
    /// `no live upstreams` because the peer list was empty (NXDOMAIN, ...).
    NoLiveEmpty,
}

/// Number of counters per upstream.
pub const COUNTERS: usize = 8;

/// Counter values of one upstream, indexed by [`Counter`].
pub type Counters = [u64; COUNTERS];

/// Why a selection ended in `no live upstreams`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoLiveCause {
    Generation,
    Unavailable,
    Empty,
}

impl NoLiveCause {
    pub fn counter(self) -> Counter {
        match self {
            NoLiveCause::Generation => Counter::NoLiveGeneration,
            NoLiveCause::Unavailable => Counter::NoLiveUnavailable,
            NoLiveCause::Empty => Counter::NoLiveEmpty,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            NoLiveCause::Generation => "generation",
            NoLiveCause::Unavailable => "unavailable",
            NoLiveCause::Empty => "empty",
        }
    }

    /// The cause of a refused selection: the generation moved since the
    /// state was taken, or else the list (primary and backup) was empty, or
    /// else its peers were unusable.
    pub fn classify(generation_moved: bool, primary: usize, backup: usize) -> NoLiveCause {
        if generation_moved {
            NoLiveCause::Generation
        } else if primary == 0 && backup == 0 {
            NoLiveCause::Empty
        } else {
            NoLiveCause::Unavailable
        }
    }
}

/// Which nginx module the upstream belongs to: an http `upstream {}` or a
/// stream `upstream {}`. The two may share a name, so every series carries
/// it as the `protocol` label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    Http,
    Stream,
}

impl Protocol {
    pub fn label(self) -> &'static str {
        match self {
            Protocol::Http => "http",
            Protocol::Stream => "stream",
        }
    }
}

/// What the status endpoint shows for one upstream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpstreamStats {
    pub name: String,
    pub protocol: Protocol,
    /// `true` for `on`, `false` for `off` (observe only).
    pub rescue: bool,
    pub counters: Counters,
    /// Gauge: the peer list's generation now.
    pub generation: u64,
    /// Gauge: peers in the list now (primary and backup).
    pub peers: u64,
}

impl UpstreamStats {
    pub fn get(&self, c: Counter) -> u64 {
        self.counters[c as usize]
    }
}

/// `Content-Type` of the Prometheus rendering.
pub const PROMETHEUS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
/// `Content-Type` of the JSON rendering.
pub const JSON_CONTENT_TYPE: &str = "application/json";

struct Family {
    name: &'static str,
    kind: &'static str,
    help: &'static str,
    /// (extra label, counter) pairs; empty label name for none.
    series: &'static [(&'static str, &'static str, Option<Counter>)],
}

const FAMILIES: &[Family] = &[
    Family {
        name: "nginx_generation_retry_busy_total",
        kind: "counter",
        help: "Peer selections refused because the peer list's generation changed since the request took its snapshot.",
        series: &[
            ("phase", "first", Some(Counter::BusyFirst)),
            ("phase", "retry", Some(Counter::BusyRetry)),
        ],
    },
    Family {
        name: "nginx_generation_retry_resnapshots_total",
        kind: "counter",
        help: "Fresh peer-list snapshots taken after a generation-busy refusal.",
        series: &[("", "", Some(Counter::Resnapshots))],
    },
    Family {
        name: "nginx_generation_retry_rescued_total",
        kind: "counter",
        help: "Generation-busy selections that a re-snapshot turned into a peer.",
        series: &[("", "", Some(Counter::Rescued))],
    },
    Family {
        name: "nginx_generation_retry_failed_total",
        kind: "counter",
        help: "Generation-busy selections that still ended in no live upstreams.",
        series: &[("", "", Some(Counter::Failed))],
    },
    Family {
        name: "nginx_generation_retry_no_live_total",
        kind: "counter",
        help: "Selections that ended in no live upstreams, by cause.",
        series: &[
            ("cause", "generation", Some(Counter::NoLiveGeneration)),
            ("cause", "unavailable", Some(Counter::NoLiveUnavailable)),
            ("cause", "empty", Some(Counter::NoLiveEmpty)),
        ],
    },
    Family {
        name: "nginx_generation_retry_generation",
        kind: "gauge",
        help: "Current generation of the upstream's peer list.",
        series: &[("", "", None)],
    },
    Family {
        name: "nginx_generation_retry_peers",
        kind: "gauge",
        help: "Peers currently in the upstream's list, backup included.",
        series: &[("", "", None)],
    },
];

/// Escapes a label value: backslash, double quote and newline.
pub fn escape_label(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for ch in value.chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// Prometheus text format: one HELP and TYPE per metric, a series per
/// upstream (labelled `upstream` and `protocol`), a trailing newline.
pub fn render_prometheus(stats: &[UpstreamStats]) -> String {
    let mut out = String::new();
    for f in FAMILIES {
        let _ = writeln!(out, "# HELP {} {}", f.name, f.help);
        let _ = writeln!(out, "# TYPE {} {}", f.name, f.kind);
        for s in stats {
            let upstream = escape_label(&s.name);
            let protocol = s.protocol.label();
            for &(label, value, counter) in f.series {
                let v = match (counter, f.name) {
                    (Some(c), _) => s.get(c),
                    (None, "nginx_generation_retry_generation") => s.generation,
                    (None, _) => s.peers,
                };
                if label.is_empty() {
                    let _ = writeln!(
                        out,
                        "{}{{upstream=\"{upstream}\",protocol=\"{protocol}\"}} {v}",
                        f.name
                    );
                } else {
                    let _ = writeln!(
                        out,
                        "{}{{upstream=\"{upstream}\",protocol=\"{protocol}\",{label}=\"{value}\"}} {v}",
                        f.name
                    );
                }
            }
        }
    }
    out
}

/// Escapes a JSON string body.
pub fn escape_json(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for ch in value.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

/// JSON: `{"upstreams":[{...}, ...]}`, one object per upstream with the
/// same numbers as the Prometheus rendering.
pub fn render_json(stats: &[UpstreamStats]) -> String {
    let mut out = String::from("{\"upstreams\":[");
    for (i, s) in stats.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let c = |k: Counter| s.get(k);
        let _ = write!(
            out,
            "{{\"upstream\":\"{}\",\"protocol\":\"{}\",\"mode\":\"{}\",\
             \"busy\":{{\"first\":{},\"retry\":{}}},\
             \"resnapshots\":{},\"rescued\":{},\"failed\":{},\
             \"no_live\":{{\"generation\":{},\"unavailable\":{},\"empty\":{}}},\
             \"generation\":{},\"peers\":{}}}",
            escape_json(&s.name),
            s.protocol.label(),
            if s.rescue { "on" } else { "off" },
            c(Counter::BusyFirst),
            c(Counter::BusyRetry),
            c(Counter::Resnapshots),
            c(Counter::Rescued),
            c(Counter::Failed),
            c(Counter::NoLiveGeneration),
            c(Counter::NoLiveUnavailable),
            c(Counter::NoLiveEmpty),
            s.generation,
            s.peers,
        );
    }
    out.push_str("]}\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(name: &str) -> UpstreamStats {
        let mut counters = [0; COUNTERS];
        for (i, c) in counters.iter_mut().enumerate() {
            *c = i as u64 + 1;
        }
        UpstreamStats {
            name: name.into(),
            protocol: Protocol::Http,
            rescue: true,
            counters,
            generation: 6,
            peers: 1,
        }
    }

    #[test]
    fn prometheus_has_one_help_and_type_per_metric_and_all_series() {
        let other = UpstreamStats {
            protocol: Protocol::Stream,
            ..stats("other")
        };
        let text = render_prometheus(&[stats("be"), other]);
        assert!(text.ends_with('\n'));
        for f in FAMILIES {
            assert_eq!(text.matches(&format!("# HELP {} ", f.name)).count(), 1);
            assert_eq!(text.matches(&format!("# TYPE {} ", f.name)).count(), 1);
            assert!(f.kind != "counter" || f.name.ends_with("_total"));
        }
        assert!(
            text.contains("nginx_generation_retry_busy_total{upstream=\"be\",protocol=\"http\",phase=\"first\"} 1\n")
        );
        assert!(
            text.contains("nginx_generation_retry_busy_total{upstream=\"be\",protocol=\"http\",phase=\"retry\"} 2\n")
        );
        assert!(text.contains(
            "nginx_generation_retry_resnapshots_total{upstream=\"be\",protocol=\"http\"} 3\n"
        ));
        assert!(text.contains(
            "nginx_generation_retry_rescued_total{upstream=\"be\",protocol=\"http\"} 4\n"
        ));
        assert!(text.contains(
            "nginx_generation_retry_failed_total{upstream=\"be\",protocol=\"http\"} 5\n"
        ));
        assert!(text.contains(
            "nginx_generation_retry_no_live_total{upstream=\"be\",protocol=\"http\",cause=\"generation\"} 6\n"
        ));
        assert!(text.contains(
            "nginx_generation_retry_no_live_total{upstream=\"be\",protocol=\"http\",cause=\"unavailable\"} 7\n"
        ));
        assert!(text
            .contains("nginx_generation_retry_no_live_total{upstream=\"be\",protocol=\"http\",cause=\"empty\"} 8\n"));
        assert!(text.contains(
            "nginx_generation_retry_generation{upstream=\"other\",protocol=\"stream\"} 6\n"
        ));
        assert!(text
            .contains("nginx_generation_retry_peers{upstream=\"other\",protocol=\"stream\"} 1\n"));
        // Every sample line is `name{labels} value`.
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let (series, value) = line.rsplit_once(' ').unwrap();
            assert!(series.ends_with('}'), "{line}");
            value.parse::<u64>().unwrap();
        }
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape_label("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
        let text = render_prometheus(&[stats("we\"ird")]);
        assert!(text.contains("{upstream=\"we\\\"ird\",protocol=\"http\"}"));
    }

    #[test]
    fn empty_stats_still_declare_the_metrics() {
        let text = render_prometheus(&[]);
        assert_eq!(text.lines().count(), FAMILIES.len() * 2);
        assert_eq!(render_json(&[]), "{\"upstreams\":[]}\n");
    }

    #[test]
    fn json_carries_the_same_numbers() {
        let json = render_json(&[stats("be")]);
        assert_eq!(
            json,
            "{\"upstreams\":[{\"upstream\":\"be\",\"protocol\":\"http\",\"mode\":\"on\",\"busy\":{\"first\":1,\"retry\":2},\
             \"resnapshots\":3,\"rescued\":4,\"failed\":5,\
             \"no_live\":{\"generation\":6,\"unavailable\":7,\"empty\":8},\
             \"generation\":6,\"peers\":1}]}\n"
        );
        assert_eq!(escape_json("a\"\\\n\u{1}"), "a\\\"\\\\\\n\\u0001");
    }

    #[test]
    fn causes() {
        assert_eq!(NoLiveCause::classify(true, 0, 0), NoLiveCause::Generation);
        assert_eq!(NoLiveCause::classify(false, 0, 0), NoLiveCause::Empty);
        assert_eq!(NoLiveCause::classify(false, 0, 1), NoLiveCause::Unavailable);
        assert_eq!(NoLiveCause::classify(false, 2, 0), NoLiveCause::Unavailable);
        assert_eq!(NoLiveCause::Empty.counter(), Counter::NoLiveEmpty);
    }
}

/// `n` in decimal, written into `buf` without touching the heap (for the
/// access-log variable, evaluated once per logged request).
pub fn decimal(mut n: u32, buf: &mut [u8; 10]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[i..];
        }
    }
}

/// Which rendering a status request asks for: `format=json` among the
/// query arguments selects JSON; anything else is Prometheus text.
pub fn wants_json(query: &[u8]) -> bool {
    query.split(|&b| b == b'&').any(|arg| arg == b"format=json")
}

#[cfg(test)]
mod query_tests {
    use super::{decimal, wants_json};

    #[test]
    fn decimal_digits() {
        let mut b = [0u8; 10];
        assert_eq!(decimal(0, &mut b), b"0");
        assert_eq!(decimal(7, &mut b), b"7");
        assert_eq!(decimal(1656, &mut b), b"1656");
        assert_eq!(decimal(u32::MAX, &mut b), b"4294967295");
    }

    #[test]
    fn format_argument() {
        assert!(wants_json(b"format=json"));
        assert!(wants_json(b"a=1&format=json"));
        assert!(!wants_json(b""));
        assert!(!wants_json(b"format=jsonx"));
        assert!(!wants_json(b"xformat=json"));
        assert!(!wants_json(b"format=JSON&%%%&&="));
    }
}
