//! The test bench of the generation-retry module: a real nginx (stock,
//! with the module, or patched) on loopback, the world around it played by
//! real servers, and readers that judge what nginx wrote. The integration
//! tests (`t/tests/`) and the binaries of `t/src/bin/` (lab, bench, soak,
//! fuzz) are built on it; `cargo xtask` runs them against the nginx builds
//! `cargo xtask build` installs (`GENERATION_RETRY_NGINX_DIR`: 1.28.0 by
//! default, any version of the matrix, Debian's).
//!
//! The layers, bottom up; each uses only those below it (xtask's
//! `test_bench_modules_are_layered` fails on an upward `crate::` path):
//! - [`scoring`]: the readers of what nginx wrote and exposes: the access,
//!   stream and error logs, the module's metrics and log lines.
//! - [`nginx`]: the nginx under test: its builds, its configuration, the
//!   running process, its logs and the verdict at its stop, the ports it
//!   listens on; [`nginx::gdb`] holds a worker mid-way.
//! - [`actors`]: what nginx talks to: the DNS (the GSLB), the HTTP and TCP
//!   backends, the clients and their load, a real Prometheus.
//! - [`scenarios`]: scripted runs built of those: the HTTP and stream
//!   races, the mixed failures, the lab's A/B arms and diagnose's labels
//!   on them, the churn, the soak.
//!
//! Beside them: [`memcheck`] (nginx under valgrind; xtask compiles the file
//! in too), [`fuzz`] (generated-input checks of the parsers, no nginx),
//! [`rng`] (seeded draws), [`shared`] (configuration pieces the layers
//! write alike) and [`since`] (what nginx speaks from a version on;
//! xtask compiles the file in too). The two functions below read the run's knobs.

pub mod actors;
pub mod fuzz;
pub mod memcheck;
pub mod nginx;
pub mod rng;
pub mod scenarios;
pub mod scoring;
pub mod shared;
pub mod since;

/// How many times a test repeats its scripted race: `default`, unless
/// `GENERATION_RETRY_REPEATS` says otherwise (`cargo xtask nginx-test
/// --nginx all` runs the other versions' races 5 times each; the default
/// version's keep their full count).
pub fn repeats(default: usize) -> usize {
    match std::env::var("GENERATION_RETRY_REPEATS") {
        Ok(v) => v.parse().ok().filter(|n| *n > 0).unwrap_or_else(|| {
            panic!("GENERATION_RETRY_REPEATS={v}: expected a count of 1 or more")
        }),
        Err(_) => default,
    }
}

/// How long the reload soak runs: `default` seconds, or
/// `GENERATION_RETRY_SOAK_SECONDS` (at least 20).
pub fn soak_seconds(default: u64) -> u64 {
    match std::env::var("GENERATION_RETRY_SOAK_SECONDS") {
        Ok(v) => v
            .parse()
            .ok()
            .filter(|n| *n >= 20)
            .unwrap_or_else(|| panic!("GENERATION_RETRY_SOAK_SECONDS={v}: expected 20 or more")),
        Err(_) => default,
    }
}
