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
use std::process::Command;

use crate::versions::{source, MATRIX};
use crate::workspace::{root, target_dir, Result};

/// The tree the canonical series is written against.
pub const BASE: &str = "1.31.4";

/// Every commit made here has this committer and date, so the series'
/// `From <commit>` lines depend on the trees and the patches alone.
const COMMITTER: [(&str, &str); 3] = [
    ("GIT_COMMITTER_NAME", "generation-retry developers"),
    ("GIT_COMMITTER_EMAIL", "generation-retry@localhost"),
    ("GIT_COMMITTER_DATE", "2026-12-01T00:00:00+00:00"),
];

/// A series as files: each name and its contents, in order.
type Series = Vec<(String, Vec<u8>)>;

/// `nginx-src-patches/`.
pub fn dir() -> PathBuf {
    root().join("nginx-src-patches")
}

/// `cargo xtask patches [--check] [TREE...]`.
pub fn command(args: &[String]) -> Result {
    let mut check = false;
    let mut derived = false;
    let mut trees = Vec::new();
    for a in args {
        match a.as_str() {
            "--check" => check = true,
            "--derive" => derived = true,
            "--help" | "-h" => {
                println!("{USAGE}");
                return Ok(());
            }
            t if MATRIX.contains(&t) => trees.push(t.to_string()),
            other => return Err(format!("patches: unknown argument `{other}`\n{USAGE}")),
        }
    }
    if derived {
        if trees.is_empty() || check {
            return Err(format!(
                "patches: --derive takes the trees to derive\n{USAGE}"
            ));
        }
        for t in &trees {
            derive(t)?;
        }
    }
    if trees.is_empty() {
        trees = MATRIX.iter().map(|t| t.to_string()).collect();
    }
    if check {
        return self::check(&trees);
    }
    for (tree, made) in trees.iter().zip(regenerate_all(&trees)) {
        let made = made?;
        let differs = compare(&dir().join(tree), &made)?;
        if !differs.is_empty() {
            write(&dir().join(tree), &made)?;
            eprintln!("xtask: patches: {tree}: rewrote {}", differs.join(", "));
        }
    }
    Ok(())
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
        let differs = compare(&dir().join(tree), &made?)?;
        drifted.extend(differs.into_iter().map(|d| format!("{tree}/{d}")));
    }
    if drifted.is_empty() {
        eprintln!(
            "xtask: patches: {} series as {BASE}'s makes them",
            trees.len()
        );
        Ok(())
    } else {
        Err(format!(
            "nginx-src-patches differs from what the canonical series ({BASE}/) and \
             deltas/ make: {}; run `cargo xtask patches` and commit the result",
            drifted.join(", ")
        ))
    }
}

/// [`regenerate`] for each tree, at once (git is mostly waiting on the
/// disk); the base's source is obtained first, since every tree uses it.
fn regenerate_all(trees: &[String]) -> Vec<Result<Series>> {
    if let Err(e) = source(BASE, None) {
        return trees.iter().map(|_| Err(e.clone())).collect();
    }
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

const USAGE: &str = "\
cargo xtask patches [--check | --derive] [TREE...]
  makes every tree's nginx-src-patches/TREE/ from the canonical series
  (nginx-src-patches/BASE/) and nginx-src-patches/deltas/
  --check     compare only; fail naming every file that differs
  --derive    first record what the named trees' committed series add to
              the canonical one as their deltas (after editing a tree's
              series by hand where the three-way merge cannot carry a
              change over)
  TREE        only these trees (default: every tree of the matrix)";

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
    fs::create_dir_all(&repo).map_err(|e| format!("{}: {e}", repo.display()))?;
    let git = Git(repo);
    git.run(&["init", "-q", "-b", "canonical"])?;
    let canonical = series(&patches.join(BASE))?;
    git.commit_tree(&source(BASE, None)?.tree, "base")?;
    git.am(&canonical)?;
    let commits = git.lines(&["rev-list", "--reverse", "base..HEAD"])?;
    if commits.len() != canonical.len() {
        return Err(format!(
            "{BASE}: {} patches made {} commits",
            canonical.len(),
            commits.len()
        ));
    }
    if tree != BASE {
        git.run(&["checkout", "-q", "--orphan", "made"])?;
        git.run(&["rm", "-rqf", "."])?;
        git.commit_tree(&source(tree, None)?.tree, "tree")?;
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
        made.push((
            name,
            fs::read(&p).map_err(|e| format!("{}: {e}", p.display()))?,
        ));
    }
    Ok(made)
}

