//! The house's sizes, part of `cargo xtask check`: no Rust file over
//! [`MAX_RS_LINES`] lines (tests included), and the two documents a reader
//! takes in one sitting under their budgets ([`DOC_BUDGETS`]). A file past
//! its limit is named, with the way out.

use std::path::{Path, PathBuf};

/// The most lines a `.rs` file may have: past it, a file holds more than
/// one job (issue 39).
pub const MAX_RS_LINES: usize = 600;

/// The documents with a budget, in bytes (1 KB = 1,000 bytes): the
/// operator's README and the newcomer's CONTRIBUTING; the rest of what
/// there is to say lives in docs/ by topic.
pub const DOC_BUDGETS: &[(&str, usize)] = &[("README.md", 15_000), ("CONTRIBUTING.md", 25_000)];

/// Every breach under `root`, one line each; empty when the house is in
/// order. `target/` and hidden directories are not the project's sources.
pub fn breaches(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for (doc, budget) in DOC_BUDGETS {
        let path = root.join(doc);
        match std::fs::metadata(&path) {
            Ok(m) if m.len() as usize > *budget => out.push(format!(
                "{doc}: {} bytes, over its budget of {budget}: move what its reader \
                 does not need to docs/ (one file per topic) or cut it",
                m.len()
            )),
            Ok(_) => {}
            Err(e) => out.push(format!("{doc}: {e}")),
        }
    }
    let mut files = Vec::new();
    rust_files(root, &mut files);
    files.sort();
    for f in files {
        let lines = std::fs::read_to_string(&f).map_or(0, |t| t.lines().count());
        if lines > MAX_RS_LINES {
            let shown = f.strip_prefix(root).unwrap_or(&f).display();
            out.push(format!(
                "{shown}: {lines} lines, over {MAX_RS_LINES}: split it by job \
                 (its tests into a sibling `tests.rs` at least)"
            ));
        }
    }
    out
}

/// The `.rs` files under `dir`, but in `target/` and hidden directories.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        let name = e.file_name();
        let name = name.to_string_lossy();
        if path.is_dir() {
            if !name.starts_with('.') && name != "target" {
                rust_files(&path, out);
            }
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_past_its_limit_is_named_and_one_at_it_is_not() {
        let root = std::env::temp_dir().join(format!("xtask-sizes-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("src/deep")).unwrap();
        std::fs::create_dir_all(root.join("target")).unwrap();
        std::fs::write(root.join("README.md"), "x".repeat(15_000)).unwrap();
        std::fs::write(root.join("CONTRIBUTING.md"), "x".repeat(25_001)).unwrap();
        std::fs::write(root.join("src/ok.rs"), "\n".repeat(MAX_RS_LINES)).unwrap();
        std::fs::write(root.join("src/deep/big.rs"), "\n".repeat(MAX_RS_LINES + 1)).unwrap();
        std::fs::write(root.join("target/gen.rs"), "\n".repeat(5_000)).unwrap();
        let found = breaches(&root);
        let _ = std::fs::remove_dir_all(&root);
        assert_eq!(found.len(), 2, "{found:#?}");
        assert!(
            found[0].starts_with("CONTRIBUTING.md: 25001 bytes"),
            "{}",
            found[0]
        );
        assert!(
            found[1].starts_with("src/deep/big.rs: 601 lines"),
            "{}",
            found[1]
        );
    }
}
