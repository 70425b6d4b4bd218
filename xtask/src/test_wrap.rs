//! The test-only peer wrapper (`t/wrap/*.c`): a second module that wraps
//! every http upstream's `peer.init` after ours, as third-party balancer
//! modules do, so that `t/tests/module_behaviour.rs` can prove a re-snapshot
//! keeps the caller's chain. Compiled with nginx's own compiler, flags and
//! include paths (read from the tree's `objs/Makefile`) into the version's
//! `modules/`, beside the module; nothing installs it anywhere else.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::tree::copy_if_changed;
use crate::workspace::{root, run, At, Result};

/// The module's source, relative to the workspace root.
const SOURCE: &str = "t/wrap/ngx_http_generation_retry_test_wrap_module.c";

/// The shared object's name in `modules/` (`t/src/nginx/config.rs` loads it
/// by this name).
pub const FILE: &str = "ngx_http_generation_retry_test_wrap_module.so";

/// What `objs/Makefile` says about compiling a module: the compiler, its
/// flags, and the include directories (absolute).
#[derive(Debug, PartialEq)]
struct Compile {
    cc: String,
    cflags: Vec<String>,
    includes: Vec<PathBuf>,
}

/// Reads `CC`, `CFLAGS` and `ALL_INCS` of a configured tree's Makefile;
/// relative include directories are relative to `make_dir`, where make
/// runs (the source tree, or the configured copy of it).
fn parse_makefile(text: &str, make_dir: &Path) -> Option<Compile> {
    // Join continuation lines first: ALL_INCS spans many.
    let joined = text.replace("\\\n", " ");
    let value = |name: &str| {
        joined.lines().find_map(|l| {
            let (k, v) = l.split_once('=')?;
            (k.trim() == name).then(|| v.trim().to_string())
        })
    };
    let cc = value("CC")?;
    let cflags = value("CFLAGS")?
        .split_whitespace()
        .map(String::from)
        .collect();
    let includes = value("ALL_INCS")?
        .split_whitespace()
        .filter(|w| *w != "-I")
        .map(|d| {
            let d = Path::new(d.strip_prefix("-I").unwrap_or(d));
            if d.is_absolute() {
                d.to_path_buf()
            } else {
                make_dir.join(d)
            }
        })
        .collect();
    Some(Compile {
        cc,
        cflags,
        includes,
    })
}

/// Compiles the test wrapper against the configured tree whose `objs` is
/// given (make runs in `make_dir`) into `modules/` of the install.
pub fn build(objs: &Path, make_dir: &Path, modules: &Path) -> Result<PathBuf> {
    let makefile = objs.join("Makefile");
    let text = fs::read_to_string(&makefile).at(&makefile)?;
    let c = parse_makefile(&text, make_dir)
        .ok_or(format!("{}: no CC, CFLAGS or ALL_INCS", makefile.display()))?;
    let built = objs.join(FILE);
    let mut cmd = Command::new(&c.cc);
    cmd.args(&c.cflags).args(["-fPIC", "-shared"]);
    for dir in &c.includes {
        cmd.arg("-I").arg(dir);
    }
    cmd.arg("-o").arg(&built).arg(root().join(SOURCE));
    run(&mut cmd)?;
    let dest = modules.join(FILE);
    copy_if_changed(&built, &dest)?;
    Ok(dest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_makefile_says_how_to_compile() {
        let text = "\nCC =\tcc\nCFLAGS =  -pipe  -O -W -Werror -g \nCPP =\tcc -E\n\n\
                    ALL_INCS = -I src/core \\\n\t-I /abs/objs \\\n\t-I src/http\n\n\
                    CORE_DEPS = src/core/nginx.h \\\n";
        let c = parse_makefile(text, Path::new("/tree")).unwrap();
        assert_eq!(
            c,
            Compile {
                cc: "cc".into(),
                cflags: ["-pipe", "-O", "-W", "-Werror", "-g"]
                    .map(String::from)
                    .to_vec(),
                includes: ["/tree/src/core", "/abs/objs", "/tree/src/http"]
                    .map(PathBuf::from)
                    .to_vec(),
            }
        );
        assert_eq!(parse_makefile("CC = cc\n", Path::new("/")), None);
    }
}
