//! The race of nginx/nginx#1656 under the other records a name gives:
//! `server NAME service=http resolve;` (DNS SRV records: Consul,
//! Kubernetes headless services), AAAA records (`resolver ... ipv6=on
//! ipv4=off`, IPv4-mapped addresses such as `::ffff:127.0.0.2`, which a
//! connect from nginx takes to the backend's 127.0.0.2), and a name with
//! several addresses whose set changes.
//!
//! nginx puts an SRV answer's lowest-priority targets in the upstream's
//! primary list and the rest in its backup list, each at the record's port
//! (the backend's) and weight; both lists share one generation. Each row
//! (`cargo test -p generation-retry-t --test suite -- dns_records::`) holds
//! the first attempt at the backend on a reused keepalive connection (a
//! fresh one where the name has two addresses), changes the records
//! ([`Flip`]), waits until nginx proxies to the new address, and releases
//! the held connection: stock nginx gives the 2-hop 502 (`no live
//! upstreams`); the module `on` rescues and counts; the patched nginx
//! rescues; and the retry never goes back to the address tried, which two
//! rows keep in the list (`max_fails=0` on every row, so only what the
//! request tried excludes it).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use generation_retry_t::actors::backend::{ADDR_A, ADDR_B, ADDR_C};
use generation_retry_t::actors::dns::{Answer, Srv};
use generation_retry_t::nginx::Flavor;
use generation_retry_t::scenarios::http::{patched_rescue_line, Flip, Lab, Race, Spec, NAME};
use generation_retry_t::scoring::accesslog::Hop;
use generation_retry_t::scoring::errorlog::NO_LIVE;
use generation_retry_t::scoring::metrics::{log, Counter, Protocol, StatusExt};
use generation_retry_t::shared::UPSTREAM;

const ON: &str = "generation_retry_resnapshot on;";

/// What nginx asks for `service=http` of [`NAME`].
const SRV_NAME: &str = "_http._tcp.app.test";
/// The SRV targets, one A record each.
const A: &str = "a.app.test";
const B: &str = "b.app.test";
const C: &str = "c.app.test";

/// One row: nginx's `server` line, the records, and the change raced.
struct Row {
    server: &'static str,
    /// The resolver asks AAAA only.
    ipv6: bool,
    /// The name gives one primary address, whose cached connection holds
    /// the first attempt; else two, and the first attempt is a fresh
    /// connection's (a try of two).
    keepalive: bool,
    /// The records before nginx starts, given the backend's port.
    records: fn(u16) -> Vec<(String, Answer)>,
    /// The change, given the port and the address the first attempt was
    /// held at; and where the retry may go (never that address).
    flip: fn(u16, Ipv4Addr) -> (Flip, Vec<Ipv4Addr>),
}

const SRV_SERVER: &str = "server app.test service=http resolve max_fails=0;";
const NAME_SERVER: &str = "server app.test:${BPORT} resolve max_fails=0;";

/// The targets' A records and the SRV answer ([`srv`]).
fn targets_and_srv(port: u16, targets: &[(u16, &str)]) -> Vec<(String, Answer)> {
    let mut out = vec![a(A, ADDR_A), a(B, ADDR_B), a(C, ADDR_C)];
    out.extend(srv(port, targets));
    out
}

/// The SRV answer, `(priority, target)` each.
fn srv(port: u16, targets: &[(u16, &str)]) -> Vec<(String, Answer)> {
    let records = targets
        .iter()
        .map(|&(priority, target)| Srv {
            priority,
            weight: 1,
            port,
            target: target.into(),
        })
        .collect();
    vec![(SRV_NAME.into(), Answer::Srv(records))]
}

fn a(name: &str, ip: Ipv4Addr) -> (String, Answer) {
    (name.into(), Answer::A(vec![ip]))
}

/// [`NAME`]'s AAAA records: `ips` IPv4-mapped.
fn aaaa(ips: &[Ipv4Addr]) -> (String, Answer) {
    let mapped = ips.iter().map(Ipv4Addr::to_ipv6_mapped).collect();
    (NAME.into(), Answer::Aaaa(mapped))
}

