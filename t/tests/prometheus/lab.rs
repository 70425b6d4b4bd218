//! The lab the real Prometheus scrapes: the http upstreams beside `be`
//! (`obs` in observe mode, `down`, `nx`, `gone`, the odd names), their
//! locations, the stream upstreams, and a target that counts nothing.

use super::common::ODD_NAMES;

/// The second re-resolving name: `upstream obs`'s.
pub(crate) const OBS_NAME: &str = "obs.test";

/// The lab's other http upstreams (before `upstream be`): `obs` in
/// observe mode with the same faults as `be`; `down`, whose one peer is
/// marked down (cause `unavailable`); `nx`, whose name answers NXDOMAIN
/// (cause `empty`); `gone`, removed by the reload; the odd names; and a
/// server on `empty_port` whose `/status` answers 200 with nothing (an
/// endpoint that counts no upstream).
pub(crate) fn http_extra(with_gone: bool, empty_port: u16) -> String {
    let odd: String = ODD_NAMES
        .iter()
        .map(|(w, _)| {
            format!(
                "upstream {w} {{ zone others 1m; server 127.0.0.5:1; \
                 generation_retry_resnapshot on; }}\n    "
            )
        })
        .collect();
    let gone = if with_gone {
        "upstream gone { zone others 1m; server 127.0.0.5:1; generation_retry_resnapshot on; }"
    } else {
        ""
    };
    format!(
        "upstream obs {{
        zone obs 128k;
        resolver ${{DNS}} valid=1s ipv6=off;
        resolver_timeout 3s;
        server {OBS_NAME}:${{BPORT}} resolve;
        keepalive 16;
        generation_retry_resnapshot off;
    }}
    upstream down {{ zone others 1m; server 127.0.0.5:1 down; generation_retry_resnapshot on; }}
    upstream nx {{
        zone nx 64k;
        resolver ${{DNS}} valid=1s ipv6=off;
        server nx.test:${{BPORT}} resolve;
        generation_retry_resnapshot on;
    }}
    {gone}
    {odd}
    server {{
        listen 127.0.0.1:{empty_port};
        location = /status {{ default_type text/plain; return 200 \"\"; }}
    }}"
    )
}

/// Locations of `be`'s server for the other upstreams.
pub(crate) const LOCATIONS: &str = "location /obs/ { proxy_pass http://obs; \
     proxy_http_version 1.1; proxy_set_header Connection \"\"; }
        location /down/ { proxy_pass http://down; }
        location /nx/ { proxy_pass http://nx; }";

/// The lab's stream upstreams: `be` (sharing the http one's name) and the
/// odd names, unused: their series are all there is of `protocol="stream"`.
pub(crate) fn stream_upstreams() -> String {
    let mut s = String::from(
        "upstream be { zone stream_be 64k; server 127.0.0.5:1; generation_retry_resnapshot on; }\n",
    );
    for (w, _) in ODD_NAMES {
        s.push_str(&format!(
            "upstream {w} {{ zone stream_odd 1m; server 127.0.0.5:1; \
             generation_retry_resnapshot off; }}\n"
        ));
    }
    s
}
