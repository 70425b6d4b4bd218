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

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Range;

use crate::access::{self, last_group_hops, Hop};
use crate::collect::{Collected, KeptError};
use crate::errorlog::{upstream_host, Kind};

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
    /// The request line (`""` if unknown).
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
    /// Indices into [`Collected::errors`]: the joined `no live upstreams`
    /// line and the same request's other lines.
    pub own_errors: Vec<usize>,
    /// Indices into [`Collected::errors`]: resolver, disabled and peer
    /// error lines of this upstream in the window (at most [`NEARBY_MAX`]).
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

/// An incident before its family is decided.
struct Skeleton {
    time_ms: i64,
    time_text: String,
    status: u16,
    request: String,
    upstream: Option<String>,
    upstream_addr: String,
    shape: Shape,
    first_addr: Option<String>,
    access: Option<usize>,
    own_errors: Vec<usize>,
}

/// Who a request is, to find its own error lines.
struct RequestKey<'a> {
    connection: Option<u64>,
    request: Option<String>,
    client: Option<&'a str>,
}

struct Classifier<'a> {
    data: &'a Collected,
    window: i64,
    /// Per failure: the refused upstream's name (a 502 whose last hop is
    /// a name), the candidates for joining a `no live upstreams` line.
    refused: Vec<Option<&'a str>>,
    /// Per failure: `$request` unescaped, for comparing with error lines.
    requests: Vec<Option<String>>,
    /// Failures by `$connection`.
    failures_by_conn: HashMap<u64, Vec<usize>>,
    /// Peer-error and disabled lines by connection.
    errors_by_conn: HashMap<u64, Vec<usize>>,
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
            .filter(|(ei, e)| e.error.kind == Kind::NoLive && !error_joined[*ei])
            .map(|(ei, _)| c.skeleton_of_error(ei)),
    );
    skeletons.sort_by_key(|s| s.time_ms);
    let mut refusals: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
    for s in &skeletons {
        if let (Some(u), Shape::OneHop | Shape::TwoHop) = (&s.upstream, s.shape) {
            refusals.entry(u.as_str()).or_default().push(s.time_ms);
        }
    }
    skeletons.iter().map(|s| c.decide(s, &refusals)).collect()
}