/// The flip to `records`, waited for at `new`, the retry to go to `to`.
fn to(records: Vec<(String, Answer)>, new: Ipv4Addr, to: &[Ipv4Addr]) -> (Flip, Vec<Ipv4Addr>) {
    (Flip { records, new }, to.to_vec())
}

/// The primary target's A record moves: the SRV answer is the same.
const SRV_ADDRESS_MOVES: Row = Row {
    server: SRV_SERVER,
    ipv6: false,
    keepalive: true,
    records: |port| targets_and_srv(port, &[(1, A)]),
    flip: |_, _| to(vec![a(A, ADDR_B)], ADDR_B, &[ADDR_B]),
};

/// The SRV answer names another target.
const SRV_TARGET_MOVES: Row = Row {
    records: |port| targets_and_srv(port, &[(1, A)]),
    flip: |port, _| to(srv(port, &[(1, B)]), ADDR_B, &[ADDR_B]),
    ..SRV_ADDRESS_MOVES
};

/// The primary target changes; the lower-priority one stays a backup.
const SRV_PRIMARY_MOVES: Row = Row {
    records: |port| targets_and_srv(port, &[(1, A), (2, C)]),
    flip: |port, _| to(srv(port, &[(1, B), (2, C)]), ADDR_B, &[ADDR_B]),
    ..SRV_ADDRESS_MOVES
};

/// The priorities swap: the target tried becomes the backup, the backup
/// the primary.
const SRV_TRIED_TO_BACKUP: Row = Row {
    records: |port| targets_and_srv(port, &[(1, A), (2, C)]),
    flip: |port, _| to(srv(port, &[(2, A), (1, C)]), ADDR_C, &[ADDR_C]),
    ..SRV_ADDRESS_MOVES
};

/// The AAAA record moves.
const AAAA_MOVES: Row = Row {
    server: NAME_SERVER,
    ipv6: true,
    keepalive: true,
    records: |_| vec![aaaa(&[ADDR_A])],
    flip: |_, _| to(vec![aaaa(&[ADDR_B])], ADDR_B, &[ADDR_B]),
};

/// An address is added; the one tried stays in the list.
const AAAA_ADDED: Row = Row {
    flip: |_, _| to(vec![aaaa(&[ADDR_A, ADDR_B])], ADDR_B, &[ADDR_B]),
    ..AAAA_MOVES
};

/// Of two addresses, the one tried is dropped and another added.
const AAAA_DROPPED: Row = Row {
    keepalive: false,
    records: |_| vec![aaaa(&[ADDR_A, ADDR_B])],
    flip: |_, first| {
        let kept = if first == ADDR_A { ADDR_B } else { ADDR_A };
        to(vec![aaaa(&[kept, ADDR_C])], ADDR_C, &[kept, ADDR_C])
    },
    ..AAAA_MOVES
};

impl Row {
    async fn start(&self, flavor: Flavor, extra: &str) -> Lab {
        let base = if self.keepalive {
            Spec::single_peer(flavor, "", extra)
        } else {
            Spec::two_peers(flavor, "", extra)
        };
        let keepalive = if self.keepalive {
            "\n        keepalive 16;"
        } else {
            ""
        };
        let spec = Spec {
            servers: format!("{}{keepalive}", self.server),
            records: self.records,
            ipv6: self.ipv6,
            ..base
        };
        Lab::start_spec(spec).await
    }

    /// One race; where the retry may go.
    async fn race(&self, lab: &mut Lab) -> (Race, Vec<Ipv4Addr>) {
        let port = lab.backend.port();
        let flip = self.flip;
        let mut fresh = Vec::new();
        let race = lab
            .race_flip(0, |first| {
                let (flip, to) = flip(port, first);
                fresh = to;
                flip
            })
            .await;
        (race, fresh)
    }

    /// An address as `$upstream_addr` shows it: IPv4-mapped on AAAA rows.
    fn addr(&self, lab: &Lab, ip: Ipv4Addr) -> SocketAddr {
        let ip = match self.ipv6 {
            true => IpAddr::V6(ip.to_ipv6_mapped()),
            false => IpAddr::V4(ip),
        };
        SocketAddr::new(ip, lab.backend.port())
    }
}

