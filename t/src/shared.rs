//! What the scenarios ([`crate::scenarios::http`],
//! [`crate::scenarios::stream`], [`crate::scenarios::lab`]) and nginx's
//! configuration write alike, written once: the upstream's name, the
//! keepalive lines, the status location.

/// The upstream every harness configuration proxies to (the stream races
/// number theirs: `be0`, `be1`, ...). A configuration template says
/// `${UPSTREAM}` ([`crate::nginx::Config`] fills it in); `$upstream_addr`
/// ends with it when a selection was refused.
pub const UPSTREAM: &str = "be";

/// The location lines that let nginx keep upstream connections alive:
/// HTTP/1.1, and no `Connection: close` passed on.
pub const KEEPALIVE_LOCATION: &str = "proxy_http_version 1.1; proxy_set_header Connection \"\";";

/// The inside of `location = /status`: the module's status handler, or
/// `return 404` without the module.
pub fn status_handler(module: bool) -> &'static str {
    if module {
        "generation_retry_status;"
    } else {
        "return 404;"
    }
}

/// The `http {}` server of a stream configuration: the status location
/// alone, on `${PORT}`.
pub fn status_server(module: bool) -> String {
    format!(
        "server {{ listen 127.0.0.1:${{PORT}}; location = /status {{ {} }} }}",
        status_handler(module)
    )
}
