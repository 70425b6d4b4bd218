//! The integration suite, one test binary: a module per job, each the
//! file or directory of its name. `cargo xtask nginx-test` lists its tests
//! and runs each module in a process of its own (`xtask/src/harness/
//! parallel.rs`), the modules a codebase runs named by
//! `xtask/src/harness.rs`; by hand, `cargo test -p generation-retry-t
//! --test suite -- race::` (a filter matches anywhere in a test's path,
//! so `race::` also runs `module_race::`; `--exact race::NAME` does not).
//!
//! One binary instead of one per file: tokio, reqwest, hickory and rustls
//! are linked once, and a module is a row of data, not a cargo target.

mod angie;
mod backend;
mod balancers;
mod controls;
mod debian;
mod diagnose;
mod diagnose_mixed;
mod directive;
mod dist;
mod dns_records;
mod empty_list;
mod external;
mod fuzz;
mod history;
mod https;
mod install;
mod layout;
mod memcheck_gate;
mod mid_selection;
mod module_behaviour;
mod module_race;
mod patched;
mod prometheus;
mod protocols;
mod race;
mod reload;
mod scrapes;
mod soundness;
mod statistical;
mod stream;
mod zone;