/// Stock's failure: 502, `$upstream_addr` "FIRST:P, be", and error.log's
/// `upstream prematurely closed connection` then `no live upstreams`.
async fn stock_fails(row: Row) {
    let mut lab = row.start(Flavor::stock(), "").await;
    let (race, _) = row.race(&mut lab).await;
    assert_eq!(race.response.status(), 502, "{race:?}");
    let first = Hop::Addr(row.addr(&lab, race.first_hop));
    assert_eq!(race.entry.hops, [first, Hop::Group(UPSTREAM.into())]);
    assert!(
        lab.two_hop_pair(&race.path).is_some(),
        "no prematurely-closed / no-live pair:\n{}",
        lab.nginx.error_log()
    );
    lab.finish();
}

/// A rescue: 200 from hop 2, hop 1 where the first attempt was held, hop
/// 2 one of `fresh` (never hop 1's address), in the row's family.
fn assert_rescued(row: &Row, lab: &Lab, race: &Race, fresh: &[Ipv4Addr]) {
    let [Hop::Addr(first), Hop::Addr(second)] = race.entry.hops.as_slice() else {
        panic!("hops {:?}\n{}", race.entry.hops, lab.nginx.error_log());
    };
    assert_eq!(*first, row.addr(lab, race.first_hop));
    let to = fresh.iter().find(|ip| row.addr(lab, **ip) == *second);
    let Some(&to) = to else {
        panic!("hop 2 {second}, fresh {fresh:?}\n{}", lab.nginx.error_log());
    };
    assert_ne!(to, race.first_hop, "retried to the address tried");
    assert_eq!(race.response.status(), 200, "{race:?}");
    assert_eq!(race.response.body, lab.backend.body(to));
}

async fn module_on_rescues(row: Row) {
    let mut lab = row.start(Flavor::with_module(), ON).await;
    let (race, fresh) = row.race(&mut lab).await;
    assert_rescued(&row, &lab, &race, &fresh);
    assert_eq!(race.entry.resnapshots, Some(1));
    let s = lab.status(UPSTREAM).await;
    assert_eq!(s.count(Counter::BusyRetry), 1, "{s}");
    assert_eq!(s.count(Counter::Rescued), 1, "{s}");
    assert_eq!(s.count(Counter::Failed), 0, "{s}");
    lab.assert_rescue_log(&log::rescued_marker(Protocol::Http, UPSTREAM), 1);
    lab.finish();
}

async fn patched_rescues(row: Row) {
    let mut lab = row.start(Flavor::patched(), "").await;
    let (race, fresh) = row.race(&mut lab).await;
    assert_rescued(&row, &lab, &race, &fresh);
    let lines = lab.request_errors(&race.path);
    let patch = patched_rescue_line(UPSTREAM);
    let rescues = lines.iter().filter(|l| l.contains(&patch)).count();
    assert_eq!(rescues, 1, "{lines:#?}");
    assert!(!lines.iter().any(|l| l.contains(NO_LIVE)), "{lines:#?}");
    lab.finish();
}

macro_rules! row {
    ($name:ident, $row:expr) => {
        mod $name {
            use super::*;

            /// Non-regression guard: stock nginx, without the module: the
            /// race is real for these records.
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn stock_fails_with_the_two_hop_502() {
                stock_fails($row).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn module_on_rescues_and_counts() {
                module_on_rescues($row).await
            }

            /// Non-regression guard: the patched nginx, without the module.
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn patched_nginx_rescues() {
                patched_rescues($row).await
            }
        }
    };
}

row!(srv_address_moves, SRV_ADDRESS_MOVES);
row!(srv_target_moves, SRV_TARGET_MOVES);
row!(srv_primary_moves_backup_stays, SRV_PRIMARY_MOVES);
row!(srv_tried_target_moves_to_backup, SRV_TRIED_TO_BACKUP);
row!(aaaa_moves, AAAA_MOVES);
row!(aaaa_address_added_tried_kept, AAAA_ADDED);
row!(aaaa_tried_address_dropped, AAAA_DROPPED);
