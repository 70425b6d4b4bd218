//! Which addresses served each upstream, second by second: the compact
//! record the classifier asks "did the address set change around t?".
//!
//! Memory grows with the span of time and the number of distinct
//! addresses, not with the number of log lines: per second, each address
//! that was the last hop of an entry is kept once, with the first and last
//! millisecond it was seen in that second.
//!
//! An upstream's *universe* is the set of addresses that appeared in the
//! same `$upstream_addr` group as its name (`"A:80, be"` puts `A:80` in
//! `be`'s universe). If the logs name exactly one upstream, every address
//! hop belongs to it.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::access::{groups, hops, Hop};

/// One address seen in one second.
#[derive(Clone, Copy, Debug)]
struct Seen {
    addr: u32,
    first_ms: u16,
    last_ms: u16,
}

/// The per-second address record and the upstream universes.
#[derive(Clone, Debug, Default)]
pub struct Timeline {
    ids: HashMap<String, u32>,
    addrs: Vec<String>,
    seconds: BTreeMap<i64, Vec<Seen>>,
    universes: BTreeMap<String, BTreeSet<u32>>,
    every_address: BTreeSet<u32>,
    names: BTreeSet<String>,
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
        id
    }

    /// Learns from one access entry (any status): the universes of the
    /// names in its groups, and, if its last hop is an address, that the
    /// address served at `time_ms`.
    pub fn observe(&mut self, upstream_addr: &str, time_ms: i64) {
        let mut last: Option<Hop<'_>> = None;
        for group in groups(upstream_addr) {
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
                        u.extend(ids.iter().copied());
                    }
                }
            }
            last = group_hops.last().copied();
        }
        if let Some(Hop::Addr(a)) = last {
            let id = self.intern(a);
            self.record(id, time_ms);
        }
    }

    fn record(&mut self, addr: u32, time_ms: i64) {
        let second = time_ms.div_euclid(1_000);
        let ms = u16::try_from(time_ms.rem_euclid(1_000)).unwrap_or(0);
        let slot = self.seconds.entry(second).or_default();
        match slot.iter_mut().find(|s| s.addr == addr) {
            Some(s) => {
                s.first_ms = s.first_ms.min(ms);
                s.last_ms = s.last_ms.max(ms);
            }
            None => slot.push(Seen {
                addr,
                first_ms: ms,
                last_ms: ms,
            }),
        }
    }

    /// Notes an upstream name (from a hop or an error line's `upstream:`).
    pub fn note_name(&mut self, name: &str) {
        if !self.names.contains(name) {
            self.names.insert(name.to_string());
            self.universes.insert(name.to_string(), BTreeSet::new());
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

    /// Whether `addr` belongs to `name`'s universe.
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

    /// The first upstream (by name) whose universe holds `addr`.
    pub fn upstream_of(&self, addr: &str) -> Option<&str> {
        self.names
            .iter()
            .find(|n| self.in_universe(n, addr))
            .map(String::as_str)
    }

    /// The addresses of `name` seen (as an entry's last hop) between
    /// `from_ms` and `to_ms`, both included.
    pub fn seen(&self, name: &str, from_ms: i64, to_ms: i64) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        let Some(universe) = self.universe(name) else {
            return out;
        };
        if from_ms > to_ms {
            return out;
        }
        let range = from_ms.div_euclid(1_000)..=to_ms.div_euclid(1_000);
        for (second, seen) in self.seconds.range(range) {
            for s in seen {
                let first = second * 1_000 + i64::from(s.first_ms);
                let last = second * 1_000 + i64::from(s.last_ms);
                let inside = |t: i64| (from_ms..=to_ms).contains(&t);
                if (inside(first) || inside(last)) && universe.contains(&s.addr) {
                    if let Some(a) = self.addrs.get(s.addr as usize) {
                        out.insert(a.clone());
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn universes_and_seconds() {
        let mut t = Timeline::new();
        t.observe("10.0.0.1:80", 1_000);
        t.observe("10.0.0.1:80, be", 1_500);
        t.observe("10.0.0.9:80, api", 1_600);
        t.observe("10.0.0.2:80", 2_400);
        t.observe("10.0.0.9:80", 2_500);
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
        t.observe("10.0.0.1:80", 1_000);
        t.observe("10.0.0.2:80", 1_200);
        t.observe("be", 1_300);
        assert!(t.has_addresses("be"));
        assert_eq!(t.seen("be", 0, 2_000).len(), 2);
        t.observe("other", 1_400);
        assert!(
            !t.has_addresses("be"),
            "two names: only shared groups count"
        );
    }

    #[test]
    fn first_and_last_in_a_second() {
        let mut t = Timeline::new();
        t.observe("be", 0);
        t.observe("10.0.0.1:80", 5_100);
        t.observe("10.0.0.1:80", 5_900);
        assert_eq!(t.seen("be", 5_500, 5_950).len(), 1, "last at 5_900");
        assert_eq!(t.seen("be", 5_000, 5_200).len(), 1, "first at 5_100");
        assert!(t.seen("be", 5_200, 5_800).is_empty());
    }
}
