//! The peer wrapper: outermost around whatever balancer (and keepalive) an
//! upstream uses, it watches for selections refused with `NGX_BUSY` because
//! the peer list's generation moved since the request took its snapshot,
//! and (with `on`) takes a fresh snapshot and selects again.
//!
//! Safety of the re-snapshot, point by point:
//! - fresh state: `u->peer.data` is set to NULL before the original
//!   `peer.init` runs again, so round-robin allocates a new state instead of
//!   reusing ours (or keepalive's) as if it were its own;
//! - no stale reference: NGX_BUSY takes no peer reference, and the previous
//!   attempt's `free` ran before nginx asked for a retry, so the old state
//!   holds nothing when it is dropped (it stays in the request pool);
//! - tries kept: `peer.init` resets `pc->tries` to the list's size, which
//!   would undo the `proxy_next_upstream_tries` clamp; the request's
//!   remaining tries are restored;
//! - bounded: at most `max` re-snapshots per selection;
//! - nginx decides: the wrapper only changes the outcome of a selection
//!   nginx itself asked for, so a POST whose body was sent, which nginx does
//!   not retry, is not retried here either.

use core::ffi::c_void;
use core::ptr;

use generation_retry_core::metrics::{Counter, NoLiveCause};
use ngx::core::{Pool, Status};
use ngx::ffi::{
    ngx_event_free_peer_pt, ngx_event_get_peer_pt, ngx_event_notify_peer_pt,
    ngx_event_save_peer_session_pt, ngx_event_set_peer_session_pt, ngx_int_t,
    ngx_peer_connection_t, ngx_uint_t, NGX_BUSY, NGX_DONE, NGX_LOG_ERR, NGX_LOG_WARN,
};
use ngx::ngx_log_error;

use crate::conf::SrvConf;
use crate::ffi_ext::{generation, peer_counts, str_ptr_lossy, upstream_name};
use crate::proto::Proto;

/// The inner balancer's callbacks and state, as `peer.init` left them.
#[derive(Clone, Copy)]
struct Inner {
    data: *mut c_void,
    get: ngx_event_get_peer_pt,
    free: ngx_event_free_peer_pt,
    /// Stream round-robin's "connected" hook (clears the peer's fails);
    /// http balancers leave it NULL.
    notify: ngx_event_notify_peer_pt,
    set_session: ngx_event_set_peer_session_pt,
    save_session: ngx_event_save_peer_session_pt,
}

impl Inner {
    fn take(pc: &ngx_peer_connection_t) -> Inner {
        Inner {
            data: pc.data,
            get: pc.get,
            free: pc.free,
            notify: pc.notify,
            set_session: pc.set_session,
            save_session: pc.save_session,
        }
    }
}

/// Per-request (per-session) state, in its pool. Plain pointers and
/// counters, nothing to drop, so it is placed with a bare pool allocation,
/// without a pool cleanup handler.
pub(crate) struct PeerData<P: Proto> {
    inner: Inner,
    request: *mut P::Request,
    upstream: *mut P::Upstream,
    /// The generation this request's balancer state was taken at.
    generation: usize,
    selections: u32,
    /// Re-snapshots taken for this request (`$generation_retry_resnapshots`).
    pub(crate) resnapshots: u32,
}

// Plain values and pointers whatever P is (a derive would require P: Copy).
impl<P: Proto> Clone for PeerData<P> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<P: Proto> Copy for PeerData<P> {}

/// Points the peer connection's callbacks at the wrapper over `inner`, the
/// state `pd` holds. `pd` is only stored, never read here.
fn install<P: Proto>(pc: &mut ngx_peer_connection_t, pd: *mut PeerData<P>, inner: &Inner) {
    pc.data = pd.cast();
    pc.get = Some(get_peer::<P>);
    pc.free = Some(free_peer::<P>);
    // NULL stays NULL: callers test it before calling.
    pc.notify = inner.notify.and(Some(notify_peer::<P>));
    pc.set_session = Some(set_session::<P>);
    pc.save_session = Some(save_session::<P>);
}