impl<'a> Classifier<'a> {
    fn new(data: &'a Collected) -> Classifier<'a> {
        let mut failures_by_conn: HashMap<u64, Vec<usize>> = HashMap::new();
        let mut errors_by_conn: HashMap<u64, Vec<usize>> = HashMap::new();
        for (fi, f) in data.failures.iter().enumerate() {
            if let Some(c) = f.entry.connection {
                failures_by_conn.entry(c).or_default().push(fi);
            }
        }
        for (ei, kept) in data.errors.iter().enumerate() {
            if let (Some(c), Kind::PeerError | Kind::Disabled) =
                (kept.error.connection, &kept.error.kind)
            {
                errors_by_conn.entry(c).or_default().push(ei);
            }
        }
        Classifier {
            data,
            window: data.options.window_ms.max(0),
            refused: data
                .failures
                .iter()
                .map(|f| match last_group_hops(&f.entry.upstream_addr).last() {
                    Some(Hop::Name(n)) if f.entry.status == 502 => Some(*n),
                    _ => None,
                })
                .collect(),
            requests: data
                .failures
                .iter()
                .map(|f| f.entry.request.as_deref().map(access::unescape))
                .collect(),
            failures_by_conn,
            errors_by_conn,
        }
    }

    fn errors_between(&self, from: i64, to: i64) -> Range<usize> {
        let e = &self.data.errors;
        e.partition_point(|k| k.error.time_ms < from)..e.partition_point(|k| k.error.time_ms <= to)
    }

    /// Pairs `no live upstreams` lines with access 502s: for each failure,
    /// the error line joined to it; for each error line, whether joined.
    fn join(&self) -> (Vec<Option<usize>>, Vec<bool>) {
        let data = self.data;
        let mut joined = vec![None; data.failures.len()];
        let mut error_joined = vec![false; data.errors.len()];
        let tolerance = self.window + SECOND;
        for (ei, kept) in data.errors.iter().enumerate() {
            let e = &kept.error;
            if e.kind != Kind::NoLive {
                continue;
            }
            let upstream = e.upstream.as_deref().map(upstream_host);
            let f = &data.failures;
            let (from, to) = (e.time_ms - tolerance, e.time_ms + tolerance);
            let candidates: Vec<usize> = if data.has_connection {
                e.connection
                    .and_then(|c| self.failures_by_conn.get(&c))
                    .map(|list| {
                        list.iter()
                            .copied()
                            .filter(|fi| (from..=to).contains(&f[*fi].entry.time_ms))
                            .collect()
                    })
                    .unwrap_or_default()
            } else {
                (f.partition_point(|x| x.entry.time_ms < from)
                    ..f.partition_point(|x| x.entry.time_ms <= to))
                    .collect()
            };
            let mut best: Option<(i64, usize)> = None;
            for fi in candidates {
                let a = &f[fi].entry;
                let Some(name) = self.refused[fi] else {
                    continue;
                };
                if joined[fi].is_some() || upstream.is_some_and(|u| u != name) {
                    continue;
                }
                let same = if data.has_connection {
                    true
                } else if data.has_request {
                    same_if_known(self.requests[fi].as_deref(), e.request.as_deref())
                        && same_if_known(a.remote_addr.as_deref(), e.client.as_deref())
                } else {
                    true
                };
                let distance = (a.time_ms - e.time_ms).abs();
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
    fn own_lines(&self, key: &RequestKey<'_>, t: i64, skip: Option<usize>) -> Vec<usize> {
        if key.connection.is_none() && key.request.is_none() {
            return Vec::new();
        }
        let (from, to) = (t - self.window - SECOND, t + SECOND);
        let in_time = |ei: &usize| {
            Some(*ei) != skip && (from..=to).contains(&self.data.errors[*ei].error.time_ms)
        };
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
                let e = &self.data.errors[*ei].error;
                matches!(e.kind, Kind::PeerError | Kind::Disabled)
                    && e.request.is_some()
                    && same_if_known(key.request.as_deref(), e.request.as_deref())
                    && same_if_known(key.client, e.client.as_deref())
            })
            .collect()
    }

    fn skeleton_of_access(&self, fi: usize, joined: Option<usize>) -> Skeleton {
        let f = &self.data.failures[fi];
        let a = &f.entry;
        let hops = last_group_hops(&a.upstream_addr);
        let first_addr = hops.iter().find_map(|h| match h {
            Hop::Addr(x) => Some(x.to_string()),
            Hop::Name(_) => None,
        });
        let (shape, upstream) = match hops.last() {
            Some(Hop::Name(n)) if first_addr.is_some() => (Shape::TwoHop, Some(n.to_string())),
            Some(Hop::Name(n)) => (Shape::OneHop, Some(n.to_string())),
            Some(Hop::Addr(x)) => (
                Shape::Address,
                self.data.timeline.upstream_of(x).map(str::to_string),
            ),
            None => (Shape::NoUpstream, None),
        };
        let joined_error = joined.map(|ei| &self.data.errors[ei].error);
        let key = RequestKey {
            connection: a.connection.or(joined_error.and_then(|e| e.connection)),
            request: a.request.as_deref().map(access::unescape),
            client: a.remote_addr.as_deref(),
        };
        let mut own_errors: Vec<usize> = joined.into_iter().collect();
        own_errors.extend(self.own_lines(&key, a.time_ms, joined));
        own_errors.sort_unstable();
        Skeleton {
            time_ms: a.time_ms,
            time_text: a.time_text.clone(),
            status: a.status,
            request: a.request.clone().unwrap_or_default(),
            upstream,
            upstream_addr: a.upstream_addr.clone(),
            shape,
            first_addr,
            access: Some(fi),
            own_errors,
        }
    }

    fn skeleton_of_error(&self, ei: usize) -> Skeleton {
        let e = &self.data.errors[ei].error;
        // The line's time has whole seconds: look from the middle of it.
        let t = e.time_ms + SECOND / 2;
        let key = RequestKey {
            connection: e.connection,
            request: e.request.clone(),
            client: e.client.as_deref(),
        };
        let own = self.own_lines(&key, t, Some(ei));
        let first_addr = own.iter().find_map(|i| {
            let host = upstream_host(self.data.errors[*i].error.upstream.as_deref()?);
            access::is_address(host).then(|| host.to_string())
        });
        let mut own_errors = vec![ei];
        own_errors.extend(own);
        own_errors.sort_unstable();
        Skeleton {
            time_ms: t,
            time_text: e.time_text.clone(),
            status: 502,
            request: e.request.clone().unwrap_or_default(),
            upstream: e.upstream.as_deref().map(|u| upstream_host(u).to_string()),
            upstream_addr: String::new(),
            shape: if first_addr.is_some() {
                Shape::TwoHop
            } else {
                Shape::OneHop
            },
            first_addr,
            access: None,
            own_errors,
        }
    }

    /// Whether an error line that names a peer (or nothing) concerns `u`.
    fn concerns(&self, kept: &KeptError, u: &str) -> bool {
        let timeline = &self.data.timeline;
        match kept.error.upstream.as_deref().map(upstream_host) {
            None => true,
            Some(host) if access::is_address(host) => {
                timeline.in_universe(u, host) || !timeline.is_known_peer(host)
            }
            Some(host) => host == u,
        }
    }

    fn resolver_concerns(&self, name: &str, u: &str) -> bool {
        name == u || !self.data.timeline.is_name(name)
    }

    fn decide(&self, s: &Skeleton, refusals: &BTreeMap<&str, Vec<i64>>) -> Incident {
        let t = s.time_ms;
        let w = self.window;
        let timeline = &self.data.timeline;
        let (before, after) = match &s.upstream {
            Some(u) => (
                timeline.seen(u, t - w, t - 1),
                timeline.seen(u, t + 1, t + w),
            ),
            None => (BTreeSet::new(), BTreeSet::new()),
        };
        let mut incident = Incident {
            time_ms: t,
            time_text: s.time_text.clone(),
            status: s.status,
            request: s.request.clone(),
            upstream: s.upstream.clone().unwrap_or_else(|| "-".to_string()),
            upstream_addr: s.upstream_addr.clone(),
            shape: s.shape,
            family: Family::Other,
            reason: String::new(),
            access: s.access,
            own_errors: s.own_errors.clone(),
            nearby: Vec::new(),
            before: before.iter().cloned().collect(),
            after: after.iter().cloned().collect(),
        };
        let u = match (&s.upstream, s.shape) {
            (Some(u), Shape::OneHop | Shape::TwoHop) => u.as_str(),
            (_, Shape::Address) => {
                incident.reason = "the last attempt reached a peer: the peer's own failure".into();
                incident.nearby = self.nearby(s, s.upstream.as_deref());
                return incident;
            }
            _ => {
                incident.reason = "no upstream name to look at".into();
                return incident;
            }
        };
        incident.nearby = self.nearby(s, Some(u));
        let after_known = !after.is_empty();
        let first_left = s.shape == Shape::TwoHop
            && after_known
            && s.first_addr.as_ref().is_some_and(|a| !after.contains(a));
        let changed = (!before.is_empty() && after_known && before != after) || first_left;
        // Addresses that left the set: their failures are the change itself.
        let mut left: BTreeSet<&str> = if after_known {
            before.difference(&after).map(String::as_str).collect()
        } else {
            BTreeSet::new()
        };
        if first_left {
            left.extend(s.first_addr.as_deref());
        }
        let window_before = self.errors_between(t - w, t);
        let resolver =
            window_before
                .clone()
                .find_map(|ei| match &self.data.errors[ei].error.kind {
                    Kind::Resolver { name, .. } if self.resolver_concerns(name, u) => {
                        Some(name.clone())
                    }
                    _ => None,
                });
        // Other refusals of `u` in the window, either side (the list holds
        // this incident too).
        let repeats = refusals.get(u).is_some_and(|times| {
            times.partition_point(|x| *x <= t + w) - times.partition_point(|x| *x < t - w) > 1
        });
        let disabled = window_before.clone().find(|ei| {
            let kept = &self.data.errors[*ei];
            kept.error.kind == Kind::Disabled
                && !s.own_errors.contains(ei)
                && self.concerns(kept, u)
                && !kept
                    .error
                    .upstream
                    .as_deref()
                    .is_some_and(|v| left.contains(upstream_host(v)))
        });
        let set = |s: &BTreeSet<String>| {
            if s.is_empty() {
                "{}".to_string()
            } else {
                format!("{{{}}}", s.iter().cloned().collect::<Vec<_>>().join(", "))
            }
        };
        let change = format!("addresses {} -> {}", set(&before), set(&after));
        let (family, reason) = if let Some(name) = resolver {
            (
                Family::Empty,
                format!("{name} could not be resolved just before"),
            )
        } else if timeline.has_addresses(u) && !after_known && repeats {
            (
                Family::Empty,
                format!("no address of {u} served afterwards, and its refusals repeat"),
            )
        } else if let Some(ei) = disabled {
            let peer = self.data.errors[ei]
                .error
                .upstream
                .as_deref()
                .map_or("a peer", upstream_host);
            (
                Family::Unavailable,
                format!("{peer} was temporarily disabled (max_fails) just before"),
            )
        } else if !changed && before.len() >= 2 {
            (
                Family::Unavailable,
                format!(
                    "no address change and {} peers: all down ({change})",
                    before.len()
                ),
            )
        } else if changed && s.shape == Shape::TwoHop {
            (
                Family::GenerationRetry,
                match s.first_addr.as_deref().filter(|_| first_left) {
                    Some(first) => format!(
                        "retry refused after {first} failed, and {first} served no more \
                         ({change})"
                    ),
                    None => format!("retry refused while {change}"),
                },
            )
        } else if changed {
            (
                Family::GenerationFirst,
                format!("selection refused while {change}"),
            )
        } else {
            (Family::Other, format!("no address change seen ({change})"))
        };
        incident.family = family;
        incident.reason = reason;
        incident
    }

    /// Resolver, disabled and peer-error lines about `u` in the window,
    /// other than the incident's own.
    fn nearby(&self, s: &Skeleton, u: Option<&str>) -> Vec<usize> {
        let t = s.time_ms;
        self.errors_between(t - self.window, t + self.window)
            .filter(|ei| !s.own_errors.contains(ei))
            .filter(|ei| {
                let kept = &self.data.errors[*ei];
                match (&kept.error.kind, u) {
                    (Kind::Resolver { name, .. }, Some(u)) => self.resolver_concerns(name, u),
                    (Kind::Disabled | Kind::PeerError, Some(u)) => self.concerns(kept, u),
                    (Kind::Resolver { .. } | Kind::Disabled | Kind::PeerError, None) => true,
                    _ => false,
                }
            })
            .take(NEARBY_MAX)
            .collect()
    }
}

/// Equal when both are known; true when either is unknown.
fn same_if_known(a: Option<&str>, b: Option<&str>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => a == b,
        _ => true,
    }
}
