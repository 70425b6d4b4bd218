//! The two kinds of upstream the module wraps, http and stream, behind one
//! trait. nginx keeps parallel types for them (`ngx_http_upstream_*` and
//! `ngx_stream_upstream_*`) with the same fields where the module looks, so
//! the peer wrapper, the directive and the counters are written once,
//! generically, and each protocol only says where its fields are.
//!
//! This file imports nothing from the crate. The nginx module object of each
//! protocol is defined at the top (`lib.rs`, `stream.rs`), which implements
//! [`Registered`] for it.

use core::ffi::{c_char, c_void, CStr};
use core::mem::offset_of;
use core::ptr;

use generation_retry_core::metrics::Protocol;
use ngx::ffi::{
    ngx_array_t, ngx_atomic_t, ngx_conf_t, ngx_http_cleanup_t, ngx_http_conf_ctx_t,
    ngx_http_request_t, ngx_http_upstream_main_conf_t, ngx_http_upstream_rr_peers_t,
    ngx_http_upstream_srv_conf_t, ngx_http_upstream_t, ngx_int_t, ngx_module_t,
    ngx_peer_connection_t, ngx_pool_t, ngx_shm_zone_t, ngx_str_t, ngx_uint_t,
};
#[cfg(generation_retry_stream)]
use ngx::ffi::{
    ngx_stream_conf_ctx_t, ngx_stream_session_t, ngx_stream_upstream_main_conf_t,
    ngx_stream_upstream_rr_peers_t, ngx_stream_upstream_srv_conf_t, ngx_stream_upstream_t,
};

use ngx::ffi::{ngx_rwlock_rlock, ngx_rwlock_unlock};
use ngx::log::DebugMask;

/// `peer.init` of an upstream block of protocol `P`.
pub(crate) type InitPeer<P> = Option<
    unsafe extern "C" fn(*mut <P as Proto>::Request, *mut <P as Proto>::Upstream) -> ngx_int_t,
>;

/// A round-robin peer list: `ngx_{http,stream}_upstream_rr_peers_t`.
pub(crate) trait RrPeers {
    /// The zone's change counter (NULL without a zone).
    fn config(&self) -> *mut ngx_uint_t;
    fn number(&self) -> usize;
    /// The backup list, or NULL.
    fn next(&self) -> *const Self;
    fn rwlock(&self) -> *mut ngx_atomic_t;
    /// Whether the list lives in a shared zone (and so is locked).
    fn shared(&self) -> bool;
}

macro_rules! rr_peers {
    ($t:ty) => {
        impl RrPeers for $t {
            fn config(&self) -> *mut ngx_uint_t {
                self.config
            }
            fn number(&self) -> usize {
                self.number
            }
            fn next(&self) -> *const Self {
                self.next
            }
            fn rwlock(&self) -> *mut ngx_atomic_t {
                core::ptr::addr_of!(self.rwlock).cast_mut()
            }
            fn shared(&self) -> bool {
                !self.shpool.is_null()
            }
        }
    };
}

rr_peers!(ngx_http_upstream_rr_peers_t);
#[cfg(generation_retry_stream)]
rr_peers!(ngx_stream_upstream_rr_peers_t);

/// A protocol's nginx module object, implemented where the object is
/// defined (so this file need not import it).
pub(crate) trait Registered {
    /// This module's `ngx_module_t` for the protocol.
    fn module() -> &'static ngx_module_t;
}

