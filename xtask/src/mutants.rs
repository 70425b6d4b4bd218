//! `cargo xtask mutants [--only NAME,...] [--list]`: the mutation check.
//!
//! Each mutant of [`MUTANTS`] is one small deliberate fault in the module
//! or in the core patches: an exact text of a file replaced. For each, this
//! command applies it to a private copy of the repository, builds what
//! changed (the module, or the patched nginx for a patch), runs the tests
//! that should catch it against that build, and restores the file. A
//! mutant is caught when one of its tests fails; the command ends with a
//! table and fails when a mutant was missed, did not build or did not
//! apply (its text must occur exactly once: a mutant that does not apply is
//! an error, never a skip).
//!
//! Nothing here touches the working tree, so it can run beside other work:
//!
//! - `target/mutants/tree`: a copy of the tracked files (`git ls-files`,
//!   with their working-tree contents), made once per run; mutants are
//!   applied there one at a time;
//! - `target/mutants/target`: that copy's cargo target directory; the
//!   module is built there as `cargo xtask build` builds it (vendored: its
//!   nginx is the same nginx 1.28.0 with the same flags as the stock one, so
//!   the module loads into `target/nginx/1.28.0`'s nginx);
//! - `target/mutants/install/NAME`: what the tests run against
//!   (`GENERATION_RETRY_NGINX_DIR`): links to `target/nginx/1.28.0`'s stock
//!   and patched nginx and the mutant's module, or for a patch mutant the
//!   patched nginx rebuilt from the mutated patch;
//! - `target/mutants/logs/NAME.log`: every test's output;
//!   `target/mutants/results.md`: the table.
//!
//! The tests themselves are the `t` crate of the working tree, run from the
//! workspace root with `GENERATION_RETRY_NGINX_DIR` pointing at the
//! mutant's install, with the matrix's shorter repeats
//! ([`matrix_env`]). First the same tests run against the unmutated copy
//! (the baseline): a test that fails there would "catch" anything.
//!
//! The do-nothing mutant (the module loads and its directives parse, but it
//! never wraps a selection) runs every test binary instead, and is caught
//! only when every test that still passes declares itself a non-regression
//! guard: a line of its doc comment starts `/// Non-regression guard:`,
//! followed by why passing without the module's work is right ([`guards`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::build::{self, CargoOutputs, MODULE_FILE};
use crate::harness::{matrix_env, test_binaries};
use crate::test_wrap;
use crate::tree::{copy_if_changed, files};
use crate::workspace::{cargo, root, target_dir, Result};

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
    /// Run every test binary, and judge by [`guards`] (the do-nothing
    /// module).
    pub whole_suite: bool,
}

