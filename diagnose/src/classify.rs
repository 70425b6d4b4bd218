//! Sorting every 502/504 (and every `no live upstreams` error line without
//! an access line) into one family, with the evidence that decided it.
//!
//! 1. Join: each `no live upstreams` error line is paired with the access
//!    502 of the same request (same `$connection` if the access format has
//!    it; else same request line and client; else the nearest in time).
//!    A pair is one incident.
//! 2. Shape: the last `$upstream_addr` group ends with the upstream's name
//!    after one or more addresses (2-hop: a retry's selection was refused)
//!    or is the name alone (1-hop: the first selection was refused); or it
//!    ends with an address (the peer itself failed).
//! 3. Family, first match wins: `empty`, `unavailable`, `generation-retry`,
//!    `generation-first`, `other`; a refusal that no evidence decides is
//!    `unknown` (see [`Family`]).
//!
//! Each family's rules have a file: `retry.rs` (a refused retry, 2-hop:
//! `generation-retry` or `unavailable`), `first.rs` (a refused first
//! selection, 1-hop: `empty`, `unavailable` or `generation-first`),
//! `unseen.rs` (a refusal the rules above leave with no address of its
//! upstream seen before it: `empty`, `unavailable` on evidence, else
//! `unknown`), `other.rs` (address-shaped 502/504s). `join.rs` pairs the
//! lines and builds each incident's skeleton; `evidence.rs` holds the
//! lookups the rules share (a peer out of service, an NXDOMAIN, a flip of
//! the served set, the nearby lines), `emptied.rs` what `first.rs` and
//! `unseen.rs` share to say `empty` (static peers, U's names, each name's
//! NXDOMAIN, whether the access logs cover the span).

mod emptied;
mod evidence;
mod first;
mod join;
mod other;
mod retry;
mod unseen;

use std::collections::{BTreeSet, HashMap};
use std::ops::Range;

use crate::access::{last_group_hops, Hop};
use crate::collect::{Collected, ErrorKind, LogKind};

/// What caused a 502/504.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Family {
    /// 2-hop: an attempt failed, and the retry's selection was refused
    /// because the peer list's generation changed meanwhile.
    GenerationRetry,
    /// 1-hop: the first selection was refused while the addresses changed.
    GenerationFirst,
    /// Every peer was down (max_fails).
    Unavailable,
    /// The name stopped resolving and the peer list became empty.
    Empty,
    /// Anything else: the peer itself failed, timeouts, no change seen.
    Other,
    /// A refusal no evidence decides: no address of the upstream served
    /// before it, and no line or configuration says whether its list held
    /// peers (`unavailable`) or none (`empty`). Its reason names what is
    /// missing and the flag that would give it. Not a guess: neither
    /// counted as the race nor shown not to be it.
    Unknown,
}

impl Family {
    /// Every family, in report order.
    pub const ALL: [Family; 6] = [
        Family::GenerationRetry,
        Family::GenerationFirst,
        Family::Unavailable,
        Family::Empty,
        Family::Other,
        Family::Unknown,
    ];

    /// The family's name in reports and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Family::GenerationRetry => "generation-retry",
            Family::GenerationFirst => "generation-first",
            Family::Unavailable => "unavailable",
            Family::Empty => "empty",
            Family::Other => "other",
            Family::Unknown => "unknown",
        }
    }

    /// Whether this is the generation race the module fixes.
    pub fn is_race(self) -> bool {
        matches!(self, Family::GenerationRetry | Family::GenerationFirst)
    }
}

/// The shape of `$upstream_addr`'s last group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// One or more addresses, then the upstream's name.
    TwoHop,
    /// The upstream's name alone.
    OneHop,
    /// Ends with an address.
    Address,
    /// No upstream (`-`).
    NoUpstream,
}

