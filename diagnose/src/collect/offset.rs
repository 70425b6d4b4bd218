//! The error log's offset from UTC: where it came from ([`OffsetBasis`]),
//! and learning it from `no live upstreams` lines paired with their access
//! 502s.

use std::collections::{BTreeMap, HashMap};

use super::records::NONE;
use super::{Collected, ErrorKind, Failure};
use crate::access::{self, Hop};

/// Where the error log's offset came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OffsetBasis {
    /// `--error-log-utc-offset`.
    Given,
    /// `no live upstreams` lines paired with their access 502s (by
    /// connection, or by request line and client): the time difference.
    Pairs,
    /// The zone of the access log's `$time_local` / `$time_iso8601`:
    /// nginx writes both logs in its local time.
    AccessZone,
    /// Nothing to learn from: UTC.
    Default,
}

/// Zone offsets run from -12:00 to +14:00 in steps of 15 minutes.
const OFFSET_STEP_S: i32 = 900;

/// Learns the error log's offset from `no live upstreams` lines (their
/// times read as UTC) and the access 502s of the same requests: every
/// line votes for each whole-quarter-hour offset that puts a matching 502
/// (same connection, else same request line and client) within a second
/// and a half of it. The offset most lines vote for wins if at least half
/// the voting lines, and more than any other offset, back it. Returns the
/// offset, its votes and the number of voting lines.
pub(super) fn learn_offset(data: &Collected) -> Option<(i32, usize, usize)> {
    const MAX_LINES: usize = 20_000;
    const TOLERANCE_MS: i64 = 1_500;
    let refused = |f: &Failure| {
        f.status == 502
            && matches!(
                access::last_group_hops(data.upstream_addr(f)).last(),
                Some(Hop::Name(_))
            )
    };
    let mut by_key: HashMap<(u64, u64), Vec<i64>> = HashMap::new();
    let join_key = |conn: Option<u64>, req: Option<u64>, client: Option<u64>| {
        if data.has_connection {
            conn.map(|c| (c, 0))
        } else if data.has_request {
            req.map(|r| (r, client.unwrap_or(NONE)))
        } else {
            None
        }
    };
    for f in data.failures.iter().filter(|f| refused(f)) {
        if let Some(k) = join_key(f.connection(), f.request_key(), f.client_key()) {
            by_key.entry(k).or_default().push(f.time_ms);
        }
    }
    if by_key.is_empty() {
        return None;
    }
    let mut votes: BTreeMap<i32, usize> = BTreeMap::new();
    let mut voters = 0;
    let lines = data.errors.iter().filter(|e| e.kind == ErrorKind::NoLive);
    for e in lines.take(MAX_LINES) {
        let Some(times) =
            join_key(e.connection(), e.request_key(), e.client_key()).and_then(|k| by_key.get(&k))
        else {
            continue;
        };
        let mut voted = false;
        for step in -48..=56 {
            let offset = step * OFFSET_STEP_S;
            // The line's second, shifted, and its middle.
            let t = e.time_ms - i64::from(offset) * 1_000 + 500;
            let i = times.partition_point(|x| *x < t - TOLERANCE_MS);
            if times.get(i).is_some_and(|x| *x <= t + TOLERANCE_MS) {
                *votes.entry(offset).or_default() += 1;
                voted = true;
            }
        }
        voters += usize::from(voted);
    }
    let mut ranked: Vec<(usize, i32)> = votes.into_iter().map(|(o, n)| (n, o)).collect();
    ranked.sort_unstable_by(|a, b| b.cmp(a));
    let (best, offset) = *ranked.first()?;
    let runner_up = ranked.get(1).map_or(0, |r| r.0);
    let needed = if data.has_connection { 1 } else { 3 };
    (best >= needed && best * 2 >= voters && best > runner_up).then_some((offset, best, voters))
}
