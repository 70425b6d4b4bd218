//! Instructions under callgrind: per proxied request for each variant,
//! and where a rescue's instructions go, function by function.

use std::path::PathBuf;
use std::process::Command;

use generation_retry_t::scenarios::http::{Lab, Spec};

use crate::measure::Variant;
use crate::rescue::{spare_connection, Retry};

/// Instructions the nginx process executed per request over `n` requests,
/// counted in one process: after start-up and `WARM_UP` requests (whose
/// number of readiness probes varies from run to run) callgrind's counters
/// are zeroed, `n` requests are served, and the counts are dumped
/// (`callgrind_control -z`, `-d`). What is left is the requests alone,
/// plus the timers that fire meanwhile. Also returns the dump, for a
/// per-function breakdown (`callgrind_annotate`).
pub async fn instructions(v: Variant, n: usize) -> (f64, PathBuf) {
    const WARM_UP: usize = 200;
    let (file, wrapper) = callgrind(v.name(), &[]);
    let spec = Spec {
        wrapper,
        // The name resolved once: no re-resolve (a resolver exchange of
        // thousands of instructions, about one a second of a run that
        // callgrind slows to tens of seconds) counts with the requests.
        valid: 3600,
        ..v.spec()
    };
    let lab = Lab::start_spec(spec).await;
    for i in 0..WARM_UP {
        assert_eq!(lab.client.get(&format!("/warm/{i}")).await.status(), 200);
    }
    let pid = lab.nginx.pid().to_string();
    callgrind_control(&["-z", &pid]);
    for i in 0..n {
        assert_eq!(lab.client.get(&format!("/cg/{i}")).await.status(), 200);
    }
    callgrind_control(&["-d", &pid]);
    lab.finish();
    // The dump on demand is the file's first part: `FILE.1`.
    let dump = PathBuf::from(format!("{}.1", file.display()));
    let text = std::fs::read_to_string(&dump)
        .unwrap_or_else(|e| panic!("callgrind dump {}: {e}", dump.display()));
    let total: u64 = text
        .lines()
        .find_map(|l| {
            l.strip_prefix("summary: ")
                .or_else(|| l.strip_prefix("totals: "))
        })
        .and_then(|v| v.trim().parse().ok())
        .expect("callgrind summary line");
    (total as f64 / n as f64, dump)
}

/// Functions whose inclusive instructions per retry the rescue breakdown
/// reports (a rescue runs each): the module's full-path
/// `get` (the retry's whole selection: with a rescue, the refusal, the
/// re-snapshot and the second selection), `decide` (a refusal's handling:
/// the re-snapshot, the second selection, the tally and the line),
/// `settle` (the tally and the rescue line alone), the balancer's init
/// (which a re-snapshot calls again), and nginx's error log writer.
const RESCUE_FUNCTIONS: [(&str, &str); 5] = [
    ("module get (whole selection)", "peer::get_peer"),
    ("refusal handled (decide)", "peer::decide"),
    ("tally and rescue line", "peer::settle"),
    (
        "round-robin init",
        "ngx_http_upstream_init_round_robin_peer",
    ),
    ("error log lines", "ngx_log_error_core"),
];

