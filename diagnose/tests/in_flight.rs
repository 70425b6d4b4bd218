//! With `$request_time`, a refused retry is read over the request's own
//! span: did the list change between its start and the refusal (the
//! race), or was it unchanged and unusable (`unavailable`), or did the
//! name stop resolving while it was in flight (the race: its first
//! selection found a peer)? A refused first selection is read from the run
//! of refusals it belongs to.

use super::common;

use generation_retry_diagnose::classify::Family;
use generation_retry_diagnose::collect::Options;

const FORMAT: &str = r#"$msec $status "$upstream_addr" "$request" $request_time"#;
const A: &str = "10.0.0.1:80";
const B: &str = "10.0.0.2:80";
const C: &str = "10.0.0.3:80";
/// 2026-12-01 07:00:00 UTC.
const T0: i64 = 1_796_108_400_000;

#[derive(Default)]
struct Logs {
    access: Vec<String>,
    error: Vec<String>,
    n: u32,
}

impl Logs {
    /// A request that ended at `end` ms after T0, `took` ms after it began.
    fn access(&mut self, end: i64, took: i64, status: u16, upstream_addr: &str) -> String {
        self.n += 1;
        let path = format!("/r/{}", self.n);
        let t = T0 + end;
        self.access.push(format!(
            "{}.{:03} {status} \"{upstream_addr}\" \"GET {path} HTTP/1.1\" {}.{:03}",
            t / 1_000,
            t % 1_000,
            took / 1_000,
            took % 1_000
        ));
        path
    }

    /// Successes at `addr` every 20 ms from `from` to `to`.
    fn serve(&mut self, addr: &str, from: i64, to: i64) {
        for ms in (from..to).step_by(20) {
            self.access(ms, 2, 200, addr);
        }
    }

    /// Another request's (`*7`) `temporarily disabled` line for `addr`.
    fn disabled(&mut self, ms: i64, addr: &str) {
        self.error(
            ms,
            "warn",
            &format!(
                "*7 upstream server temporarily disabled while reading response header from \
                 upstream, client: 10.9.9.9, server: , request: \"GET /x HTTP/1.1\", \
                 upstream: \"http://{addr}/x\""
            ),
        );
    }

    fn error(&mut self, ms: i64, level: &str, message: &str) {
        self.error.push(format!(
            "2026/12/01 07:00:{:02} [{level}] 11#11: {message}",
            ms / 1_000
        ));
    }

    /// The family of each incident, by request path.
    fn families(&self) -> Vec<(String, Family, String)> {
        // The configuration's: no `down` server hides beside the name.
        self.families_with(Options {
            configured: true,
            ..Options::default()
        })
    }

    /// The same, with what the configuration would give in `options`.
    fn families_with(&self, options: Options) -> Vec<(String, Family, String)> {
        common::families_of(FORMAT, &self.access, &self.error, options)
    }
}

/// Two peers serve; a third comes while a request is in flight: its
/// refused retry is the race, although the list had two peers.
#[test]
fn an_address_that_came_in_flight_is_the_race() {
    let mut l = Logs::default();
    l.serve(A, 0, 1_000);
    l.serve(B, 10, 1_000);
    l.access(1_200, 300, 502, &format!("{A}, be"));
    l.serve(C, 1_010, 3_000);
    l.serve(B, 1_020, 3_000);
    let got = l.families();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].1, Family::GenerationRetry, "{}", got[0].2);
    assert!(got[0].2.contains(C), "{}", got[0].2);
}

/// The same list throughout, B disabled by another request just before:
/// the retry after A was refused because no peer was usable.
#[test]
fn an_unchanged_list_with_its_peers_down_is_unavailable() {
    let mut l = Logs::default();
    l.serve(A, 0, 1_000);
    l.serve(B, 10, 900);
    l.disabled(950, B);
    l.access(1_250, 200, 502, &format!("{A}, be"));
    for ms in (1_260..1_900).step_by(20) {
        l.access(ms, 0, 502, "be");
    }
    let got = l.families();
    assert_eq!(got[0].0, format!("{A}, be"));
    assert!(
        got.iter().all(|(_, f, _)| *f == Family::Unavailable),
        "{got:#?}"
    );
}

