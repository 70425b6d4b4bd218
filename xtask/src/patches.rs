//! `cargo xtask patches`: `nginx-src-patches/` holds one series, written
//! once, and every tree's copy is made from it.
//!
//! The canonical series is [`BASE`]'s directory (the newest release). Every
//! other tree's series is that series carried over by git: a scratch
//! repository holds the base tree's `src/` with the series applied (`git
//! am`) and, beside it, the other tree's pristine `src/`, onto which each
//! canonical commit is cherry-picked, a three-way merge, so the context
//! lines and offsets that differ between trees follow by themselves. Where a
//! tree's code really differs, `nginx-src-patches/deltas/SELECTOR/` says
//! how, in `git format-patch` files:
//!
//! - `NNNN-*.patch` replaces canonical patch `NNNN` for that tree (its own
//!   version of the change), or, when the series has no `NNNN`, is added
//!   after it (a fix that tree alone needs);
//! - `NNNN+*.patch` is applied on top of canonical patch `NNNN` once it
//!   was carried over, and folded into it: its diff joins the commit, and
//!   its message body (the subject only names the delta) is appended to
//!   the commit's message as a paragraph of its own.
//!
//! A `SELECTOR` is a tree's name (`tengine-3.2.0`) or a prefix ending at a
//! dot (`1.28` for 1.28.0 and 1.28.3). Then `git format-patch` writes the
//! tree's series, which `cargo xtask build` applies and users take.
//!
//! `cargo xtask patches` rewrites every tree's directory (the base's too:
//! its diffstats and numbering are made by git); `--check` (run by `cargo
//! xtask check`) only compares and fails naming every file that differs
//! from its regeneration. So a fix to the patches is one edit to the
//! base's series, then this command.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

mod derive;
mod git;
mod resolve;

use crate::versions::{source, MATRIX};
use crate::workspace::{root, target_dir, At, Result};
use derive::derive;
use git::Git;
use resolve::Resolution;

/// The tree the canonical series is written against: the newest release.
pub const BASE: &str = crate::versions::NEWEST;

/// Every commit made here has this committer and date, so the series'
/// `From <commit>` lines depend on the trees and the patches alone.
const COMMITTER: [(&str, &str); 3] = [
    ("GIT_COMMITTER_NAME", "generation-retry developers"),
    ("GIT_COMMITTER_EMAIL", "generation-retry@localhost"),
    ("GIT_COMMITTER_DATE", "2026-12-01T00:00:00+00:00"),
];

/// `tree`'s pristine source directory, obtained and checked once per
/// run: one thread at a time, since obtaining a source may download it
/// or check its signature with files of its own.
fn pristine(tree: &str) -> Result<PathBuf> {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static HAD: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let mut had = HAD
        .get_or_init(Default::default)
        .lock()
        .map_err(|_| "a thread failed while obtaining a source")?;
    if let Some(p) = had.get(tree) {
        return Ok(p.clone());
    }
    let p = source(tree, None)?.tree;
    had.insert(tree.to_string(), p.clone());
    Ok(p)
}

/// A series as files: each name and its contents, in order.
type Series = Vec<(String, Vec<u8>)>;

/// `nginx-src-patches/`.
pub fn dir() -> PathBuf {
    root().join("nginx-src-patches")
}

/// `cargo xtask patches [--check | --derive] [TREE...]`: makes every
/// tree's nginx-src-patches/TREE/ from the canonical series and
/// nginx-src-patches/deltas/.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// compare only; fail naming every file that differs
    #[arg(long)]
    pub check: bool,
    /// first record what the named trees' committed series add to the canonical
    /// one as their deltas (after editing a tree's series by hand where the
    /// three-way merge cannot carry a change over)
    #[arg(long, conflicts_with = "check", requires = "trees")]
    pub derive: bool,
    /// only these trees (default: every tree of the matrix)
    #[arg(value_name = "TREE", value_parser = clap::builder::PossibleValuesParser::new(MATRIX))]
    pub trees: Vec<String>,
}

