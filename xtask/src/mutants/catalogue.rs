//! The mutation check's catalogue: every mutant, the files it mutates and
//! the tests that must catch it, in the one list the runner (`super`,
//! mutants.rs) takes in order. The files and the tests are named here
//! once; the mutants themselves are written by the area they hit, in
//! `catalogue/`: the peer wrapper, the rescue rule, counting and the
//! status page, the shared zone, the core patches.
//!
//! A mutant's `find` is matched with any run of whitespace standing for
//! any other (`super::apply::locate`): rustfmt moving a line break or an
//! indent does not break a mutant; a changed token does, loudly (the unit
//! test `every_mutant_applies_exactly_once`).

mod counting;
mod patches;
mod peer;
mod rescue;
mod zone;

#[cfg(test)]
pub(super) use counting::SLOT_ADD;

/// One deliberate fault: `find`, which must occur exactly once in `file`,
/// replaced by `replace`.
pub struct Mutant {
    pub name: &'static str,
    /// Relative to the workspace root.
    pub file: &'static str,
    pub find: &'static str,
    pub replace: &'static str,
    /// The tests that should catch it: (module of `t/tests/suite.rs`, the
    /// test's exact name).
    pub tests: &'static [(&'static str, &'static str)],
    /// Also run `generation-retry-core`'s unit tests (a mutant of core).
    pub core: bool,
    /// Run every module of the suite, and judge by [`super::guards`] (the
    /// do-nothing module).
    pub whole_suite: bool,
    /// The nginx the mutant is built for and tested on: the default
    /// (1.28.0), or another version of the matrix, for the code only it
    /// runs (its own patches, `sticky`, `least_time`).
    pub version: &'static str,
}

impl Mutant {
    /// A mutant of a core patch: the patched nginx is rebuilt, not the
    /// module.
    pub fn is_patch(&self) -> bool {
        self.file.starts_with("nginx-src-patches/")
    }
}

const PEER: &str = "module/src/peer.rs";
const LIVE: &str = "module/src/peer/live.rs";
const INNER: &str = "module/src/peer/inner.rs";
const LEAN: &str = "module/src/peer/lean.rs";
const RESCUE: &str = "module/core/src/rescue.rs";
const SHM: &str = "module/src/shm.rs";
const METRICS: &str = "module/core/src/metrics.rs";
const CORE_ZONE: &str = "module/core/src/zone.rs";
const STATUS: &str = "module/src/status.rs";
const HTTP_PATCH: &str =
    "nginx-src-patches/1.28.0/0001-Upstream-select-again-when-the-peer-list-changed.patch";
const STREAM_PATCH: &str =
    "nginx-src-patches/1.28.0/0002-Stream-select-again-when-the-peer-list-changed.patch";
const HTTP_HISTORY_PATCH: &str =
    "nginx-src-patches/1.28.0/0003-Upstream-peers-tried-before-a-re-snapshot-stay-exclu.patch";
const STREAM_HISTORY_PATCH: &str =
    "nginx-src-patches/1.28.0/0004-Stream-peers-tried-before-a-re-snapshot-stay-exclude.patch";

