//! The counters the module keeps per upstream, and their two renderings:
//! Prometheus text exposition format 0.0.4 and JSON.
//!
//! One table, [`FAMILIES`], is the source of truth: it names every metric,
//! its type, help text, label and series, and says where each series' value
//! comes from. The counters, both renderers, the JSON shape and the names the
//! tests look up are all derived from it. The metric names are a public
//! contract (docs/metrics.md).

use std::fmt::Write;

/// Declares [`Counter`] and [`Counter::ALL`] from one list.
macro_rules! counters {
    ($($(#[$doc:meta])* $name:ident,)+) => {
        /// One per-upstream counter; the discriminant indexes [`Counters`].
        /// Its family and series are in [`FAMILIES`].
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(usize)]
        pub enum Counter {
            $($(#[$doc])* $name,)+
        }

        impl Counter {
            /// Every counter, in discriminant order.
            pub const ALL: &'static [Counter] = &[$(Counter::$name,)+];
        }
    };
}

counters! {
    /// Generation-busy refusal at the request's first peer selection (1-hop).
    BusyFirst,
    /// Generation-busy refusal at a retry's selection (2-hop).
    BusyRetry,
    /// Fresh snapshots taken.
    Resnapshots,
    /// Peers a balancer gave after a re-snapshot whose address the request
    /// had already tried: handed back unused, and the balancer asked again.
    Excluded,
    /// Peers a balancer gave after a re-snapshot whose address the request
    /// had already tried, passed on: the list has a single peer, which
    /// nginx retries after a cached connection failed (it keeps no tried
    /// bitmap for one).
    Retried,
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
pub const COUNTERS: usize = Counter::ALL.len();

impl Counter {
    /// The family and series that expose this counter.
    pub fn series(self) -> (&'static Family, &'static Series) {
        FAMILIES
            .iter()
            .find_map(|f| {
                f.series
                    .iter()
                    .find(|s| s.value == Value::Counter(self))
                    .map(|s| (f, s))
            })
            .expect("every counter has a series in FAMILIES")
    }

    /// The Prometheus metric name (`nginx_generation_retry_..._total`).
    pub fn metric(self) -> &'static str {
        Value::Counter(self).metric()
    }

    /// Where the counter sits in an upstream's JSON object: a key, and a
    /// key inside it for a labelled family (`["busy", "retry"]`).
    pub fn json_path(self) -> Vec<&'static str> {
        let (f, s) = self.series();
        let mut path = vec![f.json_key()];
        path.extend(s.label_value);
        path
    }
}

/// Counter values of one upstream, indexed by [`Counter`].
pub type Counters = [u64; COUNTERS];

/// Why a selection ended in `no live upstreams`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoLiveCause {
    /// The peer list's generation moved since the request took its snapshot.
    Generation,
    /// Peers present but none usable (down, max_fails, max_conns).
    Unavailable,
    /// The list (primary and backup) was empty.
    Empty,
}

impl NoLiveCause {
    pub const ALL: [NoLiveCause; 3] = [
        NoLiveCause::Generation,
        NoLiveCause::Unavailable,
        NoLiveCause::Empty,
    ];

    pub fn counter(self) -> Counter {
        match self {
            NoLiveCause::Generation => Counter::NoLiveGeneration,
            NoLiveCause::Unavailable => Counter::NoLiveUnavailable,
            NoLiveCause::Empty => Counter::NoLiveEmpty,
        }
    }

    /// The `cause=` word of log lines and the `cause` label value.
    pub fn label(self) -> &'static str {
        self.counter()
            .series()
            .1
            .label_value
            .expect("no_live series are labelled by cause")
    }

    /// The cause of a refusal with the generation unchanged: the list
    /// (primary and backup) was empty, or its peers were unusable.
    pub fn of_list(primary: usize, backup: usize) -> NoLiveCause {
        if primary == 0 && backup == 0 {
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
    /// Every protocol, in discriminant order (http first).
    pub const ALL: [Protocol; 2] = [Protocol::Http, Protocol::Stream];

    pub fn label(self) -> &'static str {
        match self {
            Protocol::Http => "http",
            Protocol::Stream => "stream",
        }
    }

    /// Before "upstream" in log lines: "" for http, "stream " for stream,
    /// as nginx's own messages name them.
    pub fn log_prefix(self) -> &'static str {
        match self {
            Protocol::Http => "",
            Protocol::Stream => "stream ",
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

    fn value(&self, v: Value) -> u64 {
        match v {
            Value::Counter(c) => self.get(c),
            Value::Generation => self.generation,
            Value::Peers => self.peers,
            Value::Mode(on) => u64::from(self.rescue == on),
        }
    }
}

/// `Content-Type` of the Prometheus rendering.
pub const PROMETHEUS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
/// `Content-Type` of the JSON rendering.
pub const JSON_CONTENT_TYPE: &str = "application/json";

/// Every metric name starts with this.
pub const PREFIX: &str = "nginx_generation_retry_";

/// Prometheus metric type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
}

impl Kind {
    pub fn label(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
        }
    }
}