impl Mutant {
    /// A mutant of a core patch: the patched nginx is rebuilt, not the
    /// module.
    fn is_patch(&self) -> bool {
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
    "a_worker_killed_inside_a_rescue_is_replaced_and_counting_goes_on",
);
const FULL_ZONE: (&str, &str) = (
    "mid_selection",
    "a_full_zone_at_a_reload_still_rescues_and_says_so",
);
const OLD_WORKER: (&str, &str) = (
    "zone",
    "an_old_worker_still_running_keeps_its_upstreams_counters",
);
const DEAD_STAYS_DEAD: (&str, &str) = ("stream", "a_dead_primary_handed_back_stays_dead");
const PATCHED_DEAD_STAYS_DEAD: (&str, &str) = (
    "stream",
    "patched_nginx_keeps_a_handed_back_dead_primary_dead",
);
const HTTP_DEAD_STAYS_DEAD: (&str, &str) = ("history", "a_dead_primary_handed_back_stays_dead");
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
const SLOT_ADD: &str = "            slot.add(counter, n);\n";

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
        file: LIVE,
        find: "        unsafe { (*self.pc).data = ptr::null_mut() };\n",
        replace: "        let _ = ptr::null_mut::<u8>(); // pc->data left as it was\n",
        tests: &[RESCUES, ("balancers", "round_robin"), STREAM_RESCUES],
        core: false,
        whole_suite: false,
    },
    Mutant {
        name: "tries-not-restored",
        file: RESCUE,
        find: "            b.set_tries(tries);\n",
        replace: "",
        tests: &[TRIES],
        core: true,
        whole_suite: false,
    },
    Mutant {
        name: "tries-restored-before-reinit",
        file: RESCUE,
        find: concat!(
            "            let fresh = b.reinit();\n",
            "            // peer.init sets tries to the list's size, which would undo the\n",
            "            // proxy_next_upstream_tries clamp: keep what the request had.\n",
            "            b.set_tries(tries);\n",
        ),
        replace: "            b.set_tries(tries);\n            let fresh = b.reinit();\n",
        tests: &[TRIES],
        core: true,
        whole_suite: false,
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
    },
    Mutant {
        name: "worker-not-recorded",
        file: SHM,
        find: "    unsafe { worker_started(cycle) };\n",
        replace: "    let _ = cycle;\n",
        tests: &[OLD_WORKER],
        core: false,
        whole_suite: false,
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
    },
    Mutant {
        name: "full-zone-unwrapped",
        file: PEER,
        find: "    if let Some(slot) = conf.slot() {\n",
        replace: "    if let Some(slot) = Some(conf.slot().expect(\"counters\")) {\n",
        tests: &[FULL_ZONE],
        core: false,
        whole_suite: false,
    },
    Mutant {
        name: "live-workers-ignored",
        file: SHM,
        find: "            Ok(oldest) => oldest,\n",
        replace: "            Ok(_) => None,\n",
        tests: &[OLD_WORKER],
        core: false,
        whole_suite: false,
    },
    Mutant {
        name: "phase-swapped",
        file: RESCUE,
        find: "        tally.add(if first {\n",
        replace: "        tally.add(if !first {\n",
        tests: &[RESCUES, STREAM_RESCUES],
        core: true,
        whole_suite: false,
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
    },
    Mutant {
        name: "generation-read-after-init",
        file: PEER,
        find: concat!(
            "    let snapshot = generation::<P>(uscf);\n",
            "    // SAFETY: the live request of this call.\n",
            "    unsafe { *P::ctx_slot(r) = Word::<PeerData<P>>::lean(snapshot, false) };\n",
            "    // SAFETY: the original peer.init with the arguments nginx gave us. No\n",
            "    // reference into the request is alive across the call, which writes it.\n",
            "    let rc = unsafe { original(r, us) };\n",
        ),
        replace: concat!(
            "    // SAFETY: the original peer.init with the arguments nginx gave us.\n",
            "    let rc = unsafe { original(r, us) };\n",
            "    let snapshot = generation::<P>(uscf);\n",
            "    // SAFETY: the live request of this call.\n",
            "    unsafe { *P::ctx_slot(r) = Word::<PeerData<P>>::lean(snapshot, false) };\n",
        ),
        tests: &[(
            "mid_selection",
            "the_generation_is_taken_before_the_balancers_own_snapshot",
        )],
        core: false,
        whole_suite: false,
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
    },
    Mutant {
        name: "history-not-recorded",
        file: INNER,
        find: "        head.history.record(unsafe { &*pc }, passed_over);\n",
        replace: "        let _ = (unsafe { &*pc }, passed_over);\n",
        tests: &[("history", "least_conn"), STREAM_HISTORY],
        core: false,
        whole_suite: false,
    },
    Mutant {
        name: "lean-history-not-recorded",
        file: LEAN,
        find:
            "        Ok((pd, _, _)) => unsafe { (*pd).head.history.record(&*pc, passed_over) },\n",
        replace: "        Ok((pd, _, _)) => {\n            let _ = (pd, passed_over);\n        }\n",
        tests: &[("history", "round_robin")],
        core: false,
        whole_suite: false,
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
    },
    Mutant {
        name: "hand-back-revives",
        file: LIVE,
        find: "        self.inner.free(self.pc, state);\n",
        replace: "        self.inner.free(self.pc, state & 0);\n",
        tests: &[DEAD_STAYS_DEAD, HTTP_DEAD_STAYS_DEAD],
        core: false,
        whole_suite: false,
    },
    Mutant {
        name: "hand-back-leaves-sockaddr",
        file: LIVE,
        find: "        unsafe { (*self.pc).sockaddr = ptr::null_mut() };\n",
        replace: "        let _ = unsafe { (*self.pc).sockaddr };\n",
        tests: &[TRIES],
        core: false,
        whole_suite: false,
    },
    Mutant {
        name: "stream-patch-hand-back-revives",
        file: STREAM_HISTORY_PATCH,
        find: "+        pc->free(pc, data, t->state & NGX_PEER_FAILED);\n",
        replace: "+        pc->free(pc, data, t->state & 0);\n",
        tests: &[PATCHED_DEAD_STAYS_DEAD],
        core: false,
        whole_suite: false,
    },
    Mutant {
        name: "http-patch-hand-back-revives",
        file: HTTP_HISTORY_PATCH,
        find: "+        pc->free(pc, data, t->state & NGX_PEER_FAILED);\n",
        replace: "+        pc->free(pc, data, t->state & 0);\n",
        tests: &[HTTP_PATCHED_DEAD_STAYS_DEAD],
        core: false,
        whole_suite: false,
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
    },
    Mutant {
        name: "stream-patch-history-ignored",
        file: STREAM_HISTORY_PATCH,
        find: "+        u->peer.get = ngx_stream_proxy_get_untried_peer;\n",
        replace: "+        (void) ngx_stream_proxy_get_untried_peer;\n",
        tests: &[PATCHED_STREAM_HISTORY],
        core: false,
        whole_suite: false,
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
    },
    Mutant {
        name: "json-controls-raw",
        file: METRICS,
        find: "            c if (c as u32) < 0x20 => {\n",
        replace: "            c if (c as u32) < 0x0a => {\n",
        tests: &[ODD_NAMES],
        core: true,
        whole_suite: false,
    },
    Mutant {
        name: "format-prefix",
        file: METRICS,
        find: ".any(|arg| arg == b\"format=json\")",
        replace: ".any(|arg| arg.starts_with(b\"format=\"))",
        tests: &[STATUS_PAGE],
        core: true,
        whole_suite: false,
    },
    Mutant {
        name: "head-with-body",
        file: STATUS,
        find: "    let head = r.method == NGX_HTTP_HEAD as ngx_uint_t",
        replace: "    let head = r.method == 0",
        tests: &[STATUS_PAGE],
        core: false,
        whole_suite: false,
    },
    Mutant {
        name: "any-method",
        file: STATUS,
        find: "    if r.method & (NGX_HTTP_GET | NGX_HTTP_HEAD) as ngx_uint_t == 0 {\n",
        replace: "    if r.method & 0 != 0 {\n",
        tests: &[STATUS_PAGE],
        core: false,
        whole_suite: false,
    },
    Mutant {
        name: "names-case-sensitive",
        file: CORE_ZONE,
        find: "    name.to_ascii_lowercase()\n",
        replace: "    name.to_vec()\n",
        tests: &[NAMES_MATCHED],
        core: true,
        whole_suite: false,
    },
    Mutant {
        name: "window-of-one",
        file: CORE_ZONE,
        find: "    let keep_from = new.saturating_sub(2);\n",
        replace: "    let keep_from = new.saturating_sub(1);\n",
        tests: &[FAILED_RELOAD],
        core: true,
        whole_suite: false,
    },
    Mutant {
        name: "cause-swapped",
        file: METRICS,
        find: "        if primary == 0 && backup == 0 {\n",
        replace: "        if primary != 0 || backup != 0 {\n",
        tests: &[EMPTY_CAUSE, UNAVAILABLE_CAUSE],
        core: true,
        whole_suite: false,
    },
    Mutant {
        name: "single-peer-excluded",
        file: RESCUE,
        find: "    if (primary, backup) == (1, 0) {\n",
        replace: "    if (primary, backup) == (1, 0) && false {\n",
        tests: &[SINGLE_PEER],
        core: true,
        whole_suite: false,
    },
    Mutant {
        name: "off-resnapshots",
        file: RESCUE,
        find: "        if !setting.enabled {\n",
        replace: "        if false && !setting.enabled {\n",
        tests: &[OBSERVES],
        core: true,
        whole_suite: false,
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
    },
];