/// One classified 502/504.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Incident {
    /// When (UTC milliseconds) the classification looked around.
    pub time_ms: i64,
    /// The time as logged (access line's, else error line's).
    pub time_text: String,
    /// The status (502 for an error line without an access line).
    pub status: u16,
    /// The request line (`""` if unknown, or until read back: see
    /// [`crate::Analysis::wanted`]).
    pub request: String,
    /// The connection number (`$connection`, else the `no live upstreams`
    /// line's `*CID`), if either is known: a stream session's only name.
    pub connection: Option<u64>,
    /// The upstream's name (`-` if unknown).
    pub upstream: String,
    /// `$upstream_addr` as logged (`""` without an access line).
    pub upstream_addr: String,
    /// The shape.
    pub shape: Shape,
    /// The family.
    pub family: Family,
    /// Why this family, in a few words.
    pub reason: String,
    /// Index into [`Collected::failures`] of the access line.
    pub access: Option<usize>,
    /// Index into [`Collected::errors`] of the `no live upstreams` line.
    pub no_live: Option<usize>,
    /// Indices into [`Collected::errors`]: the joined `no live upstreams`
    /// line and the same request's other lines.
    pub own_errors: Vec<usize>,
    /// Indices into [`Collected::errors`]: resolver, disabled and peer
    /// error lines of this upstream around (at most [`NEARBY_MAX`]); the
    /// line that decided the family first.
    pub nearby: Vec<usize>,
    /// The upstream's addresses seen in the window before.
    pub before: Vec<String>,
    /// ... and after.
    pub after: Vec<String>,
}

/// The most nearby lines kept per incident.
pub const NEARBY_MAX: usize = 6;

/// Slack for the error log's whole-second times, in milliseconds.
const SECOND: i64 = 1_000;

/// A set of addresses seen in one second counts towards a change only if
/// that many entries or more show it (one entry counts once: its last hop;
/// its start sighting is not counted).
const MIN_SLICE_ENTRIES: u64 = 2;

/// How many later seconds each second's set is compared with.
const SLICE_SPAN: usize = 8;

/// An incident before its family is decided.
struct Skeleton {
    time_ms: i64,
    time_text: String,
    status: u16,
    upstream: Option<String>,
    upstream_addr: String,
    shape: Shape,
    /// The address tried last before the refused selection.
    prev_addr: Option<String>,
    /// Every address the request tried (its last group's).
    tried: Vec<String>,
    /// When the request started, with `$request_time`.
    start_ms: Option<i64>,
    /// The connection (`$connection`, else the joined error line's
    /// `*CID`).
    connection: Option<u64>,
    access: Option<usize>,
    no_live: Option<usize>,
    own_errors: Vec<usize>,
}

/// What the window around an incident showed of its upstream's
/// addresses (the fallbacks when the request's own span says nothing).
struct Around {
    /// The served set changed in the window (see `Classifier::flip`).
    changed: bool,
    /// That change, in words.
    change: String,
    /// Addresses seen in the window before the incident.
    peers: usize,
}

/// A family, why, and the error line that decided it.
type Verdict = (Family, String, Option<usize>);

/// One refused selection of an upstream: its time, the start of its run
/// (the first refusal after the upstream last served), and when the
/// upstream last served before that start (`None`: never).
type RunRefusal = (i64, i64, Option<i64>);

/// How long before a request's start the addresses it could have been
/// given are read (its list then).
const HELD_MS: i64 = 500;

/// How long after a refusal the new list's first selections are looked
/// for: the next requests, at any rate worth diagnosing.
const NEXT_MS: i64 = 250;

/// Who a request is, to find its own error lines.
struct RequestKey {
    connection: Option<u64>,
    request: Option<u64>,
    client: Option<u64>,
}

