//! The counters zone holds every upstream, however many, by its full name
//! compared as nginx compares upstream names, and frees the counters of
//! upstreams that left the configuration once no worker can count into
//! them.

use std::time::{Duration, Instant};

use generation_retry_t::actors::backend::{Backend, ADDR_A};
use generation_retry_t::actors::load::Client;
use generation_retry_t::nginx::{free_port, Config, Flavor, Nginx};
use generation_retry_t::scoring::errorlog::{zone_freed, zone_usage};
use generation_retry_t::scoring::metrics::{log, Counter, StatusExt};
use generation_retry_t::shared::KEEPALIVE_LOCATION;

/// The status endpoint's JSON.
async fn status(client: &Client) -> serde_json::Value {
    let r = client.get("/status?format=json").await;
    assert_eq!(r.status(), 200, "{r:?}");
    serde_json::from_str(&r.body).expect("status JSON")
}

/// The upstream object named `name` of `protocol`.
fn upstream<'a>(s: &'a serde_json::Value, protocol: &str, name: &str) -> &'a serde_json::Value {
    s["upstreams"]
        .as_array()
        .and_then(|a| {
            a.iter()
                .find(|u| u["protocol"] == protocol && u["upstream"] == name)
        })
        .unwrap_or_else(|| panic!("no {protocol} upstream {name}"))
}

/// The `status` server and, for each `(location, upstream)`, a location
/// proxying to it.
fn server(locations: &[(&str, &str)]) -> String {
    let locations: String = locations
        .iter()
        .map(|(l, u)| {
            format!("location = {l} {{ proxy_pass http://{u}; {KEEPALIVE_LOCATION} }}\n        ")
        })
        .collect();
    format!(
        "server {{\n        listen 127.0.0.1:${{PORT}};\n        \
         location = /status {{ generation_retry_status; }}\n        {locations}}}"
    )
}

/// An upstream whose two peers refuse (nothing listens on port 1): its
/// first request fails both (`max_fails=1`; a single peer is never
/// disabled), its second finds no live peer and is counted `no_live`
/// `unavailable`.
fn refusing(name: &str) -> String {
    format!(
        "upstream {name} {{ zone shared 1m; server 127.0.0.2:1 max_fails=1 fail_timeout=60s; \
         server 127.0.0.3:1 max_fails=1 fail_timeout=60s; generation_retry_resnapshot on; }}\n    "
    )
}

/// `upstreams` (with `location` to one of them), and if `old`, upstream
/// `old_only` at `/old` too: a configuration and the next one, which
/// drops `old_only`.
fn with_old_only(upstreams: String, location: (&str, &str), old: bool) -> String {
    let mut h = upstreams;
    let mut locations = vec![location];
    if old {
        h.push_str(&refusing("old_only"));
        locations.push(("/old", "old_only"));
    }
    h + &server(&locations)
}

/// Two requests to `path`, the second of which nginx answers `no live
/// upstreams` (502).
async fn make_unavailable(client: &Client, path: &str) {
    make_502(client, path).await;
}

/// Two requests to `path`, each answered 502.
async fn make_502(client: &Client, path: &str) {
    for _ in 0..2 {
        let r = client.get(path).await;
        assert_eq!(r.status(), 502, "{path}: {r:?}");
    }
}

