//! Counters in shared memory: summed over workers (every worker increments
//! the same atomics), kept across reloads (the zone is reused when its name,
//! size and tag are unchanged, and upstreams find their slot again by name).

use core::ffi::c_void;
use core::mem::size_of;
use core::ptr;
use core::sync::atomic::{AtomicU64, Ordering};

use generation_retry_core::metrics::{Counter, Counters, COUNTERS};
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

    fn name(&self) -> &[u8] {
        &self.name[..self.name_len.min(NAME_MAX)]
    }
}

#[repr(C)]
struct Shared {
    magic: u64,
    used: usize,
    slots: [Slot; SLOTS],
}

const ZONE_NAME: &str = "generation_retry";

/// Adds the module's zone to the cycle being configured. `tag` is the
/// module (so another module cannot take the name), `data` what
/// [`init_zone`] receives to assign slots.
pub(crate) fn add_zone(
    cf: &mut ngx_conf_t,
    tag: *mut c_void,
    data: *mut c_void,
    init: unsafe extern "C" fn(*mut ngx_shm_zone_t, *mut c_void) -> ngx_int_t,
) -> Option<*mut ngx_shm_zone_t> {
    let mut name = ngx_str_t {
        len: ZONE_NAME.len(),
        data: ZONE_NAME.as_ptr() as *mut u8,
    };
    // The slab pool's header and page bookkeeping take a few pages.
    let size = size_of::<Shared>() + 64 * 1024;
    // SAFETY: cf is the configuration being parsed; nginx copies nothing of
    // `name` but keeps the pointer, which is 'static.
    let zone = unsafe { ngx_shared_memory_add(cf, &mut name, size, tag) };
    // SAFETY: a non-NULL zone is ours to set up until the cycle starts.
    let z = unsafe { zone.as_mut()? };
    if z.data.is_null() {
        z.init = Some(init);
        z.data = data;
    }
    Some(zone)
}

/// The shared counters, set up in the zone's init: the old cycle's when the
/// zone is reused (`old` non-NULL), else fresh from the slab pool.
///
/// # Safety
/// `zone` is the module's zone being initialised by nginx (in the master,
/// before workers exist); `old` is what the previous cycle's zone held.
pub(crate) unsafe fn init_shared(
    zone: &mut ngx_shm_zone_t,
    old: *mut c_void,
) -> Option<*mut c_void> {
    if !old.is_null() {
        // SAFETY: `old` is a Shared this module set up in an earlier cycle
        // in this same memory (reused because name, size and tag match).
        let shared = old as *mut Shared;
        if unsafe { (*shared).magic } == MAGIC {
            return Some(old);
        }
    }
    let pool = zone.shm.addr as *mut ngx_slab_pool_t;
    // SAFETY: nginx initialised a slab pool at the start of the zone.
    let shared = unsafe { ngx_slab_calloc(pool, size_of::<Shared>()) } as *mut Shared;
    if shared.is_null() {
        return None;
    }
    // SAFETY: freshly zeroed memory of the right size; all-zero is a valid
    // Shared (atomics at 0, no names) but for the magic.
    unsafe { (*shared).magic = MAGIC };
    Some(shared as *mut c_void)
}

/// The slot for `name`, taking a free one if it has none yet. NULL when the
/// zone is full (logged once per upstream and cycle).
///
/// # Safety
/// `shared` comes from [`init_shared`]; called only in the master while it
/// configures a cycle (slot allocation is single-threaded).
pub(crate) unsafe fn slot_for(
    shared: *mut c_void,
    name: &[u8],
    log: *mut ngx::ffi::ngx_log_t,
) -> *const Slot {
    // SAFETY: per the contract.
    let shared = unsafe { &mut *(shared as *mut Shared) };
    let key = &name[..name.len().min(NAME_MAX)];
    let used = shared.used.min(SLOTS);
    if let Some(slot) = shared.slots[..used].iter().find(|s| s.name() == key) {
        return slot;
    }
    if used == SLOTS {
        ngx_log_error!(
            NGX_LOG_WARN,
            log,
            "generation_retry: counters zone is full ({SLOTS} upstreams); \
             upstream \"{}\" is not counted until restart",
            String::from_utf8_lossy(name)
        );
        return ptr::null();
    }
    let slot = &mut shared.slots[used];
    slot.name[..key.len()].copy_from_slice(key);
    slot.name_len = key.len();
    shared.used = used + 1;
    slot
}
