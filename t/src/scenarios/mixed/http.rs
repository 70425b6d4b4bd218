//! The http side of the mixed scenario: the nine upstreams and their
//! locations in each layout, their DNS schedules, each one's share of the
//! load, and nginx's configuration around them.

use std::net::Ipv4Addr;

use super::parts::{Parts, REFUSED, RESET, WIPE_A, WIPE_B};
use super::stream::stream_config;
use super::{Layout, ACCESS_LOGS};
use crate::actors::backend::{ADDR_A, ADDR_B, ADDR_C};
use crate::actors::dns::{Answer, DnsServer};
use crate::nginx::{Config, Flavor};
use crate::rng::Rng;
use crate::shared::KEEPALIVE_LOCATION;
/// Each upstream's share of the load, in [`UPSTREAMS`] order: the races
/// need the most (a race takes a reclaimed request in flight across a
/// re-resolve).
pub(super) const SHARES: [f64; 9] = [0.22, 0.22, 0.16, 0.08, 0.10, 0.05, 0.05, 0.06, 0.06];

/// The `upstream` blocks and the locations of `layout`.
fn upstreams(layout: Layout, p: &Parts) -> (String, String) {
    let [m1, m2, mn] = [p.moving[0].port(), p.moving[1].port(), p.moving[2].port()];
    let [c0, c1] = p.closed;
    let held = layout == Layout::HeldOut;
    let wipe = if held {
        // Held out: the wiped peers come from a name.
        format!("server wipe.test:{c0} resolve max_fails=1 fail_timeout=3s;")
    } else {
        format!(
            "server {WIPE_A}:{c0} max_fails=1 fail_timeout=2s;\n        \
             server {WIPE_B}:{c0} max_fails=1 fail_timeout=2s;"
        )
    };
    let conns = if held {
        format!(
            "server {ADDR_A}:{p} max_conns=1;\n        server {ADDR_B}:{p} max_conns=1;",
            p = p.conns.port()
        )
    } else {
        format!("server {ADDR_C}:{} max_conns=1;", p.conns.port())
    };
    let down = if held {
        format!(
            "server {ADDR_A}:{c1} down;\n        server {ADDR_B}:{c1} down;\n        \
             server {ADDR_C}:{c1} down;"
        )
    } else {
        format!("server {ADDR_C}:{c1} down;")
    };
    // A reclaimed request counts as a failure of its peer: with the
    // default `max_fails=1` the reclaims alone would keep move2's peers
    // out of service most of the time.
    let move2_fails = if held {
        "max_fails=3 fail_timeout=2s"
    } else {
        "max_fails=0"
    };
    let (slow, slow_location) = if held {
        (
            format!("server {}:{};", crate::actors::tcp::HOLE, p.hole.port()),
            "proxy_connect_timeout 300ms;",
        )
    } else {
        (
            format!("server {ADDR_A}:{};", p.slow.port()),
            "proxy_read_timeout 300ms;",
        )
    };
    let servers: [(&str, String, &str); 9] = [
        (
            "move1",
            format!("server move1.test:{m1} resolve;\n        keepalive 16;"),
            KEEPALIVE_LOCATION,
        ),
        (
            "move2",
            format!("server move2.test:{m2} resolve {move2_fails};\n        keepalive 16;"),
            KEEPALIVE_LOCATION,
        ),
        (
            "nx",
            format!("server nx.test:{mn} resolve;\n        keepalive 16;"),
            KEEPALIVE_LOCATION,
        ),
        ("wipe", wipe, ""),
        ("conns", conns, ""),
        ("down", down, ""),
        ("refused", format!("server {REFUSED}:{c1} max_fails=0;"), ""),
        ("slow", slow, slow_location),
        ("reset", format!("server {RESET}:{};", p.reset.port), ""),
    ];
    let mut blocks = String::new();
    let mut locations = String::new();
    for (name, servers, location) in servers {
        blocks.push_str(&format!(
            "    upstream {name} {{\n        zone {name} 64k;\n        {servers}\n    }}\n"
        ));
        locations.push_str(&format!(
            "        location /{name}/ {{\n            proxy_pass http://{name};\n            \
             {location}\n        }}\n"
        ));
    }
    (blocks, locations)
}

/// The DNS schedules once the load starts (before it, every name answers
/// its first address, so the readiness probes pass).
pub(super) fn schedules(layout: Layout, dns: &DnsServer) {
    let a = |ips: &[Ipv4Addr]| Answer::A(ips.to_vec());
    let (move1, move2, nx) = match layout {
        Layout::Tuning => (
            Answer::rotate(&[ADDR_A, ADDR_B]),
            Answer::Cycle(vec![a(&[ADDR_A, ADDR_B]), a(&[ADDR_B, ADDR_C])]),
            Answer::Cycle(vec![a(&[ADDR_A]), a(&[ADDR_B]), Answer::NxDomain]),
        ),
        Layout::HeldOut => (
            Answer::rotate(&[ADDR_A, ADDR_B, ADDR_C]),
            Answer::Cycle(vec![
                a(&[ADDR_A, ADDR_B, ADDR_C]),
                a(&[ADDR_A]),
                a(&[ADDR_B, ADDR_C]),
            ]),
            Answer::Cycle(vec![
                a(&[ADDR_A]),
                Answer::NxDomain,
                a(&[ADDR_C]),
                a(&[ADDR_B]),
                Answer::NxDomain,
            ]),
        ),
    };
    dns.set("move1.test", move1);
    dns.set("move2.test", move2);
    dns.set("nx.test", nx);
}

/// nginx's configuration: the module in observe mode for every upstream,
/// one resolver, the three access logs.
pub(super) fn config(layout: Layout, p: &Parts) -> Config {
    let (blocks, locations) = upstreams(layout, p);
    let http = format!(
        r#"
    resolver ${{DNS}} valid=1s ipv6=off;
    resolver_timeout 3s;
    generation_retry_resnapshot off;
    log_format no_request_time '$msec $status "$upstream_addr" "$request" "$upstream_status"';
    log_format combined_upstream '$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" "$upstream_addr"';
    access_log ${{PREFIX}}/logs/{nrt} no_request_time;
    access_log ${{PREFIX}}/logs/{comb} combined_upstream;
{blocks}
    server {{
        listen 127.0.0.1:${{PORT}};
{locations}
        location = /status {{
            generation_retry_status;
        }}
    }}
"#,
        nrt = ACCESS_LOGS[1].0,
        comb = ACCESS_LOGS[2].0,
    );
    Config::new(Flavor::with_module(), http)
        .stream(stream_config(layout, p))
        .var("DNS", p.dns.addr())
        .workers(2)
}

/// An upstream's index, drawn by [`SHARES`].
pub(super) fn pick(rng: &mut Rng) -> usize {
    let mut u = rng.unit();
    for (k, share) in SHARES.iter().enumerate() {
        if u < *share {
            return k;
        }
        u -= share;
    }
    SHARES.len() - 1
}