struct Classifier<'a> {
    data: &'a Collected,
    window: i64,
    /// How far back a failed peer still counts: `fail_timeout`, per
    /// upstream where the configuration gives it.
    lookback: i64,
    lookbacks: HashMap<&'a str, i64>,
    /// Per failure: the refused upstream's name (a 502 whose last hop is
    /// a name), the candidates for joining a `no live upstreams` line.
    refused: Vec<Option<&'a str>>,
    /// Failures by `$connection`.
    failures_by_conn: HashMap<u64, Vec<usize>>,
    /// Peer-error and disabled lines by connection.
    errors_by_conn: HashMap<u64, Vec<usize>>,
    /// Resolver names (ids) and the upstreams they are `server NAME
    /// resolve` of.
    resolves: HashMap<u32, BTreeSet<&'a str>>,
    /// Per upstream, its refused selections (502s whose last hop is its
    /// name) by time.
    runs: HashMap<&'a str, Vec<RunRefusal>>,
    /// Per upstream, the first time one of its addresses served.
    first_served: HashMap<&'a str, Option<i64>>,
    /// Per upstream, its resolver lines (indices into
    /// [`Collected::errors`], by time): those whose name is its own.
    resolver_lines: HashMap<&'a str, Vec<usize>>,
    /// The names of resolver lines tied to no upstream.
    untied_names: BTreeSet<&'a str>,
    /// Whether an error log was read at all.
    error_log: bool,
}

/// Classifies everything [`Collected`] kept; incidents come out by time.
pub fn classify(data: &Collected) -> Vec<Incident> {
    let c = Classifier::new(data);
    let (joined, error_joined) = c.join();
    let mut skeletons: Vec<Skeleton> = (0..data.failures.len())
        .map(|fi| c.skeleton_of_access(fi, joined[fi]))
        .collect();
    skeletons.extend(
        data.errors
            .iter()
            .enumerate()
            .filter(|(ei, e)| e.kind == ErrorKind::NoLive && !error_joined[*ei])
            .map(|(ei, _)| c.skeleton_of_error(ei)),
    );
    skeletons.sort_by_key(|s| s.time_ms);
    skeletons.iter().map(|s| c.decide(s)).collect()
}

/// The upstreams a resolver name belongs to: the upstream of that very
/// name (`upstream be.example.com { server be.example.com resolve; }`,
/// learnt from `$upstream_addr` names and `no live upstreams` lines), and
/// those `--upstream-server` ties it to.
pub fn resolver_upstreams<'a>(data: &'a Collected, name: &str) -> BTreeSet<&'a str> {
    let names = data.timeline.names();
    let mut out: BTreeSet<&'a str> = data
        .options
        .servers
        .iter()
        .filter(|(_, n)| n == name)
        .map(|(u, _)| u.as_str())
        .collect();
    // The configuration's, for the upstreams the logs name.
    out.extend(
        data.options
            .conf_servers
            .iter()
            .filter(|(u, n)| n == name && names.contains(u))
            .map(|(u, _)| u.as_str()),
    );
    if let Some(u) = data.timeline.names().get(name) {
        out.insert(u.as_str());
    }
    // Logs of one upstream: its resolver lines are its own.
    if out.is_empty() && names.len() == 1 {
        out.extend(names.iter().map(String::as_str));
    }
    out
}

impl<'a> Classifier<'a> {
    /// `u`'s fail_timeout (clamped to at least the window).
    fn lookback(&self, u: &str) -> i64 {
        self.lookbacks.get(u).copied().unwrap_or(self.lookback)
    }

