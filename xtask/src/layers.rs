//! The module graphs of this crate and of the nginx module have no cycle:
//! each file imports only from the layers below it. Read from the sources'
//! `crate::` paths (comments aside), so a new upward import fails here.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

/// The top-level modules a source file names as `crate::NAME` or inside
/// `crate::{...}`, outside comments.
fn uses(text: &str) -> Vec<String> {
    let code: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let text = code.as_str();
    let mut out = Vec::new();
    for (i, _) in text.match_indices("crate::") {
        let rest = &text[i + "crate::".len()..];
        if let Some(list) = rest.strip_prefix('{') {
            // Top-level items of the group: the first word of each.
            let mut depth = 0;
            let mut first = true;
            let mut word = String::new();
            for c in list.chars() {
                if c.is_alphanumeric() || c == '_' {
                    if depth == 0 && first {
                        word.push(c);
                    }
                    continue;
                }
                if !word.is_empty() {
                    out.push(std::mem::take(&mut word));
                    first = false;
                }
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => first = true,
                    _ => {}
                }
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            out.push(name);
        }
    }
    out
}

/// Each top-level module of `src` (a file, or a directory with its
/// children) and the modules it uses.
fn graph(src: &Path) -> BTreeMap<String, Vec<String>> {
    let mut graph = BTreeMap::new();
    for entry in fs::read_dir(src).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        // A directory's files at any depth (`mutants/catalogue/`).
        let files = crate::tree::files(&path, &|_| false).unwrap();
        let text: String = files
            .iter()
            .map(|f| fs::read_to_string(f).unwrap())
            .collect();
        let deps = graph.entry(name).or_insert_with(Vec::new);
        deps.extend(uses(&text));
    }
    graph
}

/// No module but `root` (the crate root, which declares them all) is used
/// from `root`'s own items, and no path of uses comes back to its start.
fn assert_layered(graph: &BTreeMap<String, Vec<String>>, root: &str) {
    let modules: Vec<&String> = graph.keys().collect();
    for (m, deps) in graph.iter().filter(|(m, _)| *m != root) {
        let upward: Vec<&String> = deps.iter().filter(|d| !modules.contains(d)).collect();
        assert!(upward.is_empty(), "{m} uses crate::{upward:?} from {root}");
    }
    // Depth-first search from every module; a module met again on the
    // current path closes a cycle.
    fn visit(m: &str, graph: &BTreeMap<String, Vec<String>>, path: &mut Vec<String>) {
        assert!(
            !path.iter().any(|p| p == m),
            "module cycle: {} > {m}",
            path.join(" > ")
        );
        path.push(m.to_string());
        for d in graph.get(m).into_iter().flatten().filter(|d| *d != m) {
            visit(d, graph, path);
        }
        path.pop();
    }
    for m in graph.keys().filter(|m| *m != root) {
        visit(m, graph, &mut Vec::new());
    }
}

#[test]
fn xtask_modules_are_layered() {
    let mut graph = graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    // This file: its test strings name paths it does not use.
    graph.remove("layers");
    // t/src/memcheck.rs, compiled in by path: it uses no module of ours.
    graph.insert("memcheck".into(), Vec::new());
    graph.insert("since".into(), Vec::new());
    assert!(graph["workspace"].is_empty(), "{graph:?}");
    assert!(graph.contains_key("debian") && !graph["debian"].is_empty());
    assert_layered(&graph, "main");
}

#[test]
fn module_modules_are_layered() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../module/src");
    let graph = graph(&root);
    for bottom in ["ffi_ext", "shm", "proto"] {
        assert!(graph[bottom].is_empty(), "{bottom}: {:?}", graph[bottom]);
    }
    assert!(graph["setup"].contains(&"peer".to_string()), "{graph:?}");
    assert_layered(&graph, "lib");
}

/// The test bench's layers, bottom up: the log readers (`scoring`), the
/// nginx under test, its actors, the scenarios built of them.
#[test]
fn test_bench_modules_are_layered() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../t/src");
    let mut graph = graph(&root);
    // The binaries use the library by its name, never `crate::`.
    graph.remove("bin");
    let uses = |m: &str, d: &str| graph[m].iter().any(|x| x == d);
    for (above, below) in [
        ("nginx", "scoring"),
        ("actors", "nginx"),
        ("scenarios", "actors"),
    ] {
        assert!(
            uses(above, below),
            "{above} no longer uses {below}: {graph:?}"
        );
    }
    assert_layered(&graph, "lib");
}

#[test]
fn uses_reads_paths_and_groups() {
    let text = "use crate::tree::{a, b};\nuse crate::{build, debian::{x, y}, external};\nlet _ = crate::versions::tree_version(s);";
    assert_eq!(
        uses(text),
        ["tree", "build", "debian", "external", "versions"]
    );
}