/// 10,000 http and 1,000 stream upstreams with a `zone`, under the directive
/// at both levels: every one is on the status page (with 512 fixed slots,
/// 512 were). Prints what a scrape costs there: its time (median of 5) and
/// size in both formats, and the zone's memory per upstream (the master's
/// resident pages of the 32 MiB zone, which is mapped, not committed).
///
/// Non-regression guard: the zone gives every upstream its counters at
/// configuration, whether or not a selection is ever wrapped; this is about
/// room and names, not rescues.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_upstream_is_counted_however_many() {
    const HTTP: usize = 10_000;
    const STREAM: usize = 1_000;
    let mut http = String::from("generation_retry_resnapshot on;\n    ");
    for i in 0..HTTP {
        http.push_str(&format!(
            "upstream h{i} {{ zone http_peers 48m; server 127.0.0.2:1; }}\n    "
        ));
    }
    http.push_str(&server(&[]));
    let mut stream = String::from("generation_retry_resnapshot on;\n    ");
    for i in 0..STREAM {
        stream.push_str(&format!(
            "upstream s{i} {{ zone stream_peers 8m; server 127.0.0.2:1; }}\n    "
        ));
    }
    stream.push_str(&format!(
        "server {{ listen 127.0.0.1:{}; proxy_pass s0; }}\n",
        free_port()
    ));
    let started = Instant::now();
    let nginx = Nginx::start(&Config::new(Flavor::with_module(), http).stream(stream));
    let start_s = started.elapsed().as_secs_f64();
    let client = Client::new(nginx.url(""));

    let s = status(&client).await;
    let listed = s["upstreams"].as_array().expect("upstreams");
    let count = |p: &str| listed.iter().filter(|u| u["protocol"] == p).count();
    assert_eq!((count("http"), count("stream")), (HTTP, STREAM));
    for (p, name) in [("http", "h0"), ("http", "h9999"), ("stream", "s999")] {
        assert_eq!(upstream(&s, p, name).count(Counter::Rescued), 0);
    }
    let log = nginx.error_log();
    assert_eq!(
        zone_usage(&log).last().map(|u| u.1),
        Some(HTTP + STREAM),
        "{}",
        log.lines()
            .filter(|l| l.contains("shared zone"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(!log.contains("is full"), "a zone was full");

    let mut report = Vec::new();
    for path in ["/status", "/status?format=json"] {
        let mut times = Vec::new();
        let mut size = 0;
        for _ in 0..5 {
            let t = Instant::now();
            let r = client.get(path).await;
            times.push(t.elapsed().as_secs_f64() * 1000.0);
            assert_eq!(r.status(), 200);
            size = r.body.len();
        }
        times.sort_by(f64::total_cmp);
        report.push(format!(
            "{path}: {size} bytes, median {:.1} ms (min {:.1}, max {:.1})",
            times[2], times[0], times[4]
        ));
    }
    let rss = generation_retry_t::scenarios::soak::zone_kib(nginx.pid());
    assert!(rss > 0, "no resident 32 MiB zone in the master");
    eprintln!(
        "{HTTP} http + {STREAM} stream upstreams: nginx up in {start_s:.1} s; {}; \
         zone resident in the master {rss} KiB, {:.0} bytes per upstream",
        report.join("; "),
        (rss * 1024) as f64 / (HTTP + STREAM) as f64
    );
    nginx.finish();
}

/// Names are matched in full: two upstreams whose 300-byte names differ
/// only in their last byte have counters of their own (matched on 248
/// bytes, they shared one). And without regard to case, as nginx matches
/// them: an upstream renamed `Mixed_Case` to `MIXED_case` by a reload is
/// the same upstream, and its counters go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_are_matched_in_full_and_as_nginx_compares_them() {
    let long = "x".repeat(299);
    let (a, b) = (format!("{long}a"), format!("{long}b"));
    let http = |mixed: &str| {
        format!(
            "{}{}{}{}",
            refusing(&a),
            refusing(&b),
            refusing(mixed),
            server(&[("/a", &a), ("/b", &b), ("/mixed", mixed)])
        )
    };
    let nginx = Nginx::start(&Config::new(Flavor::with_module(), http("Mixed_Case")));
    let client = Client::new(nginx.url(""));
    make_unavailable(&client, "/a").await;
    make_unavailable(&client, "/mixed").await;
    let s = status(&client).await;
    assert_eq!(
        upstream(&s, "http", &a).count(Counter::NoLiveUnavailable),
        1
    );
    assert_eq!(
        upstream(&s, "http", &b).count(Counter::NoLiveUnavailable),
        0
    );
    assert_eq!(
        upstream(&s, "http", "Mixed_Case").count(Counter::NoLiveUnavailable),
        1
    );

    // Our keepalive connection would keep the old worker: if the reload
    // lands before nginx marks it idle, the worker waits for it until
    // keepalive_timeout (75 s), past reconfigure's 20 s wait.
    drop(client);
    nginx.reconfigure(&Config::new(Flavor::with_module(), http("MIXED_case")));
    let client = Client::new(nginx.url(""));
    let s = status(&client).await;
    assert_eq!(
        upstream(&s, "http", "MIXED_case").count(Counter::NoLiveUnavailable),
        1
    );
    assert_eq!(
        upstream(&s, "http", &a).count(Counter::NoLiveUnavailable),
        1
    );
    nginx.finish();
}

/// The counters of an upstream that only an old configuration has stay
/// while a worker of that configuration still runs (draining a request
/// the backend holds), through four reloads, although the fixed window
/// keeps only the two configurations before the new one; once that worker
/// has exited, the next reload frees them. The worker table at work: each
/// worker records its configuration, the master keeps what a live one may
/// count into.
///
/// Non-regression guard: the zone keeps and frees counters at
/// configuration, whether or not a selection is ever wrapped; the
/// mutants worker-not-recorded and live-workers-ignored are what it
/// catches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_worker_still_running_keeps_its_upstreams_counters() {
    let backend = Backend::start().await;
    let http = |old: bool| {
        let h = format!(
            "upstream stays {{ zone shared 1m; server {ADDR_A}:{}; keepalive 4; \
             generation_retry_resnapshot on; }}\n    ",
            backend.port()
        );
        with_old_only(h, ("/hold", "stays"), old)
    };
    let nginx = Nginx::start(&Config::new(Flavor::with_module(), http(true)));
    let client = Client::new(nginx.url(""));
    make_unavailable(&client, "/old").await;
    // A kept-alive connection to the backend, which holds the next request
    // on it.
    assert_eq!(client.get("/hold").await.status(), 200);
    let hold = backend.arm_hold();
    let held_client = Client::without_keepalive(nginx.url(""));
    let request = tokio::spawn(async move { held_client.get("/hold").await });
    let held = hold
        .caught(Duration::from_secs(10))
        .await
        .expect("the request held on the first configuration's worker");

    let freed = |nginx: &Nginx| zone_freed(&nginx.error_log());
    for reload in 1..=4 {
        nginx.reconfigure_while_draining(&Config::new(Flavor::with_module(), http(false)));
        // The master has set the zone up for this configuration (its
        // line is logged): a worker of the one before may still answer
        // until it closes its listeners (seen in a clean-clone run).
        let deadline = Instant::now() + Duration::from_secs(10);
        while freed(&nginx).len() < reload + 1 {
            assert!(Instant::now() < deadline, "{}", nginx.error_log());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Served by the new worker: it is past its init_process, recorded.
        let fresh = Client::without_keepalive(nginx.url(""));
        assert_eq!(fresh.get("/status").await.status(), 200);
    }
    assert_eq!(
        freed(&nginx),
        [0, 0, 0, 0, 0],
        "counters freed while a worker that has them still runs"
    );
    held.close();
    let _ = request.await;
    drop(client);
    // The first worker exits once its request is done; then a reload frees
    // old_only's counters.
    nginx.reconfigure(&Config::new(Flavor::with_module(), http(false)));
    assert_eq!(freed(&nginx).last(), Some(&1), "{:?}", freed(&nginx));
    nginx.finish();
}

/// Rename-and-reload cycles do not use the zone up: each reload renames
/// all 100 upstreams, and once the old workers have exited, the next
/// reload frees their counters, so the zone holds at most three
/// configurations' upstreams (this one's and the two before it, kept
/// whatever the workers say) and never the sum of all (3,000 after 30
/// cycles, as when slots were never freed). An upstream that stays keeps
/// its counters through every reload.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renamed_upstreams_are_freed_and_staying_ones_keep_counting() {
    const RENAMED: usize = 100;
    const CYCLES: usize = 30;
    let http = |cycle: usize| {
        let mut h = refusing("stays");
        for i in 0..RENAMED {
            h.push_str(&format!(
                "upstream c{cycle}_{i} {{ zone shared 1m; server 127.0.0.2:1; \
                 generation_retry_resnapshot on; }}\n    "
            ));
        }
        h + &server(&[("/stays", "stays")])
    };
    let nginx = Nginx::start(&Config::new(Flavor::with_module(), http(0)));
    let client = Client::new(nginx.url(""));
    make_unavailable(&client, "/stays").await;
    // As in names_are_matched_in_full_and_as_nginx_compares_them: no
    // keepalive connection of ours may hold the old worker.
    drop(client);
    let mut peak = 0;
    for cycle in 1..=CYCLES {
        // Reloads and waits until the old worker has exited, so the next
        // reload may free this configuration's predecessors.
        nginx.reconfigure_served(&Config::new(Flavor::with_module(), http(cycle)));
        let usage = zone_usage(&nginx.error_log());
        assert_eq!(usage.len(), cycle + 1, "{usage:?}");
        peak = peak.max(usage.last().unwrap().1);
    }
    let usage = zone_usage(&nginx.error_log());
    assert_eq!(usage.len(), CYCLES + 1, "{usage:?}");
    assert!(
        peak <= 3 * RENAMED + 1,
        "the zone held counters of {peak} upstreams: renamed ones are not freed \
         ({usage:?})"
    );
    let client = Client::new(nginx.url(""));
    let s = status(&client).await;
    assert_eq!(
        upstream(&s, "http", "stays").count(Counter::NoLiveUnavailable),
        1
    );
    // And it goes on counting: the second of two requests finds no live
    // peer again (the reload gave the peer a fresh state).
    make_502(&client, "/stays").await;
    let s = status(&client).await;
    assert!(upstream(&s, "http", "stays").count(Counter::NoLiveUnavailable) >= 2);
    nginx.finish();
}

