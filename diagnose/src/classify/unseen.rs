//! A refusal that the rules of `first.rs` and `retry.rs` leave undecided
//! with no address of its upstream U seen serving in the window before it.
//! There "no change seen" says nothing: nothing was seen. nginx refuses a
//! selection when the list's generation moved, when no peer of it is
//! usable (`unavailable`), or when it holds no peer at all (`empty`), so
//! only evidence of which list nginx held decides it:
//!
//! 1. `empty` (not for a retry whose first attempt found a peer of the
//!    list that refused it: that list was not empty when the request
//!    began): the latest `(3: Host not found)` line for U's name at or
//!    before the refusal, with no address of U selected since its second
//!    (NXDOMAIN empties the list however long ago it came); or U never
//!    served before the refusal, has no static peer in the configuration,
//!    and its name's latest resolver line up to a window after it is a
//!    failure of any kind (the name had not resolved: nothing filled the
//!    list, and a failure other than NXDOMAIN keeps only addresses it
//!    never had).
//! 2. `unavailable`, where the list held peers: the configuration gives U
//!    static peers; or, with an error log read (nginx writes every failed
//!    resolution there at level `error`), U served before the refusal and
//!    no NXDOMAIN line that could be its name's came since; or U's
//!    resolving names are known (`--nginx-conf`, `--upstream-server`) and
//!    none of them failed to resolve.
//! 3. Else `unknown`, whose reason says what is missing and which flag
//!    would give it (`--error-log`; `--access-log` for a retry known from
//!    the error log alone; `--upstream-server` where resolver lines of
//!    untied names could be U's; else `--nginx-conf`).

use std::collections::BTreeSet;

use super::{Classifier, Family, Shape, Skeleton, Verdict, SECOND};
use crate::collect::ErrorKind;

