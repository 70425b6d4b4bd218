//! Counters in shared memory: summed over workers (every worker increments
//! the same atomics), kept across reloads (the zone is reused when its name,
//! size and tag are unchanged, and upstreams find their slot again by
//! protocol and name). One zone serves http and stream upstreams.

use core::ffi::c_void;
use core::mem::size_of;
use core::ptr;
use core::sync::atomic::{AtomicU64, Ordering};

use generation_retry_core::metrics::{Counter, Counters, Protocol, COUNTERS};
use ngx::core::Pool;
use ngx::ffi::{
    ngx_conf_t, ngx_int_t, ngx_shared_memory_add, ngx_shm_zone_t, ngx_slab_calloc, ngx_slab_pool_t,
    ngx_str_t, NGX_LOG_WARN,
};
use ngx::ngx_log_error;

/// Upstreams that can ever be counted in one zone (across reloads).
pub(crate) const SLOTS: usize = 512;
/// Longest upstream name kept; longer names are truncated for matching.
const NAME_MAX: usize = 248;
const MAGIC: u64 = 0x6765_6e72_6574_7279; // "genretry"

/// One upstream's counters.
#[repr(C)]
pub(crate) struct Slot {
    /// 0 for a free slot, else 1 + the `Protocol` discriminant.
    protocol: usize,
    name_len: usize,
    name: [u8; NAME_MAX],
    counters: [AtomicU64; COUNTERS],
}

