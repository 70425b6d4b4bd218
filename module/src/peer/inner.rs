//! The inner balancer's callbacks and state, and the pass-through callbacks
//! that hand nginx's calls on to them unchanged. They read the [`Head`] at
//! the start of the wrapper's state (`PeerData` is `#[repr(C)]` with its
//! `Head` first), so they are not generic over the protocol. `free` also
//! records a failed attempt's address in the request's [`History`].

use core::ffi::c_void;

use ngx::core::Status;
use ngx::ffi::{
    ngx_event_free_peer_pt, ngx_event_get_peer_pt, ngx_event_notify_peer_pt,
    ngx_event_save_peer_session_pt, ngx_event_set_peer_session_pt, ngx_int_t,
    ngx_peer_connection_t, ngx_uint_t, NGX_PEER_FAILED, NGX_PEER_NEXT,
};
use ngx::ngx_log_debug;

use super::history::History;

/// The start of the wrapper's per-request state, all the pass-through
/// callbacks read: the inner balancer and the request's tried addresses.
#[derive(Clone, Copy)]
#[repr(C)]
pub(super) struct Head {
    pub(super) inner: Inner,
    pub(super) history: History,
}

/// The inner balancer's callbacks and state, as `peer.init` left them.
#[derive(Clone, Copy)]
pub(super) struct Inner {
    pub(super) data: *mut c_void,
    pub(super) get: ngx_event_get_peer_pt,
    free: ngx_event_free_peer_pt,
    /// Stream round-robin's "connected" hook (clears the peer's fails), and
    /// from nginx 1.29.6 http `sticky ... learn` after the header; NULL for
    /// the other balancers.
    notify: ngx_event_notify_peer_pt,
    set_session: ngx_event_set_peer_session_pt,
    save_session: ngx_event_save_peer_session_pt,
}

impl Inner {
    pub(super) fn take(pc: &ngx_peer_connection_t) -> Inner {
        Inner {
            data: pc.data,
            get: pc.get,
            free: pc.free,
            notify: pc.notify,
            set_session: pc.set_session,
            save_session: pc.save_session,
        }
    }

    /// The inner balancer of a request on the lean path: `pc` holds its
    /// data and callbacks but `get` and `free`, which are the upstream's
    /// (`SrvConf::inner_get`, `inner_free`).
    pub(super) fn lean(
        pc: &ngx_peer_connection_t,
        get: ngx_event_get_peer_pt,
        free: ngx_event_free_peer_pt,
    ) -> Inner {
        Inner {
            get,
            free,
            ..Inner::take(pc)
        }
    }

    /// Writes these callbacks and state back into `pc`, as they were when
    /// [`Inner::take`] read them.
    pub(super) fn put_back(&self, pc: &mut ngx_peer_connection_t) {
        pc.data = self.data;
        pc.get = self.get;
        pc.free = self.free;
        pc.notify = self.notify;
        pc.set_session = self.set_session;
        pc.save_session = self.save_session;
    }

    /// Clears `pc`'s state and callbacks to what a request's fresh
    /// upstream has (NULL), for the upstream's `peer.init` to run again:
    /// round-robin reuses a non-NULL `data` as its own state, and a
    /// balancer that wraps a callback it finds set (`sticky` and, from
    /// 1.30, `keepalive` wrap `notify`) would otherwise wrap the caller's,
    /// and call it with its inner balancer's data (a worker crash with
    /// `sticky learn ... header`).
    pub(super) fn clear(pc: &mut ngx_peer_connection_t) {
        Inner {
            data: core::ptr::null_mut(),
            get: None,
            free: None,
            notify: None,
            set_session: None,
            save_session: None,
        }
        .put_back(pc);
    }

    /// The inner balancer's `free`, with its own data.
    pub(super) fn free(&self, pc: *mut ngx_peer_connection_t, state: ngx_uint_t) {
        if let Some(free) = self.free {
            // SAFETY: the inner free with its own data, on the live peer
            // connection its get last filled.
            unsafe { free(pc, self.data, state) };
        }
    }

    /// Points every callback but `get` at the pass-throughs.
    pub(super) fn install_pass_through(&self, pc: &mut ngx_peer_connection_t) {
        pc.free = Some(free_peer);
        // NULL stays NULL: callers test it before calling.
        pc.notify = self.notify.and(Some(notify_peer));
        pc.set_session = Some(set_session);
        pc.save_session = Some(save_session);
    }
}

/// The Head at the start of the wrapper's state.
///
/// # Safety
/// `data` is the `pc->data` the wrapper installed: a `PeerData`, whose
/// first field is its `Head` (`#[repr(C)]`), live in the request pool, and
/// no other reference to it is alive (nginx calls one callback at a time).
unsafe fn head<'a>(data: *mut c_void) -> &'a mut Head {
    // SAFETY: per the contract.
    unsafe { &mut *(data as *mut Head) }
}

/// The Inner at the start of the wrapper's state.
///
/// # Safety
/// As for [`head`].
unsafe fn inner<'a>(data: *mut c_void) -> &'a Inner {
    // SAFETY: per the contract.
    unsafe { &head(data).inner }
}

unsafe extern "C" fn free_peer(
    pc: *mut ngx_peer_connection_t,
    data: *mut c_void,
    state: ngx_uint_t,
) {
    // SAFETY: nginx calls free with the data we installed.
    let head = unsafe { head(data) };
    // SAFETY: the live peer connection nginx passed, read before the inner
    // free runs.
    let log = unsafe { (*pc).log };
    // Under every debug mask: this callback does not know its protocol.
    ngx_log_debug!(log, "generation_retry: free peer, state {state}");
    let passed_over = state & (NGX_PEER_FAILED | NGX_PEER_NEXT) as ngx_uint_t;
    if passed_over != 0 {
        // SAFETY: as above; no other reference to *pc is alive here.
        head.history.record(unsafe { &*pc }, state);
    }
    head.inner.free(pc, state);
}

unsafe extern "C" fn notify_peer(
    pc: *mut ngx_peer_connection_t,
    data: *mut c_void,
    kind: ngx_uint_t,
) {
    // SAFETY: as in free_peer.
    let inner = unsafe { inner(data) };
    if let Some(notify) = inner.notify {
        // SAFETY: the inner callback with its own data.
        unsafe { notify(pc, inner.data, kind) };
    }
}

unsafe extern "C" fn set_session(pc: *mut ngx_peer_connection_t, data: *mut c_void) -> ngx_int_t {
    // SAFETY: as in free_peer.
    let inner = unsafe { inner(data) };
    match inner.set_session {
        // SAFETY: the inner callback with its own data.
        Some(f) => unsafe { f(pc, inner.data) },
        None => Status::NGX_OK.into(),
    }
}

unsafe extern "C" fn save_session(pc: *mut ngx_peer_connection_t, data: *mut c_void) {
    // SAFETY: as in free_peer.
    let inner = unsafe { inner(data) };
    if let Some(f) = inner.save_session {
        // SAFETY: the inner callback with its own data.
        unsafe { f(pc, inner.data) };
    }
}
