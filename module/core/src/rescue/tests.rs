//! Every branch of the rescue rule, over a scripted fake balancer.

use std::collections::VecDeque;

use super::*;

const PEER: Selection = Selection::Peer(0);
const CACHED: Selection = Selection::Peer(-4);
const ERROR: Selection = Selection::Error(-1);

/// What one `select` of the fake does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// Returns this selection (a peer or an error).
    Give(Selection),
    /// Busy, and the list's generation moved (a re-resolve landed).
    BusyMoved,
    /// Busy with the generation unchanged: the list's own refusal.
    BusySame,
    /// A peer whose address the request already tried.
    Tried,
}

/// A balancer whose answers are a script.
struct Fake {
    /// The list's generation now.
    generation: usize,
    primary: usize,
    backup: usize,
    selects: VecDeque<Step>,
    reinits: VecDeque<bool>,
    tries: usize,
    /// How many fresh states were installed.
    fresh_states: u32,
    reinit_calls: u32,
    /// The last selection gave a tried peer, not yet handed back.
    holding_tried: bool,
    releases: u32,
    /// What a re-init sets tries to; round-robin's size of the list when
    /// `None` (made large, so that only the request's own tries limit).
    fresh_tries: Option<usize>,
    /// Peers of the list whose address the request tried.
    tried_in_list: usize,
    /// A re-init meets a change of the list (and takes the new list).
    reinit_moves: bool,
}

impl Fake {
    fn new(selects: &[Step], reinits: &[bool]) -> Fake {
        Fake {
            generation: 7,
            primary: 2,
            backup: 0,
            selects: selects.iter().copied().collect(),
            reinits: reinits.iter().copied().collect(),
            tries: 1,
            fresh_states: 0,
            reinit_calls: 0,
            holding_tried: false,
            releases: 0,
            fresh_tries: None,
            tried_in_list: 0,
            reinit_moves: false,
        }
    }
}

impl Balancer for Fake {
    fn generation(&self) -> usize {
        self.generation
    }
    fn peer_counts(&self) -> (usize, usize) {
        (self.primary, self.backup)
    }
    fn select(&mut self) -> Selection {
        assert!(!self.holding_tried, "a tried peer was not handed back");
        // Past the script's end, a peer.
        match self.selects.pop_front().unwrap_or(Step::Give(PEER)) {
            Step::Give(s) => s,
            Step::Tried => {
                self.holding_tried = true;
                PEER
            }
            Step::BusyMoved => {
                self.generation += 1;
                Selection::Busy
            }
            Step::BusySame => Selection::Busy,
        }
    }
    fn reinit(&mut self) -> Result<usize, isize> {
        self.reinit_calls += 1;
        // Like round-robin's init: tries becomes the list's size, which the
        // rule must undo; a failed init may have written it too.
        self.tries = self.fresh_tries.unwrap_or(40 + self.primary);
        let ok = self.reinits.pop_front().unwrap_or(true);
        if ok {
            self.fresh_states += 1;
            if self.reinit_moves {
                // A change landed during the init, which then ran again.
                self.generation += 1;
            }
            Ok(self.generation)
        } else {
            Err(-1)
        }
    }
    fn tries(&self) -> usize {
        self.tries
    }
    fn set_tries(&mut self, tries: usize) {
        self.tries = tries;
    }
    fn tried_in_list(&self) -> usize {
        self.tried_in_list
    }
    fn tried_before(&self) -> bool {
        self.holding_tried
    }
    fn release(&mut self) {
        assert!(self.holding_tried, "only a tried peer is handed back");
        self.holding_tried = false;
        self.releases += 1;
        // Like round-robin's free: one try fewer.
        self.tries = self.tries.saturating_sub(1);
    }
}

const ON: Resnapshot = Resnapshot {
    enabled: true,
    max: 2,
};
const OFF: Resnapshot = Resnapshot {
    enabled: false,
    max: 2,
};

fn tally(pairs: &[(Counter, u32)]) -> Tally {
    let mut t = Tally::default();
    for &(c, n) in pairs {
        t.0[c as usize] = n;
    }
    t
}

/// Runs a selection on a request whose state was taken at the fake's
/// generation, after `earlier` successful selections.
fn run(fake: &mut Fake, setting: Resnapshot, earlier: u32) -> (Snapshot, Decision) {
    let mut s = Snapshot::new(fake.generation);
    s.selections = earlier;
    let d = s.select(fake, setting).decision();
    (s, d)
}

