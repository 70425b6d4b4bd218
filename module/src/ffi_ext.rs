//! The unsafe edge: small accessors over nginx's C structures, each with the
//! reason it is sound. The rest of the module works with safe references.

use ngx::ffi::{ngx_array_t, ngx_conf_t, ngx_str_t};

/// Views an `ngx_array_t` of `T` as a slice.
///
/// # Safety
/// `array` must be NULL or a live array whose elements are `T`.
pub(crate) unsafe fn array_slice<'a, T>(array: *const ngx_array_t) -> &'a [T] {
    if array.is_null() {
        return &[];
    }
    // SAFETY: per the contract, `array` is live and holds `nelts` elements of T.
    unsafe {
        let a = &*array;
        if a.nelts == 0 || a.elts.is_null() {
            return &[];
        }
        core::slice::from_raw_parts(a.elts as *const T, a.nelts)
    }
}

/// Views an `ngx_str_t` as bytes.
pub(crate) fn str_bytes(s: &ngx_str_t) -> &[u8] {
    if s.len == 0 || s.data.is_null() {
        return &[];
    }
    // SAFETY: an ngx_str_t with non-NULL data points at `len` readable bytes
    // for as long as the string itself lives.
    unsafe { core::slice::from_raw_parts(s.data, s.len) }
}

/// The arguments of the directive being parsed, name first.
pub(crate) fn conf_args(cf: &ngx_conf_t) -> &[ngx_str_t] {
    // SAFETY: while a directive handler runs, cf->args is the live array of
    // the directive's words.
    unsafe { array_slice(cf.args) }
}
