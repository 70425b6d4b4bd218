//! Scripted runs, built of nginx, its actors and the scoring: [`http`] the
//! HTTP race on one re-resolving upstream (the [`http::Lab`] most tests
//! start), [`stream`] the stream (TCP) race, [`mixed`] many upstreams
//! failing in every way at once, [`lab`] the A/B experiment of `cargo
//! xtask lab`, [`labels`] scoring `generation-retry-diagnose` on those
//! runs against the module's own account of each 502, [`churn`] many moving names at scale (`cargo xtask bench
//! --churn`), [`soak`] ten minutes under reloads (`cargo xtask soak`).

pub mod churn;
pub mod http;
pub mod lab;
pub mod labels;
pub mod mixed;
pub mod soak;
pub mod stream;
