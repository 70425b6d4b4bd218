//! `generation_retry_resnapshot on | off [max=N];` in `http` and `upstream`.
//!
//! The same `SrvConf` is created for the http block and for every
//! `upstream {}` block (nginx gives each an srv_conf slot); the upstream's
//! setting wins, the http block's is the default for upstreams with a `zone`.

use core::ffi::{c_char, c_void};

use generation_retry_core::directive::{parse_resnapshot, Resnapshot};
use ngx::core::{Status, NGX_CONF_ERROR};
use ngx::ffi::{
    ngx_command_t, ngx_conf_t, ngx_http_conf_ctx_t, ngx_http_upstream_srv_conf_t, ngx_int_t,
    NGX_LOG_EMERG, NGX_LOG_WARN,
};
use ngx::http::{HttpModuleMainConf, HttpModuleServerConf, NgxHttpUpstreamModule};
use ngx::{ngx_conf_log_error, ngx_log_error};

use crate::ffi_ext::{array_slice, conf_args, str_bytes};
use crate::Module;

const DIRECTIVE: &str = "generation_retry_resnapshot";

/// Per-upstream (and http-level default) configuration.
#[derive(Debug, Default)]
pub struct SrvConf {
    /// `None` until the directive appears in this block.
    pub resnapshot: Option<Resnapshot>,
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

/// What the directive resolves to for one upstream block.
pub(crate) fn effective(
    http_level: Option<Resnapshot>,
    upstream: &ngx_http_upstream_srv_conf_t,
) -> Option<Resnapshot> {
    let own = Module::server_conf(upstream).and_then(|c| c.resnapshot);
    match (own, has_zone(upstream)) {
        (Some(own), _) => Some(own),
        (None, true) => http_level,
        (None, false) => None,
    }
}

fn has_zone(uscf: &ngx_http_upstream_srv_conf_t) -> bool {
    !uscf.shm_zone.is_null()
}

/// Runs once per http block, after every upstream's `init_upstream`.
pub(crate) fn postconfiguration(cf: &mut ngx_conf_t) -> ngx_int_t {
    // SAFETY: at postconfiguration cf->ctx is the http block's conf context.
    let http_ctx = unsafe { &*(cf.ctx as *const ngx_http_conf_ctx_t) };
    let http_level = Module::server_conf(http_ctx).and_then(|c| c.resnapshot);

    let Some(umcf) = NgxHttpUpstreamModule::main_conf(http_ctx) else {
        return Status::NGX_OK.into();
    };
    // SAFETY: umcf->upstreams is an array of upstream srv_conf pointers.
    let upstreams: &[*mut ngx_http_upstream_srv_conf_t] = unsafe { array_slice(&umcf.upstreams) };

    for &uscf in upstreams {
        // SAFETY: every element is a live upstream srv_conf of this cycle.
        let uscf = unsafe { &*uscf };
        let explicit = Module::server_conf(uscf).and_then(|c| c.resnapshot);
        if explicit.is_some() && !has_zone(uscf) {
            warn_no_zone(cf, uscf);
        }
        // Issue 3 installs the peer wrapper here for every upstream whose
        // effective setting is Some.
        let _ = effective(http_level, uscf);
    }

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
        String::from_utf8_lossy(str_bytes(&uscf.host)),
        file,
        uscf.line
    );
}
