//! What each arm must show, as data: the [`Claim`]s of its row in the arm
//! table (`arms.rs`), and the generic ones every arm of its kind must show
//! (its log complete, its faults run, no POST run twice). [`Arm::check`]
//! holds a run's [`ArmResult`] against them; `cargo xtask lab` and
//! `t/tests/statistical.rs` both call it, so one place says what each arm
//! shows.

use super::{Arm, ArmResult, Build, Dns, Options, Protocol};

/// First-attempt failures an HTTP arm with reclaim must show at least: at
/// 250 to 300 rps with reclaim 0.05 to 0.1 there are hundreds in 10 s.
const RECLAIM_FLOOR: u64 = 20;

/// First-attempt failures a stream arm must show at least: the dead
/// primaries' connect timeouts (about two a second, one per
/// `fail_timeout` probe of each dead peer, and the sessions they hold).
const DEAD_PRIMARY_FLOOR: u64 = 10;

/// DNS swaps an arm whose answer changes must show at least (one every
/// valid+1 s: 4 or 5 in 10 s).
const SWAP_FLOOR: u64 = 3;

/// How late after a swap nginx may log a no-live 502 of the race beyond
/// the reclaim delay: the backend's timer and nginx's retry, on a loaded
/// 2-core machine.
const SWAP_SLACK_MS: f64 = 100.0;

/// How early before a swap (as the DNS server timed its answer) nginx may
/// log a no-live 502 the swap caused: `$msec` is the worker's cached time,
/// taken when its event loop iteration began (another worker may apply the
/// new answer meanwhile) and truncated to the millisecond.
const SWAP_LEAD_MS: f64 = 50.0;

/// How a figure must compare.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmp {
    /// None at all.
    Zero,
    /// One at least.
    Positive,
    /// At least this many.
    AtLeast(u64),
    /// At least one per DNS swap of the run.
    OnePerSwap,
    /// More than half of the run's requests.
    Majority,
    /// Any number, none included: a figure the arm does not fix (a claim
    /// about the others of the same group still holds).
    Any,
}

impl Cmp {
    /// Whether `v`, a figure of `r`, compares as required.
    fn holds(self, v: u64, r: &ArmResult) -> bool {
        match self {
            Cmp::Zero => v == 0,
            Cmp::Positive => v > 0,
            Cmp::AtLeast(n) => v >= n,
            Cmp::OnePerSwap => v >= r.swaps as u64,
            Cmp::Majority => 2 * v > r.requests as u64,
            Cmp::Any => true,
        }
    }

    /// What is required, in words, with `r`'s figures it depends on.
    fn words(self, r: &ArmResult) -> String {
        match self {
            Cmp::Zero => "0".into(),
            Cmp::Positive => "at least 1".into(),
            Cmp::AtLeast(n) => format!("at least {n}"),
            Cmp::OnePerSwap => format!("at least one per swap ({})", r.swaps),
            Cmp::Majority => format!("more than half of the {} requests", r.requests),
            Cmp::Any => "any number".into(),
        }
    }
}

/// One thing an arm must show.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Claim {
    /// nginx logged every request (session) of the load, so the tallies
    /// are whole (generic).
    AllLogged,
    /// POSTs were sent and the backend received none twice: no POST ran
    /// twice, answered or not (generic, HTTP).
    NoPostTwice,
    /// DNS swaps: the DNS fault ran, or did not (generic: at least 3, or
    /// 0 with [`Dns::Steady`]).
    Swaps(Cmp),
    /// First-attempt failures in error.log: the reclaim fault ran, or did
    /// not; for stream, the dead primaries' timeouts (generic: at least 20
    /// with reclaim, 0 without; at least 10 for stream). A row's own
    /// `FirstAttemptFailures` replaces the generic one.
    FirstAttemptFailures(Cmp),
    /// Every GET that failed was a no-live 502 (2-hop or 1-hop): the other
    /// failures are POSTs, which nginx does not retry once sent (generic,
    /// HTTP).
    FailedGetsAreNoLive,
    /// The module's `no_live` counters (every cause) add up to the no-live
    /// 502s of nginx's log: each is counted, under one cause (generic,
    /// module).
    NoLiveCounted,
    /// Every rescue counted was logged, one line each (generic, module).
    RescuesLogged,
    /// Every generation-busy selection ended rescued or failed, one of the
    /// two: busy == rescued + failed (generic, module).
    BusyIsRescuedPlusFailed,
    /// 2-hop 502s: refused at a retry's selection (the race).
    TwoHop502(Cmp),
    /// 1-hop 502s: refused at the first selection.
    OneHop502(Cmp),
    /// Every no-live 502 came within the reclaim delay of the swap before
    /// it: the race's window is a request in flight across a swap.
    NoLiveSoonAfterSwap,
    /// Every GET (every stream session) got its answer.
    EveryGetOk,
    /// Every request, GET and POST, got its answer, and every POST reached
    /// the backend.
    EveryRequestOk,
    /// Failed requests that are not no-live 502s (a failed attempt
    /// answered with a 502 of its own address); replaces the generic
    /// [`Claim::FailedGetsAreNoLive`].
    OtherErrors(Cmp),
    /// The module's `no_live` counters by cause.
    NoLive {
        generation: Cmp,
        unavailable: Cmp,
        empty: Cmp,
    },
    /// The race happened and every generation-busy selection was rescued
    /// (rescued == busy > 0).
    RescuedIsBusy,
    /// The module, observing only, counted as generation-busy exactly the
    /// no-live 502s it let through (busy == 2-hop + 1-hop), and rescued
    /// none.
    BusyIsNoLive502,
}