pub fn command(a: &Args) -> Result {
    let mut trees: Vec<String> = Vec::new();
    for t in &a.trees {
        if !trees.contains(t) {
            trees.push(t.clone());
        }
    }
    if a.derive {
        for t in &trees {
            derive(t)?;
        }
    }
    if trees.is_empty() {
        trees = MATRIX.iter().map(|t| t.to_string()).collect();
    }
    if a.check {
        return check(&trees);
    }
    // Every tree that can be made is written; every one that cannot is
    // named, at once.
    let mut failed = Vec::new();
    for (tree, made) in trees.iter().zip(regenerate_all(&trees)) {
        let made = match made {
            Ok(made) => made,
            Err(e) => {
                failed.push(e.to_string());
                continue;
            }
        };
        let differs = compare(&dir().join(tree), &made)?;
        if !differs.is_empty() {
            write(&dir().join(tree), &made)?;
            eprintln!("xtask: patches: {tree}: rewrote {}", differs.join(", "));
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(failed.join("\n").into())
    }
}

/// Fails naming every file of `trees`' series that differs from its
/// regeneration (`cargo xtask check` runs it over the matrix). A tree
/// whose source cannot be had here (a fork or a development branch with
/// no mirror: nothing to download) is skipped, and said.
pub fn check(trees: &[String]) -> Result {
    let trees: Vec<String> = trees
        .iter()
        .filter(|t| {
            let origin = crate::source::origin(t, &Default::default());
            let unreachable = matches!(origin, crate::source::Origin::Download(_))
                && !crate::source::is_release(t);
            if unreachable {
                eprintln!(
                    "xtask: patches: {t}: not checked, its source is not here (set {})",
                    crate::source::MIRROR_ENV
                );
            }
            !unreachable
        })
        .cloned()
        .collect();
    let mut drifted = Vec::new();
    for (tree, made) in trees.iter().zip(regenerate_all(&trees)) {
        match made {
            Ok(made) => {
                let differs = compare(&dir().join(tree), &made)?;
                drifted.extend(differs.into_iter().map(|d| format!("{tree}/{d}")));
            }
            Err(e) => drifted.push(format!("{tree} (cannot be made: {e})")),
        }
    }
    if drifted.is_empty() {
        eprintln!(
            "xtask: patches: {} series as {BASE}'s makes them",
            trees.len()
        );
        Ok(())
    } else {
        err!(
            "nginx-src-patches differs from what the canonical series ({BASE}/) and \
             deltas/ make: {}; run `cargo xtask patches` and commit the result",
            drifted.join(", ")
        )
    }
}

/// [`regenerate`] for each tree, at once (git is mostly waiting on the
/// disk; the sources are obtained one at a time, [`pristine`]).
fn regenerate_all(trees: &[String]) -> Vec<Result<Series>> {
    std::thread::scope(|s| {
        let handles: Vec<_> = trees
            .iter()
            .map(|t| s.spawn(move || regenerate(t)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a regeneration panicked".into()))
            })
            .collect()
    })
}

/// The files of `tree`'s series as the canonical series and the deltas
/// make them: name and contents, in order.
pub fn regenerate(tree: &str) -> Result<Series> {
    regenerate_from(&dir(), &target_dir().join("patches"), tree)
}

/// [`regenerate`] from the patches in `patches` (a copy of
/// `nginx-src-patches/`), working in `work/TREE`.
fn regenerate_from(patches: &Path, work: &Path, tree: &str) -> Result<Series> {
    let (git, work, canonical, commits) = scratch(patches, work, tree)?;
    if tree != BASE {
        let deltas = deltas(patches, tree)?;
        for (patch, commit) in canonical.iter().zip(&commits) {
            let number = number(patch);
            if let Some(own) = deltas.replacing.get(&number) {
                git.am(std::slice::from_ref(own))?;
            } else {
                git.cherry_pick(commit, patch, tree, &work, &deltas.resolutions)?;
            }
            if let Some(fold) = deltas.folded.get(&number) {
                git.fold(fold, tree, &work)?;
            }
        }
        let added: Vec<PathBuf> = deltas
            .replacing
            .iter()
            .filter(|(n, _)| !canonical.iter().any(|p| number(p) == **n))
            .map(|(_, p)| p.clone())
            .collect();
        git.am(&added)?;
    }
    let first = if tree == BASE { "base" } else { "tree" };
    export(&git, &work.join("series"), &format!("{first}..HEAD"))
}

/// The scratch repository for `tree`: the base tree's `src/` with the
/// canonical series applied (branch `canonical` from tag `base`, its
/// commits returned beside the patches), and `tree`'s pristine `src/`
/// checked out as the orphan branch `made` (tag `tree`), unless `tree` is
/// the base.
#[allow(clippy::type_complexity)]
fn scratch(
    patches: &Path,
    work: &Path,
    tree: &str,
) -> Result<(Git, PathBuf, Vec<PathBuf>, Vec<String>)> {
    let work = work.join(tree);
    let _ = fs::remove_dir_all(&work);
    let repo = work.join("repo");
    fs::create_dir_all(&repo).at(&repo)?;
    let git = Git(repo);
    git.run(&["init", "-q", "--template=", "-b", "canonical"])?;
    let canonical = series(&patches.join(BASE))?;
    git.commit_tree(&pristine(BASE)?, "base")?;
    git.am(&canonical)?;
    let commits = git.lines(&["rev-list", "--reverse", "base..HEAD"])?;
    if commits.len() != canonical.len() {
        return err!(
            "{BASE}: {} patches made {} commits",
            canonical.len(),
            commits.len()
        );
    }
    if tree != BASE {
        git.run(&["checkout", "-q", "--orphan", "made"])?;
        git.run(&["rm", "-rqf", "."])?;
        git.commit_tree(&pristine(tree)?, "tree")?;
    }
    Ok((git, work, canonical, commits))
}

/// `git format-patch` of `range` into `out`: the files, name and contents.
fn export(git: &Git, out: &Path, range: &str) -> Result<Series> {
    let _ = fs::remove_dir_all(out);
    git.run(&[
        "format-patch",
        "-q",
        "--no-signature",
        "-o",
        out.to_str().ok_or("a non-UTF-8 target directory")?,
        range,
    ])?;
    let mut made = Vec::new();
    for p in series(out)? {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        made.push((name, fs::read(&p).at(&p)?));
    }
    Ok(made)
}

/// The `.patch` files of `dir`, in order.
fn series(dir: &Path) -> Result<Vec<PathBuf>> {
    crate::patched::patches_in(dir)
}

/// `0003` of `0003-Upstream-....patch` (and of `0003+tengine.patch`).
fn number(patch: &Path) -> String {
    let name = patch.file_name().unwrap_or_default().to_string_lossy();
    name.chars().take_while(char::is_ascii_digit).collect()
}

/// A tree's deltas, by the canonical patch number they concern.
#[derive(Default)]
struct Deltas {
    replacing: BTreeMap<String, PathBuf>,
    folded: BTreeMap<String, PathBuf>,
    /// `SELECTOR/resolutions`: the conflicts the three-way merge meets
    /// on this tree, and what the tree's series has in their place.
    resolutions: Vec<Resolution>,
}

/// The deltas of every `deltas/SELECTOR/` that selects `tree`.
fn deltas(patches: &Path, tree: &str) -> Result<Deltas> {
    let mut found = Deltas::default();
    let base = patches.join("deltas");
    let Ok(entries) = fs::read_dir(&base) else {
        return Ok(found);
    };
    let mut selectors: Vec<String> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|s| selects(s, tree))
        .collect();
    selectors.sort();
    for s in selectors {
        let recorded = base.join(&s).join("resolutions");
        if recorded.is_file() {
            let text = fs::read_to_string(&recorded).at(&recorded)?;
            found.resolutions.extend(
                Resolution::parse(&text).map_err(|e| format!("{}: {e}", recorded.display()))?,
            );
        }
        for p in series(&base.join(&s))? {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            let n = number(&p);
            let into = if name[n.len()..].starts_with('+') {
                &mut found.folded
            } else {
                &mut found.replacing
            };
            if let Some(other) = into.insert(n.clone(), p.clone()) {
                return err!(
                    "{tree}: two deltas for patch {n}: {} and {}",
                    other.display(),
                    p.display()
                );
            }
        }
    }
    Ok(found)
}

