//! `target/nginx/1.28.0/patched/sbin/nginx`: a copy of the nginx-src tree
//! nginx-sys built, with `nginx-src-patches/1.28.0/*.patch` applied in order,
//! configured with exactly the flags of the stock build (so the module
//! loads into it too), built, and installed beside stock.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{root, Result, NGINX_VERSION};

/// Runs a build step, showing its output only when it fails.
fn run_quiet(cmd: &mut Command) -> Result {
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "{cmd:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ))
}

/// What nginx-src recorded about the stock build: its source tree and flags.
struct StockBuild {
    source: PathBuf,
    flags: Vec<String>,
}

/// `last-build-info` is `"<source dir>"|<configure flags>`.
fn parse_build_info(text: &str) -> Option<StockBuild> {
    let rest = text.strip_prefix('"')?;
    let (source, flags) = rest.split_once("\"|")?;
    Some(StockBuild {
        source: PathBuf::from(source.replace("\\\\", "\\").replace("\\\"", "\"")),
        flags: flags.split_whitespace().map(String::from).collect(),
    })
}

/// The patches, in order.
pub fn patches() -> Result<Vec<PathBuf>> {
    let dir = root().join("nginx-src-patches").join(NGINX_VERSION);
    let mut list: Vec<PathBuf> = fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "patch"))
        .collect();
    list.sort();
    Ok(list)
}

/// FNV-1a over everything that decides the patched build.
fn fingerprint(build: &StockBuild, patches: &[PathBuf]) -> Result<String> {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |bytes: &[u8]| {
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    feed(build.source.to_string_lossy().as_bytes());
    feed(build.flags.join(" ").as_bytes());
    for p in patches {
        feed(&fs::read(p).map_err(|e| format!("{}: {e}", p.display()))?);
    }
    Ok(format!("{h:016x}"))
}

fn copy_tree(from: &Path, to: &Path) -> Result {
    fs::create_dir_all(to).map_err(|e| format!("{}: {e}", to.display()))?;
    for entry in fs::read_dir(from).map_err(|e| format!("{}: {e}", from.display()))? {
        let entry = entry.map_err(|e| e.to_string())?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if entry.file_type().map_err(|e| e.to_string())?.is_dir() {
            copy_tree(&src, &dst)?;
        } else {
            fs::copy(&src, &dst).map_err(|e| format!("{}: {e}", src.display()))?;
        }
    }
    Ok(())
}

/// Applies one patch; on failure the error names the patch and shows git's
/// account of the hunk that did not apply.
fn apply(tree: &Path, patch: &Path) -> Result {
    // The copy lives under target/, inside this project's git work tree,
    // where `git apply` would take paths as relative to the project and
    // silently skip them all: stop git's repository discovery at the copy.
    let ceiling = tree.parent().unwrap_or(tree);
    let out = Command::new("git")
        .args(["apply", "--verbose", "-p1"])
        .arg(patch)
        .current_dir(tree)
        .env("GIT_CEILING_DIRECTORIES", ceiling)
        .output()
        .map_err(|e| format!("cannot run git apply: {e}"))?;
    let said = String::from_utf8_lossy(&out.stderr);
    if out.status.success() && said.contains("Applied patch") && !said.contains("Skipped patch") {
        return Ok(());
    }
    Err(format!(
        "{} does not apply to nginx {NGINX_VERSION}:\n{}{}",
        patch.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ))
}

/// Builds (or reuses) the patched nginx; returns the installed binary.
pub fn build(stock_objs: &Path, install: &Path) -> Result<PathBuf> {
    let info_path = stock_objs.join("last-build-info");
    let info =
        fs::read_to_string(&info_path).map_err(|e| format!("{}: {e}", info_path.display()))?;
    let stock = parse_build_info(&info).ok_or(format!("cannot parse {}", info_path.display()))?;
    let patches = patches()?;
    let stamp = fingerprint(&stock, &patches)?;

    let work = install.join("patched-build");
    let tree = work.join("src");
    let objs = work.join("objs");
    let binary = install.join("patched/sbin/nginx");
    let stamp_file = work.join("stamp");
    let fresh = fs::read_to_string(&stamp_file).is_ok_and(|s| s == stamp)
        && objs.join("nginx").is_file()
        && binary.is_file();
    if fresh {
        return Ok(binary);
    }

    eprintln!("xtask: building patched nginx ({} patches)", patches.len());
    let _ = fs::remove_dir_all(&work);
    copy_tree(&stock.source, &tree)?;
    for p in &patches {
        apply(&tree, p)?;
    }
    let configure = ["configure", "auto/configure"]
        .iter()
        .map(|c| tree.join(c))
        .find(|c| c.is_file())
        .ok_or("no configure script in the nginx tree")?;
    run_quiet(
        Command::new(configure)
            .args(&stock.flags)
            .arg(format!("--builddir={}", objs.display()))
            .current_dir(&tree),
    )?;
    let jobs = std::thread::available_parallelism().map_or(1, |n| n.get());
    run_quiet(
        Command::new("make")
            .arg("-f")
            .arg(objs.join("Makefile"))
            .arg(format!("-j{jobs}"))
            .arg("build")
            .current_dir(&tree),
    )?;
    crate::build::copy_if_changed(&objs.join("nginx"), &binary)?;
    fs::write(&stamp_file, stamp).map_err(|e| e.to_string())?;
    Ok(binary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_info_is_parsed() {
        let b = parse_build_info("\"/src/nginx\"|--with-compat --with-threads").unwrap();
        assert_eq!(b.source, PathBuf::from("/src/nginx"));
        assert_eq!(b.flags, ["--with-compat", "--with-threads"]);
        assert!(parse_build_info("garbage").is_none());
    }

    #[test]
    fn patches_are_ordered_and_present() {
        let p = patches().unwrap();
        assert!(!p.is_empty());
        let mut sorted = p.clone();
        sorted.sort();
        assert_eq!(p, sorted);
    }
}
