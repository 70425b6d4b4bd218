//! Unit tests of the streaming pass: routes, what is kept, sources, clipping.

use super::{route_of, Route};

fn route(modifier: &str, path: &str, upstream: Option<&str>) -> Route {
    Route {
        modifier: modifier.into(),
        path: path.into(),
        upstream: upstream.map(String::from),
    }
}

#[test]
fn routes_follow_nginxs_location_choice_or_say_nothing() {
    let one = vec![vec![
        route("", "/", Some("web")),
        route("", "/api/", Some("api")),
        route("=", "/api/health", Some("health")),
        route("", "/static/", None),
    ]];
    let at = |servers: &[Vec<Route>], uri: &str| {
        route_of(servers, &format!("GET {uri} HTTP/1.1")).map(String::from)
    };
    assert_eq!(at(&one, "/api/v1?x=1").as_deref(), Some("api"));
    assert_eq!(at(&one, "/api/health").as_deref(), Some("health"));
    assert_eq!(at(&one, "/index.html").as_deref(), Some("web"));
    // Files, not an upstream: the longest prefix wins, and says none.
    assert_eq!(at(&one, "/static/a.css"), None);
    // A regular expression may take what a plain prefix matches...
    let mut regex = one.clone();
    regex[0].push(route("~", "\\.php$", Some("php")));
    assert_eq!(at(&regex, "/api/v1"), None);
    // ...but not what `^~` or `=` takes.
    regex[0].push(route("^~", "/api/v2/", Some("api2")));
    assert_eq!(at(&regex, "/api/v2/x").as_deref(), Some("api2"));
    assert_eq!(at(&regex, "/api/health").as_deref(), Some("health"));
    // Two servers (the host is unknown): they must agree.
    let two = vec![one[0].clone(), vec![route("", "/api/", Some("other"))]];
    assert_eq!(at(&two, "/api/v1"), None);
    assert_eq!(at(&two, "/index.html").as_deref(), Some("web"));
    assert_eq!(route_of(&one, "garbage"), None);
}

use super::*;

#[test]
fn keeps_only_what_classification_needs() {
    let parser = AccessParser::new(r#"$msec $status "$upstream_addr""#).expect("valid");
    let mut c = Collector::new(Some(parser), Options::default());
    let a = c.start_file("access.log", LogKind::Access);
    let e = c.start_file("error.log", LogKind::Error);
    c.line(a, b"2.0 200 \"10.0.0.1:80\"");
    c.line(a, b"1.0 502 \"be\"");
    c.line(a, b"garbage \xff");
    c.line(a, b"");
    c.line(a, b"nonsense");
    c.line(
        e,
        b"2026/12/01 07:00:00 [notice] 1#1: start worker process 2",
    );
    c.line(e, b"2026/12/01 07:00:00 [warn] 1#1: *1 generation_retry: x");
    c.line(
        e,
        b"2026/12/01 07:00:00 [error] 1#1: *1 no live upstreams while connecting to upstream, client: 1.1.1.1, server: , upstream: \"api\"",
    );
    let d = c.finish();
    assert_eq!(d.failures.len(), 1);
    let f = &d.failures[0];
    assert_eq!(d.upstream_addr(f), "be");
    assert_eq!((f.source.file(), f.source.line()), (a, 2));
    assert_eq!(d.failure_time_text(f), "1.000");
    assert_eq!(d.errors.len(), 1, "notice and module lines are not kept");
    assert_eq!(d.errors[0].source, Source::new(e, 3));
    assert_eq!(d.error_upstream(&d.errors[0]), Some("api"));
    assert_eq!(d.error_time_text(&d.errors[0]), "2026/12/01 07:00:00");
    assert_eq!(d.module_lines, 1);
    assert_eq!(d.access_entries, 2);
    assert_eq!(d.files[a].lines, 5);
    assert_eq!(d.files[a].unparsed, 2);
    assert_eq!(
        d.files[a].first_unparsed,
        Some((3, "garbage \u{fffd}".into()))
    );
    assert_eq!(d.files[e].unparsed, 0);
    assert!(d.timeline.is_name("api") && d.timeline.is_name("be"));
    assert_eq!(d.offset_basis, Some(OffsetBasis::Default));
}

#[test]
fn sources_pack_file_and_line() {
    let s = Source::new(3, 12_345_678_901);
    assert_eq!((s.file(), s.line()), (3, 12_345_678_901));
    assert!(Source::new(0, 9) < Source::new(1, 1));
}

#[test]
fn clip_respects_characters() {
    assert_eq!(clip("héllo", 2), "h");
    assert_eq!(clip("héllo", 3), "hé");
    assert_eq!(clip("abc", 10), "abc");
}