#[test]
fn a_selection_that_is_not_refused_passes_through_uncounted() {
    for given in [PEER, CACHED, ERROR] {
        let mut f = Fake::new(&[Step::Give(given)], &[]);
        let (s, d) = run(&mut f, ON, 0);
        assert_eq!(d.outcome, Outcome::Pass(given));
        assert_eq!(d.tally, Tally::default());
        assert_eq!((s.selections, s.resnapshots, f.reinit_calls), (1, 0, 0));
        // The fast path: the answer stands, nothing decided out of line.
        let mut f = Fake::new(&[Step::Give(given)], &[]);
        let mut s = Snapshot::new(f.generation);
        assert_eq!(s.select(&mut f, ON), Selected::Stands(given));
    }
}

#[test]
fn a_refusal_with_the_generation_unchanged_is_the_lists_own() {
    for (primary, backup, cause) in [
        (2, 0, NoLiveCause::Unavailable),
        (0, 1, NoLiveCause::Unavailable),
        (0, 0, NoLiveCause::Empty),
    ] {
        for setting in [ON, OFF] {
            let mut f = Fake::new(&[Step::BusySame], &[]);
            (f.primary, f.backup) = (primary, backup);
            let (_, d) = run(&mut f, setting, 1);
            let why = Failure::NotGeneration;
            assert_eq!(d.outcome, Outcome::Failed { cause, why });
            assert_eq!(d.tally, tally(&[(cause.counter(), 1)]));
            assert_eq!(f.reinit_calls, 0);
        }
    }
}

#[test]
fn first_selection_and_retry_count_as_their_phase() {
    for (earlier, phase) in [
        (0, Counter::BusyFirst),
        (1, Counter::BusyRetry),
        (3, Counter::BusyRetry),
    ] {
        let mut f = Fake::new(&[Step::BusyMoved, Step::Give(PEER)], &[]);
        let (_, d) = run(&mut f, ON, earlier);
        assert_eq!(
            d.tally,
            tally(&[(phase, 1), (Counter::Resnapshots, 1), (Counter::Rescued, 1)])
        );
    }
}

#[test]
fn observe_mode_counts_and_fails_without_a_resnapshot() {
    let mut f = Fake::new(&[Step::BusyMoved], &[]);
    let (s, d) = run(&mut f, OFF, 1);
    assert_eq!(
        d.outcome,
        Outcome::Failed {
            cause: NoLiveCause::Generation,
            why: Failure::Observed { from: 7, to: 8 }
        }
    );
    assert_eq!(
        d.tally,
        tally(&[
            (Counter::BusyRetry, 1),
            (Counter::Failed, 1),
            (Counter::NoLiveGeneration, 1)
        ])
    );
    assert_eq!((f.reinit_calls, s.resnapshots, s.generation), (0, 0, 7));
}

#[test]
fn rescued_on_the_first_resnapshot_keeps_the_tries() {
    for given in [PEER, CACHED] {
        let mut f = Fake::new(&[Step::BusyMoved, Step::Give(given)], &[]);
        f.tries = 1;
        let (s, d) = run(&mut f, ON, 1);
        assert_eq!(
            d.outcome,
            Outcome::Rescued {
                from: 7,
                to: 8,
                selection: given
            }
        );
        assert_eq!(
            d.tally,
            tally(&[
                (Counter::BusyRetry, 1),
                (Counter::Resnapshots, 1),
                (Counter::Rescued, 1)
            ])
        );
        assert_eq!(f.tries, 1, "tries restored after peer.init reset them");
        assert_eq!((s.generation, s.resnapshots, f.fresh_states), (8, 1, 1));
    }
}

#[test]
fn rescued_on_the_nth_resnapshot_when_the_list_moves_again() {
    let script = [Step::BusyMoved, Step::BusyMoved, Step::Give(PEER)];
    let mut f = Fake::new(&script, &[]);
    let (s, d) = run(
        &mut f,
        Resnapshot {
            enabled: true,
            max: 3,
        },
        0,
    );
    assert_eq!(
        d.outcome,
        Outcome::Rescued {
            from: 7,
            to: 9,
            selection: PEER
        }
    );
    assert_eq!(
        d.tally,
        tally(&[
            (Counter::BusyFirst, 1),
            (Counter::Resnapshots, 2),
            (Counter::Rescued, 1)
        ])
    );
    assert_eq!((s.resnapshots, f.reinit_calls, f.tries), (2, 2, 1));
}

