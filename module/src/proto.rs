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
    ngx_http_request_t, ngx_http_upstream_main_conf_t, ngx_http_upstream_rr_peer_t,
    ngx_http_upstream_rr_peers_t, ngx_http_upstream_srv_conf_t, ngx_http_upstream_t, ngx_int_t,
    ngx_list_part_t, ngx_module_t, ngx_peer_connection_t, ngx_pool_t, ngx_shm_zone_t, ngx_str_t,
    ngx_table_elt_t, ngx_uint_t,
};
#[cfg(generation_retry_stream)]
use ngx::ffi::{
    ngx_stream_conf_ctx_t, ngx_stream_session_t, ngx_stream_upstream_main_conf_t,
    ngx_stream_upstream_rr_peer_t, ngx_stream_upstream_rr_peers_t, ngx_stream_upstream_srv_conf_t,
    ngx_stream_upstream_t,
};

use ngx::ffi::{ngx_rwlock_rlock, ngx_rwlock_unlock, ngx_rwlock_wlock, time_t};
use ngx::log::DebugMask;

/// `peer.init` of an upstream block of protocol `P`.
pub(crate) type InitPeer<P> = Option<
    unsafe extern "C" fn(*mut <P as Proto>::Request, *mut <P as Proto>::Upstream) -> ngx_int_t,
>;

/// A round-robin peer list, `ngx_{http,stream}_upstream_rr_peers_t`, and
/// its peers, read through raw pointers: the list is in shared memory that
/// other workers write under its locks, so no Rust reference to it (which
/// would promise that nothing else writes it) is ever made. Each accessor
/// reads or addresses one field with `addr_of!`.
///
/// # Safety
/// Every accessor takes a pointer to a live list (or peer) of the zone,
/// read as round-robin reads it: a list's counts, links and peers under
/// that list's own read lock (the backup list has its own), or where nginx
/// reads them without one.
pub(crate) trait RrPeers {
    type Peer;
    /// The zone's change counter (NULL without a zone).
    unsafe fn config(p: *const Self) -> *mut ngx_uint_t;
    unsafe fn number(p: *const Self) -> usize;
    /// The backup list, or NULL.
    unsafe fn next(p: *const Self) -> *mut Self;
    unsafe fn rwlock(p: *mut Self) -> *mut ngx_atomic_t;
    /// Whether the list lives in a shared zone (and so is locked).
    unsafe fn shared(p: *const Self) -> bool;
    /// The first peer, or NULL.
    unsafe fn first(p: *const Self) -> *mut Self::Peer;
    /// The peer after `peer` in its list, or NULL.
    unsafe fn peer_next(peer: *const Self::Peer) -> *mut Self::Peer;
    unsafe fn peer_addr(peer: *const Self::Peer) -> (*mut ngx::ffi::sockaddr, ngx::ffi::socklen_t);
    /// `&peer->name`: what a balancer's get points `pc->name` at.
    unsafe fn peer_name(peer: *const Self::Peer) -> *const ngx_str_t;
    unsafe fn peer_down(peer: *const Self::Peer) -> bool;
    unsafe fn peer_fails(peer: *const Self::Peer) -> ngx_uint_t;
    /// `&peer->accessed` and `&peer->checked`: the last failure's time and
    /// the last check's (round-robin's `fail_timeout` bookkeeping).
    unsafe fn peer_times(peer: *mut Self::Peer) -> (*mut time_t, *mut time_t);
    unsafe fn peer_lock(peer: *mut Self::Peer) -> *mut ngx_atomic_t;
}

