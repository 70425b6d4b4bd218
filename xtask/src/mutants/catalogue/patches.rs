//! Mutants of the core patches (`nginx-src-patches/`), on 1.28.0 and on the
//! newest release: the generation recheck, the hand-backs, the history,
//! `notify` cleared.

use super::*;
use crate::versions::DEFAULT;

/// patched nginx never re-snapshots (at either of its two call sites).
const PATCH_RECHECK: &str = "+    if (generation == u->generation) {\n";
const PATCH_NO_RECHECK: &str = "+    if (1 || generation == u->generation) {\n";

pub(super) const HTTP_PATCH_NO_RECHECK: Mutant = Mutant {
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
};

pub(super) const STREAM_PATCH_NO_RECHECK: Mutant = Mutant {
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
};

pub(super) const STREAM_PATCH_HAND_BACK_REVIVES: Mutant = Mutant {
    name: "stream-patch-hand-back-revives",
    file: STREAM_HISTORY_PATCH,
    find: "+        ngx_stream_proxy_untouch_peer(u, pc->name);\n",
    replace: "+        (void) ngx_stream_proxy_untouch_peer;\n",
    tests: &[PATCHED_DEAD_STAYS_DEAD],
    core: false,
    whole_suite: false,
    version: DEFAULT,
};

pub(super) const HTTP_PATCH_HAND_BACK_REVIVES: Mutant = Mutant {
    name: "http-patch-hand-back-revives",
    file: HTTP_HISTORY_PATCH,
    find: "+        ngx_http_upstream_untouch_peer(u, pc->name);\n",
    replace: "+        (void) ngx_http_upstream_untouch_peer;\n",
    tests: &[HTTP_PATCHED_DEAD_STAYS_DEAD],
    core: false,
    whole_suite: false,
    version: DEFAULT,
};

pub(super) const HTTP_PATCH_HISTORY_IGNORED: Mutant = Mutant {
    name: "http-patch-history-ignored",
    file: HTTP_HISTORY_PATCH,
    find: "+        u->peer.get = ngx_http_upstream_get_untried_peer;\n",
    replace: "+        (void) ngx_http_upstream_get_untried_peer;\n",
    tests: &[
        ("history", "every_balancer::patched_round_robin"),
        ("history", "every_balancer::patched_ip_hash"),
        (
            "dns_records",
            "aaaa_address_added_tried_kept::patched_nginx_rescues",
        ),
    ],
    core: false,
    whole_suite: false,
    version: DEFAULT,
};

pub(super) const STREAM_PATCH_HISTORY_IGNORED: Mutant = Mutant {
    name: "stream-patch-history-ignored",
    file: STREAM_HISTORY_PATCH,
    find: "+        u->peer.get = ngx_stream_proxy_get_untried_peer;\n",
    replace: "+        (void) ngx_stream_proxy_get_untried_peer;\n",
    tests: &[PATCHED_STREAM_HISTORY],
    core: false,
    whole_suite: false,
    version: DEFAULT,
};

pub(super) const PATCH_NOTIFY_NOT_CLEARED_1_31_4: Mutant = Mutant {
    name: "patch-notify-not-cleared-1.31.4",
    file: NEWEST_HTTP_PATCH,
    find: "+    u->peer.notify = NULL;  /* a balancer wraps one it finds set */\n",
    replace: "+    (void) u;  /* notify left as it was */\n",
    tests: &[("balancers", "patched_sticky_learn")],
    core: false,
    whole_suite: false,
    version: NEWEST,
};

pub(super) const HTTP_PATCH_NO_RECHECK_1_31_4: Mutant = Mutant {
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
};

pub(super) const STREAM_PATCH_NO_RECHECK_1_31_4: Mutant = Mutant {
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
};

pub(super) const HTTP_PATCH_HAND_BACK_REVIVES_1_31_4: Mutant = Mutant {
    name: "http-patch-hand-back-revives-1.31.4",
    file: NEWEST_HTTP_HISTORY_PATCH,
    find: "+        ngx_http_upstream_untouch_peer(u, pc->name);\n",
    replace: "+        (void) ngx_http_upstream_untouch_peer;\n",
    tests: &[HTTP_PATCHED_DEAD_STAYS_DEAD],
    core: false,
    whole_suite: false,
    version: NEWEST,
};

