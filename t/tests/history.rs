//! A rescued request keeps its history: a peer it tried before the
//! re-snapshot is not tried again on the fresh snapshot, whose own tried
//! bitmap is empty. The sharpest case is a POST retried under
//! `proxy_next_upstream ... non_idempotent`: sent to an address, failed,
//! and never to be sent to that address again.
//!
//! Each row: a static peer at [`ADDR_C`] with `weight=20` beside the
//! re-resolving name (or the name as a `backup`), `max_fails=0` on both, as
//! the README recommends for re-resolving names, so a failed peer stays
//! selectable. The POST's first attempt is held at [`ADDR_C`]; the name
//! flips; the backend closes the held connection. nginx retries, the
//! generation moved, the request takes a fresh snapshot, and there the
//! balancer prefers [`ADDR_C`] again (20 to 1, or the only primary): it
//! must be handed back and the new address taken. Without the history the
//! backend would receive the POST twice at [`ADDR_C`].
//!
//! For every balancer of nginx 1.28, with keepalive after the balancer,
//! before it (where nginx drops it), without it, with a backup server and
//! over TLS; for the module and for the patched nginx.
//!
//! The tests, by what they prove:
//! - [`every_balancer`]: the POST rows of every balancer, module and
//!   patched nginx;
//! - [`single_peer`]: the one exception, a list of one peer, retried;
//! - [`patched_hand_backs`]: the module in the patched nginx leaves the
//!   patch's hand-backs alone;
//! - [`dead_primary`]: a dead primary handed back is neither failed again
//!   nor revived;
//!
//! and [`common`], what they share.

mod common;
mod dead_primary;
mod every_balancer;
mod patched_hand_backs;
mod single_peer;
