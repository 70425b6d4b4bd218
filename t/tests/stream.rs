//! Stream (TCP) upstreams: the race of `generation_retry::stream`, on stock
//! nginx, with the module (`on`, `off`) and with the patched nginx.

use generation_retry_t::nginx::Flavor;
use generation_retry_t::scenarios::http::patched_rescue_line;
use generation_retry_t::scoring::metrics::{log, Counter, NoLiveCause, Protocol, StatusExt};
use std::time::{Duration, Instant};

use generation_retry_t::actors::dns::Answer;
use generation_retry_t::actors::tcp::{Session, HOLE, NEW};
use generation_retry_t::memcheck::patience;
use generation_retry_t::scenarios::stream::{StreamLab, StreamRace, StreamSpec, NAME};

/// `$upstream_addr` of a race that failed over: the black hole, then `rest`.
fn addr_after_hole(lab: &StreamLab, rest: &str) -> String {
    format!("{HOLE}:{}, {rest}", lab.hole.port())
}

fn assert_rescued(lab: &StreamLab, race: &StreamRace) {
    assert!(
        race.delivered(),
        "{}: the session did not reach {} with its bytes intact: {:?} ({} bytes back)\n{:?}",
        race.upstream,
        race.new,
        race.reply.error,
        race.reply.bytes.len(),
        race.errors
    );
    assert_eq!(race.entry.status, 200, "{race:?}");
    assert_eq!(
        race.entry.upstream_addr,
        addr_after_hole(lab, &format!("{}:{}", race.new, lab.backend.port())),
        "{race:?}"
    );
    assert_eq!(race.entry.bytes_received, race.payload.len() as u64);
    assert!(
        !race.errors.iter().any(|l| l.contains("no live upstreams")),
        "{:?}",
        race.errors
    );
}

