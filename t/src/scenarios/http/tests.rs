//! The scenarios' unit test: the patched nginx's rescue line is the one
//! its patches log.

use super::*;

/// [`patched_rescue_line`] is what every version's http and stream
/// patch logs.
#[test]
fn the_patched_rescue_line_is_the_patches_own() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../nginx-src-patches");
    let logged = patched_rescue_line("%V").replace('"', "\\\"");
    let mut patches = 0;
    for version in std::fs::read_dir(dir).expect("nginx-src-patches") {
        let version = version.unwrap().path();
        if !version.is_dir() {
            continue;
        }
        // The re-snapshot patches log it; the history patches after
        // them change what the re-snapshot selects, not its line.
        for patch in std::fs::read_dir(&version).unwrap() {
            let patch = patch.unwrap().path();
            let name = patch.file_name().unwrap().to_string_lossy().into_owned();
            if !name.contains("select-again") {
                continue;
            }
            let text = std::fs::read_to_string(&patch).unwrap();
            assert!(
                text.contains(&logged),
                "{} does not log {logged}",
                patch.display()
            );
            patches += 1;
        }
    }
    assert!(patches >= 2, "no patches found in {dir}");
}