/// NXDOMAIN while a request is in flight: its retry is the race (the
/// generation moved: the list emptied after its first selection); the
/// refusals that follow, on the empty list, are `empty`; and once the name
/// resolves again, nothing is.
#[test]
fn an_nxdomain_in_flight_is_the_race_and_the_refusals_after_it_empty() {
    let mut l = Logs::default();
    l.serve(A, 0, 2_050);
    l.error(
        2_000,
        "error",
        "be could not be resolved (3: Host not found)",
    );
    l.access(2_150, 250, 502, &format!("{A}, be"));
    for ms in (2_060..2_900).step_by(20) {
        l.access(ms, 0, 502, "be");
    }
    l.serve(B, 3_000, 4_000);
    let got = l.families();
    let (retry, rest): (Vec<_>, Vec<_>) = got.iter().partition(|(a, _, _)| a.contains(A));
    assert_eq!(retry.len(), 1);
    assert_eq!(retry[0].1, Family::GenerationRetry, "{}", retry[0].2);
    assert!(!rest.is_empty());
    assert!(
        rest.iter().all(|(_, f, _)| *f == Family::Empty),
        "{rest:#?}"
    );
}

/// NXDOMAIN empties the list while a request that began before it is
/// still at the old peer; that request ends more than a second later with
/// the peer failing and disabled (as seen under CI load on 1.31.4). Its
/// address at the end was selected before the NXDOMAIN, and a peer of the
/// old list disabled after it is not why the empty list refuses: the
/// refusals that follow are `empty`, not `unavailable`.
#[test]
fn an_old_peer_failing_after_an_nxdomain_does_not_make_the_refusals_unavailable() {
    let mut l = Logs::default();
    l.serve(A, 0, 1_950);
    l.error(
        2_000,
        "error",
        "be could not be resolved (3: Host not found)",
    );
    let post = "POST /slow HTTP/1.1";
    l.access(3_400, 1_600, 502, A);
    l.error(
        3_400,
        "error",
        &format!(
            "*7 upstream prematurely closed connection while reading response header from \
             upstream, client: 10.9.9.9, server: , request: \"{post}\", upstream: \"http://{A}/slow\""
        ),
    );
    l.error(
        3_400,
        "warn",
        &format!(
            "*7 upstream server temporarily disabled while reading response header from \
             upstream, client: 10.9.9.9, server: , request: \"{post}\", upstream: \"http://{A}/slow\""
        ),
    );
    for ms in (2_060..3_900).step_by(20) {
        l.access(ms, 0, 502, "be");
    }
    l.serve(B, 5_000, 6_000);
    let got = l.families();
    let refusals: Vec<_> = got.iter().filter(|(a, _, _)| a == "be").collect();
    assert!(refusals.len() > 80, "{got:#?}");
    assert!(
        refusals.iter().all(|(_, f, _)| *f == Family::Empty),
        "{refusals:#?}"
    );
}

/// Refusals before the name ever served, then it serves: the list was
/// empty because the name had not resolved yet (a fresh start).
#[test]
fn refusals_before_the_first_resolution_are_empty() {
    let mut l = Logs::default();
    for ms in (0..100).step_by(20) {
        l.access(ms, 0, 502, "be");
    }
    l.serve(A, 120, 1_000);
    let got = l.families();
    assert_eq!(got.len(), 5);
    assert!(got.iter().all(|(_, f, _)| *f == Family::Empty), "{got:#?}");
}

/// One peer, and another request's attempt at it failed just before the
/// refusal, with nothing logged after (the end of the log): nginx never
/// marks a single peer down, so the peer error is no evidence of
/// `unavailable`, and the refusal is the race.
#[test]
fn a_peer_error_in_a_one_peer_list_is_not_unavailable() {
    let mut l = Logs::default();
    l.serve(A, 0, 1_000);
    l.error(
        1_000,
        "error",
        "*9 upstream prematurely closed connection while reading response header from \
         upstream, client: 10.9.9.9, server: , request: \"GET /y HTTP/1.1\", upstream: \
         \"http://10.0.0.1:80/y\"",
    );
    l.access(1_300, 250, 502, &format!("{A}, be"));
    let got = l.families();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].1, Family::GenerationRetry, "{}", got[0].2);
}