/// Where a protocol keeps what the module needs.
pub(crate) trait Proto: Registered + Sized + 'static {
    const PROTOCOL: Protocol;
    /// Whether requests may take the allocation-free lean path
    /// (`crate::peer::lean`). http: yes. stream: no, each session keeps its
    /// full state (one allocation per TCP session, beside the session's
    /// own buffers), so the wrapper's every callback is exercised by every
    /// stream session.
    const LEAN: bool;
    /// The nginx module whose main conf lists the upstream blocks.
    const UPSTREAM_MODULE: &'static CStr;

    /// `ngx_http_request_t` or `ngx_stream_session_t`.
    type Request;
    /// The upstream block: `ngx_{http,stream}_upstream_srv_conf_t`.
    type Upstream;
    /// The upstream module's main conf, with the list of blocks.
    type UpstreamMain;
    type Peers: RrPeers;

    /// The debug-log mask of the protocol (`NGX_LOG_DEBUG_HTTP`, ...).
    fn debug_mask() -> DebugMask;

    /// `main_conf` and `srv_conf` of `cf->ctx`.
    ///
    /// # Safety
    /// `cf->ctx` is a context of this protocol (its block's, a server's or
    /// an upstream's).
    unsafe fn conf_ctx(cf: &ngx_conf_t) -> (*mut *mut c_void, *mut *mut c_void);

    fn upstreams(main: &Self::UpstreamMain) -> &ngx_array_t;
    fn host(us: &Self::Upstream) -> &ngx_str_t;
    fn shm_zone(us: &Self::Upstream) -> *mut ngx_shm_zone_t;
    /// The block's per-module `srv_conf` array (NULL for implicit upstreams).
    fn srv_conf(us: &Self::Upstream) -> *mut *mut c_void;
    /// `us->peer.data`: the round-robin list once `init_upstream` ran.
    fn peers(us: &Self::Upstream) -> *const Self::Peers;
    fn peer_init(us: &mut Self::Upstream) -> &mut InitPeer<Self>;
    /// The block's `peer.init` now: this module's own when no module
    /// loaded after it wrapped it again.
    fn installed_init(us: &Self::Upstream) -> InitPeer<Self>;
    fn file_line(us: &Self::Upstream) -> (*const c_char, ngx_uint_t);

    /// The request's `&upstream->peer` and the pool for per-request state.
    ///
    /// # Safety
    /// `req` is a live request or session with an upstream being set up.
    unsafe fn peer_connection(
        req: *mut Self::Request,
    ) -> Option<(*mut ngx_peer_connection_t, *mut ngx_pool_t)>;

    /// The pool of a request (a stream session's connection pool).
    ///
    /// # Safety
    /// `req` is a live request or session.
    unsafe fn pool(req: *mut Self::Request) -> *mut ngx_pool_t;

    /// This module's slot in the request's module contexts: the wrapper's
    /// per-request word (`crate::peer::lean`), which http's
    /// `$generation_retry_resnapshots` reads too.
    ///
    /// # Safety
    /// `req` is a live request or session (its `ctx` array is allocated
    /// with it, one slot per module of the protocol).
    unsafe fn ctx_slot(req: *mut Self::Request) -> *mut *mut c_void;

    /// The upstream block of the request whose `&upstream->peer` is `pc`:
    /// `pc` is a field of nginx's per-request upstream structure, which
    /// also names the block.
    ///
    /// # Safety
    /// `pc` is the `peer` field of a live `ngx_{http,stream}_upstream_t`
    /// whose `upstream` is set (nginx sets it before `peer.init`).
    unsafe fn upstream_of(pc: *mut ngx_peer_connection_t) -> *mut Self::Upstream;

    /// The request whose upstream's peer connection is `pc`, found through
    /// what nginx itself links to it (http: the upstream's cleanup entry,
    /// whose data is the request), checked to lead back to `pc`; NULL when
    /// it does not, or for a protocol without the lean path.
    ///
    /// # Safety
    /// As for [`Proto::upstream_of`].
    unsafe fn owner(pc: *mut ngx_peer_connection_t) -> *mut Self::Request;
}

/// The accessors of [`Proto`] over fields that http and stream name alike.
macro_rules! upstream_fields {
    () => {
        fn upstreams(main: &Self::UpstreamMain) -> &ngx_array_t {
            &main.upstreams
        }
        fn host(us: &Self::Upstream) -> &ngx_str_t {
            &us.host
        }
        fn shm_zone(us: &Self::Upstream) -> *mut ngx_shm_zone_t {
            us.shm_zone
        }
        fn srv_conf(us: &Self::Upstream) -> *mut *mut c_void {
            us.srv_conf
        }
        fn peers(us: &Self::Upstream) -> *const Self::Peers {
            us.peer.data.cast()
        }
        fn peer_init(us: &mut Self::Upstream) -> &mut InitPeer<Self> {
            &mut us.peer.init
        }
        fn installed_init(us: &Self::Upstream) -> InitPeer<Self> {
            us.peer.init
        }
        fn file_line(us: &Self::Upstream) -> (*const c_char, ngx_uint_t) {
            (us.file_name.cast_const().cast(), us.line)
        }
    };
}