/// A reload that fails after the zone was set up: the new configuration
/// adds upstream `ghost` and a `listen` on a port this test holds, so
/// nginx sets up the shared zones (the module takes `ghost`'s counters for
/// configuration 2) and then fails to bind, at `emerg`, keeping the
/// running configuration. That configuration keeps counting; `ghost`,
/// which no worker ever ran, has no status object, and its counters are
/// freed by the third successful reload after it, as any configuration's
/// (the two before a new one are kept whatever the workers say).
///
/// The one test whose log is expected to hold an `[emerg]`: the bind, and
/// nginx's `still could not bind()`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_reload_leaves_counting_alone_and_its_counters_are_freed_later() {
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = held.local_addr().unwrap().port();
    let http = |ghost: bool| {
        let mut h = refusing("stays");
        let mut locations = vec![("/stays", "stays")];
        if ghost {
            h.push_str(&refusing("ghost"));
            locations.push(("/ghost", "ghost"));
        }
        h.push_str(&server(&locations));
        if ghost {
            h.push_str(&format!(
                "\n    server {{ listen 127.0.0.1:{taken}; location / {{ return 204; }} }}"
            ));
        }
        h
    };
    let nginx = Nginx::start(&Config::new(Flavor::with_module(), http(false)));
    let client = Client::new(nginx.url(""));
    make_unavailable(&client, "/stays").await;
    let s = status(&client).await;
    assert_eq!(
        upstream(&s, "http", "stays").count(Counter::NoLiveUnavailable),
        1
    );

    // The failing reload.
    let bind = format!("bind() to 127.0.0.1:{taken} failed");
    nginx.reconfigure_failing(&Config::new(Flavor::with_module(), http(true)), &bind);
    let usage = zone_usage(&nginx.error_log());
    assert_eq!(
        usage.iter().map(|u| u.1).collect::<Vec<_>>(),
        [1, 2],
        "the failed reload's setup took ghost's counters: {usage:?}"
    );

    // The running configuration keeps counting, and shows no ghost.
    assert_eq!(client.get("/stays").await.status(), 502);
    let s = status(&client).await;
    assert_eq!(
        upstream(&s, "http", "stays").count(Counter::NoLiveUnavailable),
        2
    );
    assert!(
        !s["upstreams"]
            .as_array()
            .unwrap()
            .iter()
            .any(|u| u["upstream"] == "ghost"),
        "{s}"
    );
    drop(client);

    // Three good reloads: the third frees ghost's counters.
    for _ in 0..3 {
        nginx.reconfigure_served(&Config::new(Flavor::with_module(), http(false)));
    }
    let usage = zone_usage(&nginx.error_log());
    assert_eq!(
        usage.iter().map(|u| u.1).collect::<Vec<_>>(),
        [1, 2, 2, 2, 1],
        "ghost's counters kept while a configuration that may have them is in the window, \
         then freed: {usage:?}"
    );
    let client = Client::new(nginx.url(""));
    let s = status(&client).await;
    assert_eq!(
        upstream(&s, "http", "stays").count(Counter::NoLiveUnavailable),
        2
    );
    drop(client);
    drop(held);
    // nginx tries the bind five times, then says it gave up.
    nginx.finish_expecting(&[&bind, "still could not bind()"]);
}