/// A refusal long after an NXDOMAIN that emptied the list, with the name
/// serving in between: its run of refusals starts at itself, so the old
/// NXDOMAIN says nothing about it (nothing served in the 10 s before it
/// either: that alone must not reach back to the first refusal of the log).
#[test]
fn an_old_nxdomain_does_not_make_a_later_refusal_empty() {
    let mut l = Logs::default();
    l.error(500, "error", "be could not be resolved (3: Host not found)");
    l.access(600, 0, 502, "be");
    l.serve(A, 1_000, 20_000);
    l.access(40_000, 0, 502, "be");
    let got = l.families();
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].1, Family::Empty, "{}", got[0].2);
    assert_eq!(got[1].1, Family::Unavailable, "{}", got[1].2);
}

/// The name moved from B to A; B had been disabled before it left. A
/// retry after A, refused at the end of the log (nothing after it shows
/// the next list), is not `unavailable` on B's line: the list held only A
/// when the request started, and B's failure is not why it was refused.
#[test]
fn a_disabled_peer_that_left_before_the_request_is_not_why() {
    let mut l = Logs::default();
    l.serve(B, 0, 1_000);
    l.error(
        900,
        "warn",
        "*5 upstream server temporarily disabled while reading response header from upstream, \
         client: 10.9.9.9, server: , request: \"GET /z HTTP/1.1\", upstream: \"http://10.0.0.2:80/z\"",
    );
    l.serve(A, 1_010, 3_000);
    l.access(3_200, 250, 502, &format!("{A}, be"));
    let got = l.families();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].1, Family::GenerationRetry, "{}", got[0].2);
}

/// A retry refused after the request tried both peers of an unchanged
/// list, with a third address serving just after the refusal (within the
/// slack the race's rule allows for the new list's first selections):
/// nginx refuses a request that tried every peer whatever the generation,
/// so only a change by the refusal would make it the race.
#[test]
fn a_retry_that_tried_every_peer_is_unavailable_unless_the_change_came_first() {
    let mut l = Logs::default();
    l.serve(A, 0, 1_200);
    l.serve(B, 10, 1_200);
    l.access(1_300, 250, 502, &format!("{A}, {B}, be"));
    l.serve(C, 1_400, 3_000);
    let got = l.families();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].1, Family::Unavailable, "{}", got[0].2);
    assert!(got[0].2.contains("tried every peer"), "{}", got[0].2);
}

/// A refusal of an upstream the configuration gives no resolving server:
/// its list never changes, so even addresses that seem to come and go
/// around it (one peer failing, the other serving) do not make it the race.
#[test]
fn a_refusal_of_a_static_upstream_is_never_the_race() {
    let mut l = Logs::default();
    l.serve(A, 0, 1_000);
    l.serve(B, 1_010, 3_000);
    l.access(1_000, 0, 502, "be");
    let without = l.families();
    assert_eq!(without[0].1, Family::GenerationFirst, "{}", without[0].2);
    let got = l.families_with(Options {
        static_upstreams: ["be".to_string()].into(),
        ..Options::default()
    });
    assert_eq!(got[0].1, Family::Unavailable, "{}", got[0].2);
    assert!(got[0].2.contains("never changes"), "{}", got[0].2);
}

/// One peer error of B just before a refused retry, with a change seen
/// only after the refusal's slack: with nginx's default `max_fails=1` the
/// error took B out (`unavailable`); with `max_fails=3` (or 0) one error
/// takes no peer out, and the change in the window makes it the race.
#[test]
fn a_peer_error_takes_its_peer_out_only_at_max_fails() {
    let mut l = Logs::default();
    l.serve(A, 0, 1_000);
    l.serve(B, 10, 900);
    l.error(
        950,
        "error",
        "*7 connect() failed (111: Connection refused) while connecting to upstream, \
         client: 10.9.9.9, server: , request: \"GET /x HTTP/1.1\", upstream: \"http://10.0.0.2:80/x\"",
    );
    l.access(1_200, 150, 502, &format!("{A}, be"));
    l.serve(C, 1_600, 3_000);
    let default = l.families();
    assert_eq!(default[0].1, Family::Unavailable, "{}", default[0].2);
    for max_fails in [0, 3] {
        let got = l.families_with(Options {
            max_fails: [("be".to_string(), max_fails)].into(),
            ..Options::default()
        });
        assert_eq!(
            got[0].1,
            Family::GenerationRetry,
            "max_fails={max_fails}: {}",
            got[0].2
        );
    }
}

