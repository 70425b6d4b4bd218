//! `generation_retry_resnapshot on | off [max=N];` in `http`, `stream` and
//! their `upstream` blocks, and the postconfiguration that installs the peer
//! wrapper. Written once for both protocols (see [`crate::proto`]).
//!
//! The same `SrvConf` is created for the top-level block and for every
//! `upstream {}` block (nginx gives each an srv_conf slot); the upstream's
//! setting wins, the top-level one is the default for upstreams with a
//! `zone`.

use core::ffi::{c_char, c_void, CStr};
use core::ptr;

use generation_retry_core::directive::{parse_resnapshot, Resnapshot};
use ngx::core::{Pool, Status, NGX_CONF_ERROR};
use ngx::ffi::{ngx_command_t, ngx_conf_t, ngx_int_t, ngx_shm_zone_t, NGX_LOG_EMERG, NGX_LOG_WARN};
use ngx::{ngx_conf_log_error, ngx_log_error};

use crate::ffi_ext::{
    array_slice, conf_args, conf_slot, module_ctx_index, str_bytes, upstream_name,
};
use crate::peer;
#[cfg(generation_retry_stream)]
use crate::proto::Stream;
use crate::proto::{Http, InitPeer, Proto};
use crate::shm::{self, Slot};

const DIRECTIVE: &str = "generation_retry_resnapshot";

/// Per-upstream (and top-level default) configuration.
pub struct SrvConf<P: Proto> {
    /// As written in this block; `None` when the directive is absent.
    pub resnapshot: Option<Resnapshot>,
    /// What applies to this upstream, set when the wrapper is installed.
    pub active: Option<Resnapshot>,
    /// The `peer.init` the wrapper calls (the balancer's, keepalive's, ...).
    pub original_init: InitPeer<P>,
    /// This upstream's counters; NULL until the zone is initialised.
    pub slot: *const Slot,
}

// Plain values and pointers whatever P is (a derive would require P: Copy).
impl<P: Proto> Clone for SrvConf<P> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<P: Proto> Copy for SrvConf<P> {}

impl<P: Proto> Default for SrvConf<P> {
    fn default() -> Self {
        SrvConf {
            resnapshot: None,
            active: None,
            original_init: None,
            slot: ptr::null(),
        }
    }
}

impl<P: Proto> SrvConf<P> {
    pub(crate) fn slot(&self) -> Option<&Slot> {
        // SAFETY: a non-NULL slot points into the counters zone, which lives
        // at least as long as the cycle this configuration belongs to.
        unsafe { self.slot.as_ref() }
    }

    /// This module's configuration of an upstream block (`None` for
    /// implicit upstreams, which have no srv_conf).
    pub(crate) fn of(us: &P::Upstream) -> Option<&SrvConf<P>> {
        // SAFETY: the slot of this module in an upstream's srv_conf always
        // holds the SrvConf<P> made by create_srv_conf::<P>.
        unsafe { (conf_slot(P::srv_conf(us), P::module()) as *const SrvConf<P>).as_ref() }
    }

    fn of_mut(us: &mut P::Upstream) -> Option<&mut SrvConf<P>> {
        // SAFETY: as in `of`; the caller holds the block exclusively.
        unsafe { (conf_slot(P::srv_conf(us), P::module()) as *mut SrvConf<P>).as_mut() }
    }
}

/// The top-level block's module-wide state, per protocol.
pub struct MainConf<P: Proto> {
    /// The directive as written at the top level (`http`, `stream`).
    pub top_level: Option<Resnapshot>,
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
            Some(umcf) => unsafe { array_slice(P::upstreams(umcf)) },
            None => &[],
        }
    }
}

/// A configuration structure in the cycle's pool, with no destructor to run
/// (plain values and pointers), so without a pool cleanup.
fn create<T: Default + Copy>(cf: *mut ngx_conf_t) -> *mut c_void {
    // SAFETY: nginx calls create_*_conf with the configuration being parsed,
    // whose pool lives as long as the cycle.
    let pool = unsafe { Pool::from_ngx_pool((*cf).pool) };
    let p = pool.alloc_type::<T>();
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
        (*(conf as *mut MainConf<P>)).top_level = top.and_then(|c| c.resnapshot);
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

    let args: Vec<&[u8]> = conf_args(cf).iter().skip(1).map(str_bytes).collect();
    match parse_resnapshot(&args) {
        Ok(value) => {
            conf.resnapshot = Some(value);
            ngx::core::NGX_CONF_OK
        }
        Err(err) => {
            ngx_conf_log_error!(NGX_LOG_EMERG, cf, "{}", err.message(DIRECTIVE));
            NGX_CONF_ERROR
        }
    }
}