/// The module's worker table in the master's zone, found by its header's
/// magic (`genretr2`, module/src/shm.rs) in the 32 MiB mapping and written
/// through `/proc/PID/mem`: shared memory, so every nginx process sees the
/// write. The header is `magic, epoch, head, slots`, then 1,024 entries of
/// `pid: i64, epoch: u64`.
struct WorkerTable {
    mem: std::path::PathBuf,
    at: u64,
}

impl WorkerTable {
    const ENTRIES: usize = 1024;

    fn find(pid: libc::pid_t) -> WorkerTable {
        use std::io::{Read, Seek, SeekFrom};
        let (start, end) = generation_retry_t::scenarios::soak::zone_mapping(pid)
            .expect("no 32 MiB mapping in the master");
        let mem = std::path::PathBuf::from(format!("/proc/{pid}/mem"));
        let mut f = std::fs::File::open(&mem).expect("open mem");
        f.seek(SeekFrom::Start(start)).unwrap();
        let mut zone = vec![0u8; (end - start) as usize];
        f.read_exact(&mut zone).expect("read the zone");
        let magic = u64::from_le_bytes(*b"2rterneg");
        let found: Vec<usize> = (0..zone.len() / 8)
            .map(|i| i * 8)
            .filter(|&o| u64::from_le_bytes(zone[o..o + 8].try_into().unwrap()) == magic)
            .collect();
        assert_eq!(
            found.len(),
            1,
            "the module's zone header, by its magic: {found:?}"
        );
        WorkerTable {
            mem,
            at: start + found[0] as u64 + 32,
        }
    }

