//! The unsafe edge that ngx and nginx-sys do not cover: per-module
//! configuration slots and module lookup by name, each with the reason it is
//! sound. Strings and arrays use nginx-sys's own `ngx_str_t::as_bytes` and
//! `ngx_array_t::as_slice`; request contexts use ngx's `Request`.
//!
//! This file imports nothing from the crate: it is the bottom layer.

use core::ffi::{c_void, CStr};
use core::ptr;

use ngx::ffi::{ngx_conf_t, ngx_module_t, ngx_str_t};

/// An `ngx_str_t` pointer as lossy UTF-8 (`-` for NULL).
pub(crate) fn str_ptr_lossy(s: *const ngx_str_t) -> String {
    // SAFETY: non-NULL ngx_str_t pointers handed to us by nginx are live.
    match unsafe { s.as_ref() } {
        Some(s) => String::from_utf8_lossy(s.as_bytes()).into_owned(),
        None => "-".into(),
    }
}

/// Where a directive was written: its file and line, for messages given
/// after parsing has moved on (at postconfiguration, at merge).
#[derive(Clone, Copy, Default)]
pub(crate) struct Position {
    file: ngx_str_t,
    line: usize,
}

impl Position {
    /// The directive being parsed. The file name lives as long as the
    /// cycle's configuration (nginx keeps it for its own messages).
    pub(crate) fn of(cf: &ngx_conf_t) -> Position {
        // SAFETY: while a directive is parsed, cf->conf_file is NULL (a
        // `-g` directive) or the live file being parsed.
        match unsafe { cf.conf_file.as_ref() } {
            Some(f) => Position {
                file: f.file.name,
                line: f.line,
            },
            None => Position::default(),
        }
    }
}

impl Position {
    /// The file's name (`command line` for a `-g` directive).
    pub(crate) fn file(&self) -> String {
        if self.file.len == 0 {
            return "command line".into();
        }
        String::from_utf8_lossy(self.file.as_bytes()).into_owned()
    }

    pub(crate) fn line(&self) -> usize {
        self.line
    }
}

/// The arguments of the directive being parsed, name first.
pub(crate) fn conf_args(cf: &ngx_conf_t) -> &[ngx_str_t] {
    // SAFETY: while a directive handler runs, cf->args is the live array of
    // the directive's words, each an ngx_str_t.
    unsafe { cf.args.as_ref().map_or(&[], |a| a.as_slice()) }
}

/// Entry `module.ctx_index` of a per-module configuration array
/// (`main_conf`, `srv_conf`); NULL when the array is NULL.
///
/// # Safety
/// `array` is NULL or a live configuration array of `module`'s kind (http
/// or stream), which has an entry for every module of that kind.
pub(crate) unsafe fn conf_slot(array: *mut *mut c_void, module: &ngx_module_t) -> *mut c_void {
    if array.is_null() {
        return ptr::null_mut();
    }
    // SAFETY: per the contract.
    unsafe { *array.add(module.ctx_index) }
}

/// The `ctx_index` of the module called `name` in the cycle being
/// configured, found by name so the module does not link against modules
/// nginx may lack (a build without `--with-stream`) or load later.
pub(crate) fn module_ctx_index(cf: &ngx_conf_t, name: &CStr) -> Option<usize> {
    // SAFETY: cf->cycle->modules is the cycle's module table of
    // `modules_n` entries, each with a NUL-terminated name.
    unsafe {
        let cycle = cf.cycle.as_ref()?;
        let modules = core::slice::from_raw_parts(cycle.modules, cycle.modules_n);
        modules
            .iter()
            .filter_map(|m| m.as_ref())
            .find(|m| !m.name.is_null() && CStr::from_ptr(m.name) == name)
            .map(|m| m.ctx_index)
    }
}
