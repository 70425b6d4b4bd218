//! A refusal that the rules of `first.rs` and `retry.rs` leave undecided
//! with no address of its upstream U seen serving in the window before it.
//! There "no change seen" says nothing: nothing was seen. nginx refuses a
//! selection when the list's generation moved, when no peer of it is
//! usable (`unavailable`), or when it holds no peer at all (`empty`), so
//! only evidence of which list nginx held decides it:
//!
//! 1. `unavailable`: the configuration gives U static peers (checked
//!    first: such a list is never empty, whatever its names answered).
//! 2. `empty` (not for a retry whose first attempt found a peer of the
//!    list that refused it: that list was not empty when the request
//!    began): each of U's resolving names' latest `(3: Host not found)`
//!    line at or before the refusal, with no address of U selected after
//!    the second of the earliest of them (NXDOMAIN empties the list
//!    however long ago it came); or U never served before the refusal
//!    and each of its names' latest resolver line up to a window after it
//!    is a failure of any kind (the name had not resolved: nothing filled
//!    the list, and a failure other than NXDOMAIN keeps only addresses it
//!    never had). nginx never logs a successful resolution, so "nothing
//!    selected (or served) since" counts only where an access log read
//!    covers the span from the resolver line to the refusal; else the
//!    refusal is `unknown`, naming `--access-log`.
//! 3. `unavailable`, where the list held peers: with an error log read
//!    (nginx writes every failed resolution there at level `error`), U
//!    served before the refusal and no NXDOMAIN line that could be its
//!    name's came since (where U's names are not known, every NXDOMAIN
//!    line could be); or one of U's resolving names, known
//!    (`--nginx-conf`, `--upstream-server`), has no failure logged.
//! 4. Else `unknown`, whose reason says what is missing and which flag
//!    would give it (`--error-log`; `--access-log` where it would show
//!    whether anything of U was selected; `--upstream-server` where
//!    resolver lines of names not known to be U's could be; else
//!    `--nginx-conf`).

use super::{Classifier, Family, Shape, Skeleton, Verdict, SECOND};
use crate::collect::ErrorKind;

/// How to pass the access log that would decide.
const PASS_ACCESS: &str = "pass the access log its requests are written to (--access-log PATH \
                           with --log-format, or --nginx-conf FILE)";