/// The patch numbers that selectors other than `tree`'s own name replace
/// for `tree` (`deltas/1.28/` for 1.28.0).
fn deltas_of_others(tree: &str) -> Result<Vec<String>> {
    let mut numbers = Vec::new();
    let base = dir().join("deltas");
    let Ok(entries) = fs::read_dir(&base) else {
        return Ok(numbers);
    };
    for e in entries.filter_map(|e| e.ok()) {
        let s = e.file_name().to_string_lossy().into_owned();
        if s != tree && selects(&s, tree) {
            for p in series(&base.join(&s))? {
                if !p.to_string_lossy().contains('+') {
                    numbers.push(number(&p));
                }
            }
        }
    }
    Ok(numbers)
}

/// Whether the delta directory `selector` applies to `tree`: its name, or
/// a prefix of it ending at a dot.
fn selects(selector: &str, tree: &str) -> bool {
    tree == selector
        || tree
            .strip_prefix(selector)
            .is_some_and(|rest| rest.starts_with('.'))
}

/// The names of `made`'s files that differ from those in `dir`, and of
/// files in `dir` it does not make.
fn compare(dir: &Path, made: &Series) -> Result<Vec<String>> {
    let mut differs = Vec::new();
    for (name, bytes) in made {
        if fs::read(dir.join(name)).ok().as_ref() != Some(bytes) {
            differs.push(name.clone());
        }
    }
    if dir.is_dir() {
        for p in series(dir)? {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            if !made.iter().any(|(n, _)| *n == name) {
                differs.push(format!("{name} (made no more)"));
            }
        }
    }
    Ok(differs)
}

/// Replaces the series in `dir` by `made`.
fn write(dir: &Path, made: &Series) -> Result {
    fs::create_dir_all(dir).at(dir)?;
    for p in series(dir)? {
        fs::remove_file(&p).at(&p)?;
    }
    for (name, bytes) in made {
        let p = dir.join(name);
        fs::write(&p, bytes).at(&p)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
