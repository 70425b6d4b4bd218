//! Counters in shared memory: summed over workers (every worker increments
//! the same atomics), kept across reloads (the zone is reused when its name,
//! size and tag are unchanged, and upstreams find their slot again by
//! protocol and full name, without regard to case, as nginx compares
//! upstream names). One zone serves http and stream upstreams.
//!
//! Slots are allocated from the zone's slab pool, one per upstream, name
//! included, so there is no fixed number of them. Each configuration the
//! zone serves gets a number (its epoch); a slot remembers the newest
//! configuration that has its upstream, and each worker records its pid
//! and configuration in the zone when it starts. When the master sets up a
//! configuration, it frees the slots that neither it nor any configuration
//! with a live worker has (`generation_retry_core::zone::reclaimable`), so
//! renames and removals do not use the zone up; it frees nothing while any
//! of its live children has not recorded itself (just forked, or the table
//! full), since that child's configuration is unknown.
//!
//! Who touches what: the master alone writes the list, the slots' `next`
//! and `epoch` and the header's `head`, `slots` and `epoch` (while it sets
//! up a configuration); workers touch only the counters and their own
//! entry of the worker table. Fields a worker may hold a reference to while
//! the master writes them are atomics; the master reaches the header's
//! plain fields through raw pointers only.
//!
//! Each protocol's block registers with the zone of its cycle (its
//! configuration and two functions), so this file names no protocol and
//! imports nothing from the crate.

use core::ffi::c_void;
use core::mem::size_of;
use core::ptr;
use core::sync::atomic::{AtomicI64, AtomicPtr, AtomicU64, Ordering};
use std::collections::HashMap;

use generation_retry_core::log;
use generation_retry_core::metrics::{Counter, Counters, Protocol, UpstreamStats, COUNTERS};
use generation_retry_core::zone::{name_key, reclaimable, SlabLayout};
use ngx::core::{Pool, Status};
use ngx::ffi::{
    kill, ngx_conf_t, ngx_cycle_t, ngx_int_t, ngx_last_process, ngx_log_t, ngx_pagesize, ngx_pid,
    ngx_processes, ngx_shared_memory_add, ngx_shm_zone_t, ngx_slab_calloc, ngx_slab_free,
    ngx_slab_page_t, ngx_slab_pool_t, ngx_slab_stat_t, ngx_str_t, ngx_test_config, ESRCH,
    NGX_LOG_EMERG, NGX_LOG_NOTICE, NGX_LOG_WARN, NGX_MAX_PROCESSES,
};
use ngx::ngx_log_error;

const MAGIC: u64 = 0x6765_6e72_6574_7232; // "genretr2"

/// The zone's size. Shared memory is mapped, not committed (unless the
/// kernel is set to strict overcommit, `vm.overcommit_memory=2`): pages
/// are touched as upstreams get counters (about 150 bytes each with its
/// name), so the size costs address space, not memory, and holds about
/// 200,000 upstreams.
const ZONE_BYTES: usize = 32 << 20;

/// Worker processes whose configuration the zone can know at once (all
/// configurations' workers together, old ones included while they drain).
/// When it is full, slots are not freed (counting goes on), and the master
/// says so.
const WORKERS: usize = 1024;

/// One upstream's counters, its name following the structure in the same
/// allocation.
#[repr(C)]
pub(crate) struct Slot {
    /// The next slot of the zone's list (written by the master alone;
    /// atomic because workers hold references to slots).
    next: AtomicPtr<Slot>,
    /// The newest configuration (epoch) that has this upstream (as `next`).
    epoch: AtomicU64,
    /// 1 + the `Protocol` discriminant.
    protocol: usize,
    name_len: usize,
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

    fn name(&self) -> &[u8] {
        // SAFETY: every Slot is allocated with `name_len` bytes after it,
        // written before the slot is linked (see `Assigner::take`).
        unsafe {
            core::slice::from_raw_parts((self as *const Slot).add(1).cast::<u8>(), self.name_len)
        }
    }
}

/// A worker process and the configuration it runs.
#[repr(C)]
struct Worker {
    /// 0 for a free entry.
    pid: AtomicI64,
    epoch: AtomicU64,
}

/// The zone's contents.
#[repr(C)]
pub(crate) struct Shared {
    magic: u64,
    /// The newest configuration set up.
    epoch: u64,
    /// Every slot, newest first.
    head: *mut Slot,
    slots: usize,
    workers: [Worker; WORKERS],
}

