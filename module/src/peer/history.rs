//! The addresses a request (or stream session) has tried, kept across
//! re-snapshots: a fresh balancer state's tried bitmap knows none of them.
//!
//! An address is recorded when nginx frees an attempt as failed or passed
//! over (`NGX_PEER_FAILED`, `NGX_PEER_NEXT`): that is how every retry
//! starts, in http (`ngx_http_upstream_next`) and in stream
//! (`ngx_stream_proxy_next_upstream`). A request that is never retried
//! never records anything, and records cost nothing until the first
//! failed attempt: one branch in `free`.

use core::mem;
use core::ptr;

use ngx::ffi::{
    ngx_cmp_sockaddr, ngx_palloc, ngx_peer_connection_t, ngx_pool_t, ngx_sockaddr_t, ngx_uint_t,
    socklen_t, NGX_OK, NGX_PEER_FAILED,
};

/// One tried address, in the request pool.
#[repr(C)]
struct Tried {
    next: *mut Tried,
    socklen: socklen_t,
    sockaddr: ngx_sockaddr_t,
}

/// The request's tried addresses: a list in its pool, empty until an
/// attempt fails. Plain pointers: the request pool owns the nodes.
#[derive(Clone, Copy)]
#[repr(C)]
pub(super) struct History {
    pool: *mut ngx_pool_t,
    head: *mut Tried,
    /// The attempt recorded last was on a cached connection.
    cached: bool,
}

impl History {
    /// An empty history whose records go to `pool` (the request's).
    pub(super) fn new(pool: *mut ngx_pool_t) -> History {
        History {
            pool,
            head: ptr::null_mut(),
            cached: false,
        }
    }

    /// Whether `sockaddr` (of `socklen` bytes, NULL for none) was tried:
    /// compared as nginx compares peer addresses, port included.
    pub(super) fn holds_addr(&self, sockaddr: *mut ngx::ffi::sockaddr, socklen: socklen_t) -> bool {
        if sockaddr.is_null() {
            return false;
        }
        let mut t = self.head;
        while !t.is_null() {
            // SAFETY: every node was written whole by `record` into the
            // request pool, which outlives this list; nothing else holds a
            // reference to it.
            let (len, next, tried) = unsafe {
                (
                    (*t).socklen,
                    (*t).next,
                    ptr::addr_of_mut!((*t).sockaddr) as *mut _,
                )
            };
            // SAFETY: both are valid addresses of their stated lengths: the
            // caller's (a balancer's peer), ours copied by `record`.
            // ngx_cmp_sockaddr only reads them.
            let rc = unsafe { ngx_cmp_sockaddr(sockaddr, socklen, tried, len, 1) };
            if rc == NGX_OK as _ {
                return true;
            }
            t = next;
        }
        false
    }

    /// Whether `pc`'s current address (`pc->sockaddr`) was tried.
    pub(super) fn holds(&self, pc: &ngx_peer_connection_t) -> bool {
        self.holds_addr(pc.sockaddr, pc.socklen)
    }

    /// Whether the attempt recorded last failed (not passed over) on a
    /// cached (keepalive) connection: nginx tries a single peer again only
    /// after such an attempt.
    pub(super) fn failed_cached(&self) -> bool {
        self.cached
    }

    /// Records `pc`'s current address, once, and whether it failed
    /// (`state`) on a cached connection. Out of line: only a failed or
    /// passed-over attempt gets here. A
    /// pool allocation failure loses the record, not the request: the
    /// address may then be tried again, as without the module.
    #[cold]
    #[inline(never)]
    pub(super) fn record(&mut self, pc: &ngx_peer_connection_t, state: ngx_uint_t) {
        // Named with its structure, so that the layout gate checks this
        // structure's `cached` alone (build/layout.rs).
        self.cached =
            state & NGX_PEER_FAILED as ngx_uint_t != 0 && ngx_peer_connection_t::cached(pc) != 0;
        let len = pc.socklen as usize;
        if pc.sockaddr.is_null() || len == 0 || len > mem::size_of::<ngx_sockaddr_t>() {
            return;
        }
        if self.holds(pc) {
            return;
        }
        // SAFETY: the request's live pool.
        let node = unsafe { ngx_palloc(self.pool, mem::size_of::<Tried>()) } as *mut Tried;
        if node.is_null() {
            return;
        }
        // SAFETY: `node` is a fresh pool allocation of a Tried (ngx_palloc
        // aligns to NGX_ALIGNMENT, a pointer's); `len` bytes of the
        // balancer's sockaddr are readable and fit in ngx_sockaddr_t.
        unsafe {
            node.write(Tried {
                next: self.head,
                socklen: pc.socklen,
                sockaddr: mem::zeroed(),
            });
            ptr::copy_nonoverlapping(
                pc.sockaddr as *const u8,
                ptr::addr_of_mut!((*node).sockaddr) as *mut u8,
                len,
            );
        }
        self.head = node;
    }
}
