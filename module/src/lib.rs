//! `ngx_http_upstream_generation_retry_module` and
//! `ngx_stream_upstream_generation_retry_module`: end the `no live
//! upstreams` failures nginx 1.27.3 and later (through 1.31.x) give when an
//! upstream `server NAME resolve;` changes its address while a request (or a
//! TCP session) is being retried (nginx/nginx#1656). One shared object holds both modules, so one
//! `load_module` line serves `http` and `stream`.
//!
//! Split by concern, each file importing only from the ones below it:
//!
//! | layer | files |
//! |---|---|
//! | the nginx module objects | this file (http), [`stream`] |
//! | per-protocol setup | [`setup`] (postconfiguration), [`status`], [`variable`] |
//! | the peer wrapper | [`peer`]: FFI glue over `generation_retry_core::rescue` |
//! | configuration | [`conf`]: structures and the directive handler |
//! | protocols | [`proto`]: where http and stream keep what the module needs |
//! | shared memory | [`shm`]: the counters zone |
//! | unsafe accessors | [`ffi_ext`] |
//!
//! Everything that can be decided without nginx (the rescue rule, the
//! directive's arguments, the metrics and log lines) is in
//! `generation_retry_core`, unit-tested with plain `cargo test`.

/// A debug-level line under protocol `P`'s debug mask, as keepalive logs
/// each callback: shown with `error_log ... debug` on an nginx built
/// `--with-debug`, compiled out otherwise (`ngx::log::DEBUG` is false).
/// The format arguments are evaluated only when the line is written (`$log`,
/// a pointer, always).
macro_rules! trace {
    ($p:ty, $log:expr, $($arg:tt)+) => {
        ::ngx::ngx_log_debug!(
            mask: <$p as $crate::proto::Proto>::debug_mask(), $log, $($arg)+
        )
    };
}

mod conf;
mod ffi_ext;
mod peer;
mod proto;
mod setup;
mod shm;
mod status;
#[cfg(generation_retry_stream)]
mod stream;
mod variable;

/// The layout gate's assertions (build/layout.rs): bindgen's structures as
/// the C compiler lays them out for this nginx tree, checked at compile
/// time.
#[allow(non_camel_case_types, clippy::all)]
mod layout {
    #[allow(unused_imports)]
    use ngx::ffi::*;
    include!(concat!(env!("OUT_DIR"), "/layout.rs"));
}

use core::ffi::c_void;
use core::ptr;

use ngx::ffi::{
    ngx_command_t, ngx_conf_t, ngx_http_module_t, ngx_int_t, ngx_module_t, ngx_uint_t,
    NGX_CONF_NOARGS, NGX_CONF_TAKE12, NGX_HTTP_LOC_CONF, NGX_HTTP_LOC_CONF_OFFSET,
    NGX_HTTP_MAIN_CONF, NGX_HTTP_MODULE, NGX_HTTP_SRV_CONF_OFFSET, NGX_HTTP_UPS_CONF,
};
use ngx::ngx_string;

use proto::{Http, Registered};
#[cfg(generation_retry_stream)]
pub use stream::ngx_stream_upstream_generation_retry_module;

unsafe extern "C" fn http_preconfiguration(cf: *mut ngx_conf_t) -> ngx_int_t {
    // SAFETY: nginx calls preconfiguration with the configuration being
    // parsed.
    variable::add(unsafe { &mut *cf })
}

unsafe extern "C" fn http_postconfiguration(cf: *mut ngx_conf_t) -> ngx_int_t {
    // SAFETY: nginx calls postconfiguration with the http block's context.
    unsafe { setup::postconfiguration::<Http>(&mut *cf) }
}

impl Registered for Http {
    fn module() -> &'static ngx_module_t {
        // SAFETY: nginx writes the module's index fields while loading it,
        // before any configuration callback; afterwards they are only read.
        unsafe { &*ptr::addr_of!(ngx_http_upstream_generation_retry_module) }
    }
}

static HTTP_CTX: ngx_http_module_t = ngx_http_module_t {
    preconfiguration: Some(http_preconfiguration),
    postconfiguration: Some(http_postconfiguration),
    create_main_conf: Some(conf::create_main_conf::<Http>),
    init_main_conf: Some(conf::init_main_conf::<Http>),
    create_srv_conf: Some(conf::create_srv_conf::<Http>),
    merge_srv_conf: None,
    create_loc_conf: Some(status::create_loc_conf),
    merge_loc_conf: Some(status::merge_loc_conf),
};

static mut HTTP_COMMANDS: [ngx_command_t; 3] = [
    ngx_command_t {
        name: ngx_string!("generation_retry_resnapshot"),
        type_: (NGX_HTTP_MAIN_CONF | NGX_HTTP_UPS_CONF | NGX_CONF_TAKE12) as ngx_uint_t,
        set: Some(conf::set_resnapshot::<Http>),
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

// The table `load_module` reads: the modules of this object, their names,
// and no ordering constraint. Written out because ngx-rust 0.5.1's
// `ngx_modules!` miscounts more than one module.
#[cfg(feature = "export-modules")]
mod exported {
    use core::ffi::c_char;
    use core::ptr;

    use ngx::ffi::ngx_module_t;

    #[cfg(generation_retry_stream)]
    #[no_mangle]
    #[used]
    #[allow(non_upper_case_globals)]
    pub static mut ngx_modules: [*const ngx_module_t; 3] = [
        ptr::addr_of!(super::ngx_http_upstream_generation_retry_module),
        ptr::addr_of!(super::ngx_stream_upstream_generation_retry_module),
        ptr::null(),
    ];

    #[cfg(generation_retry_stream)]
    #[no_mangle]
    #[used]
    #[allow(non_upper_case_globals)]
    pub static mut ngx_module_names: [*const c_char; 3] = [
        c"ngx_http_upstream_generation_retry_module".as_ptr(),
        c"ngx_stream_upstream_generation_retry_module".as_ptr(),
        ptr::null(),
    ];

    // Against an nginx without stream upstream zones: the http module only.
    #[cfg(not(generation_retry_stream))]
    #[no_mangle]
    #[used]
    #[allow(non_upper_case_globals)]
    pub static mut ngx_modules: [*const ngx_module_t; 2] = [
        ptr::addr_of!(super::ngx_http_upstream_generation_retry_module),
        ptr::null(),
    ];

    #[cfg(not(generation_retry_stream))]
    #[no_mangle]
    #[used]
    #[allow(non_upper_case_globals)]
    pub static mut ngx_module_names: [*const c_char; 2] = [
        c"ngx_http_upstream_generation_retry_module".as_ptr(),
        ptr::null(),
    ];

    #[no_mangle]
    #[used]
    #[allow(non_upper_case_globals)]
    pub static mut ngx_module_order: [*const c_char; 1] = [ptr::null()];
}

/// The http module, looked up by name by `load_module`.
#[used]
#[allow(non_upper_case_globals)]
#[cfg_attr(not(feature = "export-modules"), no_mangle)]
pub static mut ngx_http_upstream_generation_retry_module: ngx_module_t = ngx_module_t {
    ctx: ptr::addr_of!(HTTP_CTX) as *mut c_void,
    commands: ptr::addr_of_mut!(HTTP_COMMANDS) as *mut ngx_command_t,
    type_: NGX_HTTP_MODULE as ngx_uint_t,
    init_process: Some(shm::init_process),
    ..ngx_module_t::default()
};