macro_rules! rr_peers {
    ($t:ty, $peer:ty) => {
        impl RrPeers for $t {
            type Peer = $peer;
            unsafe fn config(p: *const Self) -> *mut ngx_uint_t {
                // SAFETY: per the trait's contract.
                unsafe { ptr::addr_of!((*p).config).read() }
            }
            unsafe fn number(p: *const Self) -> usize {
                // SAFETY: per the trait's contract.
                unsafe { ptr::addr_of!((*p).number).read() }
            }
            unsafe fn next(p: *const Self) -> *mut Self {
                // SAFETY: per the trait's contract.
                unsafe { ptr::addr_of!((*p).next).read() }
            }
            unsafe fn rwlock(p: *mut Self) -> *mut ngx_atomic_t {
                // SAFETY: per the trait's contract; an address, no read.
                unsafe { ptr::addr_of_mut!((*p).rwlock) }
            }
            unsafe fn shared(p: *const Self) -> bool {
                // SAFETY: per the trait's contract.
                unsafe { !ptr::addr_of!((*p).shpool).read().is_null() }
            }
            unsafe fn first(p: *const Self) -> *mut $peer {
                // SAFETY: per the trait's contract.
                unsafe { ptr::addr_of!((*p).peer).read() }
            }
            unsafe fn peer_next(peer: *const $peer) -> *mut $peer {
                // SAFETY: per the trait's contract.
                unsafe { ptr::addr_of!((*peer).next).read() }
            }
            unsafe fn peer_addr(
                peer: *const $peer,
            ) -> (*mut ngx::ffi::sockaddr, ngx::ffi::socklen_t) {
                // SAFETY: per the trait's contract.
                unsafe {
                    (
                        ptr::addr_of!((*peer).sockaddr).read(),
                        ptr::addr_of!((*peer).socklen).read(),
                    )
                }
            }
            unsafe fn peer_name(peer: *const $peer) -> *const ngx_str_t {
                // SAFETY: per the trait's contract; an address, no read.
                unsafe { ptr::addr_of!((*peer).name) }
            }
            unsafe fn peer_down(peer: *const $peer) -> bool {
                // SAFETY: per the trait's contract.
                unsafe { ptr::addr_of!((*peer).down).read() != 0 }
            }
            unsafe fn peer_fails(peer: *const $peer) -> ngx_uint_t {
                // SAFETY: per the trait's contract.
                unsafe { ptr::addr_of!((*peer).fails).read() }
            }
            unsafe fn peer_times(peer: *mut $peer) -> (*mut time_t, *mut time_t) {
                // SAFETY: per the trait's contract; addresses, no read.
                unsafe {
                    (
                        ptr::addr_of_mut!((*peer).accessed),
                        ptr::addr_of_mut!((*peer).checked),
                    )
                }
            }
            unsafe fn peer_lock(peer: *mut $peer) -> *mut ngx_atomic_t {
                // SAFETY: per the trait's contract; an address, no read.
                unsafe { ptr::addr_of_mut!((*peer).lock) }
            }
        }
    };
}

