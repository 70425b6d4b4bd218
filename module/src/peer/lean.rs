//! The lean path: an http request that is never refused and never retried
//! costs no allocation (stream sessions keep the full path: `Proto::LEAN`). Its wrapper state is one word in the request's module
//! context slot (the generation its balancer state was taken at), the inner
//! balancer's `get` and `free` are the upstream's (the same for every
//! request; `SrvConf::inner_get`, `inner_free`), and the peer connection
//! keeps the inner balancer's data and its other callbacks. Only `get` and
//! `free` are this module's, and they find what they need from `pc` itself
//! (`Proto::upstream_of`).
//!
//! The first refusal (`NGX_BUSY`) or the first attempt freed as failed or
//! passed over (how every retry starts) takes the request to the full path:
//! its `PeerData` is allocated then, from the word, the peer connection and
//! the upstream, and installed as `peer.init` would have (the full path of
//! `super`). From there everything is as before: the rescue rule, the
//! history, the pass-through callbacks.
//!
//! A request takes the lean path only where that is sound, checked at its
//! `peer.init` ([`usual`], [`learn`]): no module wrapped `peer.init` outside this
//! one (it would keep the callbacks and data it found, which the move to
//! the full path changes), the inner init installed the upstream's usual
//! `get` and `free`, and the request is found again from its peer
//! connection. Otherwise the request takes the full path at once.

use core::ffi::c_void;
use core::ptr;

use generation_retry_core::log;
use generation_retry_core::rescue::{Selection, Snapshot};
use ngx::ffi::{
    ngx_int_t, ngx_peer_connection_t, ngx_uint_t, NGX_LOG_WARN, NGX_PEER_FAILED, NGX_PEER_NEXT,
};
use ngx::ngx_log_error;

use super::inner::Inner;
use super::{decide, full_state, PeerData, BUSY};
use crate::conf::SrvConf;
use crate::ffi_ext::conf_slot;
use crate::proto::{upstream_name, Proto};

/// The word's tag: set for a lean word, clear in a `PeerData` pointer
/// (aligned to a pointer's size).
const LEAN: usize = 1;
/// Set once an attempt of the request was freed as failed or passed over
/// while it stayed lean (its full state could not be made then).
const RETRIED: usize = 2;
/// The generation is kept above the two flags: a peer list would have to
/// change 2^62 times (2^30 on a 32-bit build) for the shift to lose a bit.
const SHIFT: u32 = 2;

/// What the request's module context slot holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Word<T> {
    /// Nothing: the request used no wrapped upstream.
    Empty,
    /// The lean path: the generation its balancer state was taken at.
    Lean { generation: usize, retried: bool },
    /// The full path's state.
    Full(*mut T),
}

impl<T> Word<T> {
    pub(crate) fn read(slot: *mut c_void) -> Word<T> {
        let bits = slot.addr();
        if bits == 0 {
            Word::Empty
        } else if bits & LEAN != 0 {
            Word::Lean {
                generation: bits >> SHIFT,
                retried: bits & RETRIED != 0,
            }
        } else {
            Word::Full(slot.cast())
        }
    }

    pub(crate) fn lean(generation: usize, retried: bool) -> *mut c_void {
        let retried = if retried { RETRIED } else { 0 };
        ptr::without_provenance_mut((generation << SHIFT) | retried | LEAN)
    }
}

/// Whether the inner init installed the `get` and `free` the lean path
/// knows for this upstream (none until [`learn`] said the path holds), and
/// `pc` leads back to the upstream block `us` (what `get_lean` and
/// `free_lean` rely on): the checks each request's init makes.
#[inline]
pub(super) fn usual<P: Proto>(
    us: *mut P::Upstream,
    conf: &SrvConf<P>,
    pc: &mut ngx_peer_connection_t,
) -> bool {
    let addr = |f: Option<usize>| f.unwrap_or(0);
    let known = addr(conf.inner_get.get().map(|f| f as usize));
    known != 0
        && known == addr(pc.get.map(|f| f as usize))
        && addr(conf.inner_free.get().map(|f| f as usize)) == addr(pc.free.map(|f| f as usize))
        // SAFETY: pc is `&r->upstream->peer` of the request being
        // initialised, whose `upstream` nginx set before peer.init.
        && unsafe { P::upstream_of(pc) } == us
}

