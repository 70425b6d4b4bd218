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
//!    `generation-first`, `other` (see [`Family`]).

use std::collections::{BTreeSet, HashMap};
use std::ops::Range;

use crate::access::{self, last_group_hops, Hop};
use crate::collect::{Collected, ErrorKind, KeptError};

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
}

impl Family {
    /// Every family, in report order.
    pub const ALL: [Family; 5] = [
        Family::GenerationRetry,
        Family::GenerationFirst,
        Family::Unavailable,
        Family::Empty,
        Family::Other,
    ];

    /// The family's name in reports and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Family::GenerationRetry => "generation-retry",
            Family::GenerationFirst => "generation-first",
            Family::Unavailable => "unavailable",
            Family::Empty => "empty",
            Family::Other => "other",
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
    lookback: i64,
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
    /// name) by time, each with the start of its run: the first refusal
    /// after the upstream last served.
    runs: HashMap<&'a str, Vec<(i64, i64)>>,
    /// Per upstream, the first time one of its addresses served.
    first_served: HashMap<&'a str, Option<i64>>,
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
    let mut out: BTreeSet<&'a str> = data
        .options
        .servers
        .iter()
        .filter(|(_, n)| n == name)
        .map(|(u, _)| u.as_str())
        .collect();
    if let Some(u) = data.timeline.names().get(name) {
        out.insert(u.as_str());
    }
    // Logs of one upstream: its resolver lines are its own.
    let names = data.timeline.names();
    if out.is_empty() && names.len() == 1 {
        out.extend(names.iter().map(String::as_str));
    }
    out
}

