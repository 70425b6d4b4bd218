//! Mutants of what is counted and shown: each counter left out of the
//! shared slot, the Prometheus and JSON renderers' escaping, the status
//! query's format, the status page's methods, the `no_live` cause.

use super::*;
use crate::versions::DEFAULT;

/// The slot site of `get_peer`'s settling, where each counter of the rule's
/// tally is added to the upstream's shared slot.
pub(in crate::mutants) const SLOT_ADD: &str = "            slot.add(counter, n);\n";

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

pub(super) const BUSY_FIRST_NOT_COUNTED: Mutant = not_counted!(
    "busy-first-not-counted",
    "BusyFirst",
    &[(
        "mid_selection",
        "first_selection::a_change_at_the_first_selection_is_rescued_and_counted_as_first"
    )]
);

pub(super) const BUSY_RETRY_NOT_COUNTED: Mutant =
    not_counted!("busy-retry-not-counted", "BusyRetry", &[RESCUES, OBSERVES]);

pub(super) const RESNAPSHOTS_NOT_COUNTED: Mutant =
    not_counted!("resnapshots-not-counted", "Resnapshots", &[RESCUES]);

pub(super) const EXCLUDED_NOT_COUNTED: Mutant = not_counted!(
    "excluded-not-counted",
    "Excluded",
    &[("history", "every_balancer::round_robin"), STREAM_HISTORY]
);

pub(super) const RETRIED_NOT_COUNTED: Mutant = not_counted!(
    "retried-not-counted",
    "Retried",
    &[(
        "history",
        "single_peer::a_single_peer_is_retried_and_counted"
    )]
);

pub(super) const RESCUED_NOT_COUNTED: Mutant = not_counted!(
    "rescued-not-counted",
    "Rescued",
    &[RESCUES, ("balancers", "round_robin")]
);

pub(super) const FAILED_NOT_COUNTED: Mutant =
    not_counted!("failed-not-counted", "Failed", &[OBSERVES, ONTO_EMPTY]);

pub(super) const NO_LIVE_GENERATION_NOT_COUNTED: Mutant = not_counted!(
    "no-live-generation-not-counted",
    "NoLiveGeneration",
    &[OBSERVES]
);

pub(super) const NO_LIVE_UNAVAILABLE_NOT_COUNTED: Mutant = not_counted!(
    "no-live-unavailable-not-counted",
    "NoLiveUnavailable",
    &[(
        "module_behaviour",
        "unusable_peers_are_counted_as_unavailable"
    )]
);

pub(super) const NO_LIVE_EMPTY_NOT_COUNTED: Mutant = not_counted!(
    "no-live-empty-not-counted",
    "NoLiveEmpty",
    &[
        (
            "module_behaviour",
            "empty_list_is_counted_as_empty_and_left_alone"
        ),
        ONTO_EMPTY
    ]
);

pub(super) const LABEL_NEWLINE_RAW: Mutant = Mutant {
    name: "label-newline-raw",
    file: METRICS,
    find: "            '\\n' => out.push_str(\"\\\\n\"),\n            c => out.push(c),\n",
    replace: "            c => out.push(c),\n",
    tests: &[ODD_NAMES],
    core: true,
    whole_suite: false,
    version: DEFAULT,
};

pub(super) const JSON_CONTROLS_RAW: Mutant = Mutant {
    name: "json-controls-raw",
    file: METRICS,
    find: "            c if (c as u32) < 0x20 => {\n",
    replace: "            c if (c as u32) < 0x0a => {\n",
    tests: &[ODD_NAMES],
    core: true,
    whole_suite: false,
    version: DEFAULT,
};

pub(super) const FORMAT_PREFIX: Mutant = Mutant {
    name: "format-prefix",
    file: METRICS,
    find: ".any(|arg| arg == b\"format=json\")",
    replace: ".any(|arg| arg.starts_with(b\"format=\"))",
    tests: &[STATUS_PAGE],
    core: true,
    whole_suite: false,
    version: DEFAULT,
};

pub(super) const HEAD_WITH_BODY: Mutant = Mutant {
    name: "head-with-body",
    file: STATUS,
    find: "    let head = r.method == NGX_HTTP_HEAD as ngx_uint_t",
    replace: "    let head = r.method == 0",
    tests: &[STATUS_PAGE],
    core: false,
    whole_suite: false,
    version: DEFAULT,
};

pub(super) const ANY_METHOD: Mutant = Mutant {
    name: "any-method",
    file: STATUS,
    find: "    if r.method & (NGX_HTTP_GET | NGX_HTTP_HEAD) as ngx_uint_t == 0 {\n",
    replace: "    if r.method & 0 != 0 {\n",
    tests: &[STATUS_PAGE],
    core: false,
    whole_suite: false,
    version: DEFAULT,
};

pub(super) const CAUSE_SWAPPED: Mutant = Mutant {
    name: "cause-swapped",
    file: METRICS,
    find: "        if primary == 0 && backup == 0 {\n",
    replace: "        if primary != 0 || backup != 0 {\n",
    tests: &[EMPTY_CAUSE, UNAVAILABLE_CAUSE],
    core: true,
    whole_suite: false,
    version: DEFAULT,
};
