//! Reads nginx's tokens into directives: `nginx -T`'s files, each
//! directive with its arguments and block, and every `include` replaced
//! by the files it names (from the dump, else the disk, as glob(3) finds
//! them).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use super::tokens::{tokenize, Token};

/// One directive: its name, arguments and block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Directive {
    pub(super) name: String,
    pub(super) args: Vec<String>,
    pub(super) block: Option<Vec<Directive>>,
}

/// `nginx -T`'s files, in order: (path, text).
pub(super) fn dumped_files(text: &str) -> Vec<(PathBuf, String)> {
    let mut out: Vec<(PathBuf, String)> = Vec::new();
    for line in text.split_inclusive('\n') {
        let marker = line
            .trim_end()
            .strip_prefix("# configuration file ")
            .and_then(|r| r.strip_suffix(':'));
        match (marker, out.last_mut()) {
            (Some(p), _) => out.push((PathBuf::from(p), String::new())),
            (None, Some((_, t))) => t.push_str(line),
            (None, None) => {}
        }
    }
    out
}

/// Where included files come from: the dump, else the disk.
pub(super) struct Source {
    pub(super) dumped: BTreeMap<PathBuf, String>,
    pub(super) prefix: PathBuf,
}

impl Source {
    pub(super) fn parse_file(
        &self,
        text: &str,
        path: &Path,
        depth: usize,
    ) -> Result<Vec<Directive>, String> {
        if depth > 16 {
            return Err(format!("{}: includes nested too deep", path.display()));
        }
        let tokens = tokenize(text).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut pos = 0;
        let (items, closed) = self.block(&tokens, &mut pos, path, depth)?;
        if closed {
            return Err(format!("{}: unexpected \"}}\"", path.display()));
        }
        Ok(items)
    }

    fn block(
        &self,
        tokens: &[Token],
        pos: &mut usize,
        path: &Path,
        depth: usize,
    ) -> Result<(Vec<Directive>, bool), String> {
        let mut items = Vec::new();
        let mut words: Vec<String> = Vec::new();
        while *pos < tokens.len() {
            let t = &tokens[*pos];
            *pos += 1;
            match t {
                Token::Word(w) => words.push(w.clone()),
                Token::Semi => {
                    let Some((name, args)) = words.split_first() else {
                        continue;
                    };
                    if name == "include" && !args.is_empty() {
                        for (p, text) in self.included(&args[0]) {
                            items.extend(self.parse_file(&text, &p, depth + 1)?);
                        }
                    } else {
                        items.push(Directive {
                            name: name.clone(),
                            args: args.to_vec(),
                            block: None,
                        });
                    }
                    words.clear();
                }
                Token::Open => {
                    let (inner, closed) = self.block(tokens, pos, path, depth)?;
                    if !closed {
                        return Err(format!(
                            "{}: unexpected end of file, expecting \"}}\"",
                            path.display()
                        ));
                    }
                    let Some((name, args)) = words.split_first() else {
                        return Err(format!("{}: a block without a name", path.display()));
                    };
                    items.push(Directive {
                        name: name.clone(),
                        args: args.to_vec(),
                        block: Some(inner),
                    });
                    words.clear();
                }
                Token::Close => return Ok((items, true)),
            }
        }
        Ok((items, false))
    }

    /// The files an `include PATTERN` names: from the dump when it has
    /// them, else from the disk; sorted, as nginx's glob gives them.
    fn included(&self, pattern: &str) -> Vec<(PathBuf, String)> {
        let full = if Path::new(pattern).is_absolute() {
            PathBuf::from(pattern)
        } else {
            self.prefix.join(pattern)
        };
        let full_s = full.to_string_lossy().into_owned();
        let mut found: Vec<(PathBuf, String)> = self
            .dumped
            .iter()
            .filter(|(p, _)| glob_match(&full_s, &p.to_string_lossy()))
            .map(|(p, t)| (p.clone(), t.clone()))
            .collect();
        if found.is_empty() && self.dumped.is_empty() {
            let dir = full.parent().unwrap_or(Path::new("/"));
            let name = full
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            if let Ok(rd) = fs::read_dir(dir) {
                for e in rd.flatten() {
                    let n = e.file_name().to_string_lossy().into_owned();
                    if glob_match(&name, &n) {
                        if let Ok(t) = fs::read_to_string(e.path()) {
                            found.push((e.path(), t));
                        }
                    }
                }
            }
        }
        found.sort();
        found
    }
}

/// `*` and `?` as glob(3) has them (`*` not crossing `/`).
pub(super) fn glob_match(pattern: &str, name: &str) -> bool {
    fn go(p: &[u8], n: &[u8]) -> bool {
        match (p.first(), n.first()) {
            (None, None) => true,
            (Some(b'*'), _) => go(&p[1..], n) || (!n.is_empty() && n[0] != b'/' && go(p, &n[1..])),
            (Some(b'?'), Some(c)) if *c != b'/' => go(&p[1..], &n[1..]),
            (Some(a), Some(b)) if a == b => go(&p[1..], &n[1..]),
            _ => false,
        }
    }
    go(pattern.as_bytes(), name.as_bytes())
}