/// The upstream's `peer.init`, installed at postconfiguration.
pub(crate) unsafe extern "C" fn init_peer<P: Proto>(
    r: *mut P::Request,
    us: *mut P::Upstream,
) -> ngx_int_t {
    // SAFETY: nginx calls peer.init with the request and its upstream block;
    // the upstream block is not written by the inner init.
    let uscf = unsafe { &*us };
    let Some(original) = SrvConf::<P>::of(uscf).and_then(|c| c.original_init) else {
        return Status::NGX_ERROR.into();
    };

    // Read before the inner init: if it moves in between, the inner state is
    // newer than ours and a later busy is only re-checked once more.
    let snapshot = generation::<P>(uscf);
    // SAFETY: the original peer.init with the arguments nginx gave us. No
    // reference into the request is alive across the call, which writes it.
    let rc = unsafe { original(r, us) };
    if rc != Status::NGX_OK.into() {
        return rc;
    }
    // SAFETY: the request is live and has an upstream; the inner init has
    // returned.
    let Some((pc, pool)) = (unsafe { P::peer_connection(r) }) else {
        return Status::NGX_ERROR.into();
    };

    // SAFETY: the request's pool outlives every use of the peer data.
    let pool = unsafe { Pool::from_ngx_pool(pool) };
    let pd = pool.alloc_type::<PeerData<P>>();
    if pd.is_null() {
        return Status::NGX_ERROR.into();
    }
    // SAFETY: pc is &r->upstream->peer of the live request, not otherwise
    // referenced here.
    let pc = unsafe { &mut *pc };
    let inner = Inner::take(pc);
    // SAFETY: `pd` is a fresh, aligned allocation of a PeerData.
    unsafe {
        pd.write(PeerData {
            inner,
            request: r,
            upstream: us,
            generation: snapshot,
            selections: 0,
            resnapshots: 0,
        })
    };
    install(pc, pd, &inner);
    // SAFETY: the live request of this call.
    unsafe { P::on_init(r, pd.cast()) };
    Status::NGX_OK.into()
}

unsafe extern "C" fn get_peer<P: Proto>(
    pc: *mut ngx_peer_connection_t,
    data: *mut c_void,
) -> ngx_int_t {
    // SAFETY: nginx calls get with the peer connection whose data we set;
    // the PeerData is ours, in the request pool.
    let pd = unsafe { &mut *(data as *mut PeerData<P>) };
    let first = pd.selections == 0;
    pd.selections += 1;

    // SAFETY: the inner get with its own data, as peer.init installed them.
    let rc = match pd.inner.get {
        Some(get) => unsafe { get(pc, pd.inner.data) },
        None => return Status::NGX_ERROR.into(),
    };
    if rc != NGX_BUSY as ngx_int_t {
        return rc;
    }
    // SAFETY: set at init from the arguments of peer.init; the upstream
    // block lives as long as the cycle, longer than the request.
    let uscf = unsafe { &*pd.upstream };
    match SrvConf::<P>::of(uscf) {
        Some(conf) => busy(pc, pd, uscf, conf, first),
        None => rc,
    }
}

/// The selection was refused. Decide whose refusal it is, count it, and with
/// `on` rescue a generation-busy one.
fn busy<P: Proto>(
    pc: *mut ngx_peer_connection_t,
    pd: &mut PeerData<P>,
    uscf: &P::Upstream,
    conf: &SrvConf<P>,
    first: bool,
) -> ngx_int_t {
    let busy = NGX_BUSY as ngx_int_t;
    let count = |c: Counter| {
        if let Some(slot) = conf.slot() {
            slot.add(c);
        }
    };
    let no_live = |pc: *mut ngx_peer_connection_t, cause: NoLiveCause, detail: &str| {
        count(cause.counter());
        ngx_log_error!(
            NGX_LOG_ERR,
            // SAFETY: pc is the live peer connection of the request.
            unsafe { (*pc).log },
            "generation_retry: {}upstream \"{}\": cause={}{detail}",
            P::PREFIX,
            upstream_name::<P>(uscf),
            cause.label()
        );
    };

    let now = generation::<P>(uscf);
    if now == pd.generation {
        // Not ours: down, failed, max_conns, or an empty list.
        let (primary, backup) = peer_counts::<P>(uscf);
        no_live(pc, NoLiveCause::classify(false, primary, backup), "");
        return busy;
    }

    count(if first {
        Counter::BusyFirst
    } else {
        Counter::BusyRetry
    });
    let Some(setting) = conf.active else {
        return busy;
    };
    let from = pd.generation;
    if !setting.enabled {
        count(Counter::Failed);
        let detail = format!(", generation {from} -> {now}, observe only");
        no_live(pc, NoLiveCause::Generation, &detail);
        return busy;
    }

    // SAFETY (for each `(*pc)` below): pc is the request's live peer
    // connection; no reference to it is held across calls that write it.
    let tries = unsafe { (*pc).tries };
    for _ in 0..setting.max {
        count(Counter::Resnapshots);
        pd.resnapshots += 1;
        if !resnapshot(pc, pd, conf) {
            unsafe { (*pc).tries = tries };
            count(Counter::Failed);
            no_live(pc, NoLiveCause::Generation, ", re-snapshot failed");
            return busy;
        }
        unsafe { (*pc).tries = tries };

        // SAFETY: the fresh inner get with its fresh data.
        let rc = match pd.inner.get {
            Some(get) => unsafe { get(pc, pd.inner.data) },
            None => Status::NGX_ERROR.into(),
        };
        if rc == Status::NGX_OK.into() || rc == NGX_DONE as ngx_int_t {
            count(Counter::Rescued);
            ngx_log_error!(
                NGX_LOG_WARN,
                unsafe { (*pc).log },
                "generation_retry: {}upstream \"{}\" peer list changed (generation {from} -> {}), \
                 selected {} on a fresh snapshot",
                P::PREFIX,
                upstream_name::<P>(uscf),
                pd.generation,
                str_ptr_lossy(unsafe { (*pc).name })
            );
            return rc;
        }
        if rc != busy {
            return rc;
        }
        if generation::<P>(uscf) == pd.generation {
            // The fresh list itself has nothing usable.
            count(Counter::Failed);
            let (primary, backup) = peer_counts::<P>(uscf);
            let detail = format!(", after re-snapshot at generation {}", pd.generation);
            no_live(pc, NoLiveCause::classify(false, primary, backup), &detail);
            return busy;
        }
    }
    count(Counter::Failed);
    let detail = format!(
        ", generation still moving after {} re-snapshots (max={})",
        setting.max, setting.max
    );
    no_live(pc, NoLiveCause::Generation, &detail);
    busy
}

