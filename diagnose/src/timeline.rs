//! Which addresses served each upstream, second by second: the compact
//! record the classifier asks "did the address set change around t?".
//!
//! Memory grows with the span of time and the number of distinct
//! addresses, not with the number of log lines: per second, each address
//! that was the last hop of an entry is kept once, with the first and last
//! millisecond it was seen in that second and how many entries it served.
//!
//! An upstream's *universe* is the set of addresses that appeared in the
//! same `$upstream_addr` group as its name (`"A:80, be"` puts `A:80` in
//! `be`'s universe). An entry that ends with an address does not say which
//! upstream served it, so an address *serves for* an upstream only when it
//! is in that upstream's universe and no other's: an address two upstreams
//! share says nothing about either one's changes. If the logs name exactly
//! one upstream, every address belongs to it.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::access::{groups, hops, Hop};

/// One address seen in one second.
#[derive(Clone, Copy, Debug)]
struct Seen {
    addr: u32,
    first_ms: u16,
    last_ms: u16,
    count: u32,
}

/// Who an address serves for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owner {
    /// No upstream's universe holds it.
    Nobody,
    /// Exactly one upstream's (index into `name_list`).
    One(u32),
    /// Several upstreams'.
    Shared,
}

/// The addresses one upstream served in one second, with how many entries
/// each served.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slice {
    /// The second (since the epoch).
    pub second: i64,
    /// Address ids and counts.
    pub addrs: Vec<(u32, u32)>,
}

impl Slice {
    /// How many entries the second's addresses served.
    pub fn total(&self) -> u64 {
        self.addrs.iter().map(|(_, n)| u64::from(*n)).sum()
    }

    /// The address ids.
    pub fn set(&self) -> BTreeSet<u32> {
        self.addrs.iter().map(|(a, _)| *a).collect()
    }
}

/// The per-second address record and the upstream universes.
#[derive(Clone, Debug, Default)]
pub struct Timeline {
    ids: HashMap<String, u32>,
    addrs: Vec<String>,
    seconds: BTreeMap<i64, Vec<Seen>>,
    /// The same record by when each last hop was *selected*, as early as
    /// the entry tells: at the request's start with `$request_time` (the
    /// selection came at or after it), else at the entry's end. An
    /// address that ended a request after a change may have been selected
    /// long before it; this record says when the list surely held it.
    selected: BTreeMap<i64, Vec<Seen>>,
    /// Addresses the configuration (or a request's route) gives an
    /// upstream, joined to its universe once the logs name it.
    configured: BTreeMap<String, BTreeSet<u32>>,
    universes: BTreeMap<String, BTreeSet<u32>>,
    every_address: BTreeSet<u32>,
    names: BTreeSet<String>,
    /// Filled by [`Timeline::seal`]: the names in order, and per address
    /// who it serves for.
    name_list: Vec<String>,
    owners: Vec<Owner>,
    sealed: bool,
}

impl Timeline {
    /// An empty timeline.
    pub fn new() -> Timeline {
        Timeline::default()
    }

    fn intern(&mut self, addr: &str) -> u32 {
        if let Some(id) = self.ids.get(addr) {
            return *id;
        }
        let id = u32::try_from(self.addrs.len()).unwrap_or(u32::MAX);
        self.addrs.push(addr.to_string());
        self.ids.insert(addr.to_string(), id);
        self.sealed = false;
        id
    }