rr_peers!(ngx_http_upstream_rr_peers_t, ngx_http_upstream_rr_peer_t);
#[cfg(generation_retry_stream)]
rr_peers!(
    ngx_stream_upstream_rr_peers_t,
    ngx_stream_upstream_rr_peer_t
);

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
    fn peers(us: &Self::Upstream) -> *mut Self::Peers;
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

    /// How many response headers the request has (`r->headers_out`); 0
    /// for a protocol without them.
    ///
    /// # Safety
    /// `req` is a live request or session.
    unsafe fn header_count(req: *mut Self::Request) -> usize;

    /// Hides (`hash = 0`, nginx's way of removing a header) every response
    /// `Set-Cookie` that a later one of the same cookie name replaces,
    /// where the later one was added at or after position `mark`: a
    /// balancer that sets its cookie at each selection (`sticky cookie`)
    /// adds one per state, and a re-snapshot gives the request a second
    /// state; nginx's own retries keep one state, and send one cookie. A
    /// cookie is matched by its name alone (RFC 6265 adds domain and path):
    /// before the upstream answers, the headers hold only what a balancer
    /// set. A no-op for a protocol without response headers.
    ///
    /// # Safety
    /// `req` is a live request or session.
    unsafe fn hide_replaced_cookies(req: *mut Self::Request, mark: usize);

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
        fn peers(us: &Self::Upstream) -> *mut Self::Peers {
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

    unsafe fn header_count(r: *mut ngx_http_request_t) -> usize {
        // SAFETY: per the contract; the list's parts are the request's.
        unsafe { headers_out(r).len() }
    }

    unsafe fn hide_replaced_cookies(r: *mut ngx_http_request_t, mark: usize) {
        // SAFETY: per the contract.
        let headers = unsafe { headers_out(r) };
        let mut kept: Vec<&[u8]> = Vec::new();
        for (i, h) in headers.into_iter().enumerate().rev() {
            // SAFETY: an element of the request's header list, written by
            // this worker only; no other reference to it is alive.
            let h = unsafe { &mut *h };
            if h.hash == 0 || !h.key.as_bytes().eq_ignore_ascii_case(b"set-cookie") {
                continue;
            }
            let value = h.value.as_bytes();
            let name = value.split(|&b| b == b'=').next().unwrap_or(value);
            if kept.contains(&name) {
                h.hash = 0;
            } else if i >= mark {
                kept.push(name);
            }
        }
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

    unsafe fn header_count(_s: *mut ngx_stream_session_t) -> usize {
        0
    }

    unsafe fn hide_replaced_cookies(_s: *mut ngx_stream_session_t, _mark: usize) {}

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

/// The elements of a request's `headers_out` list, part after part, as
/// raw pointers.
///
/// # Safety
/// `r` is a live request; the list is not changed while the result is
/// used.
unsafe fn headers_out(r: *mut ngx_http_request_t) -> Vec<*mut ngx_table_elt_t> {
    let mut all = Vec::new();
    // SAFETY: per the contract: ngx_list_t parts, each with `nelts`
    // elements of `size` bytes (a ngx_table_elt_t), the last with next NULL.
    unsafe {
        let mut part: *mut ngx_list_part_t = ptr::addr_of_mut!((*r).headers_out.headers.part);
        while !part.is_null() {
            let elts = (*part).elts as *mut ngx_table_elt_t;
            for i in 0..(*part).nelts {
                all.push(elts.add(i));
            }
            part = (*part).next;
        }
    }
    all
}

/// The structure of type `T` that holds `pc` at `offset`.
#[inline]
fn container_of<T>(pc: *mut ngx_peer_connection_t, offset: usize) -> *mut T {
    pc.cast::<u8>().wrapping_sub(offset).cast()
}

/// The round-robin peer list of an upstream with a `zone`: after the zone is
/// initialised, the shared-memory copy every worker sees; NULL before.
/// The module wraps only upstreams with a `zone`, and the zone module
/// requires (and copies) round-robin peers into us->peer.data, which lives
/// as long as the cycle: a non-NULL result is a live list for every
/// accessor of [`RrPeers`].
fn rr_peers<P: Proto>(us: &P::Upstream) -> *mut P::Peers {
    P::peers(us)
}

/// The peer list's generation now (0 when the list has no counter).
///
/// One aligned word load, without the list lock: a torn value is impossible,
/// and a stale one only means "changed" is seen one selection later, which
/// round-robin's own check under the lock then reports as busy again.
#[inline]
pub(crate) fn generation<P: Proto>(us: &P::Upstream) -> usize {
    let peers = rr_peers::<P>(us);
    if peers.is_null() {
        return 0;
    }
    // SAFETY: a live list (see `rr_peers`); `config` is set when the zone
    // is and never changes after.
    let config = unsafe { P::Peers::config(peers) };
    if config.is_null() {
        return 0;
    }
    // SAFETY: a counter in the zone's slab pool, which lives as long as the
    // zone; other workers write it, hence the volatile load.
    unsafe { ptr::read_volatile(config) }
}

/// Runs `f` on the upstream's primary list, then on its backup list if it
/// has one, each under its own read lock, as round-robin locks them (one at
/// a time: a re-resolve of a backup name write-locks the backup list alone
/// while it unlinks and frees peers). `f` says whether to go on.
fn each_list<P: Proto>(us: &P::Upstream, mut f: impl FnMut(*mut P::Peers) -> bool) {
    let primary = rr_peers::<P>(us);
    if primary.is_null() {
        return;
    }
    // SAFETY: a live list (see `rr_peers`); `next`, the backup list, is set
    // when the zone is copied and never changes after: NULL or a list that
    // lives as long. Each list's peers are read under that list's own
    // `rwlock` in shared memory, the lock round-robin takes to read them.
    unsafe {
        for list in [primary, P::Peers::next(primary)] {
            if list.is_null() {
                return;
            }
            let locked = P::Peers::shared(list);
            let lock = P::Peers::rwlock(list);
            if locked {
                ngx_rwlock_rlock(lock);
            }
            let go = f(list);
            if locked {
                ngx_rwlock_unlock(lock);
            }
            if !go {
                return;
            }
        }
    }
}

/// Numbers of primary and backup peers, each read under its list's read
/// lock. Only on the failure path and for the status endpoint.
pub(crate) fn peer_counts<P: Proto>(us: &P::Upstream) -> (usize, usize) {
    let mut n = [0; 2];
    let mut i = 0;
    each_list::<P>(us, |list| {
        // SAFETY: a live list, under its lock (see `each_list`).
        n[i] = unsafe { P::Peers::number(list) };
        i += 1;
        true
    });
    (n[0], n[1])
}

/// How many peers of the upstream's lists (primary and backup), not
/// `down`, have an address for which `tried` says yes: the peers a fresh
/// round-robin state counts in its tries (`peers->tries` counts those not
/// down) that a request has already tried. Each list under its read lock.
pub(crate) fn count_peers<P: Proto>(
    us: &P::Upstream,
    mut tried: impl FnMut(*mut ngx::ffi::sockaddr, ngx::ffi::socklen_t) -> bool,
) -> usize {
    let mut n = 0;
    each_list::<P>(us, |list| {
        // SAFETY: a live list and its peers, under the list's read lock:
        // the links and addresses change only under its write lock.
        unsafe {
            let mut peer = P::Peers::first(list);
            while !peer.is_null() {
                let (sockaddr, socklen) = P::Peers::peer_addr(peer);
                if !P::Peers::peer_down(peer) && tried(sockaddr, socklen) {
                    n += 1;
                }
                peer = P::Peers::peer_next(peer);
            }
        }
        true
    });
    n
}

/// Hands a peer back to round-robin's `fail_timeout` bookkeeping as it was
/// before a selection that will not be used: when the peer has failures
/// and its check time is past its last failure's (`checked` after
/// `accessed`: the balancer's get has just opened its trial, most likely
/// this request's), `checked` goes back to `accessed`, so that the
/// balancer's `free` with state 0 leaves the failures as they were instead
/// of clearing them (a dead peer revived untried), and no failure is added
/// (a peer disabled, or its weight cut, for an attempt never made). The
/// peer is the one whose `name` `pc_name` points at, as a balancer's get
/// sets `pc->name`; not found (another balancer's peer, or one a re-resolve
/// removed), nothing is changed. Under its list's read lock and the peer's
/// own lock, as round-robin's free writes these.
///
/// Going back to `accessed` rather than the `checked` of before the get
/// changes nothing round-robin decides: the get opened the trial because
/// the earlier `checked` was more than `fail_timeout` ago, and so is
/// `accessed`, which is never later. Two windows are left, both healing
/// at the peer's next failure or success: a trial another request opened
/// in the same second is closed too (its success then does not clear the
/// failures), and one another worker opens between this and the `free`
/// (the peer lock is not held across the `free`, which takes it) is taken
/// as passed.
pub(crate) fn untouch_peer<P: Proto>(us: &P::Upstream, pc_name: *const ngx_str_t) {
    if pc_name.is_null() {
        return;
    }
    each_list::<P>(us, |list| {
        // SAFETY: as in `count_peers`; the peer's fields are written under
        // its own lock (taken when the list is shared, as round-robin's
        // ngx_http_upstream_rr_peer_lock does).
        unsafe {
            let locked = P::Peers::shared(list);
            let mut peer = P::Peers::first(list);
            while !peer.is_null() {
                if P::Peers::peer_name(peer) == pc_name {
                    let lock = P::Peers::peer_lock(peer);
                    if locked {
                        ngx_rwlock_wlock(lock);
                    }
                    let (accessed, checked) = P::Peers::peer_times(peer);
                    if P::Peers::peer_fails(peer) > 0 && accessed.read() < checked.read() {
                        checked.write(accessed.read());
                    }
                    if locked {
                        ngx_rwlock_unlock(lock);
                    }
                    return false;
                }
                peer = P::Peers::peer_next(peer);
            }
        }
        true
    });
}

/// The upstream block's name.
pub(crate) fn upstream_name<P: Proto>(us: &P::Upstream) -> String {
    String::from_utf8_lossy(P::host(us).as_bytes()).into_owned()
}
