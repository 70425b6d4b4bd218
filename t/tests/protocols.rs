//! The race of nginx/nginx#1656 through every other protocol nginx's http
//! upstream speaks: FastCGI, uwsgi, SCGI, memcached, gRPC and HTTP/2
//! (`proxy_http_version 2`, from nginx 1.29.4: `generation_retry_t::since`;
//! before, its rows are not run and `nginx -t` refusing it is what
//! `nginx_t_accepts_each_protocol_from_its_version` checks), each against a backend speaking it
//! on loopback (`actors::backend::Wire`). The peer layer is the same for
//! all of them, so is the refusal; these prove it, and that each
//! protocol's own retry rules survive a re-snapshot.
//!
//! Per protocol (`cargo test -p generation-retry-t --test suite --
//! protocols::fastcgi::`): stock nginx gives the 2-hop 502; the module `on` rescues and
//! counts; `off` counts and changes nothing; the patched nginx rescues; and
//! what nginx would not resend (`*_next_upstream off`, a POST once sent,
//! `*_next_upstream_tries 1`) is not resent by the module either.
//!
//! FastCGI (`fastcgi_keep_conn on`), memcached and HTTP/2 keep
//! connections alive: the race is HTTP's (one re-resolving peer, the held
//! request on a cached connection). uwsgi and SCGI do not: two peers, the
//! re-resolving one and a static one, give the retry, and a fresh snapshot
//! holds both: hop 2 is either, but never the one hop 1 tried. gRPC is
//! raced with gRPC calls, which nginx does not resend once sent: through a
//! failed connect (`grpc.rs`). Then stream UDP, which nginx never retries,
//! and nginx's HTTP/2 stale stream id.

use std::net::SocketAddr;

use generation_retry_t::actors::backend::{Wire, ADDR_C};
use generation_retry_t::nginx::{test_config, Config, Flavor};
use generation_retry_t::scenarios::http::{patched_rescue_line, Lab, Race, Spec};
use generation_retry_t::scoring::accesslog::Hop;
use generation_retry_t::scoring::errorlog::NO_LIVE;
use generation_retry_t::scoring::metrics::{log, Counter, Protocol, StatusExt};
use generation_retry_t::shared::UPSTREAM;
use generation_retry_t::since::show;
use reqwest::Method;

mod grpc;
mod stale_stream;
mod udp;

const ON: &str = "generation_retry_resnapshot on;";
const OFF: &str = "generation_retry_resnapshot off;";
/// Races per row.
const RACES: usize = 2;

/// Stock's failure: 502, `$upstream_addr` "FIRST:P, be", and error.log's
/// `upstream prematurely closed connection` then `no live upstreams` on the
/// request's connection.
fn assert_two_hop(lab: &Lab, race: &Race) {
    let wire = lab.backend.wire();
    assert_eq!(race.response.status(), 502, "{wire:?} {race:?}");
    assert_eq!(
        race.entry.upstream_addr(),
        format!("{}, {UPSTREAM}", lab.upstream_addr(race.first_hop)),
        "{wire:?}"
    );
    assert!(
        lab.two_hop_pair(&race.path).is_some(),
        "{wire:?} {}: no prematurely-closed / no-live pair:\n{}",
        race.path,
        lab.nginx.error_log()
    );
}

/// A rescue: 200 answered by hop 2, hop 1 where the backend held the first
/// attempt, hop 2 a peer of the fresh list the request has not tried (the
/// new address, or the static peer where the protocol needs one and the
/// first attempt was not there), never the old address nor `be`.
fn assert_rescued(lab: &Lab, race: &Race) {
    let wire = lab.backend.wire();
    let mut fresh = vec![lab.upstream_addr(race.new)];
    if !wire.keepalive() {
        fresh.push(lab.upstream_addr(ADDR_C));
    }
    let [Hop::Addr(a), Hop::Addr(b)] = race.entry.hops.as_slice() else {
        panic!(
            "{wire:?} {}: hops {:?}\n{}",
            race.path,
            race.entry.hops,
            lab.nginx.error_log()
        );
    };
    let tried = lab.upstream_addr(race.first_hop);
    assert_eq!(a.to_string(), tried, "{wire:?}");
    // The static peer is on the fresh list too, but once tried it is not
    // tried again.
    fresh.retain(|f| *f != tried);
    assert!(
        fresh.contains(&b.to_string()),
        "{wire:?}: hop 2 {b}, hop 1 {a}, the fresh list's untried {fresh:?}"
    );
    let ip = match b {
        SocketAddr::V4(v4) => *v4.ip(),
        SocketAddr::V6(_) => unreachable!("IPv4 only"),
    };
    assert_eq!(race.response.status(), 200, "{wire:?} {race:?}");
    assert_eq!(race.response.body, lab.backend.body(ip), "{wire:?}");
}

