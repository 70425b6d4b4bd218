//! What a scenario starts: the configuration template ([`PROXY_HTTP`]),
//! its `upstream` lines, and the [`Spec`] that fills them in.

use crate::actors::backend::Wire;
use crate::actors::dns::Answer;
use crate::nginx::Flavor;
use crate::shared::KEEPALIVE_LOCATION;
/// The name the GSLB answers for.
pub const NAME: &str = "app.test";

/// nginx passing `/` to `upstream be` ([`UPSTREAM`]) with `${PASS}` (the
/// protocol's lines, [`Wire::pass`]: `proxy_pass ${SCHEME}://${UPSTREAM};`
/// for HTTP), whose peers
/// re-resolve through the harness DNS, and serving the module's status on
/// `/status` (`return 404` without the module). Every `${NAME}` is filled
/// by [`Lab::start_spec`] (`${UPSTREAM}` by [`Config`] itself).
///
/// [`UPSTREAM`]: crate::shared::UPSTREAM
/// [`Lab::start_spec`]: super::Lab::start_spec
/// [`Config`]: crate::nginx::Config
pub const PROXY_HTTP: &str = r#"
    ${HTTP_EXTRA}
    upstream ${UPSTREAM} {
        zone ${UPSTREAM} 128k;
        resolver ${DNS} valid=1s ipv6=off;
        resolver_timeout 3s;
        ${UPSTREAM_PRE}
        ${SERVERS}
        ${UPSTREAM_EXTRA}
    }
    server {
        listen 127.0.0.1:${PORT};
        location / {
            ${PASS}
            ${LOCATION_EXTRA}
        }
        location = /status {
            ${STATUS}
        }
        ${SERVER_EXTRA}
    }
"#;

/// The seed's setting, on loopback: one re-resolving peer and keepalive.
pub const SINGLE_PEER_SERVERS: &str = "server app.test:${BPORT} resolve;\n        keepalive 16;";

/// Two peers and no keepalive: the re-resolving one and a static one at
/// [`crate::actors::backend::ADDR_C`] (`max_fails=0` so an injected failure does
/// not take it out). A failed first attempt is retried because two peers
/// give two tries.
pub const TWO_PEERS_SERVERS: &str =
    "server app.test:${BPORT} resolve;\n        server 127.0.0.4:${BPORT} max_fails=0;";

/// nginx 1.29.7 turned upstream `keepalive` on by default (32 connections
/// per worker; not Angie, which names that version). A spec without keepalive then says `keepalive 0;`, so it
/// means the same thing on every version: a failed attempt is never on a
/// cached connection, whose failure nginx would not count as a try.
pub(super) fn without_default_keepalive(
    servers: String,
    keepalive: bool,
    pre: &str,
    extra: &str,
) -> String {
    let named = [servers.as_str(), pre, extra]
        .iter()
        .any(|t| t.contains("keepalive "));
    if keepalive || named || !crate::nginx::keepalive_by_default() {
        servers
    } else {
        format!("{servers}\n        keepalive 0;")
    }
}

/// The line the core patches of `nginx-src-patches/` log (`info`, on the
/// request's or session's connection) when they re-snapshot: the patched
/// nginx's counterpart of the module's rescue line.
pub fn patched_rescue_line(upstream: &str) -> String {
    format!("upstream \"{upstream}\" peers changed, selecting again")
}

