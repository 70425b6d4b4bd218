//! Mutants of the module's peer wrapper (`module/src/peer.rs`, `peer/`, and
//! `proto`'s cookie handling): the callbacks forwarded and cleared, the
//! history kept, the hand-backs, the init settled, the rescue's log level,
//! and the do-nothing module.

use super::*;
use crate::versions::DEFAULT;

pub(super) const DATA_NOT_CLEARED: Mutant = Mutant {
    name: "data-not-cleared",
    file: INNER,
    find: "            data: core::ptr::null_mut(),\n",
    replace: "            data: pc.data, // left as it was\n",
    tests: &[RESCUES, ("balancers", "round_robin"), STREAM_RESCUES],
    core: false,
    whole_suite: false,
    version: DEFAULT,
};

pub(super) const SET_SESSION_NOT_FORWARDED: Mutant = Mutant {
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
};

pub(super) const SAVE_SESSION_NOT_FORWARDED: Mutant = Mutant {
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
};

pub(super) const NOTIFY_NOT_FORWARDED: Mutant = Mutant {
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
};

pub(super) const CALLER_CHAIN_NOT_RESTORED: Mutant = Mutant {
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
};

pub(super) const FULL_ZONE_UNWRAPPED: Mutant = Mutant {
    name: "full-zone-unwrapped",
    file: PEER,
    find: "    if let Some(slot) = conf.slot() {\n",
    replace: "    if let Some(slot) = Some(conf.slot().expect(\"counters\")) {\n",
    tests: &[FULL_ZONE],
    core: false,
    whole_suite: false,
    version: DEFAULT,
};

pub(super) const INIT_NOT_SETTLED: Mutant = Mutant {
    name: "init-not-settled",
    file: PEER,
    find: "    for _ in 1..SETTLE_RUNS {\n",
    replace: "    for _ in 1..1 {\n",
    tests: &[
        (
            "mid_selection",
            "first_selection::a_change_during_the_balancers_init_is_absorbed",
        ),
        (
            "mid_selection",
            "first_selection::a_refusal_after_a_change_during_the_init_is_the_lists_own",
        ),
    ],
    core: false,
    whole_suite: false,
    version: DEFAULT,
};

pub(super) const HISTORY_IGNORED: Mutant = Mutant {
    name: "history-ignored",
    file: LIVE,
    find: "        self.history.holds(unsafe { &*self.pc })\n",
    replace: "        let _ = unsafe { &*self.pc };\n        false\n",
    tests: &[
        ("history", "every_balancer::round_robin"),
        ("history", "every_balancer::hash"),
        STREAM_HISTORY,
        (
            "dns_records",
            "aaaa_address_added_tried_kept::module_on_rescues_and_counts",
        ),
    ],
    core: false,
    whole_suite: false,
    version: DEFAULT,
};

pub(super) const HISTORY_NOT_RECORDED: Mutant = Mutant {
    name: "history-not-recorded",
    file: INNER,
    find: "        head.history.record(unsafe { &*pc }, state);\n",
    replace: "        let _ = unsafe { &*pc };\n",
    tests: &[("history", "every_balancer::least_conn"), STREAM_HISTORY],
    core: false,
    whole_suite: false,
    version: DEFAULT,
};

pub(super) const LEAN_HISTORY_NOT_RECORDED: Mutant = Mutant {
    name: "lean-history-not-recorded",
    file: LEAN,
    find: "        Ok((pd, _, _)) => unsafe { (*pd).head.history.record(&*pc, state) },\n",
    replace: "        Ok((pd, _, _)) => {\n            let _ = pd;\n        }\n",
    tests: &[("history", "every_balancer::round_robin")],
    core: false,
    whole_suite: false,
    version: DEFAULT,
};

pub(super) const LEAN_TAKEOVER_IGNORED: Mutant = Mutant {
    name: "lean-takeover-ignored",
    file: LEAN,
    find: "    if !ours || pc.data != data {\n",
    replace: "    if (ours && false) || pc.data != data {\n",
    tests: &[(
        "history",
        "patched_hand_backs::the_module_in_the_patched_nginx_leaves_its_hand_backs_alone",
    )],
    core: false,
    whole_suite: false,
    version: DEFAULT,
};

