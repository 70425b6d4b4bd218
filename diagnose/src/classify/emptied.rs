//! What `first.rs` and `unseen.rs` share to call a refusal `empty`, and
//! only on evidence: U's static peers (a list with one is never empty),
//! U's resolving names, whether each of them answered NXDOMAIN with
//! nothing of U selected since, and whether the access logs read cover
//! the span that "nothing selected since" speaks of. nginx never logs a
//! successful resolution: only traffic shows that a name resolved again,
//! so where no access line could show it, silence proves nothing.

use std::collections::BTreeSet;

use super::{Classifier, Family, Shape, Skeleton, Verdict, SECOND};
use crate::collect::ErrorKind;
use crate::timefmt;

/// What U's NXDOMAIN lines say of its list at a refusal (see
/// [`Classifier::nxdomains`]).
pub(super) struct Nxdomains<'a> {
    /// The latest NXDOMAIN line of each of U's names that has one, by
    /// time (indices into [`crate::collect::Collected::errors`]).
    pub lines: Vec<usize>,
    /// U's names with no NXDOMAIN line in the span.
    pub missing: Vec<&'a str>,
    /// Whether an address of U was surely selected after the second of
    /// the earliest of `lines`.
    pub selected: bool,
    /// Why the access logs read cannot say whether an address of U was
    /// selected since then (`None`: they cover it).
    pub gap: Option<String>,
}

impl Nxdomains<'_> {
    /// Whether the list was empty: every one of U's names answered
    /// NXDOMAIN, and access logs that cover the span since show no address
    /// of U selected.
    pub fn emptied(&self) -> bool {
        self.missing.is_empty() && !self.selected && self.gap.is_none()
    }

    /// Whether only the access logs keep this from saying `empty`.
    pub fn uncovered(&self) -> Option<&str> {
        self.gap
            .as_deref()
            .filter(|_| self.missing.is_empty() && !self.selected)
    }
}

