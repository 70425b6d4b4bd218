//! What the module must and must not do beyond the race itself.

use std::time::Duration;

use generation_retry_t::actors::backend::{ADDR_A, ADDR_B};
use generation_retry_t::actors::dns::Answer;
use generation_retry_t::memcheck::patience;
use generation_retry_t::nginx::Flavor;
use generation_retry_t::scenarios::http::{Lab, Spec, NAME};
use generation_retry_t::scoring::accesslog::Hop;
use generation_retry_t::scoring::metrics::{
    log, Counter, NoLiveCause, Protocol, StatusExt, Value, FAMILIES,
};
use reqwest::Method;

const ON: &str = "generation_retry_resnapshot on;";

/// The status endpoint: Prometheus by default with the exact content type,
/// JSON on request, HEAD without a body, 405 for other methods, and nginx's
/// access control in front of it.
///
/// Non-regression guard: the status handler's format, methods and access
/// control, whatever the counters hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn status_endpoint_formats_methods_and_access() {
    let spec = Spec::single_peer(Flavor::with_module(), "", ON).http_extra(
        "server { listen 127.0.0.1:${PORT2};
            location / { allow 127.0.0.2; deny all; generation_retry_status; }
            location /allowed { allow 127.0.0.1; deny all; generation_retry_status; } }",
    );
    let port2 = generation_retry_t::nginx::free_port();
    let lab = Lab::start_spec_with(spec, &[("PORT2", port2.to_string())]).await;

    let r = lab.client.get("/status").await;
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.headers["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    assert!(r.body.ends_with('\n'));
    for f in FAMILIES {
        let metric = f.name;
        assert_eq!(
            r.body.matches(&format!("# TYPE {metric} ")).count(),
            1,
            "{metric}"
        );
    }
    let retry = Counter::BusyRetry.metric();
    assert!(r.body.contains(&format!(
        "{retry}{{upstream=\"be\",protocol=\"http\",phase=\"retry\"}} 0\n"
    )));
    let peers = Value::Peers.metric();
    assert!(
        r.body
            .contains(&format!("{peers}{{upstream=\"be\",protocol=\"http\"}} 1\n")),
        "{}",
        r.body
    );

    let j = lab.client.get("/status?format=json").await;
    assert_eq!(j.headers["content-type"], "application/json");
    let v: serde_json::Value = serde_json::from_str(&j.body).unwrap();
    assert_eq!(v["upstreams"][0]["upstream"], "be");
    assert_eq!(v["upstreams"][0]["mode"], "on");

    // Read to the end of the connection: nothing may follow the header.
    let h = lab.client.head("/status").await;
    assert_eq!(h.status(), 200, "{h:?}");
    assert_eq!(
        h.headers["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    assert!(h.body.is_empty(), "a body after HEAD: {:?}", h.body);

    for method in [Method::POST, Method::PUT, Method::DELETE] {
        let r = lab
            .client
            .request(method.clone(), "/status", Some(b"x".to_vec()))
            .await;
        assert_eq!(r.status(), 405, "{method}");
        assert_eq!(r.headers["allow"], "GET, HEAD", "{method}");
    }
    let garbage = lab.client.get("/status?format=%%%&&=&format").await;
    assert_eq!(garbage.status(), 200);
    assert!(garbage.body.starts_with("# HELP"));

    // Access control in front of it: the same client is refused where its
    // address is not allowed, and served where it is.
    let other = generation_retry_t::actors::load::Client::new(format!("http://127.0.0.1:{port2}"));
    assert_eq!(other.get("/").await.status(), 403, "deny all applies");
    let allowed = other.get("/allowed").await;
    assert_eq!(allowed.status(), 200, "allow applies: {allowed:?}");
    assert!(
        allowed.body.contains(&format!("# TYPE {retry} counter")),
        "{}",
        allowed.body
    );
    lab.finish();
}

/// `gzip_types` matches the status endpoint's bare content types, as it
/// matches nginx's own responses: both views are compressed when the client
/// accepts gzip (and not when it does not).
///
/// Non-regression guard: the status handler's content types under gzip,
/// whatever the counters hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn status_endpoint_is_compressed_as_gzip_types_says() {
    let spec = Spec::single_peer(Flavor::with_module(), "", ON)
        .http_extra("gzip on; gzip_types text/plain application/json; gzip_min_length 1;");
    let lab = Lab::start_spec(spec).await;
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    for (path, kind) in [
        ("/status", "text/plain; version=0.0.4; charset=utf-8"),
        ("/status?format=json", "application/json"),
    ] {
        for gzip in [true, false] {
            let mut request = http.get(lab.nginx.url(path));
            if gzip {
                request = request.header("Accept-Encoding", "gzip");
            }
            let r = request.send().await.unwrap();
            assert_eq!(r.status(), 200, "{path}");
            assert_eq!(r.headers()["content-type"], kind, "{path}");
            let encoding = r.headers().get("content-encoding").cloned();
            let body = r.bytes().await.unwrap();
            if gzip {
                assert_eq!(
                    encoding.as_ref().map(|e| e.as_bytes()),
                    Some(&b"gzip"[..]),
                    "{path}"
                );
                assert_eq!(&body[..2], b"\x1f\x8b", "{path}: not a gzip stream");
            } else {
                assert_eq!(encoding, None, "{path}");
            }
        }
    }
    lab.finish();
}

/// A busy refusal with an unchanged generation is not the module's to
/// rescue: nginx's outcome stands, and the cause is counted. Here the name
/// answers NXDOMAIN, the list empties, and the request meets `empty`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn empty_list_is_counted_as_empty_and_left_alone() {
    let lab = Lab::start_spec(Spec::single_peer(Flavor::with_module(), "", ON)).await;
    // Readiness probes sent before the first resolution met an empty list
    // too: count from here.
    let before = lab.status("be").await.count(Counter::NoLiveEmpty);
    lab.dns.set(NAME, Answer::NxDomain);
    lab.wait_peers(0).await;

    let r = lab.client.get("/empty").await;
    assert_eq!(r.status(), 502);
    let e = lab.access_entry("/empty").await;
    assert_eq!(e.upstream_addr(), "be");
    let s = lab.status("be").await;
    assert_eq!(s.count(Counter::NoLiveEmpty), before + 1, "{s}");
    assert_eq!(s.count(Counter::NoLiveGeneration), 0, "{s}");
    assert_eq!(s.count(Counter::BusyFirst), 0, "{s}");
    assert_eq!(s.count(Counter::Resnapshots), 0, "{s}");
    assert!(lab.nginx.error_log().contains(&log::no_live_marker(
        Protocol::Http,
        "be",
        NoLiveCause::Empty
    )));
    lab.finish();
}