impl Claim {
    /// `None` if `r` shows the claim; else what was required and what `r`
    /// shows, in words.
    fn failure(self, r: &ArmResult, opts: &Options) -> Option<String> {
        let no_live_502 = (r.two_hop_502 + r.one_hop_502) as u64;
        let cmp = |what: &str, c: Cmp, v: u64| {
            (!c.holds(v, r)).then(|| format!("{what}: {} required, {v} seen", c.words(r)))
        };
        let module = |what: &str, v: Option<u64>| v.ok_or(format!("{what}: no module status"));
        match self {
            Claim::AllLogged => (r.logged != r.requests).then(|| {
                format!(
                    "nginx logged {} of the {} requests: the tallies miss some",
                    r.logged, r.requests
                )
            }),
            Claim::NoPostTwice => {
                if r.post_sent == 0 {
                    Some("no POST was sent".into())
                } else {
                    (r.post_received_twice > 0).then(|| {
                        format!(
                            "{} POSTs were received twice: a POST ran twice",
                            r.post_received_twice
                        )
                    })
                }
            }
            Claim::Swaps(c) => cmp("DNS swaps", c, r.swaps as u64),
            Claim::FirstAttemptFailures(c) => cmp(
                "first-attempt failures in error.log",
                c,
                r.first_attempt_failures as u64,
            ),
            Claim::FailedGetsAreNoLive => (r.retryable_failed as u64 > no_live_502).then(|| {
                format!(
                    "{} GETs failed but only {no_live_502} no-live 502s were logged: \
                     some GETs failed otherwise",
                    r.retryable_failed
                )
            }),
            Claim::NoLiveCounted => match r.no_live {
                None => Some("no_live: no module status".into()),
                Some(n) => (n.iter().sum::<u64>() != no_live_502).then(|| {
                    format!(
                        "no_live counters {}/{}/{} (generation/unavailable/empty) do not add up \
                         to the {no_live_502} no-live 502s logged (2-hop {}, 1-hop {})",
                        n[0], n[1], n[2], r.two_hop_502, r.one_hop_502
                    )
                }),
            },
            Claim::RescuesLogged => match module("rescued", r.rescued) {
                Err(e) => Some(e),
                Ok(n) => (n != r.rescued_logged as u64).then(|| {
                    format!(
                        "rescued {n} counted but {} rescue lines logged",
                        r.rescued_logged
                    )
                }),
            },
            Claim::BusyIsRescuedPlusFailed => match (r.busy, r.rescued, r.failed) {
                (Some(busy), Some(rescued), Some(failed)) => {
                    (busy != rescued + failed).then(|| {
                        format!(
                            "busy {busy} != rescued {rescued} + failed {failed}: \
                             some generation-busy selection ended neither way, or twice"
                        )
                    })
                }
                _ => Some("busy, rescued, failed: no module status".into()),
            },
            Claim::OtherErrors(c) => cmp(
                "failed requests that are not no-live 502s",
                c,
                r.other_errors as u64,
            ),
            Claim::TwoHop502(c) => cmp("2-hop 502s", c, r.two_hop_502 as u64),
            Claim::OneHop502(c) => cmp("1-hop 502s", c, r.one_hop_502 as u64),
            Claim::NoLiveSoonAfterSwap => {
                let after = opts.reclaim_delay.as_secs_f64() + SWAP_SLACK_MS / 1000.0;
                let before = SWAP_LEAD_MS / 1000.0;
                let outside: Vec<String> = r
                    .failure_times
                    .iter()
                    .filter(|f| {
                        !r.swap_times
                            .iter()
                            .any(|s| (s - before..=s + after).contains(*f))
                    })
                    .map(|f| {
                        match r
                            .swap_times
                            .iter()
                            .copied()
                            .filter(|s| s <= f)
                            .reduce(f64::max)
                        {
                            Some(s) => format!("{:.0} ms after a swap", (f - s) * 1000.0),
                            None => format!("{f:.3} s into the load, before any swap"),
                        }
                    })
                    .collect();
                (!outside.is_empty()).then(|| {
                    format!(
                        "no-live 502s outside the race's window (from {SWAP_LEAD_MS} ms before \
                         a swap to the reclaim delay, {:?}, and {SWAP_SLACK_MS} ms after): {}",
                        opts.reclaim_delay,
                        outside.join(", ")
                    )
                })
            }
            Claim::EveryGetOk => (r.retryable_failed > 0)
                .then(|| format!("{} GETs (sessions) failed", r.retryable_failed)),
            Claim::EveryRequestOk => {
                let failed = r.two_hop_502 + r.one_hop_502 + r.other_errors;
                (failed > 0 || r.status_502 > 0 || r.post_delivered != r.post_sent).then(|| {
                    format!(
                        "{failed} requests failed ({} 502s), {} of {} POSTs delivered",
                        r.status_502, r.post_delivered, r.post_sent
                    )
                })
            }
            Claim::NoLive {
                generation,
                unavailable,
                empty,
            } => match r.no_live {
                None => Some("no_live: no module status".into()),
                Some([g, u, e]) => {
                    let failed: Vec<String> = [
                        cmp("generation", generation, g),
                        cmp("unavailable", unavailable, u),
                        cmp("empty", empty, e),
                    ]
                    .into_iter()
                    .flatten()
                    .collect();
                    (!failed.is_empty()).then(|| format!("no_live {}", failed.join("; ")))
                }
            },
            Claim::RescuedIsBusy => match (r.rescued, r.busy) {
                (Some(rescued), Some(busy)) => (rescued != busy || busy == 0).then(|| {
                    format!(
                        "rescued {rescued} of {busy} generation-busy selections \
                         (all of at least one required)"
                    )
                }),
                _ => Some("rescued, busy: no module status".into()),
            },
            Claim::BusyIsNoLive502 => match (r.rescued, r.busy) {
                (Some(rescued), Some(busy)) => (busy != no_live_502 || rescued != 0).then(|| {
                    format!(
                        "busy {busy}, rescued {rescued}: required busy == the {no_live_502} \
                         no-live 502s logged, rescued 0"
                    )
                }),
                _ => Some("rescued, busy: no module status".into()),
            },
        }
    }

