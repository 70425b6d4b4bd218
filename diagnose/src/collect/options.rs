//! The settings of a run ([`Options`]: flags and what the configuration
//! says), and [`route_of`]: which upstream a request's location proxies to.

use std::collections::{BTreeMap, BTreeSet};

/// Settings of a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// How far around an incident to look for address changes, in
    /// milliseconds.
    pub window_ms: i64,
    /// The error log's offset east of UTC in seconds, if the operator gave
    /// it (`--error-log-utc-offset`); else the tool works it out.
    pub error_offset_s: Option<i32>,
    /// How far back failures of a peer still count (nginx's
    /// `fail_timeout`, default 10 s), in milliseconds.
    pub fail_timeout_ms: i64,
    /// `(upstream, NAME)` pairs: `upstream` has `server NAME resolve`
    /// (`--upstream-server`, or the configuration).
    pub servers: Vec<(String, String)>,
    /// `(upstream, ADDRESS)` pairs: `upstream` has `server ADDRESS` (from
    /// the configuration), so the address is its peer.
    pub peers: Vec<(String, String)>,
    /// The http locations of each `server` block of the configuration:
    /// which upstream a request's location proxies to (see [`route_of`]).
    pub routes: Vec<Vec<Route>>,
    /// `(upstream, NAME)` pairs from the configuration: like `servers`,
    /// but an upstream the logs never name is not made one of theirs.
    pub conf_servers: Vec<(String, String)>,
    /// Per upstream, its `fail_timeout` in milliseconds where the
    /// configuration gives one (the longest of its servers'), else
    /// [`Options::fail_timeout_ms`].
    pub fail_timeouts: BTreeMap<String, i64>,
    /// Per upstream, the fewest `max_fails=` of its servers where the
    /// configuration gives them (0: a failure never takes a peer out):
    /// how many peer errors within fail_timeout disable a peer.
    pub max_fails: BTreeMap<String, u32>,
    /// Upstreams the configuration gives no `resolve` server, or no
    /// `zone`: their peer list has no generation that moves, so no refusal
    /// of theirs is the generation's.
    pub static_upstreams: BTreeSet<String>,
    /// Stream listen ports and the upstream their `server` block proxies
    /// to (from the configuration; a port two blocks disagree on is left
    /// out): with `$server_port`, a session's addresses are its upstream's.
    pub stream_routes: BTreeMap<u16, String>,
    /// Upstreams with a `backup` server: a primary out of service sends
    /// nginx to the backups, so it is no sign that none was usable.
    pub with_backup: BTreeSet<String>,
    /// Per upstream with a `backup` server whose primaries are all static,
    /// those primaries (as logged): a retry they could not take was
    /// refused on the backups' list, which they are not part of.
    pub primary_peers: BTreeMap<String, BTreeSet<String>>,
    /// Whether these settings come with a configuration (`--nginx-conf`):
    /// without one, an upstream the logs never show serving has no
    /// evidence of the list it held.
    pub configured: bool,
}

impl Options {
    /// Whether `addr` is one of upstream `u`'s static primaries (see
    /// [`Options::primary_peers`]).
    pub fn is_primary(&self, u: &str, addr: &str) -> bool {
        self.primary_peers.get(u).is_some_and(|p| p.contains(addr))
    }
}

impl Default for Options {
    fn default() -> Options {
        Options {
            window_ms: 2_000,
            error_offset_s: None,
            fail_timeout_ms: 10_000,
            servers: Vec::new(),
            peers: Vec::new(),
            fail_timeouts: BTreeMap::new(),
            max_fails: BTreeMap::new(),
            static_upstreams: BTreeSet::new(),
            with_backup: BTreeSet::new(),
            stream_routes: BTreeMap::new(),
            primary_peers: BTreeMap::new(),
            routes: Vec::new(),
            conf_servers: Vec::new(),
            configured: false,
        }
    }
}

/// An http `location` of one `server` block: its modifier (`""`, `=`,
/// `^~`, `~`, `~*`, `@`), its path, and the upstream it proxies to (`None`
/// for anything else: files, fastcgi, a `proxy_pass` to an address).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    pub modifier: String,
    pub path: String,
    pub upstream: Option<String>,
}

/// The upstream a request line (`GET /path HTTP/1.1`) went to, as far as
/// the locations of every `server` block (`servers`) tell without knowing
/// its host: in each block, the exact location, else the longest prefix;
/// a block with regular-expression locations answers only when that prefix
/// is `^~` (else a regex may take the request). A block where no location
/// matches says nothing. `None` unless every block that answers names the
/// same upstream.
pub fn route_of<'a>(servers: &'a [Vec<Route>], request: &str) -> Option<&'a str> {
    let uri = request.split(' ').nth(1)?;
    let path = uri.split('?').next().unwrap_or(uri);
    let mut answer: Option<&'a str> = None;
    for routes in servers {
        let chosen = match routes.iter().find(|r| r.modifier == "=" && r.path == path) {
            Some(r) => Some(r),
            None => {
                let best = routes
                    .iter()
                    .filter(|r| {
                        (r.modifier.is_empty() || r.modifier == "^~") && path.starts_with(&r.path)
                    })
                    .max_by_key(|r| r.path.len());
                let regex = routes.iter().any(|r| r.modifier.starts_with('~'));
                match best {
                    Some(b) if b.modifier == "^~" || !regex => Some(b),
                    None if !regex => None,
                    _ => return None,
                }
            }
        };
        let Some(r) = chosen else { continue };
        let u = r.upstream.as_deref()?;
        if answer.is_some_and(|a| a != u) {
            return None;
        }
        answer = Some(u);
    }
    answer
}
