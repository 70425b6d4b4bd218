//! Part of `cargo xtask check`: a codebase's name (`"1.30.4"`,
//! `"master-COMMIT"`, ...) is written once, in its row of
//! `versions::CODEBASES` (the default's in `workspace::DEFAULT`). Any
//! other string literal of one in the project's code is a second copy of
//! that fact, to drift when a release is added: read the table instead.
//! Tests' fixtures (`tests.rs`, `tests/`) and the table of what the
//! nginx-src crate carries (`source/crates_io.rs`, a fact of crates.io's)
//! are not such copies.

use std::path::Path;

use crate::versions::MATRIX;

/// Where the names are written, and the facts that are not such copies.
const OWNERS: &[&str] = &[
    "xtask/src/versions.rs",
    "xtask/src/workspace.rs",
    "xtask/src/source/crates_io.rs",
];

/// The code searched: the module, the tools and the test harness's library.
const CODE: &[&str] = &["module", "xtask/src", "t/src", "diagnose/src"];

/// Every such literal under `root`, one line each: `path:line: NAME`.
pub fn stray(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for dir in CODE {
        let Ok(files) = crate::tree::files(&root.join(dir), &|n| n == "tests" || n == "target")
        else {
            continue;
        };
        for f in files {
            let rel = f
                .strip_prefix(root)
                .unwrap_or(&f)
                .to_string_lossy()
                .into_owned();
            let code = f.extension().is_some_and(|e| e == "rs");
            let fixture = f.file_name().is_some_and(|n| n == "tests.rs");
            if !code || fixture || OWNERS.contains(&rel.as_str()) {
                continue;
            }
            let text = std::fs::read_to_string(&f).unwrap_or_default();
            out.extend(in_text(&text).into_iter().map(|(n, name)| {
                format!(
                    "{rel}:{n}: \"{name}\" written outside the table (xtask/src/versions.rs \
                     CODEBASES): read versions::CODEBASES, NEWEST or DEFAULT instead"
                )
            }));
        }
    }
    out
}

/// The lines of `text` (numbered from 1) that hold a codebase's name as a
/// string literal, outside comments.
fn in_text(text: &str) -> Vec<(usize, &'static str)> {
    let mut found = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        for name in MATRIX {
            if code.contains(&format!("\"{name}\"")) {
                found.push((i + 1, *name));
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_written_again_is_found_and_the_project_has_none() {
        let name = MATRIX[2];
        let text =
            format!("// \"{name}\" in a comment\nlet v = \"{name}\";\nlet w = \"x{name}\";\n");
        assert_eq!(in_text(&text), [(2, name)]);
        let stray = stray(&crate::workspace::root());
        assert!(stray.is_empty(), "{stray:#?}");
    }
}
