//! The peer wrapper: outermost around whatever balancer (and keepalive) an
//! upstream uses. Each selection goes through the rescue rule of
//! `generation_retry_core::rescue`; this file and its two children are the
//! FFI glue: [`inner`] keeps the inner balancer's callbacks, [`history`]
//! the addresses the request tried, [`live`] implements the rule's
//! `Balancer` over the live peer connection, and [`get_peer`] logs and
//! counts what the rule decided.
//!
//! Safety of the re-snapshot, point by point:
//! - fresh state: `u->peer.data` is set to NULL before the original
//!   `peer.init` runs again, so round-robin allocates a new state instead of
//!   reusing ours (or keepalive's) as if it were its own;
//! - no stale reference: NGX_BUSY takes no peer reference, and the previous
//!   attempt's `free` ran before nginx asked for a retry, so the old state
//!   holds nothing when it is dropped (it stays in the request pool);
//! - tries kept: `peer.init` resets `pc->tries` to the list's size, which
//!   would undo the `proxy_next_upstream_tries` clamp; the rule restores the
//!   request's remaining tries;
//! - history kept: the fresh state's tried bitmap is empty, so a peer it
//!   gives whose address the request tried before is handed back through
//!   the balancer's own `free` (as an attempt never made: `NGX_PEER_NEXT`,
//!   which nothing learns from, and the peer's failure times put back: no
//!   failure added, none cleared) and the balancer asked again;
//!   a cached keepalive connection it gave is closed, as nginx closes one
//!   it will not use;
//! - bounded: at most `max` re-snapshots per selection;
//! - nginx decides: the wrapper only changes the outcome of a selection
//!   nginx itself asked for, so a POST whose body was sent, which nginx does
//!   not retry, is not retried here either.

mod history;
mod inner;
pub(crate) mod lean;
mod live;

use core::ffi::c_void;
use core::{mem, ptr};

use generation_retry_core::directive::Resnapshot;
use generation_retry_core::log;
use generation_retry_core::rescue::{Decision, Outcome, Selection, Snapshot};
use ngx::core::Status;
use ngx::ffi::{
    ngx_int_t, ngx_palloc, ngx_peer_connection_t, ngx_pool_t, NGX_BUSY, NGX_LOG_ERR, NGX_LOG_INFO,
};
use ngx::ngx_log_error;

use self::history::History;
use self::inner::{Head, Inner};
use self::lean::Word;
use self::live::Live;
use crate::conf::SrvConf;
use crate::ffi_ext::str_ptr_lossy;
use crate::proto::{generation, upstream_name, Proto};

/// What nginx gets for a selection the rule refused.
const BUSY: ngx_int_t = NGX_BUSY as ngx_int_t;

/// Per-request (per-session) state, in its pool. Plain pointers and
/// counters, nothing to drop, so it is placed with a bare pool allocation,
/// without a pool cleanup handler. `head` comes first: the pass-through
/// callbacks read it at the start of `pc->data`.
#[repr(C)]
pub(crate) struct PeerData<P: Proto> {
    head: Head,
    request: *mut P::Request,
    upstream: *mut P::Upstream,
    /// The upstream's configuration, in the cycle's pool (kept alive by the
    /// request, as the upstream block is).
    conf: *const SrvConf<P>,
    state: Snapshot,
    /// How many response headers the request had at its first
    /// re-snapshot: a `Set-Cookie` added from there on replaces an earlier
    /// one of its name (`Proto::hide_replaced_cookies`).
    headers_mark: usize,
}

// Plain values and pointers whatever P is (a derive would require P: Copy).
impl<P: Proto> Clone for PeerData<P> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<P: Proto> Copy for PeerData<P> {}

impl<P: Proto> PeerData<P> {
    /// Re-snapshots taken for this request (`$generation_retry_resnapshots`).
    pub(crate) fn resnapshots(&self) -> u32 {
        self.state.resnapshots
    }
}

/// Points the peer connection's callbacks at the wrapper over `inner`, the
/// state `pd` (only stored here) holds.
fn install<P: Proto>(pc: &mut ngx_peer_connection_t, pd: *mut PeerData<P>, inner: &Inner) {
    pc.data = pd.cast();
    pc.get = Some(get_peer::<P>);
    inner.install_pass_through(pc);
}