/// `on`, and the re-resolve empties the list during the race: the retry is
/// generation-busy, the fresh snapshot has no peer, so the request fails as
/// stock's would, counted as busy, re-snapshotted, failed, and by cause
/// empty (docs/metrics.md, the `after re-snapshot` line).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_resnapshot_onto_an_empty_list_fails_as_empty() {
    let mut lab = Lab::start_spec(Spec::single_peer(Flavor::with_module(), "", ON)).await;
    let before = lab.status("be").await.count(Counter::NoLiveEmpty);
    let race = lab.race_to_nxdomain(0).await;
    assert_eq!(race.response.status(), 502, "{race:?}");
    assert_eq!(race.entry.resnapshots, Some(1), "{race:?}");
    let s = lab.status("be").await;
    assert_eq!(s.count(Counter::BusyRetry), 1, "{s}");
    assert_eq!(s.count(Counter::Resnapshots), 1, "{s}");
    assert_eq!(s.count(Counter::Failed), 1, "{s}");
    assert_eq!(s.count(Counter::Rescued), 0, "{s}");
    assert_eq!(s.count(Counter::NoLiveEmpty), before + 1, "{s}");
    assert_eq!(s.count(Counter::NoLiveGeneration), 0, "{s}");
    let line = log::no_live_marker(Protocol::Http, "be", NoLiveCause::Empty)
        + ", after re-snapshot at generation ";
    let log = lab.nginx.error_log();
    assert_eq!(log.matches(&line).count(), 1, "{log}");
    lab.finish();
}

/// Peers present but unusable (max_conns reached) count as `unavailable`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn unusable_peers_are_counted_as_unavailable() {
    // One peer with max_conns=1: a held request occupies it.
    let lab = Lab::start_spec(
        Spec {
            servers: "server app.test:${BPORT} resolve max_conns=1;".into(),
            ..Spec::single_peer(Flavor::with_module(), "", ON)
        }
        .location_extra("proxy_next_upstream off;"),
    )
    .await;
    let hold = lab.backend.arm_hold_any();
    let client = lab.client.clone();
    let first = tokio::spawn(async move { client.get("/occupy").await });
    let held = hold
        .caught(patience(Duration::from_secs(10)))
        .await
        .unwrap();

    let r = lab.client.get("/refused").await;
    assert_eq!(r.status(), 502);
    assert_eq!(lab.access_entry("/refused").await.upstream_addr(), "be");
    let s = lab.status("be").await;
    assert_eq!(s.count(Counter::NoLiveUnavailable), 1, "{s}");
    assert_eq!(s.count(Counter::NoLiveGeneration), 0, "{s}");
    assert_eq!(s.count(Counter::BusyFirst), 0, "{s}");

    held.close();
    let _ = first.await;
    lab.finish();
}

