//! `generation_retry_status;`: the counters as Prometheus text (default) or
//! JSON (`?format=json`), GET and HEAD only.

use core::ffi::{c_char, c_void};

use generation_retry_core::directive::STATUS_DIRECTIVE;
use generation_retry_core::log;
use generation_retry_core::metrics::{
    render_json, render_prometheus, wants_json, UpstreamStats, JSON_CONTENT_TYPE,
    PROMETHEUS_CONTENT_TYPE,
};
use ngx::core::{Status, NGX_CONF_ERROR};
use ngx::ffi::{
    ngx_chain_t, ngx_command_t, ngx_conf_t, ngx_create_temp_buf, ngx_http_discard_request_body,
    ngx_http_output_filter, ngx_http_request_t, ngx_http_send_header, ngx_int_t, ngx_str_t,
    ngx_uint_t, NGX_HTTP_GET, NGX_HTTP_HEAD, NGX_HTTP_NOT_ALLOWED, NGX_HTTP_OK,
};
use ngx::ffi::{ngx_http_core_loc_conf_t, ngx_http_handler_pt, NGX_LOG_EMERG};
use ngx::http::{HttpModuleLocationConf, NgxHttpCoreModule, Request};
use ngx::{ngx_conf_log_error, ngx_log_error};

use crate::conf::MainConf;
use crate::ffi_ext::{conf_slot, Position};
use crate::proto::{Http, Registered};
use crate::shm::zone_ctx;

/// Where `generation_retry_status` was written in a location, so that the
/// merge can tell whether it is still the location's content handler.
#[derive(Clone, Copy, Default)]
pub(crate) struct LocConf {
    at: Option<Position>,
}

pub(crate) unsafe extern "C" fn create_loc_conf(cf: *mut ngx_conf_t) -> *mut c_void {
    crate::conf::create::<LocConf>(cf)
}

/// The content handler this module installs.
fn is_ours(handler: ngx_http_handler_pt) -> bool {
    let ours: unsafe extern "C" fn(*mut ngx_http_request_t) -> ngx_int_t = status_handler;
    handler.is_some_and(|h| core::ptr::fn_addr_eq(h, ours))
}

/// The location's name, for messages.
fn location_name(clcf: &ngx_http_core_loc_conf_t) -> String {
    String::from_utf8_lossy(clcf.name.as_bytes()).into_owned()
}

/// The directive handler: makes the location's content handler ours, unless
/// another one (`proxy_pass`, ...) already is.
///
/// # Safety
/// Called by nginx while parsing a `location` block, with our LocConf.
pub(crate) unsafe extern "C" fn set_status(
    cf: *mut ngx_conf_t,
    _cmd: *mut ngx_command_t,
    conf: *mut c_void,
) -> *mut c_char {
    // SAFETY: nginx passes the configuration being parsed and our LocConf.
    let (cf, conf) = unsafe { (&mut *cf, &mut *(conf as *mut LocConf)) };
    let Some(clcf) = NgxHttpCoreModule::location_conf_mut(cf) else {
        return NGX_CONF_ERROR;
    };
    if is_ours(clcf.handler) {
        return c"is duplicate".as_ptr().cast_mut();
    }
    if clcf.handler.is_some() {
        let message = log::status_conflict(STATUS_DIRECTIVE, &location_name(clcf));
        ngx_conf_log_error!(NGX_LOG_EMERG, cf, "{message}");
        return NGX_CONF_ERROR;
    }
    clcf.handler = Some(status_handler);
    conf.at = Some(Position::of(cf));
    ngx::core::NGX_CONF_OK
}

/// Refuses a location where a content handler set after ours (`proxy_pass`
/// below `generation_retry_status`) replaced it: nginx would let the last
/// one win without a word.
///
/// # Safety
/// Called by nginx when merging a location's configuration; `cf->ctx` then
/// holds that location's configurations.
pub(crate) unsafe extern "C" fn merge_loc_conf(
    cf: *mut ngx_conf_t,
    _prev: *mut c_void,
    conf: *mut c_void,
) -> *mut c_char {
    // SAFETY: nginx passes the configuration and our LocConf of the location.
    let (cf, conf) = unsafe { (&mut *cf, &*(conf as *const LocConf)) };
    let Some(at) = conf.at else {
        return ngx::core::NGX_CONF_OK;
    };
    let Some(clcf) = NgxHttpCoreModule::location_conf_mut(cf) else {
        return NGX_CONF_ERROR;
    };
    if is_ours(clcf.handler) {
        return ngx::core::NGX_CONF_OK;
    }
    let message = log::status_conflict(STATUS_DIRECTIVE, &location_name(clcf));
    ngx_log_error!(
        NGX_LOG_EMERG,
        cf.log,
        "{message} in {}:{}",
        at.file(),
        at.line()
    );
    NGX_CONF_ERROR
}