/// `cargo xtask patches --derive TREE`: the deltas that make `tree`'s
/// committed series (`nginx-src-patches/TREE/`, edited by hand where the
/// three-way merge cannot carry a change over) from the canonical one,
/// written to `deltas/TREE/` in place of what it held:
///
/// - a canonical patch whose subject the tree's series has is carried
///   over; where git's merge conflicts, what the tree's patch has between
///   the conflict's context lines is its resolution (`resolutions`: each
///   conflict, both sides as git marks them, and the text in its place),
///   used again by later regenerations wherever the same conflict comes
///   back, even after the canonical patch changed elsewhere; what the
///   tree's patch adds beyond that, in code or as a last paragraph of its
///   message, is a folded delta `NNNN+`;
/// - a canonical patch the tree's series lacks is replaced by the tree's
///   patch at its place whose subject the canonical series lacks;
/// - the tree's other patches are added after the series.
fn derive(tree: &str) -> Result {
    if tree == BASE {
        return Err(format!("{BASE} is the canonical series: nothing to derive"));
    }
    let (git, work, canonical, commits) = scratch(&dir(), &target_dir().join("patches"), tree)?;
    let own = series(&dir().join(tree))?;
    let subjects =
        |ps: &[PathBuf]| -> Result<Vec<String>> { ps.iter().map(|p| subject(p)).collect() };
    let (canon_subjects, own_subjects) = (subjects(&canonical)?, subjects(&own)?);
    // The tree's patches in the order regeneration makes them.
    let mut plan: Vec<(String, Option<usize>, PathBuf)> = Vec::new();
    let mut unmatched: Vec<usize> = (0..own.len())
        .filter(|i| !canon_subjects.contains(&own_subjects[*i]))
        .collect();
    for (c, s) in canon_subjects.iter().enumerate() {
        let n = number(&canonical[c]);
        if let Some(i) = own_subjects.iter().position(|o| o == s) {
            plan.push((n, Some(c), own[i].clone()));
        } else if !unmatched.is_empty() {
            let i = unmatched.remove(0);
            plan.push((n, None, own[i].clone()));
        } else {
            return Err(format!(
                "{tree}: its series has no patch for {} and none to put in its place",
                canonical[c].display()
            ));
        }
    }
    for (k, i) in unmatched.into_iter().enumerate() {
        plan.push((
            format!("{:04}", canonical.len() + k + 1),
            None,
            own[i].clone(),
        ));
    }
    // The tree's series as committed, in that order: `want`.
    git.run(&["checkout", "-q", "-b", "want", "tree"])?;
    let mut wanted = Vec::new();
    for (_, _, p) in &plan {
        git.am(std::slice::from_ref(p))?;
        wanted.push(git.output(&["rev-parse", "HEAD"])?.trim().to_string());
    }
    git.run(&["checkout", "-q", "-B", "made", "tree"])?;
    let mut resolutions = Vec::new();
    let out = work.join("deltas");
    fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    for ((n, carried, _), want) in plan.iter().zip(&wanted) {
        match carried {
            Some(c) => {
                let commit = &commits[*c];
                if git.run(&["cherry-pick", "--allow-empty", commit]).is_err() {
                    for f in git.lines(&["diff", "--name-only", "--diff-filter=U"])? {
                        let path = git.0.join(&f);
                        let text = fs::read_to_string(&path).map_err(|e| format!("{f}: {e}"))?;
                        let wanted = git.output(&["show", &format!("{want}:{f}")])?;
                        let found = Resolution::find(&f, &text, &wanted)
                            .map_err(|e| format!("{tree}: patch {n}: {e}"))?;
                        let resolved = resolve(&f, &text, &found)?;
                        fs::write(&path, resolved).map_err(|e| format!("{f}: {e}"))?;
                        git.run(&["add", &f])?;
                        resolutions.extend(found);
                    }
                    git.run(&["commit", "-q", "--allow-empty", "-C", commit])?;
                }
                let mine = git.output(&["log", "-1", "--format=%B", "HEAD"])?;
                let theirs = git.output(&["log", "-1", "--format=%B", want])?;
                let extra = theirs
                    .trim_end()
                    .strip_prefix(mine.trim_end())
                    .ok_or(format!(
                        "{tree}: the message of its patch {n} differs from the canonical one \
                         other than by paragraphs added at its end"
                    ))?
                    .trim()
                    .to_string();
                let differs = !git.output(&["diff", "HEAD", want, "--stat"])?.is_empty();
                if differs || !extra.is_empty() {
                    git.run(&["read-tree", "-u", "--reset", want])?;
                    let message = format!("{tree}: {n}\n\n{extra}\n");
                    git.run(&["commit", "-q", "--allow-empty", "-m", &message])?;
                    let name = format!("{n}+{tree}.patch");
                    let made = export(&git, &work.join("fold"), "HEAD~1..HEAD")?;
                    let (_, bytes) = made.into_iter().next().ok_or("no fold exported")?;
                    fs::write(out.join(&name), bytes).map_err(|e| format!("{name}: {e}"))?;
                    git.run(&["reset", "-q", "--soft", "HEAD~2"])?;
                    git.run(&["commit", "-q", "--allow-empty", "-C", want])?;
                }
            }
            None => {
                git.run(&["cherry-pick", "--allow-empty", want])?;
                let made = export(&git, &work.join("own"), "HEAD~1..HEAD")?;
                let (name, bytes) = made.into_iter().next().ok_or("no patch exported")?;
                let name = format!("{n}{}", &name[4..]);
                fs::write(out.join(&name), bytes).map_err(|e| format!("{name}: {e}"))?;
            }
        }
    }
    if !resolutions.is_empty() {
        let text: String = resolutions.iter().map(Resolution::render).collect();
        fs::write(out.join("resolutions"), text).map_err(|e| format!("resolutions: {e}"))?;
    }
    let dest = dir().join("deltas").join(tree);
    let _ = fs::remove_dir_all(&dest);
    if fs::read_dir(&out)
        .map_err(|e| e.to_string())?
        .next()
        .is_some()
    {
        crate::tree::copy_tree(&out, &dest)?;
    }
    eprintln!("xtask: patches: {tree}: deltas/{tree}/ derived from {tree}/");
    Ok(())
}

