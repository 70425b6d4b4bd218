//! The two kinds of upstream the module wraps, http and stream, behind one
//! trait. nginx keeps parallel types for them (`ngx_http_upstream_*` and
//! `ngx_stream_upstream_*`) with the same fields where the module looks, so
//! the peer wrapper, the directive and the counters are written once,
//! generically, and each protocol only says where its fields are.
//!
//! These files import nothing from the crate. The nginx module object of
//! each protocol is defined at the top (`lib.rs`, `stream.rs`), which
//! implements [`Registered`] for it.
//!
//! Here the traits; the peer list's accessors in `proto/rr_peers.rs`, each
//! protocol's fields in `proto/http.rs` and `proto/stream.rs`, and what the
//! module reads of an upstream's lists in `proto/lists.rs`.

mod lists;
mod rr_peers;

use core::ffi::{c_char, c_void, CStr};

use generation_retry_core::metrics::Protocol;
use ngx::ffi::{
    ngx_array_t, ngx_conf_t, ngx_int_t, ngx_module_t, ngx_peer_connection_t, ngx_pool_t,
    ngx_shm_zone_t, ngx_str_t, ngx_uint_t,
};
use ngx::log::DebugMask;

pub(crate) use lists::{count_peers, generation, peer_counts, untouch_peer, upstream_name};
pub(crate) use rr_peers::RrPeers;

/// `peer.init` of an upstream block of protocol `P`.
pub(crate) type InitPeer<P> = Option<
    unsafe extern "C" fn(*mut <P as Proto>::Request, *mut <P as Proto>::Upstream) -> ngx_int_t,
>;

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

// Declared after `upstream_fields!`, which they use.
mod http;
#[cfg(generation_retry_stream)]
mod stream;

pub(crate) use http::Http;
#[cfg(generation_retry_stream)]
pub(crate) use stream::Stream;

/// The structure of type `T` that holds `pc` at `offset`.
#[inline]
fn container_of<T>(pc: *mut ngx_peer_connection_t, offset: usize) -> *mut T {
    pc.cast::<u8>().wrapping_sub(offset).cast()
}