/// The upstream's `peer.init`, installed at postconfiguration.
pub(crate) unsafe extern "C" fn init_peer<P: Proto>(
    r: *mut P::Request,
    us: *mut P::Upstream,
) -> ngx_int_t {
    // SAFETY: nginx calls peer.init with the request and its upstream block;
    // the upstream block is not written by the inner init.
    let uscf = unsafe { &*us };
    let Some((conf, original)) = SrvConf::<P>::of(uscf).and_then(|c| Some((c, c.original_init?)))
    else {
        return Status::NGX_ERROR.into();
    };
    // The generation the inner init took its state at, written once the
    // init has settled, as the lean path's word; the full path replaces
    // it.
    // SAFETY: the original peer.init with the arguments nginx gave us; a
    // run again finds the peer connection cleared as a new request has it
    // (see Inner::clear). No reference into the request is alive across
    // the call, which writes it.
    let (rc, snapshot) = unsafe {
        settled_init::<P>(uscf, |again| {
            if again {
                if let Some((pc, _)) = P::peer_connection(r) {
                    Inner::clear(&mut *pc);
                }
            }
            original(r, us)
        })
    };
    // SAFETY: the live request of this call.
    unsafe { *P::ctx_slot(r) = Word::<PeerData<P>>::lean(snapshot, false) };
    if rc != Status::NGX_OK.into() {
        return rc;
    }
    // SAFETY: the request is live, nginx set its upstream before calling
    // peer.init, and the inner init has filled its peer connection.
    if let Some((pc, _)) = unsafe { P::peer_connection(r) } {
        // SAFETY: &r->upstream->peer of the live request, not otherwise
        // referenced here.
        let pc = unsafe { &mut *pc };
        if lean::usual(us, conf, pc) {
            lean::install::<P>(conf, pc);
            trace_init::<P>(pc, uscf, snapshot, "lean");
            return Status::NGX_OK.into();
        }
    }
    // SAFETY: as above.
    unsafe { init_unusual::<P>(r, us) }
}

/// Runs the inner `peer.init` (`init`, told whether this is a run again,
/// which must find the peer connection as a new request has it) and
/// returns its code and the generation
/// its state was taken at: the list's generation read before and after,
/// when they agree. A change that lands during the init (another worker
/// applying a re-resolve) makes the state's generation unknown, either
/// read; the init runs again then, at most [`SETTLE_RUNS`] times in all,
/// the abandoned state left in the pool (no `get` ran on it: it holds no
/// peer). Past that the first read is kept, as before this check: a later
/// refusal at the newer generation is then taken for a change once more.
///
/// # Safety
/// `init` calls the upstream's `peer.init` on a live request.
unsafe fn settled_init<P: Proto>(
    uscf: &P::Upstream,
    mut init: impl FnMut(bool) -> ngx_int_t,
) -> (ngx_int_t, usize) {
    let mut before = generation::<P>(uscf);
    let mut rc = init(false);
    for _ in 1..SETTLE_RUNS {
        let after = generation::<P>(uscf);
        if rc != Status::NGX_OK.into() || after == before {
            break;
        }
        before = after;
        rc = init(true);
    }
    (rc, before)
}

/// Runs of the inner `peer.init` for one state, at most (see
/// [`settled_init`]).
const SETTLE_RUNS: u32 = 3;

/// The trace of a request's init, on an nginx built `--with-debug`.
#[inline]
fn trace_init<P: Proto>(pc: &ngx_peer_connection_t, us: &P::Upstream, at: usize, path: &str) {
    trace!(
        P,
        pc.log,
        "{}init {}upstream \"{}\" peer at generation {at}, {path}",
        log::MARKER,
        P::PROTOCOL.log_prefix(),
        upstream_name::<P>(us)
    );
}

/// A request whose inner init did not install what the lean path knows:
/// the worker's first request of this upstream, which learns it if the lean
/// path holds here ([`lean::learn`]), or one that takes the full path.
///
/// # Safety
/// As in `init_peer` once the inner init returned `NGX_OK`: `r` the live
/// request, `us` its wrapped upstream block.
#[cold]
#[inline(never)]
unsafe fn init_unusual<P: Proto>(r: *mut P::Request, us: *mut P::Upstream) -> ngx_int_t {
    // SAFETY: per the contract.
    let uscf = unsafe { &*us };
    let Some(conf) = SrvConf::<P>::of(uscf) else {
        return Status::NGX_ERROR.into();
    };
    // SAFETY: per the contract.
    let Some((pc, pool)) = (unsafe { P::peer_connection(r) }) else {
        return Status::NGX_ERROR.into();
    };
    // SAFETY: as in init_peer.
    let pc = unsafe { &mut *pc };
    // SAFETY: init_peer wrote the word; the live request.
    let Word::Lean {
        generation: snapshot,
        ..
    } = Word::<PeerData<P>>::read(unsafe { *P::ctx_slot(r) })
    else {
        return Status::NGX_ERROR.into();
    };
    // SAFETY: per the contract.
    if unsafe { lean::learn::<P>(r, uscf, conf, pc) } {
        lean::install::<P>(conf, pc);
        trace_init::<P>(pc, uscf, snapshot, "lean");
        return Status::NGX_OK.into();
    }
    // SAFETY: per the contract.
    let made = unsafe {
        full_state::<P>(
            r,
            us,
            conf,
            pc,
            pool,
            Inner::take(pc),
            Snapshot::new(snapshot),
        )
    };
    if made.is_none() {
        return Status::NGX_ERROR.into();
    }
    trace_init::<P>(pc, uscf, snapshot, "full");
    Status::NGX_OK.into()
}

