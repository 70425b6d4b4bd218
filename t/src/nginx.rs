//! The nginx under test. [`Nginx`] runs a real nginx: writes a
//! configuration into a fresh prefix, starts the binary in the foreground
//! (`daemon off`, so the master is our child), waits until it accepts, and
//! stops it (QUIT, then KILL after a timeout; always on drop). Every run
//! fails on `[alert]`, `[emerg]`, `[crit]` or `exited on signal` in its
//! error.log, and, under valgrind memcheck (see [`crate::memcheck`]), on
//! any memory error or definite leak.
//!
//! `builds` finds the builds `cargo xtask build` installed (and builds
//! the module as it does); `config` is what nginx is told ([`Flavor`],
//! [`Config`], `nginx -t`); `process` starts, signals and stops it;
//! `logs` reads what it wrote and judges it when it stops; `ports` holds
//! the ports its listeners take.

mod builds;
mod config;
pub mod gdb;
mod logs;
mod ports;
mod process;

pub use builds::{
    install_dir, is_angie, is_tengine, keepalive_by_default, module_build, module_target_dir,
    vendored_version, version,
};
pub use config::{test_config, test_config_under, Config, ConfigTest, Fix, Flavor};
pub use ports::{free_port, free_port_at, refusing_port};
pub(crate) use process::kill;
pub use process::Nginx;
