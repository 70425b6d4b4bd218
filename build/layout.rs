//! The layout gate: the C compiler, with the nginx tree's own compiler and
//! flags, says where every field of every nginx structure the module names
//! lies, and the module's compilation asserts that bindgen's structures
//! agree (`const` assertions over `size_of`, `align_of` and `offset_of!`).
//! For bitfields, the bit the C compiler gives each one the module calls an
//! accessor of is compared with the bit bindgen's accessor reads. A
//! difference fails the build, naming the structure and the field.
//!
//! Why: bindgen 0.72 (nginx-sys 0.5) places `ngx_http_request_t`'s
//! bitfields from `uri_changes` on two bits early in nginx 1.29.3+ trees
//! (rust-bindgen #3384). A tree nobody checked by hand (the next nginx, a
//! fork, a distribution's headers) is checked here, at every build.
//!
//! What "names" means: the structures are the `ngx_*_t` / `ngx_*_s` types
//! the module's sources spell, and every structure with a bitfield of a
//! name the sources call an accessor of (`.NAME()`, `.set_NAME(`,
//! `T::NAME(`, `T::NAME_raw(`, `T::set_NAME_raw(`); the bitfields checked
//! are those called. A wrapper of the ngx crate that touches a bitfield
//! under another name (`Request::subrequest`) is not seen: clippy.toml
//! forbids the ones that touch a misplaced one. Every
//! plain field of a named structure is checked, used or not: a structure
//! bindgen gets wrong anywhere is not trusted.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::{env, fs};

/// Fewer structures found in both the headers and the bindings than the
/// module names on any tree means the reading failed, not that the module
/// uses less (41 on every tree of the matrix).
const MIN_STRUCTS: usize = 30;

/// What the gate checked, for the build's report.
pub struct Checked {
    pub structs: usize,
    pub fields: usize,
    pub bitfields: usize,
    /// Bitfields of those structures the module calls no accessor of:
    /// listed with both positions in `layout-report.txt` (OUT_DIR), not
    /// asserted (bindgen misplaces many of `ngx_http_request_t`'s on 1.29+).
    pub uncalled: usize,
}