/// At the worker's first request of an upstream: whether its requests may
/// take the lean path and, if so, the inner balancer's `get` and `free`
/// recorded for the next ones ([`usual`]). It holds where no module wrapped
/// `peer.init` outside this one (that module would keep the callbacks and
/// data it found, which the move to the full path changes) and the request
/// is found again from its peer connection ([`Proto::owner`]), which the
/// move to the full path needs.
///
/// # Safety
/// `r` is the live request `pc` (its `&upstream->peer`) belongs to, filled
/// by its inner init; `us` its upstream block, `conf` this module's
/// configuration of it.
pub(super) unsafe fn learn<P: Proto>(
    r: *mut P::Request,
    us: &P::Upstream,
    conf: &SrvConf<P>,
    pc: &ngx_peer_connection_t,
) -> bool {
    // Both values are this module's `peer.init` as setup stored it:
    // compared as stored, not as a function item (whose address may differ
    // between codegen units).
    let outermost =
        P::installed_init(us).map(|f| f as usize) == conf.wrapper_init.map(|f| f as usize);
    if !P::LEAN || conf.inner_get.get().is_some() || !outermost || pc.get.is_none() {
        return false;
    }
    // SAFETY: per the contract.
    if unsafe { P::owner(ptr::from_ref(pc).cast_mut()) } != r {
        return false;
    }
    conf.lean_get.set(Some(get_lean::<P>));
    conf.lean_free.set(Some(free_lean::<P>));
    conf.inner_get.set(pc.get);
    conf.inner_free.set(pc.free);
    true
}

/// Puts a request on the lean path: this module's `get` and `free` (as
/// [`learn`] stored them) over the inner balancer's data (its word is
/// already in place).
pub(super) fn install<P: Proto>(conf: &SrvConf<P>, pc: &mut ngx_peer_connection_t) {
    pc.get = conf.lean_get.get();
    pc.free = conf.lean_free.get();
}

/// Why a request on the lean path could not take its full state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NotTaken {
    /// The peer connection's callbacks or data are no longer the lean
    /// path's: something took it over after `peer.init`. The patched nginx
    /// does so by design (its history wraps `get` and hands tried peers
    /// back through `free`, and it rescues the request itself), so this is
    /// said at debug level only: the request goes on as that code decides.
    TakenOver,
    /// Anything else, said at `warn` (see [`unexamined`]).
    Unexpected(&'static str),
}

/// This module's configuration of the upstream of a request on the lean
/// path.
///
/// # Safety
/// `pc` is the peer connection of a live request on the lean path: its
/// upstream block, which lives as long as the cycle, is explicit (has a
/// srv_conf array) and wrapped (holds this module's SrvConf), and its
/// `inner_get` is set ([`usual`] said so at the request's init; it is never
/// unset).
#[inline]
unsafe fn conf_of<'a, P: Proto>(pc: *mut ngx_peer_connection_t) -> &'a SrvConf<P> {
    // SAFETY: per the contract.
    unsafe {
        let us = &*P::upstream_of(pc);
        &*(conf_slot(P::srv_conf(us), P::module()) as *const SrvConf<P>)
    }
}

/// `get` on the lean path: the inner balancer's, and, if it refuses, the
/// request moves to the full path and the rule decides.
unsafe extern "C" fn get_lean<P: Proto>(
    pc: *mut ngx_peer_connection_t,
    data: *mut c_void,
) -> ngx_int_t {
    // SAFETY: nginx calls get with the peer connection of a request on the
    // lean path; its upstream's inner get is set (see conf_of).
    let get = unsafe { conf_of::<P>(pc).inner_get.get().unwrap_unchecked() };
    // SAFETY: the inner get with its own data, as its peer.init left them.
    let rc = unsafe { get(pc, data) };
    // Compiled out without `--with-debug`.
    // SAFETY: the live peer connection nginx passed.
    let log_ptr = unsafe { (*pc).log };
    trace!(P, log_ptr, "{}inner get peer: {rc}", log::MARKER);
    if rc != BUSY {
        return rc;
    }
    // SAFETY: the peer connection and inner data nginx passed; no reference
    // to either is alive.
    unsafe { refused::<P>(pc, data) }
}

/// A refusal on the lean path: the request takes its full state, and the
/// rule decides over it.
///
/// # Safety
/// As for [`take_full`].
#[cold]
#[inline(never)]
unsafe fn refused<P: Proto>(pc: *mut ngx_peer_connection_t, data: *mut c_void) -> ngx_int_t {
    // SAFETY: per the contract.
    match unsafe { take_full::<P>(pc, data) } {
        Ok((pd, first, setting)) => decide::<P>(pc, pd, setting, first, Selection::Busy),
        Err(why) => {
            // SAFETY: per the contract.
            unsafe { unexamined::<P>(pc, why) };
            BUSY
        }
    }
}

/// `free` on the lean path: an attempt freed as failed or passed over moves
/// the request to the full path, which records its address; then the inner
/// balancer's `free`.
unsafe extern "C" fn free_lean<P: Proto>(
    pc: *mut ngx_peer_connection_t,
    data: *mut c_void,
    state: ngx_uint_t,
) {
    // SAFETY: nginx calls free with the peer connection of a request on
    // the lean path.
    let free = unsafe { conf_of::<P>(pc) }.inner_free.get();
    let passed_over = state & (NGX_PEER_FAILED | NGX_PEER_NEXT) as ngx_uint_t;
    if passed_over != 0 {
        // SAFETY: the peer connection and inner data nginx passed; no
        // reference to either is alive.
        unsafe { retried::<P>(pc, data, state) };
    }
    if let Some(free) = free {
        // SAFETY: the inner free with its own data, on the peer connection
        // its get filled.
        unsafe { free(pc, data, state) };
    }
}