/// Test binaries the do-nothing mutant leaves out: `external.rs` tests the
/// module as other builds of the working tree made it, not this copy's.
const NOT_THE_MUTANTS: &[&str] = &["external"];

/// The line that makes a test a declared non-regression guard.
pub const GUARD: &str = "/// Non-regression guard:";

/// The tests are the working tree's, which others may be editing: a test
/// binary that does not build is tried again this many times, this far
/// apart, before the mutant is left unjudged.
const BUILD_ATTEMPTS: u32 = 6;
const BUILD_RETRY: Duration = Duration::from_secs(60);

/// How long one `cargo test` may run before it is stopped (and its
/// unfinished tests count as timed out).
const TEST_LIMIT: Duration = Duration::from_secs(20 * 60);

/// `cargo xtask mutants [--only NAME,...] [--list]`.
pub fn command(args: &[String]) -> Result {
    let mut only: Option<Vec<String>> = None;
    let mut list = false;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--list" => list = true,
            "--only" => {
                let v = it.next().ok_or("--only needs NAME,...")?;
                only = Some(v.split(',').map(str::to_string).collect());
            }
            a if a.starts_with("--only=") => {
                only = Some(
                    a["--only=".len()..]
                        .split(',')
                        .map(str::to_string)
                        .collect(),
                );
            }
            other => return Err(format!("mutants: unknown argument `{other}`")),
        }
    }
    let selected: Vec<&Mutant> = match &only {
        None => MUTANTS.iter().collect(),
        Some(names) => {
            let unknown: Vec<&String> = names
                .iter()
                .filter(|n| !MUTANTS.iter().any(|m| m.name == n.as_str()))
                .collect();
            if !unknown.is_empty() {
                return Err(format!(
                    "no mutant named {unknown:?}; `cargo xtask mutants --list` lists them"
                ));
            }
            MUTANTS
                .iter()
                .filter(|m| names.iter().any(|n| n == m.name))
                .collect()
        }
    };
    if list {
        print_list(&selected);
        return Ok(());
    }
    run_all(&selected)
}

fn print_list(mutants: &[&Mutant]) {
    for m in mutants {
        println!("{:<34} {}", m.name, m.file);
        println!("{:<34} tests: {}", "", tests_run(m).join(", "));
    }
}

/// The tests a mutant runs, as the table shows them.
fn tests_run(m: &Mutant) -> Vec<String> {
    if m.whole_suite {
        return vec![format!(
            "every t/tests binary but {}",
            NOT_THE_MUTANTS.join(", ")
        )];
    }
    let mut out: Vec<String> = m.tests.iter().map(|(b, t)| format!("{b}::{t}")).collect();
    if m.core {
        out.push("core unit tests".into());
    }
    out
}

