//! The HTTP race scenario most tests start: an nginx proxying to
//! `server app.test:P resolve;` in a zone, the DNS server answering for
//! app.test, and the two-address backend.
//!
//! `spec` says what to start ([`Spec`], the configuration template);
//! `lab` starts it and waits until nginx holds the name's address
//! ([`Lab`]); `race` runs the scripted race and its kin on it ([`Race`]);
//! `grpc` races gRPC calls ([`GrpcLab`]); `checks` holds a run to what it
//! must show; `status` reads the module's status endpoint.

mod checks;
mod grpc;
mod lab;
mod race;
mod spec;
mod status;
#[cfg(test)]
mod tests;

pub use grpc::{GrpcLab, DEAD, GRPC_SERVERS};
pub use lab::Lab;
pub use race::{Flip, Race};
pub use spec::{
    patched_rescue_line, Ready, Spec, NAME, PROXY_HTTP, SINGLE_PEER_SERVERS, TWO_PEERS_SERVERS,
};
pub use status::{status_object, wait_peers};