    fn new(data: &'a Collected) -> Classifier<'a> {
        let mut failures_by_conn: HashMap<u64, Vec<usize>> = HashMap::new();
        let mut errors_by_conn: HashMap<u64, Vec<usize>> = HashMap::new();
        let mut resolves: HashMap<u32, BTreeSet<&'a str>> = HashMap::new();
        for (fi, f) in data.failures.iter().enumerate() {
            if let Some(c) = f.connection() {
                failures_by_conn.entry(c).or_default().push(fi);
            }
        }
        for (ei, kept) in data.errors.iter().enumerate() {
            match (kept.connection(), kept.kind) {
                (Some(c), ErrorKind::PeerError | ErrorKind::Disabled) => {
                    errors_by_conn.entry(c).or_default().push(ei);
                }
                (_, ErrorKind::Resolver { name, .. }) => {
                    resolves
                        .entry(name)
                        .or_insert_with(|| resolver_upstreams(data, data.strings.get(name)));
                }
                _ => {}
            }
        }
        // A library caller's options, clamped so that times never overflow.
        const DAY: i64 = 86_400_000;
        let window = data.options.window_ms.clamp(0, DAY);
        let mut refusals: HashMap<&'a str, Vec<i64>> = HashMap::new();
        for f in &data.failures {
            if let Some(Hop::Name(n)) = last_group_hops(data.upstream_addr(f)).last() {
                if f.status == 502 {
                    refusals.entry(*n).or_default().push(f.time_ms);
                }
            }
        }
        let mut runs: HashMap<&'a str, Vec<RunRefusal>> = HashMap::new();
        let mut first_served = HashMap::new();
        for (u, mut list) in refusals {
            list.sort_unstable();
            let first = data.timeline.first_seen(u);
            // A new run where the upstream served since the last refusal:
            // each gap is read once, so this costs the log's span.
            let mut run = Vec::with_capacity(list.len());
            let mut start = i64::MIN;
            let mut served_before = None;
            for (k, r) in list.iter().enumerate() {
                let last = match k {
                    0 => first
                        .filter(|f| *f <= *r)
                        .and_then(|f| data.timeline.last_seen(u, *r, *r - f)),
                    _ => {
                        let prev = list[k - 1];
                        data.timeline
                            .last_seen(u, *r, *r - prev)
                            .filter(|l| *l > prev)
                    }
                };
                if k == 0 || last.is_some() {
                    start = *r;
                    served_before = last;
                }
                run.push((*r, start, served_before));
            }
            runs.insert(u, run);
            first_served.insert(u, first);
        }
        // Each upstream's resolver lines, and the lines of names no
        // upstream is known to resolve.
        let mut resolver_lines: HashMap<&'a str, Vec<usize>> = HashMap::new();
        let mut untied_names = BTreeSet::new();
        for (ei, kept) in data.errors.iter().enumerate() {
            let ErrorKind::Resolver { name, .. } = kept.kind else {
                continue;
            };
            match resolves.get(&name).filter(|set| !set.is_empty()) {
                Some(set) => {
                    for u in set {
                        resolver_lines.entry(*u).or_default().push(ei);
                    }
                }
                None => {
                    untied_names.insert(data.strings.get(name));
                }
            }
        }
        Classifier {
            data,
            window,
            lookback: data.options.fail_timeout_ms.clamp(window, DAY),
            lookbacks: data
                .options
                .fail_timeouts
                .iter()
                .map(|(u, ms)| (u.as_str(), (*ms).clamp(window, DAY)))
                .collect(),
            refused: data
                .failures
                .iter()
                .map(|f| match last_group_hops(data.upstream_addr(f)).last() {
                    Some(Hop::Name(n)) if f.status == 502 => Some(*n),
                    _ => None,
                })
                .collect(),
            failures_by_conn,
            errors_by_conn,
            resolves,
            runs,
            first_served,
            resolver_lines,
            untied_names,
            error_log: data.files.iter().any(|f| f.kind == LogKind::Error),
        }
    }

    fn errors_between(&self, from: i64, to: i64) -> Range<usize> {
        let e = &self.data.errors;
        e.partition_point(|k| k.time_ms < from)..e.partition_point(|k| k.time_ms <= to)
    }

    /// Decides a skeleton's family: `other` for an address-shaped 502/504
    /// or one without an upstream (`other.rs`); else, from what the window
    /// around it showed, a refused retry (`retry.rs`) or a refused first
    /// selection (`first.rs`).
    fn decide(&self, s: &Skeleton) -> Incident {
        let t = s.time_ms;
        let w = self.window;
        let timeline = &self.data.timeline;
        let names = |ids: &BTreeSet<u32>| -> Vec<String> {
            ids.iter()
                .map(|id| timeline.addr(*id).to_string())
                .collect()
        };
        // U's static peers (from the configuration) never enter or leave
        // its list: seen or not, they are serving or failing, no change.
        let statics: BTreeSet<u32> = s.upstream.as_deref().map_or_else(BTreeSet::new, |u| {
            self.data
                .options
                .peers
                .iter()
                .filter(|(pu, _)| pu == u)
                .filter_map(|(_, a)| timeline.addr_id(a))
                .collect()
        });
        let (before, after) = match &s.upstream {
            Some(u) => {
                let mut before = timeline.seen_ids(u, t - w, t - 1);
                let mut after = timeline.seen_ids(u, t + 1, t + w);
                before.retain(|id| !statics.contains(id));
                after.retain(|id| !statics.contains(id));
                (before, after)
            }
            None => (BTreeSet::new(), BTreeSet::new()),
        };
        let mut incident = Incident {
            time_ms: t,
            time_text: s.time_text.clone(),
            status: s.status,
            request: String::new(),
            connection: s.connection,
            upstream: s.upstream.clone().unwrap_or_else(|| "-".to_string()),
            upstream_addr: s.upstream_addr.clone(),
            shape: s.shape,
            family: Family::Other,
            reason: String::new(),
            access: s.access,
            no_live: s.no_live,
            own_errors: s.own_errors.clone(),
            nearby: Vec::new(),
            before: names(&before),
            after: names(&after),
        };
        let u = match (&s.upstream, s.shape) {
            (Some(u), Shape::OneHop | Shape::TwoHop) => u.as_str(),
            _ => {
                (incident.reason, incident.nearby) = self.decide_other(s);
                return incident;
            }
        };
        let after_known = !after.is_empty();
        let prev_id = s.prev_addr.as_deref().and_then(|a| timeline.addr_id(a));
        // A static peer not seen after is failing, not gone.
        let prev_left = s.shape == Shape::TwoHop
            && after_known
            && prev_id.is_none_or(|id| !after.contains(&id) && !statics.contains(&id));
        let sets_differ = !before.is_empty() && after_known && before != after;
        let flip = self.flip(u, t, &statics);
        let changed = sets_differ || prev_left || flip.is_some();
        let set = |ids: &BTreeSet<u32>| {
            if ids.is_empty() {
                "{}".to_string()
            } else {
                format!("{{{}}}", names(ids).join(", "))
            }
        };
        let change = match &flip {
            Some((a, b)) if !sets_differ => format!(
                "addresses {} -> {}, and within the window {} vs {}",
                set(&before),
                set(&after),
                set(a),
                set(b)
            ),
            _ => format!("addresses {} -> {}", set(&before), set(&after)),
        };
        let ctx = Around {
            changed,
            change,
            peers: before.len(),
        };
        let (mut family, mut reason, mut deciding) = match s.shape {
            Shape::TwoHop => self.decide_retry(s, u, &ctx),
            _ => self.decide_first(s, u, &ctx),
        };
        // An upstream whose list never changes has neither race nor empty
        // list: what the rules read as a change was peers failing.
        if family != Family::Unavailable && self.data.options.static_upstreams.contains(u) {
            family = Family::Unavailable;
            deciding = None;
            reason = format!(
                "{u} has no resolving server or no zone in the configuration, so its list \
                 never changes: no peer of it was usable"
            );
        }
        // nginx refuses a list whose only other servers are `down` as it
        // refuses an empty one, and only the configuration shows them.
        if family == Family::Empty && !self.data.options.configured {
            family = Family::Unknown;
            reason = format!(
                "{reason}, unless {u} also has a `down` server, which no log shows (then it \
                 held a peer, none usable: unavailable): pass --nginx-conf FILE"
            );
        }
        incident.family = family;
        incident.reason = reason;
        incident.nearby = self.nearby(s, Some(u), deciding);
        incident
    }
}
