//! Angie (`cargo xtask nginx-test --nginx angie-1.12.1`): its race is
//! rescued by `nginx-src-patches/angie-1.12.1/` (the race, stream, protocol
//! and patched tests run against its binaries), but no module on ngx 0.5
//! can be built for it, for two reasons, each checked here against the
//! Angie tree the matrix configured:
//!
//! 1. nginx-sys 0.5.0's module structure names nginx's `spare1`, which
//!    Angie calls `angie_sign`. Generating the bindings with Angie's field
//!    under nginx's name (`BINDGEN_EXTRA_CLANG_ARGS=-Dangie_sign=spare1`,
//!    which bindgen honours) gets past that;
//! 2. then ngx 0.5.1's own logging does not compile: Angie's
//!    `ngx_log_error_core` takes the caller's source file name before the
//!    error number (`level, log, filename, err, fmt, ...`), and ngx calls
//!    it as nginx declares it. No define changes a function's arguments,
//!    and calling it with nginx's would pass the error number as a file
//!    name: only a change in ngx (or Angie) can fix this.
//!
//! The day either build succeeds, this test fails and says so: then the
//! module joins Angie's matrix.

use std::path::Path;
use std::process::Command;

use generation_retry_t::nginx::{install_dir, is_angie, module_build};
use generation_retry_t::scenarios::lab::{run_arm, Arm, Options};
use generation_retry_t::scenarios::labels::{score, Truth, MIN_SHARE};

/// The module's build against `objs` with `clang_args` for bindgen: its
/// failure's words, or a panic naming the step that now builds.
fn build_fails(objs: &Path, clang_args: Option<&str>, step: &str) -> String {
    let mut build = module_build(objs);
    build.env_remove("BINDGEN_EXTRA_CLANG_ARGS");
    if let Some(args) = clang_args {
        build.env("BINDGEN_EXTRA_CLANG_ARGS", args);
    }
    let out = build.output().expect("run cargo");
    assert!(
        !out.status.success(),
        "the module now builds against Angie ({step}): add it to Angie's tests \
         (docs/versions.md, Tengine and Angie) and drop this check"
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Every test here is Angie's: xtask runs this module only where a
/// selection names it (`harness::ANGIE_TESTS`), never in the whole suite.
fn on_angie() {
    assert!(
        is_angie(),
        "{}: not Angie; the angie module runs on Angie only",
        install_dir().display()
    );
}

/// Non-regression guard: the two build checks of ngx 0.5 against Angie; no
/// module runs.
#[test]
fn ngx_0_5_cannot_build_for_angie_yet() {
    on_angie();
    let objs = install_dir().join("stock-build/src/objs");
    let said = build_fails(&objs, None, "as is");
    assert!(
        said.contains("spare1") && said.contains("ngx_module_s"),
        "the build against Angie failed otherwise than on the module structure:\n{said}"
    );
    let said = build_fails(&objs, Some("-Dangie_sign=spare1"), "-Dangie_sign=spare1");
    assert!(
        said.contains("ngx_log_error_core") && said.contains("log.rs"),
        "with -Dangie_sign=spare1 the build against Angie failed otherwise than on \
         ngx's call of ngx_log_error_core:\n{said}"
    );
    assert!(
        !said.contains("spare1"),
        "-Dangie_sign=spare1 no longer renames the field:\n{said}"
    );
}

/// `generation-retry-diagnose` reads Angie's logs: the lab's stock arm on
/// stock Angie (its error log says `angie`, its race is nginx's), scored
/// against the arm's construction as `statistical.rs` scores stock nginx.
/// On nginx, `statistical.rs` is this check.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stock_angie_logs_are_diagnosed() {
    on_angie();
    let opts = Options::short();
    let r = run_arm(Arm::Stock, &opts, |_| {}).await;
    let mut failed = Arm::Stock.check(&r, &opts);
    let s = score(&r, Truth::ByConstruction);
    eprintln!("generation-retry-diagnose on Angie's {}", s.line());
    failed.extend(s.failures(MIN_SHARE));
    if s.total("generation-retry") == 0 {
        failed.push("no generation-retry 502 to place".to_string());
    }
    assert!(failed.is_empty(), "{failed:#?}");
}

/// `cargo xtask build --for` Angie's binary (as `install --for`) stops
/// before building, with both reasons and the patch that fixes Angie.
#[test]
fn angie_install_names_why_and_the_patch() {
    on_angie();
    let out = Command::new(env!("CARGO"))
        .args(["xtask", "build", "--for"])
        .arg(install_dir().join("stock/sbin/nginx"))
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
        .env_remove("RUSTFLAGS")
        .output()
        .expect("cargo xtask");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{said}");
    for words in [
        "angie_sign",
        "ngx_log_error_core",
        "nginx-src-patches/angie-1.12.1",
    ] {
        assert!(said.contains(words), "no {words:?} in:\n{said}");
    }
}
