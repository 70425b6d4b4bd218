//! nginx-free logic of the generation-retry module.
//!
//! `cargo test` cannot link a cdylib that refers to nginx's symbols
//! (ngx-rust#224), so everything that can be decided without nginx lives here
//! and is tested here; the module crate only adapts nginx's types to it.

pub mod directive;
pub mod log;
pub mod metrics;
pub mod rescue;
pub mod zone;