/// Makes a request's full state in its pool, over the inner balancer
/// `inner`, and installs it: the wrapper's callbacks on the peer connection
/// and the state in the request's module context slot. `None` if the pool
/// is exhausted (nothing is changed then).
///
/// # Safety
/// `r` is the live request whose `&upstream->peer` is `pc`, `pool` its
/// pool, `us` its wrapped upstream block and `conf` this module's
/// configuration of it.
unsafe fn full_state<P: Proto>(
    r: *mut P::Request,
    us: *mut P::Upstream,
    conf: &SrvConf<P>,
    pc: &mut ngx_peer_connection_t,
    pool: *mut ngx_pool_t,
    inner: Inner,
    state: Snapshot,
) -> Option<*mut PeerData<P>> {
    // SAFETY: the request's live pool, which outlives every use of the
    // peer data; ngx_palloc aligns to NGX_ALIGNMENT (a pointer's), enough
    // for PeerData's pointers and integers.
    let pd = unsafe { ngx_palloc(pool, mem::size_of::<PeerData<P>>()) } as *mut PeerData<P>;
    if pd.is_null() {
        return None;
    }
    // SAFETY: `pd` is a fresh, aligned allocation of a PeerData.
    unsafe {
        pd.write(PeerData {
            head: Head {
                inner,
                history: History::new(pool),
            },
            request: r,
            upstream: us,
            conf,
            state,
            headers_mark: 0,
        })
    };
    install(pc, pd, &inner);
    // SAFETY: per the contract, a live request.
    unsafe { *P::ctx_slot(r) = pd.cast() };
    Some(pd)
}

/// Every selection: the rescue rule over the live balancer. The fast path
/// is the rule's first steps (`begin`, the inner get, `stands`) on the bare
/// state; a selection that does not stand is decided out of line.
unsafe extern "C" fn get_peer<P: Proto>(
    pc: *mut ngx_peer_connection_t,
    data: *mut c_void,
) -> ngx_int_t {
    let pd_ptr = data as *mut PeerData<P>;
    // SAFETY: nginx calls get with the peer connection whose data we set;
    // the PeerData is ours, in the request pool.
    let pd = unsafe { &mut *pd_ptr };
    // SAFETY: set at init from the arguments of peer.init; the
    // configuration lives as long as the cycle, longer than the request.
    let conf = unsafe { &*pd.conf };
    let inner = &pd.head.inner;
    // Installed only with a setting; without, the inner balancer answers.
    let (Some(setting), Some(get)) = (conf.active, inner.get) else {
        // SAFETY: the inner get, if any, with its own data.
        return inner
            .get
            .map_or(Status::NGX_ERROR.into(), |g| unsafe { g(pc, inner.data) });
    };
    let first = pd.state.begin();
    // SAFETY: the inner get with its own data, as peer.init installed them.
    let rc = unsafe { get(pc, inner.data) };
    // Compiled out without `--with-debug`.
    // SAFETY: the live peer connection nginx passed.
    let log_ptr = unsafe { (*pc).log };
    trace!(P, log_ptr, "{}inner get peer: {rc}", log::MARKER);
    let given = live::selection(rc);
    if pd.state.stands(given) {
        return rc;
    }
    decide::<P>(pc, pd_ptr, setting, first, given)
}

