//! `generation_retry_status;`: the counters as Prometheus text (default) or
//! JSON (`?format=json`), GET and HEAD only.

use core::ffi::{c_char, c_void};

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
use ngx::http::{HttpModuleLocationConf, NgxHttpCoreModule};

use crate::conf::MainConf;
use crate::ffi_ext::conf_slot;
use crate::proto::{Http, Registered};
use crate::shm::zone_ctx;

/// The directive handler: makes the location's content handler ours.
///
/// # Safety
/// Called by nginx while parsing a `location` block.
pub(crate) unsafe extern "C" fn set_status(
    cf: *mut ngx_conf_t,
    _cmd: *mut ngx_command_t,
    _conf: *mut c_void,
) -> *mut c_char {
    // SAFETY: nginx passes the configuration being parsed.
    let cf = unsafe { &mut *cf };
    let Some(clcf) = NgxHttpCoreModule::location_conf_mut(cf) else {
        return NGX_CONF_ERROR;
    };
    let ours: unsafe extern "C" fn(*mut ngx_http_request_t) -> ngx_int_t = status_handler;
    if clcf.handler.is_some_and(|h| core::ptr::fn_addr_eq(h, ours)) {
        return c"is duplicate".as_ptr().cast_mut();
    }
    clcf.handler = Some(status_handler);
    ngx::core::NGX_CONF_OK
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
    r.headers_out.content_type_len = content_type.len();
    r.headers_out.content_type_lowcase = core::ptr::null_mut();
    r.headers_out.content_length_n = body.len() as i64;

    // SAFETY: a live request whose headers we just set.
    let rc = unsafe { ngx_http_send_header(r) };
    if rc == Status::NGX_ERROR.into() || rc > Status::NGX_OK.into() || r.header_only() != 0 {
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
