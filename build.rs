//! Forwards what nginx-sys learned about the nginx tree (its features, OS and
//! version, exported as `DEP_NGINX_*` because nginx-sys declares
//! `links = "nginx"`) to the module's compilation as `cfg`s, so code can depend
//! on how the target nginx was configured instead of guessing.

use std::env;

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