pub(crate) struct Http;
/// Compiled only against an nginx with stream upstream zones.
#[cfg(generation_retry_stream)]
pub(crate) struct Stream;

impl Proto for Http {
    const PROTOCOL: Protocol = Protocol::Http;
    const LEAN: bool = true;
    const UPSTREAM_MODULE: &'static CStr = c"ngx_http_upstream_module";
    type Request = ngx_http_request_t;
    type Upstream = ngx_http_upstream_srv_conf_t;
    type UpstreamMain = ngx_http_upstream_main_conf_t;
    type Peers = ngx_http_upstream_rr_peers_t;

    fn debug_mask() -> DebugMask {
        DebugMask::Http
    }

    unsafe fn conf_ctx(cf: &ngx_conf_t) -> (*mut *mut c_void, *mut *mut c_void) {
        // SAFETY: per the contract, cf->ctx is the http block's context.
        let ctx = unsafe { &*(cf.ctx as *const ngx_http_conf_ctx_t) };
        (ctx.main_conf, ctx.srv_conf)
    }

    upstream_fields!();

    unsafe fn peer_connection(
        r: *mut ngx_http_request_t,
    ) -> Option<(*mut ngx_peer_connection_t, *mut ngx_pool_t)> {
        // SAFETY: per the contract; r->upstream is set before peer.init.
        unsafe {
            let u = (*r).upstream.as_mut()?;
            Some((&mut u.peer, (*r).pool))
        }
    }

    unsafe fn pool(r: *mut ngx_http_request_t) -> *mut ngx_pool_t {
        // SAFETY: per the contract.
        unsafe { (*r).pool }
    }

    unsafe fn ctx_slot(r: *mut ngx_http_request_t) -> *mut *mut c_void {
        // SAFETY: per the contract; r->ctx is allocated with the request
        // (ngx_http_alloc_request), a slot per http module.
        unsafe { (*r).ctx.add(Self::module().ctx_index) }
    }

    unsafe fn upstream_of(pc: *mut ngx_peer_connection_t) -> *mut ngx_http_upstream_srv_conf_t {
        // SAFETY: per the contract, pc is `&u->peer` of a live upstream.
        unsafe {
            (*container_of::<ngx_http_upstream_t>(pc, offset_of!(ngx_http_upstream_t, peer)))
                .upstream
        }
    }

    unsafe fn owner(pc: *mut ngx_peer_connection_t) -> *mut ngx_http_request_t {
        let u = container_of::<ngx_http_upstream_t>(pc, offset_of!(ngx_http_upstream_t, peer));
        // SAFETY: per the contract. ngx_http_upstream_init_request adds the
        // request's cleanup entry, with the request as its data, and keeps
        // `&cln->handler` in u->cleanup (NULL once the upstream is
        // finalised); `handler` is the entry's first field.
        unsafe {
            let cleanup = (*u).cleanup as *mut ngx_http_cleanup_t;
            let Some(cln) = cleanup.as_ref() else {
                return ptr::null_mut();
            };
            let r = cln.data as *mut ngx_http_request_t;
            if r.is_null() || (*r).upstream != u {
                return ptr::null_mut();
            }
            r
        }
    }
}

#[cfg(generation_retry_stream)]
impl Proto for Stream {
    const PROTOCOL: Protocol = Protocol::Stream;
    const LEAN: bool = false;
    const UPSTREAM_MODULE: &'static CStr = c"ngx_stream_upstream_module";
    type Request = ngx_stream_session_t;
    type Upstream = ngx_stream_upstream_srv_conf_t;
    type UpstreamMain = ngx_stream_upstream_main_conf_t;
    type Peers = ngx_stream_upstream_rr_peers_t;

    fn debug_mask() -> DebugMask {
        DebugMask::Stream
    }

    unsafe fn conf_ctx(cf: &ngx_conf_t) -> (*mut *mut c_void, *mut *mut c_void) {
        // SAFETY: per the contract, cf->ctx is the stream block's context.
        let ctx = unsafe { &*(cf.ctx as *const ngx_stream_conf_ctx_t) };
        (ctx.main_conf, ctx.srv_conf)
    }