/// Non-regression guard: stock nginx, without the module: the race is real.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stock_nginx_fails_the_stream_race_with_no_live_upstreams() {
    let mut lab = StreamLab::start(StreamSpec::new(Flavor::stock(), 2)).await;
    for _ in 0..2 {
        let race = lab.race().await;
        assert!(
            race.reply.bytes.is_empty(),
            "{}: stock nginx answered: {:?}",
            race.upstream,
            race.reply
        );
        assert_eq!(race.entry.status, 502, "{race:?}");
        // The retry was refused: the upstream's name stands where a peer
        // address would be.
        assert_eq!(
            race.entry.upstream_addr,
            addr_after_hole(&lab, &race.upstream),
            "{race:?}"
        );
        assert!(
            race.errors
                .iter()
                .any(|l| l.contains("[error]") && l.contains("no live upstreams")),
            "{:?}",
            race.errors
        );
        assert!(
            race.errors.iter().any(|l| l.contains("Connection refused")),
            "the first attempt did not fail at the black hole: {:?}",
            race.errors
        );
    }
    lab.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn module_on_rescues_the_stream_race_and_counts_it() {
    // `on` at stream level applies to every upstream with a zone; an http
    // upstream of the same name is counted apart.
    let mut spec = StreamSpec::new(Flavor::with_module(), 3);
    spec.top = "generation_retry_resnapshot on;".into();
    spec.http_extra = "generation_retry_resnapshot on;\n    \
                       upstream be0 { zone http_be0 64k; server 127.0.0.3:1; }"
        .into();
    let mut lab = StreamLab::start(spec).await;
    for _ in 0..3 {
        let race = lab.race().await;
        assert_rescued(&lab, &race);
        assert!(
            race.errors.iter().any(|l| l.contains(log::RESCUE_LEVEL)
                && l.contains(&log::rescued_marker(Protocol::Stream, &race.upstream))),
            "{:?}",
            race.errors
        );
        let s = lab.status("stream", &race.upstream).await;
        assert_eq!(s["mode"], "on", "{s}");
        assert_eq!(s.count(Counter::BusyRetry), 1, "{s}");
        assert_eq!(s.count(Counter::BusyFirst), 0, "{s}");
        assert_eq!(s.count(Counter::Resnapshots), 1, "{s}");
        assert_eq!(s.count(Counter::Rescued), 1, "{s}");
        assert_eq!(s.count(Counter::Failed), 0, "{s}");
        assert_eq!(s.count(Counter::NoLiveGeneration), 0, "{s}");
        assert_eq!(s["peers"], 2, "{s}");
    }
    let http = lab.status("http", "be0").await;
    assert_eq!(http.count(Counter::BusyRetry), 0, "{http}");
    assert_eq!(http.count(Counter::Rescued), 0, "{http}");

    let text = lab.http.get("/status").await;
    assert!(
        text.body.contains(&format!(
            "{}{{upstream=\"be2\",protocol=\"stream\"}} 1\n",
            Counter::Rescued.metric()
        )),
        "{}",
        text.body
    );
    assert!(
        text.body.contains(&format!(
            "{}{{upstream=\"be0\",protocol=\"http\"}} 0\n",
            Counter::Rescued.metric()
        )),
        "{}",
        text.body
    );
    lab.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn module_off_fails_like_stock_and_counts_the_cause() {
    let mut spec = StreamSpec::new(Flavor::with_module(), 1);
    spec.extra = "generation_retry_resnapshot off;".into();
    let mut lab = StreamLab::start(spec).await;
    let race = lab.race().await;
    assert!(race.reply.bytes.is_empty(), "{:?}", race.reply);
    assert_eq!(race.entry.status, 502, "{race:?}");
    assert!(
        race.errors.iter().any(|l| l.contains(&log::no_live_marker(
            Protocol::Stream,
            "be0",
            NoLiveCause::Generation
        ))),
        "{:?}",
        race.errors
    );
    let s = lab.status("stream", "be0").await;
    assert_eq!(s["mode"], "off", "{s}");
    assert_eq!(s.count(Counter::BusyRetry), 1, "{s}");
    assert_eq!(s.count(Counter::Failed), 1, "{s}");
    assert_eq!(s.count(Counter::NoLiveGeneration), 1, "{s}");
    assert_eq!(s.count(Counter::Rescued), 0, "{s}");
    lab.finish();
}

/// One race through an upstream with `balancer`, module `on`: rescued.
async fn rescued_with_balancer(balancer: &str) {
    let mut spec = StreamSpec::new(Flavor::with_module(), 1);
    spec.pre = balancer.into();
    spec.extra = "generation_retry_resnapshot on;".into();
    let mut lab = StreamLab::start(spec).await;
    let race = lab.race().await;
    assert_rescued(&lab, &race);
    assert_eq!(lab.status("stream", "be0").await.count(Counter::Rescued), 1);
    lab.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn module_on_rescues_the_stream_race_with_least_conn() {
    rescued_with_balancer("least_conn;").await;
}

/// `least_time connect` (stream, nginx 1.31.0 and later): rescued too.
///
/// Non-regression guard: before nginx 1.31.0 there is no stream `least_time`
/// and the test only says so; from 1.31.0 it is a rescue test.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn module_on_rescues_the_stream_race_with_least_time() {
    let v = generation_retry_t::nginx::version();
    if v < (1, 31, 0) {
        println!("nginx {v:?} has no stream `least_time` (since 1.31.0): no race to run");
        return;
    }
    rescued_with_balancer("least_time connect;").await;
}

/// The race session's error.log lines hold the stream patch's re-snapshot
/// line once (`info`), and no rescue line of the module.
fn assert_patch_line(race: &StreamRace) {
    let line = patched_rescue_line(&race.upstream);
    assert_eq!(
        race.errors
            .iter()
            .filter(|l| l.contains("[info]") && l.contains(&line))
            .count(),
        1,
        "{}: expected `{line}` once: {:?}",
        race.upstream,
        race.errors
    );
    assert!(
        !race.errors.iter().any(|l| log::is_rescue_line(l)),
        "{:?}",
        race.errors
    );
}

/// The patched nginx alone rescues the stream race: the bytes come back
/// from the new address, and the patch logs its line on the session.
///
/// Non-regression guard: the patched nginx, without the module.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patched_nginx_rescues_the_stream_race_without_the_module() {
    let mut lab = StreamLab::start(StreamSpec::new(Flavor::patched(), 2)).await;
    for _ in 0..2 {
        let race = lab.race().await;
        assert_rescued(&lab, &race);
        assert_patch_line(&race);
    }
    lab.finish();
}

