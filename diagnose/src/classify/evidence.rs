//! The lookups the families' rules share: whether a line concerns an
//! upstream, a peer out of service (`unavailable`), an NXDOMAIN for the
//! upstream's name, a flip of its served address set, and the nearby lines
//! an incident shows.

use std::collections::BTreeSet;

use super::{
    Classifier, Family, Skeleton, Verdict, MIN_SLICE_ENTRIES, NEARBY_MAX, SECOND, SLICE_SPAN,
};
use crate::access;
use crate::collect::{ErrorKind, KeptError};

impl<'a> Classifier<'a> {
    /// Whether a disabled or peer-error line is about one of `u`'s peers:
    /// an address of `u`'s universe (through the configuration, the
    /// requests it served, or `$upstream_addr` groups). An address no
    /// upstream is known to hold counts only in the logs of one upstream:
    /// with several, another upstream's failing peer is no evidence about
    /// `u`.
    pub(super) fn concerns(&self, kept: &KeptError, u: &str) -> bool {
        let timeline = &self.data.timeline;
        match self.data.error_upstream(kept) {
            None => false,
            Some(host) if access::is_address(host) => {
                // One upstream: its universe is every address anyway.
                timeline.names().len() == 1 || timeline.in_universe(u, host)
            }
            Some(host) => host == u,
        }
    }

    /// Whether a resolver line for the name `name` (an id) is about `u`.
    pub(super) fn resolver_concerns(&self, name: u32, u: &str) -> bool {
        self.resolves.get(&name).is_some_and(|set| set.contains(u))
    }

    /// `unavailable`, if a peer of `u` is out of service at `t` (every
    /// untried peer of `held`, where it has any: see
    /// [`Classifier::down_peer`]) and `u` has no `backup` server (nginx
    /// turns to the backups when its primaries are out).
    pub(super) fn unavailable(
        &self,
        s: &Skeleton,
        u: &str,
        t: i64,
        peer_errors: bool,
        held: Option<&BTreeSet<u32>>,
    ) -> Option<Verdict> {
        // With backups, a primary out of service sends nginx to the
        // backups: only the backups' lines count, where the primaries are
        // known (static); else none does.
        let options = &self.data.options;
        if options.with_backup.contains(u) && !options.primary_peers.contains_key(u) {
            return None;
        }
        let (ei, others) = self.down_peer(s, u, t, peer_errors, held)?;
        let kept = &self.data.errors[ei];
        let peer = self.data.error_upstream(kept).unwrap_or("a peer");
        let what = match kept.kind {
            ErrorKind::Disabled => "was temporarily disabled (max_fails)",
            _ => "failed",
        };
        let and_others = match others {
            0 => String::new(),
            n => format!(
                ", as {n} other peer{} of the list the request had not tried",
                if n == 1 { "" } else { "s" }
            ),
        };
        Some((
            Family::Unavailable,
            format!(
                "{peer} {what} at {} and has not served since{and_others}",
                self.data.error_time_text(kept)
            ),
            Some(ei),
        ))
    }