/// A selection whose answer does not stand: the rule decides over the
/// live balancer, and the decision is settled.
#[cold]
#[inline(never)]
fn decide<P: Proto>(
    pc: *mut ngx_peer_connection_t,
    pd_ptr: *mut PeerData<P>,
    setting: Resnapshot,
    first: bool,
    given: Selection,
) -> ngx_int_t {
    // SAFETY: as in get_peer, which has returned no reference to either.
    let pd = unsafe { &mut *pd_ptr };
    // SAFETY: as in get_peer; the upstream block lives as long as the
    // cycle.
    let (uscf, conf) = unsafe { (&*pd.upstream, &*pd.conf) };
    let mut live = Live::<P> {
        pc,
        inner: &mut pd.head.inner,
        history: &pd.head.history,
        request: pd.request,
        upstream: pd.upstream,
        uscf,
        original: conf.original_init,
    };
    let before = pd.state.resnapshots;
    let mark = if before == 0 {
        // SAFETY: the live request of this selection.
        unsafe { P::header_count(pd.request) }
    } else {
        pd.headers_mark
    };
    let decision = pd.state.decide(&mut live, setting, first, given);
    if before == 0 && pd.state.resnapshots > 0 {
        pd.headers_mark = mark;
    }
    trace!(
        P,
        live.log(),
        "{}{}: {:?}",
        log::TRACE_GET,
        pd.state.selections,
        decision.outcome
    );
    settle::<P>(pc, pd_ptr, decision)
}

/// A refused selection, out of the fast path: the tally counted, the
/// outcome logged and answered. (A re-snapshot left the peer connection's
/// callbacks as they were: `Live::reinit` puts the caller's chain back.)
#[cold]
#[inline(never)]
fn settle<P: Proto>(
    pc: *mut ngx_peer_connection_t,
    pd: *mut PeerData<P>,
    decision: Decision,
) -> ngx_int_t {
    // SAFETY: the request's live peer connection and our PeerData, as
    // get_peer had them; no other reference to either is alive now that the
    // rule has returned.
    let (pc, data) = unsafe { (&mut *pc, &*pd) };
    // SAFETY: as in get_peer.
    let (uscf, conf) = unsafe { (&*data.upstream, &*data.conf) };
    if let Some(slot) = conf.slot() {
        for (counter, n) in decision.tally.iter() {
            slot.add(counter, n);
        }
    }
    let log = pc.log;
    // Whatever the outcome: a fresh state sets its cookie at each peer it
    // gives, the ones it handed back included, so a selection that then
    // ends without a peer (every peer tried, a 502) has replaced the
    // cookie too. The latest of each name stays, one, as nginx's own 502
    // after a selection sends one.
    if data.state.resnapshots > 0 {
        // SAFETY: the live request of this selection; the balancer's get
        // has returned, so no one else is changing its headers.
        unsafe { P::hide_replaced_cookies(data.request, data.headers_mark) };
    }
    match decision.outcome {
        Outcome::Pass(selection @ Selection::Error(_)) if data.state.resnapshots > 0 => {
            // A selection after a re-snapshot may have handed a peer back
            // before the error: its name must not stay (as in `Errored`).
            pc.name = ptr::from_ref(P::host(uscf)).cast_mut();
            selection.code(BUSY)
        }
        Outcome::Pass(selection) => selection.code(BUSY),
        Outcome::Rescued {
            from,
            to,
            selection,
        } => {
            // `info`, as the core patches log their re-snapshot and nginx
            // logs per-request events that need no action: a rescued
            // request succeeded, and `rescued_total` counts it. Formatted
            // only when the level is logged.
            ngx_log_error!(
                NGX_LOG_INFO,
                log,
                "{}",
                log::rescued(
                    P::PROTOCOL,
                    &upstream_name::<P>(uscf),
                    from,
                    to,
                    &str_ptr_lossy(pc.name)
                )
            );
            selection.code(BUSY)
        }
        Outcome::Errored { fault, code } => {
            // A peer handed back before the error left its name in
            // pc->name: freed, it may be a zombie another worker's
            // re-resolve frees, which nginx's log handler would read.
            pc.name = ptr::from_ref(P::host(uscf)).cast_mut();
            ngx_log_error!(
                NGX_LOG_ERR,
                log,
                "{}",
                log::errored(P::PROTOCOL, &upstream_name::<P>(uscf), fault)
            );
            code
        }
        Outcome::Failed { cause, why } => {
            // As a balancer's refusal names it: `$upstream_addr` and nginx's
            // `no live upstreams` show the upstream, not the last peer
            // handed back.
            pc.name = ptr::from_ref(P::host(uscf)).cast_mut();
            ngx_log_error!(
                NGX_LOG_ERR,
                log,
                "{}",
                log::no_live(P::PROTOCOL, &upstream_name::<P>(uscf), cause, why)
            );
            BUSY
        }
    }
}
