//! The rescue rule, the one decision this project exists for, as a pure
//! state machine.
//!
//! A balancer refused a selection (`NGX_BUSY`). If the peer list's
//! generation is the one the request's balancer state was taken at, the
//! refusal is the list's own (down, failed, `max_conns`, empty) and is only
//! classified. If the generation moved, the refusal is round-robin's
//! generation check (nginx/nginx#1656): with `off` it is counted and left to
//! fail; with `on` the request takes a fresh snapshot (the balancer's own
//! `peer.init` again) and selects again, at most `max` times, keeping the
//! tries it had left.
//!
//! A fresh snapshot knows nothing of the peers the request already tried,
//! so the rule keeps nginx's own retry rule across snapshots: once a
//! request has re-snapshotted, a peer whose address it already tried is
//! handed back unused (the balancer's own `free`, which leaves it marked
//! tried in the fresh state) and the balancer is asked again, the way it
//! would pick among the untried peers on a retry. When none is left, the
//! selection ends in `no live upstreams` (cause `unavailable`), as a
//! request that tried every peer of one snapshot does. A list of a single
//! peer is exempt when the attempt that failed was on a cached connection,
//! as nginx then retries the one peer it keeps no tried bitmap for.
//!
//! [`Snapshot::select`] runs that rule over a [`Balancer`], the few things it
//! needs from nginx, and returns a [`Decision`]: what to answer nginx, what
//! to log and what to count. `module/src/peer/live.rs` implements
//! [`Balancer`] over the real peer connection; the tests implement it with
//! a fake.

use crate::directive::Resnapshot;
use crate::metrics::{Counter, NoLiveCause, COUNTERS};

/// What a balancer's `get` returned, as the rule sees it. The codes are
/// nginx's, carried through untouched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Selection {
    /// A peer was selected (`NGX_OK`), or a cached connection (`NGX_DONE`).
    Peer(isize),
    /// Refused: `NGX_BUSY`, which nginx reports as `no live upstreams`.
    Busy,
    /// Any other code (`NGX_ERROR`, ...).
    Error(isize),
}

impl Selection {
    /// What a balancer's `get` returned: `busy` (`NGX_BUSY`) refuses, `ok`
    /// and `done` (`NGX_OK`, `NGX_DONE`) give a peer, anything else is an
    /// error.
    #[inline]
    pub fn of(rc: isize, busy: isize, ok: isize, done: isize) -> Selection {
        match rc {
            rc if rc == busy => Selection::Busy,
            rc if rc == ok || rc == done => Selection::Peer(rc),
            rc => Selection::Error(rc),
        }
    }

    /// The code nginx gets: the balancer's own, or `busy` (`NGX_BUSY`).
    #[inline]
    pub fn code(self, busy: isize) -> isize {
        match self {
            Selection::Peer(rc) | Selection::Error(rc) => rc,
            Selection::Busy => busy,
        }
    }
}

/// What the rule needs from the request's balancer.
pub trait Balancer {
    /// The peer list's generation now.
    fn generation(&self) -> usize;
    /// Primary and backup peers in the list now.
    fn peer_counts(&self) -> (usize, usize);
    /// Selects a peer with the current balancer state.
    fn select(&mut self) -> Selection;
    /// Replaces the balancer state with a fresh one (the upstream's own
    /// `peer.init` again), and says the generation it was taken at: one
    /// read before and after the init agree on it (the init runs again
    /// when a change landed during it). On `Err(rc)` the previous state is
    /// in place again, and `rc` is the error code to answer with (what
    /// nginx answers a failed `peer.init` with).
    fn reinit(&mut self) -> Result<usize, isize>;
    /// The request's remaining tries (`pc->tries`).
    fn tries(&self) -> usize;
    fn set_tries(&mut self, tries: usize);
    /// How many peers of the list now (primary and backup) have an address
    /// this request already tried: a fresh state's tries count them as
    /// untried.
    fn tried_in_list(&self) -> usize;
    /// Whether the peer the last `select` gave has an address this request
    /// already tried: an earlier attempt of it was freed (failed, or
    /// passed over).
    fn tried_before(&self) -> bool;
    /// Whether the attempt this request last passed over was on a cached
    /// (keepalive) connection, which the server may have closed while it
    /// was idle: the one case nginx tries a single peer again
    /// (`ngx_http_upstream_next`'s `tries++`). Never in stream.
    fn tried_cached(&self) -> bool;
    /// Hands the peer the last `select` gave back unused: the balancer's
    /// own `free` as an attempt never made (no failure added and none
    /// cleared: a dead peer stays dead, a live one is not disabled), which
    /// leaves the peer marked tried in the balancer's state; a cached
    /// connection it gave is closed. The rule restores the tries `free`
    /// took.
    fn release(&mut self);
}

