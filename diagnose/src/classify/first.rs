//! A refused first selection (1-hop, `"be"`): `empty`, `unavailable` or
//! `generation-first` (the race), or, with nothing seen, `unseen.rs`.

use std::collections::BTreeSet;

use super::{Around, Classifier, Family, Skeleton, Verdict, HELD_MS};

impl Classifier<'_> {
    /// A refused first selection (1-hop), from the run of refusals it
    /// belongs to (refusals of the upstream with no address served
    /// between them), which began at `r0`:
    ///
    /// 1. with `$request_time`, an address that came while it was in
    ///    flight: `generation-first`;
    /// 2. where the configuration gives the upstream no static peer (a
    ///    list with one is never empty): an NXDOMAIN for each of its names
    ///    within fail_timeout before `r0` with nothing selected since the
    ///    second of the earliest (a request that began before it and ended
    ///    after it does not count), in access logs that cover that span;
    ///    or nothing ever served before `r0` while the name serves later
    ///    (not resolved yet): `empty`;
    /// 3. a peer disabled or failing within fail_timeout before `r0` and
    ///    not serving since: `unavailable`;
    /// 4. a change in the window: `generation-first`; else, with peers
    ///    seen in the window before, `unavailable` (down, `max_conns`:
    ///    nothing logged); with none, only evidence decides
    ///    (`decide_unseen`: `empty`, `unavailable` or `unknown`).
    pub(super) fn decide_first(&self, s: &Skeleton, u: &str, around: &Around) -> Verdict {
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
                let at = run.partition_point(|(r, ..)| *r <= t);
                at.checked_sub(1).map(|i| run[i].1)
            })
            .unwrap_or(t)
            .min(t);
        // A list with a static peer is never empty. An address that ended
        // a request after the NXDOMAIN was often selected before it (an old
        // peer still answering, or failing and disabled): only one surely
        // selected since says the list held it (`emptied.rs`, shared with
        // `unseen.rs`).
        if self.statics(s, u).is_empty() {
            if let Some(e) = self
                .nxdomains(u, Some(r0 - self.lookback(u)), r0)
                .filter(|e| e.emptied())
            {
                return self.emptied_verdict(&e, u, None);
            }
            if self.first_served(u).is_none_or(|f| f > r0)
                && !timeline.seen_ids(u, t, t + self.window).is_empty()
            {
                return (
                    Family::Empty,
                    format!("no address of {u} served before, and one serves just after: the name had not resolved yet"),
                    None,
                );
            }
        }
        // Every line counts here, also for an address a change moved: a
        // run of refusals with nothing served is not a change in flight.
        // The run's cause is read where it began, unless it has lasted
        // longer than fail_timeout: then nginx tried the peers again, and
        // the evidence must be as fresh as the refusal.
        let at = if t - r0 > self.lookback(u) { t } else { r0 };
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
        // Nothing seen: "no change seen" says nothing (`unseen.rs`).
        if around.peers == 0 {
            return self.decide_unseen(s, u, "selection refused");
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
}
