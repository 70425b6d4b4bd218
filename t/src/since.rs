//! What nginx speaks only from a version on: one place for the suite's
//! tests (`actors::backend::Wire::since`) and for xtask's runner, which
//! compiles this file in (it uses nothing else) and reports a test of such
//! a protocol as not run on an older nginx, where it could prove nothing
//! but that `nginx -t` refuses the directive (which
//! `protocols::nginx_t_accepts_each_protocol_from_its_version` proves on
//! every version).

/// A version as `(major, minor, patch)`.
pub type Version = (u32, u32, u32);

/// The upstream protocols nginx gained, by the name the suite gives them
/// (a test of one carries it as a segment of its path:
/// `protocols::http2::module_on_rescues_and_counts`), and the first
/// version that speaks each: `proxy_http_version 2`, nginx 1.29.4.
pub const SINCE: &[(&str, Version)] = &[("http2", (1, 29, 4))];

/// The first version that speaks `protocol` (the suite's name of it);
/// every version for a protocol [`SINCE`] does not name.
pub fn since(protocol: &str) -> Version {
    SINCE
        .iter()
        .find(|(p, _)| *p == protocol)
        .map_or((0, 0, 0), |(_, v)| *v)
}

/// The version the test `path` needs: the newest of those of the
/// protocols a segment of its path names.
pub fn needed_by(path: &str) -> Version {
    path.split("::").map(since).max().unwrap_or_default()
}

/// nginx's version in what `nginx -V` says (`nginx version:
/// nginx/1.28.0`; Angie and Tengine name the nginx inside after `nginx/`).
pub fn nginx_version(said: &str) -> Option<Version> {
    let v: Vec<u32> = said
        .split("nginx/")
        .nth(1)?
        .split_whitespace()
        .next()?
        .split('.')
        .filter_map(|p| p.parse().ok())
        .collect();
    match v.as_slice() {
        [a, b, c] => Some((*a, *b, *c)),
        _ => None,
    }
}

/// `1.29.4`.
pub fn show((a, b, c): Version) -> String {
    format!("{a}.{b}.{c}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_needs_the_version_of_the_protocol_its_path_names() {
        assert_eq!(
            needed_by("protocols::http2::module_on_rescues_and_counts"),
            since("http2")
        );
        assert_eq!(
            needed_by("protocols::stale_stream::http2::stock_x"),
            since("http2")
        );
        assert!(since("http2") > (1, 0, 0));
        // A segment, not a part of one.
        assert_eq!(needed_by("protocols::grpc::stock_http2_like"), (0, 0, 0));
        assert_eq!(needed_by("race::module_on"), (0, 0, 0));
        assert_eq!(
            nginx_version("nginx version: nginx/1.28.0\nbuilt by gcc"),
            Some((1, 28, 0))
        );
        assert_eq!(nginx_version("nginx version: Angie/1.12.1"), None);
        assert_eq!(show((1, 29, 4)), "1.29.4");
    }
}