/// One conflict of a three-way merge: the file, both sides as git marks
/// them (`ours`, the tree's; `theirs`, the canonical patch's), and the
/// lines the tree's series has in its place.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Resolution {
    file: String,
    ours: Vec<String>,
    theirs: Vec<String>,
    resolved: Vec<String>,
}

/// A conflicted file: the lines outside conflicts, and the conflicts.
enum Part {
    Line(String),
    Conflict {
        ours: Vec<String>,
        theirs: Vec<String>,
    },
}

/// The parts of a file git left with conflict markers (`merge` style).
fn parts(text: &str) -> Result<Vec<Part>> {
    let mut out = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if !line.starts_with("<<<<<<< ") {
            out.push(Part::Line(line.to_string()));
            continue;
        }
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        let mut in_theirs = false;
        loop {
            let l = lines.next().ok_or("a conflict without its end")?;
            match l {
                "=======" if !in_theirs => in_theirs = true,
                _ if in_theirs && l.starts_with(">>>>>>> ") => break,
                _ if in_theirs => theirs.push(l.to_string()),
                _ => ours.push(l.to_string()),
            }
        }
        out.push(Part::Conflict { ours, theirs });
    }
    Ok(out)
}

/// `text` with each conflict replaced by its resolution in `recorded`;
/// fails naming the first conflict none resolves.
///
/// A conflict recorded with the same file and the same tree side (`ours`)
/// but whose canonical side has changed since (the canonical patch was
/// edited there) is resolved as git's rerere replays a resolution: the
/// change from the recorded canonical side to the new one, merged into
/// the recorded resolution (`git merge-file`), when exactly one record
/// merges cleanly.
fn resolve(file: &str, text: &str, recorded: &[Resolution]) -> Result<String> {
    let mut out = String::new();
    for part in parts(text)? {
        let lines = match part {
            Part::Line(l) => vec![l],
            Part::Conflict { ours, theirs } => {
                if let Some(r) = recorded
                    .iter()
                    .find(|r| r.file == file && r.ours == ours && r.theirs == theirs)
                {
                    r.resolved.clone()
                } else {
                    let merged: Vec<Vec<String>> = recorded
                        .iter()
                        .filter(|r| r.file == file && r.ours == ours)
                        .filter_map(|r| merge3(&r.resolved, &r.theirs, &theirs))
                        .collect();
                    match merged.as_slice() {
                        [one] => one.clone(),
                        _ => {
                            return Err(format!(
                                "no recorded resolution for the conflict whose canonical \
                                 side begins {:?}{}",
                                theirs.first().map_or("", String::as_str),
                                if merged.len() > 1 {
                                    " (several would merge: ambiguous)"
                                } else {
                                    ""
                                }
                            ))
                        }
                    }
                }
            }
        };
        for l in lines {
            out.push_str(&l);
            out.push('\n');
        }
    }
    Ok(out)
}