/// Where a rescue's instructions go: nginx with the module under callgrind
/// with collection off, switched on (`callgrind_control -i on`) just
/// before the backend closes the held first attempt and off once the
/// client has its answer, so that only the retries count: `n` plain
/// retries in one dump, `n` rescued ones in another. Every plain retry is
/// given a spare cached connection, as every rescued one has (the probe
/// that saw the new address left it), so both retries' attempts go out on
/// a cached connection. Both kinds take the request's full state when the
/// first attempt is freed as failed; what a rescue adds is in its `get`.
/// The name re-resolves every second here (the race needs it): a
/// re-resolve that lands in a window counts with it, in either kind.
pub async fn rescue_instructions(n: usize) -> Vec<(&'static str, f64, f64)> {
    let (file, wrapper) = callgrind("rescue", &["--instr-atstart=no"]);
    let spec = Spec {
        wrapper,
        ..Variant::On.spec()
    };
    let mut lab = Lab::start_spec(spec).await;
    let pid = lab.nginx.pid().to_string();
    let on = || callgrind_control(&["-i", "on", &pid]);
    let mut per_kind = Vec::new();
    for (k, kind) in ["plain", "rescued"].into_iter().enumerate() {
        callgrind_control(&["-z", &pid]);
        for i in 0..n {
            let status = if kind == "plain" {
                spare_connection(&lab, i).await;
                let (r, t) = lab.retry_without_flip_then(i, |_| on()).await;
                callgrind_control(&["-i", "off", &pid]);
                let retry = Retry::of(&lab, &format!("/plain/{i}"), t);
                assert!(retry.reused, "plain retry {i} had no cached connection");
                r.status()
            } else {
                let race = lab.race_once_then(i, |_| on()).await;
                callgrind_control(&["-i", "off", &pid]);
                let retry = Retry::of(&lab, &race.path, race.after_release);
                assert!(retry.reused, "rescued retry {i} had no cached connection");
                race.response.status()
            };
            assert_eq!(status, 200, "{kind} retry {i}");
        }
        callgrind_control(&["-d", &pid]);
        let dump = PathBuf::from(format!("{}.{}", file.display(), k + 1));
        let out = Command::new("callgrind_annotate")
            .args(["--inclusive=yes", "--threshold=100"])
            .arg(&dump)
            .output()
            .expect("run callgrind_annotate");
        assert!(
            out.status.success(),
            "callgrind_annotate {}: {}",
            dump.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        per_kind.push(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    lab.finish();
    RESCUE_FUNCTIONS
        .iter()
        .map(|(label, f)| {
            let per = |text: &str| inclusive(text, f).unwrap_or(0) as f64 / n as f64;
            assert!(
                inclusive(&per_kind[1], f).is_some(),
                "no `{f}` in the rescues' callgrind dump: renamed or inlined?"
            );
            (*label, per(&per_kind[0]), per(&per_kind[1]))
        })
        .collect()
}

/// The sum of `callgrind_annotate` lines' counts (the first column) for
/// functions whose name ends with `function` (so that `get_peer` is not
/// `get_peer_data`), generic parameters and a legacy Rust symbol's hash
/// (`::h` and 16 hex digits) left out; `None` when no line names it.
pub fn inclusive(annotate: &str, function: &str) -> Option<u64> {
    let counts: Vec<u64> = annotate
        .lines()
        .filter_map(|l| {
            let (count, rest) = l.trim_start().split_once(' ')?;
            let name = rest.split_once(':').map_or(rest, |(_, n)| n);
            let name = name.split(" [").next().unwrap_or(name).trim();
            let name = name
                .split('<')
                .next()
                .unwrap_or(name)
                .trim_end_matches("::");
            let name = match name.rsplit_once("::h") {
                Some((head, hash))
                    if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) =>
                {
                    head
                }
                _ => name,
            };
            name.ends_with(function)
                .then(|| count.replace(',', "").parse::<u64>().ok())
                .flatten()
        })
        .collect();
    (!counts.is_empty()).then(|| counts.iter().sum())
}

/// nginx under callgrind with `options`, writing `NAME.out` in this run's
/// callgrind directory: the file, and the command to run nginx under.
fn callgrind(name: &str, options: &[&str]) -> (PathBuf, Vec<String>) {
    let dir =
        std::env::temp_dir().join(format!("generation-retry-callgrind-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("callgrind dir");
    let file = dir.join(format!("{name}.out"));
    let mut wrapper: Vec<String> = ["valgrind", "-q", "--tool=callgrind"]
        .iter()
        .chain(options)
        .map(|s| s.to_string())
        .collect();
    wrapper.push(format!("--callgrind-out-file={}", file.display()));
    (file, wrapper)
}

/// Runs `callgrind_control` on a process, which must succeed.
fn callgrind_control(args: &[&str]) {
    let out = Command::new("callgrind_control")
        .args(args)
        .output()
        .expect("run callgrind_control");
    assert!(
        out.status.success(),
        "callgrind_control {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