    /// Whether `other` is a claim about the same figure (so a row's claim
    /// replaces the generic one).
    fn same_figure(self, other: Claim) -> bool {
        let failed_otherwise =
            |c: Claim| matches!(c, Claim::FailedGetsAreNoLive | Claim::OtherErrors(_));
        std::mem::discriminant(&self) == std::mem::discriminant(&other)
            || (failed_otherwise(self) && failed_otherwise(other))
    }
}

impl Arm {
    /// What every arm of this one's kind must show: its log complete, its
    /// faults run (or not run, where the row leaves one out), and, with
    /// HTTP, no POST run twice and no GET failed but as a no-live 502; with
    /// the module, every no-live 502 and every rescue counted.
    fn generic_claims(self) -> Vec<Claim> {
        let row = self.row();
        let mut claims = vec![Claim::AllLogged];
        claims.push(Claim::Swaps(if row.dns == Dns::Steady {
            Cmp::Zero
        } else {
            Cmp::AtLeast(SWAP_FLOOR)
        }));
        match row.protocol {
            Protocol::Http => {
                claims.push(Claim::NoPostTwice);
                claims.push(Claim::FirstAttemptFailures(if row.reclaim {
                    Cmp::AtLeast(RECLAIM_FLOOR)
                } else {
                    Cmp::Zero
                }));
                claims.push(Claim::FailedGetsAreNoLive);
            }
            Protocol::Stream => {
                claims.push(Claim::FirstAttemptFailures(Cmp::AtLeast(
                    DEAD_PRIMARY_FLOOR,
                )));
            }
        }
        if matches!(row.build, Build::Module(_)) {
            claims.push(Claim::NoLiveCounted);
            claims.push(Claim::RescuesLogged);
            claims.push(Claim::BusyIsRescuedPlusFailed);
        }
        claims
    }

    /// Every claim the arm must show: the generic ones (less those its row
    /// states its own figure for), then its row's.
    pub fn claims(self) -> Vec<Claim> {
        let own = self.row().claims;
        let mut claims: Vec<Claim> = self
            .generic_claims()
            .into_iter()
            .filter(|g| !own.iter().any(|c| c.same_figure(*g)))
            .collect();
        claims.extend_from_slice(own);
        claims
    }