/// Finds or takes the slots of one configuration's upstreams, in the
/// master while the zone's init runs.
///
/// Its contract, which its methods' `// SAFETY:` comments refer to: made
/// only by `init_zone`, in the master's one thread, with `shared` the
/// zone's header and `pool` its slab pool; it lives only during that init,
/// while no other process writes the header's plain fields or the list.
pub(crate) struct Assigner {
    shared: *mut Shared,
    pool: *mut ngx_slab_pool_t,
    epoch: u64,
    /// The zone's slots by protocol and name key (`core::zone::name_key`).
    index: HashMap<(usize, Vec<u8>), *mut Slot>,
    log: *mut ngx_log_t,
}

impl Assigner {
    /// The slot for upstream `name` of `protocol`, taking a new one if it has
    /// none; marked as used by this configuration. NULL when the zone has no
    /// room left (said at `warn`).
    pub(crate) fn slot_for(&mut self, protocol: Protocol, name: &[u8]) -> *const Slot {
        let tag = 1 + protocol as usize;
        let key = (tag, name_key(name));
        let slot = match self.index.get(&key) {
            Some(&slot) => slot,
            None => {
                let slot = self.take(tag, name);
                if slot.is_null() {
                    self.full(protocol, name);
                    return ptr::null();
                }
                self.index.insert(key, slot);
                slot
            }
        };
        // SAFETY: a live slot of the zone's list.
        unsafe { (*slot).epoch.store(self.epoch, Ordering::Relaxed) };
        slot
    }

    /// A new, zeroed slot named `name`, linked at the head of the list.
    fn take(&mut self, tag: usize, name: &[u8]) -> *mut Slot {
        // SAFETY: the zone's slab pool; the allocation takes its mutex.
        let slot =
            unsafe { ngx_slab_calloc(self.pool, size_of::<Slot>() + name.len()) } as *mut Slot;
        if slot.is_null() {
            return slot;
        }
        // SAFETY: fresh, zeroed memory of a Slot and the name after it; no
        // worker knows it until a configuration that has it starts.
        unsafe {
            ptr::copy_nonoverlapping(name.as_ptr(), slot.add(1).cast::<u8>(), name.len());
            (*slot).name_len = name.len();
            (*slot).protocol = tag;
            (*slot).next = AtomicPtr::new((*self.shared).head);
            (*self.shared).head = slot;
            (*self.shared).slots += 1;
        }
        slot
    }

    fn full(&self, protocol: Protocol, name: &[u8]) {
        // SAFETY: per the Assigner's contract.
        let slots = unsafe { (*self.shared).slots };
        let name = String::from_utf8_lossy(name);
        ngx_log_error!(
            NGX_LOG_WARN,
            self.log,
            "{}",
            log::zone_full(ZONE_NAME, ZONE_BYTES, slots, protocol, &name)
        );
    }

    /// Frees the slots no configuration that may still count has: neither
    /// this one nor one with a live worker (or one of the two before this
    /// one). Frees nothing while a live child of the master has not
    /// recorded itself. Returns how many were freed.
    fn reclaim(&mut self) -> usize {
        // SAFETY: per the Assigner's contract (see `init_zone`): the master,
        // setting up a configuration; the table's entries are atomics.
        let workers = unsafe { &*ptr::addr_of!((*self.shared).workers) };
        let oldest_live = match oldest_live(workers) {
            Ok(oldest) => oldest,
            Err(unknown) => {
                let full = workers.iter().all(|w| w.pid.load(Ordering::Acquire) != 0);
                let line = log::zone_workers_unknown(ZONE_NAME, unknown, WORKERS);
                if full {
                    ngx_log_error!(NGX_LOG_WARN, self.log, "{}", line);
                } else {
                    ngx_log_error!(NGX_LOG_NOTICE, self.log, "{}", line);
                }
                return 0;
            }
        };
        let mut freed = 0;
        let mut prev: *const Slot = ptr::null();
        // SAFETY: the list is the master's alone to change; each slot
        // unlinked is had by no configuration with a live process (all of
        // which are recorded, checked above), so no process counts into it,
        // and it is freed once.
        unsafe {
            let mut slot = (*self.shared).head;
            while !slot.is_null() {
                let next = (*slot).next.load(Ordering::Relaxed);
                if reclaimable(
                    (*slot).epoch.load(Ordering::Relaxed),
                    self.epoch,
                    oldest_live,
                ) {
                    match prev.as_ref() {
                        None => (*self.shared).head = next,
                        Some(p) => p.next.store(next, Ordering::Relaxed),
                    }
                    ngx_slab_free(self.pool, slot.cast());
                    freed += 1;
                } else {
                    prev = slot;
                }
                slot = next;
            }
            (*self.shared).slots -= freed;
        }
        freed
    }
}

