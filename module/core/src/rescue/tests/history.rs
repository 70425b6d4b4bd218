//! The peers a request tried, over the fake balancer: handed back and
//! counted as excluded after a re-snapshot (at every later selection too),
//! the tries the fresh list leaves, the single peer retried, and the bound
//! on a balancer that keeps giving tried peers.

use super::*;

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
    // A list of one peer keeps no tried bitmap: after a cached connection
    // failed, nginx retries it, and its try is not taken.
    let mut f = Fake::new(&[Step::BusyMoved, Step::Tried], &[]);
    (f.primary, f.tries, f.fresh_tries, f.tried_in_list) = (1, 1, Some(1), 1);
    f.tried_cached = true;
    let (_, d) = run(&mut f, ON, 1);
    assert!(matches!(d.outcome, Outcome::Rescued { .. }), "{d:?}");
    assert_eq!(f.tries, 1);
    // A failed re-init puts back the tries the request had.
    let mut f = Fake::new(&[Step::BusyMoved], &[false]);
    (f.tries, f.fresh_tries, f.tried_in_list) = (2, Some(2), 1);
    run(&mut f, ON, 1);
    assert_eq!(f.tries, 2);
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

/// One peer and no backup, after an attempt on a cached connection failed:
/// nginx's balancers keep no tried bitmap for it and nginx retries it (a
/// keepalive connection the server closed), and so does the rule, said out
/// loud. After any other failure nginx leaves it no try: handed back, every
/// peer tried, however many tries the request had when the list shrank.
#[test]
fn a_single_peer_list_is_retried_only_after_a_cached_connection() {
    let mut f = Fake::new(&[Step::BusyMoved, Step::Tried], &[]);
    (f.primary, f.backup, f.tried_cached) = (1, 0, true);
    let (_, d) = run(&mut f, ON, 1);
    assert!(matches!(d.outcome, Outcome::Rescued { .. }), "{d:?}");
    assert_eq!((d.tally.0[Counter::Excluded as usize], f.releases), (0, 0));
    assert_eq!(d.tally.0[Counter::Retried as usize], 1, "said out loud");
    f.holding_tried = false;

    let mut f = Fake::new(&[Step::Tried], &[]);
    (f.primary, f.backup, f.tried_cached) = (1, 0, true);
    let mut s = Snapshot::new(f.generation);
    (s.selections, s.resnapshots) = (2, 1);
    assert_eq!(s.select(&mut f, ON).decision().outcome, Outcome::Pass(PEER));
    f.holding_tried = false;

    // A fresh connection failed: the one peer, tried, is handed back.
    let mut f = Fake::new(&[Step::BusyMoved, Step::Tried, Step::Tried], &[]);
    (f.primary, f.backup, f.tries, f.tried_in_list) = (1, 0, 2, 1);
    f.fresh_tries = Some(1);
    let (_, d) = run(&mut f, ON, 1);
    assert_eq!(
        d.outcome,
        Outcome::Failed {
            cause: NoLiveCause::Unavailable,
            why: Failure::AllTried { at: 8 }
        }
    );
    assert_eq!(d.tally.0[Counter::Retried as usize], 0);
    assert_eq!((d.tally.0[Counter::Excluded as usize], f.releases), (2, 2));
    assert_eq!(f.tries, 0, "no try left for the tried peer");
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
