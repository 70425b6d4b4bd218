//! Reading what nginx wrote and exposed, and judging it: [`accesslog`] and
//! [`streamlog`] read the access logs (and sort a request into the seed's
//! shapes), [`errorlog`] the error log; [`metrics`] is the module's
//! contract with the tests (metric names, JSON paths, log lines). The
//! bottom layer: plain readers, which use nothing else of the bench.

pub mod accesslog;
pub mod errorlog;
pub mod metrics;
pub mod streamlog;
