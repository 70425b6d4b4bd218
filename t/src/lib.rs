//! The integration harness: each piece real and named after what it stands
//! in for. [`nginx`] runs nginx 1.28.0, [`dns`] is the GSLB, [`backend`] the
//! application servers, [`load`] the clients; [`accesslog`] and [`errorlog`]
//! read what nginx wrote.

pub mod accesslog;
pub mod backend;
pub mod dns;
pub mod errorlog;
pub mod lab;
pub mod load;
pub mod memcheck;
pub mod nginx;
pub mod rng;
pub mod scenario;
pub mod stream;