    /// Every entry set to `pid` at configuration `epoch`.
    fn fill(&self, pid: i64, epoch: u64) {
        use std::io::{Seek, SeekFrom, Write};
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(&self.mem)
            .expect("open mem for writing");
        f.seek(SeekFrom::Start(self.at)).unwrap();
        let entry = [pid.to_le_bytes(), epoch.to_le_bytes()].concat();
        f.write_all(&entry.repeat(Self::ENTRIES))
            .expect("write the table");
    }
}

/// A full worker table: every entry taken by a live process that is no
/// child of the master (this test's own pid, written into the zone). The
/// next worker finds no room; at the next reload the master finds a live
/// child unrecorded, says so at `warn` with the table's size, and frees
/// nothing, though `old_only` left the configuration (its counters might
/// still be counted into by a process it cannot see). Once the table is
/// cleared, the reload after the unrecorded worker has exited frees them.
///
/// Non-regression guard: the zone keeps and frees counters at
/// configuration, whether or not a selection is ever wrapped; the mutant
/// unrecorded-workers-ignored is what it catches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_worker_table_is_said_and_frees_nothing() {
    let http = |old: bool| with_old_only(refusing("stays"), ("/stays", "stays"), old);
    let nginx = Nginx::start(&Config::new(Flavor::with_module(), http(true)));
    let client = Client::new(nginx.url(""));
    assert_eq!(client.get("/status").await.status(), 200);
    drop(client);
    let table = WorkerTable::find(nginx.pid());
    // A real table before the fill: nginx's worker recorded itself.
    table.fill(i64::from(std::process::id() as i32), 0);
    for _ in 0..3 {
        nginx.reconfigure(&Config::new(Flavor::with_module(), http(false)));
    }
    let log = nginx.error_log();
    let full = log::zone_workers_unknown("generation_retry", 1, 1024);
    let said: Vec<&str> = log.lines().filter(|l| l.contains(&full)).collect();
    assert!(
        !said.is_empty() && said.iter().all(|l| l.contains("[warn]")),
        "the full table said at warn: {said:#?}\n{log}"
    );
    let freed = zone_freed;
    assert!(
        freed(&log).iter().all(|&f| f == 0),
        "freed with the table full: {:?}",
        freed(&log)
    );

    table.fill(0, 0);
    // The running worker started while the table was full: unrecorded
    // until it exits at this reload; the one after frees old_only.
    for _ in 0..2 {
        nginx.reconfigure_served(&Config::new(Flavor::with_module(), http(false)));
    }
    let log = nginx.error_log();
    assert_eq!(freed(&log).last(), Some(&1), "{:?}", freed(&log));
    nginx.finish();
}