/// Why a generation-busy or refused selection ended in `no live upstreams`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The generation did not move: the list's own refusal.
    NotGeneration,
    /// `off`: counted, not rescued.
    Observed { from: usize, to: usize },
    /// The fresh list itself had nothing usable.
    FreshListRefused { at: usize },
    /// Still moving after `max` re-snapshots.
    StillMoving { max: u32 },
    /// Every peer the list at generation `at` offered had an address the
    /// request already tried before its re-snapshot.
    AllTried { at: usize },
}

/// Why a generation-busy selection ended in an error: not `no live
/// upstreams`, but what nginx answers the balancer's own failure with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The fresh `peer.init` failed; the previous state was put back.
    ReinitFailed,
    /// The selection on the fresh snapshot returned an error.
    FreshSelectError,
}

/// The outcome of one selection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// nginx gets the balancer's answer unchanged: a peer, or an error.
    Pass(Selection),
    /// A generation-busy selection turned into a peer on a fresh snapshot.
    Rescued {
        from: usize,
        to: usize,
        selection: Selection,
    },
    /// `no live upstreams` (nginx gets `NGX_BUSY`).
    Failed { cause: NoLiveCause, why: Failure },
    /// A generation-busy selection whose re-snapshot met an error: nginx
    /// gets `code` (an error code), as it would from the balancer itself.
    /// Counted as failed, not as `no live upstreams`.
    Errored { fault: Fault, code: isize },
}

/// Counter increments one selection produced.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally(pub [u32; COUNTERS]);

impl Tally {
    fn add(&mut self, c: Counter) {
        self.0[c as usize] += 1;
    }

    /// Nothing to count: the selection was not refused.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.0 == [0; COUNTERS]
    }

    /// The non-zero increments, in `Counter` order: busy before rescued
    /// and failed, so a scrape between two increments never shows more
    /// rescued and failed than busy (docs/metrics.md relies on it).
    pub fn iter(&self) -> impl Iterator<Item = (Counter, u32)> + '_ {
        Counter::ALL
            .iter()
            .map(|&c| (c, self.0[c as usize]))
            .filter(|&(_, n)| n > 0)
    }
}

/// What [`Snapshot::select`] made of a selection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Selected {
    /// The balancer's answer stands, untouched and uncounted: the fast
    /// path of nearly every selection.
    Stands(Selection),
    /// Decided by the rule: refused, or checked against the request's
    /// history after a re-snapshot.
    Decided(Decision),
}

impl Selected {
    /// As a [`Decision`]: one that stands passes with nothing counted.
    pub fn decision(self) -> Decision {
        match self {
            Selected::Stands(selection) => Decision {
                outcome: Outcome::Pass(selection),
                tally: Tally::default(),
            },
            Selected::Decided(d) => d,
        }
    }
}

/// What [`Snapshot::select`] decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    pub outcome: Outcome,
    pub tally: Tally,
}

impl Decision {
    /// A re-snapshot met an error: counted as failed, answered `code`.
    fn errored(mut tally: Tally, fault: Fault, code: isize) -> Decision {
        tally.add(Counter::Failed);
        Decision {
            outcome: Outcome::Errored { fault, code },
            tally,
        }
    }

    fn failed(mut tally: Tally, cause: NoLiveCause, why: Failure) -> Decision {
        tally.add(cause.counter());
        Decision {
            outcome: Outcome::Failed { cause, why },
            tally,
        }
    }
}

/// A request's (or stream session's) view of its balancer state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// The generation the balancer state was taken at.
    pub generation: usize,
    /// Selections asked so far (0 before the first).
    pub selections: u32,
    /// Re-snapshots taken (`$generation_retry_resnapshots`).
    pub resnapshots: u32,
}

