//! `other`: a 502/504 whose last hop is an address (the peer itself
//! failed: connect refused, reset, a 504 timeout), or one with no upstream
//! name to look at. A refusal is never `other`.

use super::{Classifier, Shape, Skeleton};

impl Classifier<'_> {
    /// The reason and the nearby lines of an incident that is not a
    /// refusal of a named upstream.
    pub(super) fn decide_other(&self, s: &Skeleton) -> (String, Vec<usize>) {
        match s.shape {
            Shape::Address => (
                "the last attempt reached a peer: the peer's own failure".into(),
                self.nearby(s, s.upstream.as_deref(), None),
            ),
            _ => ("no upstream name to look at".into(), Vec::new()),
        }
    }
}