impl Classifier<'_> {
    /// Decides a refusal of `u` with no address of `u` seen serving in the
    /// window before it and no rule of its shape deciding it (see the
    /// module docs); `what` begins its reason (`selection refused`).
    pub(super) fn decide_unseen(&self, s: &Skeleton, u: &str, what: &str) -> Verdict {
        let t = s.time_ms;
        let data = self.data;
        let options = &data.options;
        let when = |ei: usize| data.error_time_text(&data.errors[ei]);
        // A retry's request selected a peer of the very list that refused
        // it (unless it tried only static primaries: then the backups'
        // list refused it), so that list was not empty when it started; an
        // NXDOMAIN since is the in-flight rule's.
        let had_peer =
            s.shape == Shape::TwoHop && s.tried.iter().any(|a| !options.is_primary(u, a));
        // 1. Static peers: the list held them.
        let statics = self.statics(s, u);
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
        // 2. Each name's NXDOMAIN with nothing selected since.
        if let Some(e) = self.nxdomains(u, None, t).filter(|_| !had_peer) {
            if e.emptied() {
                return self.emptied_verdict(&e, u, Some(what));
            }
            if let Some(gap) = e.uncovered() {
                return (
                    Family::Unknown,
                    format!(
                        "{what}; {}, but {gap}: no line says whether an address of {u} was \
                         selected since (the name resolved again, which nginx never logs) or \
                         none (the list was empty): {PASS_ACCESS}, from before that line",
                        self.nxdomain_text(&e)
                    ),
                    e.lines.last().copied(),
                );
            }
        }
        let first_served = self.first_served(u);
        let last_served = first_served
            .filter(|f| *f < t)
            .and_then(|_| self.last_served(u, t - 1, first_served));
        let (names, known) = self.names_of(u, t + self.window);
        // Each name's latest resolver line up to a window after (every
        // one is a failure: nginx logs no success); `None` for a name
        // with none (known names only: it resolved).
        let lines = self.lines_upto(u, t + self.window);
        let latest: Vec<Option<usize>> = names
            .iter()
            .map(|n| {
                lines
                    .iter()
                    .rev()
                    .copied()
                    .find(|ei| self.resolver_of(*ei).0 == *n)
            })
            .collect();
        // 2. Never served, and each name's answer was a failure.
        if last_served.is_none()
            && !had_peer
            && !names.is_empty()
            && latest.iter().all(Option::is_some)
        {
            let mut cited: Vec<usize> = latest.iter().flatten().copied().collect();
            cited.sort_unstable();
            let failures = cited
                .iter()
                .map(|ei| {
                    let (name, nxdomain) = self.resolver_of(*ei);
                    let code = if nxdomain {
                        " (3: Host not found)"
                    } else {
                        " (not NXDOMAIN)"
                    };
                    format!("{name} could not be resolved{code} at {}", when(*ei))
                })
                .collect::<Vec<_>>()
                .join(", ");
            let name = if names.len() == 1 {
                "the name had"
            } else {
                "its names had"
            };
            let from = data.errors[cited[0]].time_ms.min(t);
            return match self.access_gap(from, t) {
                None => (
                    Family::Empty,
                    format!(
                        "{what}; no address of {u} served before it, and {failures}: {name} \
                         not resolved, so the list was empty"
                    ),
                    cited.last().copied(),
                ),
                Some(gap) => (
                    Family::Unknown,
                    format!(
                        "{what}; {failures}, but {gap}: no line says whether an address of {u} \
                         served before it ({name} resolved, which nginx never logs) or none \
                         (the list was empty): {PASS_ACCESS}, from before that line"
                    ),
                    cited.last().copied(),
                ),
            };
        }
        // 3. The list held peers.
        let clean: Vec<&str> = names
            .iter()
            .zip(&latest)
            .filter(|(_, l)| known && l.is_none())
            .map(|(n, _)| *n)
            .collect();
        if let Some(l) = last_served {
            let ago = match t - l {
                ms if ms < 1_000 => format!("{ms} ms before it"),
                ms => format!("{:.1} s before it", ms as f64 / 1_000.0),
            };
            // The NXDOMAIN lines since U last served that could be its
            // names': its own where they are known, else any.
            let since: Vec<usize> = self
                .errors_between(l - SECOND + 1, t)
                .filter(|ei| match data.errors[*ei].kind {
                    ErrorKind::Resolver { nxdomain, .. } => {
                        nxdomain && (!known || names.contains(&self.resolver_of(*ei).0))
                    }
                    _ => false,
                })
                .collect();
            if since.is_empty() {
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
            let mut failed: Vec<String> = since
                .iter()
                .map(|ei| self.resolver_of(*ei).0.to_string())
                .collect();
            failed.sort_unstable();
            failed.dedup();
            if !clean.is_empty() {
                return (
                    Family::Unavailable,
                    format!(
                        "{what}; an address of {u} served {ago}, and since then {} could not be \
                         resolved (3: Host not found), but {u} also resolves {}, which the error \
                         log has no failure to resolve: its list still held peers, none usable \
                         (down, max_fails, max_conns)",
                        failed.join(", "),
                        clean.join(", ")
                    ),
                    None,
                );
            }
            if known {
                return (
                    Family::Unknown,
                    format!(
                        "{what}; an address of {u} served {ago}, and since then {} could not be \
                         resolved (3: Host not found), while {u} resolves {}: no line says \
                         whether a name it still held resolved (its list held peers) or none \
                         did (empty); nginx logs neither a successful resolution nor which \
                         name an address came from",
                        failed.join(", "),
                        names.join(", ")
                    ),
                    None,
                );
            }
            let mut whose: Vec<String> = since.iter().map(|ei| self.whose(*ei)).collect();
            whose.sort_unstable();
            whose.dedup();
            return (
                Family::Unknown,
                format!(
                    "{what}; no address of {u} served since {ago}, and since then {} could not \
                     be resolved (3: Host not found), and which names {u} resolves is not \
                     known, so any of them could be its own: if {u} has `server NAME \
                     resolve`, pass --upstream-server {u}=NAME for each such NAME (or \
                     --nginx-conf FILE), and those names' lines decide",
                    whose.join(", ")
                ),
                None,
            );
        }
        if !clean.is_empty() {
            return (
                Family::Unavailable,
                format!(
                    "{what}; {u} resolves {} and the error log has no failure to resolve it: \
                     its list held peers, none usable (down, max_fails, max_conns), none of \
                     which served before it",
                    clean.join(", ")
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
                     could use: {PASS_ACCESS}"
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

    /// An NXDOMAIN line's name, and whose it is known to be: `NAME (tied
    /// to no upstream)` or `NAME (a name of U, V)`.
    fn whose(&self, ei: usize) -> String {
        let name = self.resolver_of(ei).0;
        let set = match self.data.errors[ei].kind {
            ErrorKind::Resolver { name, .. } => self.resolves.get(&name),
            _ => None,
        };
        match set.filter(|set| !set.is_empty()) {
            None => format!("{name} (tied to no upstream)"),
            Some(set) => format!(
                "{name} (a name of {})",
                set.iter().copied().collect::<Vec<_>>().join(", ")
            ),
        }
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
