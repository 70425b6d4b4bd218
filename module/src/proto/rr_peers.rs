//! A round-robin peer list, `ngx_{http,stream}_upstream_rr_peers_t`, and
//! its peers, read through raw pointers, one field at a time: the trait
//! [`RrPeers`] and its implementation for http's and stream's lists.

use core::ptr;

use ngx::ffi::{
    ngx_atomic_t, ngx_http_upstream_rr_peer_t, ngx_http_upstream_rr_peers_t, ngx_str_t, ngx_uint_t,
    time_t,
};
#[cfg(generation_retry_stream)]
use ngx::ffi::{ngx_stream_upstream_rr_peer_t, ngx_stream_upstream_rr_peers_t};

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
