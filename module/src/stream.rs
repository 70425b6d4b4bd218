//! `ngx_stream_upstream_generation_retry_module`: the directive in `stream`
//! and stream `upstream` blocks. Everything else is the shared code of
//! [`crate::conf`], [`crate::setup`] and [`crate::peer`], instantiated for
//! [`Stream`].
//!
//! It refers to no stream symbol of nginx (the stream upstream module is
//! found by name at configuration time), so the shared object also loads
//! into an nginx whose stream module is dynamic and loaded later; it is
//! compiled only against an nginx with stream upstream zones.

use core::ffi::c_void;
use core::ptr;

use ngx::ffi::{
    ngx_command_t, ngx_conf_t, ngx_int_t, ngx_module_t, ngx_stream_module_t, ngx_uint_t,
    NGX_CONF_TAKE12, NGX_STREAM_MAIN_CONF, NGX_STREAM_MODULE, NGX_STREAM_SRV_CONF_OFFSET,
    NGX_STREAM_UPS_CONF,
};
use ngx::ngx_string;

use crate::proto::{Registered, Stream};
use crate::{conf, setup};

unsafe extern "C" fn postconfiguration(cf: *mut ngx_conf_t) -> ngx_int_t {
    // SAFETY: nginx calls postconfiguration inside the stream block.
    unsafe { setup::postconfiguration::<Stream>(&mut *cf) }
}

impl Registered for Stream {
    fn module() -> &'static ngx_module_t {
        // SAFETY: as for the http module: nginx writes its index fields while
        // loading it; afterwards they are only read.
        unsafe { &*ptr::addr_of!(ngx_stream_upstream_generation_retry_module) }
    }
}

static STREAM_CTX: ngx_stream_module_t = ngx_stream_module_t {
    preconfiguration: None,
    postconfiguration: Some(postconfiguration),
    create_main_conf: Some(conf::create_main_conf::<Stream>),
    init_main_conf: Some(conf::init_main_conf::<Stream>),
    create_srv_conf: Some(conf::create_srv_conf::<Stream>),
    merge_srv_conf: None,
};

static mut STREAM_COMMANDS: [ngx_command_t; 2] = [
    ngx_command_t {
        name: ngx_string!("generation_retry_resnapshot"),
        type_: (NGX_STREAM_MAIN_CONF | NGX_STREAM_UPS_CONF | NGX_CONF_TAKE12) as ngx_uint_t,
        set: Some(conf::set_resnapshot::<Stream>),
        conf: NGX_STREAM_SRV_CONF_OFFSET,
        offset: 0,
        post: ptr::null_mut(),
    },
    ngx_command_t::empty(),
];

/// The stream module, listed beside the http one in the object's module
/// table.
#[used]
#[allow(non_upper_case_globals)]
#[cfg_attr(not(feature = "export-modules"), no_mangle)]
pub static mut ngx_stream_upstream_generation_retry_module: ngx_module_t = ngx_module_t {
    ctx: ptr::addr_of!(STREAM_CTX) as *mut c_void,
    commands: ptr::addr_of_mut!(STREAM_COMMANDS) as *mut ngx_command_t,
    type_: NGX_STREAM_MODULE as ngx_uint_t,
    init_process: Some(crate::shm::init_process),
    ..ngx_module_t::default()
};
