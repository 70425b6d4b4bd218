//! `patches.rs`'s tests.

use super::resolve::{resolve, Resolution};
use super::*;

#[test]
fn a_selector_is_a_tree_or_a_prefix_ending_at_a_dot() {
    assert!(selects("1.28", "1.28.0"));
    assert!(selects("1.28", "1.28.3"));
    assert!(selects("tengine-3.2.0", "tengine-3.2.0"));
    assert!(!selects("1.2", "1.28.0"));
    assert!(!selects("1.28.0", "1.28.3"));
    assert!(!selects("angie", "angie-1.12.1"));
}

#[test]
fn a_patch_number_is_its_leading_digits() {
    assert_eq!(number(Path::new("x/0003-Upstream-a.patch")), "0003");
    assert_eq!(number(Path::new("0001+tengine.patch")), "0001");
}

const CONFLICT: &str =
    "a\nb\nc\n<<<<<<< HEAD\nmine\n=======\ntheirs\nmore\n>>>>>>> 1234 (x)\nd\ne\n";

#[test]
fn a_conflict_is_resolved_as_recorded_and_only_so() {
    let wanted = "a\nb\nc\nmine\n\ntheirs\nmore\nd\ne\n";
    let found = Resolution::find("f.c", CONFLICT, wanted).unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].ours, ["mine"]);
    assert_eq!(found[0].theirs, ["theirs", "more"]);
    assert_eq!(found[0].resolved, ["mine", "", "theirs", "more"]);
    // What `deltas/SELECTOR/resolutions` keeps reads back the same.
    let text: String = found.iter().map(Resolution::render).collect();
    assert_eq!(Resolution::parse(&text).unwrap(), found);
    assert_eq!(resolve("f.c", CONFLICT, &found).unwrap(), wanted);
    // Another file, or another side, is another conflict.
    let err = resolve("g.c", CONFLICT, &found).unwrap_err().to_string();
    assert!(err.contains("\"theirs\""), "{err}");
    // Changed where the resolution changed it too: not resolved.
    let changed = CONFLICT.replace("theirs\nmore", "other\nmore");
    assert!(resolve("f.c", &changed, &found).is_err());
    assert!(Resolution::parse("@@@ conflict f.c\n@@@ ours\nx\n").is_err());
    // The canonical side changed where the resolution did not touch
    // it: the change is merged into the recorded resolution.
    let edited = CONFLICT.replace("more\n", "more\nadded\n");
    assert_eq!(
        resolve("f.c", &edited, &found).unwrap(),
        wanted.replace("more\n", "more\nadded\n")
    );
}

/// The point of one series: a change to the canonical patch reaches
/// every tree's series, through the three-way merge, the recorded
/// resolutions and the folded deltas, with no other edit. Here a line
/// of 0003's code (in the function it adds; Angie's and Tengine's
/// series of 0003 need a resolution and a delta elsewhere) is changed
/// in a copy of `nginx-src-patches/`.
#[test]
fn one_edit_to_the_canonical_series_reaches_every_tree() {
    if crate::source::mirror().is_none() {
        eprintln!(
            "no mirror ({}): the forks' sources are not here",
            crate::source::MIRROR_ENV
        );
        return;
    }
    let copy = target_dir().join("patches-test/src");
    let _ = fs::remove_dir_all(&copy);
    crate::tree::copy_tree(&dir(), &copy).unwrap();
    let p = series(&copy.join(BASE)).unwrap()[2].clone();
    let text = fs::read_to_string(&p).unwrap();
    let old = "+    /* on allocation failure the address may be tried again after a change */";
    assert!(
        text.contains(old),
        "{}: the line this test edits",
        p.display()
    );
    let new = "+    /* on allocation failure the address may be tried again: one edit */";
    fs::write(&p, text.replace(old, new)).unwrap();
    for tree in MATRIX {
        let made = regenerate_from(&copy, &target_dir().join("patches-test"), tree)
            .unwrap_or_else(|e| panic!("{tree}: {e}"));
        let (_, third) = made.iter().find(|(n, _)| n.starts_with("0003")).unwrap();
        let third = String::from_utf8_lossy(third);
        assert!(
            third.contains(new),
            "{tree}: the edit did not reach its 0003"
        );
        assert!(
            !third.contains(old),
            "{tree}: its 0003 still has the old line"
        );
    }
}

#[test]
fn the_base_is_a_tree_of_the_matrix() {
    assert!(MATRIX.contains(&BASE));
}
