//! Every branch of the rescue rule, over a scripted fake balancer: the
//! fake and the helpers here; the tests by what they check in `tests/`
//! (what a selection decides, the tried peers, the invariants).

mod history;
mod invariants;
mod outcomes;

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
    /// The attempt last passed over was on a cached connection.
    tried_cached: bool,
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
            tried_cached: false,
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
    fn tried_cached(&self) -> bool {
        self.tried_cached
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
