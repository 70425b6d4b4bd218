//! `sticky` (nginx 1.29.6+) across a rescue that hands tried peers back
//! and then fails (issue 47, item 3): the request's session is not bound
//! to a peer handed back, and its 502 carries one `Set-Cookie` per name,
//! as nginx's own 502 does. Each for the module and for the patched nginx.
//!
//! Scripted as `t/tests/soundness.rs` does: the backend holds an attempt,
//! the name's answer changes and nginx applies it, then the backend closes
//! the held connection, so that nginx retries under a moved generation.

use std::net::Ipv4Addr;
use std::time::Duration;

use generation_retry_t::actors::backend::{Held, ADDR_A, ADDR_B, ADDR_C};
use generation_retry_t::actors::load::Response;
use generation_retry_t::memcheck::patience;
use generation_retry_t::nginx::Fix;
use generation_retry_t::scenarios::http::{patched_rescue_line, Lab, Spec};
use generation_retry_t::scoring::metrics::{Counter, NoLiveCause, StatusExt};
use generation_retry_t::shared::UPSTREAM;
use tokio::task::JoinHandle;

use super::{cookie_problems, lacks};

/// The version that ships `sticky`.
const STICKY: (u32, u32, u32) = (1, 29, 6);

/// `sticky learn` without `header`: a session's peer is learned at the
/// attempt's `free`. The request's `session` argument names the session.
const LEARN: &str = "sticky learn create=$arg_session lookup=$arg_session zone=handed_back:1m;";

/// `sticky cookie`: the cookie is set at each selection.
const COOKIE: &str = "sticky cookie srv_id;";

/// `sticky learn` (without `header`) learns a session's peer at the
/// attempt's `free`, unless nginx passed the attempt over
/// (`NGX_PEER_NEXT`) or it failed (`NGX_PEER_FAILED`): stock nginx never
/// binds a session to a peer it did not get an answer from. A peer a
/// rescue hands back is an attempt never made; freed with state 0 (a
/// success), sticky learned it, and a request that then failed left its
/// session bound to a peer it had failed on.
///
/// `hash $uri` under `sticky` puts each path on one peer, so the fresh
/// state's first choice is the peer the request tried. The request of
/// session `s` is held at the static C; the name moves from A to B and the
/// held connection closes; the rescue's fresh state offers C (handed
/// back), then B, whose connection the backend closes too: a 502 after C
/// and B, from which sticky learns nothing. A later request of session `s`
/// whose path hashes to B must then be sent to B; with the hand-back
/// learned, sticky sent it to C.
///
/// Non-regression guard: before nginx 1.29.6 the test only proves nginx
/// refuses `sticky`; from that version on it fails on a hand-back learned.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_peer_handed_back_is_not_learned_for_the_session() {
    not_learned(Fix::Module).await;
}

/// The patched nginx hands back with `NGX_PEER_NEXT`, which sticky skips.
///
/// Non-regression guard: the patched nginx, without the module.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn patched_a_peer_handed_back_is_not_learned_for_the_session() {
    not_learned(Fix::Patched).await;
}

async fn not_learned(fix: Fix) {
    if !fix.available() || lacks(STICKY, LEARN, fix) {
        return;
    }
    let spec = Spec {
        servers: format!(
            "server {ADDR_C}:${{BPORT}} max_fails=0;\n        \
             server app.test:${{BPORT}} resolve max_fails=0;"
        ),
        ..Spec::two_peers(fix.flavor(), "hash $uri;", &format!("{LEARN} {}", fix.on()))
    };
    let lab = Lab::start_spec(spec).await;
    let wait = patience(Duration::from_secs(10));
    // Other sessions' requests are held elsewhere, closed, retried at C
    // and learned there: only the held one's session matters.
    let (i, held, request) = held_at(&lab, |i| format!("/learn/{i}?session=s{i}"), ADDR_C).await;
    let (path, session) = (format!("/learn/{i}?session=s{i}"), format!("s{i}"));
    lab.point(&[ADDR_B]).await;
    let hold = lab.backend.arm_hold_any();
    held.close();
    let second = hold
        .caught(wait)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", lab.nginx.error_log()));
    assert_eq!(second.addr, ADDR_B, "the attempt after the hand-back");
    second.close();
    let r = request.await.expect("client task");
    let log = lab.nginx.error_log();
    assert_eq!(r.status(), 502, "{r:?}\n{log}");
    assert_eq!(lab.backend.reached(&path), [ADDR_C, ADDR_B], "{log}");
    if fix == Fix::Module {
        let s = lab.status(UPSTREAM).await;
        assert_eq!(
            (s.count(Counter::Rescued), s.count(Counter::Excluded)),
            (1, 1),
            "C was handed back: {s}"
        );
    } else {
        let lines = lab.request_errors(&path);
        let rescue = patched_rescue_line(UPSTREAM);
        let n = lines.iter().filter(|l| l.contains(&rescue)).count();
        assert_eq!(n, 1, "{lines:#?}");
    }

    // A path that hashes to the name's address, found without a session.
    let follow = path_to(&lab, "/follow/", ADDR_B).await;
    let again = lab.client.get(&format!("{follow}?session={session}")).await;
    assert_eq!(
        (again.status(), again.body.as_str()),
        (200, format!("{ADDR_B}\n").as_str()),
        "session {session} was bound to the peer handed back, {ADDR_C}: {again:?}\n{}",
        lab.nginx.error_log()
    );
    lab.finish();
}

