//! Every short script of the fake balancer, for every setting: the counts
//! add up, the bounds hold and the tries are never lost.

use super::*;

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
