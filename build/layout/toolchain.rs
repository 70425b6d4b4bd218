//! The nginx tree's C compiler, as the layout gate runs it: the compiler
//! and flags nginx built itself with (from `objs/Makefile`), the bindings
//! nginx-sys generated for the same tree, and running a command for its
//! output.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

pub(super) fn path_str(p: &Path) -> Result<&str, String> {
    p.to_str()
        .ok_or_else(|| format!("{}: not a Unicode path", p.display()))
}

pub(super) fn run(mut c: Command, what: &str) -> Result<String, String> {
    let o = c.output().map_err(|e| format!("{what}: {c:?}: {e}"))?;
    if !o.status.success() {
        return Err(format!(
            "{what}: {c:?} exited with {}:\n{}",
            o.status,
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// The tree's compiler and flags, from its `objs/Makefile` (`CC =`,
/// `CFLAGS =`), as nginx compiled itself; `cc` and none if absent.
pub(super) fn compiler(makefile: &Path) -> (Vec<String>, Vec<String>) {
    let text = fs::read_to_string(makefile).unwrap_or_default();
    let value = |key: &str| {
        text.lines().find_map(|l| {
            let (k, v) = l.split_once('=')?;
            (k.trim() == key).then(|| v.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
        })
    };
    let cc = value("CC")
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| vec!["cc".into()]);
    let cflags = value("CFLAGS")
        .unwrap_or_default()
        .into_iter()
        // Warnings are the probe's own business (`-w`); layout flags stay.
        .filter(|f| f != "-Werror")
        .collect();
    (cc, cflags)
}

/// The bindings nginx-sys generated for this tree: its build script's
/// output directory, a sibling of ours, whose recorded `build_dir` is the
/// tree's.
pub(super) fn bindings(out: &Path, build_dir: &Path) -> Result<PathBuf, String> {
    let build = out
        .parent()
        .and_then(Path::parent)
        .ok_or("OUT_DIR has no build directory above it")?;
    let wanted = format!("build_dir={}", build_dir.display());
    let mut found: Vec<(std::time::SystemTime, PathBuf)> = Vec::new();
    for e in fs::read_dir(build).map_err(|e| format!("{}: {e}", build.display()))? {
        let dir = e.map_err(|e| e.to_string())?.path();
        let is_sys = dir
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("nginx-sys-"));
        let output = dir.join("output");
        let bindings = dir.join("out/bindings.rs");
        if !is_sys || !bindings.is_file() {
            continue;
        }
        let recorded = fs::read_to_string(&output).unwrap_or_default();
        if recorded.lines().any(|l| l.ends_with(&wanted)) {
            let at = fs::metadata(&bindings)
                .and_then(|m| m.modified())
                .map_err(|e| e.to_string())?;
            found.push((at, bindings));
        }
    }
    found.sort();
    found.pop().map(|(_, p)| p).ok_or_else(|| {
        format!(
            "no nginx-sys bindings for {} under {}",
            build_dir.display(),
            build.display()
        )
    })
}