/// Runs once per `http` or `stream` block, after every upstream's
/// `init_upstream`, so the wrapper ends up outermost whatever the directive
/// order and whichever balancer or keepalive sits inside.
///
/// # Safety
/// Called from the protocol's postconfiguration handler with its `cf`.
pub(crate) unsafe fn postconfiguration<P: Proto>(cf: &mut ngx_conf_t) -> ngx_int_t {
    // SAFETY: per the contract, cf->ctx is a context of this protocol's
    // block (or of one of its servers, which share the block's main_conf).
    let (main_conf, _) = unsafe { P::conf_ctx(cf) };
    // SAFETY: main_conf has a slot for every module of the protocol; ours
    // holds a MainConf<P>.
    let mcf = unsafe { (conf_slot(main_conf, P::module()) as *mut MainConf<P>).as_mut() };
    let Some(mcf) = mcf else {
        return Status::NGX_ERROR.into();
    };
    let top_level = mcf.top_level;
    if let Some(index) = module_ctx_index(cf, P::UPSTREAM_MODULE) {
        // SAFETY: main_conf has a slot per module of the protocol; the
        // upstream module's holds its main conf.
        mcf.upstreams = unsafe { *main_conf.add(index) }.cast();
    }

    for &us in mcf.upstreams() {
        // SAFETY: every element is a live upstream block of this cycle, and
        // nothing else uses it during postconfiguration.
        let us = unsafe { &mut *us };
        let has_zone = !P::shm_zone(us).is_null();
        let original = *P::peer_init(us);
        // Implicit upstreams (proxy_pass host:port) have no srv_conf.
        let Some(own) = SrvConf::<P>::of(us).map(|c| c.resnapshot) else {
            continue;
        };
        let effective = match (own, has_zone) {
            (Some(_), false) => {
                warn_no_zone::<P>(cf, us);
                None
            }
            (Some(own), true) => Some(own),
            (None, true) => top_level,
            (None, false) => None,
        };
        if effective.is_some() && original.is_some() {
            if let Some(conf) = SrvConf::<P>::of_mut(us) {
                conf.active = effective;
                conf.original_init = original;
                *P::peer_init(us) = Some(peer::init_peer::<P>);
            }
        }
    }

    match shm::add_zone(cf, init_zone) {
        Some(zone) => {
            mcf.shm_zone = zone;
            // SAFETY: add_zone's data is the zone's ZoneCtx, in the cycle pool.
            let ctx = unsafe { &mut *((*zone).data as *mut shm::ZoneCtx) };
            *P::zone_ctx_slot(ctx) = ptr::from_mut(mcf).cast();
            Status::NGX_OK.into()
        }
        None => Status::NGX_ERROR.into(),
    }
}

/// The counters zone's init: find (or take) each wrapped upstream's slot,
/// for both protocols.
unsafe extern "C" fn init_zone(zone: *mut ngx_shm_zone_t, old: *mut c_void) -> ngx_int_t {
    // SAFETY: nginx passes our zone, whose data is the ZoneCtx set in
    // `add_zone`, while it initialises the cycle in the master.
    let zone = unsafe { &mut *zone };
    // SAFETY: the zone being initialised and what nginx gave as `old`.
    let Some(shared) = (unsafe { shm::init_shared(zone, old) }) else {
        return Status::NGX_ERROR.into();
    };
    // SAFETY: as above.
    let ctx = unsafe { &*(zone.data as *const shm::ZoneCtx) };
    // SAFETY: single-threaded master, `shared` from init_shared.
    unsafe {
        assign_slots::<Http>(ctx.http.cast(), shared, zone);
        #[cfg(generation_retry_stream)]
        assign_slots::<Stream>(ctx.stream.cast(), shared, zone);
    }
    Status::NGX_OK.into()
}

/// # Safety
/// `mcf` is NULL or this cycle's MainConf<P>; see [`shm::slot_for`].
unsafe fn assign_slots<P: Proto>(
    mcf: *const MainConf<P>,
    shared: *mut c_void,
    zone: &ngx_shm_zone_t,
) {
    // SAFETY: per the contract.
    let Some(mcf) = (unsafe { mcf.as_ref() }) else {
        return;
    };
    for &us in mcf.upstreams() {
        // SAFETY: as in postconfiguration.
        let us = unsafe { &mut *us };
        let host = *P::host(us);
        if let Some(conf) = SrvConf::<P>::of_mut(us) {
            if conf.active.is_some() {
                let name = str_bytes(&host);
                // SAFETY: per the contract.
                conf.slot = unsafe { shm::slot_for(shared, P::PROTOCOL, name, zone.shm.log) };
            }
        }
    }
}

fn warn_no_zone<P: Proto>(cf: &ngx_conf_t, us: &P::Upstream) {
    let (file, line) = P::file_line(us);
    let file = if file.is_null() {
        "?".into()
    } else {
        // SAFETY: file_name is the NUL-terminated path of the file that
        // declared the upstream, kept for the life of the cycle.
        unsafe { CStr::from_ptr(file) }.to_string_lossy()
    };
    ngx_log_error!(
        NGX_LOG_WARN,
        cf.log,
        "\"{DIRECTIVE}\" has no effect in {}upstream \"{}\" without \"zone\": \
         there is no peer-list generation to follow in {}:{}",
        P::PREFIX,
        upstream_name::<P>(us),
        file,
        line
    );
}