    /// Learns from one access entry (any status): the universes of the
    /// names in its groups, and, if its last hop is an address, that the
    /// address served at `time_ms`. With `start_ms` (the request's start,
    /// from `$request_time`), also that the first hop of the last group,
    /// if an address, was selected then: the list held it when the
    /// request began.
    pub fn observe(&mut self, upstream_addr: &str, time_ms: i64, start_ms: Option<i64>) {
        let mut last: Option<Hop<'_>> = None;
        let mut first: Option<Hop<'_>> = None;
        let mut n_groups = 0;
        for group in groups(upstream_addr) {
            n_groups += 1;
            let group_hops = hops(group);
            let mut ids = Vec::new();
            for hop in &group_hops {
                if let Hop::Addr(a) = hop {
                    let id = self.intern(a);
                    self.every_address.insert(id);
                    ids.push(id);
                }
            }
            for hop in &group_hops {
                if let Hop::Name(n) = hop {
                    self.note_name(n);
                    if let Some(u) = self.universes.get_mut(*n) {
                        for id in &ids {
                            self.sealed &= !u.insert(*id);
                        }
                    }
                }
            }
            last = group_hops.last().copied();
            first = group_hops.first().copied();
        }
        if let Some(Hop::Addr(a)) = last {
            let id = self.intern(a);
            record(&mut self.seconds, id, time_ms, 1);
            let at = start_ms.filter(|s| *s < time_ms).unwrap_or(time_ms);
            record(&mut self.selected, id, at, 1);
        }
        // The start sighting: only with one group (after an internal
        // redirect the last group's first selection came later), and not
        // counted as an entry, so one request never makes a set of two.
        if let (Some(Hop::Addr(a)), Some(start), 1) = (first, start_ms, n_groups) {
            if start < time_ms {
                let id = self.intern(a);
                record(&mut self.seconds, id, start, 0);
            }
        }
    }

    /// Learns from an entry the configuration routes to upstream `name`
    /// (its request's location proxies there): the addresses of a single
    /// `$upstream_addr` group with no name in it are that upstream's
    /// peers. After an internal redirect (two groups) the route says
    /// nothing about which group is whose.
    pub fn route(&mut self, upstream_addr: &str, name: &str) {
        let mut only = None;
        for (i, group) in groups(upstream_addr).enumerate() {
            if i > 0 {
                return;
            }
            only = Some(group);
        }
        let Some(group) = only else { return };
        let group_hops = hops(group);
        if group_hops.iter().any(|h| matches!(h, Hop::Name(_))) {
            return;
        }
        // The logs name the upstream through this request.
        self.note_name(name);
        for hop in group_hops {
            if let Hop::Addr(a) = hop {
                self.own(name, a);
            }
        }
    }

    /// Notes that `addr` is a peer of upstream `name` (a `server ADDRESS`
    /// line of the configuration): it joins the upstream's universe.
    /// It counts only once the logs name the upstream, or show one of its
    /// addresses (see [`Timeline::seal`]): a configured upstream the logs
    /// never mention is not one of theirs.
    pub fn own(&mut self, name: &str, addr: &str) {
        let id = self.intern(addr);
        self.sealed &= !self
            .configured
            .entry(name.to_string())
            .or_default()
            .insert(id);
    }

    /// Notes an upstream name (from a hop or an error line's `upstream:`).
    pub fn note_name(&mut self, name: &str) {
        if !self.names.contains(name) {
            self.names.insert(name.to_string());
            self.universes.insert(name.to_string(), BTreeSet::new());
            self.sealed = false;
        }
    }

    /// Works out who each address serves for; queries call it when the
    /// timeline changed since.
    pub fn seal(&mut self) {
        // A configured upstream one of whose addresses the logs show is
        // named by them.
        let shown: Vec<String> = self
            .configured
            .iter()
            .filter(|(n, ids)| !self.names.contains(*n) && !ids.is_disjoint(&self.every_address))
            .map(|(n, _)| n.clone())
            .collect();
        for n in shown {
            self.note_name(&n);
        }
        for (name, ids) in &self.configured {
            if let Some(u) = self.universes.get_mut(name) {
                u.extend(ids.iter().copied());
            }
        }
        self.name_list = self.names.iter().cloned().collect();
        let single = self.name_list.len() == 1;
        self.owners = (0..self.addrs.len())
            .map(|id| {
                let id = id as u32;
                if single {
                    return Owner::One(0);
                }
                let mut owner = Owner::Nobody;
                for (i, n) in self.name_list.iter().enumerate() {
                    if self.universes.get(n).is_some_and(|u| u.contains(&id)) {
                        owner = match owner {
                            Owner::Nobody => Owner::One(i as u32),
                            _ => Owner::Shared,
                        };
                    }
                }
                owner
            })
            .collect();
        self.sealed = true;
    }

