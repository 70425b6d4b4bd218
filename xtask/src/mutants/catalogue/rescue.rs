//! Mutants of core's rescue rule (`module/core/src/rescue.rs`): the tries
//! restored and capped, the phase, `max`, the re-init's generation, the
//! single peer, `off`.

use super::*;
use crate::versions::DEFAULT;

pub(super) const TRIES_NOT_RESTORED: Mutant = Mutant {
    name: "tries-not-restored",
    file: RESCUE,
    find: "            let tries = fresh_tries(b, left);\n            b.set_tries(tries);\n",
    replace: "            let tries = fresh_tries(b, left);\n",
    tests: &[TRIES],
    core: true,
    whole_suite: false,
    version: DEFAULT,
};

pub(super) const FRESH_TRIES_UNCAPPED: Mutant = Mutant {
    name: "fresh-tries-uncapped",
    file: RESCUE,
    find: "    left.min(fresh.saturating_sub(b.tried_in_list()))\n",
    replace: "    left.min(fresh)\n",
    tests: &[
        (
            "soundness",
            "a_list_that_lost_a_peer_passes_the_last_peers_503_on",
        ),
        (
            "soundness",
            "a_stream_list_that_lost_a_peer_ends_the_session_when_its_tries_do",
        ),
    ],
    core: true,
    whole_suite: false,
    version: DEFAULT,
};

pub(super) const PHASE_SWAPPED: Mutant = Mutant {
    name: "phase-swapped",
    file: RESCUE,
    find: "        tally.add(if first {\n",
    replace: "        tally.add(if !first {\n",
    tests: &[RESCUES, STREAM_RESCUES],
    core: true,
    whole_suite: false,
    version: DEFAULT,
};

pub(super) const MAX_IGNORED: Mutant = Mutant {
    name: "max-ignored",
    file: RESCUE,
    find: "        for _ in 0..setting.max {\n",
    replace: "        for _ in 0.. {\n",
    tests: &[
        RESCUES,
        (
            "mid_selection",
            "max::max_is_how_many_times_a_moving_list_is_followed",
        ),
    ],
    core: true,
    whole_suite: false,
    version: DEFAULT,
};

pub(super) const REINIT_GENERATION_IGNORED: Mutant = Mutant {
    name: "reinit-generation-ignored",
    file: RESCUE,
    find: "                Ok(at) => self.generation = at,\n",
    replace: "                Ok(_) => {}\n",
    tests: &[],
    core: true,
    whole_suite: false,
    version: DEFAULT,
};

pub(super) const SINGLE_PEER_EXCLUDED: Mutant = Mutant {
    name: "single-peer-excluded",
    file: RESCUE,
    find: "    b.peer_counts() == (1, 0) && b.tried_cached()\n",
    replace: "    false\n",
    tests: &[SINGLE_PEER],
    core: true,
    whole_suite: false,
    version: DEFAULT,
};

/// Issue 47, item 3: a list that shrank to the one peer a request failed
/// on over a fresh connection sends it there again.
pub(super) const SINGLE_PEER_RETRIED_AFTER_A_FRESH_CONNECTION: Mutant = Mutant {
    name: "single-peer-retried-after-a-fresh-connection",
    file: RESCUE,
    find: "    b.peer_counts() == (1, 0) && b.tried_cached()\n",
    replace: "    b.peer_counts() == (1, 0)\n",
    tests: &[(
        "mid_selection",
        "single_peer::a_list_shrunk_to_the_tried_peer_retries_it_only_after_a_cached_connection",
    )],
    core: true,
    whole_suite: false,
    version: DEFAULT,
};

pub(super) const OFF_RESNAPSHOTS: Mutant = Mutant {
    name: "off-resnapshots",
    file: RESCUE,
    find: "        if !setting.enabled {\n",
    replace: "        if false && !setting.enabled {\n",
    tests: &[OBSERVES],
    core: true,
    whole_suite: false,
    version: DEFAULT,
};