impl Snapshot {
    /// State taken at `generation` (read before and after the balancer's
    /// `peer.init`, which runs again while the two differ: the module's
    /// `settled_init`).
    pub fn new(generation: usize) -> Snapshot {
        Snapshot {
            generation,
            selections: 0,
            resnapshots: 0,
        }
    }

    /// One selection nginx asked for, under `setting`: [`Snapshot::begin`],
    /// the balancer's answer, then [`Snapshot::stands`] or, out of line,
    /// [`Snapshot::decide`]. The module's `get` runs the same three steps
    /// itself, so that it builds its [`Balancer`] only when the answer
    /// does not stand.
    #[inline]
    pub fn select<B: Balancer>(&mut self, b: &mut B, setting: Resnapshot) -> Selected {
        let first = self.begin();
        let given = b.select();
        if self.stands(given) {
            return Selected::Stands(given);
        }
        Selected::Decided(self.decide(b, setting, first, given))
    }

    /// Counts a selection; whether it is the request's first.
    #[inline]
    pub fn begin(&mut self) -> bool {
        let first = self.selections == 0;
        self.selections += 1;
        first
    }

    /// Whether the balancer's answer stands as given: not refused, and no
    /// history to check (the request never re-snapshotted). The fast path
    /// of nearly every selection: two comparisons.
    #[inline]
    pub fn stands(&self, given: Selection) -> bool {
        self.resnapshots == 0 && given != Selection::Busy
    }

    /// A selection that does not stand as given: refused, or on a state
    /// taken by a re-snapshot. `first` is what [`Snapshot::begin`] said.
    #[cold]
    #[inline(never)]
    pub fn decide<B: Balancer>(
        &mut self,
        b: &mut B,
        setting: Resnapshot,
        first: bool,
        given: Selection,
    ) -> Decision {
        match given {
            Selection::Busy => self.refused(b, setting, first, Tally::default(), false),
            Selection::Peer(_) => self.after_resnapshot(b, setting, first, given),
            Selection::Error(_) => Decision {
                outcome: Outcome::Pass(given),
                tally: Tally::default(),
            },
        }
    }

    /// A peer given on a state taken by an earlier re-snapshot: it must
    /// not be one the request tried before that re-snapshot.
    fn after_resnapshot<B: Balancer>(
        &mut self,
        b: &mut B,
        setting: Resnapshot,
        first: bool,
        given: Selection,
    ) -> Decision {
        let mut tally = Tally::default();
        let tries = b.tries();
        match untried(b, given, tries, &mut tally) {
            (Selection::Busy, excluded) => self.refused(b, setting, first, tally, excluded),
            (selection, _) => Decision {
                outcome: Outcome::Pass(selection),
                tally,
            },
        }
    }

    /// The balancer refused the selection (`NGX_BUSY`), or, with
    /// `excluded`, gave only peers the request had already tried.
    #[cold]
    #[inline(never)]
    fn refused<B: Balancer>(
        &mut self,
        b: &mut B,
        setting: Resnapshot,
        first: bool,
        mut tally: Tally,
        excluded: bool,
    ) -> Decision {
        let now = b.generation();
        if now == self.generation {
            if excluded {
                let why = Failure::AllTried { at: now };
                return Decision::failed(tally, NoLiveCause::Unavailable, why);
            }
            let (primary, backup) = b.peer_counts();
            let cause = NoLiveCause::of_list(primary, backup);
            return Decision::failed(tally, cause, Failure::NotGeneration);
        }

        tally.add(if first {
            Counter::BusyFirst
        } else {
            Counter::BusyRetry
        });
        let from = self.generation;
        if !setting.enabled {
            tally.add(Counter::Failed);
            let why = Failure::Observed { from, to: now };
            return Decision::failed(tally, NoLiveCause::Generation, why);
        }

        let left = b.tries();
        for _ in 0..setting.max {
            tally.add(Counter::Resnapshots);
            self.resnapshots += 1;
            match b.reinit() {
                Ok(at) => self.generation = at,
                Err(code) => {
                    // The previous state is back, and so are its tries.
                    b.set_tries(left);
                    return Decision::errored(tally, Fault::ReinitFailed, code);
                }
            }

            let tries = fresh_tries(b, left);
            b.set_tries(tries);
            let given = b.select();
            match untried(b, given, tries, &mut tally) {
                (Selection::Peer(rc), _) => {
                    tally.add(Counter::Rescued);
                    return Decision {
                        outcome: Outcome::Rescued {
                            from,
                            to: self.generation,
                            selection: Selection::Peer(rc),
                        },
                        tally,
                    };
                }
                (Selection::Error(code), _) => {
                    return Decision::errored(tally, Fault::FreshSelectError, code);
                }
                (Selection::Busy, excluded) if b.generation() == self.generation => {
                    tally.add(Counter::Failed);
                    let at = self.generation;
                    if excluded {
                        let why = Failure::AllTried { at };
                        return Decision::failed(tally, NoLiveCause::Unavailable, why);
                    }
                    let (primary, backup) = b.peer_counts();
                    let why = Failure::FreshListRefused { at };
                    return Decision::failed(tally, NoLiveCause::of_list(primary, backup), why);
                }
                (Selection::Busy, _) => {}
            }
        }
        tally.add(Counter::Failed);
        let why = Failure::StillMoving { max: setting.max };
        Decision::failed(tally, NoLiveCause::Generation, why)
    }
}

