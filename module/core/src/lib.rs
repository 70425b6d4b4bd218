//! nginx-free logic of the generation-retry module.
//!
//! `cargo test` cannot link a cdylib that refers to nginx's symbols
//! (ngx-rust#224), so everything that can be decided without nginx lives here
//! and is tested here; the module crate only adapts nginx's types to it.
//! Its other neighbours read its names so that nothing is retyped: the
//! test bench `t/` (metric names, log lines) and xtask (the mutation
//! catalogue's counters).
//!
//! - [`rescue`]: the rule: a refused selection, a re-snapshot, the tries
//!   and the tried peers carried over, the tally of what happened;
//! - [`directive`]: `generation_retry_resnapshot`'s arguments, checked;
//! - [`metrics`]: the counters, their families and both renderings
//!   (Prometheus text, JSON); [`zone`]: how large the counters zone must
//!   be on any page size;
//! - [`log`]: the module's error-log lines, word for word.

pub mod directive;
pub mod log;
pub mod metrics;
pub mod rescue;
pub mod zone;
