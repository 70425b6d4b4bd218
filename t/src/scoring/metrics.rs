//! The module's contract with the tests, from the module's own core crate:
//! metric names and JSON paths ([`Counter`]), and the error-log lines
//! ([`log`]). Tests look values up through these instead of retyping them.

pub use generation_retry_core::log;
pub use generation_retry_core::metrics::{Counter, NoLiveCause, Protocol, Value, FAMILIES};

/// Counter lookup in one upstream's object of the status endpoint's JSON.
pub trait StatusExt {
    /// The counter's value; panics, naming it, when it is missing.
    fn count(&self, c: Counter) -> u64;
    /// The counter's value, `None` when it is missing.
    fn counter(&self, c: Counter) -> Option<u64>;
}

impl StatusExt for serde_json::Value {
    fn count(&self, c: Counter) -> u64 {
        self.counter(c)
            .unwrap_or_else(|| panic!("no {c:?} at {:?} in {self}", c.json_path()))
    }

    fn counter(&self, c: Counter) -> Option<u64> {
        c.json_path().iter().fold(self, |v, k| &v[*k]).as_u64()
    }
}
