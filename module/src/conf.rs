//! `generation_retry_resnapshot on | off [max=N];` in `http` and `upstream`,
//! and the postconfiguration that installs the peer wrapper.
//!
//! The same `SrvConf` is created for the http block and for every
//! `upstream {}` block (nginx gives each an srv_conf slot); the upstream's
//! setting wins, the http block's is the default for upstreams with a `zone`.

use core::ffi::{c_char, c_void};
use core::ptr;

use generation_retry_core::directive::{parse_resnapshot, Resnapshot};
use ngx::core::{Status, NGX_CONF_ERROR};
use ngx::ffi::{
    ngx_command_t, ngx_conf_t, ngx_http_conf_ctx_t, ngx_http_upstream_init_peer_pt,
    ngx_http_upstream_main_conf_t, ngx_http_upstream_srv_conf_t, ngx_int_t, ngx_shm_zone_t,
    NGX_LOG_EMERG, NGX_LOG_WARN,
};
use ngx::http::{HttpModuleMainConf, HttpModuleServerConf, NgxHttpUpstreamModule};
use ngx::{ngx_conf_log_error, ngx_log_error};

use crate::ffi_ext::{array_slice, conf_args, str_bytes, upstream_name};
use crate::shm::{self, Slot};
use crate::{peer, Module};

const DIRECTIVE: &str = "generation_retry_resnapshot";

/// Per-upstream (and http-level default) configuration.
#[derive(Debug)]
pub struct SrvConf {
    /// As written in this block; `None` when the directive is absent.
    pub resnapshot: Option<Resnapshot>,
    /// What applies to this upstream, set when the wrapper is installed.
    pub active: Option<Resnapshot>,
    /// The `peer.init` the wrapper calls (the balancer's, keepalive's, ...).
    pub original_init: ngx_http_upstream_init_peer_pt,
    /// This upstream's counters; NULL until the zone is initialised.
    pub slot: *const Slot,
}

impl Default for SrvConf {
    fn default() -> Self {
        SrvConf {
            resnapshot: None,
            active: None,
            original_init: None,
            slot: ptr::null(),
        }
    }
}

impl SrvConf {
    pub(crate) fn slot(&self) -> Option<&Slot> {
        // SAFETY: a non-NULL slot points into the counters zone, which lives
        // at least as long as the cycle this configuration belongs to.
        unsafe { self.slot.as_ref() }
    }
}

/// The http block's module-wide state.
#[derive(Debug)]
pub struct MainConf {
    pub upstreams: *mut ngx_http_upstream_main_conf_t,
    pub shm_zone: *mut ngx_shm_zone_t,
}

impl Default for MainConf {
    fn default() -> Self {
        MainConf {
            upstreams: ptr::null_mut(),
            shm_zone: ptr::null_mut(),
        }
    }
}

impl MainConf {
    /// Upstream blocks of this cycle.
    pub(crate) fn upstreams(&self) -> &[*mut ngx_http_upstream_srv_conf_t] {
        // SAFETY: `upstreams` is NULL or the upstream module's main conf of
        // the same cycle; its `upstreams` array holds srv_conf pointers.
        match unsafe { self.upstreams.as_ref() } {
            Some(umcf) => unsafe { array_slice(&umcf.upstreams) },
            None => &[],
        }
    }
}

