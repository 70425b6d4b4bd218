//! Forwards what nginx-sys learned about the nginx tree (its features, OS and
//! version, exported as `DEP_NGINX_*` because nginx-sys declares
//! `links = "nginx"`) to the module's compilation as `cfg`s, so code can depend
//! on how the target nginx was configured instead of guessing.

use std::env;
use std::path::PathBuf;

#[path = "build/layout.rs"]
mod layout;

fn forward_list(var: &str, check_var: &str, cfg: &str) {
    println!("cargo::rerun-if-env-changed={var}");
    println!("cargo::rerun-if-env-changed={check_var}");
    let values = env::var(check_var).unwrap_or_else(|_| "any()".to_owned());
    println!("cargo::rustc-check-cfg=cfg({cfg}, values({values}))");
    if let Ok(list) = env::var(var) {
        for value in list.split(',').map(str::trim).filter(|v| !v.is_empty()) {
            println!("cargo::rustc-cfg={cfg}=\"{value}\"");
        }
    }
}

fn main() {
    layout_gate();
    forward_list(
        "DEP_NGINX_FEATURES",
        "DEP_NGINX_FEATURES_CHECK",
        "ngx_feature",
    );
    forward_list("DEP_NGINX_OS", "DEP_NGINX_OS_CHECK", "ngx_os");

    // The stream module needs nginx's stream upstreams with their zone (the
    // generation counter lives there); against an nginx without them it is
    // left out and the shared object holds the http module alone.
    println!("cargo::rustc-check-cfg=cfg(generation_retry_stream)");
    let features = env::var("DEP_NGINX_FEATURES").unwrap_or_default();
    let has = |f: &str| features.split(',').any(|x| x.trim() == f);
    if has("stream") && has("stream_upstream_zone") {
        println!("cargo::rustc-cfg=generation_retry_stream");
    }

    println!("cargo::rerun-if-env-changed=DEP_NGINX_VERSION_NUMBER");
    if let Ok(version) = env::var("DEP_NGINX_VERSION_NUMBER") {
        println!("cargo::rustc-env=GENERATION_RETRY_NGINX_VERSION_NUMBER={version}");
    }
    println!("cargo::rerun-if-env-changed=DEP_NGINX_BUILD_DIR");
    if let Ok(dir) = env::var("DEP_NGINX_BUILD_DIR") {
        println!("cargo::rustc-env=GENERATION_RETRY_NGINX_BUILD_DIR={dir}");
    }
}

/// The layout gate (build/layout.rs): the C compiler's layout of the
/// structures the module names, asserted against bindgen's in the module's
/// compilation. A difference fails the build naming the structure and field.
fn layout_gate() {
    println!("cargo::rerun-if-changed=build/layout.rs");
    println!("cargo::rerun-if-env-changed=GENERATION_RETRY_LAYOUT_GATE");
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    let skip = |why: &str| {
        println!("cargo::warning=layout gate skipped: {why}; bindgen's structures are unchecked against the C compiler");
        std::fs::write(out.join("layout.rs"), "// layout gate skipped\n").expect("layout.rs");
    };
    if env::var("GENERATION_RETRY_LAYOUT_GATE").as_deref() == Ok("off") {
        return skip("GENERATION_RETRY_LAYOUT_GATE=off");
    }
    if env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("msvc") {
        // The probe is built with the tree's GCC-style CC and CFLAGS.
        return skip("an MSVC target (the probe is built the GCC way)");
    }
    if env::var("TARGET").ok() != env::var("HOST").ok() {
        // The probe runs where it is built: a cross build cannot run it.
        return skip("cross build (the probe cannot run on the build host)");
    }
    let sources =
        PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("manifest dir")).join("module/src");
    match layout::gate(&sources, &out) {
        Ok(c) => {
            // For readers (and t/tests/layout.rs): what was compared.
            let summary = format!(
                "{} structures, {} fields, {} called bitfields checked; {} bitfields not called are compared only in layout-report.txt\n",
                c.structs, c.fields, c.bitfields, c.uncalled
            );
            std::fs::write(out.join("layout-summary.txt"), summary).expect("layout summary");
        }
        Err(e) => panic!(
            "layout gate: {e}\n(set GENERATION_RETRY_LAYOUT_GATE=off to build without it, unchecked)"
        ),
    }
}