/// Where everything of a run lives: `target/mutants`.
fn mutants_dir() -> PathBuf {
    target_dir().join("mutants")
}

/// What became of one mutant.
#[derive(Debug, PartialEq)]
enum Verdict {
    Caught,
    Missed,
    /// The mutated sources did not build.
    BuildFailed,
    /// Its tests could not be run (a test binary that did not build, a
    /// test that did not run): the mutant is not judged.
    Error(String),
}

struct Report {
    name: &'static str,
    file: &'static str,
    tests: Vec<String>,
    caught_by: Vec<String>,
    seconds: f64,
    verdict: Verdict,
    /// Do-nothing: tests that passed without declaring themselves guards.
    undeclared: Vec<String>,
}

fn run_all(selected: &[&Mutant]) -> Result {
    let started = Instant::now();
    let main_install = build::build()?;
    let dir = mutants_dir();
    let tree = dir.join("tree");
    let target = dir.join("target");
    let logs = dir.join("logs");
    fs::create_dir_all(&logs).map_err(|e| format!("{}: {e}", logs.display()))?;
    sync_tree(&tree)?;
    // Every mutant applies before anything is built.
    for m in selected {
        let text = read(&tree.join(m.file))?;
        check_applies(m, &text)?;
    }

    // The baseline: the unmutated copy, and every test the mutants use.
    eprintln!("xtask: mutants: baseline build");
    let base = build::cargo_build_module_in(&tree, Some(&target))?;
    let base_install = install(
        &dir.join("install/baseline"),
        &main_install,
        &base.module,
        None,
    )?;
    let mut union: Vec<(&str, &str)> = Vec::new();
    for m in selected {
        for t in m.tests {
            if !union.contains(t) {
                union.push(*t);
            }
        }
    }
    let core = selected.iter().any(|m| m.core);
    if !union.is_empty() || core {
        eprintln!(
            "xtask: mutants: baseline tests ({} and core: {core})",
            union.len()
        );
        let log = logs.join("baseline.log");
        let r = run_listed(&union, &base_install, &log)?;
        let mut failed = r.failed;
        if core {
            failed.extend(run_core(&tree, &target, &log)?.failed);
        }
        if !failed.is_empty() {
            return Err(format!(
                "the baseline (nothing mutated) fails {failed:?}: no mutant can be judged \
                 (see {})",
                log.display()
            ));
        }
    }

    let mut reports = Vec::new();
    for m in selected {
        eprintln!("xtask: mutant {}: {}", m.name, m.file);
        let report = run_one(m, &tree, &target, &base, &main_install).unwrap_or_else(|e| Report {
            name: m.name,
            file: m.file,
            tests: tests_run(m),
            caught_by: Vec::new(),
            seconds: 0.0,
            verdict: Verdict::Error(e),
            undeclared: Vec::new(),
        });
        eprintln!(
            "xtask: mutant {}: {:?}{} ({:.0} s)",
            m.name,
            report.verdict,
            if report.caught_by.is_empty() {
                String::new()
            } else {
                format!(" by {}", report.caught_by.join(", "))
            },
            report.seconds
        );
        reports.push(report);
    }

    let table = table(&reports);
    println!("\n{table}");
    let results = dir.join("results.md");
    fs::write(&results, &table).map_err(|e| format!("{}: {e}", results.display()))?;
    for r in reports.iter().filter(|r| !r.undeclared.is_empty()) {
        println!(
            "{}: {} tests pass without declaring `{GUARD}`:",
            r.name,
            r.undeclared.len()
        );
        for t in &r.undeclared {
            println!("  {t}");
        }
    }
    for r in &reports {
        if let Verdict::Error(e) = &r.verdict {
            println!("{}: not judged: {e}", r.name);
        }
    }
    let count = |f: &dyn Fn(&Verdict) -> bool| reports.iter().filter(|r| f(&r.verdict)).count();
    println!(
        "mutants: {} caught, {} missed, {} did not build, {} not judged, in {:.0} s (table: {})",
        count(&|v| *v == Verdict::Caught),
        count(&|v| *v == Verdict::Missed),
        count(&|v| *v == Verdict::BuildFailed),
        count(&|v| matches!(v, Verdict::Error(_))),
        started.elapsed().as_secs_f64(),
        results.display()
    );
    let bad: Vec<&str> = reports
        .iter()
        .filter(|r| r.verdict != Verdict::Caught)
        .map(|r| r.name)
        .collect();
    if bad.is_empty() {
        Ok(())
    } else {
        Err(format!("not caught: {}", bad.join(", ")))
    }
}

