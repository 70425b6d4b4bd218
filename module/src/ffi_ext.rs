//! The unsafe edge: small accessors over nginx's C structures, each with the
//! reason it is sound. The rest of the module works with safe references.

use core::ffi::{c_void, CStr};
use core::ptr;

use ngx::ffi::{
    ngx_array_t, ngx_conf_t, ngx_http_request_t, ngx_module_t, ngx_rwlock_rlock, ngx_rwlock_unlock,
    ngx_str_t,
};

use crate::proto::{Proto, RrPeers};

/// Views an `ngx_array_t` of `T` as a slice.
///
/// # Safety
/// `array` must be NULL or a live array whose elements are `T`.
pub(crate) unsafe fn array_slice<'a, T>(array: *const ngx_array_t) -> &'a [T] {
    if array.is_null() {
        return &[];
    }
    // SAFETY: per the contract, `array` is live and holds `nelts` elements of T.
    unsafe {
        let a = &*array;
        if a.nelts == 0 || a.elts.is_null() {
            return &[];
        }
        core::slice::from_raw_parts(a.elts as *const T, a.nelts)
    }
}

/// Views an `ngx_str_t` as bytes.
pub(crate) fn str_bytes(s: &ngx_str_t) -> &[u8] {
    if s.len == 0 || s.data.is_null() {
        return &[];
    }
    // SAFETY: an ngx_str_t with non-NULL data points at `len` readable bytes
    // for as long as the string itself lives.
    unsafe { core::slice::from_raw_parts(s.data, s.len) }
}

/// An `ngx_str_t` pointer as lossy UTF-8 (`-` for NULL).
pub(crate) fn str_ptr_lossy(s: *const ngx_str_t) -> String {
    if s.is_null() {
        return "-".into();
    }
    // SAFETY: non-NULL ngx_str_t pointers handed to us by nginx are live.
    String::from_utf8_lossy(str_bytes(unsafe { &*s })).into_owned()
}

/// The arguments of the directive being parsed, name first.
pub(crate) fn conf_args(cf: &ngx_conf_t) -> &[ngx_str_t] {
    // SAFETY: while a directive handler runs, cf->args is the live array of
    // the directive's words.
    unsafe { array_slice(cf.args) }
}

/// The upstream block's name.
pub(crate) fn upstream_name<P: Proto>(us: &P::Upstream) -> String {
    String::from_utf8_lossy(str_bytes(P::host(us))).into_owned()
}

/// Entry `module.ctx_index` of a per-module configuration array
/// (`main_conf`, `srv_conf`); NULL when the array is NULL.
///
/// # Safety
/// `array` is NULL or a live configuration array of `module`'s kind (http
/// or stream), which has an entry for every module of that kind.
pub(crate) unsafe fn conf_slot(array: *mut *mut c_void, module: &ngx_module_t) -> *mut c_void {
    if array.is_null() {
        return ptr::null_mut();
    }
    // SAFETY: per the contract.
    unsafe { *array.add(module.ctx_index) }
}

/// The `ctx_index` of the module called `name` in the cycle being
/// configured, found by name so the module does not link against modules
/// nginx may lack (a build without `--with-stream`) or load later.
pub(crate) fn module_ctx_index(cf: &ngx_conf_t, name: &CStr) -> Option<usize> {
    // SAFETY: cf->cycle->modules is the cycle's module table of
    // `modules_n` entries, each with a NUL-terminated name.
    unsafe {
        let cycle = cf.cycle.as_ref()?;
        let modules = core::slice::from_raw_parts(cycle.modules, cycle.modules_n);
        modules
            .iter()
            .filter_map(|m| m.as_ref())
            .find(|m| !m.name.is_null() && CStr::from_ptr(m.name) == name)
            .map(|m| m.ctx_index)
    }
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
/// Only on the failure path.
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

/// Reads this module's per-request context slot.
pub(crate) fn request_ctx(r: &ngx_http_request_t, module: &ngx_module_t) -> *mut c_void {
    if r.ctx.is_null() {
        return ptr::null_mut();
    }
    // SAFETY: r->ctx has one slot per http module, ctx_index is ours.
    unsafe { *r.ctx.add(module.ctx_index) }
}

/// Writes this module's per-request context slot.
pub(crate) fn set_request_ctx(r: &mut ngx_http_request_t, module: &ngx_module_t, v: *mut c_void) {
    if r.ctx.is_null() {
        return;
    }
    // SAFETY: as in `request_ctx`.
    unsafe { *r.ctx.add(module.ctx_index) = v };
}