/// The oldest configuration a live recorded process runs (`None` when none
/// is recorded); `Err(n)` when `n` live children of the master are not in
/// the table (just forked, before their `init_process`, or the table was
/// full), so their configuration is unknown.
fn oldest_live(workers: &[Worker; WORKERS]) -> Result<Option<u64>, usize> {
    let mut oldest: Option<u64> = None;
    let mut recorded = Vec::new();
    for w in workers {
        let pid = w.pid.load(Ordering::Acquire);
        if pid == 0 || !alive(pid) {
            continue;
        }
        recorded.push(pid);
        let epoch = w.epoch.load(Ordering::Acquire);
        oldest = Some(oldest.map_or(epoch, |o| o.min(epoch)));
    }
    let unknown = master_children()
        .filter(|pid| alive(*pid) && !recorded.contains(pid))
        .count();
    if unknown > 0 {
        return Err(unknown);
    }
    Ok(oldest)
}

/// The pids of the master's children, from its process table (empty in a
/// worker and with `master_process off`). A new binary started by USR2 is
/// among them and never records itself, so nothing is freed while it runs
/// beside the old master.
fn master_children() -> impl Iterator<Item = i64> {
    // SAFETY: the master's own table, written only by the master's own
    // (single) thread, which is the one running this; read by value.
    let last = unsafe { ngx_last_process }.max(0) as usize;
    (0..last.min(NGX_MAX_PROCESSES as usize)).filter_map(|i| {
        // SAFETY: as above; `i` is within the table.
        let pid = unsafe { (*ptr::addr_of!(ngx_processes[i])).pid };
        (pid > 0).then_some(i64::from(pid))
    })
}

