//! The mutation check's unit tests: the catalogue applies to the sources
//! as they are and names tests that exist, a mutant survives rustfmt, and
//! guards and libtest's results are read right.

use std::collections::BTreeSet;

use super::apply::{check_applies, locate, read};
use super::cargo_test::parse_results;
use super::catalogue::SLOT_ADD;
use super::guards::{guards, test_sources};
use super::MUTANTS;
use crate::harness::suite_modules;
use crate::workspace::root;

/// The list cannot rot silently: every mutant applies to the sources as
/// they are, and every test it names exists.
#[test]
fn every_mutant_applies_exactly_once() {
    for m in MUTANTS {
        let text = read(&root().join(m.file)).unwrap();
        check_applies(m, &text).unwrap();
        assert_ne!(m.find, m.replace, "{}", m.name);
    }
}

#[test]
fn a_mutant_survives_rustfmt_moving_its_line_breaks() {
    let find = "    if let Some(slot) = conf.slot() {\n";
    let text = "fn f() {\n    let x = 1;\n    if let Some(slot) =\n        conf.slot()\n    {\n        go();\n";
    let spans = locate(text, find);
    assert_eq!(spans.len(), 1, "{spans:?}");
    let mut mutated = text.to_string();
    mutated.replace_range(spans[0].clone(), "    if true {\n");
    assert_eq!(
        mutated,
        "fn f() {\n    let x = 1;\n    if true {\n        go();\n"
    );
    // A changed token is no match.
    assert!(locate("    if let Some(slot) = conf.slots() {\n", find).is_empty());
    // Twice is found twice (and refused by check_applies).
    assert_eq!(locate(&format!("{find}{find}"), find).len(), 2);
}

#[test]
fn every_named_test_exists() {
    let binaries = suite_modules().unwrap();
    for m in MUTANTS {
        assert!(
            m.whole_suite || m.core || !m.tests.is_empty(),
            "{} runs no test",
            m.name
        );
        for (b, t) in m.tests {
            assert!(
                binaries.iter().any(|x| x == b),
                "{}: no t/tests/{b}.rs",
                m.name
            );
            // In a binary split into modules, `t` is `MODULE::NAME`, and
            // `NAME` is looked for in that module's file.
            let (module, t) = match t.rsplit_once("::") {
                Some((module, name)) => (format!("{module}::"), name),
                None => (String::new(), *t),
            };
            let sources = test_sources(b).unwrap();
            // A module a macro writes (`row!(NAME, ...)`) has no file: its
            // tests are in the binary's own.
            let text = sources
                .iter()
                .find(|(m, _)| *m == module)
                .or_else(|| sources.iter().find(|(m, _)| m.is_empty()))
                .map_or("", |(_, text)| text.as_str());
            let named = text.match_indices(t).any(|(i, _)| {
                let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
                !word(text[..i].chars().next_back()) && !word(text[i + t.len()..].chars().next())
            });
            assert!(named, "{}: t/tests/{b} has no test {module}{t}", m.name);
        }
    }
}

#[test]
fn names_are_unique_and_every_counter_has_its_mutant() {
    let names: BTreeSet<&str> = MUTANTS.iter().map(|m| m.name).collect();
    assert_eq!(names.len(), MUTANTS.len());
    for c in generation_retry_core::metrics::Counter::ALL {
        let site = format!("Counter::{c:?} {{");
        assert_eq!(
            MUTANTS
                .iter()
                .filter(|m| m.find == SLOT_ADD && m.replace.contains(&site))
                .count(),
            1,
            "{c:?}"
        );
    }
}

#[test]
fn guards_are_read_from_doc_comments_and_macros() {
    let src = r#"
/// Stock nginx fails.
///
/// Non-regression guard: stock has no module.
#[tokio::test(flavor = "multi_thread")]
async fn stock_fails() {}

/// Not a guard.
#[test]
fn module_rescues() {}

/// Non-regression guard: but the doc belongs to a comment line, not a fn
const X: u32 = 1;
fn after_const() {}

macro_rules! rows {
    ($($name:ident, $patched:ident => $since:expr, $d:expr,)*) => {$(
        #[test]
        fn $name() {}

        /// Non-regression guard: the patched nginx without the module.
        #[test]
        fn $patched() {}
    )*};
}

rows! {
    plain, patched_plain => (1, 0, 0), "",
    hashed, patched_hashed => (1, 0, 0), "hash;",
}
"#;
    let g: Vec<String> = guards(src).into_iter().collect();
    assert_eq!(g, ["patched_hashed", "patched_plain", "stock_fails"]);
}

#[test]
fn a_guard_in_a_module_a_macro_generates_is_seen_and_a_stale_one_said() {
    use super::guards::{is_declared, stale};
    use std::collections::BTreeSet;
    // As the do-nothing mutant reads `t/tests/protocols.rs`: the guard is
    // declared in the `protocol!` macro's `mod $name { ... }`.
    let src = "macro_rules! protocol {\n    ($name:ident) => {\n        mod $name {\n\
               /// Non-regression guard: stock.\n            #[test]\n\
               fn stock_fails() {}\n            #[test]\n            fn module_rescues() {}\n\
               }\n    };\n}\nprotocol!(fastcgi);\n";
    let g: BTreeSet<String> = guards(src)
        .into_iter()
        .map(|t| format!("protocols::{t}"))
        .collect();
    assert!(is_declared(&g, "protocols::fastcgi::stock_fails"));
    assert!(is_declared(&g, "protocols::stock_fails"));
    assert!(!is_declared(&g, "protocols::fastcgi::module_rescues"));
    assert!(!is_declared(&g, "other::fastcgi::stock_fails"));
    assert!(!is_declared(&g, "protocols::fastcgi::uwsgi::stock_fails"));
    let ran = ["protocols".to_string()];
    let seen = ["protocols::fastcgi::stock_fails".to_string()];
    assert!(stale(&g, &ran, &seen).is_empty());
    let renamed = ["protocols::fastcgi::stock_fails_now".to_string()];
    assert_eq!(
        stale(&g, &ran, &renamed),
        [&"protocols::stock_fails".to_string()]
    );
    // A module that did not run has no stale guard.
    assert!(stale(&g, &[], &renamed).is_empty());
}

#[test]
fn results_are_read_from_libtest() {
    let lines: Vec<String> = [
        "running 3 tests",
        "test a ... ok",
        "test b ... FAILED",
        "test c ... ignored, needs the package",
        "test result: FAILED. 1 passed; 1 failed",
    ]
    .map(String::from)
    .to_vec();
    let r = parse_results(&lines, "bin");
    assert_eq!(r.passed, ["bin::a"]);
    assert_eq!(r.failed, ["bin::b"]);
}