/// Runs the gate for the tree nginx-sys bound to and writes
/// `OUT_DIR/layout.rs` (the assertions). `Err` says why it could not run.
pub fn gate(sources: &Path, out: &Path) -> Result<Checked, String> {
    let build_dir = env::var("DEP_NGINX_BUILD_DIR")
        .map_err(|_| "nginx-sys exported no build_dir (DEP_NGINX_BUILD_DIR)".to_owned())?;
    let build_dir = PathBuf::from(build_dir);
    let includes: Vec<PathBuf> = env::var_os("DEP_NGINX_INCLUDE")
        .map(|v| env::split_paths(&v).collect())
        .unwrap_or_default();
    let defines: Vec<String> = env::var("DEP_NGINX_CFLAGS")
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    let features = env::var("DEP_NGINX_FEATURES").unwrap_or_default();
    let has = |f: &str| features.split(',').any(|x| x.trim() == f);
    let (cc, cflags) = compiler(&build_dir.join("Makefile"));

    let mut headers = String::from(
        "#include <ngx_config.h>\n#include <ngx_core.h>\n#include <ngx_event.h>\n\
         #include <ngx_event_connect.h>\n",
    );
    if has("http") {
        headers.push_str("#include <ngx_http.h>\n");
    }
    if has("stream") {
        headers.push_str("#include <ngx_stream.h>\n");
    }

    // nginx's make runs the compiler in the source root: paths in its
    // CFLAGS are relative to it.
    let source_root = build_dir.parent().unwrap_or(&build_dir).to_path_buf();
    let cc_cmd = |args: &[&str]| {
        let mut c = Command::new(&cc[0]);
        c.current_dir(&source_root);
        c.args(&cc[1..]).args(&cflags).arg("-w");
        c.args(includes.iter().map(|i| format!("-I{}", i.display())));
        c.args(&defines).args(args);
        c
    };

    let pre = out.join("layout-headers.c");
    fs::write(&pre, &headers).map_err(|e| format!("{}: {e}", pre.display()))?;
    let expanded = run(
        cc_cmd(&["-E", path_str(&pre)?]),
        "preprocess nginx's headers",
    )?;
    let c = CTypes::parse(&expanded);

    let bindings_path = bindings(out, &build_dir)?;
    let bindings = fs::read_to_string(&bindings_path)
        .map_err(|e| format!("{}: {e}", bindings_path.display()))?;
    let rust = RustTypes::parse(&bindings);

    if rust.structs.is_empty() {
        return Err(format!(
            "no structure read from {}: bindings not in the layout this reads \
             (one item per line, as rustfmt leaves them)",
            bindings_path.display()
        ));
    }
    let (mut named, mut called) = scan(sources)?;
    // Names checked as if the module called their accessors: a knob that
    // can only add checks, for the test that shows the gate failing a
    // build (t/tests/layout.rs).
    println!("cargo::rerun-if-env-changed=GENERATION_RETRY_LAYOUT_GATE_CALLED");
    if let Ok(extra) = env::var("GENERATION_RETRY_LAYOUT_GATE_CALLED") {
        called.extend(
            extra
                .split(',')
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(str::to_owned),
        );
    }
    // Also every structure with a bitfield of a name the module calls an
    // accessor of: the module reaches some (`ngx_buf_t`, TLS state) through
    // a wrapper or an inferred type, without spelling them.
    for (name, body) in &c.bodies {
        if body
            .iter()
            .any(|m| matches!(m, Member::Bits(f) if called.contains(f)))
        {
            named.insert(name.clone());
        }
    }
    // And, to any depth, every structure embedded in one of them (a
    // member that is a structure, as `headers_out` in the request).
    loop {
        let embedded: Vec<String> = named
            .iter()
            .filter_map(|n| c.resolve(n))
            .flat_map(|(_, body)| body.iter())
            .filter_map(|m| match m {
                Member::Embeds(t) if c.resolve(t).is_some() => Some(t.clone()),
                _ => None,
            })
            .filter(|t| !named.contains(t))
            .collect();
        if embedded.is_empty() {
            break;
        }
        named.extend(embedded);
    }
    // Structure: (name as checked, C expression of its type, Rust struct
    // whose fields and accessors bindgen generated, members); each Rust
    // structure once, under the first name met.
    let mut structs = Vec::new();
    let mut seen = BTreeSet::new();
    for name in &named {
        let Some((c_type, body)) = c.resolve(name) else {
            continue;
        };
        let Some((rust_name, rust_struct)) = rust.resolve(name) else {
            continue;
        };
        if seen.insert(rust_name.to_owned()) {
            structs.push((name.clone(), c_type, rust_struct, body.clone()));
        }
    }

    if structs.len() < MIN_STRUCTS {
        return Err(format!(
            "only {} of the module's structures found in both the headers and the \
             bindings ({}): the gate would check too little",
            structs.len(),
            structs
                .iter()
                .map(|s| s.0.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    // The probe: sizes, alignments, offsets and bit positions as the C
    // compiler lays them out.
    let mut probe = headers.clone();
    probe.push_str(
        "#include <stdio.h>\n#include <stddef.h>\n#include <string.h>\n\
         static void bit(const char *s, const char *f, const unsigned char *p, size_t n) {\n\
         size_t i, first = (size_t) -1, width = 0;\n\
         for (i = 0; i < n * 8; i++) {\n\
         /* Numbered as bindgen's bitfield unit numbers them: from the least\n\
            significant bit of each byte, or the most on a big-endian target. */\n\
         #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__\n\
         unsigned bit = 7 - i % 8;\n\
         #else\n\
         unsigned bit = i % 8;\n\
         #endif\n\
         if (p[i / 8] & (1u << bit)) { if (first == (size_t) -1) first = i; width++; } }\n\
         printf(\"B %s %s %zu %zu\\n\", s, f, first, width);\n}\n\
         int main(void) {\n",
    );
    for (name, c_type, r, body) in &structs {
        let _ = writeln!(
            probe,
            "printf(\"S {name} %zu %zu\\n\", sizeof({c_type}), (size_t) __alignof__({c_type}));"
        );
        // Only members bindgen generated too: what bindgen (which parsed
        // the headers with clang) does not know is no member this simple
        // reading can be sure of, and would only break the probe.
        for m in body {
            match m {
                Member::Embeds(_) => {}
                Member::Plain(f) if r.field(f).is_none() => {}
                Member::Bits(f) if !r.bitfields.contains_key(f) => {}
                Member::Plain(f) => {
                    let _ = writeln!(
                        probe,
                        "printf(\"F {name} {f} %zu\\n\", offsetof({c_type}, {f}));"
                    );
                }
                Member::Bits(f) => {
                    let _ = writeln!(
                        probe,
                        "{{ static {c_type} v; memset(&v, 0, sizeof(v)); v.{f} = -1; \
                         bit(\"{name}\", \"{f}\", (const unsigned char *) &v, sizeof(v)); }}"
                    );
                }
            }
        }
    }
    probe.push_str("return 0;\n}\n");
    let probe_c = out.join("layout-probe.c");
    let probe_bin = out.join("layout-probe");
    fs::write(&probe_c, &probe).map_err(|e| format!("{}: {e}", probe_c.display()))?;
    run(
        cc_cmd(&[path_str(&probe_c)?, "-o", path_str(&probe_bin)?]),
        "compile the layout probe",
    )?;
    let facts = run(Command::new(&probe_bin), "run the layout probe")?;

    let cc_name = cc.join(" ");
    let mut asserts = String::from(
        "// Generated by build/layout.rs from the C compiler's layout of this\n\
         // nginx tree: bindgen's structures must agree.\n",
    );
    let mut checked = Checked {
        structs: 0,
        fields: 0,
        bitfields: 0,
        uncalled: 0,
    };
    let mut report = String::new();
    let rust_of: BTreeMap<&str, &RustStruct> = structs
        .iter()
        .map(|(n, _, r, _)| (n.as_str(), *r))
        .collect();
    for line in facts.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w.as_slice() {
            ["S", s, size, align] => {
                checked.structs += 1;
                let _ = writeln!(
                    asserts,
                    "const _: () = assert!(::core::mem::size_of::<{s}>() == {size} && \
                     ::core::mem::align_of::<{s}>() == {align}, \"nginx layout gate: {s} is \
                     {size} bytes aligned to {align} for the C compiler ({cc_name}), and bindgen's \
                     {s} is not\");"
                );
            }
            ["F", s, f, offset] => {
                let Some(field) = rust_of.get(s).and_then(|r| r.field(f)) else {
                    continue;
                };
                checked.fields += 1;
                let _ = writeln!(
                    asserts,
                    "const _: () = assert!(::core::mem::offset_of!({s}, {field}) == {offset}, \
                     \"nginx layout gate: {s}.{f} is at byte {offset} for the C compiler \
                     ({cc_name}), and bindgen puts it elsewhere\");"
                );
            }
            ["B", s, f, first, width] => {
                let Some(r) = rust_of.get(s) else { continue };
                let Some((unit, bit, bits)) = r.bitfields.get(*f) else {
                    continue;
                };
                let relied_on = called.contains(*f);
                let _ = writeln!(
                    report,
                    "{s}.{f}: C bit {first} width {width}; bindgen {unit} + {bit}, width {bits}{}",
                    if relied_on { " (called)" } else { "" }
                );
                if relied_on {
                    checked.bitfields += 1;
                    let _ = writeln!(
                        asserts,
                        "const _: () = assert!(::core::mem::offset_of!({s}, {unit}) * 8 + {bit} == \
                         {first} && {bits} == {width}, \"nginx layout gate: {s}.{f} is bit \
                         {first} (width {width}) for the C compiler ({cc_name}), and bindgen's \
                         accessor reads another: the module must not call it on this nginx\");"
                    );
                } else {
                    checked.uncalled += 1;
                }
            }
            _ => return Err(format!("the layout probe printed {line:?}")),
        }
    }
    fs::write(out.join("layout.rs"), asserts).map_err(|e| format!("layout.rs: {e}"))?;
    fs::write(out.join("layout-report.txt"), report).map_err(|e| format!("report: {e}"))?;
    Ok(checked)
}

fn path_str(p: &Path) -> Result<&str, String> {
    p.to_str()
        .ok_or_else(|| format!("{}: not a Unicode path", p.display()))
}

fn run(mut c: Command, what: &str) -> Result<String, String> {
    let o = c.output().map_err(|e| format!("{what}: {c:?}: {e}"))?;
    if !o.status.success() {
        return Err(format!(
            "{what}: {c:?} exited with {}:\n{}",
            o.status,
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// The tree's compiler and flags, from its `objs/Makefile` (`CC =`,
/// `CFLAGS =`), as nginx compiled itself; `cc` and none if absent.
fn compiler(makefile: &Path) -> (Vec<String>, Vec<String>) {
    let text = fs::read_to_string(makefile).unwrap_or_default();
    let value = |key: &str| {
        text.lines().find_map(|l| {
            let (k, v) = l.split_once('=')?;
            (k.trim() == key).then(|| v.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
        })
    };
    let cc = value("CC")
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| vec!["cc".into()]);
    let cflags = value("CFLAGS")
        .unwrap_or_default()
        .into_iter()
        // Warnings are the probe's own business (`-w`); layout flags stay.
        .filter(|f| f != "-Werror")
        .collect();
    (cc, cflags)
}

/// The bindings nginx-sys generated for this tree: its build script's
/// output directory, a sibling of ours, whose recorded `build_dir` is the
/// tree's.
fn bindings(out: &Path, build_dir: &Path) -> Result<PathBuf, String> {
    let build = out
        .parent()
        .and_then(Path::parent)
        .ok_or("OUT_DIR has no build directory above it")?;
    let wanted = format!("build_dir={}", build_dir.display());
    let mut found: Vec<(std::time::SystemTime, PathBuf)> = Vec::new();
    for e in fs::read_dir(build).map_err(|e| format!("{}: {e}", build.display()))? {
        let dir = e.map_err(|e| e.to_string())?.path();
        let is_sys = dir
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("nginx-sys-"));
        let output = dir.join("output");
        let bindings = dir.join("out/bindings.rs");
        if !is_sys || !bindings.is_file() {
            continue;
        }
        let recorded = fs::read_to_string(&output).unwrap_or_default();
        if recorded.lines().any(|l| l.ends_with(&wanted)) {
            let at = fs::metadata(&bindings)
                .and_then(|m| m.modified())
                .map_err(|e| e.to_string())?;
            found.push((at, bindings));
        }
    }
    found.sort();
    found.pop().map(|(_, p)| p).ok_or_else(|| {
        format!(
            "no nginx-sys bindings for {} under {}",
            build_dir.display(),
            build.display()
        )
    })
}

/// The `ngx_*_t` and `ngx_*_s` names the module's sources spell, and every
/// identifier called as a method (`.name(`), which covers the bitfield
/// accessors it calls.
fn scan(dir: &Path) -> Result<(BTreeSet<String>, BTreeSet<String>), String> {
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
                    called.insert(t.strip_prefix("set_").unwrap_or(t).to_string());
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

#[derive(Clone, Debug)]
enum Member {
    Plain(String),
    Bits(String),
    /// A member that is itself a structure (not a pointer to one), by its
    /// type's name: checked with the structure that embeds it.
    Embeds(String),
}

/// Structures and typedefs of the preprocessed headers.
struct CTypes {
    /// `struct TAG { ... }` bodies by tag, and typedef'd bodies by name.
    bodies: BTreeMap<String, Vec<Member>>,
    /// `typedef struct TAG NAME;`: NAME to TAG.
    aliases: BTreeMap<String, String>,
    /// Tags (`struct TAG { ... }`), spelt `struct TAG` in C.
    tags: BTreeSet<String>,
}

impl CTypes {
    fn parse(text: &str) -> CTypes {
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
    fn resolve(&self, name: &str) -> Option<(String, &Vec<Member>)> {
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

fn is_ident(s: &str) -> bool {
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

/// A structure as bindgen generated it: its field names and, for each
/// bitfield accessor, its unit, bit offset in the unit and width.
struct RustStruct {
    fields: BTreeSet<String>,
    bitfields: BTreeMap<String, (String, u64, u64)>,
}

impl RustStruct {
    /// bindgen's name of the C field `f` (Rust keywords take a `_`).
    fn field(&self, f: &str) -> Option<String> {
        [f.to_owned(), format!("{f}_")]
            .into_iter()
            .find(|n| self.fields.contains(n))
    }
}

struct RustTypes {
    structs: BTreeMap<String, RustStruct>,
    aliases: BTreeMap<String, String>,
}

impl RustTypes {
    fn parse(text: &str) -> RustTypes {
        let mut structs: BTreeMap<String, RustStruct> = BTreeMap::new();
        let mut aliases = BTreeMap::new();
        let mut current: Option<(String, bool)> = None;
        // The getter whose body is being read: `pub fn NAME(&self) -> T {`
        // on one line, `self._bitfield_N.get(B usize, W u8)` on the next.
        let mut getter: Option<String> = None;
        for line in text.lines() {
            let l = line.trim();
            if let Some(rest) = l.strip_prefix("pub struct ") {
                if let Some(name) = rest.strip_suffix(" {") {
                    structs.entry(name.to_owned()).or_insert(RustStruct {
                        fields: BTreeSet::new(),
                        bitfields: BTreeMap::new(),
                    });
                    current = Some((name.to_owned(), true));
                }
                continue;
            }
            if let Some(rest) = l.strip_prefix("impl ") {
                current = rest
                    .strip_suffix(" {")
                    .filter(|n| is_ident(n))
                    .map(|n| (n.to_owned(), false));
                continue;
            }
            if let Some(rest) = l.strip_prefix("pub type ") {
                if let Some((name, target)) = rest.split_once(" = ") {
                    aliases.insert(name.to_owned(), target.trim_end_matches(';').to_owned());
                }
                continue;
            }
            if line.starts_with('}') {
                current = None;
                continue;
            }
            let Some((name, in_struct)) = &current else {
                continue;
            };
            let Some(s) = structs.get_mut(name) else {
                continue;
            };
            if *in_struct {
                if let Some((field, _)) = l.strip_prefix("pub ").and_then(|r| r.split_once(':')) {
                    s.fields.insert(field.to_owned());
                }
                continue;
            }
            if let Some(rest) = l.strip_prefix("pub fn ") {
                getter = rest
                    .split_once("(&self)")
                    .map(|(n, _)| n.to_owned())
                    .filter(|n| !n.ends_with("_raw"));
                continue;
            }
            if let (Some(g), Some(at)) = (&getter, l.find("self._bitfield_")) {
                if let Some(acc) = unit_get(&l[at + 5..]) {
                    s.bitfields.insert(g.clone(), acc);
                }
                getter = None;
            }
        }
        RustTypes { structs, aliases }
    }

    /// bindgen's structure for the name the module spells (a typedef is an
    /// alias of the tag's structure).
    fn resolve(&self, name: &str) -> Option<(&str, &RustStruct)> {
        let mut target = name;
        for _ in 0..8 {
            if let Some((k, s)) = self.structs.get_key_value(target) {
                return Some((k, s));
            }
            target = self.aliases.get(target)?;
        }
        None
    }
}

/// `_bitfield_N.get(B usize, W u8)...`: the unit, the bit in it, the width.
fn unit_get(l: &str) -> Option<(String, u64, u64)> {
    let (unit, rest) = l.split_once(".get(")?;
    let (bit, rest) = rest.split_once("usize,")?;
    let (width, _) = rest.trim_start().split_once("u8")?;
    Some((
        unit.to_owned(),
        bit.trim().parse().ok()?,
        width.trim().parse().ok()?,
    ))
}
