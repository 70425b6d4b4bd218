//! The http protocol's fields for [`Proto`], and its response headers
//! (the `Set-Cookie` a re-snapshot's second balancer state replaces).

use core::ffi::{c_char, c_void, CStr};
use core::mem::offset_of;
use core::ptr;

use generation_retry_core::metrics::Protocol;
use ngx::ffi::{
    ngx_array_t, ngx_conf_t, ngx_http_cleanup_t, ngx_http_conf_ctx_t, ngx_http_request_t,
    ngx_http_upstream_main_conf_t, ngx_http_upstream_rr_peers_t, ngx_http_upstream_srv_conf_t,
    ngx_http_upstream_t, ngx_list_part_t, ngx_peer_connection_t, ngx_pool_t, ngx_shm_zone_t,
    ngx_str_t, ngx_table_elt_t, ngx_uint_t,
};
use ngx::log::DebugMask;

use super::{container_of, InitPeer, Proto, Registered};

pub(crate) struct Http;

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
