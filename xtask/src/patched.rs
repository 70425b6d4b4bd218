//! `target/nginx/VERSION/patched/sbin/nginx`: a copy of the stock build of
//! that version (its source tree and objs), with
//! `nginx-src-patches/VERSION/*.patch` applied in order and made again, so
//! configured exactly as the stock build (the module loads into it too),
//! and installed beside stock.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::tree::{
    binary_name, copy_if_changed, copy_source, copy_tree, fnv1a, is_fresh, make_target, write_stamp,
};
use crate::workspace::{root, At, Result};

/// What nginx-src recorded about the stock build: its source tree and flags.
pub(crate) struct StockBuild {
    pub source: PathBuf,
    pub flags: Vec<String>,
}

impl StockBuild {
    /// Reads `last-build-info` in the stock build's objs directory.
    pub fn read(stock_objs: &Path) -> Result<StockBuild> {
        let path = stock_objs.join("last-build-info");
        let info = fs::read_to_string(&path).at(&path)?;
        parse_build_info(&info).ok_or(format!("cannot parse {}", path.display()).into())
    }
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

/// `nginx-src-patches/VERSION`.
pub fn patch_dir(version: &str) -> PathBuf {
    root().join("nginx-src-patches").join(version)
}

/// The patches for `version`, in order.
pub fn patches(version: &str) -> Result<Vec<PathBuf>> {
    patches_in(&patch_dir(version))
}

/// The patches in `dir`, in order.
pub fn patches_in(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut list: Vec<PathBuf> = fs::read_dir(dir)
        .at(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "patch"))
        .collect();
    list.sort();
    Ok(list)
}

/// Everything that decides the patched build.
fn fingerprint(identity: &str, flags: &[String], patches: &[PathBuf]) -> Result<String> {
    let flags = flags.join(" ");
    let mut parts = vec![identity.as_bytes().to_vec(), flags.into_bytes()];
    for p in patches {
        parts.push(fs::read(p).at(p)?);
    }
    Ok(fnv1a(parts.iter().map(Vec::as_slice)))
}

/// Applies one patch; on failure the error names the patch and shows git's
/// account of the hunk that did not apply.
fn apply(tree: &Path, patch: &Path, version: &str) -> Result {
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
        .running("git apply")?;
    let said = String::from_utf8_lossy(&out.stderr);
    if out.status.success() && said.contains("Applied patch") && !said.contains("Skipped patch") {
        return Ok(());
    }
    err!(
        "{} does not apply to nginx {version}:\n{}{}",
        patch.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A built stock nginx: the source tree its `make` ran in, and its objs
/// directory (inside that tree, or elsewhere as nginx-sys puts it).
#[derive(Clone, Copy)]
pub struct StockTree<'a> {
    pub source: &'a Path,
    pub objs: &'a Path,
}

/// Builds (or reuses) the patched nginx of `version` from the stock build
/// `stock`, made from the pristine tree `identity` names with `flags`;
/// returns the installed binary.
pub fn build(
    version: &str,
    stock: StockTree,
    identity: &str,
    flags: &[String],
    install: &Path,
) -> Result<PathBuf> {
    build_with(version, &patches(version)?, stock, identity, flags, install)
}

/// [`build`] with these patches instead of `nginx-src-patches/VERSION`'s.
///
/// The stock build is copied whole, objects and their times included, the
/// patches applied to the copy, and `make` run again: it recompiles what
/// the patches touch (the files they change and those that include a
/// changed header: http and stream) and links, where a build from the
/// pristine tree would compile and configure everything again. Same
/// configuration, same flags: the module loads into both.
pub fn build_with(
    version: &str,
    patches: &[PathBuf],
    stock: StockTree,
    identity: &str,
    flags: &[String],
    install: &Path,
) -> Result<PathBuf> {
    let stamp = fingerprint(identity, flags, patches)?;

    let work = install.join("patched-build");
    let tree = work.join("src");
    // objs inside the stock tree stays there in the copy (its Makefile
    // names it relatively); elsewhere it is copied beside it.
    let objs = match stock.objs.strip_prefix(stock.source) {
        Ok(rel) => tree.join(rel),
        Err(_) => work.join("objs"),
    };
    let binary = install.join("patched/sbin/nginx");
    let built = objs.join(binary_name(stock.source));
    if is_fresh(&work, &stamp, &built) && binary.is_file() {
        return Ok(binary);
    }

    eprintln!(
        "xtask: building patched nginx {version} ({} patches) on its stock build",
        patches.len()
    );
    let _ = fs::remove_dir_all(&work);
    if objs.starts_with(&tree) {
        copy_tree(stock.source, &tree)?;
    } else {
        copy_source(stock.source, &tree)?;
        copy_tree(stock.objs, &objs)?;
        // The Makefile names the objs directory by its absolute path.
        let makefile = objs.join("Makefile");
        let text = fs::read_to_string(&makefile).at(&makefile)?;
        let from = stock.objs.to_string_lossy();
        if !text.contains(from.as_ref()) {
            // make would build into the stock objs, and the stock nginx
            // be installed as the patched one.
            return err!(
                "{} does not name its objs directory {from}: cannot build the patched nginx \
                 on it",
                makefile.display()
            );
        }
        let text = text.replace(from.as_ref(), &objs.to_string_lossy());
        fs::write(&makefile, text).at(&makefile)?;
    }
    for p in patches {
        apply(&tree, p, version)?;
    }
    make_target(&tree, &objs, "build")?;
    copy_if_changed(&built, &binary)?;
    write_stamp(&work, &stamp)?;
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
        let p = patches(crate::workspace::DEFAULT).unwrap();
        assert!(!p.is_empty());
        let mut sorted = p.clone();
        sorted.sort();
        assert_eq!(p, sorted);
    }
}