#[test]
fn a_fresh_list_that_refuses_is_classified_by_its_contents() {
    for (primary, cause) in [(0, NoLiveCause::Empty), (3, NoLiveCause::Unavailable)] {
        let mut f = Fake::new(&[Step::BusyMoved, Step::BusySame], &[]);
        f.primary = primary;
        let (s, d) = run(&mut f, ON, 1);
        assert_eq!(
            d.outcome,
            Outcome::Failed {
                cause,
                why: Failure::FreshListRefused { at: 8 }
            }
        );
        assert_eq!(
            d.tally,
            tally(&[
                (Counter::BusyRetry, 1),
                (Counter::Resnapshots, 1),
                (Counter::Failed, 1),
                (cause.counter(), 1)
            ])
        );
        assert_eq!((s.generation, f.tries), (8, 1));
    }
}

#[test]
fn still_moving_after_max_resnapshots_fails_with_generation() {
    for max in [1, 2, 16] {
        let script = vec![Step::BusyMoved; 1 + max as usize];
        let mut f = Fake::new(&script, &[]);
        let (s, d) = run(&mut f, Resnapshot { enabled: true, max }, 1);
        assert_eq!(
            d.outcome,
            Outcome::Failed {
                cause: NoLiveCause::Generation,
                why: Failure::StillMoving { max }
            }
        );
        assert_eq!(
            d.tally,
            tally(&[
                (Counter::BusyRetry, 1),
                (Counter::Resnapshots, max),
                (Counter::Failed, 1),
                (Counter::NoLiveGeneration, 1)
            ])
        );
        assert_eq!((s.resnapshots, f.reinit_calls, f.tries), (max, max, 1));
        assert!(f.selects.is_empty());
    }
}

#[test]
fn a_failed_reinit_rolls_back_and_keeps_the_tries() {
    let mut f = Fake::new(&[Step::BusyMoved], &[false]);
    let (s, d) = run(&mut f, ON, 1);
    assert_eq!(
        d.outcome,
        Outcome::Errored {
            fault: Fault::ReinitFailed,
            code: -1
        }
    );
    assert_eq!(s.generation, 7, "the old state's generation is back");
    assert_eq!(f.tries, 1, "tries restored on the failure path too");
    // Failed (busy = rescued + failed), but not a `no live upstreams`.
    assert_eq!(
        d.tally,
        tally(&[
            (Counter::BusyRetry, 1),
            (Counter::Resnapshots, 1),
            (Counter::Failed, 1),
        ])
    );
}

#[test]
fn a_non_busy_error_from_the_fresh_selection_is_passed_through_and_failed() {
    let mut f = Fake::new(&[Step::BusyMoved, Step::Give(ERROR)], &[]);
    let (_, d) = run(&mut f, ON, 1);
    assert_eq!(
        d.outcome,
        Outcome::Errored {
            fault: Fault::FreshSelectError,
            code: -1
        }
    );
    assert_eq!(
        d.tally,
        tally(&[
            (Counter::BusyRetry, 1),
            (Counter::Resnapshots, 1),
            (Counter::Failed, 1)
        ])
    );
}

#[test]
fn after_a_resnapshot_a_tried_peer_is_handed_back_and_an_untried_one_taken() {
    let script = [Step::BusyMoved, Step::Tried, Step::Tried, Step::Give(PEER)];
    let mut f = Fake::new(&script, &[]);
    f.tries = 2;
    let (s, d) = run(&mut f, ON, 1);
    assert_eq!(
        d.outcome,
        Outcome::Rescued {
            from: 7,
            to: 8,
            selection: PEER
        }
    );
    assert_eq!(
        d.tally,
        tally(&[
            (Counter::BusyRetry, 1),
            (Counter::Resnapshots, 1),
            (Counter::Excluded, 2),
            (Counter::Rescued, 1)
        ])
    );
    assert_eq!(f.releases, 2);
    assert_eq!(f.tries, 2, "the tries each free took are given back");
    assert_eq!(s.resnapshots, 1);
}

