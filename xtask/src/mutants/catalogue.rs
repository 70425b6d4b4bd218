//! The mutation check's catalogue: every mutant, the files it mutates and
//! the tests that must catch it. The runner is `super` (mutants.rs).
//!
//! A mutant's `find` is matched with any run of whitespace standing for
//! any other (`super::apply::locate`): rustfmt moving a line break or an indent
//! does not break a mutant; a changed token does, loudly (the unit test
//! `every_mutant_applies_exactly_once`).

/// One deliberate fault: `find`, which must occur exactly once in `file`,
/// replaced by `replace`.
pub struct Mutant {
    pub name: &'static str,
    /// Relative to the workspace root.
    pub file: &'static str,
    pub find: &'static str,
    pub replace: &'static str,
    /// The tests that should catch it: (test binary of `t/tests`, the
    /// test's exact name).
    pub tests: &'static [(&'static str, &'static str)],
    /// Also run `generation-retry-core`'s unit tests (a mutant of core).
    pub core: bool,
    /// Run every test binary, and judge by [`super::guards::guards`] (the
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

use crate::versions::DEFAULT;

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
    "a_worker_killed_inside_a_rescue_is_replaced_and_counting_goes_on",
);
const FULL_ZONE: (&str, &str) = (
    "mid_selection",
    "a_full_zone_at_a_reload_still_rescues_and_says_so",
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
    "a_dead_primary_handed_back_is_neither_failed_again_nor_revived",
);
const HTTP_PATCHED_DEAD_STAYS_DEAD: (&str, &str) = (
    "history",
    "patched_nginx_keeps_a_handed_back_dead_primary_dead",
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
const NEWEST: &str = "1.31.4";
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
    "promtool_accepts_the_exposition_of_many_upstreams_with_odd_names",
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
const SINGLE_PEER: (&str, &str) = ("history", "a_single_peer_is_retried_and_counted");
const ONTO_EMPTY: (&str, &str) = (
    "module_behaviour",
    "a_resnapshot_onto_an_empty_list_fails_as_empty",
);

/// The slot site of `get_peer`'s settling, where each counter of the rule's
/// tally is added to the upstream's shared slot.
pub(super) const SLOT_ADD: &str = "            slot.add(counter, n);\n";

/// A mutant that leaves `Counter::$counter` out of the shared slot.
macro_rules! not_counted {
    ($name:literal, $counter:literal, $tests:expr) => {
        Mutant {
            name: $name,
            file: PEER,
            find: SLOT_ADD,
            replace: concat!(
                "            if counter != generation_retry_core::metrics::Counter::",
                $counter,
                " {\n                slot.add(counter, n);\n            }\n"
            ),
            tests: $tests,
            core: false,
            whole_suite: false,
            version: DEFAULT,
        }
    };
}

/// A patch mutant: the generation comparison never sees a change, so the
/// patched nginx never re-snapshots (at either of its two call sites).
const PATCH_RECHECK: &str = "+    if (generation == u->generation) {\n";
const PATCH_NO_RECHECK: &str = "+    if (1 || generation == u->generation) {\n";

/// Every mutant, in the order they run.
pub const MUTANTS: &[Mutant] = &[
    Mutant {
        name: "data-not-cleared",
        file: INNER,
        find: "            data: core::ptr::null_mut(),\n",
        replace: "            data: pc.data, // left as it was\n",
        tests: &[RESCUES, ("balancers", "round_robin"), STREAM_RESCUES],
        core: false,
        whole_suite: false,
        version: DEFAULT,
    },
    Mutant {
        name: "tries-not-restored",
        file: RESCUE,
        find: "            let tries = fresh_tries(b, left);\n            b.set_tries(tries);\n",
        replace: "            let tries = fresh_tries(b, left);\n",
        tests: &[TRIES],
        core: true,
        whole_suite: false,
        version: DEFAULT,
    },
    Mutant {
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
    },
    Mutant {
        name: "set-session-not-forwarded",
        file: INNER,
        find: "    match inner.set_session {\n",
        replace: "    match inner.set_session.filter(|_| false) {\n",
        tests: &[(
            "https",
            "tls_sessions_are_saved_and_resumed_through_the_wrapper_after_a_rescue",
        )],
        core: false,
        whole_suite: false,
        version: DEFAULT,
    },
    Mutant {
        name: "save-session-not-forwarded",
        file: INNER,
        find: "    if let Some(f) = inner.save_session {\n",
        replace: "    if let Some(f) = inner.save_session.filter(|_| false) {\n",
        tests: &[(
            "https",
            "tls_sessions_are_saved_and_resumed_through_the_wrapper_after_a_rescue",
        )],
        core: false,
        whole_suite: false,
        version: DEFAULT,
    },
    Mutant {
        name: "notify-not-forwarded",
        file: INNER,
        find: "    if let Some(notify) = inner.notify {\n",
        replace: "    if let Some(notify) = inner.notify.filter(|_| false) {\n",
        tests: &[
            STREAM_RESCUES,
            ("stream", "the_connect_notification_reaches_the_balancer"),
        ],
        core: false,
        whole_suite: false,
        version: DEFAULT,
    },
    not_counted!(
        "busy-first-not-counted",
        "BusyFirst",
        &[(
            "mid_selection",
            "a_change_at_the_first_selection_is_rescued_and_counted_as_first"
        )]
    ),
    not_counted!("busy-retry-not-counted", "BusyRetry", &[RESCUES, OBSERVES]),
    not_counted!("resnapshots-not-counted", "Resnapshots", &[RESCUES]),
    not_counted!(
        "excluded-not-counted",
        "Excluded",
        &[("history", "round_robin"), STREAM_HISTORY]
    ),
    not_counted!(
        "retried-not-counted",
        "Retried",
        &[("history", "a_single_peer_is_retried_and_counted")]
    ),
    not_counted!(
        "rescued-not-counted",
        "Rescued",
        &[RESCUES, ("balancers", "round_robin")]
    ),
    not_counted!("failed-not-counted", "Failed", &[OBSERVES, ONTO_EMPTY]),
    not_counted!(
        "no-live-generation-not-counted",
        "NoLiveGeneration",
        &[OBSERVES]
    ),
    not_counted!(
        "no-live-unavailable-not-counted",
        "NoLiveUnavailable",
        &[(
            "module_behaviour",
            "unusable_peers_are_counted_as_unavailable"
        )]
    ),
    not_counted!(
        "no-live-empty-not-counted",
        "NoLiveEmpty",
        &[
            (
                "module_behaviour",
                "empty_list_is_counted_as_empty_and_left_alone"
            ),
            ONTO_EMPTY
        ]
    ),
    Mutant {
        name: "caller-chain-not-restored",
        file: LIVE,
        find: "        caller.put_back(pc);\n",
        replace: "",
        tests: &[(
            "module_behaviour",
            "a_wrapper_outside_ours_sees_every_get_and_free_of_a_rescued_request",
        )],
        core: false,
        whole_suite: false,
        version: DEFAULT,
    },
    Mutant {
        name: "worker-not-recorded",
        file: SHM,
        find: "    unsafe { worker_started(cycle) };\n",
        replace: "    let _ = cycle;\n",
        tests: &[OLD_WORKER],
        core: false,
        whole_suite: false,
        version: DEFAULT,
    },
    Mutant {
        name: "dead-workers-alive",
        file: SHM,
        find:
            "    rc == 0 || std::io::Error::last_os_error().raw_os_error() != Some(ESRCH as i32)\n",
        replace: "    let _ = rc;\n    true\n",
        tests: &[KILLED_WORKER],
        core: false,
        whole_suite: false,
        version: DEFAULT,
    },
    Mutant {
        name: "full-zone-unwrapped",
        file: PEER,
        find: "    if let Some(slot) = conf.slot() {\n",
        replace: "    if let Some(slot) = Some(conf.slot().expect(\"counters\")) {\n",
        tests: &[FULL_ZONE],
        core: false,
        whole_suite: false,
        version: DEFAULT,
    },
    Mutant {
        name: "unrecorded-workers-ignored",
        file: SHM,
        find: "                return 0;\n",
        replace: "                None\n",
        tests: &[FULL_TABLE],
        core: false,
        whole_suite: false,
        version: DEFAULT,
    },
    Mutant {
        name: "live-workers-ignored",
        file: SHM,
        find: "            Ok(oldest) => oldest,\n",
        replace: "            Ok(_) => None,\n",
        tests: &[OLD_WORKER],
        core: false,
        whole_suite: false,
        version: DEFAULT,
    },
    Mutant {
        name: "phase-swapped",
        file: RESCUE,
        find: "        tally.add(if first {\n",
        replace: "        tally.add(if !first {\n",
        tests: &[RESCUES, STREAM_RESCUES],
        core: true,
        whole_suite: false,
        version: DEFAULT,
    },
    Mutant {
        name: "max-ignored",
        file: RESCUE,
        find: "        for _ in 0..setting.max {\n",
        replace: "        for _ in 0.. {\n",
        tests: &[
            RESCUES,
            (
                "mid_selection",
                "max_is_how_many_times_a_moving_list_is_followed",
            ),
        ],
        core: true,
        whole_suite: false,
        version: DEFAULT,
    },
    Mutant {
        name: "init-not-settled",
        file: PEER,
        find: "    for _ in 1..SETTLE_RUNS {\n",
        replace: "    for _ in 1..1 {\n",
        tests: &[
            (
                "mid_selection",
                "a_change_during_the_balancers_init_is_absorbed",
            ),
            (
                "mid_selection",
                "a_refusal_after_a_change_during_the_init_is_the_lists_own",
            ),
        ],
        core: false,
        whole_suite: false,
        version: DEFAULT,
    },
    Mutant {
        name: "reinit-generation-ignored",
        file: RESCUE,
        find: "                Ok(at) => self.generation = at,\n",
        replace: "                Ok(_) => {}\n",
        tests: &[],
        core: true,
        whole_suite: false,
        version: DEFAULT,
    },
    Mutant {
        name: "http-patch-no-recheck",
        file: HTTP_PATCH,
        find: PATCH_RECHECK,
        replace: PATCH_NO_RECHECK,
        tests: &[
            (
                "patched",
                "patched_nginx_rescues_the_race_without_the_module",
            ),
            ("patched", "module_in_patched_nginx_finds_nothing_to_rescue"),
            ("balancers", "patched_round_robin"),
        ],
        core: false,
        whole_suite: false,
        version: DEFAULT,
    },
    Mutant {
        name: "stream-patch-no-recheck",
        file: STREAM_PATCH,
        find: PATCH_RECHECK,
        replace: PATCH_NO_RECHECK,
        tests: &[
            (
                "stream",
                "patched_nginx_rescues_the_stream_race_without_the_module",
            ),
            (
                "stream",
                "module_in_patched_nginx_counts_nothing_for_stream",
            ),
        ],
        core: false,
        whole_suite: false,
        version: DEFAULT,
    },
    Mutant {
        name: "history-ignored",
        file: LIVE,
        find: "        self.history.holds(unsafe { &*self.pc })\n",
        replace: "        let _ = unsafe { &*self.pc };\n        false\n",
        tests: &[
            ("history", "round_robin"),
            ("history", "hash"),
            STREAM_HISTORY,
        ],
        core: false,
        whole_suite: false,
        version: DEFAULT,
    },
    Mutant {
        name: "history-not-recorded",
        file: INNER,
        find: "        head.history.record(unsafe { &*pc });\n",
        replace: "        let _ = unsafe { &*pc };\n",
        tests: &[("history", "least_conn"), STREAM_HISTORY],
        core: false,
        whole_suite: false,
        version: DEFAULT,
    },
    Mutant {
        name: "lean-history-not-recorded",
        file: LEAN,
        find: "        Ok((pd, _, _)) => unsafe { (*pd).head.history.record(&*pc) },\n",
        replace: "        Ok((pd, _, _)) => {\n            let _ = pd;\n        }\n",
        tests: &[("history", "round_robin")],
        core: false,
        whole_suite: false,
        version: DEFAULT,
    },
    Mutant {
        name: "lean-takeover-ignored",
        file: LEAN,
        find: "    if !ours || pc.data != data {\n",
        replace: "    if (ours && false) || pc.data != data {\n",
        tests: &[(
            "history",
            "the_module_in_the_patched_nginx_leaves_its_hand_backs_alone",
        )],
        core: false,
        whole_suite: false,
        version: DEFAULT,
    },
    Mutant {
        name: "hand-back-as-failed",
        file: LIVE,
        find: "        let state = 0;\n",
        replace: "        let state = ngx::ffi::NGX_PEER_FAILED as ngx::ffi::ngx_uint_t;\n",
        tests: &[
            ("soundness", "a_peer_handed_back_unused_is_not_failed_twice"),
            DEAD_STAYS_DEAD,
            HTTP_DEAD_STAYS_DEAD,
        ],
        core: false,
        whole_suite: false,
        version: DEFAULT,
    },
    Mutant {
        name: "hand-back-revives",
        file: LIVE,
        find: "        untouch_peer::<P>(self.uscf, unsafe { (*self.pc).name });\n",
        replace: "        let _ = unsafe { (*self.pc).name };\n",
        tests: &[DEAD_STAYS_DEAD, HTTP_DEAD_STAYS_DEAD],
        core: false,
        whole_suite: false,
        version: DEFAULT,
    },
    Mutant {
        name: "errored-keeps-the-peer-name",
        file: PEER,
        find: concat!(
            "            // re-resolve frees, which nginx's log handler would read.\n",
            "            pc.name = ptr::from_ref(P::host(uscf)).cast_mut();\n",
        ),
        replace: "            // re-resolve frees, which nginx's log handler would read.\n",
        tests: &[(
            "soundness",
            "an_error_after_a_hand_back_logs_no_handed_back_peer",
        )],
        core: false,
        whole_suite: false,
        version: DEFAULT,
    },
    Mutant {
        name: "rescue-logged-at-warn",
        file: PEER,
        find: "                NGX_LOG_INFO,\n",
        replace: "                NGX_LOG_INFO - 2, // NGX_LOG_WARN\n",
        tests: &[RESCUES],
        core: false,
        whole_suite: false,
        version: DEFAULT,
    },
    Mutant {
        name: "hand-back-leaves-sockaddr",
        file: LIVE,
        find: "        unsafe { (*self.pc).sockaddr = ptr::null_mut() };\n",
        replace: "        let _ = unsafe { (*self.pc).sockaddr };\n",
        tests: &[TRIES],
        core: false,
        whole_suite: false,
        version: DEFAULT,
    },
    Mutant {
        name: "stream-patch-hand-back-revives",
        file: STREAM_HISTORY_PATCH,
        find: "+        pc->free(pc, data, t->state & NGX_PEER_FAILED);\n",
        replace: "+        pc->free(pc, data, t->state & 0);\n",
        tests: &[PATCHED_DEAD_STAYS_DEAD],
        core: false,
        whole_suite: false,
        version: DEFAULT,
    },
    Mutant {
        name: "http-patch-hand-back-revives",
        file: HTTP_HISTORY_PATCH,
        find: "+        pc->free(pc, data, t->state & NGX_PEER_FAILED);\n",
        replace: "+        pc->free(pc, data, t->state & 0);\n",
        tests: &[HTTP_PATCHED_DEAD_STAYS_DEAD],
        core: false,
        whole_suite: false,
        version: DEFAULT,
    },
    Mutant {
        name: "http-patch-history-ignored",
        file: HTTP_HISTORY_PATCH,
        find: "+        u->peer.get = ngx_http_upstream_get_untried_peer;\n",
        replace: "+        (void) ngx_http_upstream_get_untried_peer;\n",
        tests: &[
            ("history", "patched_round_robin"),
            ("history", "patched_ip_hash"),
        ],
        core: false,
        whole_suite: false,
        version: DEFAULT,
    },
    Mutant {
        name: "stream-patch-history-ignored",
        file: STREAM_HISTORY_PATCH,
        find: "+        u->peer.get = ngx_stream_proxy_get_untried_peer;\n",
        replace: "+        (void) ngx_stream_proxy_get_untried_peer;\n",
        tests: &[PATCHED_STREAM_HISTORY],
        core: false,
        whole_suite: false,
        version: DEFAULT,
    },
    // The gaps issue 28 listed: status escaping, HEAD, 405 and JSON; zone
    // name matching and the two-configuration window; the choice of a
    // `no_live` cause; the single peer passed on; `off` never
    // re-snapshotting.
    Mutant {
        name: "label-newline-raw",
        file: METRICS,
        find: "            '\\n' => out.push_str(\"\\\\n\"),\n            c => out.push(c),\n",
        replace: "            c => out.push(c),\n",
        tests: &[ODD_NAMES],
        core: true,
        whole_suite: false,
        version: DEFAULT,
    },
    Mutant {
        name: "json-controls-raw",
        file: METRICS,
        find: "            c if (c as u32) < 0x20 => {\n",
        replace: "            c if (c as u32) < 0x0a => {\n",
        tests: &[ODD_NAMES],
        core: true,
        whole_suite: false,
        version: DEFAULT,
    },
    Mutant {
        name: "format-prefix",
        file: METRICS,
        find: ".any(|arg| arg == b\"format=json\")",
        replace: ".any(|arg| arg.starts_with(b\"format=\"))",
        tests: &[STATUS_PAGE],
        core: true,
        whole_suite: false,
        version: DEFAULT,
    },
    Mutant {
        name: "head-with-body",
        file: STATUS,
        find: "    let head = r.method == NGX_HTTP_HEAD as ngx_uint_t",
        replace: "    let head = r.method == 0",
        tests: &[STATUS_PAGE],
        core: false,
        whole_suite: false,
        version: DEFAULT,
    },
    Mutant {
        name: "any-method",
        file: STATUS,
        find: "    if r.method & (NGX_HTTP_GET | NGX_HTTP_HEAD) as ngx_uint_t == 0 {\n",
        replace: "    if r.method & 0 != 0 {\n",
        tests: &[STATUS_PAGE],
        core: false,
        whole_suite: false,
        version: DEFAULT,
    },
    Mutant {
        name: "names-case-sensitive",
        file: CORE_ZONE,
        find: "    name.to_ascii_lowercase()\n",
        replace: "    name.to_vec()\n",
        tests: &[NAMES_MATCHED],
        core: true,
        whole_suite: false,
        version: DEFAULT,
    },
    Mutant {
        name: "window-of-one",
        file: CORE_ZONE,
        find: "    let keep_from = new.saturating_sub(2);\n",
        replace: "    let keep_from = new.saturating_sub(1);\n",
        tests: &[FAILED_RELOAD],
        core: true,
        whole_suite: false,
        version: DEFAULT,
    },
    Mutant {
        name: "cause-swapped",
        file: METRICS,
        find: "        if primary == 0 && backup == 0 {\n",
        replace: "        if primary != 0 || backup != 0 {\n",
        tests: &[EMPTY_CAUSE, UNAVAILABLE_CAUSE],
        core: true,
        whole_suite: false,
        version: DEFAULT,
    },
    Mutant {
        name: "single-peer-excluded",
        file: RESCUE,
        find: "    if (primary, backup) == (1, 0) {\n",
        replace: "    if (primary, backup) == (1, 0) && false {\n",
        tests: &[SINGLE_PEER],
        core: true,
        whole_suite: false,
        version: DEFAULT,
    },
    Mutant {
        name: "off-resnapshots",
        file: RESCUE,
        find: "        if !setting.enabled {\n",
        replace: "        if false && !setting.enabled {\n",
        tests: &[OBSERVES],
        core: true,
        whole_suite: false,
        version: DEFAULT,
    },
    // On the newest release: the module and the patches where `sticky`
    // and `least_time` run (guards on 1.28.0, which has neither), and each
    // patch in 1.31.4's context (its added lines are 1.28.0's, its
    // surroundings are not).
    Mutant {
        name: "data-not-cleared-1.31.4",
        file: INNER,
        find: "            data: core::ptr::null_mut(),\n",
        replace: "            data: pc.data, // left as it was\n",
        tests: &[
            ("balancers", "sticky_cookie"),
            ("balancers", "least_time"),
            (
                "stream",
                "module_on_rescues_the_stream_race_with_least_time",
            ),
        ],
        core: false,
        whole_suite: false,
        version: NEWEST,
    },
    Mutant {
        name: "replaced-cookie-kept-1.31.4",
        file: "module/src/proto.rs",
        find: "                h.hash = 0;\n",
        replace: "                let _ = h.hash;\n",
        tests: &[("balancers", "sticky_cookie")],
        core: false,
        whole_suite: false,
        version: NEWEST,
    },
    Mutant {
        name: "notify-not-cleared-1.31.4",
        file: INNER,
        find: "            notify: None,\n",
        replace: "            notify: pc.notify, // left as it was\n",
        tests: &[("balancers", "sticky_learn")],
        core: false,
        whole_suite: false,
        version: NEWEST,
    },
    Mutant {
        name: "patch-notify-not-cleared-1.31.4",
        file: NEWEST_HTTP_PATCH,
        find: "+    u->peer.notify = NULL;  /* a balancer wraps one it finds set */\n",
        replace: "+    (void) u;  /* notify left as it was */\n",
        tests: &[("balancers", "patched_sticky_learn")],
        core: false,
        whole_suite: false,
        version: NEWEST,
    },
    Mutant {
        name: "http-patch-no-recheck-1.31.4",
        file: NEWEST_HTTP_PATCH,
        find: PATCH_RECHECK,
        replace: PATCH_NO_RECHECK,
        tests: &[
            (
                "patched",
                "patched_nginx_rescues_the_race_without_the_module",
            ),
            ("balancers", "patched_sticky_cookie"),
            ("balancers", "patched_least_time"),
        ],
        core: false,
        whole_suite: false,
        version: NEWEST,
    },
    Mutant {
        name: "stream-patch-no-recheck-1.31.4",
        file: NEWEST_STREAM_PATCH,
        find: PATCH_RECHECK,
        replace: PATCH_NO_RECHECK,
        tests: &[(
            "stream",
            "patched_nginx_rescues_the_stream_race_without_the_module",
        )],
        core: false,
        whole_suite: false,
        version: NEWEST,
    },
    Mutant {
        name: "http-patch-hand-back-revives-1.31.4",
        file: NEWEST_HTTP_HISTORY_PATCH,
        find: "+        pc->free(pc, data, t->state & NGX_PEER_FAILED);\n",
        replace: "+        pc->free(pc, data, t->state & 0);\n",
        tests: &[HTTP_PATCHED_DEAD_STAYS_DEAD],
        core: false,
        whole_suite: false,
        version: NEWEST,
    },
    Mutant {
        name: "stream-patch-hand-back-revives-1.31.4",
        file: NEWEST_STREAM_HISTORY_PATCH,
        find: "+        pc->free(pc, data, t->state & NGX_PEER_FAILED);\n",
        replace: "+        pc->free(pc, data, t->state & 0);\n",
        tests: &[PATCHED_DEAD_STAYS_DEAD],
        core: false,
        whole_suite: false,
        version: NEWEST,
    },
    Mutant {
        name: "do-nothing",
        file: PEER,
        find: "    if rc != Status::NGX_OK.into() {\n        return rc;\n    }\n",
        replace: concat!(
            "    if true || rc != Status::NGX_OK.into() {\n",
            "        return rc; // the wrapper is never installed\n",
            "    }\n",
        ),
        tests: &[],
        core: false,
        whole_suite: true,
        version: DEFAULT,
    },
];