/// What to start: nginx flavor, configuration template and its fill-ins.
#[derive(Clone, Debug)]
pub struct Spec {
    pub flavor: Flavor,
    /// The `server` (and `keepalive`) lines of `upstream be`.
    pub servers: String,
    /// Lines before the `server` lines of `upstream be` (a balancer, ...).
    pub pre: String,
    /// Lines at the end of `upstream be`.
    pub extra: String,
    /// Whether the upstream keeps connections alive (decides how the race
    /// gets its failed first attempt).
    pub keepalive: bool,
    /// Lines at http level, before the upstream.
    pub http_extra: String,
    /// Lines in the proxying location.
    pub location_extra: String,
    /// HTTPS to the backend, with `proxy_ssl_session_reuse on`.
    pub tls: bool,
    /// Run nginx under this command (see [`Config::wrapped`](crate::nginx::Config::wrapped)).
    pub wrapper: Vec<String>,
    /// Run nginx as a daemon (see [`Config::daemon`](crate::nginx::Config::daemon)).
    pub daemon: bool,
    /// How [`Lab::start_spec`](super::Lab::start_spec) knows nginx is ready.
    pub ready: Ready,
    /// The inside of a `stream {}` block beside `http {}` (none when
    /// empty; see [`Config::stream`](crate::nginx::Config::stream)).
    pub stream: String,
    /// The resolver's `valid=` seconds: 1, so that a DNS change is applied
    /// within a second; a cost measurement takes more, so that no
    /// re-resolve runs while it counts.
    pub valid: u32,
    /// The protocol between nginx and the backend.
    pub wire: Wire,
    /// DNS records set before nginx starts, given the backend's port
    /// (SRV records carry it), each `(name, answer)`: beside [`NAME`]'s
    /// A record, which one of them may replace.
    pub records: fn(u16) -> Vec<(String, Answer)>,
    /// The resolver asks AAAA records only (`ipv6=on ipv4=off`), where
    /// it asks A only (`ipv6=off`).
    pub ipv6: bool,
}

/// How a lab knows nginx holds the name's address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ready {
    /// A request was answered by the address.
    Proxying,
    /// nginx was answered the address by the DNS server (see
    /// [`Lab::wait_applied`](super::Lab::wait_applied)): for an upstream
    /// where the name is a backup, or unlikely to be picked, and no request
    /// would show it.
    Answered,
}

impl Spec {
    pub fn http_extra(mut self, lines: &str) -> Spec {
        self.http_extra = lines.into();
        self
    }

    /// A `stream {}` block with this inside, beside `http {}`.
    pub fn stream(mut self, lines: &str) -> Spec {
        self.stream = lines.into();
        self
    }

    /// HTTPS to the backend, reusing TLS sessions.
    pub fn tls(mut self) -> Spec {
        self.tls = true;
        self
    }

    /// Adds lines to the proxying location.
    pub fn location_extra(mut self, lines: &str) -> Spec {
        self.location_extra = format!("{} {lines}", self.location_extra);
        self
    }

    pub fn single_peer(flavor: Flavor, pre: &str, extra: &str) -> Spec {
        Spec {
            flavor,
            servers: SINGLE_PEER_SERVERS.into(),
            pre: pre.into(),
            extra: extra.into(),
            keepalive: true,
            http_extra: String::new(),
            location_extra: KEEPALIVE_LOCATION.into(),
            tls: false,
            wrapper: Vec::new(),
            daemon: false,
            ready: Ready::Proxying,
            stream: String::new(),
            valid: 1,
            wire: Wire::Http,
            records: |_| Vec::new(),
            ipv6: false,
        }
    }

    /// The race's setting for `wire`: [`Spec::single_peer`] with the
    /// protocol's keepalive lines where nginx keeps its connections alive,
    /// [`Spec::two_peers`] where it does not (uwsgi, SCGI: a failed first
    /// attempt is then a try, and the second peer gives the retry).
    pub fn wire(flavor: Flavor, wire: Wire, extra: &str) -> Spec {
        let mut spec = if wire.keepalive() {
            Spec {
                location_extra: wire.keepalive_location().into(),
                ..Spec::single_peer(flavor, "", extra)
            }
        } else {
            Spec::two_peers(flavor, "", extra)
        };
        spec.wire = wire;
        spec
    }

    pub fn two_peers(flavor: Flavor, pre: &str, extra: &str) -> Spec {
        Spec {
            servers: TWO_PEERS_SERVERS.into(),
            keepalive: false,
            location_extra: String::new(),
            ..Spec::single_peer(flavor, pre, extra)
        }
    }
}
