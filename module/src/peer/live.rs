//! [`Balancer`] over a request's live peer connection: what the rescue rule
//! of `generation_retry_core::rescue` asks, answered by nginx.

use core::ptr;

use generation_retry_core::log;
use generation_retry_core::rescue::{Balancer, Selection};
use ngx::core::Status;
use ngx::ffi::{ngx_int_t, ngx_log_t, ngx_peer_connection_t, NGX_BUSY, NGX_DONE};

use super::inner::Inner;
use crate::proto::{generation, peer_counts, upstream_name, InitPeer, Proto};

/// The rule's view of one request's balancer: the live peer connection, the
/// inner callbacks and the upstream's original `peer.init`.
pub(super) struct Live<'a, P: Proto> {
    /// `&r->upstream->peer`, raw: the inner init writes it through the
    /// request, so no Rust reference to it may live across that call.
    pub(super) pc: *mut ngx_peer_connection_t,
    pub(super) inner: &'a mut Inner,
    pub(super) request: *mut P::Request,
    pub(super) upstream: *mut P::Upstream,
    pub(super) uscf: &'a P::Upstream,
    pub(super) original: InitPeer<P>,
}

impl<P: Proto> Live<'_, P> {
    pub(super) fn log(&self) -> *mut ngx_log_t {
        // SAFETY: pc is the request's live peer connection.
        unsafe { (*self.pc).log }
    }
}

impl<P: Proto> Balancer for Live<'_, P> {
    fn generation(&self) -> usize {
        generation::<P>(self.uscf)
    }

    fn peer_counts(&self) -> (usize, usize) {
        peer_counts::<P>(self.uscf)
    }

    fn select(&mut self) -> Selection {
        let Some(get) = self.inner.get else {
            return Selection::Error(Status::NGX_ERROR.into());
        };
        // SAFETY: the inner get with its own data, as peer.init installed them.
        let rc = unsafe { get(self.pc, self.inner.data) };
        trace!(P, self.log(), "{}inner get peer: {rc}", log::MARKER);
        match rc {
            rc if rc == NGX_BUSY as ngx_int_t => Selection::Busy,
            rc if rc == Status::NGX_OK.into() || rc == NGX_DONE as ngx_int_t => Selection::Peer(rc),
            rc => Selection::Error(rc),
        }
    }

    /// Re-runs the original `peer.init` into fresh state, which becomes
    /// the inner state; on failure the previous inner state is kept. Either
    /// way the peer connection's callbacks and data are then put back as
    /// the caller had them: this wrapper's, or those of a module that
    /// wrapped `peer.init` outside this one (loaded later), whose state
    /// still leads to this wrapper's. Only the inner state changes.
    fn reinit(&mut self) -> Result<(), isize> {
        let error = Status::NGX_ERROR.into();
        let Some(original) = self.original else {
            return Err(error);
        };
        // SAFETY: pc is &r->upstream->peer of a live request, read between
        // calls.
        let caller = Inner::take(unsafe { &*self.pc });
        // SAFETY: as above. Round-robin reuses a non-NULL peer.data as its
        // own state: clear it.
        unsafe { (*self.pc).data = ptr::null_mut() };
        // SAFETY: the request and upstream block peer.init was first called
        // with; it writes r->upstream->peer, which is *pc.
        let rc = unsafe { original(self.request, self.upstream) };
        // SAFETY: the call has returned; nothing else touches *pc meanwhile.
        let pc = unsafe { &mut *self.pc };
        let ok = rc == Status::NGX_OK.into() && pc.get.is_some() && !pc.data.is_null();
        if ok {
            *self.inner = Inner::take(pc);
        }
        caller.put_back(pc);
        trace!(
            P,
            pc.log,
            "{}re-snapshot of \"{}\": peer.init {rc}, {}",
            log::MARKER,
            upstream_name::<P>(self.uscf),
            if ok {
                "fresh state"
            } else {
                "previous state kept"
            }
        );
        match (ok, rc) {
            (true, _) => Ok(()),
            // An init that "succeeded" without a usable state is an error.
            (false, rc) if rc == Status::NGX_OK.into() => Err(error),
            (false, rc) => Err(rc),
        }
    }

    fn tries(&self) -> usize {
        // SAFETY: the request's live peer connection, read between calls.
        unsafe { (*self.pc).tries }
    }

    fn set_tries(&mut self, tries: usize) {
        // SAFETY: as in `tries`.
        unsafe { (*self.pc).tries = tries };
    }
}
