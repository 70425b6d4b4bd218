//! Counters in shared memory: summed over workers (every worker increments
//! the same atomics), kept across reloads (the zone is reused when its name,
//! size and tag are unchanged, and upstreams find their slot again by
//! protocol and name). One zone serves http and stream upstreams.
//!
//! Each protocol's block registers with the zone of its cycle (its
//! configuration and two functions), so this file names no protocol and
//! imports nothing from the crate.

use core::ffi::c_void;
use core::mem::size_of;
use core::ptr;
use core::sync::atomic::{AtomicU64, Ordering};

use generation_retry_core::log;
use generation_retry_core::metrics::{Counter, Counters, Protocol, UpstreamStats, COUNTERS};
use generation_retry_core::zone::SlabLayout;
use ngx::core::{Pool, Status};
use ngx::ffi::{
    ngx_conf_t, ngx_int_t, ngx_log_t, ngx_pagesize, ngx_shared_memory_add, ngx_shm_zone_t,
    ngx_slab_calloc, ngx_slab_page_t, ngx_slab_pool_t, ngx_slab_stat_t, ngx_str_t, NGX_LOG_EMERG,
    NGX_LOG_WARN,
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
    pub(crate) fn add(&self, c: Counter, n: u32) {
        self.counters[c as usize].fetch_add(u64::from(n), Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> Counters {
        core::array::from_fn(|i| self.counters[i].load(Ordering::Relaxed))
    }

    fn is(&self, protocol: usize, name: &[u8]) -> bool {
        self.protocol == protocol && &self.name[..self.name_len.min(NAME_MAX)] == name
    }
}

/// The zone's contents: the slots, handed out in order.
#[repr(C)]
pub(crate) struct Shared {
    magic: u64,
    used: usize,
    slots: [Slot; SLOTS],
}

/// The slot for upstream `name` of `protocol`, taking a free one if it has
/// none yet. NULL when the zone is full (logged once per upstream and
/// cycle).
///
/// # Safety
/// `shared` comes from [`init_shared`]; called only in the master while it
/// configures a cycle, so nothing else assigns slots. Workers of the old
/// cycle may be incrementing the counters meanwhile: only shared references
/// to taken slots are formed, and a free slot, which no worker uses, is
/// written through the raw pointer.
pub(crate) unsafe fn slot_for(
    shared: *mut Shared,
    protocol: Protocol,
    name: &[u8],
    log: *mut ngx_log_t,
) -> *const Slot {
    let key = &name[..name.len().min(NAME_MAX)];
    let tag = 1 + protocol as usize;
    // SAFETY: per the contract; `used` is written by the master alone.
    let used = unsafe { (*shared).used }.min(SLOTS);
    for i in 0..used {
        // SAFETY: a taken slot; workers only touch its atomics.
        let slot = unsafe { &*ptr::addr_of!((*shared).slots[i]) };
        if slot.is(tag, key) {
            return slot;
        }
    }
    if used == SLOTS {
        let name = String::from_utf8_lossy(name);
        ngx_log_error!(
            NGX_LOG_WARN,
            log,
            "{}",
            log::zone_full(SLOTS, protocol, &name)
        );
        return ptr::null();
    }
    // SAFETY: per the contract: slot `used` is free, no worker refers to it.
    unsafe {
        let slot = ptr::addr_of_mut!((*shared).slots[used]);
        let slot_name = &mut *ptr::addr_of_mut!((*slot).name);
        slot_name[..key.len()].copy_from_slice(key);
        (*slot).name_len = key.len();
        (*slot).protocol = tag;
        (*shared).used = used + 1;
        slot
    }
}

const ZONE_NAME: &str = "generation_retry";

/// nginx's slab layout on this machine: its page size (set by
/// `ngx_os_init` before the configuration is read) and slab structures.
fn slab_layout() -> SlabLayout {
    SlabLayout {
        // SAFETY: written once by ngx_os_init at start-up, before any
        // configuration is parsed; only read afterwards.
        page: unsafe { ngx_pagesize },
        pool_header: size_of::<ngx_slab_pool_t>(),
        page_desc: size_of::<ngx_slab_page_t>(),
        stat: size_of::<ngx_slab_stat_t>(),
    }
}

/// The zone's tag: an address of this shared object, so that another
/// module cannot take the name and both protocols find the same zone.
static TAG: u8 = 0;

/// What a protocol's block registers with the zone of its cycle.
#[derive(Clone, Copy)]
pub(crate) struct Registration {
    /// The protocol's main configuration of this cycle, opaque here.
    pub(crate) conf: *mut c_void,
    /// Finds (or takes) each wrapped upstream's slot; run in the zone's
    /// init, in the master.
    pub(crate) assign: unsafe fn(conf: *mut c_void, shared: *mut Shared, log: *mut ngx_log_t),
    /// Appends each wrapped upstream's counters and gauges.
    pub(crate) collect: unsafe fn(conf: *mut c_void, out: &mut Vec<UpstreamStats>),
}

/// The zone's `data` for a cycle: what each protocol registered (indexed
/// by `Protocol`) and, once the zone is initialised, the counters. In the
/// cycle's pool.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct ZoneCtx {
    registered: [Option<Registration>; Protocol::ALL.len()],
    shared: *mut Shared,
}

impl ZoneCtx {
    /// The registrations, http first.
    pub(crate) fn registered(&self) -> impl Iterator<Item = &Registration> {
        self.registered.iter().flatten()
    }
}

/// Adds the module's zone to the cycle being configured, or finds it when
/// the other protocol's block added it already (same name, size and tag),
/// and registers `protocol` with it.
pub(crate) fn register(
    cf: &mut ngx_conf_t,
    protocol: Protocol,
    registration: Registration,
) -> Option<*mut ngx_shm_zone_t> {
    let mut name = ngx_str_t {
        len: ZONE_NAME.len(),
        data: ZONE_NAME.as_ptr().cast_mut(),
    };
    let size = slab_layout().zone_size(size_of::<Shared>());
    let tag = ptr::addr_of!(TAG).cast_mut().cast();
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
                registered: [None; Protocol::ALL.len()],
                shared: ptr::null_mut(),
            })
        };
        z.init = Some(init_zone);
        z.data = ctx.cast();
    }
    // SAFETY: the zone's data is the ZoneCtx made above, in the cycle pool,
    // and nothing else holds a reference to it during configuration.
    let ctx = unsafe { &mut *(z.data as *mut ZoneCtx) };
    ctx.registered[protocol as usize] = Some(registration);
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