impl Slot {
    #[inline]
    pub(crate) fn add(&self, c: Counter) {
        self.counters[c as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> Counters {
        core::array::from_fn(|i| self.counters[i].load(Ordering::Relaxed))
    }

    fn is(&self, protocol: usize, name: &[u8]) -> bool {
        self.protocol == protocol && &self.name[..self.name_len.min(NAME_MAX)] == name
    }
}

#[repr(C)]
struct Shared {
    magic: u64,
    used: usize,
    slots: [Slot; SLOTS],
}

const ZONE_NAME: &str = "generation_retry";

/// The zone's `data` for a cycle: the cycle's configurations of both
/// protocols (NULL for a protocol without a block) and, once the zone is
/// initialised, the counters. In the cycle's pool.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct ZoneCtx {
    pub(crate) http: *mut c_void,
    pub(crate) stream: *mut c_void,
    shared: *mut Shared,
}

/// Adds the module's zone to the cycle being configured, or finds it when
/// the other protocol's block added it already (same name, size and tag).
pub(crate) fn add_zone(
    cf: &mut ngx_conf_t,
    init: unsafe extern "C" fn(*mut ngx_shm_zone_t, *mut c_void) -> ngx_int_t,
) -> Option<*mut ngx_shm_zone_t> {
    let mut name = ngx_str_t {
        len: ZONE_NAME.len(),
        data: ZONE_NAME.as_ptr() as *mut u8,
    };
    // The slab pool's header and page bookkeeping take a few pages.
    let size = size_of::<Shared>() + 64 * 1024;
    // The tag: the http module's address, so another module cannot take the
    // name (and both protocols find the same zone).
    let tag = ptr::addr_of_mut!(crate::ngx_http_upstream_generation_retry_module) as *mut c_void;
    // SAFETY: cf is the configuration being parsed; nginx copies nothing of
    // `name` but keeps the pointer, which is 'static.
    let zone = unsafe { ngx_shared_memory_add(cf, &mut name, size, tag) };
    // SAFETY: a non-NULL zone is ours to set up until the cycle starts.
    let z = unsafe { zone.as_mut()? };
    if z.data.is_null() {
        // SAFETY: cf->pool lives as long as the cycle.
        let pool = unsafe { Pool::from_ngx_pool(cf.pool) };
        let ctx = pool.alloc_type::<ZoneCtx>();
        if ctx.is_null() {
            return None;
        }
        // SAFETY: a fresh, aligned allocation of a ZoneCtx.
        unsafe {
            ctx.write(ZoneCtx {
                http: ptr::null_mut(),
                stream: ptr::null_mut(),
                shared: ptr::null_mut(),
            })
        };
        z.init = Some(init);
        z.data = ctx.cast();
    }
    Some(zone)
}

/// The ZoneCtx of the module's zone of a cycle (`None` for NULL).
pub(crate) fn zone_ctx<'a>(zone: *const ngx_shm_zone_t) -> Option<&'a ZoneCtx> {
    // SAFETY: a non-NULL zone of this module has a ZoneCtx, in the pool of
    // the cycle the caller is running in, as data.
    unsafe {
        zone.as_ref()
            .and_then(|z| (z.data as *const ZoneCtx).as_ref())
    }
}

/// The shared counters, set up in the zone's init: the old cycle's when the
/// zone is reused (`old` non-NULL), else fresh from the slab pool. Recorded
/// in the zone's ZoneCtx.
///
/// # Safety
/// `zone` is the module's zone being initialised by nginx (in the master,
/// before workers exist); `old` is what the previous cycle's zone held: its
/// ZoneCtx, alive until the new cycle is up.
pub(crate) unsafe fn init_shared(
    zone: &mut ngx_shm_zone_t,
    old: *mut c_void,
) -> Option<*mut c_void> {
    // SAFETY: zone.data is the ZoneCtx of add_zone.
    let ctx = unsafe { &mut *(zone.data as *mut ZoneCtx) };
    // SAFETY: per the contract; the old ZoneCtx's counters are in this same
    // memory (the zone is reused because name, size and tag match).
    let reused = unsafe { (old as *const ZoneCtx).as_ref() }
        .map(|o| o.shared)
        .filter(|s| !s.is_null() && unsafe { (**s).magic } == MAGIC);
    if let Some(shared) = reused {
        ctx.shared = shared;
        return Some(shared.cast());
    }
    let pool = zone.shm.addr as *mut ngx_slab_pool_t;
    // SAFETY: nginx initialised a slab pool at the start of the zone.
    let shared = unsafe { ngx_slab_calloc(pool, size_of::<Shared>()) } as *mut Shared;
    if shared.is_null() {
        return None;
    }
    // SAFETY: freshly zeroed memory of the right size; all-zero is a valid
    // Shared (atomics at 0, free slots) but for the magic.
    unsafe { (*shared).magic = MAGIC };
    ctx.shared = shared;
    Some(shared as *mut c_void)
}

/// The slot for upstream `name` of `protocol`, taking a free one if it has
/// none yet. NULL when the
/// zone is full (logged once per upstream and cycle).
///
/// # Safety
/// `shared` comes from [`init_shared`]; called only in the master while it
/// configures a cycle (slot allocation is single-threaded).
pub(crate) unsafe fn slot_for(
    shared: *mut c_void,
    protocol: Protocol,
    name: &[u8],
    log: *mut ngx::ffi::ngx_log_t,
) -> *const Slot {
    // SAFETY: per the contract.
    let shared = unsafe { &mut *(shared as *mut Shared) };
    let key = &name[..name.len().min(NAME_MAX)];
    let tag = 1 + protocol as usize;
    let used = shared.used.min(SLOTS);
    if let Some(slot) = shared.slots[..used].iter().find(|s| s.is(tag, key)) {
        return slot;
    }
    if used == SLOTS {
        ngx_log_error!(
            NGX_LOG_WARN,
            log,
            "generation_retry: counters zone is full ({SLOTS} upstreams); \
             {} upstream \"{}\" is not counted until restart",
            protocol.label(),
            String::from_utf8_lossy(name)
        );
        return ptr::null();
    }
    let slot = &mut shared.slots[used];
    slot.name[..key.len()].copy_from_slice(key);
    slot.name_len = key.len();
    slot.protocol = tag;
    shared.used = used + 1;
    slot
}
