//! The arms: one row each in [`arms!`]'s table, holding everything that
//! tells an arm from another. Adding an arm is adding a row.

use std::net::Ipv4Addr;

use super::claims::{Claim, Cmp};
use crate::actors::dns::Answer;
use crate::nginx::Flavor;

/// What an arm proxies, and so which loop drives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// HTTP requests to `upstream be`, one re-resolving peer with
    /// keepalive; the backend reclaims reused connections (see `lab/http.rs`).
    Http,
    /// TCP sessions to a stream `upstream be` whose primaries are dead and
    /// whose backup re-resolves (see `lab/stream.rs`).
    Stream,
}

/// Which nginx an arm runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Build {
    /// Stock nginx.
    Stock,
    /// Stock nginx with the module loaded and `generation_retry_resnapshot`
    /// set to this (in the upstream for HTTP, at stream level for stream).
    Module(&'static str),
    /// nginx with the core patch, no module.
    Patched,
}

/// What the DNS answers for the re-resolving name once the load starts,
/// between the arm's two addresses `a` (the first answer) and `b`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dns {
    /// `a`, always: no swap.
    Steady,
    /// `a`, `b`, `a`, ...: a swap at every re-resolve.
    Rotate,
    /// `a`, then briefly both, `b`, both again (max_fails wipe-out).
    TwoRecords,
    /// `a`, `b`, then NXDOMAIN (the list empties).
    NxDomain,
}

impl Dns {
    /// The schedule to set once the load starts; `None` leaves `a`.
    pub fn schedule(self, a: Ipv4Addr, b: Ipv4Addr) -> Option<Answer> {
        match self {
            Dns::Steady => None,
            Dns::Rotate => Some(Answer::rotate(&[a, b])),
            Dns::TwoRecords => Some(Answer::Cycle(vec![
                Answer::A(vec![a]),
                Answer::A(vec![a, b]),
                Answer::A(vec![b]),
                Answer::A(vec![b, a]),
            ])),
            Dns::NxDomain => Some(Answer::Cycle(vec![
                Answer::A(vec![a]),
                Answer::A(vec![b]),
                Answer::NxDomain,
            ])),
        }
    }
}

/// One arm's description.
#[derive(Clone, Copy, Debug)]
pub struct Row {
    /// Its name on the command line and in the results.
    pub name: &'static str,
    pub protocol: Protocol,
    pub build: Build,
    pub dns: Dns,
    /// Whether the backend reclaims reused keepalive connections (HTTP).
    pub reclaim: bool,
    /// Parameters added to the re-resolving `server` line (HTTP).
    pub server_params: &'static str,
    /// A line added to `upstream be` after its `server` lines (HTTP).
    pub upstream_line: &'static str,
    /// A line added to the proxying location (HTTP).
    pub location_line: &'static str,
    /// The `error_page 502 = @retry_once` workaround (HTTP).
    pub retry_once: bool,
    /// Whether `--quick` runs it.
    pub quick: bool,
    /// Whether it makes labelled logs for `generation-retry-diagnose`'s
    /// accuracy test (`t/tests/diagnose.rs`), which runs it and checks its
    /// claims, instead of `t/tests/statistical.rs`. Such an arm runs the
    /// module in observe mode (`off`): nginx fails exactly as stock does,
    /// and the module logs the cause of every `no live upstreams`.
    pub labels: bool,
    /// What a run of it must show besides the generic claims of its kind
    /// (see `claims.rs`); a claim about a figure a generic claim covers
    /// replaces that one.
    pub claims: &'static [Claim],
}

/// The seed's HTTP setting, stock: every fault, nothing added.
const HTTP: Row = Row {
    name: "",
    protocol: Protocol::Http,
    build: Build::Stock,
    dns: Dns::Rotate,
    reclaim: true,
    server_params: "",
    upstream_line: "",
    location_line: "",
    retry_once: false,
    quick: false,
    labels: false,
    claims: &[],
};

/// The stream setting, stock: the dead primaries, the backup swapping.
const STREAM: Row = Row {
    protocol: Protocol::Stream,
    reclaim: false,
    ..HTTP
};