/// What nginx does not resend was not resent: one hop, the first attempt's
/// 502, the backend reached once for the path, nothing re-snapshotted.
async fn assert_not_resent(lab: &Lab, race: &Race, method: &str, rule: &str) {
    let wire = lab.backend.wire();
    assert_eq!(race.response.status(), 502, "{wire:?} {rule}: {race:?}");
    assert_eq!(
        race.entry.upstream_addr(),
        lab.upstream_addr(race.first_hop),
        "{wire:?} {rule}: one hop"
    );
    let received = lab.backend.received_by_path(method);
    assert_eq!(received.get(&race.path), Some(&1), "{wire:?} {rule}");
    let s = lab.status(UPSTREAM).await;
    assert_eq!(s.count(Counter::Resnapshots), 0, "{wire:?} {rule}: {s}");
    assert_eq!(s.count(Counter::Rescued), 0, "{wire:?} {rule}: {s}");
}

/// The nginx under test speaks `wire`. A test of a protocol nginx gained
/// (`generation_retry_t::since`) carries its name as a segment of its
/// path, and xtask's runner reports it as not run on an older nginx; run
/// there by hand, it fails rather than pass having proved nothing.
fn assert_speaks(wire: Wire) {
    let (version, since) = (generation_retry_t::nginx::version(), wire.since());
    assert!(
        version >= since,
        "{wire:?} needs nginx {}, this is {}: `nginx -t` refusing it is \
         protocols::nginx_t_accepts_each_protocol_from_its_version",
        show(since),
        show(version)
    );
}

/// `nginx -t` accepts each protocol's lines from the version that speaks
/// it (`Wire::since`) and refuses them before: on nginx before 1.29.4,
/// `proxy_http_version 2` is an `invalid value`. The fact the runner
/// decides by, proven on every version.
#[test]
fn nginx_t_accepts_each_protocol_from_its_version() {
    let version = generation_retry_t::nginx::version();
    for wire in Wire::ALL {
        let http = format!(
            "upstream {UPSTREAM} {{ server 127.0.0.1:1; }}\n    server {{ listen 127.0.0.1:${{PORT}}; \
             location / {{ {} }} }}",
            wire.pass().replace("${SCHEME}", "http")
        );
        let t = test_config(&Config::new(Flavor::stock(), http));
        if version >= wire.since() {
            assert!(
                t.ok,
                "{wire:?} refused by nginx {}: {}",
                show(version),
                t.stderr
            );
        } else {
            assert!(
                !t.ok && t.stderr.contains("invalid value"),
                "{wire:?} is accepted by nginx {}, before {}: {}",
                show(version),
                show(wire.since()),
                t.stderr
            );
        }
    }
}

async fn stock_fails(wire: Wire) {
    assert_speaks(wire);
    let mut lab = Lab::start_spec(Spec::wire(Flavor::stock(), wire, "")).await;
    for i in 0..RACES {
        let race = lab.race_once(i).await;
        assert_two_hop(&lab, &race);
    }
    lab.finish();
}

async fn module_on_rescues(wire: Wire) {
    assert_speaks(wire);
    let mut lab = Lab::start_spec(Spec::wire(Flavor::with_module(), wire, ON)).await;
    for i in 0..RACES {
        let race = lab.race_once(i).await;
        assert_rescued(&lab, &race);
        assert_eq!(race.entry.resnapshots, Some(1), "{wire:?}");
        let s = lab.status(UPSTREAM).await;
        let n = (i + 1) as u64;
        assert_eq!(s.count(Counter::BusyRetry), n, "{wire:?}: {s}");
        assert_eq!(s.count(Counter::Rescued), n, "{wire:?}: {s}");
        assert_eq!(s.count(Counter::Failed), 0, "{wire:?}: {s}");
    }
    lab.assert_rescue_log(&log::rescued_marker(Protocol::Http, UPSTREAM), RACES);
    lab.finish();
}

