//! Reading what nginx wrote and exposed, and judging it: [`accesslog`] and
//! [`streamlog`] read the access logs (and sort a request into the seed's
//! shapes), [`errorlog`] the error log; [`metrics`] is the module's
//! contract with the tests (metric names, JSON paths, log lines);
//! [`prometheus`] runs the real Prometheus and `promtool` against the
//! status endpoint; [`labels`] scores `generation-retry-diagnose` against
//! the module's own account of each 502.

pub mod accesslog;
pub mod errorlog;
pub mod labels;
pub mod metrics;
pub mod prometheus;
pub mod streamlog;
