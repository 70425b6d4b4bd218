//! The postconfiguration of each protocol's block: wrap the `peer.init` of
//! every upstream the directive applies to, and register the protocol with
//! the counters zone, which gives each wrapped upstream its slot.

use core::ffi::{c_void, CStr};
use core::ptr;

use generation_retry_core::directive::DIRECTIVE;
use generation_retry_core::log;
use generation_retry_core::metrics::UpstreamStats;
use ngx::core::Status;
use ngx::ffi::{ngx_conf_t, ngx_int_t, NGX_LOG_WARN};
use ngx::ngx_log_error;

use crate::conf::{MainConf, SrvConf};
use crate::ffi_ext::{conf_slot, module_ctx_index};
use crate::peer;
use crate::proto::{generation, peer_counts, upstream_name, InitPeer, Proto};
use crate::shm::{self, Assigner, Registration};

/// Runs once per `http` or `stream` block, after every upstream's
/// `init_upstream`, so the wrapper ends up outermost whatever the directive
/// order and whichever balancer or keepalive sits inside.
///
/// # Safety
/// Called from the protocol's postconfiguration handler with its `cf`.
pub(crate) unsafe fn postconfiguration<P: Proto>(cf: &mut ngx_conf_t) -> ngx_int_t {
    // SAFETY: per the contract, cf->ctx is a context of this protocol's
    // block (or of one of its servers, which share the block's main_conf).
    let (main_conf, _) = unsafe { P::conf_ctx(cf) };
    // SAFETY: main_conf has a slot for every module of the protocol; ours
    // holds a MainConf<P>.
    let mcf = unsafe { (conf_slot(main_conf, P::module()) as *mut MainConf<P>).as_mut() };
    let Some(mcf) = mcf else {
        return Status::NGX_ERROR.into();
    };
    let top_level = mcf.top_level;
    // Whether the top-level setting reached an upstream.
    let mut top_level_used = false;
    if let Some(index) = module_ctx_index(cf, P::UPSTREAM_MODULE) {
        // SAFETY: main_conf has a slot per module of the protocol; the
        // upstream module's holds its main conf.
        mcf.upstreams = unsafe { *main_conf.add(index) }.cast();
    }

    for &us in mcf.upstreams() {
        // SAFETY: every element is a live upstream block of this cycle, and
        // nothing else uses it during postconfiguration.
        let us = unsafe { &mut *us };
        let has_zone = !P::shm_zone(us).is_null();
        let original = *P::peer_init(us);
        // Implicit upstreams (proxy_pass host:port) have no srv_conf.
        let Some(own) = SrvConf::<P>::of(us).map(|c| c.resnapshot) else {
            continue;
        };
        let effective = match (own, has_zone) {
            (Some(_), false) => {
                warn_no_zone::<P>(cf, us);
                None
            }
            (Some(own), true) => Some(own),
            (None, true) => {
                top_level_used = true;
                top_level
            }
            (None, false) => None,
        };
        if effective.is_some() && original.is_some() {
            if let Some(conf) = SrvConf::<P>::of_mut(us) {
                let wrapper: InitPeer<P> = Some(peer::init_peer::<P>);
                conf.active = effective;
                conf.original_init = original;
                conf.wrapper_init = wrapper;
                *P::peer_init(us) = wrapper;
            }
        }
    }

    if top_level.is_some() && !top_level_used {
        let at = mcf.top_level_at;
        let message = log::top_level_unused(DIRECTIVE, P::PROTOCOL, &at.file(), at.line());
        ngx_log_error!(NGX_LOG_WARN, cf.log, "{message}");
    }

    let registration = Registration {
        conf: ptr::from_mut(mcf).cast(),
        assign: assign_slots::<P>,
        collect: collect::<P>,
    };
    match shm::register(cf, P::PROTOCOL, registration) {
        Some(zone) => {
            mcf.shm_zone = zone;
            Status::NGX_OK.into()
        }
        None => Status::NGX_ERROR.into(),
    }
}

/// Gives each wrapped upstream its counters slot.
///
/// # Safety
/// `conf` is the MainConf<P> registered for this cycle; called in the
/// master from the zone's init, while nothing else uses the upstreams;
/// `assigner` is the zone's, for this cycle.
unsafe fn assign_slots<P: Proto>(conf: *mut c_void, assigner: &mut Assigner) {
    // SAFETY: per the contract.
    let Some(mcf) = (unsafe { (conf as *const MainConf<P>).as_ref() }) else {
        return;
    };
    for &us in mcf.upstreams() {
        // SAFETY: as in postconfiguration.
        let us = unsafe { &mut *us };
        // A copy of the name's ngx_str_t: its bytes live as long as the cycle.
        let host = *P::host(us);
        if let Some(conf) = SrvConf::<P>::of_mut(us) {
            if conf.active.is_some() {
                conf.slot = assigner.slot_for(P::PROTOCOL, host.as_bytes());
            }
        }
    }
}

/// Every wrapped upstream of the cycle with its counters and live gauges.
///
/// # Safety
/// `conf` is the MainConf<P> registered for the running cycle.
unsafe fn collect<P: Proto>(conf: *mut c_void, out: &mut Vec<UpstreamStats>) {
    // SAFETY: per the contract.
    let Some(mcf) = (unsafe { (conf as *const MainConf<P>).as_ref() }) else {
        return;
    };
    for &us in mcf.upstreams() {
        // SAFETY: upstream blocks of the running cycle.
        let us = unsafe { &*us };
        let Some(conf) = SrvConf::<P>::of(us) else {
            continue;
        };
        let (Some(active), Some(slot)) = (conf.active, conf.slot()) else {
            continue;
        };
        let (primary, backup) = peer_counts::<P>(us);
        out.push(UpstreamStats {
            name: upstream_name::<P>(us),
            protocol: P::PROTOCOL,
            rescue: active.enabled,
            counters: slot.snapshot(),
            generation: generation::<P>(us) as u64,
            peers: (primary + backup) as u64,
        });
    }
}

fn warn_no_zone<P: Proto>(cf: &ngx_conf_t, us: &P::Upstream) {
    let (file, line) = P::file_line(us);
    let file = if file.is_null() {
        "?".into()
    } else {
        // SAFETY: file_name is the NUL-terminated path of the file that
        // declared the upstream, kept for the life of the cycle.
        unsafe { CStr::from_ptr(file) }.to_string_lossy()
    };
    let name = upstream_name::<P>(us);
    let message = log::no_zone(DIRECTIVE, P::PROTOCOL, &name, &file, line);
    ngx_log_error!(NGX_LOG_WARN, cf.log, "{message}");
}