    /// Whether `addr` (an id) serves for `name` alone.
    fn serves_for(&self, name: &str, addr: u32) -> bool {
        if !self.sealed {
            // Not sealed (a caller that skipped it): the slow, exact way.
            return self.universe(name).is_some_and(|u| u.contains(&addr))
                && (self.names.len() == 1
                    || self
                        .universes
                        .iter()
                        .all(|(n, u)| n == name || !u.contains(&addr)));
        }
        match self.owners.get(addr as usize) {
            Some(Owner::One(i)) => {
                self.name_list.get(*i as usize).map(String::as_str) == Some(name)
            }
            _ => false,
        }
    }

    /// Every upstream name seen.
    pub fn names(&self) -> &BTreeSet<String> {
        &self.names
    }

    /// Whether `name` is a known upstream name.
    pub fn is_name(&self, name: &str) -> bool {
        self.names.contains(name)
    }

    fn universe(&self, name: &str) -> Option<&BTreeSet<u32>> {
        if self.names.len() == 1 && self.names.contains(name) {
            Some(&self.every_address)
        } else {
            self.universes.get(name)
        }
    }

    /// Whether any address is known to belong to `name`.
    pub fn has_addresses(&self, name: &str) -> bool {
        self.universe(name).is_some_and(|u| !u.is_empty())
    }

    /// Whether `addr` belongs to `name`'s universe (shared or not).
    pub fn in_universe(&self, name: &str, addr: &str) -> bool {
        match (self.universe(name), self.ids.get(addr)) {
            (Some(u), Some(id)) => u.contains(id),
            _ => false,
        }
    }

    /// Whether `addr` belongs to any universe.
    pub fn is_known_peer(&self, addr: &str) -> bool {
        self.names.iter().any(|n| self.in_universe(n, addr))
    }

    /// The upstream `addr` serves for alone, else the first (by name)
    /// whose universe holds it.
    pub fn upstream_of(&self, addr: &str) -> Option<&str> {
        if let Some(id) = self.ids.get(addr) {
            if let Some(n) = self.names.iter().find(|n| self.serves_for(n, *id)) {
                return Some(n);
            }
        }
        self.names
            .iter()
            .find(|n| self.in_universe(n, addr))
            .map(String::as_str)
    }

    /// The text of an address id.
    pub fn addr(&self, id: u32) -> &str {
        self.addrs.get(id as usize).map_or("?", String::as_str)
    }

    /// The id of an address, if seen.
    pub fn addr_id(&self, addr: &str) -> Option<u32> {
        self.ids.get(addr).copied()
    }

    /// Per second, the addresses serving for `name` seen (as an entry's
    /// last hop) between `from_ms` and `to_ms`, both included; seconds
    /// with none are left out.
    pub fn slices(&self, name: &str, from_ms: i64, to_ms: i64) -> Vec<Slice> {
        let mut out = Vec::new();
        if from_ms > to_ms || !self.names.contains(name) {
            return out;
        }
        let range = from_ms.div_euclid(1_000)..=to_ms.div_euclid(1_000);
        for (second, seen) in self.seconds.range(range) {
            // An address seen first and last at two points of a second
            // is taken as serving between them.
            let addrs: Vec<(u32, u32)> = seen
                .iter()
                .filter(|s| {
                    let first = second * 1_000 + i64::from(s.first_ms);
                    let last = second * 1_000 + i64::from(s.last_ms);
                    first <= to_ms && last >= from_ms && self.serves_for(name, s.addr)
                })
                .map(|s| (s.addr, s.count))
                .collect();
            if !addrs.is_empty() {
                out.push(Slice {
                    second: *second,
                    addrs,
                });
            }
        }
        out
    }