/// The zone's init: the counters (reused or fresh), then each registered
/// protocol finds its upstreams' slots.
unsafe extern "C" fn init_zone(zone: *mut ngx_shm_zone_t, old: *mut c_void) -> ngx_int_t {
    // SAFETY: nginx passes our zone, whose data is the ZoneCtx set in
    // `register`, while it initialises the cycle in the master.
    let zone = unsafe { &mut *zone };
    // SAFETY: as above; `old` is what the previous cycle's zone held.
    let Some(shared) = (unsafe { init_shared(zone, old) }) else {
        return Status::NGX_ERROR.into();
    };
    // SAFETY: as above.
    let ctx = unsafe { &*(zone.data as *const ZoneCtx) };
    for r in ctx.registered() {
        // SAFETY: single-threaded master, the registration of this cycle
        // with its own configuration; `shared` from init_shared.
        unsafe { (r.assign)(r.conf, shared, zone.shm.log) };
    }
    Status::NGX_OK.into()
}

/// The shared counters, set up in the zone's init: the old cycle's when the
/// zone is reused (`old` non-NULL), else fresh from the slab pool. Recorded
/// in the zone's ZoneCtx.
///
/// # Safety
/// `zone` is the module's zone being initialised by nginx (in the master,
/// before workers exist); `old` is what the previous cycle's zone held: its
/// ZoneCtx, alive until the new cycle is up.
unsafe fn init_shared(zone: &mut ngx_shm_zone_t, old: *mut c_void) -> Option<*mut Shared> {
    // SAFETY: zone.data is the ZoneCtx of `register`.
    let ctx = unsafe { &mut *(zone.data as *mut ZoneCtx) };
    // SAFETY: per the contract; the old ZoneCtx's counters are in this same
    // memory (the zone is reused because name, size and tag match).
    let reused = unsafe { (old as *const ZoneCtx).as_ref() }
        .map(|o| o.shared)
        // SAFETY: a non-NULL `shared` points into the reused zone.
        .filter(|s| !s.is_null() && unsafe { (**s).magic } == MAGIC);
    if let Some(shared) = reused {
        ctx.shared = shared;
        return Some(shared);
    }
    let pool = zone.shm.addr as *mut ngx_slab_pool_t;
    // SAFETY: nginx initialised a slab pool at the start of the zone.
    let shared = unsafe { ngx_slab_calloc(pool, size_of::<Shared>()) } as *mut Shared;
    if shared.is_null() {
        let line = log::zone_too_small(
            ZONE_NAME,
            zone.shm.size,
            size_of::<Shared>(),
            slab_layout().page,
        );
        ngx_log_error!(NGX_LOG_EMERG, zone.shm.log, "{}", line);
        return None;
    }
    // SAFETY: freshly zeroed memory of the right size; all-zero is a valid
    // Shared (atomics at 0, free slots) but for the magic.
    unsafe { (*shared).magic = MAGIC };
    ctx.shared = shared;
    Some(shared)
}