impl Classifier<'_> {
    /// Decides a refusal of `u` with no address of `u` seen serving in the
    /// window before it and no rule of its shape deciding it (see the
    /// module docs); `what` begins its reason (`selection refused`).
    pub(super) fn decide_unseen(&self, s: &Skeleton, u: &str, what: &str) -> Verdict {
        let t = s.time_ms;
        let data = self.data;
        let options = &data.options;
        let timeline = &data.timeline;
        let lines = self.resolver_lines.get(u).map_or(&[][..], Vec::as_slice);
        // U's resolver lines whose second began by `to`.
        let upto = |to: i64| &lines[..lines.partition_point(|ei| data.errors[*ei].time_ms <= to)];
        let resolver = |ei: usize| match data.errors[ei].kind {
            ErrorKind::Resolver { name, nxdomain } => (data.strings.get(name), nxdomain),
            _ => ("its name", false),
        };
        let when = |ei: usize| data.error_time_text(&data.errors[ei]);
        // A retry's request selected a peer of the very list that refused
        // it (unless it tried only static primaries: then the backups'
        // list refused it), so that list was not empty when it started; an
        // NXDOMAIN since is the in-flight rule's.
        let had_peer =
            s.shape == Shape::TwoHop && s.tried.iter().any(|a| !options.is_primary(u, a));
        // 1. An NXDOMAIN with nothing selected since: the list was empty.
        let nxdomain = upto(t).iter().rev().find(|ei| resolver(**ei).1);
        if let Some(&ei) = nxdomain.filter(|_| !had_peer) {
            let nx = data.errors[ei].time_ms;
            if timeline
                .last_selected(u, t, t - nx)
                .is_none_or(|l| l < nx + SECOND)
            {
                return (
                    Family::Empty,
                    format!(
                        "{what}; {} could not be resolved (3: Host not found) at {}, and no \
                         address of {u} was selected since: the list was empty",
                        resolver(ei).0,
                        when(ei)
                    ),
                    Some(ei),
                );
            }
        }
        let first_served = match self.first_served.get(u) {
            Some(f) => *f,
            None => timeline.first_seen(u),
        };
        let last_served = first_served
            .filter(|f| *f < t)
            .and_then(|_| self.last_served(u, t - 1, first_served));
        // Static peers (with static primaries, a retry is refused on the
        // backups' list: the primaries are not in it).
        let statics: Vec<&str> = options
            .peers
            .iter()
            .filter(|(pu, a)| pu == u && !(s.shape == Shape::TwoHop && options.is_primary(u, a)))
            .map(|(_, a)| a.as_str())
            .collect();
        // 1. Never served, and the name's answer was a failure.
        if last_served.is_none() && statics.is_empty() && !had_peer {
            if let Some(&ei) = upto(t + self.window).last() {
                let (name, nxdomain) = resolver(ei);
                let code = if nxdomain {
                    " (3: Host not found)"
                } else {
                    " (not NXDOMAIN)"
                };
                return (
                    Family::Empty,
                    format!(
                        "{what}; no address of {u} served before it, and {name} could not be \
                         resolved{code} at {}: the name had not resolved, so the list was empty",
                        when(ei)
                    ),
                    Some(ei),
                );
            }
        }
        // 2. The list held peers.
        if !statics.is_empty() {
            return (
                Family::Unavailable,
                format!(
                    "{what}; the configuration gives {u} static peers ({}), so its list was not \
                     empty: none of them usable (down, max_fails, max_conns)",
                    statics.join(", ")
                ),
                None,
            );
        }
        if !self.error_log {
            return (
                Family::Unknown,
                format!(
                    "{what}; no address of {u} served in the window before it, and no error log \
                     was read to say whether its name resolved: pass --error-log PATH (nginx \
                     writes a name that fails to resolve, and a failing peer, at level error)"
                ),
                None,
            );
        }
        let names: Vec<&str> = options
            .servers
            .iter()
            .chain(&options.conf_servers)
            .filter(|(su, _)| su == u)
            .map(|(_, n)| n.as_str())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        if let Some(l) = last_served {
            // An NXDOMAIN line of a name no upstream is known to resolve,
            // since U last served, may be U's own.
            let nx = &self.untied_nxdomains;
            let from = nx.partition_point(|ei| data.errors[*ei].time_ms + SECOND <= l);
            let mut untied: Vec<&str> = nx[from..]
                .iter()
                .take_while(|ei| data.errors[**ei].time_ms <= t)
                .map(|ei| resolver(*ei).0)
                .collect();
            let ago = match t - l {
                ms if ms < 1_000 => format!("{ms} ms before it"),
                ms => format!("{:.1} s before it", ms as f64 / 1_000.0),
            };
            if !names.is_empty() || untied.is_empty() {
                return (
                    Family::Unavailable,
                    format!(
                        "{what}; no address of {u} served in the window before it, but one \
                         served {ago}, and no NXDOMAIN that could be its name's came since: \
                         its list still held peers, none usable (down, max_fails, max_conns)"
                    ),
                    None,
                );
            }
            untied.sort_unstable();
            untied.dedup();
            return (
                Family::Unknown,
                format!(
                    "{what}; no address of {u} served since {ago}, and since then {} could not \
                     be resolved (3: Host not found), a name tied to no upstream: if {u} has \
                     `server NAME resolve` for it, pass --upstream-server {u}=NAME (or \
                     --nginx-conf FILE) and that line decides",
                    untied.join(", ")
                ),
                None,
            );
        }
        if !names.is_empty() {
            return (
                Family::Unavailable,
                format!(
                    "{what}; {u} resolves {} and the error log has no failure to resolve it: \
                     its list held peers, none usable (down, max_fails, max_conns), none of \
                     which served before it",
                    names.join(", ")
                ),
                None,
            );
        }
        if had_peer {
            return (
                Family::Unknown,
                format!(
                    "{what}; its first attempt found a peer, but no access line shows {u} \
                     serving, so nothing tells a change of its list (the race) from peers none \
                     could use: pass the access log its requests are written to (--access-log \
                     PATH with --log-format, or --nginx-conf FILE)"
                ),
                None,
            );
        }
        let pass = if !self.untied_names.is_empty() {
            let list: Vec<&str> = self.untied_names.iter().take(5).copied().collect();
            format!(
                "the error log's resolver errors for {} are tied to no upstream: if {u} has \
                 `server NAME resolve` for one of them, pass --upstream-server {u}=NAME, or \
                 --nginx-conf FILE",
                list.join(", ")
            )
        } else if options.configured {
            format!(
                "the configuration gives {u} no server: if it has `server NAME resolve`, pass \
                 --upstream-server {u}=NAME"
            )
        } else {
            format!(
                "pass --nginx-conf FILE (or --upstream-server {u}=NAME if it has `server NAME \
                 resolve`): a static list, or a name that resolved, held peers (unavailable)"
            )
        };
        (
            Family::Unknown,
            format!(
                "{what}; no address of {u} served before it and no resolver line is its \
                 name's, so no line says whether its list held peers (unavailable) or none \
                 (empty): {pass}"
            ),
            None,
        )
    }

    /// When an address of `u` last served at or before `t` (`first`: the
    /// first time one did), from the run of refusals at or before `t`
    /// where there is one: nothing served between a run's start and its
    /// refusals, so only the gap since its last refusal is read.
    fn last_served(&self, u: &str, t: i64, first: Option<i64>) -> Option<i64> {
        let timeline = &self.data.timeline;
        let latest = self.runs.get(u).and_then(|run| {
            let at = run.partition_point(|(r, ..)| *r <= t);
            at.checked_sub(1).map(|i| run[i])
        });
        match latest {
            Some((r, _, before)) => timeline
                .last_seen(u, t, t - r)
                .filter(|l| *l > r)
                .or(before),
            None => first.and_then(|f| timeline.last_seen(u, t, t - f)),
        }
    }
}