const RESCUES: (&str, &str) = ("module_race", "module_on_rescues_the_race");
const OBSERVES: (&str, &str) = (
    "module_race",
    "module_off_observes_without_changing_the_outcome",
);
const STREAM_RESCUES: (&str, &str) = ("stream", "module_on_rescues_the_stream_race_and_counts_it");
const TRIES: (&str, &str) = ("module_behaviour", "resnapshot_keeps_next_upstream_tries");
const KILLED_WORKER: (&str, &str) = (
    "mid_selection",
    "killed_worker::a_worker_killed_inside_a_rescue_is_replaced_and_counting_goes_on",
);
const FULL_ZONE: (&str, &str) = (
    "mid_selection",
    "full_zone::a_full_zone_at_a_reload_still_rescues_and_says_so",
);
const FULL_TABLE: (&str, &str) = ("zone", "a_full_worker_table_is_said_and_frees_nothing");
const OLD_WORKER: (&str, &str) = (
    "zone",
    "an_old_worker_still_running_keeps_its_upstreams_counters",
);
const DEAD_STAYS_DEAD: (&str, &str) = (
    "stream",
    "a_dead_primary_handed_back_is_neither_failed_again_nor_revived",
);
const PATCHED_DEAD_STAYS_DEAD: (&str, &str) = (
    "stream",
    "patched_nginx_keeps_a_handed_back_dead_primary_dead",
);
const HTTP_DEAD_STAYS_DEAD: (&str, &str) = (
    "history",
    "dead_primary::a_dead_primary_handed_back_is_neither_failed_again_nor_revived",
);
const HTTP_PATCHED_DEAD_STAYS_DEAD: (&str, &str) = (
    "history",
    "dead_primary::patched_nginx_keeps_a_handed_back_dead_primary_dead",
);
const PATCHED_STREAM_HISTORY: (&str, &str) = (
    "stream",
    "patched_nginx_does_not_try_a_primary_tried_before_the_change",
);
const STREAM_HISTORY: (&str, &str) = (
    "stream",
    "a_primary_tried_before_the_change_is_not_tried_again",
);
/// The newest release of the matrix, where `sticky` (1.29.6) and
/// `least_time` (1.31.0) exist, and the patches meet their code.
const NEWEST: &str = crate::versions::NEWEST;
const NEWEST_HTTP_PATCH: &str =
    "nginx-src-patches/1.31.4/0001-Upstream-select-again-when-the-peer-list-changed.patch";
const NEWEST_STREAM_PATCH: &str =
    "nginx-src-patches/1.31.4/0002-Stream-select-again-when-the-peer-list-changed.patch";
const NEWEST_HTTP_HISTORY_PATCH: &str =
    "nginx-src-patches/1.31.4/0003-Upstream-peers-tried-before-a-re-snapshot-stay-exclu.patch";
const NEWEST_STREAM_HISTORY_PATCH: &str =
    "nginx-src-patches/1.31.4/0004-Stream-peers-tried-before-a-re-snapshot-stay-exclude.patch";
const ODD_NAMES: (&str, &str) = (
    "prometheus",
    "exposition::promtool_accepts_the_exposition_of_many_upstreams_with_odd_names",
);
const STATUS_PAGE: (&str, &str) = (
    "module_behaviour",
    "status_endpoint_formats_methods_and_access",
);
const NAMES_MATCHED: (&str, &str) = (
    "zone",
    "names_are_matched_in_full_and_as_nginx_compares_them",
);
const FAILED_RELOAD: (&str, &str) = (
    "zone",
    "a_failed_reload_leaves_counting_alone_and_its_counters_are_freed_later",
);
const EMPTY_CAUSE: (&str, &str) = (
    "module_behaviour",
    "empty_list_is_counted_as_empty_and_left_alone",
);
const UNAVAILABLE_CAUSE: (&str, &str) = (
    "module_behaviour",
    "unusable_peers_are_counted_as_unavailable",
);
const SINGLE_PEER: (&str, &str) = (
    "history",
    "single_peer::a_single_peer_is_retried_and_counted",
);
const ONTO_EMPTY: (&str, &str) = (
    "module_behaviour",
    "a_resnapshot_onto_an_empty_list_fails_as_empty",
);

