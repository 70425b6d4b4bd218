//! The diagnosis tool's integration tests, one test binary: a module
//! per job (`common` the helpers they share), run by hand with
//! `cargo test -p generation-retry-diagnose --test suite -- classify::`.

mod classify;
mod common;
mod files;
mod fuzz;
mod in_flight;
mod memory;
mod nginx_conf;
mod stream_backup;