    /// The first time an address serving for `name` was seen.
    pub fn first_seen(&self, name: &str) -> Option<i64> {
        if !self.names.contains(name) {
            return None;
        }
        self.seconds.iter().find_map(|(second, seen)| {
            seen.iter()
                .filter(|s| self.serves_for(name, s.addr))
                .map(|s| second * 1_000 + i64::from(s.first_ms))
                .min()
        })
    }

    /// The latest time at or before `t_ms` an address serving for `name`
    /// was seen (to the millisecond where the second's first or last
    /// sighting falls before `t_ms`), looking back at most `horizon_ms`.
    pub fn last_seen(&self, name: &str, t_ms: i64, horizon_ms: i64) -> Option<i64> {
        self.latest(&self.seconds, name, t_ms, horizon_ms)
    }

    /// The latest time at or before `t_ms` an address serving for `name`
    /// was surely selected (see `selected`), looking back at most
    /// `horizon_ms`.
    pub fn last_selected(&self, name: &str, t_ms: i64, horizon_ms: i64) -> Option<i64> {
        self.latest(&self.selected, name, t_ms, horizon_ms)
    }

    fn latest(
        &self,
        seconds: &BTreeMap<i64, Vec<Seen>>,
        name: &str,
        t_ms: i64,
        horizon_ms: i64,
    ) -> Option<i64> {
        if !self.names.contains(name) {
            return None;
        }
        let from = (t_ms - horizon_ms).div_euclid(1_000);
        for (second, seen) in seconds.range(from..=t_ms.div_euclid(1_000)).rev() {
            let best = seen
                .iter()
                .filter(|s| self.serves_for(name, s.addr))
                .filter_map(|s| {
                    let last = second * 1_000 + i64::from(s.last_ms);
                    let first = second * 1_000 + i64::from(s.first_ms);
                    if last <= t_ms {
                        Some(last)
                    } else {
                        (first <= t_ms).then_some(first)
                    }
                })
                .max();
            if best.is_some() {
                return best;
            }
        }
        None
    }

    /// The ids of the addresses serving for `name` seen between `from_ms`
    /// and `to_ms`, both included.
    pub fn seen_ids(&self, name: &str, from_ms: i64, to_ms: i64) -> BTreeSet<u32> {
        self.slices(name, from_ms, to_ms)
            .iter()
            .flat_map(Slice::set)
            .collect()
    }

    /// The addresses serving for `name` seen (as an entry's last hop)
    /// between `from_ms` and `to_ms`, both included.
    pub fn seen(&self, name: &str, from_ms: i64, to_ms: i64) -> BTreeSet<String> {
        self.seen_ids(name, from_ms, to_ms)
            .into_iter()
            .map(|id| self.addr(id).to_string())
            .collect()
    }

    /// Bytes held (approximately: the allocations' payloads).
    pub fn bytes(&self) -> usize {
        let strings: usize = self.addrs.iter().map(|a| 2 * (a.len() + 24) + 16).sum();
        let seconds: usize = self
            .seconds
            .values()
            .chain(self.selected.values())
            .map(|v| 48 + v.capacity() * std::mem::size_of::<Seen>())
            .sum();
        let universes: usize = self
            .universes
            .iter()
            .map(|(n, u)| n.len() + 48 + 8 * u.len())
            .sum();
        strings + seconds + universes + 8 * self.every_address.len() + 8 * self.owners.len()
    }
}

