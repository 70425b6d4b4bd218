//! What one selection decides and counts, over the fake balancer: passed
//! through, the list's own refusal, counted by phase, observed with `off`,
//! rescued after one or more re-snapshots, failed, or errored.

use super::*;

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
