//! The stream protocol's fields for [`Proto`] (compiled only against an
//! nginx with stream upstream zones).

use core::ffi::{c_char, c_void, CStr};
use core::mem::offset_of;
use core::ptr;

use generation_retry_core::metrics::Protocol;
use ngx::ffi::{
    ngx_array_t, ngx_conf_t, ngx_peer_connection_t, ngx_pool_t, ngx_shm_zone_t, ngx_str_t,
    ngx_stream_conf_ctx_t, ngx_stream_session_t, ngx_stream_upstream_main_conf_t,
    ngx_stream_upstream_rr_peers_t, ngx_stream_upstream_srv_conf_t, ngx_stream_upstream_t,
    ngx_uint_t,
};
use ngx::log::DebugMask;

use super::{container_of, InitPeer, Proto, Registered};

/// Compiled only against an nginx with stream upstream zones.
pub(crate) struct Stream;

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