/// Records that `addr` was seen at `time_ms` in `seconds`, adding
/// `entries` to the second's count.
fn record(seconds: &mut BTreeMap<i64, Vec<Seen>>, addr: u32, time_ms: i64, entries: u32) {
    let second = time_ms.div_euclid(1_000);
    let ms = u16::try_from(time_ms.rem_euclid(1_000)).unwrap_or(0);
    let slot = seconds.entry(second).or_default();
    match slot.iter_mut().find(|s| s.addr == addr) {
        Some(s) => {
            s.first_ms = s.first_ms.min(ms);
            s.last_ms = s.last_ms.max(ms);
            s.count = s.count.saturating_add(entries);
        }
        None => slot.push(Seen {
            addr,
            first_ms: ms,
            last_ms: ms,
            count: entries,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn universes_and_seconds() {
        let mut t = Timeline::new();
        t.observe("10.0.0.1:80", 1_000, None);
        t.observe("10.0.0.1:80, be", 1_500, None);
        t.observe("10.0.0.9:80, api", 1_600, None);
        t.observe("10.0.0.2:80", 2_400, None);
        t.observe("10.0.0.9:80", 2_500, None);
        assert_eq!(
            t.names().iter().map(String::as_str).collect::<Vec<_>>(),
            ["api", "be"]
        );
        assert!(t.in_universe("be", "10.0.0.1:80"));
        assert!(!t.in_universe("be", "10.0.0.9:80"));
        assert!(!t.in_universe("be", "10.0.0.2:80"), "never seen with be");
        assert_eq!(t.upstream_of("10.0.0.9:80"), Some("api"));
        let be: Vec<String> = t.seen("be", 0, 3_000).into_iter().collect();
        assert_eq!(be, ["10.0.0.1:80"]);
        assert!(t.seen("be", 1_001, 3_000).is_empty(), "1_000 is outside");
        assert_eq!(t.seen("api", 2_500, 2_500).len(), 1);
        assert!(t.seen("nope", 0, 3_000).is_empty());
    }

    #[test]
    fn one_name_owns_every_address() {
        let mut t = Timeline::new();
        t.observe("10.0.0.1:80", 1_000, None);
        t.observe("10.0.0.2:80", 1_200, None);
        t.observe("be", 1_300, None);
        assert!(t.has_addresses("be"));
        assert_eq!(t.seen("be", 0, 2_000).len(), 2);
        t.observe("other", 1_400, None);
        assert!(
            !t.has_addresses("be"),
            "two names: only shared groups count"
        );
    }

    #[test]
    fn first_and_last_in_a_second() {
        let mut t = Timeline::new();
        t.observe("be", 0, None);
        t.observe("10.0.0.1:80", 5_100, None);
        t.observe("10.0.0.1:80", 5_900, None);
        assert_eq!(t.seen("be", 5_500, 5_950).len(), 1, "last at 5_900");
        assert_eq!(t.seen("be", 5_000, 5_200).len(), 1, "first at 5_100");
        assert_eq!(
            t.seen("be", 5_200, 5_800).len(),
            1,
            "seen first at 5_100 and last at 5_900: taken as serving between"
        );
        assert!(t.seen("be", 5_950, 5_990).is_empty(), "after the last");
        assert!(t.seen("be", 4_000, 5_099).is_empty(), "before the first");
    }

    #[test]
    fn shared_addresses_serve_for_nobody() {
        let mut t = Timeline::new();
        t.observe("10.0.0.1:80, be", 0, None);
        t.observe("10.0.0.2:80, be", 10, None);
        t.observe("10.0.0.1:80, api", 20, None);
        t.observe("10.0.0.1:80", 1_000, None);
        t.observe("10.0.0.2:80", 1_100, None);
        t.seal();
        assert!(t.in_universe("api", "10.0.0.1:80"));
        assert_eq!(
            t.seen("be", 0, 2_000).into_iter().collect::<Vec<_>>(),
            ["10.0.0.2:80"],
            "10.0.0.1:80 is be's and api's: it says nothing about either"
        );
        assert!(t.seen("api", 0, 2_000).is_empty());
        assert_eq!(t.upstream_of("10.0.0.2:80"), Some("be"));
        let s = t.slices("be", 0, 2_000);
        assert_eq!(s.len(), 1);
        assert_eq!((s[0].second, s[0].total()), (1, 1));
    }
}