pub(super) const HAND_BACK_AS_FAILED: Mutant = Mutant {
    name: "hand-back-as-failed",
    file: LIVE,
    find: "        let state = NGX_PEER_NEXT as ngx_uint_t;\n",
    replace:
        "        let state = ngx::ffi::NGX_PEER_FAILED as ngx_uint_t; let _ = NGX_PEER_NEXT;\n",
    tests: &[
        ("soundness", "a_peer_handed_back_unused_is_not_failed_twice"),
        DEAD_STAYS_DEAD,
        HTTP_DEAD_STAYS_DEAD,
    ],
    core: false,
    whole_suite: false,
    version: DEFAULT,
};

pub(super) const HAND_BACK_REVIVES: Mutant = Mutant {
    name: "hand-back-revives",
    file: LIVE,
    find: "        untouch_peer::<P>(self.uscf, unsafe { (*self.pc).name });\n",
    replace: "        let _ = unsafe { (*self.pc).name };\n",
    tests: &[DEAD_STAYS_DEAD, HTTP_DEAD_STAYS_DEAD],
    core: false,
    whole_suite: false,
    version: DEFAULT,
};

pub(super) const ERRORED_KEEPS_THE_PEER_NAME: Mutant = Mutant {
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
};

pub(super) const RESCUE_LOGGED_AT_WARN: Mutant = Mutant {
    name: "rescue-logged-at-warn",
    file: PEER,
    find: "                NGX_LOG_INFO,\n",
    replace: "                NGX_LOG_INFO - 2, // NGX_LOG_WARN\n",
    tests: &[RESCUES],
    core: false,
    whole_suite: false,
    version: DEFAULT,
};

pub(super) const HAND_BACK_LEAVES_SOCKADDR: Mutant = Mutant {
    name: "hand-back-leaves-sockaddr",
    file: LIVE,
    find: "        unsafe { (*self.pc).sockaddr = ptr::null_mut() };\n",
    replace: "        let _ = unsafe { (*self.pc).sockaddr };\n",
    tests: &[TRIES],
    core: false,
    whole_suite: false,
    version: DEFAULT,
};

pub(super) const DATA_NOT_CLEARED_1_31_4: Mutant = Mutant {
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
};

pub(super) const REPLACED_COOKIE_KEPT_1_31_4: Mutant = Mutant {
    name: "replaced-cookie-kept-1.31.4",
    file: "module/src/proto/http.rs",
    find: "                h.hash = 0;\n",
    replace: "                let _ = h.hash;\n",
    tests: &[("balancers", "sticky_cookie")],
    core: false,
    whole_suite: false,
    version: NEWEST,
};

/// Issue 47, item 3: a handed-back peer freed with state 0, as a success,
/// which `sticky learn` (without `header`) learns for the session.
pub(super) const HAND_BACK_LEARNED_1_31_4: Mutant = Mutant {
    name: "hand-back-learned-1.31.4",
    file: LIVE,
    find: "        let state = NGX_PEER_NEXT as ngx_uint_t;\n",
    replace: "        let state = 0 as ngx_uint_t; let _ = NGX_PEER_NEXT; // a success\n",
    tests: &[(
        "balancers",
        "sticky::a_peer_handed_back_is_not_learned_for_the_session",
    )],
    core: false,
    whole_suite: false,
    version: NEWEST,
};

/// Issue 47, item 3: a fresh state's cookie hidden only when the outcome
/// gives a peer, so a rescue that ends all tried sends two.
pub(super) const ALL_TRIED_COOKIES_KEPT_1_31_4: Mutant = Mutant {
    name: "all-tried-cookies-kept-1.31.4",
    file: PEER,
    find: "    if data.state.resnapshots > 0 {\n",
    replace: concat!(
        "    if data.state.resnapshots > 0\n",
        "        && matches!(decision.outcome, Outcome::Pass(Selection::Peer(_)) | Outcome::Rescued { .. })\n",
        "    {\n",
    ),
    tests: &[(
        "balancers",
        "sticky::an_all_tried_502_sends_one_cookie_per_name",
    )],
    core: false,
    whole_suite: false,
    version: NEWEST,
};

pub(super) const NOTIFY_NOT_CLEARED_1_31_4: Mutant = Mutant {
    name: "notify-not-cleared-1.31.4",
    file: INNER,
    find: "            notify: None,\n",
    replace: "            notify: pc.notify, // left as it was\n",
    tests: &[("balancers", "sticky_learn")],
    core: false,
    whole_suite: false,
    version: NEWEST,
};

pub(super) const DO_NOTHING: Mutant = Mutant {
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
};