/// Re-runs the original `peer.init` into fresh state and re-installs the
/// wrapper over it. On failure the previous inner state is put back.
///
/// `pc` is a raw pointer on purpose: the inner init writes the same memory
/// (`r->upstream->peer`) through the request, so no Rust reference to it may
/// be alive across that call.
fn resnapshot<P: Proto>(
    pc: *mut ngx_peer_connection_t,
    pd: &mut PeerData<P>,
    conf: &SrvConf<P>,
) -> bool {
    let Some(original) = conf.original_init else {
        return false;
    };
    let before = (pd.inner, pd.generation);

    // SAFETY: as in get_peer.
    pd.generation = generation::<P>(unsafe { &*pd.upstream });
    // SAFETY: pc is &r->upstream->peer of a live request. Round-robin
    // reuses a non-NULL peer.data as its own state: clear it.
    unsafe { (*pc).data = ptr::null_mut() };
    // SAFETY: the request and upstream block peer.init was first called
    // with; it writes r->upstream->peer, which is *pc.
    let rc = unsafe { original(pd.request, pd.upstream) };
    // SAFETY: the call has returned; nothing else touches *pc meanwhile.
    let pc = unsafe { &mut *pc };
    let ok = rc == Status::NGX_OK.into() && pc.get.is_some() && !pc.data.is_null();
    if ok {
        pd.inner = Inner::take(pc);
    } else {
        (pd.inner, pd.generation) = before;
    }
    let inner = pd.inner;
    install(pc, ptr::from_mut(pd), &inner);
    ok
}

unsafe extern "C" fn free_peer<P: Proto>(
    pc: *mut ngx_peer_connection_t,
    data: *mut c_void,
    state: ngx_uint_t,
) {
    // SAFETY: nginx calls free with the data we installed.
    let pd = unsafe { &*(data as *const PeerData<P>) };
    if let Some(free) = pd.inner.free {
        // SAFETY: the inner free with its own data.
        unsafe { free(pc, pd.inner.data, state) };
    }
}

unsafe extern "C" fn notify_peer<P: Proto>(
    pc: *mut ngx_peer_connection_t,
    data: *mut c_void,
    kind: ngx_uint_t,
) {
    // SAFETY: as in free_peer.
    let pd = unsafe { &*(data as *const PeerData<P>) };
    if let Some(notify) = pd.inner.notify {
        // SAFETY: the inner callback with its own data.
        unsafe { notify(pc, pd.inner.data, kind) };
    }
}

unsafe extern "C" fn set_session<P: Proto>(
    pc: *mut ngx_peer_connection_t,
    data: *mut c_void,
) -> ngx_int_t {
    // SAFETY: as in free_peer.
    let pd = unsafe { &*(data as *const PeerData<P>) };
    match pd.inner.set_session {
        // SAFETY: the inner callback with its own data.
        Some(f) => unsafe { f(pc, pd.inner.data) },
        None => Status::NGX_OK.into(),
    }
}

unsafe extern "C" fn save_session<P: Proto>(pc: *mut ngx_peer_connection_t, data: *mut c_void) {
    // SAFETY: as in free_peer.
    let pd = unsafe { &*(data as *const PeerData<P>) };
    if let Some(f) = pd.inner.save_session {
        // SAFETY: the inner callback with its own data.
        unsafe { f(pc, pd.inner.data) };
    }
}