pub(super) const STREAM_PATCH_HAND_BACK_REVIVES_1_31_4: Mutant = Mutant {
    name: "stream-patch-hand-back-revives-1.31.4",
    file: NEWEST_STREAM_HISTORY_PATCH,
    find: "+        ngx_stream_proxy_untouch_peer(u, pc->name);\n",
    replace: "+        (void) ngx_stream_proxy_untouch_peer;\n",
    tests: &[PATCHED_DEAD_STAYS_DEAD],
    core: false,
    whole_suite: false,
    version: NEWEST,
};

/// Defect C in 1.31.4's series: a tried peer handed back as failed.
const HAND_BACK_PASSED_OVER: &str = "+        pc->free(pc, data, NGX_PEER_NEXT);\n";
const HAND_BACK_FAILED: &str = "+        pc->free(pc, data, NGX_PEER_FAILED);\n";

pub(super) const HTTP_PATCH_HAND_BACK_AS_FAILED_1_31_4: Mutant = Mutant {
    name: "http-patch-hand-back-as-failed-1.31.4",
    file: NEWEST_HTTP_HISTORY_PATCH,
    find: HAND_BACK_PASSED_OVER,
    replace: HAND_BACK_FAILED,
    tests: &[
        (
            "soundness",
            "patched_a_peer_handed_back_unused_is_not_failed_twice",
        ),
        HTTP_PATCHED_DEAD_STAYS_DEAD,
    ],
    core: false,
    whole_suite: false,
    version: NEWEST,
};

pub(super) const STREAM_PATCH_HAND_BACK_AS_FAILED_1_31_4: Mutant = Mutant {
    name: "stream-patch-hand-back-as-failed-1.31.4",
    file: NEWEST_STREAM_HISTORY_PATCH,
    find: HAND_BACK_PASSED_OVER,
    replace: HAND_BACK_FAILED,
    tests: &[PATCHED_DEAD_STAYS_DEAD],
    core: false,
    whole_suite: false,
    version: NEWEST,
};

/// Defect A in 1.31.4's series: the fresh state's tries count the peers
/// already tried.
const TRIES_LESS_TRIED: &str =
    "+        u->peer.tries = (u->peer.tries > n) ? u->peer.tries - n : 0;\n";

pub(super) const HTTP_PATCH_TRIES_UNCAPPED_1_31_4: Mutant = Mutant {
    name: "http-patch-tries-uncapped-1.31.4",
    file: NEWEST_HTTP_HISTORY_PATCH,
    find: TRIES_LESS_TRIED,
    replace: "+        (void) n;\n",
    tests: &[(
        "soundness",
        "patched_a_list_that_lost_a_peer_passes_the_last_peers_503_on",
    )],
    core: false,
    whole_suite: false,
    version: NEWEST,
};

pub(super) const STREAM_PATCH_TRIES_UNCAPPED_1_31_4: Mutant = Mutant {
    name: "stream-patch-tries-uncapped-1.31.4",
    file: NEWEST_STREAM_HISTORY_PATCH,
    find: TRIES_LESS_TRIED,
    replace: "+        (void) n;\n",
    tests: &[(
        "soundness",
        "patched_a_stream_list_that_lost_a_peer_ends_the_session_when_its_tries_do",
    )],
    core: false,
    whole_suite: false,
    version: NEWEST,
};

/// Defect B in 1.31.4's series: the first attempt's `Set-Cookie` kept.
pub(super) const PATCH_REPLACED_COOKIE_KEPT_1_31_4: Mutant = Mutant {
    name: "patch-replaced-cookie-kept-1.31.4",
    file: NEWEST_HTTP_PATCH,
    find: "+        ngx_http_upstream_hide_replaced_cookies(r, u);\n",
    replace: "+        (void) ngx_http_upstream_hide_replaced_cookies;\n",
    tests: &[("balancers", "patched_sticky_cookie")],
    core: false,
    whole_suite: false,
    version: NEWEST,
};

/// Defect D in 1.31.4's series: after a hand-back, an error leaves the
/// handed-back peer's name.
pub(super) const HTTP_PATCH_ERRORED_KEEPS_THE_PEER_NAME_1_31_4: Mutant = Mutant {
    name: "http-patch-errored-keeps-the-peer-name-1.31.4",
    file: NEWEST_HTTP_HISTORY_PATCH,
    find: "+                /* the name of a peer returned, which may be freed */\n\
           +                pc->name = &u->upstream->host;\n",
    // As many lines as `find`: the patch's hunk counts stay right.
    replace: "+                /* the returned peer's name is kept */\n\
              +                (void) u;\n",
    tests: &[(
        "soundness",
        "patched_an_error_after_a_hand_back_logs_no_handed_back_peer",
    )],
    core: false,
    whole_suite: false,
    version: NEWEST,
};
