//! `$generation_retry_resnapshots`: re-snapshots this request took (0 when
//! none, or when the request used no wrapped upstream).

use ngx::core::Status;
use ngx::ffi::{
    ngx_conf_t, ngx_http_add_variable, ngx_http_request_t, ngx_http_variable_value_t, ngx_int_t,
    ngx_pnalloc, ngx_str_t, ngx_uint_t, NGX_HTTP_VAR_NOCACHEABLE,
};

use generation_retry_core::metrics::decimal;

use crate::peer::lean::Word;
use crate::peer::PeerData;
use crate::proto::{Http, Proto};

const NAME: &str = "generation_retry_resnapshots";

/// Registers the variable (preconfiguration).
pub(crate) fn add(cf: &mut ngx_conf_t) -> ngx_int_t {
    let mut name = ngx_str_t {
        len: NAME.len(),
        data: NAME.as_ptr().cast_mut(),
    };
    // SAFETY: cf is the configuration being parsed; nginx copies the name.
    let v = unsafe { ngx_http_add_variable(cf, &mut name, NGX_HTTP_VAR_NOCACHEABLE as ngx_uint_t) };
    // SAFETY: a non-NULL variable entry is ours to fill.
    match unsafe { v.as_mut() } {
        Some(v) => {
            v.get_handler = Some(get);
            Status::NGX_OK.into()
        }
        None => Status::NGX_ERROR.into(),
    }
}

unsafe extern "C" fn get(
    r: *mut ngx_http_request_t,
    v: *mut ngx_http_variable_value_t,
    _data: usize,
) -> ngx_int_t {
    // SAFETY: nginx passes a live request and the value to fill.
    let v = unsafe { &mut *v };
    // Our ctx slot is NULL, the lean path's word, or the PeerData of the
    // full path, in the request's pool (see `crate::peer::lean`).
    // SAFETY: a live request, whose ctx array is allocated with it.
    let word = Word::<PeerData<Http>>::read(unsafe { *Http::ctx_slot(r) });
    let n = match word {
        // SAFETY: the full path's state of this request, in its pool.
        Word::Full(pd) => unsafe { (*pd).resnapshots() },
        Word::Lean { .. } | Word::Empty => 0,
    };
    // SAFETY: as above.
    let r = unsafe { &*r };
    let mut digits = [0u8; 10];
    let text = decimal(n, &mut digits);
    // SAFETY: allocating from the request's pool.
    let data = unsafe { ngx_pnalloc(r.pool, text.len()) } as *mut u8;
    if data.is_null() {
        return Status::NGX_ERROR.into();
    }
    // SAFETY: `data` has room for text.len() bytes.
    unsafe { core::ptr::copy_nonoverlapping(text.as_ptr(), data, text.len()) };
    v.data = data;
    v.set_len(text.len() as u32);
    v.set_valid(1);
    v.set_no_cacheable(0);
    v.set_not_found(0);
    Status::NGX_OK.into()
}
