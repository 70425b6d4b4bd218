//! A mutant applied to the private copy of the repository: the copy kept
//! equal to the working tree's tracked files, the mutant's text found
//! exactly once (whitespace-tolerant), and the file put back afterwards.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::Mutant;
use crate::tree::{copy_if_changed, files};
use crate::workspace::{root, At, Result};

/// `tree` made equal to the tracked files of the workspace as they are in
/// the working tree (unchanged files keep their times, so cargo rebuilds
/// only what differs from the last run).
pub(super) fn sync_tree(tree: &Path) -> Result {
    let out = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(root())
        .output()
        .running("git ls-files")?;
    if !out.status.success() {
        return err!("git ls-files: {}", String::from_utf8_lossy(&out.stderr));
    }
    let tracked: BTreeSet<PathBuf> = String::from_utf8_lossy(&out.stdout)
        .split('\0')
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .collect();
    let mut wanted = BTreeSet::new();
    for rel in &tracked {
        let from = root().join(rel);
        // A tracked file deleted in the working tree is left out.
        if from.is_file() {
            copy_if_changed(&from, &tree.join(rel))?;
            wanted.insert(tree.join(rel));
        }
    }
    if tree.is_dir() {
        for f in files(tree, &|_| false)? {
            if !wanted.contains(&f) {
                fs::remove_file(&f).at(&f)?;
            }
        }
    }
    Ok(())
}

/// Puts a file of the copy back as it was when dropped.
pub(super) struct Restore {
    pub(super) path: PathBuf,
    pub(super) text: String,
}

impl Drop for Restore {
    fn drop(&mut self) {
        if let Err(e) = fs::write(&self.path, &self.text) {
            eprintln!("xtask: cannot restore {}: {e}", self.path.display());
        }
    }
}

/// `find` occurs exactly once in `text` (see [`locate`]): where.
pub(super) fn check_applies(m: &Mutant, text: &str) -> Result<std::ops::Range<usize>> {
    let found = locate(text, m.find);
    match found.as_slice() {
        [one] => Ok(one.clone()),
        _ => err!(
            "mutant {}: its text occurs {} times in {}, not once:\n{}",
            m.name,
            found.len(),
            m.file,
            m.find
        ),
    }
}

/// Where `find` occurs in `text`, any run of whitespace between its tokens
/// standing for any other (a line break for a space, a continuation
/// line's indent); its leading indent, if any, must be the line's whole
/// indent. The spans run from that indent to its last token's end, plus
/// the newline `find` ends with.
pub(super) fn locate(text: &str, find: &str) -> Vec<std::ops::Range<usize>> {
    let tokens: Vec<&str> = find.split_whitespace().collect();
    let Some(first) = tokens.first() else {
        return Vec::new();
    };
    let trailing = find.len() - find.trim_end().len();
    let mut found = Vec::new();
    let lead = &find[..find.len() - find.trim_start().len()];
    for (start, _) in text.match_indices(first) {
        // `find`'s indent is the line's whole indent in the text: it tells
        // apart the same statement at two depths (rustfmt only moves an
        // indent with the code's nesting).
        if !lead.is_empty() {
            let before = &text[..start];
            let line_start = before.rfind('\n').map_or(0, |i| i + 1);
            if !before.ends_with(lead) || line_start + lead.len() != start {
                continue;
            }
        }
        let mut at = start + first.len();
        let mut ok = true;
        for t in &tokens[1..] {
            let rest = &text[at..];
            let skipped = rest.len() - rest.trim_start().len();
            if skipped == 0 || !rest[skipped..].starts_with(t) {
                ok = false;
                break;
            }
            at += skipped + t.len();
        }
        if !ok {
            continue;
        }
        if trailing > 0 {
            let rest = &text[at..];
            let ws = rest.len() - rest.trim_start().len();
            if ws == 0 && !rest.is_empty() {
                continue;
            }
            // As much of the whitespace as `find` has lines: the newline
            // ending it, not the next line's indent.
            let newline = rest[..ws].find('\n').map_or(ws, |i| i + 1);
            at += if find.ends_with('\n') {
                newline
            } else {
                ws.min(trailing)
            };
        }
        found.push(start - lead.len()..at);
    }
    found
}

pub(super) fn read(path: &Path) -> Result<String> {
    fs::read_to_string(path).at(path)
}

pub(super) fn write(path: &Path, text: &str) -> Result {
    fs::write(path, text).at(path)
}