/// What an operator sees putting the module into a running nginx (issue
/// 40): `nginx -t` of the new configuration writes nothing of the module's
/// into the production error log (a test's zone is thrown away), and the
/// reload that loads the module says the zone's usage once, not that
/// processes "have not recorded their configuration": the old workers
/// never had the module, and a new zone holds nothing of theirs to keep or
/// free.
///
/// Non-regression guard: the zone's setup at a reload, which the peer
/// wrapper (what the do-nothing mutant leaves out) has no part in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loading_the_module_into_a_running_nginx_says_only_the_zones_usage() {
    let backend = Backend::start().await;
    let plain = format!(
        "server {{ listen 127.0.0.1:${{PORT}}; location / {{ proxy_pass http://{ADDR_A}:{}; }} }}",
        backend.port()
    );
    // Two workers: the reload finds two children without a record.
    let nginx = Nginx::start(&Config::new(Flavor::stock(), plain).workers(2));
    let with_module = Config::new(
        Flavor::with_module(),
        format!(
            "generation_retry_resnapshot on;\n    \
             upstream be {{ zone be 64k; server {ADDR_A}:{}; }}\n    {}",
            backend.port(),
            server(&[("/be", "be")])
        ),
    )
    .workers(2);
    let before = nginx.error_log();
    let tested = nginx.test_config(&with_module);
    let said = tested.stderr;
    assert!(tested.ok, "nginx -t: {said}");
    let after_test = nginx.error_log();
    assert_eq!(
        after_test
            .strip_prefix(before.as_str())
            .map(|new| new.contains("generation_retry")),
        Some(false),
        "nginx -t wrote into the running nginx's error log:\n{after_test}"
    );

    nginx.reconfigure(&with_module);
    let log = nginx.error_log();
    assert!(!log.contains("not recorded"), "{log}");
    assert_eq!(zone_usage(&log), [(1, 1)], "{log}");
    let client = Client::new(nginx.url(""));
    assert_eq!(
        upstream(&status(&client).await, "http", "be").count(Counter::Rescued),
        0
    );
    nginx.finish();
}