/// The directive handler.
///
/// # Safety
/// Called by nginx with the parsing context, the command and this module's
/// srv_conf for the enclosing `http` or `upstream` block.
pub(crate) unsafe extern "C" fn set_resnapshot(
    cf: *mut ngx_conf_t,
    _cmd: *mut ngx_command_t,
    conf: *mut c_void,
) -> *mut c_char {
    // SAFETY: see the function's contract; `conf` is our SrvConf.
    let (cf, conf) = unsafe { (&mut *cf, &mut *(conf as *mut SrvConf)) };

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

fn has_zone(uscf: &ngx_http_upstream_srv_conf_t) -> bool {
    !uscf.shm_zone.is_null()
}

/// Runs once per http block, after every upstream's `init_upstream`, so the
/// wrapper ends up outermost whatever the directive order and whichever
/// balancer or keepalive sits inside.
pub(crate) fn postconfiguration(cf: &mut ngx_conf_t) -> ngx_int_t {
    // SAFETY: at postconfiguration cf->ctx is the http block's conf context.
    let http_ctx = unsafe { &*(cf.ctx as *const ngx_http_conf_ctx_t) };
    let http_level = Module::server_conf(http_ctx).and_then(|c| c.resnapshot);
    let Some(mcf) = Module::main_conf_mut(http_ctx) else {
        return Status::NGX_ERROR.into();
    };
    let Some(umcf) = NgxHttpUpstreamModule::main_conf_mut(http_ctx) else {
        return Status::NGX_OK.into();
    };
    mcf.upstreams = umcf;

    for &uscf in mcf.upstreams() {
        // SAFETY: every element is a live upstream srv_conf of this cycle.
        let uscf = unsafe { &mut *uscf };
        // Implicit upstreams (proxy_pass http://host:port) have no srv_conf.
        let Some(conf) = Module::server_conf_mut(uscf) else {
            continue;
        };
        let effective = match (conf.resnapshot, has_zone(uscf)) {
            (Some(_), false) => {
                warn_no_zone(cf, uscf);
                None
            }
            (Some(own), true) => Some(own),
            (None, true) => http_level,
            (None, false) => None,
        };
        if effective.is_some() && uscf.peer.init.is_some() {
            conf.active = effective;
            conf.original_init = uscf.peer.init;
            uscf.peer.init = Some(peer::init_peer);
        }
    }

    let tag = ptr::addr_of_mut!(crate::ngx_http_upstream_generation_retry_module) as *mut c_void;
    match shm::add_zone(cf, tag, ptr::from_mut(mcf).cast(), init_zone) {
        Some(zone) => {
            mcf.shm_zone = zone;
            Status::NGX_OK.into()
        }
        None => Status::NGX_ERROR.into(),
    }
}

/// The counters zone's init: find (or take) each wrapped upstream's slot.
unsafe extern "C" fn init_zone(zone: *mut ngx_shm_zone_t, old: *mut c_void) -> ngx_int_t {
    // SAFETY: nginx passes our zone, whose data is the MainConf set in
    // `add_zone`, while it initialises the cycle in the master.
    let zone = unsafe { &mut *zone };
    let mcf = unsafe { &mut *(zone.data as *mut MainConf) };
    let Some(shared) = (unsafe { shm::init_shared(zone, old) }) else {
        return Status::NGX_ERROR.into();
    };
    for &uscf in mcf.upstreams() {
        // SAFETY: as in postconfiguration.
        let uscf = unsafe { &*uscf };
        if let Some(conf) = Module::server_conf_mut(uscf) {
            if conf.active.is_some() {
                // SAFETY: single-threaded master, shared from init_shared.
                conf.slot = unsafe { shm::slot_for(shared, str_bytes(&uscf.host), zone.shm.log) };
            }
        }
    }
    // What the next cycle's init receives as `old`.
    zone.data = shared;
    Status::NGX_OK.into()
}

fn warn_no_zone(cf: &ngx_conf_t, uscf: &ngx_http_upstream_srv_conf_t) {
    let file = if uscf.file_name.is_null() {
        "?".into()
    } else {
        // SAFETY: file_name is the NUL-terminated path of the file that
        // declared the upstream, kept for the life of the cycle.
        unsafe { core::ffi::CStr::from_ptr(uscf.file_name as *const c_char) }.to_string_lossy()
    };
    ngx_log_error!(
        NGX_LOG_WARN,
        cf.log,
        "\"{DIRECTIVE}\" has no effect in upstream \"{}\" without \"zone\": \
         there is no peer-list generation to follow in {}:{}",
        upstream_name(uscf),
        file,
        uscf.line
    );
}
