//! nginx's structures as the C compiler sees them, read from the
//! preprocessed headers: each structure's (and typedef's) named members,
//! plain fields, bitfields and embedded structures.

use std::collections::{BTreeMap, BTreeSet};

#[derive(Clone, Debug)]
pub(super) enum Member {
    Plain(String),
    Bits(String),
    /// A member that is itself a structure (not a pointer to one), by its
    /// type's name: checked with the structure that embeds it.
    Embeds(String),
}

/// Structures and typedefs of the preprocessed headers.
pub(super) struct CTypes {
    /// `struct TAG { ... }` bodies by tag, and typedef'd bodies by name.
    pub(super) bodies: BTreeMap<String, Vec<Member>>,
    /// `typedef struct TAG NAME;`: NAME to TAG.
    aliases: BTreeMap<String, String>,
    /// Tags (`struct TAG { ... }`), spelt `struct TAG` in C.
    tags: BTreeSet<String>,
}

impl CTypes {
    pub(super) fn parse(text: &str) -> CTypes {
        let clean: String = text
            .lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n");
        let toks = tokens(&clean);
        let mut bodies = BTreeMap::new();
        let mut aliases = BTreeMap::new();
        let mut tags = BTreeSet::new();
        let mut i = 0;
        while i < toks.len() {
            let t = toks[i].as_str();
            if t == "struct" || t == "union" {
                let typedef = i > 0 && toks[i - 1] == "typedef";
                let mut j = i + 1;
                let tag = toks.get(j).filter(|s| is_ident(s)).cloned();
                if tag.is_some() {
                    j += 1;
                }
                if toks.get(j).map(String::as_str) == Some("{") {
                    let end = matching(&toks, j);
                    let members = members(&toks[j + 1..end]);
                    if let Some(tag) = &tag {
                        bodies.insert(tag.clone(), members.clone());
                        tags.insert(tag.clone());
                    }
                    if typedef {
                        if let Some(name) = toks.get(end + 1).filter(|s| is_ident(s)) {
                            bodies.insert(name.clone(), members);
                        }
                    }
                    i = end + 1;
                    continue;
                }
                if typedef {
                    if let (Some(tag), Some(name)) = (&tag, toks.get(j).filter(|s| is_ident(s))) {
                        aliases.insert(name.clone(), tag.clone());
                    }
                }
            } else if t == "typedef" {
                // `typedef OTHER NAME;`: a typedef of a typedef.
                if let (Some(other), Some(name), Some(";")) = (
                    toks.get(i + 1).filter(|s| is_ident(s)),
                    toks.get(i + 2).filter(|s| is_ident(s)),
                    toks.get(i + 3).map(String::as_str),
                ) {
                    aliases.insert(name.clone(), other.clone());
                }
            }
            i += 1;
        }
        CTypes {
            bodies,
            aliases,
            tags,
        }
    }

    /// The C type expression for `name` and its members: a typedef'd
    /// structure by its name, a tag as `struct TAG`.
    pub(super) fn resolve(&self, name: &str) -> Option<(String, &Vec<Member>)> {
        let mut target = name;
        for _ in 0..8 {
            if self.bodies.contains_key(target) {
                break;
            }
            target = self.aliases.get(target)?;
        }
        let body = self.bodies.get(target)?;
        if target != name {
            return Some((name.to_owned(), body));
        }
        let c_type = if self.tags.contains(name) {
            format!("struct {name}")
        } else {
            name.to_owned()
        };
        Some((c_type, body))
    }
}

pub(super) fn is_ident(s: &str) -> bool {
    s.bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && !matches!(
            s,
            "struct" | "union" | "const" | "volatile" | "unsigned" | "signed"
        )
}

/// C tokens: identifiers, numbers, and each punctuation character alone.
fn tokens(text: &str) -> Vec<String> {
    let b = text.as_bytes();
    let mut v = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c.is_ascii_alphanumeric() || c == b'_' {
            let s = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            v.push(text[s..i].to_owned());
        } else if c == b'"' || c == b'\'' {
            // A literal (in an initialiser or attribute): skipped whole.
            i += 1;
            while i < b.len() && b[i] != c {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
        } else {
            v.push((c as char).to_string());
            i += 1;
        }
    }
    v
}