/// A POST, PATCH or LOCK whose request reached the backend is not retried
/// by nginx (non-idempotent), so the module has nothing to do even though
/// the peer list changed meanwhile: 502 with one hop, no counter moves, and
/// the backend saw each request once and never answered it twice.
///
/// Non-regression guard: the module must not retry what nginx does not retry;
/// doing nothing passes, as it should.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sent_non_idempotent_requests_are_not_retried() {
    let lab = Lab::start_spec(Spec::single_peer(Flavor::with_module(), "", ON)).await;
    let mut current = ADDR_A;
    for (i, method) in ["POST", "PATCH", "LOCK"].into_iter().enumerate() {
        let method = Method::from_bytes(method.as_bytes()).unwrap();
        let next = if current == ADDR_A { ADDR_B } else { ADDR_A };
        lab.wait_proxying_to(current, &format!("/warm/{i}")).await;
        let hold = lab.backend.arm_hold();
        let client = lab.client.clone();
        let path = format!("/order/{i}");
        let request = {
            let (method, path) = (method.clone(), path.clone());
            tokio::spawn(async move {
                client
                    .request(method, &path, Some(b"item=1".to_vec()))
                    .await
            })
        };
        let held = hold
            .caught(patience(Duration::from_secs(10)))
            .await
            .unwrap();
        let since = std::time::Instant::now();
        lab.dns.set_a(NAME, next);
        lab.dns
            .wait_answered(
                NAME,
                &Answer::A(vec![next]),
                since,
                patience(Duration::from_secs(10)),
            )
            .await
            .unwrap();
        lab.wait_proxying_to(next, &format!("/probe/{i}")).await;
        held.close();

        let r = request.await.unwrap();
        assert_eq!(r.status(), 502, "{method}");
        let e = lab.access_entry(&path).await;
        assert_eq!(e.hops.len(), 1, "{method}: {}", e.upstream_addr());
        let seen = lab.backend.seen().iter().filter(|s| s.path == path).count();
        assert_eq!(seen, 1, "{method} reached the backend {seen} times");
        assert!(lab.backend.received_twice(method.as_str()).is_empty());
        current = next;
    }
    let s = lab.status("be").await;
    assert_eq!(s.count(Counter::Resnapshots), 0, "{s}");
    assert_eq!(s.count(Counter::BusyRetry), 0, "{s}");
    lab.finish();
}

/// The re-snapshot keeps the request's remaining tries: with three peers and
/// `proxy_next_upstream_tries 2`, a rescued retry that fails too ends the
/// request after two attempts (peer.init alone would grant three again).
/// The positive control: the same race with `tries 3` makes a third
/// selection, so the hop count follows the tries left. The third finds
/// every address of the fresh list already tried (127.0.0.4 before the
/// change, 127.0.0.3 by the rescue; the name and the static peer share
/// 127.0.0.3), so it is refused as nginx refuses a request that tried every
/// peer (`"127.0.0.4:P, 127.0.0.3:P, be"`, `cause=unavailable`), rather
/// than sent to an address a third time. Stock's refusal at `tries 2`
/// (`"127.0.0.4:P, be"`) has the same length as the rescued two hops, so
/// every hop there must be a peer.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn resnapshot_keeps_next_upstream_tries() {
    for tries in [2, 3] {
        // `max_conns=1` on every peer: a peer freed twice after the refusal
        // would have its connection count wrap and be skipped for good.
        let mut spec = Spec::two_peers(
            Flavor::with_module(),
            "",
            &format!("server 127.0.0.3:${{BPORT}} max_fails=0 max_conns=1; {ON}"),
        )
        .location_extra(&format!("proxy_next_upstream_tries {tries};"));
        spec.servers = "server app.test:${BPORT} resolve max_fails=0 max_conns=1;\n        \
                        server 127.0.0.4:${BPORT} max_fails=0 max_conns=1;"
            .into();
        let mut lab = Lab::start_spec(spec).await;
        // Every attempt after the held one fails too.
        let race = lab.race_once_then(0, |backend| backend.fail_next(10)).await;
        let hops = race.entry.upstream_addr();
        assert_eq!(race.response.status(), 502, "tries {tries}: {race:?}");
        assert_eq!(race.entry.hops.len(), tries, "tries {tries}: {hops}");
        assert!(
            race.entry.hops[..2]
                .iter()
                .all(|h| matches!(h, Hop::Addr(_))),
            "tries {tries}: a hop was refused: {hops}"
        );
        assert_eq!(race.entry.resnapshots, Some(1), "tries {tries}: {hops}");
        let s = lab.status("be").await;
        assert_eq!(s.count(Counter::Rescued), 1, "tries {tries}: {s}");
        if tries == 3 {
            assert!(hops.ends_with(", be"), "tries 3: {hops}");
            let marker = log::no_live_marker(Protocol::Http, "be", NoLiveCause::Unavailable);
            let lines = lab.request_errors(&race.path);
            assert!(
                lines
                    .iter()
                    .any(|l| l.contains(&marker) && l.contains("already tried")),
                "tries 3: {lines:#?}"
            );
            assert!(s.count(Counter::Excluded) >= 1, "tries 3: {s}");
        }
        // Every peer still takes its share: none was freed twice (one freed
        // twice would have its connection count wrap past `max_conns`).
        // Three peers of weight 1, sequential requests: 127.0.0.3 twice per
        // round (the name and the static peer), 127.0.0.4 once; smooth
        // round-robin repeats every 3 selections, so any 12 give 8 and 4.
        lab.backend.fail_next(0);
        let mut answered = std::collections::HashMap::new();
        for i in 0..12 {
            let r = lab.client.get(&format!("/after/{i}")).await;
            assert_eq!(r.status(), 200, "tries {tries}: {r:?}");
            *answered.entry(r.body.clone()).or_insert(0) += 1;
        }
        let n = |ip: &str| answered.get(&format!("{ip}\n")).copied().unwrap_or(0);
        assert!(
            n("127.0.0.3") == 8 && n("127.0.0.4") == 4,
            "tries {tries}: a peer is skipped after the race: {answered:?}"
        );
        lab.finish();
    }
}

