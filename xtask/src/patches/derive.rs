//! `cargo xtask patches --derive TREE`: a tree's deltas, recorded from its
//! committed series.

use std::fs;
use std::path::{Path, PathBuf};

use super::resolve::{resolve, Resolution};
use super::{dir, export, number, scratch, series, BASE};
use crate::workspace::{target_dir, At, Result};

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
pub(super) fn derive(tree: &str) -> Result {
    if tree == BASE {
        return err!("{BASE} is the canonical series: nothing to derive");
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
            return err!(
                "{tree}: its series has no patch for {} and none to put in its place",
                canonical[c].display()
            );
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
    fs::create_dir_all(&out).at(&out)?;
    for ((n, carried, _), want) in plan.iter().zip(&wanted) {
        match carried {
            Some(c) => {
                let commit = &commits[*c];
                if git
                    .run(&["cherry-pick", "--strategy=ort", "--allow-empty", commit])
                    .is_err()
                {
                    for f in git.lines(&["diff", "--name-only", "--diff-filter=U"])? {
                        let path = git.0.join(&f);
                        let text = fs::read_to_string(&path).at(&path)?;
                        let wanted = git.output(&["show", &format!("{want}:{f}")])?;
                        let found = Resolution::find(&f, &text, &wanted)
                            .map_err(|e| format!("{tree}: patch {n}: {e}"))?;
                        let resolved = resolve(&f, &text, &found)?;
                        fs::write(&path, resolved).at(&path)?;
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
                    fs::write(out.join(&name), bytes).at(out.join(&name))?;
                    git.run(&["reset", "-q", "--soft", "HEAD~2"])?;
                    git.run(&["commit", "-q", "--allow-empty", "-C", want])?;
                }
            }
            None => {
                git.run(&["cherry-pick", "--strategy=ort", "--allow-empty", want])?;
                let made = export(&git, &work.join("own"), "HEAD~1..HEAD")?;
                let (name, bytes) = made.into_iter().next().ok_or("no patch exported")?;
                let name = format!("{n}{}", &name[4..]);
                fs::write(out.join(&name), bytes).at(out.join(&name))?;
            }
        }
    }
    if !resolutions.is_empty() {
        let text: String = resolutions.iter().map(Resolution::render).collect();
        fs::write(out.join("resolutions"), text).at(out.join("resolutions"))?;
    }
    // A replacement another selector already gives (`deltas/1.28/` for
    // 1.28.0) stays there, not twice.
    let others = super::deltas_of_others(tree)?;
    for p in series(&out)? {
        let name = p
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        if !name.contains('+') && others.contains(&number(&p)) {
            fs::remove_file(&p).at(&p)?;
        }
    }
    let dest = dir().join("deltas").join(tree);
    let kept = work.join("kept");
    if dest.is_dir() {
        crate::tree::copy_tree(&dest, &kept)?;
    }
    let _ = fs::remove_dir_all(&dest);
    if fs::read_dir(&out).at(&out)?.next().is_some() {
        crate::tree::copy_tree(&out, &dest)?;
    }
    // The deltas must make the series they were derived from again, or
    // nothing changes: the hand-edited series is never overwritten by a
    // regeneration that differs from it.
    let made = super::regenerate(tree)?;
    let differs = super::compare(&dir().join(tree), &made)
        .map(|d| {
            d.into_iter()
                .filter(|n| !n.ends_with("(made no more)"))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    let metadata_only = differs.is_empty() || same_code(&dir().join(tree), &made);
    if !metadata_only {
        let _ = fs::remove_dir_all(&dest);
        if kept.is_dir() {
            crate::tree::copy_tree(&kept, &dest)?;
        }
        return err!(
            "{tree}: the deltas derived do not make its series again ({}); \
             deltas/{tree}/ is left as it was",
            differs.join(", ")
        );
    }
    eprintln!("xtask: patches: {tree}: deltas/{tree}/ derived from {tree}/");
    Ok(())
}

/// Whether `made` has the same changes as the series in `dir`: its diff
/// lines, not its headers, index lines, numbering or file names (a series
/// edited by hand keeps stale diffstats and `[PATCH n/m]` that the
/// regeneration mends).
fn same_code(dir: &Path, made: &super::Series) -> bool {
    let code = |text: &str| -> Vec<String> {
        text.lines()
            .skip_while(|l| !l.starts_with("diff --git "))
            .filter(|l| {
                (l.starts_with('+') || l.starts_with('-') || l.starts_with(' '))
                    && !l.starts_with("---")
                    && !l.starts_with("+++")
            })
            .map(String::from)
            .collect()
    };
    let Ok(own) = series(dir) else {
        return false;
    };
    let had: Vec<String> = own
        .iter()
        .filter_map(|p| fs::read_to_string(p).ok())
        .flat_map(|t| code(&t))
        .collect();
    let now: Vec<String> = made
        .iter()
        .flat_map(|(_, b)| code(&String::from_utf8_lossy(b)))
        .collect();
    let (mut had, mut now) = (had, now);
    had.sort();
    now.sort();
    had == now
}

/// A patch's subject without its `[PATCH n/m]`.
fn subject(patch: &Path) -> Result<String> {
    let text = fs::read_to_string(patch).at(patch)?;
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