impl<'a> Classifier<'a> {
    /// U's static peers from the configuration (`server ADDRESS`), as
    /// logged. With static primaries, a retry is refused on the backups'
    /// list, which the primaries are not in: they are left out of a
    /// 2-hop's.
    pub(super) fn statics(&self, s: &Skeleton, u: &str) -> Vec<&'a str> {
        let options = &self.data.options;
        options
            .peers
            .iter()
            .filter(|(pu, a)| pu == u && !(s.shape == Shape::TwoHop && options.is_primary(u, a)))
            .map(|(_, a)| a.as_str())
            .collect()
    }

    /// When an address of `u` first served: precomputed for upstreams
    /// refused in the access log, else read from the timeline (upstreams
    /// refused only in the error log).
    pub(super) fn first_served(&self, u: &str) -> Option<i64> {
        match self.first_served.get(u) {
            Some(f) => *f,
            None => self.data.timeline.first_seen(u),
        }
    }

    /// `u`'s resolving names, and whether they are known (from
    /// `--upstream-server` or the configuration); else the names of `u`'s
    /// resolver lines up to `to`, which need not be all of them.
    pub(super) fn names_of(&self, u: &str, to: i64) -> (Vec<&'a str>, bool) {
        let options = &self.data.options;
        let known: BTreeSet<&'a str> = options
            .servers
            .iter()
            .chain(&options.conf_servers)
            .filter(|(su, _)| su == u)
            .map(|(_, n)| n.as_str())
            .collect();
        if !known.is_empty() {
            return (known.into_iter().collect(), true);
        }
        let seen: BTreeSet<&'a str> = self
            .lines_upto(u, to)
            .iter()
            .map(|ei| self.resolver_of(*ei).0)
            .collect();
        (seen.into_iter().collect(), false)
    }

    /// `u`'s resolver lines (by time) whose second began by `to`.
    pub(super) fn lines_upto(&self, u: &str, to: i64) -> &[usize] {
        let lines = self.resolver_lines.get(u).map_or(&[][..], Vec::as_slice);
        &lines[..lines.partition_point(|ei| self.data.errors[*ei].time_ms <= to)]
    }

    /// A resolver line's name, and whether it is an NXDOMAIN.
    pub(super) fn resolver_of(&self, ei: usize) -> (&'a str, bool) {
        match self.data.errors[ei].kind {
            ErrorKind::Resolver { name, nxdomain } => (self.data.strings.get(name), nxdomain),
            _ => ("its name", false),
        }
    }

    /// Why the access logs read cannot say whether an address was
    /// selected between the error line time `from` (its second: a line a
    /// few hundred milliseconds after it may still be before the event)
    /// and `to`; `None` where they cover that span.
    pub(super) fn access_gap(&self, from: i64, to: i64) -> Option<String> {
        let text = |ms: i64| timefmt::format_error_time(ms, self.data.error_offset_s);
        match self.data.access_span {
            None => Some("no access log entry was read".to_string()),
            Some((first, _)) if first >= from + SECOND => Some(format!(
                "the access logs read begin at {}, after that line",
                text(first)
            )),
            Some((_, last)) if last < to => Some(format!(
                "the access logs read end at {}, before the refusal",
                text(last)
            )),
            Some(_) => None,
        }
    }

    /// What `u`'s NXDOMAIN lines whose second overlaps `[from, to]`
    /// (`from`: `None` for however long before) say of its list at `to`;
    /// `None` without one. Each of U's names counts by its latest NXDOMAIN
    /// (a later failure of another code keeps only addresses the name no
    /// longer has), and the list was empty only if every name answered so
    /// with nothing of U selected since the earliest of those lines: a
    /// name that resolved again gives fresh peers, which the next request
    /// selects (none is down before it is tried).
    pub(super) fn nxdomains(&self, u: &str, from: Option<i64>, to: i64) -> Option<Nxdomains<'a>> {
        let (names, _) = self.names_of(u, to);
        let lines = self.lines_upto(u, to);
        let from = from.map_or(i64::MIN, |f| f - SECOND + 1);
        let errors = &self.data.errors;
        let mut latest = Vec::new();
        let mut missing = Vec::new();
        for name in names {
            let found = lines
                .iter()
                .rev()
                .take_while(|ei| errors[**ei].time_ms >= from)
                .find(|ei| self.resolver_of(**ei) == (name, true));
            match found {
                Some(ei) => latest.push(*ei),
                None => missing.push(name),
            }
        }
        latest.sort_unstable();
        let since = errors[*latest.first()?].time_ms;
        let selected = self
            .data
            .timeline
            .last_selected(u, to, to - since)
            .is_some_and(|l| l >= since + SECOND);
        Some(Nxdomains {
            gap: self.access_gap(since, to),
            lines: latest,
            missing,
            selected,
        })
    }

    /// `e`'s lines in words: `NAME could not be resolved (3: Host not
    /// found) at TIME`, then `, NAME at TIME` for each further name.
    pub(super) fn nxdomain_text(&self, e: &Nxdomains) -> String {
        e.lines
            .iter()
            .enumerate()
            .map(|(k, ei)| {
                let name = self.resolver_of(*ei).0;
                let at = self.data.error_time_text(&self.data.errors[*ei]);
                match k {
                    0 => format!("{name} could not be resolved (3: Host not found) at {at}"),
                    _ => format!("{name} at {at}"),
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The `empty` verdict of an [`Nxdomains::emptied`] `e` (`what`: the
    /// reason's start, if any); its latest line decides.
    pub(super) fn emptied_verdict(&self, e: &Nxdomains, u: &str, what: Option<&str>) -> Verdict {
        let start = what.map_or(String::new(), |w| format!("{w}; "));
        (
            Family::Empty,
            format!(
                "{start}{}, and no address of {u} was selected since: the list was empty",
                self.nxdomain_text(e)
            ),
            e.lines.last().copied(),
        )
    }
}
