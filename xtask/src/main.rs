//! `cargo xtask <command>`: the project's build and test entry points, in
//! plain Rust (the matklad xtask pattern), so there is no shell to learn.
//! Its neighbours: the nginx module it builds, installs and mutates (the
//! root package and `module/core`, whose counters the mutation catalogue
//! is held to), the test bench `t/` whose tests and binaries it runs
//! against those builds (never compiled into xtask, but for the one
//! dependency-free file `t/src/memcheck.rs`: the operator's `install`
//! compiles xtask alone), and `diagnose/`, whose unit tests
//! `nginx-test` runs. This file only dispatches: each command is its own
//! module.
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
mod valgrind;
mod versions;
mod workspace;

use std::env;
use std::process::ExitCode;

use versions::DEFAULT;
use versions::MATRIX;

fn main() -> ExitCode {
    let args: Vec<String> = env::args().skip(1).collect();
    let (cmd, rest) = match args.split_first() {
        Some((cmd, rest)) => (cmd.as_str(), rest),
        None => ("help", &[][..]),
    };
    let result = match cmd {
        // `--for BINARY` is the operator's build: the module alone.
        "build" if rest.iter().any(|a| a == "--for" || a.starts_with("--for=")) => {
            install::build_for(rest)
        }
        // Their options, which `versions::parse` reads.
        "build" | "nginx-test" | "nginx-tests" if versions::help(cmd, rest) => Ok(()),
        "build" => build::command(rest),
        "check" => check::command(rest),
        "debian" => debian::command(rest),
        "docs" => docs::command(rest),
        "dist" => dist::command(rest),
        "install" => install::install(rest),
        "uninstall" => install::uninstall(rest),
        "nginx-test" => nginx_test::command(rest),
        "nginx-tests" => suite::command(rest),
        "external" => external::command(rest),
        "lab" => bins::harness_bin("lab", rest),
        "bench" => bins::harness_bin("bench", rest),
        "soak" => bins::harness_bin("soak", rest),
        "valgrind" => valgrind::valgrind(rest),
        "mutants" => mutants::command(rest),
        "patches" => patches::command(rest),
        "fuzz" => bins::fuzz(rest),
        "help" | "--help" | "-h" => {
            print_help();
            Ok(())
        }
        other => Err(format!("unknown command `{other}`; try `cargo xtask help`")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("xtask: error: {err}");
            ExitCode::FAILURE
        }
    }
}

fn print_help() {
    // One literal with real line breaks: a `\` line continuation would
    // swallow the option lines' indentation.
    println!(
        "\
cargo xtask <command>

build        build nginx, the patched nginx and the module into target/nginx/VERSION/
             --nginx VERSION|all   {versions} (default {DEFAULT})
             --nginx-source PATH   an nginx source tree or .tar.gz of your own
             --for NGINX_BINARY    only the module, for that binary's version and
                                   flags, proven to load into it with nginx -t
nginx-test   build, then run the unit tests and the nginx integration suite
             (same options; arguments after `--` go to the test binaries, e.g. a
             filter of test paths, `race::` or `--exact race::NAME`); `--nginx all` is CI's run: the whole suite on
             {DEFAULT}, the matrix tests on every other version, and Debian
nginx-tests  build, then only nginx's own test suite (nginx-tests: upstream,
             proxy and stream proxy files), four ways: stock, module on, patched,
             and the race on stock
             (same --nginx options; the suite from the mirror or
             GENERATION_RETRY_NGINX_TESTS=DIR)
install      the operator's command: build the module for the nginx binary named
             and install it beside that nginx, proven with its nginx -t
             --for NGINX_BINARY    required; --nginx-source PATH, --sha256 HEX,
                                   --signing-keys DIR, --prefix DIR, --dry-run,
                                   --edit-conf (`cargo xtask install --help`)
uninstall    take out what install made (--for NGINX_BINARY [--prefix DIR] [--dry-run])
debian       build the module from Debian's nginx-dev as Debian builds modules,
             package target/debian/libnginx-mod-http-generation-retry_*.deb and run
             the races in Debian's own nginx; `--suite sid` takes the current
             packages from Debian unstable instead of the mirror's debian-sid/,
             `--installed` this machine's nginx-dev and nginx; `--no-test`
             builds the .deb and runs nothing
dist         the source release for packagers: target/dist/generation-retry-VERSION.tar.gz
             (and .sha256), the module with every crate in vendor/, built offline
             by ./configure --add-dynamic-module and make modules; --out DIR
external     build nginx with other flags and the module against it (NGINX_BUILD_DIR,
             --add-dynamic-module) into target/nginx/{DEFAULT}/external/, then
             run the suite's `external` module
lab          build, then stock nginx beside nginx with the module under the same
             load and faults; `cargo xtask lab --help` for its options;
             --nginx VERSION and --nginx-source PATH as for build (one nginx)
bench        build, then stock vs module on vs module off: throughput and latency
             ratios, and the cost of a rescue; --nginx, --nginx-source as lab;
             `--churn` instead: 40 and 1,000 upstreams with moving names, stock
             vs module on vs patched (`cargo xtask bench --help` for options)
soak         build, then ten minutes of 40 moving names under load with reloads every
             2 s, one USR2 upgrade and one worker killed: 0 generation 502s, memory
             flat after the warm-up, counters equal to the access log (not in CI);
             --nginx VERSION, --seconds N, --upstreams N
valgrind     build, then the race scenarios (every balancer row) and a short lab
             with nginx under valgrind memcheck; `--ci` for nginx-test's subset
check        cargo fmt --all --check, then cargo clippy --workspace --all-targets
             -- -D warnings, then every tree's patch series against its regeneration
             (patches --check), the sizes, the docs' generated tables; fails if
             any does (CI runs it first)
docs         rewrite the tables of nginx versions in README.md and docs/versions.md
             from xtask/src/versions.rs (what check holds them to)
patches      make every tree's nginx-src-patches/TREE/ from the canonical series
             (nginx-src-patches/1.31.4/) and deltas/; --check, --derive TREE
             (`cargo xtask patches --help`)
mutants      build, then apply each mutant (a small deliberate fault in the module
             or a patch) to a copy in target/mutants/, build it and run the tests
             that should catch it; a table, and failure if any is missed
             --only NAME,...       only these mutants
             --list                list the mutants and their tests
fuzz         generated inputs through every parser and renderer that meets outside
             input (the directive, the status query, the Prometheus and JSON
             renderers, diagnose's log readers), each checked against what it must
             answer; no nginx needed. --inputs N (default 1000000), --seed S,
             --target NAME; failures saved in target/fuzz/failures/",
        versions = MATRIX.join(", ")
    );
}

#[cfg(test)]
mod layers;
