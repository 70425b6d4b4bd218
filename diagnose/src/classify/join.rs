//! Joining: each `no live upstreams` line paired with the access 502 of
//! the same request, each request's own error lines, and the skeleton of
//! each incident (its shape, upstream, tries and start).

use super::{Classifier, RequestKey, Shape, Skeleton, SECOND};
use crate::access::{self, last_group_hops, Hop};
use crate::collect::ErrorKind;

impl Classifier<'_> {
    /// Pairs `no live upstreams` lines with access 502s: for each failure,
    /// the error line joined to it; for each error line, whether joined.
    pub(super) fn join(&self) -> (Vec<Option<usize>>, Vec<bool>) {
        let data = self.data;
        let mut joined = vec![None; data.failures.len()];
        let mut error_joined = vec![false; data.errors.len()];
        let tolerance = self.window + SECOND;
        for (ei, e) in data.errors.iter().enumerate() {
            if e.kind != ErrorKind::NoLive {
                continue;
            }
            let upstream = data.error_upstream(e);
            let f = &data.failures;
            let (from, to) = (e.time_ms - tolerance, e.time_ms + tolerance);
            let candidates: Vec<usize> = if data.has_connection {
                e.connection()
                    .and_then(|c| self.failures_by_conn.get(&c))
                    .map(|list| {
                        list.iter()
                            .copied()
                            .filter(|fi| (from..=to).contains(&f[*fi].time_ms))
                            .collect()
                    })
                    .unwrap_or_default()
            } else {
                (f.partition_point(|x| x.time_ms < from)..f.partition_point(|x| x.time_ms <= to))
                    .collect()
            };
            let mut best: Option<(i64, usize)> = None;
            for fi in candidates {
                let a = &f[fi];
                let Some(name) = self.refused[fi] else {
                    continue;
                };
                if joined[fi].is_some() || upstream.is_some_and(|u| u != name) {
                    continue;
                }
                let same = if data.has_connection {
                    true
                } else if data.has_request {
                    same_if_known(a.request_key(), e.request_key())
                        && same_if_known(a.client_key(), e.client_key())
                } else {
                    true
                };
                // The line's second, from its middle.
                let distance = (a.time_ms - (e.time_ms + SECOND / 2)).abs();
                if same && best.is_none_or(|(d, _)| distance < d) {
                    best = Some((distance, fi));
                }
            }
            if let Some((_, fi)) = best {
                joined[fi] = Some(ei);
                error_joined[ei] = true;
            }
        }
        (joined, error_joined)
    }

    /// The request's own peer-error and disabled lines, shortly before `t`.
    fn own_lines(&self, key: &RequestKey, t: i64, skip: Option<usize>) -> Vec<usize> {
        if key.connection.is_none() && key.request.is_none() {
            return Vec::new();
        }
        let (from, to) = (t - self.window - SECOND, t + SECOND);
        let in_time =
            |ei: &usize| Some(*ei) != skip && (from..=to).contains(&self.data.errors[*ei].time_ms);
        if let Some(c) = key.connection {
            return self
                .errors_by_conn
                .get(&c)
                .map(|list| list.iter().copied().filter(in_time).collect())
                .unwrap_or_default();
        }
        self.errors_between(from, to)
            .filter(in_time)
            .filter(|ei| {
                let e = &self.data.errors[*ei];
                matches!(e.kind, ErrorKind::PeerError | ErrorKind::Disabled)
                    && e.request_key().is_some()
                    && same_if_known(key.request, e.request_key())
                    && same_if_known(key.client, e.client_key())
            })
            .collect()
    }

    pub(super) fn skeleton_of_access(&self, fi: usize, joined: Option<usize>) -> Skeleton {
        let a = &self.data.failures[fi];
        let upstream_addr = self.data.upstream_addr(a);
        let hops = last_group_hops(upstream_addr);
        // The attempt just before the refused selection: in "A, B, be" B
        // failed last, and its failure is what the retry followed.
        let prev_addr = match hops.split_last() {
            Some((Hop::Name(_), earlier)) => earlier.iter().rev().find_map(|h| match h {
                Hop::Addr(x) => Some(x.to_string()),
                Hop::Name(_) => None,
            }),
            _ => None,
        };
        let (shape, upstream) = match hops.last() {
            Some(Hop::Name(n)) if prev_addr.is_some() => (Shape::TwoHop, Some(n.to_string())),
            Some(Hop::Name(n)) => (Shape::OneHop, Some(n.to_string())),
            Some(Hop::Addr(x)) => (
                Shape::Address,
                self.data.timeline.upstream_of(x).map(str::to_string),
            ),
            None => (Shape::NoUpstream, None),
        };
        let joined_error = joined.map(|ei| &self.data.errors[ei]);
        let key = RequestKey {
            connection: a.connection().or(joined_error.and_then(|e| e.connection())),
            request: a.request_key(),
            client: a.client_key(),
        };
        let connection = key.connection;
        let mut own_errors: Vec<usize> = joined.into_iter().collect();
        own_errors.extend(self.own_lines(&key, a.time_ms, joined));
        own_errors.sort_unstable();
        let tried = hops
            .iter()
            .filter_map(|h| match h {
                Hop::Addr(x) => Some(x.to_string()),
                Hop::Name(_) => None,
            })
            .collect();
        Skeleton {
            time_ms: a.time_ms,
            time_text: self.data.failure_time_text(a),
            status: a.status,
            upstream,
            upstream_addr: upstream_addr.to_string(),
            shape,
            prev_addr,
            tried,
            start_ms: a.start_ms(),
            connection,
            access: Some(fi),
            no_live: joined,
            own_errors,
        }
    }

    pub(super) fn skeleton_of_error(&self, ei: usize) -> Skeleton {
        let e = &self.data.errors[ei];
        // The line's time has whole seconds: look from the middle of it.
        let t = e.time_ms + SECOND / 2;
        let key = RequestKey {
            connection: e.connection(),
            request: e.request_key(),
            client: e.client_key(),
        };
        let own = self.own_lines(&key, t, Some(ei));
        let prev_addr = own.iter().rev().find_map(|i| {
            let host = self.data.error_upstream(&self.data.errors[*i])?;
            access::is_address(host).then(|| host.to_string())
        });
        let mut own_errors = vec![ei];
        own_errors.extend(own);
        own_errors.sort_unstable();
        Skeleton {
            time_ms: t,
            time_text: self.data.error_time_text(e),
            status: 502,
            upstream: self.data.error_upstream(e).map(str::to_string),
            upstream_addr: String::new(),
            shape: if prev_addr.is_some() {
                Shape::TwoHop
            } else {
                Shape::OneHop
            },
            tried: prev_addr.iter().cloned().collect(),
            start_ms: None,
            connection: e.connection(),
            prev_addr,
            access: None,
            no_live: Some(ei),
            own_errors,
        }
    }
}

/// Equal when both are known; true when either is unknown.
fn same_if_known(a: Option<u64>, b: Option<u64>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => a == b,
        _ => true,
    }
}