/// The index of the bracket closing the one at `open`.
fn matching(toks: &[String], open: usize) -> usize {
    let mut depth = 0usize;
    for (k, t) in toks.iter().enumerate().skip(open) {
        match t.as_str() {
            "{" | "(" | "[" => depth += 1,
            "}" | ")" | "]" => {
                depth -= 1;
                if depth == 0 {
                    return k;
                }
            }
            _ => {}
        }
    }
    toks.len() - 1
}

/// The named members of a structure body: plain fields and bitfields.
/// Anonymous nested structures and unions, and unnamed bitfields, have no
/// name to check and are left out.
fn members(body: &[String]) -> Vec<Member> {
    let mut out = Vec::new();
    let mut k = 0;
    while k < body.len() {
        // One declaration: up to the `;` at depth 0.
        let start = k;
        let mut depth = 0usize;
        while k < body.len() && !(depth == 0 && body[k] == ";") {
            match body[k].as_str() {
                "{" | "(" | "[" => depth += 1,
                "}" | ")" | "]" => depth = depth.saturating_sub(1),
                _ => {}
            }
            k += 1;
        }
        let decl = &body[start..k];
        k += 1;
        if decl.is_empty() || decl.iter().any(|t| t == "__attribute__") {
            continue;
        }
        if let Some(close) = decl.iter().rposition(|t| t == "}") {
            // A nested structure or union: its declarator, if any, follows.
            if let Some(name) = decl[close + 1..].iter().find(|t| is_ident(t)) {
                out.push(Member::Plain(name.clone()));
            }
            continue;
        }
        if let Some(p) = decl
            .windows(2)
            .position(|w| w[0] == "(" && w[1] == "*")
            .filter(|&p| !decl[..p].iter().any(|t| t == "["))
        {
            // A function pointer: `type (*name)(args)`.
            if let Some(name) = decl.get(p + 2).filter(|t| is_ident(t)) {
                out.push(Member::Plain(name.clone()));
            }
            continue;
        }
        // Declarators separated by commas at depth 0.
        let mut d = 0usize;
        let mut parts: Vec<&[String]> = Vec::new();
        let mut from = 0;
        for (n, t) in decl.iter().enumerate() {
            match t.as_str() {
                "[" => d += 1,
                "]" => d = d.saturating_sub(1),
                "," if d == 0 => {
                    parts.push(&decl[from..n]);
                    from = n + 1;
                }
                _ => {}
            }
        }
        parts.push(&decl[from..]);
        for part in parts {
            if let Some(colon) = part.iter().position(|t| t == ":") {
                if colon > 0 && is_ident(&part[colon - 1]) && part.len() > 1 {
                    let name = &part[colon - 1];
                    // `unsigned :4` names no field; `unsigned x:1` does
                    // (a type keyword alone before the colon is no name).
                    if !matches!(name.as_str(), "int" | "char" | "short" | "long") {
                        out.push(Member::Bits(name.clone()));
                    }
                }
                continue;
            }
            let end = part.iter().position(|t| t == "[").unwrap_or(part.len());
            if let Some(name) = part[..end].iter().rev().find(|t| is_ident(t)) {
                out.push(Member::Plain(name.clone()));
            }
            // `TYPE name;` or `struct TAG name;`, not through a pointer
            // (the first declarator carries the type).
            let pointer = decl.iter().any(|t| t == "*");
            let types: Vec<&String> = decl
                .iter()
                .take_while(|t| *t != "[")
                .filter(|t| is_ident(t) && !matches!(t.as_str(), "struct" | "union"))
                .collect();
            if !pointer && types.len() >= 2 {
                out.push(Member::Embeds(types[0].clone()));
            }
        }
    }
    out
}
