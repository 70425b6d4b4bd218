//! Building nginx trees: copying a source, configuring, making, and the
//! stamps that let a build be reused when nothing that decides it changed.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::workspace::{At, Result};

/// Runs a build step, showing its output only when it fails.
pub(crate) fn run_quiet(cmd: &mut Command) -> Result {
    let out = cmd.output().running(format!("{cmd:?}"))?;
    if out.status.success() {
        return Ok(());
    }
    err!(
        "{cmd:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// FNV-1a over the concatenation of `parts`: a build's stamp.
pub(crate) fn fnv1a<'a>(parts: impl IntoIterator<Item = &'a [u8]>) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in parts.into_iter().flatten() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// Whether the build in `work` was made from `stamp` (and left `product`).
pub(crate) fn is_fresh(work: &Path, stamp: &str, product: &Path) -> bool {
    fs::read_to_string(work.join("stamp")).is_ok_and(|s| s == stamp) && product.is_file()
}

pub(crate) fn write_stamp(work: &Path, stamp: &str) -> Result {
    fs::write(work.join("stamp"), stamp).at(work)
}

/// What `configure` and `make` leave in an nginx tree (not its source).
pub(crate) fn is_build_output(name: &str) -> bool {
    name == "objs" || name == "Makefile" || name == ".git"
}

/// Every file under `path` (or `path` itself, if a file), sorted, leaving
/// out entries whose name `skip` accepts, at any depth.
pub(crate) fn files(path: &Path, skip: &dyn Fn(&str) -> bool) -> Result<Vec<PathBuf>> {
    fn walk(path: &Path, skip: &dyn Fn(&str) -> bool, out: &mut Vec<PathBuf>) -> Result {
        if !path.is_dir() {
            out.push(path.to_path_buf());
            return Ok(());
        }
        for entry in fs::read_dir(path).at(path)? {
            let p = entry.at(path)?.path();
            if !p.file_name().is_some_and(|n| skip(&n.to_string_lossy())) {
                walk(&p, skip, out)?;
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(path, skip, &mut out)?;
    out.sort();
    Ok(out)
}

/// Copies the tree `from` to `to`, leaving out entries whose name `skip`
/// accepts, at any depth; each file keeps its modification time, so that
/// `make` in a copied build tree sees what is up to date as it was.
fn copy_filtered(from: &Path, to: &Path, skip: &dyn Fn(&str) -> bool) -> Result {
    fs::create_dir_all(to).at(to)?;
    for entry in fs::read_dir(from).at(from)? {
        let entry = entry.at(from)?;
        let name = entry.file_name();
        if skip(&name.to_string_lossy()) {
            continue;
        }
        let (src, dst) = (entry.path(), to.join(&name));
        if entry.file_type().at(entry.path())?.is_dir() {
            copy_filtered(&src, &dst, skip)?;
        } else {
            fs::copy(&src, &dst).at(&src)?;
            let modified = entry.metadata().and_then(|m| m.modified());
            modified
                .and_then(|t| fs::File::open(&dst)?.set_modified(t))
                .at(&dst)?;
        }
    }
    Ok(())
}

/// Copies an nginx source tree, leaving out what a configure and make in it
/// left (`objs`, `Makefile`), so a user's configured tree copies clean.
pub(crate) fn copy_source(from: &Path, to: &Path) -> Result {
    copy_filtered(from, to, &is_build_output)
}

pub(crate) fn copy_tree(from: &Path, to: &Path) -> Result {
    copy_filtered(from, to, &|_| false)
}

/// Copies one file, unless `to` already holds the same bytes.
pub(crate) fn copy_if_changed(from: &Path, to: &Path) -> Result {
    let new = fs::read(from).at(from)?;
    if fs::read(to).ok().as_deref() == Some(&new[..]) {
        return Ok(());
    }
    if let Some(dir) = to.parent() {
        fs::create_dir_all(dir).at(dir)?;
    }
    // Write beside and rename, so a running nginx never sees half a binary.
    let tmp = to.with_extension("tmp");
    fs::copy(from, &tmp).map_err(|e| format!("{} -> {}: {e}", from.display(), tmp.display()))?;
    fs::rename(&tmp, to).at(to)
}

/// `configure` in an nginx tree (a release's `configure` or a source
/// checkout's `auto/configure`), with `args`.
pub(crate) fn configure(tree: &Path, args: &[String]) -> Result {
    let configure = ["configure", "auto/configure"]
        .iter()
        .map(|c| tree.join(c))
        .find(|c| c.is_file())
        .ok_or("no configure script in the nginx tree")?;
    run_quiet(Command::new(configure).args(args).current_dir(tree))
}

/// `make -f OBJS/Makefile -jN TARGET` in a configured nginx tree.
pub(crate) fn make_target(tree: &Path, objs: &Path, target: &str) -> Result {
    let jobs = std::thread::available_parallelism().map_or(1, |n| n.get());
    run_quiet(
        Command::new("make")
            .arg("-f")
            .arg(objs.join("Makefile"))
            .arg(format!("-j{jobs}"))
            .arg(target)
            .current_dir(tree),
    )
}

/// A copy of the nginx tree `source` (whose contents `identity` names) in
/// `work/src`, configured with `args` and, when `make` says so, built
/// (`objs/` inside the tree, as nginx does by default), unless the stamp
/// says the one there was made the same way (`inputs`: anything else that
/// decides the build). Returns the tree, whether it was (re)made, and its
/// stamp.
pub(crate) fn nginx_tree(
    source: &Path,
    identity: &str,
    work: &Path,
    args: &[String],
    inputs: &[Vec<u8>],
    make: Make,
) -> Result<(PathBuf, bool, String)> {
    let joined = args.join(" ");
    let stamp = fnv1a(
        [identity.as_bytes(), joined.as_bytes()]
            .into_iter()
            .chain(inputs.iter().map(Vec::as_slice)),
    );
    let tree = work.join("src");
    let objs = tree.join("objs");
    let product = match make {
        Make::Binary => objs.join(binary_name(source)),
        Make::ConfigureOnly => objs.join("Makefile"),
    };
    if is_fresh(work, &stamp, &product) {
        return Ok((tree, false, stamp));
    }
    let started = Instant::now();
    let what = match make {
        Make::Binary => "building",
        Make::ConfigureOnly => "configuring",
    };
    eprintln!(
        "xtask: {what} nginx from {} with {joined}",
        source.display()
    );
    let _ = fs::remove_dir_all(work);
    copy_source(source, &tree)?;
    configure(&tree, args)?;
    if make == Make::Binary {
        make_target(&tree, &objs, "build")?;
    }
    write_stamp(work, &stamp)?;
    eprintln!(
        "xtask: {} in {:.1} s",
        product.display(),
        started.elapsed().as_secs_f64()
    );
    Ok((tree, true, stamp))
}

/// The binary `make` leaves in `objs/` of the tree `source`: `nginx`, or
/// `angie` for Angie's (which has `src/core/angie.h`).
pub(crate) fn binary_name(source: &Path) -> &'static str {
    if source.join("src/core/angie.h").is_file() {
        "angie"
    } else {
        "nginx"
    }
}

/// What [`nginx_tree`] makes of a configured tree.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Make {
    /// `make build`: the nginx binary.
    Binary,
    /// Nothing: `objs/` with its headers and Makefile, all a module's
    /// bindings need.
    ConfigureOnly,
}