impl<'a> Classifier<'a> {
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
        let mut runs: HashMap<&'a str, Vec<(i64, i64)>> = HashMap::new();
        let mut first_served = HashMap::new();
        for (u, mut list) in refusals {
            list.sort_unstable();
            // A new run where the upstream served since the last refusal:
            // each gap is read once, so this costs the log's span.
            let mut run = Vec::with_capacity(list.len());
            let mut start = i64::MIN;
            for (k, r) in list.iter().enumerate() {
                let served_between = k > 0 && {
                    let prev = list[k - 1];
                    data.timeline
                        .last_seen(u, *r, *r - prev)
                        .is_some_and(|l| l > prev)
                };
                if k == 0 || served_between {
                    start = *r;
                }
                run.push((*r, start));
            }
            runs.insert(u, run);
            first_served.insert(u, data.timeline.first_seen(u));
        }
        Classifier {
            data,
            window,
            lookback: data.options.fail_timeout_ms.clamp(window, DAY),
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
        }
    }

    fn errors_between(&self, from: i64, to: i64) -> Range<usize> {
        let e = &self.data.errors;
        e.partition_point(|k| k.time_ms < from)..e.partition_point(|k| k.time_ms <= to)
    }

    /// Pairs `no live upstreams` lines with access 502s: for each failure,
    /// the error line joined to it; for each error line, whether joined.
    fn join(&self) -> (Vec<Option<usize>>, Vec<bool>) {
        let data = self.data;
        let mut joined = vec![None; data.failures.len()];
        let mut error_joined = vec![false; data.errors.len()];
        let tolerance = self.window + SECOND;
        for (ei, e) in data.errors.iter().enumerate() {
            if e.kind != ErrorKind::NoLive {
                continue;
            }
            let upstream = data.error_upstream(e);
            let f = &data.failures;
            let (from, to) = (e.time_ms - tolerance, e.time_ms + tolerance);
            let candidates: Vec<usize> = if data.has_connection {
                e.connection()
                    .and_then(|c| self.failures_by_conn.get(&c))
                    .map(|list| {
                        list.iter()
                            .copied()
                            .filter(|fi| (from..=to).contains(&f[*fi].time_ms))
                            .collect()
                    })
                    .unwrap_or_default()
            } else {
                (f.partition_point(|x| x.time_ms < from)..f.partition_point(|x| x.time_ms <= to))
                    .collect()
            };
            let mut best: Option<(i64, usize)> = None;
            for fi in candidates {
                let a = &f[fi];
                let Some(name) = self.refused[fi] else {
                    continue;
                };
                if joined[fi].is_some() || upstream.is_some_and(|u| u != name) {
                    continue;
                }
                let same = if data.has_connection {
                    true
                } else if data.has_request {
                    same_if_known(a.request_key(), e.request_key())
                        && same_if_known(a.client_key(), e.client_key())
                } else {
                    true
                };
                // The line's second, from its middle.
                let distance = (a.time_ms - (e.time_ms + SECOND / 2)).abs();
                if same && best.is_none_or(|(d, _)| distance < d) {
                    best = Some((distance, fi));
                }
            }
            if let Some((_, fi)) = best {
                joined[fi] = Some(ei);
                error_joined[ei] = true;
            }
        }
        (joined, error_joined)
    }

    /// The request's own peer-error and disabled lines, shortly before `t`.
    fn own_lines(&self, key: &RequestKey, t: i64, skip: Option<usize>) -> Vec<usize> {
        if key.connection.is_none() && key.request.is_none() {
            return Vec::new();
        }
        let (from, to) = (t - self.window - SECOND, t + SECOND);
        let in_time =
            |ei: &usize| Some(*ei) != skip && (from..=to).contains(&self.data.errors[*ei].time_ms);
        if let Some(c) = key.connection {
            return self
                .errors_by_conn
                .get(&c)
                .map(|list| list.iter().copied().filter(in_time).collect())
                .unwrap_or_default();
        }
        self.errors_between(from, to)
            .filter(in_time)
            .filter(|ei| {
                let e = &self.data.errors[*ei];
                matches!(e.kind, ErrorKind::PeerError | ErrorKind::Disabled)
                    && e.request_key().is_some()
                    && same_if_known(key.request, e.request_key())
                    && same_if_known(key.client, e.client_key())
            })
            .collect()
    }

    fn skeleton_of_access(&self, fi: usize, joined: Option<usize>) -> Skeleton {
        let a = &self.data.failures[fi];
        let upstream_addr = self.data.upstream_addr(a);
        let hops = last_group_hops(upstream_addr);
        // The attempt just before the refused selection: in "A, B, be" B
        // failed last, and its failure is what the retry followed.
        let prev_addr = match hops.split_last() {
            Some((Hop::Name(_), earlier)) => earlier.iter().rev().find_map(|h| match h {
                Hop::Addr(x) => Some(x.to_string()),
                Hop::Name(_) => None,
            }),
            _ => None,
        };
        let (shape, upstream) = match hops.last() {
            Some(Hop::Name(n)) if prev_addr.is_some() => (Shape::TwoHop, Some(n.to_string())),
            Some(Hop::Name(n)) => (Shape::OneHop, Some(n.to_string())),
            Some(Hop::Addr(x)) => (
                Shape::Address,
                self.data.timeline.upstream_of(x).map(str::to_string),
            ),
            None => (Shape::NoUpstream, None),
        };
        let joined_error = joined.map(|ei| &self.data.errors[ei]);
        let key = RequestKey {
            connection: a.connection().or(joined_error.and_then(|e| e.connection())),
            request: a.request_key(),
            client: a.client_key(),
        };
        let mut own_errors: Vec<usize> = joined.into_iter().collect();
        own_errors.extend(self.own_lines(&key, a.time_ms, joined));
        own_errors.sort_unstable();
        let tried = hops
            .iter()
            .filter_map(|h| match h {
                Hop::Addr(x) => Some(x.to_string()),
                Hop::Name(_) => None,
            })
            .collect();
        Skeleton {
            time_ms: a.time_ms,
            time_text: self.data.failure_time_text(a),
            status: a.status,
            upstream,
            upstream_addr: upstream_addr.to_string(),
            shape,
            prev_addr,
            tried,
            start_ms: a.start_ms(),
            access: Some(fi),
            no_live: joined,
            own_errors,
        }
    }

    fn skeleton_of_error(&self, ei: usize) -> Skeleton {
        let e = &self.data.errors[ei];
        // The line's time has whole seconds: look from the middle of it.
        let t = e.time_ms + SECOND / 2;
        let key = RequestKey {
            connection: e.connection(),
            request: e.request_key(),
            client: e.client_key(),
        };
        let own = self.own_lines(&key, t, Some(ei));
        let prev_addr = own.iter().rev().find_map(|i| {
            let host = self.data.error_upstream(&self.data.errors[*i])?;
            access::is_address(host).then(|| host.to_string())
        });
        let mut own_errors = vec![ei];
        own_errors.extend(own);
        own_errors.sort_unstable();
        Skeleton {
            time_ms: t,
            time_text: self.data.error_time_text(e),
            status: 502,
            upstream: self.data.error_upstream(e).map(str::to_string),
            upstream_addr: String::new(),
            shape: if prev_addr.is_some() {
                Shape::TwoHop
            } else {
                Shape::OneHop
            },
            tried: prev_addr.iter().cloned().collect(),
            start_ms: None,
            prev_addr,
            access: None,
            no_live: Some(ei),
            own_errors,
        }
    }

    /// Whether a disabled or peer-error line is about one of `u`'s peers.
    fn concerns(&self, kept: &KeptError, u: &str) -> bool {
        let timeline = &self.data.timeline;
        match self.data.error_upstream(kept) {
            None => false,
            Some(host) if access::is_address(host) => {
                timeline.in_universe(u, host) || !timeline.is_known_peer(host)
            }
            Some(host) => host == u,
        }
    }

    /// Whether a resolver line for the name `name` (an id) is about `u`.
    fn resolver_concerns(&self, name: u32, u: &str) -> bool {
        self.resolves.get(&name).is_some_and(|set| set.contains(u))
    }

    fn decide(&self, s: &Skeleton) -> Incident {
        let t = s.time_ms;
        let w = self.window;
        let timeline = &self.data.timeline;
        let names = |ids: &BTreeSet<u32>| -> Vec<String> {
            ids.iter()
                .map(|id| timeline.addr(*id).to_string())
                .collect()
        };
        let (before, after) = match &s.upstream {
            Some(u) => (
                timeline.seen_ids(u, t - w, t - 1),
                timeline.seen_ids(u, t + 1, t + w),
            ),
            None => (BTreeSet::new(), BTreeSet::new()),
        };
        let mut incident = Incident {
            time_ms: t,
            time_text: s.time_text.clone(),
            status: s.status,
            request: String::new(),
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
            (_, Shape::Address) => {
                incident.reason = "the last attempt reached a peer: the peer's own failure".into();
                incident.nearby = self.nearby(s, s.upstream.as_deref(), None);
                return incident;
            }
            _ => {
                incident.reason = "no upstream name to look at".into();
                return incident;
            }
        };
        let after_known = !after.is_empty();
        let prev_id = s.prev_addr.as_deref().and_then(|a| timeline.addr_id(a));
        let prev_left = s.shape == Shape::TwoHop
            && after_known
            && prev_id.is_none_or(|id| !after.contains(&id));
        let sets_differ = !before.is_empty() && after_known && before != after;
        let flip = self.flip(u, t);
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
        let (family, reason, deciding) = match s.shape {
            Shape::TwoHop => self.decide_retry(s, u, &ctx),
            _ => self.decide_first(s, u, &ctx),
        };
        incident.family = family;
        incident.reason = reason;
        incident.nearby = self.nearby(s, Some(u), deciding);
        incident
    }

    /// A refused retry (2-hop). nginx refused it because the list's
    /// generation moved since the request started, or because no peer of
    /// an unchanged list was usable. So, in order:
    ///
    /// 1. an address served that the list did not hold when the request
    ///    started, between its start and just after the refusal: the list
    ///    changed in flight (`generation-retry`);
    /// 2. an NXDOMAIN for the upstream's name in the seconds the request
    ///    was in flight: the list emptied in flight, which is a change too
    ///    (its first selection found a peer);
    /// 3. a peer of the upstream disabled or failing within fail_timeout
    ///    and not serving since: `unavailable`;
    /// 4. else a list of one peer (nginx never marks a single peer down)
    ///    or a change seen in the window: `generation-retry`; else
    ///    `unavailable`.
    fn decide_retry(&self, s: &Skeleton, u: &str, around: &Around) -> Verdict {
        let t = s.time_ms;
        let timeline = &self.data.timeline;
        let start = s.start_ms.unwrap_or(t - self.window / 2).min(t);
        let mut held = timeline.seen_ids(u, start - HELD_MS, start);
        held.extend(s.tried.iter().filter_map(|a| timeline.addr_id(a)));
        let came: Vec<u32> = timeline
            .seen_ids(u, start + 1, t + NEXT_MS)
            .difference(&held)
            .copied()
            .collect();
        let names = |ids: &[u32]| {
            ids.iter()
                .map(|id| timeline.addr(*id))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let held_v: Vec<u32> = held.iter().copied().collect();
        let span = match s.start_ms {
            Some(_) => format!("in flight for {} ms", t - start),
            None => "in flight (no $request_time: assumed to start half a window before)".into(),
        };
        if !came.is_empty() {
            return (
                Family::GenerationRetry,
                format!(
                    "retry refused after {} failed; {} served from while the request was {span}, \
                     and the list held {{{}}} when it started",
                    s.prev_addr.as_deref().unwrap_or("an attempt"),
                    names(&came),
                    names(&held_v)
                ),
                None,
            );
        }
        if let Some((ei, name)) = self.nxdomain_between(u, start, t) {
            return (
                Family::GenerationRetry,
                format!(
                    "{name} could not be resolved (3: Host not found) at {} while the request \
                     was {span}: the list emptied after its first selection",
                    self.data.error_time_text(&self.data.errors[ei])
                ),
                Some(ei),
            );
        }
        // No change in flight: a peer out of service counts even where the
        // window saw it leave (a disabled peer stops serving too).
        // A peer error marks a peer down only in a list of two or more
        // (nginx never marks a single peer down); a disabled line is
        // written only then.
        // Only a peer the list held when the request started: one that
        // left with a change before is not why this retry was refused.
        if let Some(v) = self.unavailable(s, u, t, held.len() >= 2, Some(&held)) {
            return v;
        }
        if held.len() <= 1 || around.changed {
            let why = if held.len() <= 1 {
                format!(
                    "the list held one peer ({}), which nginx never marks down, yet the retry \
                     was refused: its generation moved",
                    names(&held_v)
                )
            } else {
                format!(
                    "retry refused after {} failed, while {}",
                    s.prev_addr.as_deref().unwrap_or("an attempt"),
                    around.change
                )
            };
            return (Family::GenerationRetry, why, None);
        }
        (
            Family::Unavailable,
            format!(
                "retry refused with no change seen and {} peers: none usable ({})",
                held.len(),
                around.change
            ),
            None,
        )
    }

    /// A refused first selection (1-hop), from the run of refusals it
    /// belongs to (refusals of the upstream with no address served
    /// between them), which began at `r0`:
    ///
    /// 1. with `$request_time`, an address that came while it was in
    ///    flight: `generation-first`;
    /// 2. an NXDOMAIN for the name at or before `r0` with nothing served
    ///    since its second, or nothing ever served before `r0` while the
    ///    name serves later (not resolved yet): `empty`;
    /// 3. a peer disabled or failing within fail_timeout before `r0` and
    ///    not serving since: `unavailable`;
    /// 4. a change in the window: `generation-first`; else `unavailable`
    ///    (down, `max_conns`: nothing logged).
    fn decide_first(&self, s: &Skeleton, u: &str, around: &Around) -> Verdict {
        let t = s.time_ms;
        let timeline = &self.data.timeline;
        if let Some(start) = s.start_ms.filter(|st| *st < t) {
            let held = timeline.seen_ids(u, start - HELD_MS, start);
            let came: BTreeSet<u32> = timeline
                .seen_ids(u, start + 1, t)
                .difference(&held)
                .copied()
                .collect();
            if !came.is_empty() {
                return (
                    Family::GenerationFirst,
                    format!(
                        "selection refused {} ms after the request started, while {} came",
                        t - start,
                        came.iter()
                            .map(|id| timeline.addr(*id))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    None,
                );
            }
        }
        let r0 = self
            .runs
            .get(u)
            .and_then(|run| {
                let at = run.partition_point(|(r, _)| *r <= t);
                at.checked_sub(1).map(|i| run[i].1)
            })
            .unwrap_or(t)
            .min(t);
        let last = timeline.last_seen(u, r0, self.lookback);
        if let Some((ei, name)) = self.nxdomain_between(u, r0 - self.lookback, r0) {
            let nx = self.data.errors[ei].time_ms;
            if last.is_none_or(|l| l < nx + SECOND) {
                return (
                    Family::Empty,
                    format!(
                        "{name} could not be resolved (3: Host not found) at {}, and no address \
                         of {u} served since: the list was empty",
                        self.data.error_time_text(&self.data.errors[ei])
                    ),
                    Some(ei),
                );
            }
        }
        // Upstreams refused only in the error log have no precomputed run.
        let first_served = match self.first_served.get(u) {
            Some(f) => *f,
            None => timeline.first_seen(u),
        };
        if first_served.is_none_or(|f| f > r0)
            && !timeline.seen_ids(u, t, t + self.window).is_empty()
        {
            return (
                Family::Empty,
                format!("no address of {u} served before, and one serves just after: the name had not resolved yet"),
                None,
            );
        }
        // Every line counts here, also for an address a change moved: a
        // run of refusals with nothing served is not a change in flight.
        // The run's cause is read where it began, unless it has lasted
        // longer than fail_timeout: then nginx tried the peers again, and
        // the evidence must be as fresh as the refusal.
        let at = if t - r0 > self.lookback { t } else { r0 };
        let peers = timeline.seen_ids(u, r0 - self.window, r0).len();
        if let Some(v) = self.unavailable(s, u, at, peers >= 2, None) {
            return v;
        }
        if around.changed {
            return (
                Family::GenerationFirst,
                format!("selection refused while {}", around.change),
                None,
            );
        }
        (
            Family::Unavailable,
            format!(
                "selection refused with no change seen and {} peers seen: none usable (down, \
                 max_fails, max_conns) ({})",
                around.peers, around.change
            ),
            None,
        )
    }

    /// `unavailable`, if a peer of `u` is out of service at `t` (see
    /// [`Classifier::down_peer`]).
    fn unavailable(
        &self,
        s: &Skeleton,
        u: &str,
        t: i64,
        peer_errors: bool,
        held: Option<&BTreeSet<u32>>,
    ) -> Option<Verdict> {
        let ei = self.down_peer(s, u, t, peer_errors, held)?;
        let kept = &self.data.errors[ei];
        let peer = self.data.error_upstream(kept).unwrap_or("a peer");
        let what = match kept.kind {
            ErrorKind::Disabled => "was temporarily disabled (max_fails)",
            _ => "failed",
        };
        Some((
            Family::Unavailable,
            format!(
                "{peer} {what} at {} and has not served since",
                self.data.error_time_text(kept)
            ),
            Some(ei),
        ))
    }

    /// The latest NXDOMAIN (`(3: Host not found)`) line for a name of `u`
    /// whose second overlaps `[from, to]`, and the name.
    fn nxdomain_between(&self, u: &str, from: i64, to: i64) -> Option<(usize, &'a str)> {
        self.errors_between(from - SECOND + 1, to)
            .rev()
            .find_map(|ei| match self.data.errors[ei].kind {
                ErrorKind::Resolver {
                    name,
                    nxdomain: true,
                } if self.resolver_concerns(name, u) => Some((ei, self.data.strings.get(name))),
                _ => None,
            })
    }

    /// A change of `u`'s served address set that the sets before and
    /// after `t` can miss (A before, B during, A after): two sets seen in
    /// the window, or the set just before the window and one in it, where
    /// each holds an address the other lacks. Each set must rest on at
    /// least [`MIN_SLICE_ENTRIES`] entries, so that two peers taking turns
    /// under light traffic do not look like a change.
    fn flip(&self, u: &str, t: i64) -> Option<(BTreeSet<u32>, BTreeSet<u32>)> {
        let w = self.window;
        let timeline = &self.data.timeline;
        let full = |s: &crate::timeline::Slice| s.total() >= MIN_SLICE_ENTRIES;
        let just_before = timeline.slices(u, t - 2 * w, t - w - 1);
        let before_set: BTreeSet<u32> = just_before.iter().flat_map(|s| s.set()).collect();
        let before_total: u64 = just_before.iter().map(|s| s.total()).sum();
        let mut sets: Vec<BTreeSet<u32>> = Vec::new();
        if before_total >= MIN_SLICE_ENTRIES {
            sets.push(before_set);
        }
        sets.extend(
            timeline
                .slices(u, t - w, t + w)
                .iter()
                .filter(|s| full(s))
                .map(|s| s.set()),
        );
        for (i, a) in sets.iter().enumerate() {
            for b in sets.iter().skip(i + 1).take(SLICE_SPAN) {
                if !a.is_subset(b) && !b.is_subset(a) {
                    return Some((a.clone(), b.clone()));
                }
            }
        }
        None
    }

    /// A peer of `u` still out of service at `t`: an `upstream server
    /// temporarily disabled` line, or with `peer_errors` (a list of two or
    /// more) a peer-error line, for one of `u`'s addresses within
    /// fail_timeout before `t` (its second included), not the request's
    /// own, with that address among `held` (when given), and not serving
    /// since (a success re-enables a peer).
    fn down_peer(
        &self,
        s: &Skeleton,
        u: &str,
        t: i64,
        peer_errors: bool,
        held: Option<&BTreeSet<u32>>,
    ) -> Option<usize> {
        let timeline = &self.data.timeline;
        // An error line's time is its second's start: `t`'s own second is
        // in.
        self.errors_between(t - self.lookback, t).rev().find(|ei| {
            let kept = &self.data.errors[*ei];
            let counts = match kept.kind {
                ErrorKind::Disabled => true,
                ErrorKind::PeerError => peer_errors,
                _ => false,
            };
            if !counts || s.own_errors.contains(ei) || !self.concerns(kept, u) {
                return false;
            }
            let Some(host) = self.data.error_upstream(kept) else {
                return false;
            };
            let id = timeline.addr_id(host);
            if held.is_some_and(|h| id.is_none_or(|id| !h.contains(&id))) {
                return false;
            }
            let since = kept.time_ms + SECOND;
            let served_since =
                id.is_some_and(|id| since < t && timeline.seen_ids(u, since, t - 1).contains(&id));
            !served_since
        })
    }

    /// Resolver, disabled and peer-error lines about `u` around `t`, other
    /// than the incident's own; `first` (the deciding line) leads.
    fn nearby(&self, s: &Skeleton, u: Option<&str>, first: Option<usize>) -> Vec<usize> {
        let t = s.time_ms;
        let mut out: Vec<usize> = first.into_iter().collect();
        out.extend(
            self.errors_between(t - self.window, t + self.window)
                .filter(|ei| !s.own_errors.contains(ei) && Some(*ei) != first)
                .filter(|ei| {
                    let kept = &self.data.errors[*ei];
                    match (kept.kind, u) {
                        (ErrorKind::Resolver { name, .. }, Some(u)) => {
                            self.resolver_concerns(name, u)
                        }
                        (ErrorKind::Disabled | ErrorKind::PeerError, Some(u)) => {
                            self.concerns(kept, u)
                        }
                        (
                            ErrorKind::Resolver { .. } | ErrorKind::Disabled | ErrorKind::PeerError,
                            None,
                        ) => true,
                        _ => false,
                    }
                })
                .take(NEARBY_MAX - out.len()),
        );
        out
    }
}

/// Equal when both are known; true when either is unknown.
fn same_if_known(a: Option<u64>, b: Option<u64>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => a == b,
        _ => true,
    }
}
