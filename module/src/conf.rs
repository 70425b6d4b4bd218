//! `generation_retry_resnapshot on | off [max=N];` in `http`, `stream` and
//! their `upstream` blocks: the configuration structures and the directive
//! handler. Written once for both protocols (see [`crate::proto`]); the
//! postconfiguration that installs the wrapper is [`crate::setup`].
//!
//! The same `SrvConf` is created for the top-level block and for every
//! `upstream {}` block (nginx gives each an srv_conf slot); the upstream's
//! setting wins, the top-level one is the default for upstreams with a
//! `zone`.

use core::cell::Cell;
use core::ffi::{c_char, c_void};
use core::{mem, ptr};

use generation_retry_core::directive::{parse_resnapshot, warning, Resnapshot, DIRECTIVE};
use ngx::core::{Pool, NGX_CONF_ERROR};
use ngx::ffi::{
    ngx_command_t, ngx_conf_t, ngx_event_free_peer_pt, ngx_event_get_peer_pt, ngx_shm_zone_t,
    NGX_LOG_EMERG, NGX_LOG_WARN,
};
use ngx::ngx_conf_log_error;

use crate::ffi_ext::{conf_args, conf_slot, Position};
use crate::proto::{InitPeer, Proto};
use crate::shm::Slot;

/// Per-upstream (and top-level default) configuration.
pub struct SrvConf<P: Proto> {
    /// As written in this block; `None` when the directive is absent.
    pub resnapshot: Option<Resnapshot>,
    /// Where it was written.
    pub at: Position,
    /// What applies to this upstream, set when the wrapper is installed.
    pub active: Option<Resnapshot>,
    /// The `peer.init` the wrapper calls (the balancer's, keepalive's, ...).
    pub original_init: InitPeer<P>,
    /// This upstream's counters; NULL until the zone is initialised.
    pub slot: *const Slot,
    /// This module's `peer.init` as installed: while the block's
    /// `peer.init` is still this one, no module loaded later wrapped it, and
    /// a request may take the lean path (`crate::peer::lean`).
    pub wrapper_init: InitPeer<P>,
    /// The inner balancer's `get` and `free` as the worker's first request
    /// found them; a request whose inner init installs others takes the
    /// full path.
    pub inner_get: Cell<ngx_event_get_peer_pt>,
    pub inner_free: Cell<ngx_event_free_peer_pt>,
    /// The lean path's own `get` and `free`, as installed on its requests
    /// (set with `inner_get`): stored, so that the move to the full path
    /// compares `pc`'s callbacks with what was installed, not with a
    /// function item's address (which may differ between codegen units).
    pub lean_get: Cell<ngx_event_get_peer_pt>,
    pub lean_free: Cell<ngx_event_free_peer_pt>,
}

impl<P: Proto> Default for SrvConf<P> {
    fn default() -> Self {
        SrvConf {
            resnapshot: None,
            at: Position::default(),
            active: None,
            original_init: None,
            slot: ptr::null(),
            wrapper_init: None,
            inner_get: Cell::new(None),
            inner_free: Cell::new(None),
            lean_get: Cell::new(None),
            lean_free: Cell::new(None),
        }
    }
}

impl<P: Proto> SrvConf<P> {
    pub(crate) fn slot(&self) -> Option<&Slot> {
        // SAFETY: a non-NULL slot points into the counters zone and is freed
        // only once no live process runs this configuration (shm.rs: the
        // master frees only what no recorded configuration has, and nothing
        // while a child is unrecorded); the fields the master may still
        // write (`next`, `epoch`) are atomics.
        unsafe { self.slot.as_ref() }
    }

    /// This module's configuration of an upstream block (`None` for
    /// implicit upstreams, which have no srv_conf).
    pub(crate) fn of(us: &P::Upstream) -> Option<&SrvConf<P>> {
        // SAFETY: the slot of this module in an upstream's srv_conf always
        // holds the SrvConf<P> made by create_srv_conf::<P>.
        unsafe { (conf_slot(P::srv_conf(us), P::module()) as *const SrvConf<P>).as_ref() }
    }

    pub(crate) fn of_mut(us: &mut P::Upstream) -> Option<&mut SrvConf<P>> {
        // SAFETY: as in `of`; the caller holds the block exclusively.
        unsafe { (conf_slot(P::srv_conf(us), P::module()) as *mut SrvConf<P>).as_mut() }
    }
}

/// The top-level block's module-wide state, per protocol.
pub struct MainConf<P: Proto> {
    /// The directive as written at the top level (`http`, `stream`).
    pub top_level: Option<Resnapshot>,
    /// Where it was written.
    pub top_level_at: Position,
    pub upstreams: *mut P::UpstreamMain,
    pub shm_zone: *mut ngx_shm_zone_t,
}

