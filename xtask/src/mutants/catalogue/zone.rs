//! Mutants of the shared zone: the worker table (a worker recorded, dead,
//! unrecorded or still live) and core's zone names and reload window.

use super::*;
use crate::versions::DEFAULT;

pub(super) const WORKER_NOT_RECORDED: Mutant = Mutant {
    name: "worker-not-recorded",
    file: SHM,
    find: "    unsafe { worker_started(cycle) };\n",
    replace: "    let _ = cycle;\n",
    tests: &[OLD_WORKER],
    core: false,
    whole_suite: false,
    version: DEFAULT,
};

pub(super) const DEAD_WORKERS_ALIVE: Mutant = Mutant {
    name: "dead-workers-alive",
    file: SHM,
    find: "    rc == 0 || std::io::Error::last_os_error().raw_os_error() != Some(ESRCH as i32)\n",
    replace: "    let _ = rc;\n    true\n",
    tests: &[KILLED_WORKER],
    core: false,
    whole_suite: false,
    version: DEFAULT,
};

pub(super) const UNRECORDED_WORKERS_IGNORED: Mutant = Mutant {
    name: "unrecorded-workers-ignored",
    file: SHM,
    find: "                return 0;\n",
    replace: "                None\n",
    tests: &[FULL_TABLE],
    core: false,
    whole_suite: false,
    version: DEFAULT,
};

pub(super) const LIVE_WORKERS_IGNORED: Mutant = Mutant {
    name: "live-workers-ignored",
    file: SHM,
    find: "            Ok(oldest) => oldest,\n",
    replace: "            Ok(_) => None,\n",
    tests: &[OLD_WORKER],
    core: false,
    whole_suite: false,
    version: DEFAULT,
};

pub(super) const NAMES_CASE_SENSITIVE: Mutant = Mutant {
    name: "names-case-sensitive",
    file: CORE_ZONE,
    find: "    name.to_ascii_lowercase()\n",
    replace: "    name.to_vec()\n",
    tests: &[NAMES_MATCHED],
    core: true,
    whole_suite: false,
    version: DEFAULT,
};

pub(super) const WINDOW_OF_ONE: Mutant = Mutant {
    name: "window-of-one",
    file: CORE_ZONE,
    find: "    let keep_from = new.saturating_sub(2);\n",
    replace: "    let keep_from = new.saturating_sub(1);\n",
    tests: &[FAILED_RELOAD],
    core: true,
    whole_suite: false,
    version: DEFAULT,
};