/// Every wrapped upstream of the running cycle, http then stream, with its
/// counters and the live gauges.
fn collect(r: &ngx_http_request_t) -> Vec<UpstreamStats> {
    // SAFETY: the request's main_conf array has our slot, a MainConf<Http>.
    let mcf = unsafe { (conf_slot(r.main_conf, Http::module()) as *const MainConf<Http>).as_ref() };
    let mut out = Vec::new();
    if let Some(ctx) = mcf.and_then(|m| zone_ctx(m.shm_zone)) {
        for reg in ctx.registered() {
            // SAFETY: each registration of the running cycle's zone, with
            // its own configuration.
            unsafe { (reg.collect)(reg.conf, &mut out) };
        }
    }
    out
}

unsafe extern "C" fn status_handler(r: *mut ngx_http_request_t) -> ngx_int_t {
    // SAFETY: nginx calls content handlers with a live request.
    let r = unsafe { &mut *r };
    if r.method & (NGX_HTTP_GET | NGX_HTTP_HEAD) as ngx_uint_t == 0 {
        // SAFETY: a live request, used only through this wrapper here.
        let request = unsafe { Request::from_ngx_http_request(r) };
        // nginx keeps the response's headers for its 405 page.
        if request.add_header_out("Allow", "GET, HEAD").is_none() {
            return Status::NGX_ERROR.into();
        }
        return NGX_HTTP_NOT_ALLOWED as ngx_int_t;
    }
    // SAFETY: a live request.
    let rc = unsafe { ngx_http_discard_request_body(r) };
    if rc != Status::NGX_OK.into() {
        return rc;
    }

    let stats = collect(r);
    let (body, content_type) = if wants_json(r.args.as_bytes()) {
        (render_json(&stats), JSON_CONTENT_TYPE)
    } else {
        (render_prometheus(&stats), PROMETHEUS_CONTENT_TYPE)
    };

    r.headers_out.status = NGX_HTTP_OK as ngx_uint_t;
    r.headers_out.content_type = ngx_str_t {
        len: content_type.len(),
        data: content_type.as_ptr().cast_mut(),
    };
    // The bare type, as nginx's own handlers set it: what `gzip_types` and
    // the other `*_types` lists match against.
    r.headers_out.content_type_len = content_type.find(';').unwrap_or(content_type.len());
    r.headers_out.content_type_lowcase = core::ptr::null_mut();
    r.headers_out.content_length_n = body.len() as i64;

    // SAFETY: a live request whose headers we just set.
    let rc = unsafe { ngx_http_send_header(r) };
    // Not `r.header_only()`: bindgen places the request's bitfields from
    // `uri_changes` on two bits early in nginx 1.29+ trees (`in_port_t port`
    // precedes them there), so the accessor reads `chunked` instead. The
    // header filter sets header_only for a main request's HEAD, which is
    // what is checked here; this 200 has no other header-only case.
    let head = r.method == NGX_HTTP_HEAD as ngx_uint_t && core::ptr::eq(r as *const _, r.main);
    if rc == Status::NGX_ERROR.into() || rc > Status::NGX_OK.into() || head {
        return rc;
    }

    // SAFETY: allocating from the request's pool.
    let b = unsafe { ngx_create_temp_buf(r.pool, body.len().max(1)) };
    // SAFETY: a non-NULL temp buffer of at least body.len() bytes.
    let Some(buf) = (unsafe { b.as_mut() }) else {
        return Status::NGX_ERROR.into();
    };
    // SAFETY: `pos..pos+len` is inside the buffer just allocated.
    unsafe {
        core::ptr::copy_nonoverlapping(body.as_ptr(), buf.pos, body.len());
        buf.last = buf.pos.add(body.len());
    }
    let main = core::ptr::eq(r as *const _, r.main as *const _);
    buf.set_last_buf(if main { 1 } else { 0 });
    buf.set_last_in_chain(1);

    let mut out = ngx_chain_t {
        buf: b,
        next: core::ptr::null_mut(),
    };
    // SAFETY: a live request and a chain that outlives the call.
    unsafe { ngx_http_output_filter(r, &mut out) }
}
