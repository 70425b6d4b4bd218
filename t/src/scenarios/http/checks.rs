//! What a [`Lab`]'s run must show: the rescued shape, one rescue line per
//! rescue, the 2-hop pair, what an upgrade may lose; and the error.log
//! lines of one request.

use std::net::Ipv4Addr;

use super::{Lab, Race};
use crate::actors::load::Sent;
use crate::scoring::errorlog;
use crate::scoring::metrics::{log, NoLiveCause, Protocol};
use crate::shared::UPSTREAM;
impl Lab {
    /// What [`Lab::upgrade_under_load`] may lose: a new master is a new
    /// process tree with fresh shared memory, so its worker's peer list
    /// for `server NAME resolve` is empty until its first DNS answer, and
    /// requests in that window get `no live upstreams` (cause `empty`),
    /// with or without the module. That is the only failure allowed: every
    /// non-200 is such a 502, none is a transport error, nothing is a
    /// generation or unavailable refusal; and the window is the new
    /// worker's first DNS answer, milliseconds on loopback (1 request of
    /// 600 in one run the README cites), so a cap of 2% fails a run where the upgrade
    /// itself dropped the load.
    pub fn assert_upgrade_lost_only_the_empty_list(&self, sent: &[Sent]) {
        let failed: Vec<_> = sent.iter().filter(|s| s.response.status() != 200).collect();
        assert!(
            failed.iter().all(|s| s.response.status() == 502),
            "{failed:?}"
        );
        let log = self.nginx.error_log();
        // The load's refusals only: start-up probes before the first DNS
        // answer excuse nothing.
        let causes: Vec<&str> = log
            .lines()
            .filter(|l| l.contains(&log::no_live_prefix(Protocol::Http, UPSTREAM)))
            .filter(|l| l.contains(" /steady/"))
            .collect();
        let empty = log::no_live_marker(Protocol::Http, UPSTREAM, NoLiveCause::Empty);
        assert!(causes.iter().all(|l| l.contains(&empty)), "{causes:#?}");
        assert!(
            failed.len() <= causes.len(),
            "{} failed, {} empty-list refusals",
            failed.len(),
            causes.len()
        );
        assert!(
            failed.len() * 50 <= sent.len(),
            "{} of {} requests failed across the upgrade",
            failed.len(),
            sent.len()
        );
    }

    /// Asserts `n` rescue lines (one `info` per rescue, as
    /// docs/directives.md says) in error.log and no
    /// `no live upstreams` for a raced request (readiness probes sent before
    /// the name's first resolution may meet the still-empty list; no raced
    /// request may). `rescue_line` is the module's or the patch's wording.
    pub fn assert_rescue_log(&self, rescue_line: &str, n: usize) {
        let log = self.nginx.error_log();
        assert_eq!(log.matches(rescue_line).count(), n, "one line per rescue");
        let levels: Vec<&str> = log
            .lines()
            .filter(|l| l.contains(rescue_line) && !l.contains("[info] "))
            .collect();
        assert!(levels.is_empty(), "rescues are logged at info: {levels:#?}");
        let raced_no_live: Vec<_> = errorlog::with_message(&log, errorlog::NO_LIVE)
            .into_iter()
            .filter(|l| l.whole.contains(" /race/"))
            .map(|l| l.whole)
            .collect();
        assert!(raced_no_live.is_empty(), "{raced_no_live:#?}");
    }

    /// The error.log lines of the request for `path` (every line nginx logs
    /// for a request names it: `request: "GET /race/0 HTTP/1.1"`), in order.
    pub fn request_errors(&self, path: &str) -> Vec<String> {
        let marker = format!(" {path} HTTP/");
        self.nginx
            .error_log()
            .lines()
            .filter(|l| l.contains(&marker))
            .map(str::to_string)
            .collect()
    }

    /// Asserts the rescued shape: 200 from the new address, with
    /// `$upstream_addr` "OLD:P, NEW:P".
    pub fn assert_rescued(&self, race: &Race) {
        assert_eq!(
            race.response.status(),
            200,
            "{}: {race:?}\n{}",
            race.path,
            self.nginx.error_log()
        );
        assert_eq!(
            race.response.body,
            self.backend.body(race.new),
            "{}",
            race.path
        );
        let expected = format!(
            "{}, {}",
            self.upstream_addr(race.old),
            self.upstream_addr(race.new)
        );
        assert_eq!(race.entry.upstream_addr(), expected, "{}", race.path);
    }

    /// `ADDR:PORT` of a backend address, as `$upstream_addr` shows it.
    pub fn upstream_addr(&self, ip: Ipv4Addr) -> String {
        self.backend.upstream_addr(ip)
    }

    /// The error.log pair of the 2-hop shape for `path`: the connection id if
    /// `upstream prematurely closed connection` is followed by `no live
    /// upstreams` on the same connection.
    pub fn two_hop_pair(&self, path: &str) -> Option<u64> {
        errorlog::two_hop_pair(&self.nginx.error_log(), &format!(" {path} HTTP/"))
    }
}
