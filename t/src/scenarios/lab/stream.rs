//! The stream arms: TCP sessions at `opts.rate` through an upstream whose
//! primaries are four dead peers (black holes on 127.0.0.2: connects time
//! out after 2 s, then the session retries) and whose backup `tcp.test`
//! swaps between 127.0.0.3 and 127.0.0.4 at every re-resolve. After a
//! failure nginx sends one session per `fail_timeout=1s` to probe each dead
//! peer; a session fails when its retry meets a changed generation. No
//! POSTs and no reclaim: the fault is the dead peers.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use super::{
    module_status, open_loop, summarise, Arm, ArmResult, Arrivals, Baseline, Logs, Observed,
    Options, Outcome, Posts,
};
use crate::actors::dns::DnsServer;
use crate::actors::load::Client;
use crate::actors::tcp::{BlackHole, EchoBackend, Session, NEW, OLD};
use crate::memcheck;
use crate::nginx::{free_port, Config, Nginx};
use crate::scenarios::stream::NAME;
use crate::scoring::accesslog::{parse_upstream_addr, Entry};
use crate::scoring::streamlog::{parse_stream_log, StreamEntry};
use crate::shared::{status_server, UPSTREAM};

/// Dead primaries of the upstream.
const HOLES: usize = 4;

pub(super) async fn run(
    arm: Arm,
    opts: &Options,
    progress: impl Fn(f64) + Send + Sync + 'static,
) -> ArmResult {
    let dns = DnsServer::start().await;
    dns.set_a(NAME, OLD);
    let backend = EchoBackend::start().await;
    let mut holes = Vec::new();
    for _ in 0..HOLES {
        holes.push(BlackHole::start().await);
    }
    let sport = free_port();
    let nginx = Nginx::start(&config(arm, opts, &dns, &backend, &holes, sport));
    let client = Client::new(nginx.url(""));
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, sport));
    wait_ready(addr).await;
    let baseline = Baseline::take(arm, &client, &nginx, "stream").await;
    if let Some(schedule) = arm.row().dns.schedule(OLD, NEW) {
        dns.set(NAME, schedule);
    }

    let (start_wall, outcomes) =
        open_loop(opts, &nginx, Arrivals::Seeded, progress, |i| async move {
            let payload = format!("session {i}\n").into_bytes();
            let t0 = Instant::now();
            let s = Session::open(addr, payload.clone()).await;
            let reply = s.reply(Duration::from_secs(10)).await;
            let ok = reply
                .as_ref()
                .is_ok_and(|r| r.split().is_some_and(|(_, echoed)| echoed == &payload[..]));
            Outcome {
                ok,
                retryable: true,
                latency: t0.elapsed(),
            }
        })
        .await;

    let status = module_status(arm, &client, "stream").await;
    let logged = logged_sessions(&nginx, outcomes.len(), start_wall).await;
    let error_log = nginx.error_log();
    let swaps = dns.swaps(NAME);
    nginx.finish();

    summarise(
        arm,
        Observed {
            outcomes,
            status_502: logged.iter().filter(|e| e.status == 502).count(),
            entries: logged.iter().map(as_entry).collect(),
            error_log,
            baseline,
            swaps,
            start_wall,
            status,
            posts: Posts::default(),
            logs: Logs::default(),
        },
    )
}

/// nginx's configuration for `arm`: the stream upstream of dead primaries
/// and the re-resolving backup, and the status server.
fn config(
    arm: Arm,
    opts: &Options,
    dns: &DnsServer,
    backend: &EchoBackend,
    holes: &[BlackHole],
    sport: u16,
) -> Config {
    let primaries: String = holes
        .iter()
        .map(|h| format!("server 127.0.0.2:{} fail_timeout=1s;\n        ", h.port()))
        .collect();
    let top = arm
        .resnapshot()
        .map(|v| format!("generation_retry_resnapshot {v};"))
        .unwrap_or_default();
    let stream = format!(
        "    {top}\n    upstream {UPSTREAM} {{\n        zone {UPSTREAM} 64k;\n        \
         resolver ${{DNS}} valid={}s ipv6=off;\n        {primaries}\
         server {NAME}:{} resolve backup;\n    }}\n    \
         server {{\n        listen 127.0.0.1:{sport};\n        proxy_pass {UPSTREAM};\n        \
         proxy_connect_timeout 2s;\n        proxy_half_close on;\n    }}\n",
        opts.valid,
        backend.port()
    );
    Config::new(arm.flavor(), status_server(arm.resnapshot().is_some()))
        .stream(stream)
        .var("DNS", dns.addr())
}

/// Ready: the backup resolved and reachable (a session answered by it;
/// the first one may wait out the dead primary's timeout).
async fn wait_ready(addr: SocketAddr) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let s = Session::open(addr, b"ready".to_vec()).await;
        let r = s.reply(Duration::from_secs(12)).await;
        if r.as_ref()
            .is_ok_and(|r| r.split() == Some((OLD, &b"ready"[..])))
        {
            return;
        }
        assert!(Instant::now() < deadline, "stream never ready: {r:?}");
    }
}

/// The stream log's lines of the load's `sessions` (those that ended from
/// `start_wall` on). nginx logs a session when it closes; the client gives
/// up on a session after 10 s, but nginx may still be connecting to a dead
/// primary then (2 s each, then the backup), so the last lines get up to
/// [`TAIL`] more.
async fn logged_sessions(nginx: &Nginx, sessions: usize, start_wall: f64) -> Vec<StreamEntry> {
    let deadline = Instant::now() + memcheck::patience(TAIL);
    loop {
        let entries: Vec<StreamEntry> = parse_stream_log(&nginx.stream_log())
            .into_iter()
            .filter(|e| e.msec >= start_wall)
            .collect();
        if entries.len() >= sessions || Instant::now() >= deadline {
            return entries;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// How long after the load's last session ends on the client's side its
/// log line may come: every dead primary's connect timeout and the
/// backup's answer.
const TAIL: Duration = Duration::from_secs(2 * HOLES as u64 + 4);

/// A session's log line as an access log entry: its `$upstream_addr` has
/// the same shapes (`be` for a refused first selection, `ADDR, be` for a
/// refused retry).
fn as_entry(e: &StreamEntry) -> Entry {
    Entry {
        msec: e.msec,
        status: e.status,
        hops: parse_upstream_addr(&e.upstream_addr),
        method: String::new(),
        path: String::new(),
        request_time: 0.0,
        resnapshots: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scoring::accesslog::{tally, Shape};

    #[test]
    fn session_lines_take_the_access_log_shapes() {
        let log = "1|127.0.0.2:9, be|502|0|0|-|10.5|7\n\
                   2|be|502|0|0|-|11.0|7\n\
                   3|127.0.0.2:9, 127.0.0.4:8|200|5|15|0.001|12.0|7\n\
                   4|127.0.0.2:9, 127.0.0.2:10, be|502|0|0|-|13.0|7\n";
        let entries: Vec<Entry> = parse_stream_log(log).iter().map(as_entry).collect();
        assert_eq!(entries[0].shape(), Shape::TwoHop { attempts: 1 });
        assert_eq!(entries[1].shape(), Shape::OneHop);
        assert_eq!(entries[2].shape(), Shape::Other);
        assert_eq!(entries[3].msec, 13.0);
        let t = tally(&entries);
        assert_eq!((t.two_hop_502, t.one_hop_502, t.status_502), (2, 1, 3));
    }
}