/// Applies `m` to the copy, builds, tests, and restores the file whatever
/// happened.
fn run_one(
    m: &Mutant,
    tree: &Path,
    target: &Path,
    base: &CargoOutputs,
    main_install: &Path,
) -> Result<Report> {
    let started = Instant::now();
    let path = tree.join(m.file);
    let original = read(&path)?;
    check_applies(m, &original)?;
    let _restore = Restore {
        path: path.clone(),
        text: original.clone(),
    };
    write(&path, &original.replacen(m.find, m.replace, 1))?;

    let dir = mutants_dir();
    let log = dir.join("logs").join(format!("{}.log", m.name));
    let _ = fs::remove_file(&log);
    let mut report = Report {
        name: m.name,
        file: m.file,
        tests: tests_run(m),
        caught_by: Vec::new(),
        seconds: 0.0,
        verdict: Verdict::Missed,
        undeclared: Vec::new(),
    };
    let install_dir = dir.join("install").join(m.name);
    let built = if m.is_patch() {
        let patches = path.parent().expect("a patch is in a directory");
        build::patched_default_from(patches, &base.nginx_build_dir, &install_dir)
            .and_then(|patched| install(&install_dir, main_install, &base.module, Some(&patched)))
    } else {
        build::cargo_build_module_in(tree, Some(target))
            .and_then(|out| install(&install_dir, main_install, &out.module, None))
    };
    let install_dir = match built {
        Ok(d) => d,
        Err(e) => {
            append(&log, &format!("build failed:\n{e}\n"));
            eprintln!("xtask: mutant {}: build failed: {e}", m.name);
            report.verdict = Verdict::BuildFailed;
            report.seconds = started.elapsed().as_secs_f64();
            return Ok(report);
        }
    };

    if m.whole_suite {
        let binaries: Vec<String> = test_binaries()?
            .into_iter()
            .filter(|b| !NOT_THE_MUTANTS.contains(&b.as_str()))
            .collect();
        let mut passed = Vec::new();
        let mut failed = Vec::new();
        for b in &binaries {
            let r = cargo_test(b, &[], &install_dir, &log)?;
            passed.extend(r.passed);
            failed.extend(r.failed);
        }
        let guards = declared_guards()?;
        report.undeclared = passed
            .iter()
            .filter(|t| !guards.contains(*t))
            .cloned()
            .collect();
        report.tests = vec![format!(
            "every t/tests binary but {} ({} tests)",
            NOT_THE_MUTANTS.join(", "),
            passed.len() + failed.len()
        )];
        report.caught_by = vec![format!(
            "{} of {} failed; {} passed, {} of them declared guards",
            failed.len(),
            passed.len() + failed.len(),
            passed.len(),
            passed.len() - report.undeclared.len()
        )];
        // Some tests must fail, or the install itself may be broken.
        report.verdict = if report.undeclared.is_empty() && !failed.is_empty() {
            Verdict::Caught
        } else {
            Verdict::Missed
        };
    } else {
        let r = run_listed(m.tests, &install_dir, &log)?;
        report.caught_by = r.failed;
        if m.core {
            match run_core(tree, target, &log) {
                // Named in the log; the table counts them.
                Ok(r) if !r.failed.is_empty() => report.caught_by.push(format!(
                    "core unit tests ({} of {})",
                    r.failed.len(),
                    r.failed.len() + r.passed.len()
                )),
                Ok(_) => {}
                Err(e) => {
                    append(&log, &format!("core unit tests did not build:\n{e}\n"));
                    report.verdict = Verdict::BuildFailed;
                }
            }
        }
        if report.verdict != Verdict::BuildFailed && !report.caught_by.is_empty() {
            report.verdict = Verdict::Caught;
        }
    }
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// Puts a file of the copy back as it was when dropped.
struct Restore {
    path: PathBuf,
    text: String,
}

impl Drop for Restore {
    fn drop(&mut self) {
        if let Err(e) = fs::write(&self.path, &self.text) {
            eprintln!("xtask: cannot restore {}: {e}", self.path.display());
        }
    }
}

/// `find` occurs exactly once in `text`.
fn check_applies(m: &Mutant, text: &str) -> Result {
    match text.matches(m.find).count() {
        1 => Ok(()),
        n => Err(format!(
            "mutant {}: its text occurs {n} times in {}, not once:\n{}",
            m.name, m.file, m.find
        )),
    }
}

fn read(path: &Path) -> Result<String> {
    fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

fn write(path: &Path, text: &str) -> Result {
    fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

fn append(log: &Path, text: &str) {
    if let Ok(mut f) = fs::OpenOptions::new().create(true).append(true).open(log) {
        let _ = f.write_all(text.as_bytes());
    }
}

/// `tree` made equal to the tracked files of the workspace as they are in
/// the working tree (unchanged files keep their times, so cargo rebuilds
/// only what differs from the last run).
fn sync_tree(tree: &Path) -> Result {
    let out = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(root())
        .output()
        .map_err(|e| format!("cannot run git ls-files: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "git ls-files: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let tracked: BTreeSet<PathBuf> = String::from_utf8_lossy(&out.stdout)
        .split('\0')
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .collect();
    let mut wanted = BTreeSet::new();
    for rel in &tracked {
        let from = root().join(rel);
        // A tracked file deleted in the working tree is left out.
        if from.is_file() {
            copy_if_changed(&from, &tree.join(rel))?;
            wanted.insert(tree.join(rel));
        }
    }
    if tree.is_dir() {
        for f in files(tree, &|_| false)? {
            if !wanted.contains(&f) {
                fs::remove_file(&f).map_err(|e| format!("{}: {e}", f.display()))?;
            }
        }
    }
    Ok(())
}

/// A mutant's install directory: `stock`, `patched` and the test-only
/// wrapper module linked to the default build's (or `patched` the
/// mutant's own, already in place), and the module copied there.
fn install(dir: &Path, main: &Path, module: &Path, patched: Option<&Path>) -> Result<PathBuf> {
    let link = |rel: &str| -> Result {
        let at = dir.join(rel);
        if let Some(parent) = at.parent() {
            fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        }
        let _ = fs::remove_file(&at);
        std::os::unix::fs::symlink(main.join(rel), &at)
            .map_err(|e| format!("{}: {e}", at.display()))
    };
    link("stock/sbin/nginx")?;
    link(&format!("modules/{}", test_wrap::FILE))?;
    match patched {
        Some(p) => {
            let want = dir.join("patched/sbin/nginx");
            if p != want {
                return Err(format!(
                    "patched nginx at {}, not {}",
                    p.display(),
                    want.display()
                ));
            }
        }
        None => link("patched/sbin/nginx")?,
    }
    let so = dir.join("modules").join(MODULE_FILE);
    let _ = fs::remove_file(&so);
    copy_if_changed(module, &so)?;
    Ok(dir.to_path_buf())
}

/// What a test run said, by test.
#[derive(Default)]
struct Results {
    passed: Vec<String>,
    failed: Vec<String>,
}

/// The listed tests, one `cargo test` per binary, each name exact; every
/// name must have run.
fn run_listed(tests: &[(&str, &str)], install_dir: &Path, log: &Path) -> Result<Results> {
    let mut by_binary: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (b, t) in tests {
        by_binary.entry(b).or_default().push(t);
    }
    let mut all = Results::default();
    for (b, names) in by_binary {
        let r = cargo_test(b, &names, install_dir, log)?;
        for n in names {
            let id = format!("{b}::{n}");
            if !r.passed.contains(&id) && !r.failed.contains(&id) {
                return Err(format!("{id} did not run (see {})", log.display()));
            }
        }
        all.passed.extend(r.passed);
        all.failed.extend(r.failed);
    }
    Ok(all)
}

/// `cargo test -p generation-retry-t --test BINARY [-- --exact NAMES]`
/// from the workspace root against `install_dir`; its output appended to
/// `log`. Tests that did not finish in [`TEST_LIMIT`] count as failed
/// (`... (timed out)`). Fails when the binary did not build.
fn cargo_test(binary: &str, names: &[&str], install_dir: &Path, log: &Path) -> Result<Results> {
    let mut attempt = 1;
    let (ok, lines) = loop {
        let mut cmd = cargo();
        cmd.args(["test", "-p", "generation-retry-t", "--test", binary]);
        if !names.is_empty() {
            cmd.args(["--", "--exact"]).args(names);
        }
        cmd.env("GENERATION_RETRY_NGINX_DIR", install_dir);
        matrix_env(&mut cmd);
        let (ok, lines) = run_logged(&mut cmd, log)?;
        let started = lines.iter().any(|l| l.starts_with("running "));
        if ok || started || attempt == BUILD_ATTEMPTS {
            break (ok, lines);
        }
        // The working tree's `t` did not build: someone may be editing it.
        eprintln!(
            "xtask: mutants: t/tests/{binary}.rs did not build (attempt {attempt} of \
             {BUILD_ATTEMPTS}); again in {} s",
            BUILD_RETRY.as_secs()
        );
        std::thread::sleep(BUILD_RETRY);
        attempt += 1;
    };
    let mut r = parse_results(&lines, binary);
    let finished = lines.iter().any(|l| l.starts_with("test result: "));
    if !ok && !finished {
        let timed_out = names
            .iter()
            .map(|n| format!("{binary}::{n}"))
            .filter(|id| !r.passed.contains(id) && !r.failed.contains(id))
            .map(|id| format!("{id} (timed out)"))
            .collect::<Vec<_>>();
        if lines.iter().any(|l| l == TIMED_OUT) {
            r.failed.extend(timed_out);
            if names.is_empty() {
                r.failed.push(format!("{binary} (timed out)"));
            }
            return Ok(r);
        }
        return Err(format!(
            "`cargo test --test {binary}` ran no test (did it build? see {})",
            log.display()
        ));
    }
    Ok(r)
}

/// `generation-retry-core`'s unit tests in the copy (`core::NAME` for each).
fn run_core(tree: &Path, target: &Path, log: &Path) -> Result<Results> {
    let mut cmd = cargo();
    cmd.current_dir(tree)
        .args([
            "test",
            "-p",
            "generation-retry-core",
            "--lib",
            "--target-dir",
        ])
        .arg(target);
    let (ok, lines) = run_logged(&mut cmd, log)?;
    let r = parse_results(&lines, "core");
    if !ok && r.failed.is_empty() {
        return Err(format!(
            "core's unit tests did not run (see {})",
            log.display()
        ));
    }
    Ok(r)
}

/// The line [`run_logged`] adds when it stopped a command at [`TEST_LIMIT`].
const TIMED_OUT: &str = "xtask: mutants: stopped at the time limit";

/// Runs `cmd` in a process group of its own, stdout and stderr appended to
/// `log`; returns whether it succeeded and its stdout's lines. Stopped
/// (the whole group) after [`TEST_LIMIT`].
fn run_logged(cmd: &mut Command, log: &Path) -> Result<(bool, Vec<String>)> {
    use std::os::unix::process::CommandExt;
    append(log, &format!("$ {cmd:?}\n"));
    let stderr = File::options()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| format!("{}: {e}", log.display()))?;
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(stderr)
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = mpsc::channel();
    let log_path = log.to_path_buf();
    let reader = std::thread::spawn(move || {
        let mut lines = Vec::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            append(&log_path, &format!("{line}\n"));
            lines.push(line);
        }
        let _ = tx.send(());
        lines
    });
    let started = Instant::now();
    let mut stopped = false;
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            break status;
        }
        if !stopped && started.elapsed() > TEST_LIMIT {
            stopped = true;
            let _ = Command::new("kill")
                .args(["-KILL", &format!("-{}", child.id())])
                .status();
        }
        let _ = rx.recv_timeout(Duration::from_millis(200));
    };
    let mut lines = reader.join().unwrap_or_default();
    if stopped {
        append(log, &format!("{TIMED_OUT}\n"));
        lines.push(TIMED_OUT.to_string());
    }
    Ok((status.success() && !stopped, lines))
}

/// libtest's `test NAME ... ok` and `test NAME ... FAILED` lines, as
/// `PREFIX::NAME`.
fn parse_results(lines: &[String], prefix: &str) -> Results {
    let mut r = Results::default();
    for line in lines {
        let Some((name, result)) = line
            .strip_prefix("test ")
            .and_then(|rest| rest.rsplit_once(" ... "))
        else {
            continue;
        };
        let id = format!("{prefix}::{name}");
        if result.starts_with("ok") {
            r.passed.push(id);
        } else if result.starts_with("FAILED") {
            r.failed.push(id);
        }
    }
    r
}

/// Every declared guard of `t/tests`, as `BINARY::NAME`.
fn declared_guards() -> Result<BTreeSet<String>> {
    let mut all = BTreeSet::new();
    for b in test_binaries()? {
        let text = read(&root().join("t/tests").join(format!("{b}.rs")))?;
        all.extend(guards(&text).into_iter().map(|t| format!("{b}::{t}")));
    }
    Ok(all)
}

/// The tests of a test binary's source that declare themselves
/// non-regression guards: a line of the doc comment right above the test
/// starts with [`GUARD`]. A test written as `fn $frag` in a `macro_rules!`
/// stands for the names its invocations give `$frag`, read from each entry
/// (one per line: the identifiers before its `=>`, in the order of the
/// matcher's `$frag:ident`s).
pub fn guards(source: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut in_macro: Option<String> = None;
    let mut guarded = false;
    for line in source.lines() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("macro_rules!") {
            in_macro = Some(ident_at(rest.trim_start()));
            guarded = false;
            continue;
        }
        if t.starts_with(GUARD) {
            guarded = true;
            continue;
        }
        if t.starts_with("///") || t.starts_with("#[") || t.is_empty() && guarded {
            continue;
        }
        if let (true, Some(name)) = (guarded, fn_name(t)) {
            match (name.strip_prefix('$'), &in_macro) {
                (Some(frag), Some(mac)) => out.extend(macro_names(source, mac, frag)),
                _ => {
                    out.insert(name);
                }
            }
        }
        guarded = false;
    }
    out
}

