//! `ngx_http_upstream_generation_retry_module`: ends the `no live upstreams`
//! 502s nginx 1.28 returns when an upstream `server NAME resolve;` changes its
//! address while a request is being retried (nginx/nginx#1656).
//!
//! Split by concern: [`conf`] holds the directives and their configuration,
//! [`peer`] the peer wrapper, [`shm`] the shared counters, [`status`] the
//! status endpoint, [`variable`] the access-log variable, and [`ffi_ext`] the
//! few unsafe accessors everything else goes through.

mod conf;
mod ffi_ext;
mod peer;
mod shm;
mod status;
mod variable;

use core::ffi::c_void;
use core::ptr;

use ngx::ffi::{
    ngx_command_t, ngx_conf_t, ngx_http_module_t, ngx_int_t, ngx_module_t, ngx_uint_t,
    NGX_CONF_NOARGS, NGX_CONF_TAKE12, NGX_HTTP_LOC_CONF, NGX_HTTP_LOC_CONF_OFFSET,
    NGX_HTTP_MAIN_CONF, NGX_HTTP_MODULE, NGX_HTTP_SRV_CONF_OFFSET, NGX_HTTP_UPS_CONF,
};
use ngx::http::{HttpModule, HttpModuleMainConf, HttpModuleServerConf};
use ngx::ngx_string;

/// The module's type for ngx-rust's configuration helpers.
pub(crate) struct Module;

impl HttpModule for Module {
    fn module() -> &'static ngx_module_t {
        // SAFETY: nginx writes the module's index fields while loading it,
        // before any configuration callback can run; afterwards it is only read.
        unsafe { &*ptr::addr_of!(ngx_http_upstream_generation_retry_module) }
    }

    unsafe extern "C" fn preconfiguration(cf: *mut ngx_conf_t) -> ngx_int_t {
        // SAFETY: nginx calls preconfiguration with the configuration being
        // parsed.
        variable::add(unsafe { &mut *cf })
    }

    unsafe extern "C" fn postconfiguration(cf: *mut ngx_conf_t) -> ngx_int_t {
        // SAFETY: nginx calls postconfiguration with a valid configuration
        // context for the http block being parsed.
        conf::postconfiguration(unsafe { &mut *cf })
    }
}

// SAFETY: the server configuration slot of this module always holds a
// `conf::SrvConf`, created by `create_srv_conf` below.
unsafe impl HttpModuleServerConf for Module {
    type ServerConf = conf::SrvConf;
}

// SAFETY: the main configuration slot always holds a `conf::MainConf`,
// created by `create_main_conf` below.
unsafe impl HttpModuleMainConf for Module {
    type MainConf = conf::MainConf;
}

static MODULE_CTX: ngx_http_module_t = ngx_http_module_t {
    preconfiguration: Some(Module::preconfiguration),
    postconfiguration: Some(Module::postconfiguration),
    create_main_conf: Some(Module::create_main_conf),
    init_main_conf: None,
    create_srv_conf: Some(Module::create_srv_conf),
    merge_srv_conf: None,
    create_loc_conf: None,
    merge_loc_conf: None,
};

static mut COMMANDS: [ngx_command_t; 3] = [
    ngx_command_t {
        name: ngx_string!("generation_retry_resnapshot"),
        type_: (NGX_HTTP_MAIN_CONF | NGX_HTTP_UPS_CONF | NGX_CONF_TAKE12) as ngx_uint_t,
        set: Some(conf::set_resnapshot),
        conf: NGX_HTTP_SRV_CONF_OFFSET,
        offset: 0,
        post: ptr::null_mut(),
    },
    ngx_command_t {
        name: ngx_string!("generation_retry_status"),
        type_: (NGX_HTTP_LOC_CONF | NGX_CONF_NOARGS) as ngx_uint_t,
        set: Some(status::set_status),
        conf: NGX_HTTP_LOC_CONF_OFFSET,
        offset: 0,
        post: ptr::null_mut(),
    },
    ngx_command_t::empty(),
];

#[cfg(feature = "export-modules")]
ngx::ngx_modules!(ngx_http_upstream_generation_retry_module);

/// The module table nginx's `load_module` looks up by name.
#[used]
#[allow(non_upper_case_globals)]
#[cfg_attr(not(feature = "export-modules"), no_mangle)]
pub static mut ngx_http_upstream_generation_retry_module: ngx_module_t = ngx_module_t {
    ctx: ptr::addr_of!(MODULE_CTX) as *mut c_void,
    commands: ptr::addr_of_mut!(COMMANDS) as *mut ngx_command_t,
    type_: NGX_HTTP_MODULE as ngx_uint_t,
    ..ngx_module_t::default()
};