/// The tries a request has on a fresh state: no more than it had left
/// (`peer.init` sets tries to the list's size, which would undo the
/// `proxy_next_upstream_tries` clamp and the attempts already made), and no
/// more than the fresh list has peers it has not tried (`fresh`, what
/// `peer.init` set, less `tried`): on a list that lost peers, a request
/// with tries to spare would otherwise retry an answer nginx passes on
/// (a 503 under `http_503`) into a refusal, as every peer left was tried.
/// The tried peers the fresh state gives are handed back without using a
/// try: they are already left out here. A list of one peer nginx would
/// retry is exempt, as in [`untried`].
fn fresh_tries<B: Balancer>(b: &B, left: usize) -> usize {
    let fresh = b.tries();
    if retries_single(b) {
        return left.min(fresh);
    }
    left.min(fresh.saturating_sub(b.tried_in_list()))
}

/// `given`, or, if it is a peer the request already tried, what the
/// balancer gives when that peer is handed back and it is asked again:
/// an untried peer, `Busy` or an error. The second value says whether a
/// peer was handed back. `tries` is the request's, restored after each
/// `free`.
///
/// A list of one peer and no backup, after an attempt on a cached
/// connection failed, is left alone: round-robin, and every balancer, which
/// all fall back to it there, keeps no tried bitmap for a single peer, and
/// nginx retries that peer then (a keepalive connection the server closed);
/// so does the rule, and counts it (`Retried`). After an attempt on a
/// fresh connection nginx leaves a single peer no try, and the rule hands
/// it back like any tried peer: a list that shrank to the address a
/// request just failed on over a fresh connection is not sent the request
/// again. (nginx's extra try needs a connection error as well: after a
/// timeout or a 5xx on a cached connection the rule still passes the peer
/// on, where nginx would not; the connection, not the error, is what the
/// free the module wraps can see.) Bounded by the list's size: a
/// balancer that keeps giving tried peers ends in `Busy` after as many
/// selections as the list has peers, plus one.
fn untried<B: Balancer>(
    b: &mut B,
    mut given: Selection,
    tries: usize,
    tally: &mut Tally,
) -> (Selection, bool) {
    if retries_single(b) {
        if matches!(given, Selection::Peer(_)) && b.tried_before() {
            tally.add(Counter::Retried);
        }
        return (given, false);
    }
    let (primary, backup) = b.peer_counts();
    let mut left = primary + backup;
    let mut excluded = false;
    while matches!(given, Selection::Peer(_)) && b.tried_before() {
        b.release();
        b.set_tries(tries);
        tally.add(Counter::Excluded);
        excluded = true;
        if left == 0 {
            return (Selection::Busy, true);
        }
        left -= 1;
        given = b.select();
    }
    (given, excluded)
}

/// Whether nginx would try the list's one peer again: a list of one peer
/// and no backup, after an attempt on a cached connection failed.
fn retries_single<B: Balancer>(b: &B) -> bool {
    b.peer_counts() == (1, 0) && b.tried_cached()
}

#[cfg(test)]
mod tests;
