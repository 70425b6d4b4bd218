//! The status endpoint as Prometheus sees it, with the real thing (Debian's
//! `prometheus` package: the server and `promtool`), and what
//! `contrib/prometheus` and `contrib/grafana` give an operator:
//!
//! - `promtool check metrics` accepts the exposition of hundreds of http
//!   and stream upstreams with odd names (quotes, backslashes, newlines,
//!   tabs, non-ASCII), and the names come back exactly;
//! - `promtool check rules` and `promtool test rules` pass on the alert and
//!   recording rules, every alert has a firing and a silent case, and the
//!   unit tests catch a broken rule;
//! - a real Prometheus server scrapes a short lab run every second (rescues,
//!   observe-mode failures, the other causes, a reload that removes an
//!   upstream) with the rules loaded: `increase()` of the rescues equals the
//!   module's count and the error log's rescue lines, no counter of a kept
//!   upstream resets across the reload, the removed upstream goes stale,
//!   every alert is active exactly where the lab made it true, and every
//!   expression of the rules and of the dashboard parses and returns data.
//!
//! Nothing stands in for Prometheus; without it these tests fail and say
//! what to install.
//!
//! The tests, by what they prove:
//! - [`exposition`]: `promtool check metrics` on many upstreams with odd
//!   names, which come back exactly;
//! - [`rules`]: `promtool check rules` and `promtool test rules`, and the
//!   unit tests catching broken rules;
//! - [`scrape`]: a real Prometheus scraping a lab run across a reload
//!   (the lab in [`lab`]), with the rules loaded ([`loaded_rules`]) and
//!   the dashboard's expressions run ([`dashboard`]);
//! - [`upgrade`]: a binary upgrade is one reset to Prometheus;
//!
//! and [`common`], the odd names, the job and the runbooks, and the
//! server's configuration, that they share.

mod common;
mod dashboard;
mod exposition;
mod lab;
mod loaded_rules;
mod rules;
mod scrape;
mod upgrade;
