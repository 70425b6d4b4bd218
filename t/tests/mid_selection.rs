//! Tests that stop an nginx worker in the middle of a peer selection with
//! gdb ([`generation_retry_t::nginx::gdb`]), to reach what timing cannot.
//!
//! `max=N`: the list keeps moving while a request re-snapshots. With two
//! workers, worker 0 re-resolves the name (nginx gives every `resolve`
//! server to worker 0) while worker 1 serves the race; gdb stops worker 1
//! at the selection on its fresh snapshot, the DNS flips again, worker 0
//! applies it, and worker 1 goes on to find its fresh snapshot already
//! old. With `max=1` that is the end (502, `failed`, cause `generation`,
//! the "still moving" line); with `max=2` the same sequence is rescued by
//! a second re-snapshot. Real nginx, real resolver, no timing: the window
//! nginx leaves open for microseconds is held open by the breakpoint.
//!
//! The tests, by what they prove:
//! - [`max`]: `max=N` is how many times a moving list is followed;
//! - [`first_selection`]: a change at a request's first selection, or
//!   during the balancer's own `peer.init`;
//! - [`balancer_errors`]: a failed re-init and an error from the fresh
//!   selection, answered as nginx answers them;
//! - [`killed_worker`]: a worker SIGKILLed while held inside a rescue;
//! - [`full_zone`]: no room in the zone for a reload's new upstream;
//! - [`single_peer`]: a list that shrinks to the tried peer between a
//!   failed attempt's free and the retry's selection;
//!
//! and [`common`], the two-worker nginx, its DNS and gdb, that they share.

mod balancer_errors;
mod common;
mod first_selection;
mod full_zone;
mod killed_worker;
mod max;
mod single_peer;
