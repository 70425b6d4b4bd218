//! Angie (`cargo xtask nginx-test --nginx angie-1.12.1`): its race is
//! rescued by `nginx-src-patches/angie-1.12.1/` (the race and patched
//! tests run against its binaries), but no module on ngx 0.5 can be built
//! for it: nginx-sys 0.5.0's module structure names nginx's `spare1`,
//! which Angie calls `angie_sign`. This test builds the module against the
//! Angie tree the matrix configured and checks that error. The day it
//! builds (a newer ngx, or Angie's structure), this test fails and says
//! so: then the module joins Angie's matrix.

use generation_retry_t::nginx::{install_dir, module_build};

/// Non-regression guard: a build check of ngx 0.5 against Angie; no
/// module runs.
#[test]
fn ngx_0_5_cannot_build_for_angie_yet() {
    let objs = install_dir().join("stock-build/src/objs");
    if !objs.join("../src/core/angie.h").is_file() {
        // On nginx the same build is what every version's module is.
        assert!(
            install_dir()
                .join("modules/ngx_http_upstream_generation_retry_module.so")
                .is_file(),
            "not Angie, and no module built for {}",
            install_dir().display()
        );
        return;
    }
    let out = module_build(&objs)
        .env_remove("NGINX_SOURCE_DIR")
        .output()
        .expect("run cargo");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "the module now builds against Angie: add it to Angie's tests (README, Tengine and \
         Angie) and drop this check"
    );
    assert!(
        said.contains("spare1") && said.contains("ngx_module_s"),
        "the build against Angie failed otherwise than on the module structure:\n{said}"
    );
}
