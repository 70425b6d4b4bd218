//! The conflicts git's three-way merge meets on a tree, and their
//! recorded resolutions (`deltas/SELECTOR/resolutions`).

use std::fs;
use std::path::PathBuf;

use crate::workspace::Result;

/// One conflict of a three-way merge: the file, both sides as git marks
/// them (`ours`, the tree's; `theirs`, the canonical patch's), and the
/// lines the tree's series has in its place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Resolution {
    pub(super) file: String,
    pub(super) ours: Vec<String>,
    pub(super) theirs: Vec<String>,
    pub(super) resolved: Vec<String>,
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
pub(super) fn resolve(file: &str, text: &str, recorded: &[Resolution]) -> Result<String> {
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
                            return err!(
                                "no recorded resolution for the conflict whose canonical \
                                 side begins {:?}{}",
                                theirs.first().map_or("", String::as_str),
                                if merged.len() > 1 {
                                    " (several would merge: ambiguous)"
                                } else {
                                    ""
                                }
                            )
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
    let out = super::git::isolated(&dir)
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
    pub(super) fn find(file: &str, text: &str, wanted: &str) -> Result<Vec<Resolution>> {
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
    pub(super) fn render(&self) -> String {
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
    pub(super) fn parse(text: &str) -> Result<Vec<Resolution>> {
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