/// Whether process `pid` exists (signal 0 checks without sending).
fn alive(pid: i64) -> bool {
    // SAFETY: kill with signal 0 sends nothing.
    let rc = unsafe { kill(pid as i32, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() != Some(ESRCH as i32)
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
    pub(crate) assign: unsafe fn(conf: *mut c_void, assigner: &mut Assigner),
    /// Appends each wrapped upstream's counters and gauges.
    pub(crate) collect: unsafe fn(conf: *mut c_void, out: &mut Vec<UpstreamStats>),
}

/// The zone's `data` for a cycle: what each protocol registered (indexed
/// by `Protocol`) and, once the zone is initialised, the counters and this
/// configuration's epoch. In the cycle's pool.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct ZoneCtx {
    registered: [Option<Registration>; Protocol::ALL.len()],
    shared: *mut Shared,
    epoch: u64,
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
    // At least what the fixed header needs on this page size (see
    // core::zone), whatever ZONE_BYTES says.
    let size = slab_layout().zone_size(size_of::<Shared>()).max(ZONE_BYTES);
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
                epoch: 0,
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

/// The zone's init: the counters (reused or fresh), this configuration's
/// epoch, each registered protocol's upstreams' slots, then the slots no
/// configuration that may still count has are freed.
unsafe extern "C" fn init_zone(zone: *mut ngx_shm_zone_t, old: *mut c_void) -> ngx_int_t {
    // SAFETY: nginx passes our zone, whose data is the ZoneCtx set in
    // `register`, while it initialises the cycle in the master.
    let zone = unsafe { &mut *zone };
    // SAFETY: as above; `old` is what the previous cycle's zone held.
    let Some(shared) = (unsafe { init_shared(zone, old) }) else {
        return Status::NGX_ERROR.into();
    };
    // SAFETY: as above; the master alone writes `epoch`.
    let epoch = unsafe {
        (*shared).epoch += 1;
        (*shared).epoch
    };
    // SAFETY: as above.
    let ctx = unsafe { &mut *(zone.data as *mut ZoneCtx) };
    ctx.epoch = epoch;
    let mut assigner = Assigner {
        shared,
        pool: zone.shm.addr as *mut ngx_slab_pool_t,
        epoch,
        index: HashMap::new(),
        log: zone.shm.log,
    };
    // SAFETY: the master's list, read while nothing writes it.
    let mut slot = unsafe { (*shared).head };
    // SAFETY: each link is NULL or a live slot of the list.
    while let Some(s) = unsafe { slot.as_ref() } {
        assigner
            .index
            .entry((s.protocol, name_key(s.name())))
            .or_insert(slot);
        slot = s.next.load(Ordering::Relaxed);
    }
    for r in ctx.registered() {
        // SAFETY: single-threaded master, the registration of this cycle
        // with its own configuration.
        unsafe { (r.assign)(r.conf, &mut assigner) };
    }
    // A new zone (the module's first configuration in this master: epoch
    // 1) holds this configuration's slots alone: nothing to free, and the
    // master's children, which never had the module, are not asked for a
    // record they cannot have made.
    let freed = if epoch == 1 { 0 } else { assigner.reclaim() };
    // SAFETY: as above.
    let upstreams = unsafe { (*shared).slots };
    if !testing_config() {
        ngx_log_error!(
            NGX_LOG_NOTICE,
            zone.shm.log,
            "{}",
            log::zone_usage(ZONE_NAME, epoch, upstreams, freed)
        );
    }
    Status::NGX_OK.into()
}

/// Whether this is `nginx -t` (or `-T`): its zone is thrown away, so its
/// usage is not said, least of all into the running nginx's error log.
fn testing_config() -> bool {
    // SAFETY: set once from the command line before any configuration is
    // read, and only read after, in the master.
    unsafe { ptr::addr_of!(ngx_test_config).read() != 0 }
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
    // SAFETY: nginx initialised a slab pool at the start of the zone. A
    // full zone is said by this module (`zone_full`), not by the slab
    // allocator at `crit`. (bindgen places this bitfield as the C compiler
    // does, the byte after `zero`, bit 0: checked on 1.28.0; unlike
    // ngx_http_request_t's it follows a single u_char.)
    unsafe { (*pool).set_log_nomem(0) };
    // SAFETY: as above.
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
    // Shared (no slots, no workers, epoch 0) but for the magic.
    unsafe { (*shared).magic = MAGIC };
    ctx.shared = shared;
    Some(shared)
}

/// In each worker process as it starts (either protocol's module calls it;
/// the second call finds the entry the first made): records the worker's
/// pid and configuration, so that the master keeps the slots of that
/// configuration while the worker runs.
///
/// # Safety
/// `cycle` is the worker's cycle, from its `init_process`.
pub(crate) unsafe fn worker_started(cycle: *mut ngx_cycle_t) {
    // SAFETY: per the contract.
    let Some(ctx) = (unsafe { our_zone(cycle) }).and_then(zone_ctx) else {
        return;
    };
    if ctx.shared.is_null() {
        return;
    }
    // SAFETY: initialised in the master before the process was forked; only
    // the table of atomics is referenced (the master may be writing the
    // header's other fields during a reload).
    let workers = unsafe { &*ptr::addr_of!((*ctx.shared).workers) };
    // SAFETY: ngx_pid is set before init_process runs.
    let pid = i64::from(unsafe { ngx_pid });
    if workers.iter().any(|w| w.pid.load(Ordering::Acquire) == pid) {
        return;
    }
    for w in workers {
        let seen = w.pid.load(Ordering::Acquire);
        let free = seen == 0 || (seen != pid && !alive(seen));
        if free
            && w.pid
                .compare_exchange(seen, pid, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            w.epoch.store(ctx.epoch, Ordering::Release);
            return;
        }
    }
    // The table is full: the master finds this live child unrecorded and
    // frees nothing while it runs.
}

/// The module's zone among the cycle's shared memory zones.
///
/// # Safety
/// `cycle` is a live, initialised cycle.
unsafe fn our_zone(cycle: *mut ngx_cycle_t) -> Option<*const ngx_shm_zone_t> {
    // SAFETY: per the contract.
    let mut part = unsafe { ptr::addr_of!((*cycle).shared_memory.part) };
    let tag: *const c_void = ptr::addr_of!(TAG).cast();
    // SAFETY: nginx's list of ngx_shm_zone_t, walked part by part.
    while let Some(p) = unsafe { part.as_ref() } {
        let zones = p.elts as *const ngx_shm_zone_t;
        for i in 0..p.nelts {
            // SAFETY: `nelts` zones in this part.
            let z = unsafe { zones.add(i) };
            // SAFETY: as above.
            if ptr::eq(unsafe { (*z).tag }, tag) {
                return Some(z);
            }
        }
        part = p.next;
    }
    None
}

/// Both protocols' modules' `init_process`: see [`worker_started`].
pub(crate) unsafe extern "C" fn init_process(cycle: *mut ngx_cycle_t) -> ngx_int_t {
    // SAFETY: nginx calls init_process with the process's cycle.
    unsafe { worker_started(cycle) };
    Status::NGX_OK.into()
}
