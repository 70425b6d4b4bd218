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
    find: "+        pc->free(pc, data, t->state & NGX_PEER_FAILED);\n",
    replace: "+        pc->free(pc, data, t->state & 0);\n",
    tests: &[PATCHED_DEAD_STAYS_DEAD],
    core: false,
    whole_suite: false,
    version: DEFAULT,
};

pub(super) const HTTP_PATCH_HAND_BACK_REVIVES: Mutant = Mutant {
    name: "http-patch-hand-back-revives",
    file: HTTP_HISTORY_PATCH,
    find: "+        pc->free(pc, data, t->state & NGX_PEER_FAILED);\n",
    replace: "+        pc->free(pc, data, t->state & 0);\n",
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
    find: "+        pc->free(pc, data, t->state & NGX_PEER_FAILED);\n",
    replace: "+        pc->free(pc, data, t->state & 0);\n",
    tests: &[HTTP_PATCHED_DEAD_STAYS_DEAD],
    core: false,
    whole_suite: false,
    version: NEWEST,
};

pub(super) const STREAM_PATCH_HAND_BACK_REVIVES_1_31_4: Mutant = Mutant {
    name: "stream-patch-hand-back-revives-1.31.4",
    file: NEWEST_STREAM_HISTORY_PATCH,
    find: "+        pc->free(pc, data, t->state & NGX_PEER_FAILED);\n",
    replace: "+        pc->free(pc, data, t->state & 0);\n",
    tests: &[PATCHED_DEAD_STAYS_DEAD],
    core: false,
    whole_suite: false,
    version: NEWEST,
};
