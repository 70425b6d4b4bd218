//! The do-nothing mutant's judge: the tests of `t/tests` that declare
//! themselves non-regression guards (`/// Non-regression guard:`), read
//! from the test sources, macros' generated names included.

use std::collections::BTreeSet;

use super::apply::read;
use crate::harness::suite_modules;
use crate::tree::files;
use crate::workspace::{root, Result};

/// The line that makes a test a declared non-regression guard.
pub const GUARD: &str = "/// Non-regression guard:";

/// Every declared guard of `t/tests`, as `BINARY::NAME` (`NAME` with its
/// module path in a binary split into modules, as libtest names it).
pub(super) fn declared_guards() -> Result<BTreeSet<String>> {
    let mut all = BTreeSet::new();
    for b in suite_modules()? {
        for (module, text) in test_sources(&b)? {
            all.extend(
                guards(&text)
                    .into_iter()
                    .map(|t| format!("{b}::{module}{t}")),
            );
        }
    }
    Ok(all)
}

/// Whether the test `id` (its path in the suite) is a declared guard of
/// `guards`: named as declared, or inside one module a macro generated
/// around it, which the sources do not name (`protocols::fastcgi::NAME`
/// for `protocols::NAME`, declared in the `protocol!` macro's body).
pub(super) fn is_declared(guards: &BTreeSet<String>, id: &str) -> bool {
    let parts: Vec<&str> = id.split("::").collect();
    guards.contains(id)
        || (1..parts.len().saturating_sub(1)).any(|i| {
            let mut p = parts.clone();
            p.remove(i);
            guards.contains(&p.join("::"))
        })
}

/// The guards of modules `ran` that name none of the tests `seen` run
/// there: a renamed test, or a declaration this parser misreads.
pub(super) fn stale<'a>(
    guards: &'a BTreeSet<String>,
    ran: &[String],
    seen: &[String],
) -> Vec<&'a String> {
    guards
        .iter()
        .filter(|g| ran.iter().any(|m| g.starts_with(&format!("{m}::"))))
        .filter(|g| {
            !seen.iter().any(|t| {
                let one = BTreeSet::from([(*g).clone()]);
                is_declared(&one, t)
            })
        })
        .collect()
}

/// The sources of the suite's module `binary` (once a test binary of its
/// own), each with the module path its tests' names start with after
/// `BINARY::`: `t/tests/BINARY.rs` (none), and each file of its
/// directory, `t/tests/BINARY/`, if any (`NAME.rs` `NAME::`, `a/b.rs`
/// `a::b::`, `a/mod.rs` `a::`).
pub(super) fn test_sources(binary: &str) -> Result<Vec<(String, String)>> {
    let tests = root().join("t/tests");
    let file = tests.join(format!("{binary}.rs"));
    let dir = tests.join(binary);
    let mut out = vec![(String::new(), read(&file)?)];
    if !dir.is_dir() {
        return Ok(out);
    }
    for f in files(&dir, &|_| false)? {
        if f.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let rel = f.strip_prefix(&dir).unwrap_or(&f).with_extension("");
        let mut parts: Vec<String> = rel
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        if parts.last().is_some_and(|p| p == "mod") {
            parts.pop();
        }
        let module = parts.iter().map(|p| format!("{p}::")).collect();
        out.push((module, read(&f)?));
    }
    Ok(out)
}

/// The tests of a test binary's source that declare themselves
/// non-regression guards: a line of the doc comment right above the test
/// starts with [`GUARD`]. A test written as `fn $frag` in a `macro_rules!`
/// stands for the names its invocations give `$frag`, read from each entry
/// (one per line: the identifiers before its `=>`, in the order of the
/// matcher's `$frag:ident`s).
pub fn guards(source: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut in_macro: Option<String> = None;
    let mut guarded = false;
    for line in source.lines() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("macro_rules!") {
            in_macro = Some(ident_at(rest.trim_start()));
            guarded = false;
            continue;
        }
        if t.starts_with(GUARD) {
            guarded = true;
            continue;
        }
        if t.starts_with("///") || t.starts_with("#[") || t.is_empty() && guarded {
            continue;
        }
        if let (true, Some(name)) = (guarded, fn_name(t)) {
            match (name.strip_prefix('$'), &in_macro) {
                (Some(frag), Some(mac)) => out.extend(macro_names(source, mac, frag)),
                _ => {
                    out.insert(name);
                }
            }
        }
        guarded = false;
    }
    out
}

/// The identifier at the start of `s` (a `$` before it kept).
fn ident_at(s: &str) -> String {
    s.chars()
        .enumerate()
        .take_while(|(i, c)| c.is_alphanumeric() || *c == '_' || (*i == 0 && *c == '$'))
        .map(|(_, c)| c)
        .collect()
}

/// The function a line declares (`pub async fn name(...`), if it does.
fn fn_name(line: &str) -> Option<String> {
    let mut words = line.split_whitespace();
    loop {
        match words.next()? {
            "pub" | "pub(crate)" | "async" | "unsafe" | "const" | "extern" => continue,
            "fn" => return Some(ident_at(words.next()?)).filter(|n| !n.is_empty()),
            _ => return None,
        }
    }
}

/// The names the invocations of `mac` give its `$frag:ident`.
fn macro_names(source: &str, mac: &str, frag: &str) -> Vec<String> {
    let Some(def) = source.find(&format!("macro_rules! {mac}")) else {
        return Vec::new();
    };
    let rest = &source[def..];
    let matcher = &rest[..rest.find(") =>").unwrap_or(rest.len())];
    let frags: Vec<String> = matcher
        .split('$')
        .skip(1)
        .filter_map(|p| p.split_once(":ident").map(|(n, _)| n.to_string()))
        .filter(|n| n.chars().all(|c| c.is_alphanumeric() || c == '_'))
        .collect();
    let Some(pos) = frags.iter().position(|f| f == frag) else {
        return Vec::new();
    };
    let mut names = Vec::new();
    let invocation = format!("{mac}! {{");
    for (at, _) in source.match_indices(&invocation) {
        // The whole macro's name, not the end of a longer one.
        let before = source[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let body = &source[at..];
        let body = &body[body.find('{').map_or(0, |i| i + 1)..];
        for entry in body.lines() {
            let entry = entry.trim();
            if entry.starts_with('}') {
                break;
            }
            let Some((idents, _)) = entry.split_once("=>") else {
                continue;
            };
            if let Some(name) = idents.split(',').map(str::trim).nth(pos) {
                names.push(name.to_string());
            }
        }
    }
    names
}
