//! The layout gate: the C compiler, with the nginx tree's own compiler and
//! flags, says where every field of every nginx structure the module names
//! lies, and the module's compilation asserts that bindgen's structures
//! agree (`const` assertions over `size_of`, `align_of` and `offset_of!`).
//! For bitfields, the bit the C compiler gives each one the module calls an
//! accessor of is compared with the bit bindgen's accessor reads. A
//! difference fails the build, naming the structure and the field.
//!
//! Why: bindgen 0.72 (nginx-sys 0.5) places `ngx_http_request_t`'s
//! bitfields from `uri_changes` on two bits early in nginx 1.29.3+ trees
//! (rust-bindgen #3384). A tree nobody checked by hand (the next nginx, a
//! fork, a distribution's headers) is checked here, at every build.
//!
//! What "names" means: the structures are the `ngx_*_t` / `ngx_*_s` types
//! the module's sources spell, and every structure with a bitfield of a
//! name the sources call an accessor of (`.NAME()`, `.set_NAME(`,
//! `T::NAME(`, `T::NAME_raw(`, `T::set_NAME_raw(`); the bitfields checked
//! are those called. An accessor called on an nginx structure it names
//! (`ngx_peer_connection_t::cached(pc)`) checks that structure's bitfield
//! alone: `ngx_http_request_t`'s `cached`, which bindgen misplaces on
//! 1.29.3+, is not the peer connection's. A wrapper of the ngx crate that touches a bitfield
//! under another name (`Request::subrequest`) is not seen: clippy.toml
//! forbids the ones that touch a misplaced one. Every
//! plain field of a named structure is checked, used or not: a structure
//! bindgen gets wrong anywhere is not trusted.
//!
//! The parts, one job each (under `build/layout/`): [`toolchain`] (the
//! tree's compiler and nginx-sys's bindings), [`scan`] (what the module's
//! sources name and call), [`c_types`] and [`rust_types`] (the structures
//! as the C compiler and as bindgen see them), [`select`] (which are
//! checked), [`probe`] (the C program printing the C layout) and
//! [`compare`] (the assertions and the report).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::{env, fs};

#[path = "layout/c_types.rs"]
mod c_types;
#[path = "layout/compare.rs"]
mod compare;
#[path = "layout/probe.rs"]
mod probe;
#[path = "layout/rust_types.rs"]
mod rust_types;
#[path = "layout/scan.rs"]
mod scan;
#[path = "layout/select.rs"]
mod select;
#[path = "layout/toolchain.rs"]
mod toolchain;

use c_types::{CTypes, Member};
use rust_types::{RustStruct, RustTypes};
use toolchain::{bindings, compiler, path_str, run};

/// What the gate checked, for the build's report.
pub struct Checked {
    pub structs: usize,
    pub fields: usize,
    pub bitfields: usize,
    /// Bitfields of those structures the module calls no accessor of:
    /// listed with both positions in `layout-report.txt` (OUT_DIR), not
    /// asserted (bindgen misplaces many of `ngx_http_request_t`'s on 1.29+).
    pub uncalled: usize,
}

/// A structure the gate checks: its name as checked, the C expression of
/// its type, the Rust structure whose fields and accessors bindgen
/// generated, and its members as the C compiler sees them.
type Structure<'r> = (String, String, &'r RustStruct, Vec<Member>);

/// Runs the gate for the tree nginx-sys bound to and writes
/// `OUT_DIR/layout.rs` (the assertions). `Err` says why it could not run.
pub fn gate(sources: &Path, out: &Path) -> Result<Checked, String> {
    let build_dir = env::var("DEP_NGINX_BUILD_DIR")
        .map_err(|_| "nginx-sys exported no build_dir (DEP_NGINX_BUILD_DIR)".to_owned())?;
    let build_dir = PathBuf::from(build_dir);
    let includes: Vec<PathBuf> = env::var_os("DEP_NGINX_INCLUDE")
        .map(|v| env::split_paths(&v).collect())
        .unwrap_or_default();
    let defines: Vec<String> = env::var("DEP_NGINX_CFLAGS")
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    let features = env::var("DEP_NGINX_FEATURES").unwrap_or_default();
    let has = |f: &str| features.split(',').any(|x| x.trim() == f);
    let (cc, cflags) = compiler(&build_dir.join("Makefile"));

    let mut headers = String::from(
        "#include <ngx_config.h>\n#include <ngx_core.h>\n#include <ngx_event.h>\n\
         #include <ngx_event_connect.h>\n",
    );
    if has("http") {
        headers.push_str("#include <ngx_http.h>\n");
    }
    if has("stream") {
        headers.push_str("#include <ngx_stream.h>\n");
    }

    // nginx's make runs the compiler in the source root: paths in its
    // CFLAGS are relative to it.
    let source_root = build_dir.parent().unwrap_or(&build_dir).to_path_buf();
    let cc_cmd = |args: &[&str]| {
        let mut c = Command::new(&cc[0]);
        c.current_dir(&source_root);
        c.args(&cc[1..]).args(&cflags).arg("-w");
        c.args(includes.iter().map(|i| format!("-I{}", i.display())));
        c.args(&defines).args(args);
        c
    };

    let pre = out.join("layout-headers.c");
    fs::write(&pre, &headers).map_err(|e| format!("{}: {e}", pre.display()))?;
    let expanded = run(
        cc_cmd(&["-E", path_str(&pre)?]),
        "preprocess nginx's headers",
    )?;
    let c = CTypes::parse(&expanded);

    let bindings_path = bindings(out, &build_dir)?;
    let bindings = fs::read_to_string(&bindings_path)
        .map_err(|e| format!("{}: {e}", bindings_path.display()))?;
    let rust = RustTypes::parse(&bindings);

    if rust.structs.is_empty() {
        return Err(format!(
            "no structure read from {}: bindings not in the layout this reads \
             (one item per line, as rustfmt leaves them)",
            bindings_path.display()
        ));
    }
    let (named, mut called) = scan::scan(sources)?;
    // Names checked as if the module called their accessors: a knob that
    // can only add checks, for the test that shows the gate failing a
    // build (t/tests/layout.rs).
    println!("cargo::rerun-if-env-changed=GENERATION_RETRY_LAYOUT_GATE_CALLED");
    if let Ok(extra) = env::var("GENERATION_RETRY_LAYOUT_GATE_CALLED") {
        called.extend(
            extra
                .split(',')
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(str::to_owned),
        );
    }
    let structs = select::structures(&c, &rust, named, &called)?;

    let probe = probe::source(&headers, &structs);
    let probe_c = out.join("layout-probe.c");
    let probe_bin = out.join("layout-probe");
    fs::write(&probe_c, &probe).map_err(|e| format!("{}: {e}", probe_c.display()))?;
    run(
        cc_cmd(&[path_str(&probe_c)?, "-o", path_str(&probe_bin)?]),
        "compile the layout probe",
    )?;
    let facts = run(Command::new(&probe_bin), "run the layout probe")?;

    let cc_name = cc.join(" ");
    let (asserts, report, checked) = compare::judge(&facts, &structs, &called, &cc_name)?;
    fs::write(out.join("layout.rs"), asserts).map_err(|e| format!("layout.rs: {e}"))?;
    fs::write(out.join("layout-report.txt"), report).map_err(|e| format!("report: {e}"))?;
    Ok(checked)
}
