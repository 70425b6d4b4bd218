//! [`Balancer`] over a request's live peer connection: what the rescue rule
//! of `generation_retry_core::rescue` asks, answered by nginx.

use core::ptr;

use generation_retry_core::log;
use generation_retry_core::rescue::{Balancer, Selection};
use ngx::core::Status;
use ngx::ffi::{
    ngx_close_connection, ngx_connection_t, ngx_destroy_pool, ngx_int_t, ngx_log_t,
    ngx_peer_connection_t, ngx_uint_t, NGX_BUSY, NGX_DONE, NGX_PEER_NEXT,
};

use super::history::History;
use super::inner::Inner;
use super::settled_init;
use crate::proto::{
    count_peers, generation, peer_counts, untouch_peer, upstream_name, InitPeer, Proto,
};

/// A `get` callback's code, as the rule sees it.
#[inline]
pub(super) fn selection(rc: ngx_int_t) -> Selection {
    Selection::of(
        rc,
        NGX_BUSY as ngx_int_t,
        Status::NGX_OK.into(),
        NGX_DONE as ngx_int_t,
    )
}

/// The rule's view of one request's balancer: the live peer connection, the
/// inner callbacks and the upstream's original `peer.init`.
pub(super) struct Live<'a, P: Proto> {
    /// `&r->upstream->peer`, raw: the inner init writes it through the
    /// request, so no Rust reference to it may live across that call.
    pub(super) pc: *mut ngx_peer_connection_t,
    pub(super) inner: &'a mut Inner,
    pub(super) history: &'a History,
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
        selection(rc)
    }

    /// Re-runs the original `peer.init` into fresh state, which becomes
    /// the inner state; on failure the previous inner state is kept. Either
    /// way the peer connection's callbacks and data are then put back as
    /// the caller had them: this wrapper's, or those of a module that
    /// wrapped `peer.init` outside this one (loaded later), whose state
    /// still leads to this wrapper's. Only the inner state changes.
    fn reinit(&mut self) -> Result<usize, isize> {
        let error = Status::NGX_ERROR.into();
        let Some(original) = self.original else {
            return Err(error);
        };
        // SAFETY: pc is &r->upstream->peer of a live request, read between
        // calls.
        let caller = Inner::take(unsafe { &*self.pc });
        // SAFETY: the request and upstream block peer.init was first called
        // with; it writes r->upstream->peer, which is *pc, cleared as a new
        // request has it (see Inner::clear) before each run.
        let (rc, at) = unsafe {
            settled_init::<P>(self.uscf, |_| {
                Inner::clear(&mut *self.pc);
                original(self.request, self.upstream)
            })
        };
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
            (true, _) => Ok(at),
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

    fn tried_before(&self) -> bool {
        // SAFETY: as in `tries`; the inner get has just set pc->sockaddr.
        self.history.holds(unsafe { &*self.pc })
    }

    fn tried_cached(&self) -> bool {
        self.history.failed_cached()
    }

    fn tried_in_list(&self) -> usize {
        count_peers::<P>(self.uscf, |sockaddr, socklen| {
            self.history.holds_addr(sockaddr, socklen)
        })
    }

    /// The inner `free` with `NGX_PEER_NEXT`, nginx's own state for a
    /// peer passed over, as for an attempt that was never made:
    /// round-robin (and every balancer built on it) takes it as not failed
    /// (only `NGX_PEER_FAILED` counts a failure), keeps the peer marked
    /// tried and gives back its connection count, and with the peer's
    /// `fail_timeout` times put back as they were before the get
    /// ([`untouch_peer`]) adds no failure and clears none; the balancers
    /// that learn from a successful attempt skip it, as they skip every
    /// attempt nginx passed over: `sticky learn` (without `header`) does
    /// not bind the session to the peer, `least_time` averages no times.
    /// (As failed, it counted this request's one failure twice, and cut
    /// the peer's weight or disabled it for an attempt never made; without
    /// the times put back, it would revive a dead peer whose trial the get
    /// opened; as 0, a success, `sticky learn` learned the peer, which a
    /// request that then failed left its session bound to.) A cached
    /// connection keepalive gave (`NGX_DONE`) is taken out of `pc` first,
    /// so keepalive does not cache it under a request it never served, and
    /// closed (keepalive caches nothing without a connection, whatever the
    /// state).
    fn release(&mut self) {
        // SAFETY: as in `tries`; pc->name is the given peer's, as its get
        // set it.
        untouch_peer::<P>(self.uscf, unsafe { (*self.pc).name });
        let state = NGX_PEER_NEXT as ngx_uint_t;
        // SAFETY: as in `tries`.
        let cached = unsafe { ptr::replace(&mut (*self.pc).connection, ptr::null_mut()) };
        trace!(
            P,
            self.log(),
            "{}address already tried by this request, handed back (state {state}){}",
            log::MARKER,
            if cached.is_null() {
                ""
            } else {
                " (cached connection closed)"
            }
        );
        self.inner.free(self.pc, state);
        // SAFETY: as in `tries`. Freed: as ngx_http_upstream_next does, no
        // address is left for nginx to free again if no other peer is
        // selected (the selection then ends in NGX_BUSY).
        unsafe { (*self.pc).sockaddr = ptr::null_mut() };
        if !cached.is_null() {
            // SAFETY: keepalive's get detached this idle connection from
            // its cache and gave it to this request alone.
            unsafe { close_unused(cached) };
        }
    }
}

/// Closes an idle upstream connection no request will use, as nginx's
/// upstream closes one it gives up: TLS shut down without waiting for, or
/// sending, a close_notify, then its pool and the connection itself.
///
/// # Safety
/// `c` is a live connection owned by the caller alone, with no timers or
/// handlers that expect it to stay open (a cached keepalive connection
/// once keepalive's get has taken it out of the cache).
unsafe fn close_unused(c: *mut ngx_connection_t) {
    // SAFETY: per the contract.
    let conn = unsafe { &mut *c };
    #[cfg(ngx_feature = "ssl")]
    // SAFETY: c->ssl is NULL or the connection's live TLS state.
    if let Some(ssl) = unsafe { conn.ssl.as_mut() } {
        ssl.set_no_wait_shutdown(1);
        ssl.set_no_send_shutdown(1);
        // SAFETY: a TLS connection, with both flags set: returns at once.
        unsafe { ngx::ffi::ngx_ssl_shutdown(c) };
    }
    if !conn.pool.is_null() {
        // SAFETY: the connection's own pool, not used after this.
        unsafe { ngx_destroy_pool(conn.pool) };
    }
    // SAFETY: per the contract; c is not used after this.
    unsafe { ngx_close_connection(c) };
}