/// Where a series' value comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Value {
    Counter(Counter),
    /// The peer list's generation now.
    Generation,
    /// Peers in the list now.
    Peers,
    /// 1 when the upstream's mode is `on` (`true`) or `off` (`false`), else
    /// 0: a state set, so alerts can tell the two modes apart.
    Mode(bool),
}

impl Value {
    /// The name of the metric whose series shows this value.
    pub fn metric(self) -> &'static str {
        FAMILIES
            .iter()
            .find(|f| f.series.iter().any(|s| s.value == self))
            .map(|f| f.name)
            .expect("every value has a series in FAMILIES")
    }
}

/// One metric family: a name, a type, a help text and its series.
#[derive(Debug)]
pub struct Family {
    pub name: &'static str,
    pub kind: Kind,
    pub help: &'static str,
    /// The label that tells the series apart (`phase`, `cause`), if any.
    pub label: Option<&'static str>,
    pub series: &'static [Series],
}

/// One series of a family, beside the `upstream` and `protocol` labels.
#[derive(Debug)]
pub struct Series {
    /// The value of the family's label; `None` for an unlabelled family.
    pub label_value: Option<&'static str>,
    pub value: Value,
}

impl Family {
    /// The key in an upstream's JSON object: the name without
    /// [`PREFIX`] and `_total`.
    pub fn json_key(&self) -> &'static str {
        let short = self.name.strip_prefix(PREFIX).unwrap_or(self.name);
        short.strip_suffix("_total").unwrap_or(short)
    }
}

const fn plain(value: Value) -> Series {
    Series {
        label_value: None,
        value,
    }
}

const fn labelled(value: &'static str, c: Counter) -> Series {
    Series {
        label_value: Some(value),
        value: Value::Counter(c),
    }
}

