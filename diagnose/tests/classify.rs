//! Classification on small synthetic logs, one scenario per family, plus
//! the joins between access and error lines.
//!
//! The scenarios by theme: `race` (the generation families), `resolver`
//! (resolver lines and `empty`), `not_race` (`unavailable` and `other`),
//! `unseen` (refusals with nothing of their upstream seen: evidence or
//! `unknown`), `unseen_gaps` (where that evidence has gaps), `logs` (log formats, the error log's offset, the human
//! report); here, the helpers they share.

use super::common;

mod logs;
mod not_race;
mod race;
mod resolver;
mod unseen;
mod unseen_gaps;

use common::{Logs, A, B};
use generation_retry_diagnose::classify::{Family, Incident};
use generation_retry_diagnose::Analysis;

fn only(analysis: &Analysis) -> &Incident {
    assert_eq!(
        analysis.incidents.len(),
        1,
        "one incident expected: {:#?}",
        analysis.incidents
    );
    &analysis.incidents[0]
}

fn families(analysis: &Analysis) -> Vec<Family> {
    analysis.incidents.iter().map(|i| i.family).collect()
}

/// The 2-hop race: the attempt at A fails as A leaves, the retry's
/// selection is refused, B serves afterwards. nginx's own `temporarily
/// disabled` line for A (max_fails=1) belongs to this very request and must
/// not make it `unavailable`.
fn two_hop_race() -> Logs {
    let mut l = Logs::new();
    l.ok(0, A);
    l.ok(400, A);
    l.ok(800, A);
    l.error(
        1_100,
        "error",
        7,
        "upstream prematurely closed connection while reading response header from upstream",
        "/race",
        A,
    );
    l.error(
        1_100,
        "warn",
        7,
        "upstream server temporarily disabled while reading response header from upstream",
        "/race",
        A,
    );
    l.no_live(1_100, 7, "/race");
    l.access(1_200, 502, &format!("{A}, be"), "/race", 7);
    l.ok(1_500, B);
    l.ok(1_900, B);
    l.ok(2_500, B);
    l
}