/// A rescue that ends with every peer tried (`no live upstreams`, 502)
/// sends one `Set-Cookie: srv_id`, as nginx's own 502 after `sticky
/// cookie` selected a peer does (the cookie of the peer selected last,
/// which sticky sets at each selection in one header; stock 1.31.4 sends
/// one on this very sequence). The fresh state sets its cookie in a header
/// of its own at each peer it gives, handed back or not, and the module
/// hid the first state's only when the outcome gave a peer: the 502
/// carried both. Now the latest of the name stays, as after a rescue.
///
/// The name holds A, B and C (three tries); the request's first attempt
/// is held and closed, its second held; the name moves to the two
/// addresses tried, and the second closes. The retry re-snapshots onto a
/// list of two peers both tried: each is handed back, and the selection
/// ends all tried.
///
/// Non-regression guard: before nginx 1.29.6 the test only proves nginx
/// refuses `sticky`; from that version on it fails on two cookies.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_all_tried_502_sends_one_cookie_per_name() {
    all_tried(Fix::Module).await;
}

/// The patched nginx hides a replaced cookie after every re-snapshot.
///
/// Non-regression guard: the patched nginx, without the module.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn patched_an_all_tried_502_sends_one_cookie_per_name() {
    all_tried(Fix::Patched).await;
}

async fn all_tried(fix: Fix) {
    if !fix.available() || lacks(STICKY, COOKIE, fix) {
        return;
    }
    let spec = Spec {
        servers: "server app.test:${BPORT} resolve max_fails=0;".into(),
        ..Spec::two_peers(fix.flavor(), "", &format!("{COOKIE} {}", fix.on()))
    };
    let lab = Lab::start_spec(spec).await;
    lab.point(&[ADDR_A, ADDR_B, ADDR_C]).await;
    let wait = patience(Duration::from_secs(10));
    let path = "/all-tried";
    let hold = lab.backend.arm_hold_any();
    let request = {
        let client = lab.client.clone();
        tokio::spawn(async move { client.get(path).await })
    };
    let first = hold.caught(wait).await.unwrap();
    let hold = lab.backend.arm_hold_any();
    let x = first.addr;
    first.close();
    let second = hold.caught(wait).await.unwrap();
    let y = second.addr;
    let mut tried = [x, y];
    tried.sort();
    lab.point(&tried).await;
    second.close();
    let r = request.await.expect("client task");

    let log = lab.nginx.error_log();
    assert_eq!(r.status(), 502, "{r:?}\n{log}");
    assert_eq!(lab.backend.reached(path), [x, y], "{log}");
    let problems = cookie_problems(&r.headers, true);
    assert!(problems.is_empty(), "{problems:#?}\n{log}");
    if fix == Fix::Module {
        let s = lab.status(UPSTREAM).await;
        let counts = (
            s.count(Counter::Excluded),
            s.count(NoLiveCause::Unavailable.counter()),
        );
        assert_eq!(counts, (2, 1), "both peers handed back, all tried: {s}");
    } else {
        let lines = lab.request_errors(path);
        let rescue = patched_rescue_line(UPSTREAM);
        let n = lines.iter().filter(|l| l.contains(&rescue)).count();
        assert_eq!(n, 1, "{lines:#?}");
    }
    lab.finish();
}

/// A GET of `path(i)` whose first attempt the backend holds at `want`,
/// for the first `i` that is (a hashing balancer sends each path to one
/// peer); the others are released, retried and answered.
async fn held_at(
    lab: &Lab,
    path: impl Fn(usize) -> String,
    want: Ipv4Addr,
) -> (usize, Held, JoinHandle<Response>) {
    for i in 0..32 {
        let hold = lab.backend.arm_hold_any();
        let request = {
            let (client, path) = (lab.client.clone(), path(i));
            tokio::spawn(async move { client.get(&path).await })
        };
        let held = hold
            .caught(patience(Duration::from_secs(10)))
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", lab.nginx.error_log()));
        if held.addr == want {
            return (i, held, request);
        }
        held.close();
        let _ = request.await;
    }
    panic!("no request was held at {want}");
}

/// A path under `prefix` answered by the backend at `ip`.
async fn path_to(lab: &Lab, prefix: &str, ip: Ipv4Addr) -> String {
    for j in 0..32 {
        let path = format!("{prefix}{j}");
        let r = lab.client.get(&path).await;
        if r.status() == 200 && r.body == format!("{ip}\n") {
            return path;
        }
    }
    panic!("no path under {prefix} went to {ip}");
}