    /// The claims of the arm that `r` (its run under `opts`) fails, one
    /// sentence each naming the arm, the claim and the figures; empty when
    /// it shows them all.
    pub fn check(self, r: &ArmResult, opts: &Options) -> Vec<String> {
        self.claims()
            .into_iter()
            .filter_map(|c| {
                c.failure(r, opts)
                    .map(|f| format!("{}: {c:?}: {f}", self.name()))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stock run that shows the race, every figure consistent.
    fn stock() -> ArmResult {
        ArmResult {
            arm: "stock".into(),
            requests: 2500,
            logged: 2500,
            retryable_failed: 16,
            status_502: 29,
            two_hop_502: 16,
            other_errors: 13,
            first_attempt_failures: 264,
            swaps: 4,
            ms_after_swap: vec![100.0; 16],
            swap_times: vec![2.0, 4.0, 6.0, 8.0],
            failure_times: vec![2.1; 16],
            post_sent: 125,
            post_delivered: 112,
            ..ArmResult::default()
        }
    }

    #[test]
    fn a_run_showing_every_claim_passes() {
        assert_eq!(
            Arm::Stock.check(&stock(), &Options::default()),
            Vec::<String>::new()
        );
    }

    #[test]
    fn each_failed_claim_is_named_with_its_figures() {
        let opts = Options::default();
        let mut r = stock();
        r.two_hop_502 = 0;
        r.retryable_failed = 0;
        r.ms_after_swap.clear();
        r.failure_times.clear();
        r.logged = 2499;
        r.post_received_twice = 1;
        let failed = Arm::Stock.check(&r, &opts);
        assert_eq!(failed.len(), 3, "{failed:#?}");
        assert!(failed[0].starts_with("stock: AllLogged: nginx logged 2499 of the 2500"));
        assert!(failed[1].contains("NoPostTwice: 1 POSTs were received twice"));
        assert!(failed[2].contains("TwoHop502(Positive): 2-hop 502s: at least 1 required, 0 seen"));

        // $msec may precede the swap's recorded time a little, not more.
        let mut early = stock();
        early.failure_times[2] = 5.999;
        assert_eq!(Arm::Stock.check(&early, &opts), Vec::<String>::new());
        let mut late = stock();
        late.failure_times[3] = 4.45;
        late.failure_times[4] = 5.9;
        late.failure_times[5] = 1.0;
        let failed = Arm::Stock.check(&late, &opts);
        assert_eq!(failed.len(), 1, "{failed:#?}");
        assert!(
            failed[0].ends_with(
                "450 ms after a swap, 1900 ms after a swap, 1.000 s into the load, before any swap"
            ),
            "{failed:#?}"
        );
    }

    #[test]
    fn module_claims_need_the_status_and_count_every_no_live() {
        let opts = Options::default();
        let mut r = ArmResult {
            arm: "module-off".into(),
            busy: Some(16),
            rescued: Some(0),
            failed: Some(16),
            no_live: Some([16, 0, 0]),
            ..stock()
        };
        assert_eq!(Arm::ModuleOff.check(&r, &opts), Vec::<String>::new());
        r.no_live = Some([15, 0, 0]);
        r.busy = Some(15);
        let failed = Arm::ModuleOff.check(&r, &opts);
        assert_eq!(failed.len(), 3, "{failed:#?}");
        assert!(failed[0].contains("NoLiveCounted"));
        assert!(failed[1].contains("BusyIsRescuedPlusFailed: busy 15 != rescued 0 + failed 16"));
        assert!(failed[2].contains("BusyIsNoLive502: busy 15, rescued 0"));
        r.no_live = None;
        assert!(Arm::ModuleOff
            .check(&r, &opts)
            .iter()
            .any(|f| f.contains("no module status")));
    }

    #[test]
    fn a_rows_own_figure_replaces_the_generic_one() {
        let claims = Arm::StockBackup.claims();
        let floors: Vec<&Claim> = claims
            .iter()
            .filter(|c| matches!(c, Claim::FirstAttemptFailures(_)))
            .collect();
        assert_eq!(floors, [&Claim::FirstAttemptFailures(Cmp::OnePerSwap)]);
        assert!(Arm::ReclaimOnly.claims().contains(&Claim::Swaps(Cmp::Zero)));
        assert!(Arm::AlternationOnly
            .claims()
            .contains(&Claim::FirstAttemptFailures(Cmp::Zero)));
        assert!(!Arm::StreamStock.claims().contains(&Claim::NoPostTwice));
    }

    #[test]
    fn every_arm_claims_something_of_its_own() {
        for a in Arm::ALL {
            assert!(!a.row().claims.is_empty(), "{} claims nothing", a.name());
        }
    }
}
