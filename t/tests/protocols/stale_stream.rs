//! nginx's stale stream id on HTTP/2 upstreams (`grpc_pass`, and
//! `proxy_http_version 2`): proven on stock, and the patched nginx's fix.
//! It needs a request resent after its attempt was sent on a cached
//! connection, which nginx does for a body-less request (the HTTP/1.1
//! `GET`s these rows pass through `grpc_pass`), never for a gRPC call (a
//! `POST` whose body nginx does not buffer): real gRPC calls cannot meet
//! it, as the last row shows.

use generation_retry_t::actors::backend::Wire;
use generation_retry_t::nginx::Flavor;
use generation_retry_t::scenarios::http::{GrpcLab, Lab, Spec};
use generation_retry_t::scoring::errorlog::STALE_STREAM;

use super::assert_speaks;

/// A retry on a fresh connection after a failed attempt on a cached one
/// (no DNS change): `(status, error.log lines)` of `/plain/0`, checked to
/// be two attempts at the current address, the second on a new connection
/// (its first request there).
async fn retry_on_a_fresh_connection(lab: &mut Lab) -> (u16, Vec<String>) {
    let wire = lab.backend.wire();
    let (response, _) = lab.retry_without_flip(0).await;
    let entry = lab.access_entry("/plain/0").await;
    let addr = lab.upstream_addr(lab.current);
    assert_eq!(entry.upstream_addr(), format!("{addr}, {addr}"), "{wire:?}");
    let seen: Vec<_> = lab
        .backend
        .seen()
        .into_iter()
        .filter(|s| s.path == "/plain/0")
        .collect();
    let [first, second] = seen.as_slice() else {
        panic!("{wire:?}: {seen:#?}");
    };
    assert!(first.index_on_conn > 0, "{wire:?}: {first:?}");
    assert!(
        second.conn != first.conn && second.index_on_conn == 0,
        "{wire:?}: the retry was not on a new connection: {second:?}"
    );
    if response.status() == 200 {
        assert_eq!(response.body, lab.backend.body(lab.current), "{wire:?}");
    }
    (response.status(), lab.request_errors("/plain/0"))
}

/// nginx's own HTTP/2 defect (`grpc_pass`, and `proxy_http_version 2` from
/// 1.29.4; `errorlog::STALE_STREAM`): a body-less request (here an
/// HTTP/1.1 `GET`) whose attempt on a cached connection failed is retried on a fresh connection with the
/// cached one's stream id, which the backend answers and nginx refuses,
/// a 502, without any DNS change. The race rows above warm a connection
/// to the new address before the retry, so their retry reuses it; a rescue
/// that opens a fresh connection meets this defect as any retry does. This
/// fails once nginx is fixed; the patched nginx carries the fix.
async fn stock_stale_stream_id(wire: Wire) {
    assert_speaks(wire);
    let mut lab = Lab::start_spec(Spec::wire(Flavor::stock(), wire, "")).await;
    let (status, lines) = retry_on_a_fresh_connection(&mut lab).await;
    assert_eq!(status, 502, "{wire:?}: {lines:#?}");
    assert!(
        lines.iter().any(|l| l.contains(STALE_STREAM)),
        "{wire:?}: {lines:#?}"
    );
    lab.finish();
}

/// The patched nginx sends the retry on stream 1: answered.
async fn patched_stream_1(wire: Wire) {
    assert_speaks(wire);
    let mut lab = Lab::start_spec(Spec::wire(Flavor::patched(), wire, "")).await;
    let (status, lines) = retry_on_a_fresh_connection(&mut lab).await;
    assert_eq!(status, 200, "{wire:?}: {lines:#?}");
    lab.finish();
}

macro_rules! stale_stream {
    ($name:ident, $wire:expr) => {
        mod $name {
            use super::*;

            /// Non-regression guard: stock nginx, without the module.
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn stock_retry_on_a_fresh_connection_reuses_a_stale_stream_id() {
                stock_stale_stream_id($wire).await
            }

            /// Non-regression guard: the patched nginx, without the module.
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn patched_retry_on_a_fresh_connection_uses_stream_1() {
                patched_stream_1($wire).await
            }
        }
    };
}

stale_stream!(grpc, Wire::Grpc);
stale_stream!(http2, Wire::Http2);

/// Non-regression guard: stock nginx, without the module: a real gRPC call
/// (HTTP/2 `POST`, a message body nginx does not buffer) whose attempt on a
/// cached connection fails is not resent at all (`u->request_sent &&
/// r->request_body_no_buffering` in `ngx_http_upstream_next`), so it never
/// reaches a fresh connection with a stale stream id: one attempt, its
/// 502, the backend reached once, no stale-stream line.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stock_grpc_call_failed_on_a_cached_connection_is_not_resent() {
    let mut g = GrpcLab::start(Spec::wire(Flavor::stock(), Wire::Grpc, "")).await;
    let race = g.sent_call(0, false).await;
    let lines = g.lab.request_errors(&race.path);
    assert_eq!(race.response.status(), 502, "{race:?}\n{lines:#?}");
    assert_eq!(
        race.entry.upstream_addr(),
        g.lab.upstream_addr(race.first_hop),
        "one attempt: {lines:#?}"
    );
    assert_eq!(g.lab.backend.reached(&race.path), [race.first_hop]);
    assert!(
        !lines.iter().any(|l| l.contains(STALE_STREAM)),
        "{lines:#?}"
    );
    g.lab.finish();
}
