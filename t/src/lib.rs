//! The integration harness: each piece real and named after what it stands
//! in for. [`nginx`] runs the nginx under test (`GENERATION_RETRY_NGINX_DIR`:
//! 1.28.0 by default, any version of the matrix, Debian's), [`dns`] is the
//! GSLB, [`backend`] the application servers, [`load`] the clients;
//! [`accesslog`] and [`errorlog`] read what nginx wrote; [`prometheus`]
//! runs the real Prometheus and `promtool` against the status endpoint.

pub mod accesslog;
pub mod backend;
pub mod churn;
pub mod dns;
pub mod errorlog;
pub mod fuzz;
pub mod gdb;
pub mod lab;
pub mod labels;
pub mod load;
pub mod memcheck;
pub mod metrics;
pub mod mixed;
pub mod nginx;
pub mod prometheus;
pub mod rng;
pub mod scenario;
pub mod shared;
pub mod soak;
pub mod stream;

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
