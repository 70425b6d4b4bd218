//! `cargo xtask <command>`: the project's build and test entry points, in
//! plain Rust (the matklad xtask pattern), so there is no shell to learn.
//! Its neighbours: the nginx module it builds, installs and mutates (the
//! root package and `module/core`, whose counters the mutation catalogue
//! is held to), the test bench `t/` whose tests and binaries it runs
//! against those builds (never compiled into xtask, but for the one
//! dependency-free file `t/src/memcheck.rs`: the operator's `install`
//! compiles xtask alone), and `diagnose/`, whose unit tests
//! `nginx-test` runs. This file holds the command line (clap: each
//! command's options are declared by its module) and dispatches: each
//! command is its own module.
//!
//! - `build`: nginx and the module, installed at fixed paths under
//!   `target/nginx/VERSION/`, for 1.28.0 or any version of the matrix
//!   (`--nginx VERSION|all`, `--nginx-source PATH`).
//! - `nginx-test`: `build` and `external`'s builds, then the unit tests and
//!   the integration suite; `--nginx all` adds every other version's
//!   matrix tests and the Debian package (what CI runs).
//! - `install`, `uninstall`: the operator's commands, the module built for
//!   the nginx binary named and installed beside it, or taken out.
//! - `debian`: the module built Debian's way from `nginx-dev`, packaged as
//!   a `.deb`, and tested inside Debian's own nginx.
//! - `dist`: the source release for packagers, every crate vendored, as
//!   pkg-oss and Debian build Rust modules (offline).
//! - `external`: the module built against nginx trees of other
//!   configurations (`NGINX_BUILD_DIR`, `--add-dynamic-module`), then the
//!   tests that load them.
//! - `valgrind`: the race scenarios and a short lab with nginx under
//!   valgrind memcheck (`nginx-test` runs a subset).
//! - `check`: rustfmt and clippy over the workspace, and the patch series
//!   (CI runs it first).
//! - `docs`: the docs' tables of nginx versions, written from the matrix.
//! - `patches`: every tree's core patch series, made from the canonical one.
//! - `mutants`: the mutation check: small deliberate faults in the module
//!   and the patches, one at a time, each built and tested in a copy of the
//!   repository; every one must be caught.
//! - `lab`, `bench`, `soak`, `fuzz`: the test bench's own binaries
//!   (`bins.rs`).
//!
//! The modules use one another one way only (`layers.rs` keeps it so):
//! `nginx_test` > `suite`; `nginx_test`, `mutants` > `debian`, `valgrind`,
//! `external`, `install`, `dist`, `bins` > `build` > `patched`,
//! `versions`, `prereq`, `test_wrap` > `source` > `tree` > `workspace`;
//! `harness` (running the test crate) uses `source` and `workspace`,
//! `check` > `docs` > `versions`.

// First: its `err!` is every module's.
#[macro_use]
mod workspace;
mod bins;
mod build;
mod check;
mod debian;
mod dist;
mod docs;
mod external;
mod harness;
mod install;
// The harness's memcheck log reader, one source for the tests and for
// `cargo xtask valgrind` (which only reads logs: the rest is unused here).
#[allow(dead_code)]
#[path = "../../t/src/memcheck.rs"]
mod memcheck;
mod mutants;
mod nginx_test;
mod patched;
mod patches;
mod prereq;
mod source;
mod suite;
mod test_wrap;
mod tree;
// What nginx speaks from a version on, one source for the tests and for
// the runner, which reports their tests as not run on an older nginx.
#[path = "../../t/src/since.rs"]
mod since;
mod valgrind;
mod versions;

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

use versions::Which;

