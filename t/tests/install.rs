//! The operator's install, `cargo xtask install --for BINARY`, run as a new
//! user would: in a copy of the repository with no `../shared` beside it
//! and no mirror configured, against the real nginx of the version under
//! test, installed into a scratch prefix (`--prefix`). Its sources come from
//! crates.io (1.28.x, the `nginx-src` crate) or from a loopback HTTP server
//! standing in for nginx.org, serving the tarball with a detached signature
//! by a key this test makes (`--signing-keys`). Nothing but crates.io (for
//! the crate, as cargo fetches every crate) is reached: the download URL is
//! always the loopback server's, or a closed loopback port.
//!
//! The tests, by what they prove:
//! - [`before_build`]: what the install says, refuses or leaves alone
//!   before it builds anything (an nginx not affected, a binary without
//!   `--with-compat`, a tampered or wrongly signed tarball, a dry run);
//! - [`installed`]: the whole install into the real nginx under test, its
//!   roll-back when `nginx -t` fails, and the module of an older nginx
//!   replaced after an upgrade;
//! - [`conf`]: what it does to the configuration (the `include` printed or
//!   added with `--edit-conf`, `uninstall` leaving nothing it made, the
//!   production error log untouched by its `nginx -t` runs);
//! - [`edit`]: `--edit-conf` on a `modules-enabled/` layout behind a
//!   symlinked nginx.conf, and where the line cannot go before the blocks
//!   (they are in an included file);
//!
//! and what they share: [`common`], `cargo xtask` run in a clean copy and
//! the prefixes it installs into; [`release`], the stand-in for nginx.org
//! (a loopback server, a signing key, the release tarball).

mod before_build;
mod common;
mod conf;
mod edit;
mod installed;
mod release;