impl<P: Proto> Clone for MainConf<P> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<P: Proto> Copy for MainConf<P> {}

impl<P: Proto> Default for MainConf<P> {
    fn default() -> Self {
        MainConf {
            top_level: None,
            top_level_at: Position::default(),
            upstreams: ptr::null_mut(),
            shm_zone: ptr::null_mut(),
        }
    }
}

impl<P: Proto> MainConf<P> {
    /// Upstream blocks of this cycle.
    pub(crate) fn upstreams(&self) -> &[*mut P::Upstream] {
        // SAFETY: `upstreams` is NULL or the upstream module's main conf of
        // the same cycle; its `upstreams` array holds srv_conf pointers.
        match unsafe { self.upstreams.as_ref() } {
            // SAFETY: as above.
            Some(umcf) => unsafe { P::upstreams(umcf).as_slice() },
            None => &[],
        }
    }
}

/// A configuration structure in the cycle's pool, with no destructor to run
/// (plain values, cells and pointers), so without a pool cleanup.
pub(crate) fn create<T: Default>(cf: *mut ngx_conf_t) -> *mut c_void {
    const { assert!(!mem::needs_drop::<T>()) };
    // SAFETY: nginx calls create_*_conf with the configuration being parsed,
    // whose pool lives as long as the cycle.
    let pool = unsafe { Pool::from_ngx_pool((*cf).pool) };
    // ngx_palloc aligns to NGX_ALIGNMENT, a pointer's: enough for the
    // pointers, integers and cells of the configuration structures.
    let p = pool.alloc(mem::size_of::<T>()).cast::<T>();
    if !p.is_null() {
        // SAFETY: a fresh, aligned allocation of a T.
        unsafe { p.write(T::default()) };
    }
    p.cast()
}

pub(crate) unsafe extern "C" fn create_main_conf<P: Proto>(cf: *mut ngx_conf_t) -> *mut c_void {
    create::<MainConf<P>>(cf)
}

pub(crate) unsafe extern "C" fn create_srv_conf<P: Proto>(cf: *mut ngx_conf_t) -> *mut c_void {
    create::<SrvConf<P>>(cf)
}

/// Records the top-level setting. Here, unlike at postconfiguration (where
/// stream leaves `cf->ctx` at the last `server {}`), `cf->ctx` is the
/// block's own context for both protocols.
pub(crate) unsafe extern "C" fn init_main_conf<P: Proto>(
    cf: *mut ngx_conf_t,
    conf: *mut c_void,
) -> *mut c_char {
    // SAFETY: nginx calls init_main_conf with the block being configured
    // and our MainConf<P>; the block's srv_conf slot holds our SrvConf<P>.
    unsafe {
        let (_, srv_conf) = P::conf_ctx(&*cf);
        let top = (conf_slot(srv_conf, P::module()) as *const SrvConf<P>).as_ref();
        let main = &mut *(conf as *mut MainConf<P>);
        main.top_level = top.and_then(|c| c.resnapshot);
        main.top_level_at = top.map(|c| c.at).unwrap_or_default();
    }
    ngx::core::NGX_CONF_OK
}

/// The directive handler.
///
/// # Safety
/// Called by nginx with the parsing context, the command and this module's
/// srv_conf for the enclosing top-level or `upstream` block of protocol P.
pub(crate) unsafe extern "C" fn set_resnapshot<P: Proto>(
    cf: *mut ngx_conf_t,
    _cmd: *mut ngx_command_t,
    conf: *mut c_void,
) -> *mut c_char {
    // SAFETY: see the function's contract; `conf` is our SrvConf<P>.
    let (cf, conf) = unsafe { (&mut *cf, &mut *(conf as *mut SrvConf<P>)) };

    if conf.resnapshot.is_some() {
        return c"is duplicate".as_ptr().cast_mut();
    }

    let args: Vec<&[u8]> = conf_args(cf).iter().skip(1).map(|a| a.as_bytes()).collect();
    match parse_resnapshot(&args) {
        Ok(value) => {
            if let Some(message) = warning(&args, value) {
                ngx_conf_log_error!(NGX_LOG_WARN, cf, "{message}");
            }
            conf.resnapshot = Some(value);
            conf.at = Position::of(cf);
            ngx::core::NGX_CONF_OK
        }
        Err(err) => {
            ngx_conf_log_error!(NGX_LOG_EMERG, cf, "{}", err.message(DIRECTIVE));
            NGX_CONF_ERROR
        }
    }
}
