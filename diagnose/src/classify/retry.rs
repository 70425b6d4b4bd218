//! A refused retry (2-hop, `"A:80, be"`): `generation-retry` (the race)
//! or `unavailable` (or, with no peer of its list seen, `unseen.rs`).

use std::collections::BTreeSet;

use super::{Around, Classifier, Family, Skeleton, Verdict, HELD_MS, NEXT_MS};

impl Classifier<'_> {
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
    /// 3. the request tried every peer the list held when it started (two
    ///    or more, each seen serving before; a change then counts only if
    ///    seen by the refusal), or a
    ///    peer of the upstream disabled or failing within fail_timeout and
    ///    not serving since (where the list held peers the request did not
    ///    try, every one of those): `unavailable`;
    /// 4. else a list of one peer (nginx never marks a single peer down)
    ///    or a change seen in the window: `generation-retry`; else
    ///    `unavailable`, or, where no peer of its list was seen, what
    ///    evidence decides (`decide_unseen`: possibly `unknown`).
    ///
    /// In an upstream with `backup` servers and static primaries, a retry
    /// the primaries could not take is refused on the backups' list: the
    /// primaries are counted neither among the peers it held nor among
    /// those that came; nginx marks a backup down even when it is the only
    /// one, so its peer errors count as in a list of two or more.
    pub(super) fn decide_retry(&self, s: &Skeleton, u: &str, around: &Around) -> Verdict {
        let t = s.time_ms;
        let timeline = &self.data.timeline;
        let start = s.start_ms.unwrap_or(t - self.window / 2).min(t);
        // With backups, the static primaries are not in the backups' list
        // a retry is refused on.
        let backups = self.data.options.primary_peers.contains_key(u);
        let primary = |a: &str| self.data.options.is_primary(u, a);
        let mut held = timeline.seen_ids(u, start - HELD_MS, start);
        held.retain(|id| !primary(timeline.addr(*id)));
        let tried: BTreeSet<u32> = s
            .tried
            .iter()
            .filter(|a| !primary(a))
            .filter_map(|a| timeline.addr_id(a))
            .collect();
        // The request tried every peer the list held, each seen serving
        // before it started: nginx refuses the next selection for that
        // alone, so only a change seen by the refusal (not just after it)
        // says the generation moved first. (A tried peer never seen
        // serving may have been failing, or leaving: the rules below.)
        let all_tried = tried.len() >= 2 && held == tried;
        held.extend(tried.iter().copied());
        let until = if all_tried { t } else { t + NEXT_MS };
        let came: Vec<u32> = timeline
            .seen_ids(u, start + 1, until)
            .difference(&held)
            .copied()
            .filter(|id| !primary(timeline.addr(*id)))
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
        if all_tried {
            return (
                Family::Unavailable,
                format!(
                    "retry refused after the request had tried every peer the list held ({}), \
                     with no change by the refusal",
                    names(&held_v)
                ),
                None,
            );
        }
        // No change in flight: a peer out of service counts even where the
        // window saw it leave (a disabled peer stops serving too).
        // A peer error marks a peer down only in a list of two or more
        // (nginx never marks a single peer down); a disabled line is
        // written only then.
        // Only a peer the list held when the request started: one that
        // left with a change before is not why this retry was refused.
        if let Some(v) = self.unavailable(s, u, t, held.len() >= 2 || backups, Some(&held)) {
            return v;
        }
        // A lone backup (never nginx's `single`) is marked down, at
        // max_fails, with a `temporarily disabled` line, which the check
        // above reads: without one, as for a list of one peer, only a
        // change refuses it.
        let one_peer = held.len() == 1;
        if one_peer || around.changed {
            let why = if one_peer {
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
        // No peer of its list seen (only where the request tried nothing
        // but static primaries): only evidence decides (`unseen.rs`).
        if held.is_empty() {
            let what = format!(
                "retry refused after {} failed",
                s.prev_addr.as_deref().unwrap_or("an attempt")
            );
            return self.decide_unseen(s, u, &what);
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
}
