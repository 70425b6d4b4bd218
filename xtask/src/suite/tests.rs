//! The suite step's readers: prove's summary, the race files' verdict,
//! and the rerun of a file that found no free port.

use super::*;

#[test]
fn proves_summary_is_read() {
    let out = "upstream_sticky.t .. skipped: no sticky upstream\n\
               upstream.t ......... ok\nAll tests successful.\n\
               Files=46, Tests=440, 39 wallclock secs ( 0.19 usr)\nResult: PASS\n";
    assert_eq!(
        parse(out),
        Counts {
            files: 46,
            tests: 440,
            skipped_files: 1,
            passed: true
        }
    );
    let failed = parse("Files=3, Tests=60, 1 wallclock secs\nResult: FAIL\n");
    assert!(!failed.passed && failed.tests == 60);
    assert!(!parse("prove: command not found").passed);
}

#[test]
fn stock_must_fail_our_files_on_the_race_and_nothing_else() {
    let text = "upstream_resolve_retry.t (Wstat: 512 Tests: 6 Failed: 2)\n  \
                Failed tests:  3-4\nstream_upstream_resolve_retry.t (Wstat: 512 Tests: 6 \
                Failed: 2)\n  Failed tests:  3-4\nFiles=2, Tests=12, 14 wallclock secs\n\
                Result: FAIL\n";
    assert!(race_reproduced(&parse(text), text));
    // One file failing otherwise (it did not start, say) is no race.
    let other = text.replacen("Failed tests:  3-4", "Failed tests:  1-6", 1);
    assert!(!race_reproduced(&parse(&other), &other));
    // A crash fails the alert check too: no race either.
    let crash = text.replacen("Failed tests:  3-4", "Failed tests:  3-4, 6", 1);
    assert!(!race_reproduced(&parse(&crash), &crash));
    // A stock nginx that passes them has no race to show.
    let passed = "Files=2, Tests=12, 14 wallclock secs\nResult: PASS\n";
    assert!(!race_reproduced(&parse(passed), passed));
}

/// The end of a stock run on master-3f6f782 in a clean-clone CI run
/// (def3438): one file found no port, the other 45 passed.
const NO_PORT: &str = "stream_upstream_zone.t ............ \n\
    Dubious, test returned 98 (wstat 25088, 0x6200)\nFailed 4/4 subtests \n\
    upstream.t ........................ ok\n\nTest Summary Report\n-------------------\n\
    stream_upstream_zone.t          (Wstat: 25088 (exited 98) Tests: 0 Failed: 0)\n  \
    Non-zero exit status: 98\n  Parse errors: Bad plan.  You planned 4 tests but ran 0.\n\
    Files=46, Tests=771, 43 wallclock secs ( 0.24 usr)\nResult: FAIL\n\
    Port limit exceeded at lib/Test/Nginx.pm line 461.\n";

#[test]
fn a_file_that_found_no_port_runs_again_and_only_it_is_forgiven() {
    let lost = out_of_ports(NO_PORT);
    assert_eq!(lost, ["stream_upstream_zone.t"]);
    let again = "stream_upstream_zone.t .. ok\nAll tests successful.\n\
                 Files=1, Tests=4, 2 wallclock secs\nResult: PASS\n";
    let (c, text) = rerun(parse(NO_PORT), NO_PORT, &lost, parse(again), again);
    assert!(c.passed && c.tests == 775 && c.files == 46, "{c:?}");
    assert!(text.contains("run again alone: stream_upstream_zone.t"));
    // Whether the way passes, given its first run and the second.
    let passes = |first: &str, second: &str| {
        rerun(parse(first), first, &lost, parse(second), second)
            .0
            .passed
    };
    // The second run failing fails the way.
    assert!(!passes(
        NO_PORT,
        &again.replace("Result: PASS", "Result: FAIL")
    ));
    // Another file failing for itself is not forgiven by the rerun.
    let both = NO_PORT.replace(
        "Files=46",
        "upstream.t (Wstat: 256 (exited 1) Tests: 9 Failed: 1)\n  Failed test:  3\nFiles=46",
    );
    assert_eq!(out_of_ports(&both), ["stream_upstream_zone.t"]);
    assert!(!passes(&both, again));
    // A file listed only for a TODO test that passed did not fail:
    // the rerun still makes the way pass.
    let todo = NO_PORT.replace(
        "Files=46",
        "upstream_sticky_route.t (Wstat: 0 Tests: 20 Failed: 0)\n  TODO passed:   17\nFiles=46",
    );
    assert_eq!(out_of_ports(&todo), ["stream_upstream_zone.t"]);
    assert!(passes(&todo, again));
    // Exit 98 without the port message (nginx itself could not bind,
    // say) is a failure of the file, not run again.
    let bind = NO_PORT.replace("Port limit exceeded", "Can't start nginx");
    assert!(out_of_ports(&bind).is_empty());
    // A file that ran tests before dying is not run again either.
    let late = NO_PORT.replace("Tests: 0 Failed: 0", "Tests: 2 Failed: 0");
    assert!(out_of_ports(&late).is_empty());
}

#[test]
fn patterns_match_as_the_shell_would() {
    assert!(matches("upstream*.t", "upstream_hash.t"));
    assert!(matches("upstream*.t", "upstream.t"));
    assert!(!matches("upstream*.t", "stream_upstream.t"));
    assert!(matches("proxy.t", "proxy.t") && !matches("proxy.t", "proxy_ssl.t"));
}