async fn module_off_counts(wire: Wire) {
    assert_speaks(wire);
    let mut lab = Lab::start_spec(Spec::wire(Flavor::with_module(), wire, OFF)).await;
    let race = lab.race_once(0).await;
    assert_two_hop(&lab, &race);
    let s = lab.status(UPSTREAM).await;
    assert_eq!(s.count(Counter::BusyRetry), 1, "{wire:?}: {s}");
    assert_eq!(s.count(Counter::Failed), 1, "{wire:?}: {s}");
    assert_eq!(s.count(Counter::NoLiveGeneration), 1, "{wire:?}: {s}");
    assert_eq!(s.count(Counter::Rescued), 0, "{wire:?}: {s}");
    lab.finish();
}

async fn patched_rescues(wire: Wire) {
    assert_speaks(wire);
    let mut lab = Lab::start_spec(Spec::wire(Flavor::patched(), wire, "")).await;
    for i in 0..RACES {
        let race = lab.race_once(i).await;
        assert_rescued(&lab, &race);
        let lines = lab.request_errors(&race.path);
        let patch = patched_rescue_line(UPSTREAM);
        assert_eq!(
            lines.iter().filter(|l| l.contains(&patch)).count(),
            1,
            "{wire:?}: {lines:#?}"
        );
        assert!(!lines.iter().any(|l| l.contains(NO_LIVE)), "{lines:#?}");
    }
    lab.finish();
}

/// With the module `on`: `*_next_upstream off`, a POST (where the protocol
/// carries one), and `*_next_upstream_tries 1` with two peers: each fails
/// its first attempt and is not retried, as on stock nginx.
async fn module_keeps_the_retry_rules(wire: Wire) {
    assert_speaks(wire);
    let p = wire.prefix();
    let off = format!("{p}_next_upstream off;");
    let mut lab =
        Lab::start_spec(Spec::wire(Flavor::with_module(), wire, ON).location_extra(&off)).await;
    let race = lab.race_once(0).await;
    assert_not_resent(&lab, &race, "GET", &off).await;
    lab.finish();

    if wire.has_body() {
        let mut lab = Lab::start_spec(Spec::wire(Flavor::with_module(), wire, ON)).await;
        let race = lab.race_method(0, Method::POST).await;
        assert_not_resent(&lab, &race, "POST", "POST").await;
        lab.finish();
    }

    let tries = format!("{p}_next_upstream_tries 1;");
    let mut spec = Spec::two_peers(Flavor::with_module(), "", ON).location_extra(&tries);
    spec.wire = wire;
    let mut lab = Lab::start_spec(spec).await;
    let race = lab.race_once(0).await;
    assert_not_resent(&lab, &race, "GET", &tries).await;
    lab.finish();
}

macro_rules! protocol {
    ($name:ident, $wire:expr) => {
        mod $name {
            use super::*;

            /// Non-regression guard: stock nginx, without the module: the
            /// race is real for this protocol.
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn stock_fails_with_the_two_hop_502() {
                stock_fails($wire).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn module_on_rescues_and_counts() {
                module_on_rescues($wire).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn module_off_counts_and_changes_nothing() {
                module_off_counts($wire).await
            }

            /// Non-regression guard: the patched nginx, without the module.
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn patched_nginx_rescues() {
                patched_rescues($wire).await
            }

            /// Non-regression guard: what nginx would not resend, the module
            /// leaves unsent; it holds with the module doing nothing too.
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn module_keeps_the_retry_rules() {
                super::module_keeps_the_retry_rules($wire).await
            }
        }
    };
}

protocol!(fastcgi, Wire::FastCgi);
protocol!(uwsgi, Wire::Uwsgi);
protocol!(scgi, Wire::Scgi);
protocol!(memcached, Wire::Memcached);
protocol!(http2, Wire::Http2);