/// Every mutant, in the order they run.
pub const MUTANTS: &[Mutant] = &[
    peer::DATA_NOT_CLEARED,
    rescue::TRIES_NOT_RESTORED,
    rescue::FRESH_TRIES_UNCAPPED,
    peer::SET_SESSION_NOT_FORWARDED,
    peer::SAVE_SESSION_NOT_FORWARDED,
    peer::NOTIFY_NOT_FORWARDED,
    counting::BUSY_FIRST_NOT_COUNTED,
    counting::BUSY_RETRY_NOT_COUNTED,
    counting::RESNAPSHOTS_NOT_COUNTED,
    counting::EXCLUDED_NOT_COUNTED,
    counting::RETRIED_NOT_COUNTED,
    counting::RESCUED_NOT_COUNTED,
    counting::FAILED_NOT_COUNTED,
    counting::NO_LIVE_GENERATION_NOT_COUNTED,
    counting::NO_LIVE_UNAVAILABLE_NOT_COUNTED,
    counting::NO_LIVE_EMPTY_NOT_COUNTED,
    peer::CALLER_CHAIN_NOT_RESTORED,
    zone::WORKER_NOT_RECORDED,
    zone::DEAD_WORKERS_ALIVE,
    peer::FULL_ZONE_UNWRAPPED,
    zone::UNRECORDED_WORKERS_IGNORED,
    zone::LIVE_WORKERS_IGNORED,
    rescue::PHASE_SWAPPED,
    rescue::MAX_IGNORED,
    peer::INIT_NOT_SETTLED,
    rescue::REINIT_GENERATION_IGNORED,
    patches::HTTP_PATCH_NO_RECHECK,
    patches::STREAM_PATCH_NO_RECHECK,
    peer::HISTORY_IGNORED,
    peer::HISTORY_NOT_RECORDED,
    peer::LEAN_HISTORY_NOT_RECORDED,
    peer::LEAN_TAKEOVER_IGNORED,
    peer::HAND_BACK_AS_FAILED,
    peer::HAND_BACK_REVIVES,
    peer::ERRORED_KEEPS_THE_PEER_NAME,
    peer::RESCUE_LOGGED_AT_WARN,
    peer::HAND_BACK_LEAVES_SOCKADDR,
    patches::STREAM_PATCH_HAND_BACK_REVIVES,
    patches::HTTP_PATCH_HAND_BACK_REVIVES,
    patches::HTTP_PATCH_HISTORY_IGNORED,
    patches::STREAM_PATCH_HISTORY_IGNORED,
    // The gaps issue 28 listed: status escaping, HEAD, 405 and JSON; zone
    // name matching and the two-configuration window; the choice of a
    // `no_live` cause; the single peer passed on; `off` never
    // re-snapshotting.
    counting::LABEL_NEWLINE_RAW,
    counting::JSON_CONTROLS_RAW,
    counting::FORMAT_PREFIX,
    counting::HEAD_WITH_BODY,
    counting::ANY_METHOD,
    zone::NAMES_CASE_SENSITIVE,
    zone::WINDOW_OF_ONE,
    counting::CAUSE_SWAPPED,
    rescue::SINGLE_PEER_EXCLUDED,
    rescue::SINGLE_PEER_RETRIED_AFTER_A_FRESH_CONNECTION,
    rescue::OFF_RESNAPSHOTS,
    // On the newest release: the module and the patches where `sticky`
    // and `least_time` run (guards on 1.28.0, which has neither), and each
    // patch in 1.31.4's context (its added lines are 1.28.0's, its
    // surroundings are not).
    peer::DATA_NOT_CLEARED_1_31_4,
    peer::REPLACED_COOKIE_KEPT_1_31_4,
    peer::NOTIFY_NOT_CLEARED_1_31_4,
    peer::HAND_BACK_LEARNED_1_31_4,
    peer::ALL_TRIED_COOKIES_KEPT_1_31_4,
    patches::PATCH_NOTIFY_NOT_CLEARED_1_31_4,
    patches::HTTP_PATCH_NO_RECHECK_1_31_4,
    patches::STREAM_PATCH_NO_RECHECK_1_31_4,
    patches::HTTP_PATCH_HAND_BACK_REVIVES_1_31_4,
    patches::STREAM_PATCH_HAND_BACK_REVIVES_1_31_4,
    patches::HTTP_PATCH_HAND_BACK_AS_FAILED_1_31_4,
    patches::STREAM_PATCH_HAND_BACK_AS_FAILED_1_31_4,
    patches::HTTP_PATCH_TRIES_UNCAPPED_1_31_4,
    patches::STREAM_PATCH_TRIES_UNCAPPED_1_31_4,
    patches::PATCH_REPLACED_COOKIE_KEPT_1_31_4,
    patches::HTTP_PATCH_ERRORED_KEEPS_THE_PEER_NAME_1_31_4,
    peer::DO_NOTHING,
];