/// The same retry as above, with the third address serving before the
/// refusal: the list changed first, and the retry is the race.
#[test]
fn a_retry_that_tried_every_peer_after_a_change_is_the_race() {
    let mut l = Logs::default();
    l.serve(A, 0, 1_200);
    l.serve(B, 10, 1_200);
    l.serve(C, 1_150, 3_000);
    l.access(1_300, 250, 502, &format!("{A}, {B}, be"));
    let got = l.families();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].1, Family::GenerationRetry, "{}", got[0].2);
    assert!(got[0].2.contains(C), "{}", got[0].2);
}

/// With `max_fails=3`, three errors of B after its last success take it
/// out; three spread so that B serves after each of the first two do not
/// (a success resets nginx's count), and the change in the window makes
/// the retry the race.
#[test]
fn max_fails_counts_errors_since_the_peers_last_success() {
    let error = |l: &mut Logs, ms: i64| {
        l.error(
            ms,
            "error",
            "*7 connect() failed (111: Connection refused) while connecting to upstream, \
             client: 10.9.9.9, server: , request: \"GET /x HTTP/1.1\", upstream: \
             \"http://10.0.0.2:80/x\"",
        );
    };
    let three = Options {
        max_fails: [("be".to_string(), 3)].into(),
        ..Options::default()
    };
    for b_serves_between in [false, true] {
        let mut l = Logs::default();
        l.serve(A, 0, 3_400);
        l.serve(B, 10, 2_900);
        let at = if b_serves_between {
            [1_000, 2_000, 3_000]
        } else {
            [3_000; 3]
        };
        for ms in at {
            error(&mut l, ms);
        }
        l.access(3_300, 150, 502, &format!("{A}, be"));
        l.serve(C, 3_700, 5_000);
        let got = l.families_with(three.clone());
        let want = if b_serves_between {
            Family::GenerationRetry
        } else {
            Family::Unavailable
        };
        assert_eq!(
            got[0].1, want,
            "B serving between: {b_serves_between}: {}",
            got[0].2
        );
    }
}

/// A was disabled by another request in the second a request tried it
/// (the line's time has whole seconds); its retry was refused with B
/// serving throughout and C coming after:
/// the retry skips A (tried) whatever its state, so A being out is not why
/// it was refused, and with B usable the change makes it the race.
#[test]
fn a_tried_peer_out_of_service_is_not_why_its_retry_was_refused() {
    let mut l = Logs::default();
    l.serve(A, 0, 1_000);
    l.serve(B, 10, 3_000);
    l.disabled(1_000, A);
    l.access(1_200, 150, 502, &format!("{A}, be"));
    l.serve(C, 1_600, 3_000);
    let got = l.families();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].1, Family::GenerationRetry, "{}", got[0].2);
}

/// The same with only A seen serving before the request: a retry needs a
/// second peer (nginx gives a request as many tries as the list has
/// peers), and nginx marks a peer down only in a list of two or more, so
/// the list's others were there and not serving; A, the request's own
/// peer, disabled by another request, is the sign of that: `unavailable`.
#[test]
fn a_tried_peer_disabled_where_no_other_peer_served_is_unavailable() {
    let mut l = Logs::default();
    l.serve(A, 0, 1_000);
    l.disabled(1_000, A);
    l.access(1_200, 150, 502, &format!("{A}, be"));
    l.serve(C, 1_600, 3_000);
    let got = l.families();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].1, Family::Unavailable, "{}", got[0].2);
}

/// The list held A, B and C; a request tried A, and its retry was refused
/// while C was out (disabled by another request) and after which only A
/// served (the list became {A}). B had no line: the retry could have taken
/// it, so C being out is not why it was refused, and the change makes it
/// the race. With B disabled too, nothing of the list was left for the
/// retry: `unavailable`.
#[test]
fn one_peer_out_of_several_untried_is_not_why_a_retry_was_refused() {
    for b_out in [false, true] {
        let mut l = Logs::default();
        l.serve(A, 0, 3_000);
        l.serve(B, 5, 1_000);
        l.serve(C, 10, 1_000);
        l.disabled(1_000, C);
        if b_out {
            l.disabled(1_000, B);
        }
        l.access(1_200, 150, 502, &format!("{A}, be"));
        let got = l.families();
        assert_eq!(got.len(), 1);
        let want = if b_out {
            Family::Unavailable
        } else {
            Family::GenerationRetry
        };
        assert_eq!(got[0].1, want, "B out: {b_out}: {}", got[0].2);
        // The reason says the verdict rests on both lines.
        assert_eq!(
            got[0].2.contains("as 1 other peer of the list"),
            b_out,
            "{}",
            got[0].2
        );
    }
}