/// `git merge-file`: the change from `base` to `other` merged into
/// `current`, if it merges without a conflict.
fn merge3(current: &[String], base: &[String], other: &[String]) -> Option<Vec<String>> {
    let dir = std::env::temp_dir().join(format!(
        "xtask-merge3-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    fs::create_dir_all(&dir).ok()?;
    let write = |name: &str, lines: &[String]| -> Option<PathBuf> {
        let p = dir.join(name);
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        fs::write(&p, text).ok()?;
        Some(p)
    };
    let (c, b, o) = (
        write("current", current)?,
        write("base", base)?,
        write("other", other)?,
    );
    let out = Command::new("git")
        .args(["merge-file", "-p"])
        .args([&c, &b, &o])
        .output()
        .ok();
    let _ = fs::remove_dir_all(&dir);
    let out = out?;
    out.status.success().then(|| {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(String::from)
            .collect()
    })
}

/// How many lines of context place a conflict's resolution.
const CONTEXT: usize = 3;

impl Resolution {
    /// The resolution of each conflict in `text` (the file `file` as the
    /// merge left it) that `wanted` (the file as the tree's series has it)
    /// shows: the lines between the conflict's context lines there.
    fn find(file: &str, text: &str, wanted: &str) -> Result<Vec<Resolution>> {
        let parts = parts(text)?;
        let wanted: Vec<&str> = wanted.lines().collect();
        let mut found = Vec::new();
        let mut from = 0;
        for (i, part) in parts.iter().enumerate() {
            let Part::Conflict { ours, theirs } = part else {
                continue;
            };
            let before: Vec<&str> = parts[..i]
                .iter()
                .rev()
                .map_while(|p| match p {
                    Part::Line(l) => Some(l.as_str()),
                    Part::Conflict { .. } => None,
                })
                .take(CONTEXT)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            let after: Vec<&str> = parts[i + 1..]
                .iter()
                .map_while(|p| match p {
                    Part::Line(l) => Some(l.as_str()),
                    Part::Conflict { .. } => None,
                })
                .take(CONTEXT)
                .collect();
            let start = position(&wanted, &before, from).ok_or(format!(
                "{file}: the lines before a conflict are not in the tree's patch"
            ))? + before.len();
            let end = if after.is_empty() {
                wanted.len()
            } else {
                position(&wanted, &after, start).ok_or(format!(
                    "{file}: the lines after a conflict are not in the tree's patch"
                ))?
            };
            found.push(Resolution {
                file: file.to_string(),
                ours: ours.clone(),
                theirs: theirs.clone(),
                resolved: wanted[start..end].iter().map(|l| l.to_string()).collect(),
            });
            from = end;
        }
        Ok(found)
    }

    /// The record as `deltas/SELECTOR/resolutions` keeps it.
    fn render(&self) -> String {
        let mut out = format!("@@@ conflict {}\n", self.file);
        for (mark, lines) in [
            ("@@@ ours\n", &self.ours),
            ("@@@ theirs\n", &self.theirs),
            ("@@@ resolved\n", &self.resolved),
        ] {
            out.push_str(mark);
            for l in lines {
                out.push_str(l);
                out.push('\n');
            }
        }
        out.push_str("@@@ end\n");
        out
    }

    /// The records of a `resolutions` file.
    fn parse(text: &str) -> Result<Vec<Resolution>> {
        let mut out = Vec::new();
        let mut lines = text.lines();
        while let Some(head) = lines.next() {
            let file = head
                .strip_prefix("@@@ conflict ")
                .ok_or(format!("expected `@@@ conflict FILE`, found {head:?}"))?;
            let mut r = Resolution {
                file: file.to_string(),
                ours: Vec::new(),
                theirs: Vec::new(),
                resolved: Vec::new(),
            };
            let mut into: Option<&mut Vec<String>> = None;
            loop {
                let l = lines
                    .next()
                    .ok_or(format!("{file}: a record without `@@@ end`"))?;
                match l {
                    "@@@ ours" => into = Some(&mut r.ours),
                    "@@@ theirs" => into = Some(&mut r.theirs),
                    "@@@ resolved" => into = Some(&mut r.resolved),
                    "@@@ end" => break,
                    _ => into
                        .as_mut()
                        .ok_or(format!("{file}: a line before `@@@ ours`"))?
                        .push(l.to_string()),
                }
            }
            out.push(r);
        }
        Ok(out)
    }
}

/// Where `needle` first occurs in `hay` at or after `from` (an empty
/// needle: at `from`).
fn position(hay: &[&str], needle: &[&str], from: usize) -> Option<usize> {
    if needle.is_empty() {
        return Some(from);
    }
    (from..=hay.len().saturating_sub(needle.len())).find(|&i| hay[i..i + needle.len()] == *needle)
}

/// A patch's subject without its `[PATCH n/m]`.
fn subject(patch: &Path) -> Result<String> {
    let text = fs::read_to_string(patch).map_err(|e| format!("{}: {e}", patch.display()))?;
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("Subject: "))
        .ok_or(format!("{}: no Subject line", patch.display()))?;
    let line = match line.strip_prefix('[') {
        Some(rest) => rest.split_once("] ").map_or(rest, |(_, s)| s),
        None => line,
    };
    Ok(line.trim().to_string())
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
            let text = fs::read_to_string(&recorded)
                .map_err(|e| format!("{}: {e}", recorded.display()))?;
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
                return Err(format!(
                    "{tree}: two deltas for patch {n}: {} and {}",
                    other.display(),
                    p.display()
                ));
            }
        }
    }
    Ok(found)
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
    fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for p in series(dir)? {
        fs::remove_file(&p).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    for (name, bytes) in made {
        let p = dir.join(name);
        fs::write(&p, bytes).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    Ok(())
}

/// git in the scratch repository, with the fixed committer.
struct Git(PathBuf);

impl Git {
    fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("git");
        cmd.args(["-c", "core.abbrev=7", "-c", "commit.gpgsign=false"])
            .args(["-c", "merge.conflictStyle=merge"])
            .args(args)
            .current_dir(&self.0)
            // The repository lives under target/, inside this project's
            // work tree: never let git find the project's repository.
            .env(
                "GIT_CEILING_DIRECTORIES",
                self.0.parent().unwrap_or(&self.0),
            )
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .envs(COMMITTER)
            .env("GIT_AUTHOR_NAME", COMMITTER[0].1)
            .env("GIT_AUTHOR_EMAIL", COMMITTER[1].1)
            .env("GIT_AUTHOR_DATE", COMMITTER[2].1);
        cmd
    }

    /// Runs git; its output on success, git's account on failure.
    fn output(&self, args: &[&str]) -> Result<String> {
        let out = self
            .cmd(args)
            .output()
            .map_err(|e| format!("cannot run git: {e}"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!(
                "git {} ({}) failed: {}{}",
                args.join(" "),
                self.0.display(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    fn run(&self, args: &[&str]) -> Result {
        self.output(args).map(drop)
    }

    fn lines(&self, args: &[&str]) -> Result<Vec<String>> {
        Ok(self.output(args)?.lines().map(String::from).collect())
    }

    /// Commits `tree`'s `src/` (every patch touches only `src/`) as `name`
    /// and tags it so.
    fn commit_tree(&self, tree: &Path, name: &str) -> Result {
        let status = Command::new("cp")
            .arg("-a")
            .arg(tree.join("src"))
            .arg(&self.0)
            .status()
            .map_err(|e| format!("cannot run cp: {e}"))?;
        if !status.success() {
            return Err(format!("cannot copy {}/src", tree.display()));
        }
        self.run(&["add", "-A", "src"])?;
        self.run(&["commit", "-q", "-m", name])?;
        self.run(&["tag", name])
    }

    /// `git am` of each patch, the patch's author and date kept.
    fn am(&self, patches: &[PathBuf]) -> Result {
        for p in patches {
            let path = p.to_str().ok_or("a non-UTF-8 patch path")?;
            if let Err(e) = self.run(&["am", "-q", path]) {
                let _ = self.run(&["am", "--abort"]);
                return Err(format!("{} does not apply: {e}", p.display()));
            }
        }
        Ok(())
    }

    /// Carries canonical `commit` (from `patch`) over to `tree` by a
    /// three-way merge; on a conflict the error names the files and the
    /// repository, left as git left it, to resolve by hand.
    fn cherry_pick(
        &self,
        commit: &str,
        patch: &Path,
        tree: &str,
        work: &Path,
        recorded: &[Resolution],
    ) -> Result {
        if self.run(&["cherry-pick", "--allow-empty", commit]).is_ok() {
            return Ok(());
        }
        let mut conflicts = Vec::new();
        for file in self.lines(&["diff", "--name-only", "--diff-filter=U"])? {
            let path = self.0.join(&file);
            let text = fs::read_to_string(&path).map_err(|e| format!("{file}: {e}"))?;
            match resolve(&file, &text, recorded) {
                Ok(resolved) => {
                    fs::write(&path, resolved).map_err(|e| format!("{file}: {e}"))?;
                    self.run(&["add", &file])?;
                }
                Err(e) => conflicts.push(format!("{file}: {e}")),
            }
        }
        // Every conflict resolved as recorded: the commit, as the
        // canonical one's.
        if conflicts.is_empty() {
            return self.run(&["commit", "-q", "--allow-empty", "-C", commit]);
        }
        Err(format!(
            "{} does not carry over to {tree} by a three-way merge ({}). The \
             scratch repository is {}: edit nginx-src-patches/{tree}/ by hand to what \
             {tree} needs (the resolution there is a guide), then `cargo xtask patches \
             --derive {tree}` records it as {tree}'s delta",
            patch.display(),
            conflicts.join("; "),
            work.join("repo").display()
        ))
    }

    /// Applies the delta `fold` to the last commit and folds it in, its
    /// message body appended to the commit's message.
    fn fold(&self, fold: &Path, tree: &str, work: &Path) -> Result {
        let split = work.join("fold");
        fs::create_dir_all(&split).map_err(|e| format!("{}: {e}", split.display()))?;
        let (msg, diff) = (split.join("msg"), split.join("diff"));
        let input = fs::File::open(fold).map_err(|e| format!("{}: {e}", fold.display()))?;
        let status = self
            .cmd(&[
                "mailinfo",
                msg.to_str().ok_or("a non-UTF-8 path")?,
                diff.to_str().ok_or("a non-UTF-8 path")?,
            ])
            .stdin(input)
            .stdout(std::process::Stdio::null())
            .status()
            .map_err(|e| format!("cannot run git mailinfo: {e}"))?;
        if !status.success() {
            return Err(format!("{}: not a patch git can read", fold.display()));
        }
        if fs::metadata(&diff).is_ok_and(|m| m.len() > 0) {
            let path = diff.to_str().ok_or("a non-UTF-8 path")?;
            self.run(&["apply", "--index", path]).map_err(|e| {
                format!(
                    "{} does not apply to {tree} once the canonical patch is carried over \
                     (refresh it against {}): {e}",
                    fold.display(),
                    work.join("repo").display()
                )
            })?;
        }
        let body = fs::read_to_string(&msg).map_err(|e| format!("{}: {e}", msg.display()))?;
        let message = self.output(&["log", "-1", "--format=%B"])?;
        let message = format!("{}\n\n{}\n", message.trim_end(), body.trim());
        self.run(&["commit", "-q", "--amend", "--allow-empty", "-m", &message])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_selector_is_a_tree_or_a_prefix_ending_at_a_dot() {
        assert!(selects("1.28", "1.28.0"));
        assert!(selects("1.28", "1.28.3"));
        assert!(selects("tengine-3.2.0", "tengine-3.2.0"));
        assert!(!selects("1.2", "1.28.0"));
        assert!(!selects("1.28.0", "1.28.3"));
        assert!(!selects("angie", "angie-1.12.1"));
    }

    #[test]
    fn a_patch_number_is_its_leading_digits() {
        assert_eq!(number(Path::new("x/0003-Upstream-a.patch")), "0003");
        assert_eq!(number(Path::new("0001+tengine.patch")), "0001");
    }

    const CONFLICT: &str =
        "a\nb\nc\n<<<<<<< HEAD\nmine\n=======\ntheirs\nmore\n>>>>>>> 1234 (x)\nd\ne\n";

    #[test]
    fn a_conflict_is_resolved_as_recorded_and_only_so() {
        let wanted = "a\nb\nc\nmine\n\ntheirs\nmore\nd\ne\n";
        let found = Resolution::find("f.c", CONFLICT, wanted).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].ours, ["mine"]);
        assert_eq!(found[0].theirs, ["theirs", "more"]);
        assert_eq!(found[0].resolved, ["mine", "", "theirs", "more"]);
        // What `deltas/SELECTOR/resolutions` keeps reads back the same.
        let text: String = found.iter().map(Resolution::render).collect();
        assert_eq!(Resolution::parse(&text).unwrap(), found);
        assert_eq!(resolve("f.c", CONFLICT, &found).unwrap(), wanted);
        // Another file, or another side, is another conflict.
        let err = resolve("g.c", CONFLICT, &found).unwrap_err();
        assert!(err.contains("\"theirs\""), "{err}");
        // Changed where the resolution changed it too: not resolved.
        let changed = CONFLICT.replace("theirs\nmore", "other\nmore");
        assert!(resolve("f.c", &changed, &found).is_err());
        assert!(Resolution::parse("@@@ conflict f.c\n@@@ ours\nx\n").is_err());
        // The canonical side changed where the resolution did not touch
        // it: the change is merged into the recorded resolution.
        let edited = CONFLICT.replace("more\n", "more\nadded\n");
        assert_eq!(
            resolve("f.c", &edited, &found).unwrap(),
            wanted.replace("more\n", "more\nadded\n")
        );
    }

    /// The point of one series: a change to the canonical patch reaches
    /// every tree's series, through the three-way merge, the recorded
    /// resolutions and the folded deltas, with no other edit. Here a line
    /// of 0003's code (in the function it adds; Angie's and Tengine's
    /// series of 0003 need a resolution and a delta elsewhere) is changed
    /// in a copy of `nginx-src-patches/`.
    #[test]
    fn one_edit_to_the_canonical_series_reaches_every_tree() {
        if crate::source::mirror().is_none() {
            eprintln!(
                "no mirror ({}): the forks' sources are not here",
                crate::source::MIRROR_ENV
            );
            return;
        }
        let copy = target_dir().join("patches-test/src");
        let _ = fs::remove_dir_all(&copy);
        crate::tree::copy_tree(&dir(), &copy).unwrap();
        let p = series(&copy.join(BASE)).unwrap()[2].clone();
        let text = fs::read_to_string(&p).unwrap();
        let old = "+    /* on allocation failure the address may be tried again after a change */";
        assert!(
            text.contains(old),
            "{}: the line this test edits",
            p.display()
        );
        let new = "+    /* on allocation failure the address may be tried again: one edit */";
        fs::write(&p, text.replace(old, new)).unwrap();
        for tree in MATRIX {
            let made = regenerate_from(&copy, &target_dir().join("patches-test"), tree)
                .unwrap_or_else(|e| panic!("{tree}: {e}"));
            let (_, third) = made.iter().find(|(n, _)| n.starts_with("0003")).unwrap();
            let third = String::from_utf8_lossy(third);
            assert!(
                third.contains(new),
                "{tree}: the edit did not reach its 0003"
            );
            assert!(
                !third.contains(old),
                "{tree}: its 0003 still has the old line"
            );
        }
    }

    #[test]
    fn the_base_is_a_tree_of_the_matrix() {
        assert!(MATRIX.contains(&BASE));
    }
}