/// Non-regression guard: in a patched nginx the module must find nothing to
/// rescue; the patch does the work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn module_in_patched_nginx_counts_nothing_for_stream() {
    // The core re-snapshots first, so the module never sees a stale state.
    let mut spec = StreamSpec::new(Flavor::patched_with_module(), 1);
    spec.top = "generation_retry_resnapshot on;".into();
    let mut lab = StreamLab::start(spec).await;
    let race = lab.race().await;
    assert_rescued(&lab, &race);
    let s = lab.status("stream", "be0").await;
    assert_eq!(s.count(Counter::BusyRetry), 0, "{s}");
    assert_eq!(s.count(Counter::Rescued), 0, "{s}");
    assert_patch_line(&race);
    lab.finish();
}

/// The primary the session tried before the change stays tried after the
/// re-snapshot. With `max_fails=0` a failed primary stays selectable, and a
/// fresh snapshot's tried bitmap is empty, so the retry would go back to
/// the dead primary and spend the session's last try there (`$upstream_addr`
/// "HOLE, HOLE", closed). Excluded, the retry reaches the backup at its new
/// address: by the module (which counts the handed-back peer) and, in the
/// `patched_` twin, by the patched nginx alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_tried_before_the_change_is_not_tried_again() {
    primary_tried_before_the_change(Flavor::with_module()).await;
}

/// Non-regression guard: the patched nginx, without the module.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patched_nginx_does_not_try_a_primary_tried_before_the_change() {
    primary_tried_before_the_change(Flavor::patched()).await;
}

async fn primary_tried_before_the_change(flavor: Flavor) {
    let module = flavor.module.is_some();
    let mut spec = StreamSpec::new(flavor, 2);
    spec.primary = "max_fails=0".into();
    if module {
        spec.top = "generation_retry_resnapshot on;".into();
    }
    let mut lab = StreamLab::start(spec).await;
    for _ in 0..2 {
        let race = lab.race().await;
        assert_rescued(&lab, &race);
        if module {
            let s = lab.status("stream", &race.upstream).await;
            assert_eq!(
                (s.count(Counter::Rescued), s.count(Counter::Excluded)),
                (1, 1),
                "{s}"
            );
        } else {
            assert_patch_line(&race);
        }
    }
    lab.finish();
}

/// Handing a tried peer back neither fails it again nor revives it
/// (issue 41, defect C), shown on nginx's own terms: a dead primary (a
/// refused port) with `weight=100 max_fails=2 fail_timeout=1s`, the
/// black-hole primary (`max_fails=0`) and the backup name. The session is
/// refused at the dead primary (1 failure of 2: still selectable), hangs
/// at the black hole; two seconds on (so that the next selection opens the
/// dead primary's `fail_timeout` trial) the name moves, and the session is
/// refused at the black hole too. Its retry re-snapshots, and the fresh
/// state offers the dead primary again (its weight dominates); it was
/// tried, so it is handed back as an attempt never made: no `upstream
/// server temporarily disabled` line (as failed, it counted the one
/// failure twice), and its failure kept (freed as not failed with the
/// trial open, round-robin's `free` forgot it). The session reaches the backup at its
/// new address; the next one tries the dead primary, its second failure,
/// said in that line (the black hole has `max_fails=0`: the line is the
/// dead primary's alone). The patched nginx hands back the same way
/// (`NGX_PEER_NEXT`, the check undone), and its twin is held to the same
/// expectations; it failed on the series that handed back as failed (the
/// line at the rescue, the next session never at the dead primary).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_primary_handed_back_is_neither_failed_again_nor_revived() {
    dead_primary_handed_back(Flavor::with_module()).await;
}

/// Non-regression guard: the patched nginx, without the module.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patched_nginx_keeps_a_handed_back_dead_primary_dead() {
    dead_primary_handed_back(Flavor::patched()).await;
}