/// At http level the directive covers every upstream with a zone; an
/// upstream's own `off` overrides it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn http_level_applies_and_upstream_level_overrides() {
    let mut on =
        Lab::start_spec(Spec::single_peer(Flavor::with_module(), "", "").http_extra(ON)).await;
    let race = on.race_once(0).await;
    assert_eq!(race.response.status(), 200, "{race:?}");
    assert_eq!(on.status("be").await["mode"], "on");
    on.finish();

    let mut off = Lab::start_spec(
        Spec::single_peer(
            Flavor::with_module(),
            "",
            "generation_retry_resnapshot off;",
        )
        .http_extra(ON),
    )
    .await;
    let race = off.race_once(0).await;
    assert_eq!(race.response.status(), 502, "{race:?}");
    assert_eq!(off.status("be").await["mode"], "off");
    off.finish();
}

/// A re-snapshot keeps the caller's chain: a second peer wrapper, loaded
/// after ours and wrapping `peer.init` outside it (the test-only module of
/// `t/wrap/`, as a third-party balancer module would), still sees every
/// get and free of a rescued request, its rescued hop included, and the
/// request is rescued through it. Before, the re-snapshot put this
/// module's callbacks back on top of the peer connection, so the outer
/// wrapper lost the rescued hop's free (and every call after it).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_wrapper_outside_ours_sees_every_get_and_free_of_a_rescued_request() {
    let mut lab = Lab::start_spec(Spec::single_peer(Flavor::with_module_wrapped(), "", ON)).await;
    let calls = |lines: &[String], call: &str| {
        lines
            .iter()
            .filter(|l| l.contains("[notice]") && l.contains(&format!("test_wrap: {call}")))
            .count()
    };
    for i in 0..generation_retry_t::repeats(3) {
        let race = lab.race_once(i).await;
        lab.assert_rescued(&race);
        let lines = lab.request_errors(&race.path);
        assert_eq!(
            [
                calls(&lines, "init"),
                calls(&lines, "get"),
                calls(&lines, "free")
            ],
            [1, 2, 2],
            "{}: the outer wrapper's init, then get and free of hop 1 and of the \
             rescued hop 2: {lines:#?}",
            race.path
        );
        assert_eq!(
            lines.iter().filter(|l| log::is_rescue_line(l)).count(),
            1,
            "{lines:#?}"
        );
        // The same connection's next request goes through the wrapper too.
        let after = format!("/after/{i}");
        let r = lab.client.get(&after).await;
        assert_eq!(r.status(), 200, "{r:?}");
        let lines = lab.request_errors(&after);
        assert_eq!(
            [
                calls(&lines, "init"),
                calls(&lines, "get"),
                calls(&lines, "free")
            ],
            [1, 1, 1],
            "{after}: {lines:#?}"
        );
    }
    let s = lab.status("be").await;
    assert_eq!(
        s.count(Counter::Rescued),
        generation_retry_t::repeats(3) as u64,
        "{s}"
    );
    lab.finish();
}
