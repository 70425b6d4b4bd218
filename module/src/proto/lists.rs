//! The peer lists of an upstream block, read for the module: the
//! generation, the peer counts, the peers a request tried, a handed-back
//! peer's check time put back, and the block's name. Each list under its
//! own read lock, as round-robin reads them.

use core::ptr;

use ngx::ffi::{ngx_rwlock_rlock, ngx_rwlock_unlock, ngx_rwlock_wlock, ngx_str_t};

use super::{Proto, RrPeers};

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
/// balancer's `free` with a state that is not failed (the hand-back's
/// `NGX_PEER_NEXT`, which round-robin treats as 0) leaves the failures as
/// they were instead of clearing them (a dead peer revived untried), and no
/// failure is added (a peer disabled, or its weight cut, for an attempt
/// never made). The
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