/// The identifier at the start of `s` (a `$` before it kept).
fn ident_at(s: &str) -> String {
    s.chars()
        .enumerate()
        .take_while(|(i, c)| c.is_alphanumeric() || *c == '_' || (*i == 0 && *c == '$'))
        .map(|(_, c)| c)
        .collect()
}

/// The function a line declares (`pub async fn name(...`), if it does.
fn fn_name(line: &str) -> Option<String> {
    let mut words = line.split_whitespace();
    loop {
        match words.next()? {
            "pub" | "pub(crate)" | "async" | "unsafe" | "const" | "extern" => continue,
            "fn" => return Some(ident_at(words.next()?)).filter(|n| !n.is_empty()),
            _ => return None,
        }
    }
}

/// The names the invocations of `mac` give its `$frag:ident`.
fn macro_names(source: &str, mac: &str, frag: &str) -> Vec<String> {
    let Some(def) = source.find(&format!("macro_rules! {mac}")) else {
        return Vec::new();
    };
    let rest = &source[def..];
    let matcher = &rest[..rest.find(") =>").unwrap_or(rest.len())];
    let frags: Vec<String> = matcher
        .split('$')
        .skip(1)
        .filter_map(|p| p.split_once(":ident").map(|(n, _)| n.to_string()))
        .filter(|n| n.chars().all(|c| c.is_alphanumeric() || c == '_'))
        .collect();
    let Some(pos) = frags.iter().position(|f| f == frag) else {
        return Vec::new();
    };
    let mut names = Vec::new();
    let invocation = format!("{mac}! {{");
    for (at, _) in source.match_indices(&invocation) {
        // The whole macro's name, not the end of a longer one.
        let before = source[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let body = &source[at..];
        let body = &body[body.find('{').map_or(0, |i| i + 1)..];
        for entry in body.lines() {
            let entry = entry.trim();
            if entry.starts_with('}') {
                break;
            }
            let Some((idents, _)) = entry.split_once("=>") else {
                continue;
            };
            if let Some(name) = idents.split(',').map(str::trim).nth(pos) {
                names.push(name.to_string());
            }
        }
    }
    names
}

/// The results as a Markdown table.
fn table(reports: &[Report]) -> String {
    let mut s = String::from(
        "| mutant | file | tests run | caught by | result | s |\n|---|---|---|---|---|---|\n",
    );
    for r in reports {
        let caught = if r.caught_by.is_empty() {
            "-".to_string()
        } else {
            r.caught_by.join(", ")
        };
        let verdict = match &r.verdict {
            Verdict::Caught => "caught",
            Verdict::Missed => "**missed**",
            Verdict::BuildFailed => "**did not build**",
            Verdict::Error(_) => "**not judged**",
        };
        s.push_str(&format!(
            "| {} | `{}` | {} | {} | {} | {:.0} |\n",
            r.name,
            r.file.rsplit('/').next().unwrap_or(r.file),
            r.tests.join(", "),
            caught,
            verdict,
            r.seconds
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The list cannot rot silently: every mutant applies to the sources as
    /// they are, and every test it names exists.
    #[test]
    fn every_mutant_applies_exactly_once() {
        for m in MUTANTS {
            let text = read(&root().join(m.file)).unwrap();
            check_applies(m, &text).unwrap();
            assert_ne!(m.find, m.replace, "{}", m.name);
        }
    }

    #[test]
    fn every_named_test_exists() {
        let binaries = test_binaries().unwrap();
        for m in MUTANTS {
            assert!(
                m.whole_suite || m.core || !m.tests.is_empty(),
                "{} runs no test",
                m.name
            );
            for (b, t) in m.tests {
                assert!(
                    binaries.iter().any(|x| x == b),
                    "{}: no t/tests/{b}.rs",
                    m.name
                );
                let text = read(&root().join("t/tests").join(format!("{b}.rs"))).unwrap();
                let named = text.match_indices(t).any(|(i, _)| {
                    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
                    !word(text[..i].chars().next_back())
                        && !word(text[i + t.len()..].chars().next())
                });
                assert!(named, "{}: t/tests/{b}.rs has no test {t}", m.name);
            }
        }
    }

    #[test]
    fn names_are_unique_and_every_counter_has_its_mutant() {
        let names: BTreeSet<&str> = MUTANTS.iter().map(|m| m.name).collect();
        assert_eq!(names.len(), MUTANTS.len());
        for c in generation_retry_core::metrics::Counter::ALL {
            let site = format!("Counter::{c:?} {{");
            assert_eq!(
                MUTANTS
                    .iter()
                    .filter(|m| m.find == SLOT_ADD && m.replace.contains(&site))
                    .count(),
                1,
                "{c:?}"
            );
        }
    }

    #[test]
    fn guards_are_read_from_doc_comments_and_macros() {
        let src = r#"
/// Stock nginx fails.
///
/// Non-regression guard: stock has no module.
#[tokio::test(flavor = "multi_thread")]
async fn stock_fails() {}

/// Not a guard.
#[test]
fn module_rescues() {}

/// Non-regression guard: but the doc belongs to a comment line, not a fn
const X: u32 = 1;
fn after_const() {}

macro_rules! rows {
    ($($name:ident, $patched:ident => $since:expr, $d:expr,)*) => {$(
        #[test]
        fn $name() {}

        /// Non-regression guard: the patched nginx without the module.
        #[test]
        fn $patched() {}
    )*};
}

rows! {
    plain, patched_plain => (1, 0, 0), "",
    hashed, patched_hashed => (1, 0, 0), "hash;",
}
"#;
        let g: Vec<String> = guards(src).into_iter().collect();
        assert_eq!(g, ["patched_hashed", "patched_plain", "stock_fails"]);
    }

    #[test]
    fn results_are_read_from_libtest() {
        let lines: Vec<String> = [
            "running 3 tests",
            "test a ... ok",
            "test b ... FAILED",
            "test c ... ignored, needs the package",
            "test result: FAILED. 1 passed; 1 failed",
        ]
        .map(String::from)
        .to_vec();
        let r = parse_results(&lines, "bin");
        assert_eq!(r.passed, ["bin::a"]);
        assert_eq!(r.failed, ["bin::b"]);
    }
}
