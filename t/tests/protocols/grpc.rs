//! gRPC, raced as gRPC clients call: HTTP/2 `POST`s with a length-prefixed
//! message (`actors::load::grpc_call`), which nginx resends only if never
//! sent. The race reaches them through a connect that fails on a dead
//! pod's black-holed address while the name moves
//! (`scenarios::http::GrpcLab::connect_race`); the reused keepalive
//! connection that the backend closes, HTTP's race, ends a gRPC call
//! without a retry, stock or module (`module_keeps_the_retry_rules`).

use generation_retry_t::nginx::Flavor;
use generation_retry_t::scenarios::http::{patched_rescue_line, GrpcLab, Race, Spec, DEAD};
use generation_retry_t::scoring::errorlog::NO_LIVE;
use generation_retry_t::scoring::metrics::{log, Counter, Protocol, StatusExt};
use generation_retry_t::shared::UPSTREAM;

use super::{OFF, ON, RACES};

/// nginx's line for the refused connect of the call's first attempt.
const REFUSED: &str = "connect() failed (111: Connection refused) while connecting to upstream";

/// Stock's failure: 502, `$upstream_addr` "DEAD:P, be", and error.log's
/// refused connect then `no live upstreams` on the call's connection.
fn assert_two_hop(g: &GrpcLab, race: &Race) {
    let lab = &g.lab;
    assert_eq!(race.response.status(), 502, "{race:?}");
    assert_eq!(
        race.entry.upstream_addr(),
        format!("{}, {UPSTREAM}", lab.upstream_addr(DEAD))
    );
    let lines = lab.request_errors(&race.path);
    let refused = lines.iter().position(|l| l.contains(REFUSED));
    let no_live = lines.iter().rposition(|l| l.contains(NO_LIVE));
    assert!(
        matches!((refused, no_live), (Some(r), Some(n)) if r < n),
        "{}: no refused / no-live pair: {lines:#?}",
        race.path
    );
}

/// A rescue: 200 with `grpc-status: 0` and the new address's message, the
/// first attempt at the dead address, the retry at the new one.
fn assert_rescued(g: &GrpcLab, race: &Race) {
    g.lab.assert_rescued(race);
    let grpc_status = race.response.headers.get("grpc-status");
    assert_eq!(
        grpc_status.map(|v| v.as_bytes()),
        Some(&b"0"[..]),
        "{race:?}"
    );
}

/// Non-regression guard: stock nginx, without the module: the race is
/// real for gRPC calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stock_fails_with_the_two_hop_502() {
    let mut g = GrpcLab::start(Spec::grpc_calls(Flavor::stock(), "")).await;
    for i in 0..RACES {
        let race = g.connect_race(i).await;
        assert_two_hop(&g, &race);
    }
    g.lab.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn module_on_rescues_and_counts() {
    let mut g = GrpcLab::start(Spec::grpc_calls(Flavor::with_module(), ON)).await;
    for i in 0..RACES {
        let race = g.connect_race(i).await;
        assert_rescued(&g, &race);
        assert_eq!(race.entry.resnapshots, Some(1));
        let s = g.lab.status(UPSTREAM).await;
        let n = (i + 1) as u64;
        assert_eq!(s.count(Counter::BusyRetry), n, "{s}");
        assert_eq!(s.count(Counter::Rescued), n, "{s}");
        assert_eq!(s.count(Counter::Failed), 0, "{s}");
    }
    g.lab
        .assert_rescue_log(&log::rescued_marker(Protocol::Http, UPSTREAM), RACES);
    g.lab.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn module_off_counts_and_changes_nothing() {
    let mut g = GrpcLab::start(Spec::grpc_calls(Flavor::with_module(), OFF)).await;
    let race = g.connect_race(0).await;
    assert_two_hop(&g, &race);
    let s = g.lab.status(UPSTREAM).await;
    assert_eq!(s.count(Counter::BusyRetry), 1, "{s}");
    assert_eq!(s.count(Counter::Failed), 1, "{s}");
    assert_eq!(s.count(Counter::NoLiveGeneration), 1, "{s}");
    assert_eq!(s.count(Counter::Rescued), 0, "{s}");
    g.lab.finish();
}

/// Non-regression guard: the patched nginx, without the module.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn patched_nginx_rescues() {
    let mut g = GrpcLab::start(Spec::grpc_calls(Flavor::patched(), "")).await;
    for i in 0..RACES {
        let race = g.connect_race(i).await;
        assert_rescued(&g, &race);
        let lines = g.lab.request_errors(&race.path);
        let patch = patched_rescue_line(UPSTREAM);
        assert_eq!(
            lines.iter().filter(|l| l.contains(&patch)).count(),
            1,
            "{lines:#?}"
        );
        assert!(!lines.iter().any(|l| l.contains(NO_LIVE)), "{lines:#?}");
    }
    g.lab.finish();
}

/// What nginx does not resend, the module does not either: one attempt,
/// its 502, nothing re-snapshotted.
async fn assert_not_resent(g: &GrpcLab, race: &Race, rule: &str) {
    let lab = &g.lab;
    assert_eq!(race.response.status(), 502, "{rule}: {race:?}");
    assert_eq!(
        race.entry.upstream_addr(),
        lab.upstream_addr(race.first_hop),
        "{rule}: one attempt"
    );
    let s = lab.status(UPSTREAM).await;
    assert_eq!(s.count(Counter::Resnapshots), 0, "{rule}: {s}");
    assert_eq!(s.count(Counter::Rescued), 0, "{rule}: {s}");
}

/// Non-regression guard: what nginx would not resend, the module leaves
/// unsent; it holds with the module doing nothing too. With the module
/// `on`: a call sent on a reused keepalive connection that the backend
/// closes while the name moves (HTTP's race: for a gRPC call, no retry at
/// all), and the connect race under `grpc_next_upstream off` and under
/// `grpc_next_upstream_tries 1`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn module_keeps_the_retry_rules() {
    let mut g = GrpcLab::start(Spec::wire(
        Flavor::with_module(),
        generation_retry_t::actors::backend::Wire::Grpc,
        ON,
    ))
    .await;
    let race = g.sent_call(0, true).await;
    assert_not_resent(&g, &race, "a sent call").await;
    let received = g.lab.backend.received_by_path("POST");
    assert_eq!(received.get(&race.path), Some(&1), "{received:?}");
    g.lab.finish();

    for rule in ["grpc_next_upstream off;", "grpc_next_upstream_tries 1;"] {
        let spec = Spec::grpc_calls(Flavor::with_module(), ON).location_extra(rule);
        let mut g = GrpcLab::start(spec).await;
        let race = g.connect_race(0).await;
        assert_not_resent(&g, &race, rule).await;
        g.lab.finish();
    }
}