/// `cargo xtask <command>`: the project's build and test entry points
/// (CONTRIBUTING.md); `cargo xtask help` lists every command and option.
#[derive(Parser, Debug)]
#[command(bin_name = "cargo xtask", flatten_help = true, max_term_width = 100)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// build nginx, the patched nginx and the module into target/nginx/VERSION/; with
    /// --for NGINX_BINARY only the module, for that binary's version and flags, proven
    /// to load into it with nginx -t (the other options then install's)
    #[command(verbatim_doc_comment)]
    Build {
        #[arg(long, value_name = "VERSION|all", value_parser = versions::which,
              help = versions::nginx_help(), conflicts_with = "binary")]
        nginx: Option<Which>,
        #[command(flatten)]
        install: install::Args,
    },
    /// build, then run the unit tests and the nginx integration suite; `--nginx all` is
    /// CI's run: the whole suite on the default version, the matrix tests on every
    /// other version, and Debian
    #[command(verbatim_doc_comment)]
    NginxTest {
        #[command(flatten)]
        nginx: versions::Nginx,
        /// after `--`, to the test binaries: a filter of test paths, `race::` or
        /// `--exact race::NAME`
        #[arg(last = true, value_name = "ARGS")]
        extra: Vec<String>,
    },
    /// build, then only nginx's own test suite (nginx-tests: upstream, proxy and stream
    /// proxy files), four ways: stock, module on, patched, and the race on stock (the
    /// suite from the mirror or GENERATION_RETRY_NGINX_TESTS=DIR)
    #[command(verbatim_doc_comment)]
    NginxTests {
        #[command(flatten)]
        nginx: versions::Nginx,
    },
    /// the operator's command: build the module for the nginx binary named and install it
    /// beside that nginx, proven with its nginx -t
    #[command(verbatim_doc_comment, mut_arg("binary", |a| a.required(true)))]
    Install(install::Args),
    /// take out what install made (--for NGINX_BINARY [--prefix DIR] [--dry-run])
    #[command(mut_arg("binary", |a| a.required(true)))]
    Uninstall(install::Args),
    /// build the module from Debian's nginx-dev as Debian builds modules, package
    /// target/debian/libnginx-mod-http-generation-retry_*.deb and run the races in
    /// Debian's own nginx
    #[command(verbatim_doc_comment)]
    Debian(debian::Args),
    /// the source release for packagers: target/dist/generation-retry-VERSION.tar.gz (and
    /// .sha256), the module with every crate in vendor/, built offline by ./configure
    /// --add-dynamic-module and make modules
    #[command(verbatim_doc_comment)]
    Dist(dist::Args),
    /// build nginx with other flags and the module against it (NGINX_BUILD_DIR,
    /// --add-dynamic-module) into target/nginx/DEFAULT/external/, then run the suite's
    /// `external` module
    #[command(verbatim_doc_comment)]
    External {
        /// to the test binaries (after an optional `--`)
        #[arg(
            value_name = "ARGS",
            allow_hyphen_values = true,
            trailing_var_arg = true
        )]
        extra: Vec<String>,
    },
    /// build, then stock nginx beside nginx with the module under the same load and
    /// faults (one nginx)
    #[command(verbatim_doc_comment)]
    Lab(bins::Harness),
    /// build, then stock vs module on vs module off: throughput and latency ratios, and
    /// the cost of a rescue; `--churn` instead: 40 and 1,000 upstreams with moving
    /// names, stock vs module on vs patched
    #[command(verbatim_doc_comment)]
    Bench(bins::Harness),
    /// build, then ten minutes of 40 moving names under load with reloads every 2 s, one
    /// USR2 upgrade and one worker killed: 0 generation 502s, memory flat after the
    /// warm-up, counters equal to the access log (not in CI; --seconds N, --upstreams N)
    #[command(verbatim_doc_comment)]
    Soak(bins::Harness),
    /// build, then the race scenarios (every balancer row) and a short lab with nginx
    /// under valgrind memcheck
    #[command(verbatim_doc_comment)]
    Valgrind {
        /// nginx-test's subset
        #[arg(long)]
        ci: bool,
    },
    /// cargo fmt --all --check, then cargo clippy --workspace --all-targets -- -D
    /// warnings, then every tree's patch series against its regeneration (patches
    /// --check), the sizes, the docs' generated tables; fails if any does (CI runs it
    /// first)
    #[command(verbatim_doc_comment)]
    Check,
    /// rewrite the tables of nginx versions in README.md and docs/versions.md from
    /// xtask/src/versions.rs (what check holds them to)
    #[command(verbatim_doc_comment)]
    Docs,
    /// make every tree's nginx-src-patches/TREE/ from the canonical series
    /// (nginx-src-patches/1.31.4/) and deltas/
    #[command(verbatim_doc_comment)]
    Patches(patches::Args),
    /// build, then apply each mutant (a small deliberate fault in the module or a patch)
    /// to a copy in target/mutants/, build it and run the tests that should catch it; a
    /// table, and failure if any is missed
    #[command(verbatim_doc_comment)]
    Mutants(mutants::Args),
    /// generated inputs through every parser and renderer that meets outside input (the
    /// directive, the status query, the Prometheus and JSON renderers, diagnose's log
    /// readers), each checked against what it must answer; no nginx needed
    #[command(verbatim_doc_comment, disable_help_flag = true)]
    Fuzz {
        /// the fuzz binary's: --inputs N (default 1000000), --seed S, --target NAME;
        /// failures saved in target/fuzz/failures/
        #[arg(
            value_name = "ARGS",
            allow_hyphen_values = true,
            trailing_var_arg = true
        )]
        args: Vec<String>,
    },
}

fn main() -> ExitCode {
    let Some(command) = Cli::parse().command else {
        let _ = Cli::command().print_help();
        return ExitCode::SUCCESS;
    };
    let result = match command {
        Command::Build { nginx, install } if install.for_binary.is_none() => {
            versions::selection(nginx.as_ref(), install.source.user.as_deref())
                .and_then(|sel| build::build_selection(&sel))
                .map(drop)
        }
        Command::Build { install, .. } => install::build_for(install),
        Command::NginxTest { nginx, extra } => nginx
            .selection()
            .and_then(|sel| nginx_test::command(&sel, &extra)),
        Command::NginxTests { nginx } => nginx.selection().and_then(|sel| suite::command(&sel)),
        Command::Install(a) => install::install(a),
        Command::Uninstall(a) => install::uninstall(a),
        Command::Debian(a) => debian::command(&a),
        Command::Dist(a) => dist::command(&a),
        Command::External { extra } => external::command(&extra),
        Command::Lab(a) => bins::harness_bin("lab", &a),
        Command::Bench(a) => bins::harness_bin("bench", &a),
        Command::Soak(a) => bins::harness_bin("soak", &a),
        Command::Valgrind { ci } => valgrind::valgrind(ci),
        Command::Check => check::command(),
        Command::Docs => docs::command(),
        Command::Patches(a) => patches::command(&a),
        Command::Mutants(a) => mutants::command(&a),
        Command::Fuzz { args } => bins::fuzz(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("xtask: error: {err}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod layers;
#[cfg(test)]
mod tests;