/// The metrics, in the order both renderings list them.
pub const FAMILIES: &[Family] = &[
    Family {
        name: "nginx_generation_retry_busy_total",
        kind: Kind::Counter,
        help: "Peer selections refused because the peer list's generation changed since the request took its snapshot.",
        label: Some("phase"),
        series: &[
            labelled("first", Counter::BusyFirst),
            labelled("retry", Counter::BusyRetry),
        ],
    },
    Family {
        name: "nginx_generation_retry_resnapshots_total",
        kind: Kind::Counter,
        help: "Fresh peer-list snapshots taken after a generation-busy refusal.",
        label: None,
        series: &[plain(Value::Counter(Counter::Resnapshots))],
    },
    Family {
        name: "nginx_generation_retry_excluded_total",
        kind: Kind::Counter,
        help: "Peers given after a re-snapshot whose address the request had already tried, handed back unused.",
        label: None,
        series: &[plain(Value::Counter(Counter::Excluded))],
    },
    Family {
        name: "nginx_generation_retry_retried_total",
        kind: Kind::Counter,
        help: "Peers given after a re-snapshot whose address the request had already tried, passed on because the list has a single peer and the attempt that failed was on a cached connection.",
        label: None,
        series: &[plain(Value::Counter(Counter::Retried))],
    },
    Family {
        name: "nginx_generation_retry_rescued_total",
        kind: Kind::Counter,
        help: "Generation-busy selections that a re-snapshot turned into a peer.",
        label: None,
        series: &[plain(Value::Counter(Counter::Rescued))],
    },
    Family {
        name: "nginx_generation_retry_failed_total",
        kind: Kind::Counter,
        help: "Generation-busy selections that still ended in no live upstreams.",
        label: None,
        series: &[plain(Value::Counter(Counter::Failed))],
    },
    Family {
        name: "nginx_generation_retry_no_live_total",
        kind: Kind::Counter,
        help: "Selections that ended in no live upstreams, by cause.",
        label: Some("cause"),
        series: &[
            labelled("generation", Counter::NoLiveGeneration),
            labelled("unavailable", Counter::NoLiveUnavailable),
            labelled("empty", Counter::NoLiveEmpty),
        ],
    },
    Family {
        name: "nginx_generation_retry_generation",
        kind: Kind::Gauge,
        help: "Current generation of the upstream's peer list.",
        label: None,
        series: &[plain(Value::Generation)],
    },
    Family {
        name: "nginx_generation_retry_peers",
        kind: Kind::Gauge,
        help: "Peers currently in the upstream's list, backup included.",
        label: None,
        series: &[plain(Value::Peers)],
    },
    Family {
        name: "nginx_generation_retry_mode",
        kind: Kind::Gauge,
        help: "1 for the upstream's generation_retry_resnapshot mode (on: rescues, off: counts only), 0 for the other.",
        label: Some("mode"),
        series: &[
            Series {
                label_value: Some("on"),
                value: Value::Mode(true),
            },
            Series {
                label_value: Some("off"),
                value: Value::Mode(false),
            },
        ],
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
        let _ = writeln!(out, "# TYPE {} {}", f.name, f.kind.label());
        for s in stats {
            let upstream = escape_label(&s.name);
            let protocol = s.protocol.label();
            for series in f.series {
                let _ = write!(
                    out,
                    "{}{{upstream=\"{upstream}\",protocol=\"{protocol}\"",
                    f.name
                );
                if let (Some(label), Some(value)) = (f.label, series.label_value) {
                    let _ = write!(out, ",{label}=\"{value}\"");
                }
                let _ = writeln!(out, "}} {}", s.value(series.value));
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
/// same numbers as the Prometheus rendering: a key per family
/// ([`Family::json_key`]), an object keyed by label value for a labelled
/// family.
pub fn render_json(stats: &[UpstreamStats]) -> String {
    let mut out = String::from("{\"upstreams\":[");
    for (i, s) in stats.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(
            out,
            "{{\"upstream\":\"{}\",\"protocol\":\"{}\",\"mode\":\"{}\"",
            escape_json(&s.name),
            s.protocol.label(),
            if s.rescue { "on" } else { "off" },
        );
        // The mode is the string "mode" above, not an object of 0s and 1s.
        for f in FAMILIES.iter().filter(|f| f.json_key() != "mode") {
            let _ = write!(out, ",\"{}\":", f.json_key());
            if f.label.is_none() {
                let _ = write!(out, "{}", s.value(f.series[0].value));
                continue;
            }
            out.push('{');
            for (j, series) in f.series.iter().enumerate() {
                let sep = if j > 0 { "," } else { "" };
                let key = series.label_value.unwrap_or_default();
                let _ = write!(out, "{sep}\"{key}\":{}", s.value(series.value));
            }
            out.push('}');
        }
        out.push('}');
    }
    out.push_str("]}\n");
    out
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
mod tests;