/// An attempt freed as failed or passed over on the lean path.
///
/// # Safety
/// As for [`take_full`].
#[cold]
#[inline(never)]
unsafe fn retried<P: Proto>(pc: *mut ngx_peer_connection_t, data: *mut c_void, state: ngx_uint_t) {
    // SAFETY: per the contract.
    match unsafe { take_full::<P>(pc, data) } {
        // SAFETY: the PeerData just made; the peer connection is live.
        Ok((pd, _, _)) => unsafe { (*pd).head.history.record(&*pc, state) },
        Err(why) => {
            // The address is not recorded (as when the pool cannot hold the
            // record); what is kept is that this was a retry.
            // SAFETY: as above.
            let r = unsafe { P::owner(pc) };
            if !r.is_null() {
                // SAFETY: the live request found from its peer connection.
                let slot = unsafe { P::ctx_slot(r) };
                // SAFETY: as above.
                if let Word::Lean { generation, .. } = Word::<PeerData<P>>::read(unsafe { *slot }) {
                    // SAFETY: as above.
                    unsafe { *slot = Word::<PeerData<P>>::lean(generation, true) };
                }
            }
            // SAFETY: per the contract.
            unsafe { unexamined::<P>(pc, why) };
        }
    }
}

/// The request's full state, made from its lean word and installed as
/// `peer.init` installs it; with whether this selection is the request's
/// first (no attempt was freed before) and the upstream's setting.
///
/// # Safety
/// `pc` is the live peer connection of a request on the lean path, `data`
/// the inner balancer's data nginx passed with it; no reference to either
/// is alive.
unsafe fn take_full<P: Proto>(
    pc: *mut ngx_peer_connection_t,
    data: *mut c_void,
) -> Result<
    (
        *mut PeerData<P>,
        bool,
        generation_retry_core::directive::Resnapshot,
    ),
    NotTaken,
> {
    // SAFETY: per the contract.
    let us = unsafe { P::upstream_of(pc) };
    // SAFETY: per the contract.
    let conf = unsafe { conf_of::<P>(pc) };
    let setting = conf
        .active
        .ok_or(NotTaken::Unexpected("the upstream is not wrapped"))?;
    // SAFETY: per the contract.
    let r = unsafe { P::owner(pc) };
    if r.is_null() {
        return Err(NotTaken::Unexpected(
            "the request is not found from its peer connection",
        ));
    }
    // SAFETY: the live request found from its peer connection.
    let slot = unsafe { P::ctx_slot(r) };
    // SAFETY: as above.
    let Word::Lean {
        generation,
        retried,
    } = Word::<PeerData<P>>::read(unsafe { *slot })
    else {
        return Err(NotTaken::Unexpected(
            "the request's module context was replaced",
        ));
    };
    // SAFETY: per the contract.
    let pc = unsafe { &mut *pc };
    let addr = |f: Option<usize>| f.unwrap_or(0);
    let ours = addr(pc.get.map(|f| f as usize)) == addr(conf.lean_get.get().map(|f| f as usize))
        && addr(pc.free.map(|f| f as usize)) == addr(conf.lean_free.get().map(|f| f as usize));
    if !ours || pc.data != data {
        return Err(NotTaken::TakenOver);
    }
    // SAFETY: the live request's pool.
    let pool = unsafe { P::pool(r) };
    let inner = Inner::lean(pc, conf.inner_get.get(), conf.inner_free.get());
    let state = Snapshot {
        generation,
        selections: 1 + u32::from(retried),
        resnapshots: 0,
    };
    // SAFETY: the live request found from `pc`, its pool; `us` and `conf`
    // the wrapped upstream block pc leads to and ours of it.
    let pd = unsafe { full_state::<P>(r, us, conf, pc, pool, inner, state) }
        .ok_or(NotTaken::Unexpected("the request pool is exhausted"))?;
    trace!(
        P,
        pc.log,
        "{}full state taken at generation {generation}",
        log::MARKER
    );
    Ok((pd, !retried, setting))
}

/// A refusal or retry the wrapper could not take to the full path: nginx
/// goes on as without the module for this request. A peer connection taken
/// over is the patched nginx's way (debug level); anything else is not
/// expected with nginx's own modules (see [`learn`]) and is said once per
/// occurrence, at `warn`.
///
/// # Safety
/// `pc` is the live peer connection of a request on the lean path.
unsafe fn unexamined<P: Proto>(pc: *mut ngx_peer_connection_t, why: NotTaken) {
    // SAFETY: per the contract.
    let (log, us) = unsafe { ((*pc).log, P::upstream_of(pc).as_ref()) };
    match why {
        NotTaken::TakenOver => {
            trace!(
                P,
                log,
                "{}peer connection taken over after peer.init: no full state",
                log::MARKER
            );
        }
        NotTaken::Unexpected(why) => {
            let name = us.map(upstream_name::<P>).unwrap_or_default();
            ngx_log_error!(
                NGX_LOG_WARN,
                log,
                "{}",
                log::unexamined(P::PROTOCOL, &name, why)
            );
        }
    }
}
