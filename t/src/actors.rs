//! What nginx talks to, each a real server standing in for one in
//! production: [`dns`] the GSLB, [`backend`] the HTTP application servers,
//! [`tcp`] the stream upstreams (an echo server, a black hole) and the
//! client sessions through nginx to them, [`load`] the HTTP clients and
//! their open- and closed-loop load, [`prometheus`] the real Prometheus
//! server and `promtool`, scraping the status endpoint.

pub mod backend;
pub mod dns;
pub mod load;
pub mod prometheus;
pub mod tcp;