#[test]
fn a_fresh_list_of_tried_peers_only_is_unavailable_and_failed() {
    let mut f = Fake::new(&[Step::BusyMoved, Step::Tried, Step::BusySame], &[]);
    let (_, d) = run(&mut f, ON, 1);
    assert_eq!(
        d.outcome,
        Outcome::Failed {
            cause: NoLiveCause::Unavailable,
            why: Failure::AllTried { at: 8 }
        }
    );
    assert_eq!(
        d.tally,
        tally(&[
            (Counter::BusyRetry, 1),
            (Counter::Resnapshots, 1),
            (Counter::Excluded, 1),
            (Counter::Failed, 1),
            (Counter::NoLiveUnavailable, 1)
        ])
    );
    assert_eq!((f.releases, f.tries), (1, 1));
}

/// The fresh list is smaller than the tries the request had left, and one
/// of its peers was tried already: the request gets the tries the fresh
/// list has for it, not the ones it had. Upstream {A, B, C}, tries 3; A
/// failed (2 left); C left the list; on {A, B} one try is left, so B's
/// `503` under `http_503` is passed on, not retried into `no live
/// upstreams` (defect A of issue 41).
#[test]
fn a_fresh_list_caps_the_tries_at_its_untried_peers() {
    for (script, releases) in [
        (vec![Step::BusyMoved, Step::Give(PEER)], 0),
        (vec![Step::BusyMoved, Step::Tried, Step::Give(PEER)], 1),
    ] {
        let mut f = Fake::new(&script, &[]);
        (f.tries, f.fresh_tries, f.tried_in_list) = (2, Some(2), 1);
        let (_, d) = run(&mut f, ON, 1);
        assert!(matches!(d.outcome, Outcome::Rescued { .. }), "{d:?}");
        assert_eq!((f.releases, f.tries), (releases, 1), "{script:?}");
    }
    // Fewer peers than tries left, none tried: the list's size.
    let mut f = Fake::new(&[Step::BusyMoved, Step::Give(PEER)], &[]);
    (f.tries, f.fresh_tries) = (5, Some(3));
    run(&mut f, ON, 1);
    assert_eq!(f.tries, 3);
    // More peers than tries left: the request's own (the clamp kept).
    let mut f = Fake::new(&[Step::BusyMoved, Step::Give(PEER)], &[]);
    (f.tries, f.fresh_tries, f.tried_in_list) = (2, Some(6), 1);
    run(&mut f, ON, 1);
    assert_eq!(f.tries, 2);
    // A list of one peer keeps no tried bitmap: its try is not taken.
    let mut f = Fake::new(&[Step::BusyMoved, Step::Tried], &[]);
    (f.primary, f.tries, f.fresh_tries, f.tried_in_list) = (1, 1, Some(1), 1);
    let (_, d) = run(&mut f, ON, 1);
    assert!(matches!(d.outcome, Outcome::Rescued { .. }), "{d:?}");
    assert_eq!(f.tries, 1);
    // A failed re-init puts back the tries the request had.
    let mut f = Fake::new(&[Step::BusyMoved], &[false]);
    (f.tries, f.fresh_tries, f.tried_in_list) = (2, Some(2), 1);
    run(&mut f, ON, 1);
    assert_eq!(f.tries, 2);
}

/// A change lands during the re-snapshot's own `peer.init`: the fresh
/// state is taken at the newer generation, which the rule keeps, so the
/// fresh list's own refusal is classified as such instead of taking a
/// second, needless re-snapshot (issue 41, defect E).
#[test]
fn a_change_during_the_reinit_is_the_fresh_states_generation() {
    let mut f = Fake::new(&[Step::BusyMoved, Step::BusySame], &[]);
    f.reinit_moves = true;
    let (s, d) = run(&mut f, ON, 1);
    assert_eq!(
        d.outcome,
        Outcome::Failed {
            cause: NoLiveCause::Unavailable,
            why: Failure::FreshListRefused { at: 9 }
        }
    );
    assert_eq!((s.resnapshots, f.reinit_calls, s.generation), (1, 1, 9));
}