async fn dead_primary_handed_back(flavor: Flavor) {
    let module = flavor.module.is_some();
    // Refused: nothing listens on port 1 (the harness never binds it).
    let dead_port = 1;
    let mut spec = StreamSpec::new(flavor, 1);
    spec.pre = format!("server {HOLE}:{dead_port} weight=100 max_fails=2 fail_timeout=1s;");
    spec.primary = "max_fails=0".into();
    spec.peers = 3;
    if module {
        spec.top = "generation_retry_resnapshot on;".into();
    }
    let mut lab = StreamLab::start(spec).await;
    let addr = lab.addr(0);
    let session = Session::open(addr, b"first".to_vec()).await;
    // Refused at the dead primary (said in the log before the retry, in
    // the same handler), the session hangs at the black hole.
    let refused = format!("upstream: \"{HOLE}:{dead_port}\"");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !lab
        .nginx
        .error_log()
        .lines()
        .any(|l| l.contains("refused") && l.contains(&refused))
    {
        assert!(Instant::now() < deadline, "{}", lab.nginx.error_log());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // nginx's clock counts seconds: two on, the fresh state's selection
    // finds the failure more than fail_timeout old.
    tokio::time::sleep(Duration::from_millis(2200)).await;
    let since = Instant::now();
    lab.dns.set_a(NAME, NEW);
    lab.dns
        .wait_answered(NAME, &Answer::A(vec![NEW]), since, Duration::from_secs(10))
        .await
        .unwrap();
    // A round trip through the worker: it has applied the answer.
    lab.http.get("/applied").await;
    lab.hole.close();
    // Refused at the connect's next SYN retransmission: up to about 15 s
    // after the two-second wait.
    let reply = session
        .reply(patience(Duration::from_secs(20)))
        .await
        .unwrap();
    let log = lab.nginx.error_log();
    assert_eq!(
        reply.split(),
        Some((NEW, &b"first"[..])),
        "the session was not rescued to the backup: {reply:?}\n{log}"
    );
    let disabled = log
        .lines()
        .filter(|l| l.contains("upstream server temporarily disabled"))
        .count();
    assert_eq!(
        disabled, 0,
        "the dead primary's failures at the rescue:\n{log}"
    );

    let next = Session::open(addr, b"next".to_vec()).await;
    let reply = next.reply(Duration::from_secs(10)).await.unwrap();
    let entry = lab.stream_entry(addr.port(), reply.port).await;
    let log = lab.nginx.error_log();
    assert!(
        entry.upstream_addr.contains(&format!("{HOLE}:{dead_port}")),
        "the next session and the dead primary: {entry:?}\n{log}"
    );
    let disabled = log
        .lines()
        .filter(|l| l.contains("upstream server temporarily disabled"))
        .count();
    assert_eq!(disabled, 1, "the dead primary's second failure:\n{log}");
    if module {
        let s = lab.status("stream", "be0").await;
        // Both primaries were tried and both are offered again by the
        // fresh state before its backup: both handed back.
        assert_eq!(
            (s.count(Counter::Rescued), s.count(Counter::Excluded)),
            (1, 2),
            "{s}"
        );
    }
    lab.finish();
}

/// Non-regression guard: a check of the shared object's symbols, not of its
/// behaviour.
#[test]
fn the_shared_object_needs_no_stream_symbol_of_nginx() {
    // What lets one .so load into an nginx built without --with-stream, or
    // before a dynamic stream module: the stream module finds nginx's stream
    // upstream module by name at configuration time instead of linking it.
    let so = Flavor::with_module().module.expect("module path");
    let out = std::process::Command::new("nm")
        .args(["-D", "--undefined-only"])
        .arg(&so)
        .output()
        .expect("run nm (binutils)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let undefined = String::from_utf8_lossy(&out.stdout);
    assert!(
        undefined.contains("ngx_shared_memory_add"),
        "nm saw none of nginx's symbols: {undefined}"
    );
    let stream: Vec<&str> = undefined
        .lines()
        .filter(|l| l.contains("ngx_stream"))
        .collect();
    assert!(stream.is_empty(), "stream symbols needed: {stream:?}");
}

/// A connection on `addr` that read its greeting: the backend's address,
/// and the connection, held open until dropped.
async fn greeted(addr: std::net::SocketAddr) -> (String, tokio::net::TcpStream) {
    use tokio::io::AsyncBufReadExt;
    let s = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connect to nginx");
    let mut r = tokio::io::BufReader::new(s);
    let mut line = String::new();
    tokio::time::timeout(std::time::Duration::from_secs(5), r.read_line(&mut line))
        .await
        .expect("a greeting in time")
        .expect("read the greeting");
    (line.trim().to_string(), r.into_inner())
}

/// The balancer's connect notification goes through the wrapper: stream
/// round-robin clears a recovered peer's failures when a connection to it
/// is established (its `notify`), not only when the session ends. Peer A
/// (`max_fails=1 fail_timeout=1s`) is refused once, so it is disabled; it
/// comes back, and once a session reaches it again (the check after
/// `fail_timeout`, held open), the sessions that follow are shared with it
/// at once. Had the notification not reached round-robin, A would still
/// count one failure while that session lasts and get none of them.
///
/// Non-regression guard: without the wrapper round-robin gets the notification
/// directly; the test shows the wrapper forwards it (cargo xtask mutants:
/// notify-not-forwarded).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_connect_notification_reaches_the_balancer() {
    use generation_retry_t::actors::tcp::EchoBackend;
    use generation_retry_t::nginx::{free_port_at, Config, Nginx};
    use std::net::{Ipv4Addr, SocketAddr};

    let a_ip = Ipv4Addr::new(127, 0, 0, 5);
    // Held, not listening: refused until the test listens there.
    let a = SocketAddr::from((a_ip, free_port_at(a_ip)));
    let backend = EchoBackend::start().await;
    let stream = format!(
        "upstream sbe {{\n        zone sbe 64k;\n        \
         server {a} max_fails=1 fail_timeout=1s;\n        \
         server 127.0.0.4:{};\n        generation_retry_resnapshot on;\n    }}\n    \
         server {{ listen 127.0.0.1:${{PORT}}; proxy_pass sbe; proxy_connect_timeout 2s; }}\n",
        backend.port()
    );
    let nginx = Nginx::start(&Config::new(Flavor::with_module(), "").stream(stream));
    let addr = nginx.addr();

    // A refuses: disabled, and each such session is answered by B.
    for _ in 0..4 {
        let (from, _) = greeted(addr).await;
        assert_eq!(from, "127.0.0.4");
        if nginx
            .error_log()
            .contains("upstream server temporarily disabled")
        {
            break;
        }
    }
    assert!(
        nginx
            .error_log()
            .contains("upstream server temporarily disabled"),
        "A was never tried:\n{}",
        nginx.error_log()
    );

    // A is back; the first session to reach it after fail_timeout is held.
    let listener = tokio::net::TcpListener::bind(a).await.expect("listen on A");
    let accept = tokio::spawn(async move {
        use tokio::io::AsyncWriteExt;
        let mut held = Vec::new();
        while let Ok((mut s, _)) = listener.accept().await {
            let _ = s.write_all(b"127.0.0.5\n").await;
            held.push(s); // open until the test ends
        }
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let check = loop {
        let (from, conn) = greeted(addr).await;
        if from == "127.0.0.5" {
            break conn;
        }
        assert!(std::time::Instant::now() < deadline, "A never came back");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };

    // With the check's session still open: shared between A and B.
    let mut on_a = 0;
    let mut conns = Vec::new();
    for _ in 0..6 {
        let (from, conn) = greeted(addr).await;
        on_a += usize::from(from == "127.0.0.5");
        conns.push(conn);
    }
    assert!(
        on_a >= 2,
        "{on_a} of 6 sessions reached A while the check's session was open: \
         its failure was not cleared at connect (notify lost)\n{}",
        nginx.error_log()
    );
    drop((check, conns));
    accept.abort();
    nginx.finish();
}