    upstream_fields!();

    unsafe fn peer_connection(
        s: *mut ngx_stream_session_t,
    ) -> Option<(*mut ngx_peer_connection_t, *mut ngx_pool_t)> {
        // SAFETY: per the contract; the proxy module sets s->upstream (and
        // the session's connection is live) before calling peer.init.
        unsafe {
            let u = (*s).upstream.as_mut()?;
            let c = (*s).connection.as_ref()?;
            Some((&mut u.peer, c.pool))
        }
    }

    unsafe fn pool(s: *mut ngx_stream_session_t) -> *mut ngx_pool_t {
        // SAFETY: per the contract; a live session has its connection.
        unsafe { (*(*s).connection).pool }
    }

    unsafe fn ctx_slot(s: *mut ngx_stream_session_t) -> *mut *mut c_void {
        // SAFETY: per the contract; s->ctx is allocated with the session
        // (ngx_stream_init_connection), a slot per stream module.
        unsafe { (*s).ctx.add(Self::module().ctx_index) }
    }

    unsafe fn upstream_of(pc: *mut ngx_peer_connection_t) -> *mut ngx_stream_upstream_srv_conf_t {
        // SAFETY: per the contract, pc is `&u->peer` of a live upstream.
        unsafe {
            (*container_of::<ngx_stream_upstream_t>(pc, offset_of!(ngx_stream_upstream_t, peer)))
                .upstream
        }
    }

    /// Not looked for: stream sessions take the full path (see
    /// [`Proto::LEAN`]).
    unsafe fn owner(_pc: *mut ngx_peer_connection_t) -> *mut ngx_stream_session_t {
        ptr::null_mut()
    }
}

/// The structure of type `T` that holds `pc` at `offset`.
#[inline]
fn container_of<T>(pc: *mut ngx_peer_connection_t, offset: usize) -> *mut T {
    pc.cast::<u8>().wrapping_sub(offset).cast()
}

/// The round-robin peer list of an upstream with a `zone`: after the zone is
/// initialised, the shared-memory copy every worker sees.
fn rr_peers<P: Proto>(us: &P::Upstream) -> Option<&P::Peers> {
    // SAFETY: the module wraps only upstreams with a `zone`, and the zone
    // module requires (and copies) round-robin peers into us->peer.data,
    // which lives as long as the cycle.
    unsafe { P::peers(us).as_ref() }
}

/// The peer list's generation now (0 when the list has no counter).
///
/// One aligned word load, without the list lock: a torn value is impossible,
/// and a stale one only means "changed" is seen one selection later, which
/// round-robin's own check under the lock then reports as busy again.
#[inline]
pub(crate) fn generation<P: Proto>(us: &P::Upstream) -> usize {
    match rr_peers::<P>(us) {
        // SAFETY: `config` points at a counter in the zone's slab pool, which
        // lives as long as the zone.
        Some(p) if !p.config().is_null() => unsafe { ptr::read_volatile(p.config()) },
        _ => 0,
    }
}

/// Numbers of primary and backup peers, read under the list's read lock.
/// Only on the failure path and for the status endpoint.
pub(crate) fn peer_counts<P: Proto>(us: &P::Upstream) -> (usize, usize) {
    let Some(peers) = rr_peers::<P>(us) else {
        return (0, 0);
    };
    let lock = peers.rwlock();
    let locked = peers.shared();
    // SAFETY: a zone's peer lists are guarded by `rwlock` in shared memory;
    // taking the read lock is what round-robin does to read them. `next`
    // (backup) is NULL or a list sharing the lock's lifetime.
    unsafe {
        if locked {
            ngx_rwlock_rlock(lock);
        }
        let primary = peers.number();
        let backup = peers.next().as_ref().map_or(0, |b| b.number());
        if locked {
            ngx_rwlock_unlock(lock);
        }
        (primary, backup)
    }
}

/// The upstream block's name.
pub(crate) fn upstream_name<P: Proto>(us: &P::Upstream) -> String {
    String::from_utf8_lossy(P::host(us).as_bytes()).into_owned()
}