/// A request that re-snapshotted earlier keeps excluding its history at
/// every later selection on the fresh state, whose own tried bitmap knows
/// only the peers it gave.
#[test]
fn later_selections_on_the_fresh_state_exclude_the_history_too() {
    let later = |script: &[Step]| {
        let mut f = Fake::new(script, &[]);
        let mut s = Snapshot::new(f.generation);
        (s.selections, s.resnapshots) = (2, 1);
        let d = s.select(&mut f, ON).decision();
        (f, d)
    };

    let (f, d) = later(&[Step::Tried, Step::Give(CACHED)]);
    assert_eq!(d.outcome, Outcome::Pass(CACHED));
    assert_eq!(d.tally, tally(&[(Counter::Excluded, 1)]));
    assert_eq!((f.releases, f.tries), (1, 1));

    // Nothing untried left: the list's own refusal, not a generation one.
    let (_, d) = later(&[Step::Tried, Step::BusySame]);
    assert_eq!(
        d.outcome,
        Outcome::Failed {
            cause: NoLiveCause::Unavailable,
            why: Failure::AllTried { at: 7 }
        }
    );
    assert_eq!(
        d.tally,
        tally(&[(Counter::Excluded, 1), (Counter::NoLiveUnavailable, 1)])
    );

    // The list moved meanwhile: a generation-busy retry, rescued.
    let (f, d) = later(&[Step::Tried, Step::BusyMoved, Step::Give(PEER)]);
    assert!(matches!(d.outcome, Outcome::Rescued { .. }), "{d:?}");
    assert_eq!(
        d.tally,
        tally(&[
            (Counter::BusyRetry, 1),
            (Counter::Resnapshots, 1),
            (Counter::Excluded, 1),
            (Counter::Rescued, 1)
        ])
    );
    assert_eq!(f.reinit_calls, 1);
}

/// One peer and no backup: nginx's balancers keep no tried bitmap for it
/// and retry it (a stale keepalive connection), and so does the rule.
#[test]
fn a_single_peer_list_is_not_excluded() {
    let mut f = Fake::new(&[Step::BusyMoved, Step::Tried], &[]);
    (f.primary, f.backup) = (1, 0);
    let (_, d) = run(&mut f, ON, 1);
    assert!(matches!(d.outcome, Outcome::Rescued { .. }), "{d:?}");
    assert_eq!((d.tally.0[Counter::Excluded as usize], f.releases), (0, 0));
    assert_eq!(d.tally.0[Counter::Retried as usize], 1, "said out loud");
    f.holding_tried = false;

    let mut f = Fake::new(&[Step::Tried], &[]);
    (f.primary, f.backup) = (1, 0);
    let mut s = Snapshot::new(f.generation);
    (s.selections, s.resnapshots) = (2, 1);
    assert_eq!(s.select(&mut f, ON).decision().outcome, Outcome::Pass(PEER));
}

#[test]
fn before_any_resnapshot_the_balancers_own_choice_stands() {
    let mut f = Fake::new(&[Step::Tried], &[]);
    let (_, d) = run(&mut f, ON, 1);
    assert_eq!(d.outcome, Outcome::Pass(PEER));
    assert_eq!((d.tally, f.releases), (Tally::default(), 0));
}

/// A balancer that ignores its tried bitmap gives the same peer again and
/// again. The rule stops after as many selections as the list has peers,
/// plus one.
#[test]
fn a_balancer_that_keeps_giving_tried_peers_is_bounded() {
    for (primary, backup) in [(2, 0), (2, 1), (0, 1), (0, 0)] {
        let script = [&[Step::BusyMoved][..], &[Step::Tried; 10]].concat();
        let mut f = Fake::new(&script, &[]);
        (f.primary, f.backup) = (primary, backup);
        let (_, d) = run(&mut f, ON, 1);
        assert_eq!(
            d.outcome,
            Outcome::Failed {
                cause: NoLiveCause::Unavailable,
                why: Failure::AllTried { at: 8 }
            }
        );
        let selects = primary + backup + 1;
        assert_eq!(f.releases as usize, selects);
        assert_eq!(f.selects.len(), 10 - selects);
        assert_eq!(f.tries, 1);
    }
}

/// Every script of up to four selections and two re-init results, for
/// `on` and `off`, `max` 1 to 3, first selection and retry: the counts
/// always add up, the bound holds and tries are never lost.
#[test]
fn every_short_script_keeps_the_invariants() {
    let steps = [
        Step::Give(PEER),
        Step::Give(ERROR),
        Step::BusyMoved,
        Step::BusySame,
        Step::Tried,
    ];
    let mut scripts: Vec<Vec<Step>> = vec![vec![]];
    for _ in 0..4 {
        let longer: Vec<Vec<Step>> = scripts
            .iter()
            .filter(|s| s.len() == scripts.last().unwrap().len())
            .flat_map(|s| {
                steps.iter().map(move |&st| {
                    let mut n = s.clone();
                    n.push(st);
                    n
                })
            })
            .collect();
        scripts.extend(longer);
    }
    let mut runs = 0;
    for script in scripts.iter().filter(|s| !s.is_empty()) {
        for reinits in [[true, true], [false, true], [true, false]] {
            for enabled in [true, false] {
                for max in 1..=3 {
                    for (earlier, prior) in [(0, 0), (1, 0), (1, 1)] {
                        let mut f = Fake::new(script, &reinits);
                        let setting = Resnapshot { enabled, max };
                        let mut s = Snapshot::new(f.generation);
                        (s.selections, s.resnapshots) = (earlier, prior);
                        let d = s.select(&mut f, setting).decision();
                        runs += 1;
                        check(&f, &s, &d, setting, (earlier, prior), script.len());
                    }
                }
            }
        }
    }
    assert!(runs > 1000, "{runs}");
}