/// `arms! { /// doc  Variant => row, ... }`: the [`Arm`] enum, one variant
/// per row, [`Arm::ALL`] in table order, and [`Arm::row`].
macro_rules! arms {
    ($($(#[$doc:meta])* $variant:ident => $row:expr,)*) => {
        /// One configuration under test (see [`Row`]).
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum Arm {
            $($(#[$doc])* $variant,)*
        }

        impl Arm {
            pub const ALL: &'static [Arm] = &[$(Arm::$variant),*];

            /// The arm's row of the table.
            pub fn row(self) -> &'static Row {
                const ROWS: &[Row] = &[$($row),*];
                &ROWS[self as usize]
            }
        }
    };
}

arms! {
    /// Stock nginx 1.28.0, the seed's configuration: the race's 2-hop 502s,
    /// each within the reclaim delay of a swap.
    Stock => Row {
        name: "stock",
        quick: true,
        claims: &[Claim::TwoHop502(Cmp::Positive), Claim::NoLiveSoonAfterSwap],
        ..HTTP
    },
    /// Stock with `max_fails=0` (the seed: no effect): the 2-hop 502s
    /// remain.
    StockMaxFails0 => Row {
        name: "stock+max_fails=0",
        server_params: " max_fails=0",
        claims: &[Claim::TwoHop502(Cmp::Positive), Claim::NoLiveSoonAfterSwap],
        ..HTTP
    },
    /// Stock with a `backup` server (the seed: worse): the single primary
    /// is no longer `single`, so one reclaimed request marks it failed
    /// (max_fails=1) and, the backup failing too, every request is refused
    /// at its first selection until the next swap brings a fresh peer. So
    /// most requests are 1-hop 502s, and few reach the reclaim fault: one
    /// at least per fresh peer.
    StockBackup => Row {
        name: "stock+backup",
        upstream_line: "server 127.0.0.4:${BPORT} backup;",
        claims: &[
            Claim::OneHop502(Cmp::Majority),
            Claim::FirstAttemptFailures(Cmp::OnePerSwap),
        ],
        ..HTTP
    },
    /// Stock with the seed's `error_page 502 = @retry_once` workaround: a
    /// second pass hides the 2-hop 502s, and every GET is answered.
    StockRetryOnce => Row {
        name: "stock+@retry_once",
        retry_once: true,
        claims: &[
            Claim::TwoHop502(Cmp::Zero),
            Claim::OneHop502(Cmp::Zero),
            Claim::EveryGetOk,
        ],
        ..HTTP
    },
    /// The module, `off`: observe only. Stock's 2-hop 502s, each counted
    /// as generation-busy and as `no_live` cause generation, none rescued.
    ModuleOff => Row {
        name: "module-off",
        build: Build::Module("off"),
        quick: true,
        claims: &[
            Claim::TwoHop502(Cmp::Positive),
            Claim::BusyIsNoLive502,
            Claim::NoLive { generation: Cmp::Positive, unavailable: Cmp::Zero, empty: Cmp::Zero },
            Claim::NoLiveSoonAfterSwap,
        ],
        ..HTTP
    },
    /// The module, `on`: no no-live 502 of any shape or cause, every GET
    /// answered, every generation-busy selection rescued.
    ModuleOn => Row {
        name: "module-on",
        build: Build::Module("on"),
        quick: true,
        claims: &[
            Claim::TwoHop502(Cmp::Zero),
            Claim::OneHop502(Cmp::Zero),
            Claim::EveryGetOk,
            Claim::RescuedIsBusy,
            Claim::NoLive { generation: Cmp::Zero, unavailable: Cmp::Zero, empty: Cmp::Zero },
        ],
        ..HTTP
    },
    /// nginx with the core patch, no module: no no-live 502, every GET
    /// answered.
    Patched => Row {
        name: "patched",
        build: Build::Patched,
        quick: true,
        claims: &[Claim::TwoHop502(Cmp::Zero), Claim::OneHop502(Cmp::Zero), Claim::EveryGetOk],
        ..HTTP
    },
    /// Control: DNS alternation alone, no reclaim: no failure at all (and,
    /// generic, no first-attempt failure).
    AlternationOnly => Row {
        name: "control:alternation-only",
        reclaim: false,
        claims: &[Claim::EveryRequestOk],
        ..HTTP
    },
    /// Control: reclaim alone, fixed address: nginx's retry rescues every
    /// GET, no no-live 502 (and, generic, no swap).
    ReclaimOnly => Row {
        name: "control:reclaim-only",
        dns: Dns::Steady,
        claims: &[Claim::TwoHop502(Cmp::Zero), Claim::OneHop502(Cmp::Zero), Claim::EveryGetOk],
        ..HTTP
    },
    /// Sibling family: the name briefly answers two records (max_fails
    /// wipe-out), module on to show the cause: every no-live 502 is
    /// `unavailable`, none `generation`.
    TwoRecords => Row {
        name: "sibling:two-records",
        build: Build::Module("on"),
        dns: Dns::TwoRecords,
        claims: &[Claim::NoLive {
            generation: Cmp::Zero,
            unavailable: Cmp::Positive,
            empty: Cmp::Zero,
        }],
        ..HTTP
    },
    /// Sibling family: NXDOMAIN empties the list, module on: every no-live
    /// 502 is `empty`, none `generation`.
    NxDomain => Row {
        name: "sibling:nxdomain",
        build: Build::Module("on"),
        dns: Dns::NxDomain,
        claims: &[Claim::NoLive {
            generation: Cmp::Zero,
            unavailable: Cmp::Zero,
            empty: Cmp::Positive,
        }],
        ..HTTP
    },
    /// Labelled logs: the two-record flapping in observe mode. Its
    /// no-live 502s mix the wipe-out's (`unavailable`) with the race's
    /// (`generation`, as the set changes at every re-resolve).
    ObserveTwoRecords => Row {
        name: "observe:two-records",
        build: Build::Module("off"),
        dns: Dns::TwoRecords,
        labels: true,
        claims: &[Claim::NoLive {
            generation: Cmp::Any,
            unavailable: Cmp::Positive,
            empty: Cmp::Zero,
        }],
        ..HTTP
    },
    /// Labelled logs: NXDOMAIN in observe mode: `empty` 502s beside the
    /// race's.
    ObserveNxDomain => Row {
        name: "observe:nxdomain",
        build: Build::Module("off"),
        dns: Dns::NxDomain,
        labels: true,
        claims: &[Claim::NoLive {
            generation: Cmp::Any,
            unavailable: Cmp::Zero,
            empty: Cmp::Positive,
        }],
        ..HTTP
    },
    /// Labelled logs: plain connect failures, family `other`. A second
    /// peer refuses every connection (nothing listens on 127.0.0.1:9, discard;
    /// neither peer is ever marked down) and
    /// `proxy_next_upstream off` answers each failed attempt, refused or
    /// reclaimed, with a 502 of one address, while the name keeps
    /// swapping: 502s near every address change that are not the race.
    ObserveConnectRefused => Row {
        name: "observe:connect-refused",
        build: Build::Module("off"),
        server_params: " max_fails=0",
        upstream_line: "server 127.0.0.1:9 max_fails=0;",
        location_line: "proxy_next_upstream off;",
        labels: true,
        claims: &[
            Claim::TwoHop502(Cmp::Zero),
            Claim::OneHop502(Cmp::Zero),
            Claim::OtherErrors(Cmp::AtLeast(100)),
        ],
        ..HTTP
    },
    /// Stream (TCP), stock: sessions through an upstream whose primary is
    /// a dead peer (connects time out) and whose backup re-resolves; a
    /// retry that meets a changed generation fails (2-hop).
    StreamStock => Row {
        name: "stream:stock",
        claims: &[Claim::TwoHop502(Cmp::Positive)],
        ..STREAM
    },
    /// Stream, the module `on`: no no-live failure, every generation-busy
    /// selection rescued, and no other failure either: a session rescued
    /// after trying dead primaries does not try them again (issue 14).
    StreamModuleOn => Row {
        name: "stream:module-on",
        build: Build::Module("on"),
        claims: &[
            Claim::TwoHop502(Cmp::Zero),
            Claim::OneHop502(Cmp::Zero),
            Claim::EveryGetOk,
            Claim::RescuedIsBusy,
            Claim::NoLive { generation: Cmp::Zero, unavailable: Cmp::Zero, empty: Cmp::Zero },
        ],
        ..STREAM
    },
    /// Stream, the patched nginx: no no-live failure, and no other.
    StreamPatched => Row {
        name: "stream:patched",
        build: Build::Patched,
        claims: &[
            Claim::TwoHop502(Cmp::Zero),
            Claim::OneHop502(Cmp::Zero),
            Claim::EveryGetOk,
        ],
        ..STREAM
    },
}

impl Arm {
    pub fn name(self) -> &'static str {
        self.row().name
    }

    pub fn parse(name: &str) -> Option<Arm> {
        Arm::ALL.iter().copied().find(|a| a.name() == name)
    }

    /// Whether the arm needs the patched nginx.
    pub fn patched(self) -> bool {
        self.row().build == Build::Patched
    }

    /// Whether `--quick` runs the arm.
    pub fn quick(self) -> bool {
        self.row().quick
    }

    /// Whether the arm makes labelled logs (see [`Row::labels`]).
    pub fn labels(self) -> bool {
        self.row().labels
    }

    /// `generation_retry_resnapshot`'s value, with the module.
    pub(super) fn resnapshot(self) -> Option<&'static str> {
        match self.row().build {
            Build::Module(value) => Some(value),
            _ => None,
        }
    }

    pub(super) fn flavor(self) -> Flavor {
        match self.row().build {
            Build::Stock => Flavor::stock(),
            Build::Module(_) => Flavor::with_module(),
            Build::Patched => Flavor::patched(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arms_round_trip_by_name() {
        for a in Arm::ALL {
            assert_eq!(Arm::parse(a.name()), Some(*a));
        }
        assert_eq!(Arm::parse("nope"), None);
    }

    #[test]
    fn names_are_unique_and_rows_in_order() {
        for (i, a) in Arm::ALL.iter().enumerate() {
            assert_eq!(*a as usize, i);
            assert!(!a.name().is_empty());
            assert_eq!(Arm::ALL.iter().filter(|b| b.name() == a.name()).count(), 1);
        }
    }
}
