//! Reads the module's sources for what the layout gate checks: the nginx
//! structures they spell and the accessors they call (the bitfields).

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

/// The `ngx_*_t` and `ngx_*_s` names the module's sources spell, and every
/// identifier called as a method (`.name(`), which covers the bitfield
/// accessors it calls.
pub(super) fn scan(dir: &Path) -> Result<(BTreeSet<String>, BTreeSet<String>), String> {
    let mut named = BTreeSet::new();
    let mut called = BTreeSet::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).map_err(|e| format!("{}: {e}", d.display()))? {
            let p = e.map_err(|e| e.to_string())?.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            if p.extension().is_none_or(|x| x != "rs") {
                continue;
            }
            println!("cargo::rerun-if-changed={}", p.display());
            let text = fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            // Code only: a comment may name an accessor the code avoids.
            let text: String = text
                .lines()
                .map(|l| l.split_once("//").map_or(l, |(code, _)| code))
                .collect::<Vec<_>>()
                .join("\n");
            let toks = idents(&text);
            for (t, start) in toks {
                if t.starts_with("ngx_") && (t.ends_with("_t") || t.ends_with("_s")) {
                    named.insert(t.to_string());
                }
                let after = &text[start + t.len()..];
                // A bitfield's getter takes no argument, its setter one:
                // `.NAME()`, `.set_NAME(`; and by path, `T::NAME(`,
                // `T::NAME_raw(`, `T::set_NAME_raw(` (the raw forms are
                // associated functions).
                if start > 1 && text[..start].ends_with("::") && after.starts_with('(') {
                    let t = t.strip_suffix("_raw").unwrap_or(t);
                    let t = t.strip_prefix("set_").unwrap_or(t);
                    // Called on a structure it names (`ngx_peer_connection_t::
                    // cached(pc)`): that structure's bitfield alone, not every
                    // one of the name (`ngx_http_request_t` has a `cached` too).
                    let on = text[..start - 2]
                        .rsplit(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                        .next()
                        .filter(|ty| ty.starts_with("ngx_"));
                    called.insert(on.map_or_else(|| t.to_string(), |ty| typed(ty, t)));
                } else if start > 0 && text.as_bytes()[start - 1] == b'.' {
                    let t = t.strip_suffix("_raw").unwrap_or(t);
                    if let Some(set) = t.strip_prefix("set_").filter(|_| after.starts_with('(')) {
                        called.insert(set.to_string());
                    } else if after.starts_with("()") {
                        called.insert(t.to_string());
                    }
                }
            }
        }
    }
    Ok((named, called))
}

/// How a bitfield called on a structure it names is recorded:
/// `STRUCTURE::NAME`, the structure without its `_t` or `_s`.
pub(super) fn typed(structure: &str, name: &str) -> String {
    let base = structure
        .strip_suffix("_t")
        .or_else(|| structure.strip_suffix("_s"))
        .unwrap_or(structure);
    format!("{base}::{name}")
}

/// Identifiers of `text` with their byte offsets.
fn idents(text: &str) -> Vec<(&str, usize)> {
    let b = text.as_bytes();
    let mut v = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_alphabetic() || b[i] == b'_' {
            let s = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            v.push((&text[s..i], s));
        } else {
            i += 1;
        }
    }
    v
}