fn check(
    f: &Fake,
    s: &Snapshot,
    d: &Decision,
    setting: Resnapshot,
    (earlier, prior): (u32, u32),
    len: usize,
) {
    let n = |c: Counter| d.tally.0[c as usize];
    let busy = n(Counter::BusyFirst) + n(Counter::BusyRetry);
    let no_live: u32 = NoLiveCause::ALL.iter().map(|c| n(c.counter())).sum();
    let ctx = format!("{d:?} {setting:?} earlier={earlier} prior={prior} script len {len}");

    assert!(busy <= 1, "{ctx}");
    assert_eq!(
        n(Counter::BusyFirst) == 1,
        busy == 1 && earlier == 0,
        "{ctx}"
    );
    assert_eq!(s.selections, earlier + 1);
    // Re-snapshots: only with `on`, at most max, one re-init each.
    assert!(n(Counter::Resnapshots) <= setting.max, "{ctx}");
    assert_eq!(n(Counter::Resnapshots), s.resnapshots - prior, "{ctx}");
    assert_eq!(n(Counter::Resnapshots), f.reinit_calls, "{ctx}");
    if !setting.enabled {
        assert_eq!(f.reinit_calls, 0, "{ctx}");
    }
    if f.reinit_calls > 0 || f.releases > 0 {
        assert_eq!(f.tries, 1, "tries kept: {ctx}");
    }
    // A tried peer is never passed on once the request re-snapshotted, and
    // each one handed back is counted.
    assert!(!f.holding_tried || s.resnapshots == 0, "{ctx}");
    assert_eq!(n(Counter::Excluded), f.releases, "{ctx}");
    // One outcome, counted once.
    assert_eq!(
        no_live,
        u32::from(matches!(d.outcome, Outcome::Failed { .. })),
        "{ctx}"
    );
    match d.outcome {
        Outcome::Pass(sel) => {
            assert_ne!(sel, Selection::Busy, "{ctx}");
            assert_eq!(n(Counter::Rescued) + n(Counter::Failed), 0, "{ctx}");
            // Nothing passes after a busy: it is rescued, fails or errs.
            assert_eq!(busy, 0, "{ctx}");
        }
        Outcome::Errored { fault, code } => {
            assert!(setting.enabled && busy == 1, "{ctx}");
            assert_eq!((n(Counter::Rescued), n(Counter::Failed)), (0, 1), "{ctx}");
            assert_eq!(code, -1, "{ctx}");
            assert_eq!(
                fault == Fault::ReinitFailed,
                f.fresh_states < f.reinit_calls,
                "{ctx}"
            );
        }
        Outcome::Rescued {
            from,
            to,
            selection,
        } => {
            assert!(setting.enabled && busy == 1, "{ctx}");
            assert_eq!((n(Counter::Rescued), n(Counter::Failed)), (1, 0), "{ctx}");
            assert!(matches!(selection, Selection::Peer(_)), "{ctx}");
            assert!(to > from && to == s.generation, "{ctx}");
        }
        Outcome::Failed { cause, why } => {
            // busy = rescued + failed, for every busy that is not passed.
            assert_eq!(n(Counter::Failed), busy, "{ctx}");
            assert_eq!(n(Counter::Rescued), 0, "{ctx}");
            assert_eq!(
                matches!(why, Failure::NotGeneration) || busy == 0 && f.releases > 0,
                busy == 0,
                "{ctx}"
            );
            if let Failure::AllTried { .. } = why {
                assert!(f.releases > 0 && cause == NoLiveCause::Unavailable, "{ctx}");
            }
            if matches!(why, Failure::Observed { .. } | Failure::StillMoving { .. }) {
                assert_eq!(cause, NoLiveCause::Generation, "{ctx}");
            }
        }
    }
}