    /// The latest NXDOMAIN (`(3: Host not found)`) line for a name of `u`
    /// whose second overlaps `[from, to]`, and the name.
    pub(super) fn nxdomain_between(&self, u: &str, from: i64, to: i64) -> Option<(usize, &'a str)> {
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
    /// under light traffic do not look like a change. `statics` (U's static
    /// peers) are left out of the sets: they never enter or leave.
    pub(super) fn flip(
        &self,
        u: &str,
        t: i64,
        statics: &BTreeSet<u32>,
    ) -> Option<(BTreeSet<u32>, BTreeSet<u32>)> {
        let w = self.window;
        let timeline = &self.data.timeline;
        let full = |s: &crate::timeline::Slice| s.total() >= MIN_SLICE_ENTRIES;
        let just_before = timeline.slices(u, t - 2 * w, t - w - 1);
        let before_set: BTreeSet<u32> = just_before
            .iter()
            .flat_map(|s| s.set())
            .filter(|id| !statics.contains(id))
            .collect();
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
                .map(|s| {
                    let mut set = s.set();
                    set.retain(|id| !statics.contains(id));
                    set
                }),
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
    /// own line nor about a peer it tried (where `held` has a peer it did
    /// not try), with that address among `held` (when given), and not
    /// serving since (a success re-enables a peer). Where `held` has peers
    /// the request did not try, each of them must be so out (the latest
    /// such line is returned, with how many other peers were so out).
    fn down_peer(
        &self,
        s: &Skeleton,
        u: &str,
        t: i64,
        peer_errors: bool,
        held: Option<&BTreeSet<u32>>,
    ) -> Option<(usize, usize)> {
        let timeline = &self.data.timeline;
        let untried_held = held.is_some_and(|h| {
            h.iter()
                .any(|id| !s.tried.iter().any(|a| timeline.addr(*id) == a))
        });
        // An error line's time is its second's start: `t`'s own second is
        // in.
        let mut out = self
            .errors_between(t - self.lookback(u), t)
            .rev()
            .filter(|ei| {
                let kept = &self.data.errors[*ei];
                let counts = match kept.kind {
                    ErrorKind::Disabled => true,
                    ErrorKind::PeerError => peer_errors && self.fails_enough(u, *ei, t),
                    _ => false,
                };
                if !counts || s.own_errors.contains(ei) || !self.concerns(kept, u) {
                    return false;
                }
                let Some(host) = self.data.error_upstream(kept) else {
                    return false;
                };
                if self.data.options.is_primary(u, host) {
                    return false;
                }
                // A peer the request tried is skipped by its retry anyway:
                // where the list held another peer, its being out is not
                // why the retry was refused. (Where traffic showed no
                // other, the list's others, which a retry needs, were not
                // serving: the tried peer failing is the sign of that.)
                if s.tried.iter().any(|a| a == host) && untried_held {
                    return false;
                }
                let id = timeline.addr_id(host);
                if held.is_some_and(|h| id.is_none_or(|id| !h.contains(&id))) {
                    return false;
                }
                let since = kept.time_ms + SECOND;
                let served_since = id.is_some_and(|id| {
                    since < t && timeline.seen_ids(u, since, t - 1).contains(&id)
                });
                !served_since
            });
        let Some(held) = held.filter(|_| untried_held) else {
            return out.next().map(|ei| (ei, 0));
        };
        // A retry is refused for want of a peer only if every peer the list
        // held that the request had not tried was out: one with no line
        // could have taken it, so a line about another says nothing.
        let lines: Vec<usize> = out.collect();
        let mut latest = None;
        let mut out_of_service = 0;
        for id in held {
            let addr = timeline.addr(*id);
            if s.tried.iter().any(|a| a == addr) {
                continue;
            }
            let line = lines
                .iter()
                .copied()
                .find(|ei| self.data.error_upstream(&self.data.errors[*ei]) == Some(addr))?;
            latest = latest.max(Some(line));
            out_of_service += 1;
        }
        latest.map(|ei| (ei, out_of_service - 1))
    }

    /// Whether the peer error `ei` of `u` takes its peer out by `t`: `u`'s
    /// `max_fails` (1 unless the configuration says otherwise; 0 never)
    /// errors of that peer, about `u`, within fail_timeout before `t`, none
    /// followed by a success of the peer before `t` (a success resets
    /// nginx's count).
    fn fails_enough(&self, u: &str, ei: usize, t: i64) -> bool {
        let max_fails = self.data.options.max_fails.get(u).copied().unwrap_or(1);
        if max_fails <= 1 {
            return max_fails == 1;
        }
        let timeline = &self.data.timeline;
        let kept = &self.data.errors[ei];
        let host = self.data.error_upstream(kept);
        let id = host.and_then(|h| timeline.addr_id(h));
        let errors = self
            .errors_between(t - self.lookback(u), t)
            .filter(|e| {
                let other = &self.data.errors[*e];
                other.kind == ErrorKind::PeerError
                    && self.data.error_upstream(other) == host
                    && self.concerns(other, u)
            })
            .filter(|e| {
                let since = self.data.errors[*e].time_ms + SECOND;
                id.is_none_or(|id| since >= t || !timeline.seen_ids(u, since, t - 1).contains(&id))
            })
            .count();
        errors >= max_fails as usize
    }

    /// Resolver, disabled and peer-error lines about `u` around `t`, other
    /// than the incident's own; `first` (the deciding line) leads.
    pub(super) fn nearby(&self, s: &Skeleton, u: Option<&str>, first: Option<usize>) -> Vec<usize> {
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
