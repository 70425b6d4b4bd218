//! Reading real files: plain and gzip (told apart by magic bytes), rotated
//! files in any order, standard input (`-`), a truncated gzip naming the
//! file, and the JSON output of a whole run parsed back with serde_json;
//! the binary's exit statuses, `--version`, and the verdict leading the
//! report.

use super::common;

use std::ffi::OsString;
use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use common::{scratch, Logs, A, B, FORMAT};
use flate2::write::GzEncoder;
use flate2::Compression;
use generation_retry_diagnose::run;
use serde_json::Value;

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut enc = GzEncoder::new(Vec::new(), Compression::default());
    enc.write_all(data).expect("in memory");
    enc.finish().expect("in memory")
}

fn write_lines(path: &Path, lines: &[String], gz: bool) {
    let mut text = lines.join("\n");
    text.push('\n');
    let bytes = if gz {
        gzip(text.as_bytes())
    } else {
        text.into_bytes()
    };
    fs::write(path, bytes).expect("write log");
}

fn os(args: &[&str]) -> Vec<OsString> {
    args.iter().map(OsString::from).collect()
}

/// Runs the CLI; returns (status, stdout, stderr).
fn cli(args: &[&str]) -> (i32, String, String) {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let status = run(&os(args), &mut out, &mut err);
    (
        status,
        String::from_utf8_lossy(&out).into_owned(),
        String::from_utf8_lossy(&err).into_owned(),
    )
}

/// The 2-hop race and a 1-hop race a few seconds later, and one refused
/// connection: logs split into an older rotated .gz and a current file.
fn scenario() -> Logs {
    let mut l = Logs::new();
    l.ok(0, A);
    l.ok(500, A);
    l.no_live(1_000, 7, "/race");
    l.access(1_100, 502, &format!("{A}, be"), "/race", 7);
    l.ok(1_500, B);
    l.ok(2_000, B);
    // Rotation happens here (older lines above).
    l.ok(8_000, B);
    l.no_live(9_000, 8, "/first");
    l.access(9_000, 502, "be", "/first", 8);
    l.ok(9_400, A);
    l.error(
        15_000,
        "error",
        9,
        "connect() failed (111: Connection refused) while connecting to upstream",
        "/refused",
        A,
    );
    l.access(15_000, 502, A, "/refused", 9);
    l.ok(15_500, A);
    l
}

/// Writes `scenario()` as access.log.1.gz (older) + access.log and
/// error.log.1 (plain, older) + error.log.gz named without .gz hint.
fn write_scenario(dir: &Path) -> [String; 4] {
    let l = scenario();
    let (old_a, new_a) = l.access.split_at(6);
    let (old_e, new_e) = l.error.split_at(1);
    let paths = [
        dir.join("access.log"),
        dir.join("access.log.1.gz"),
        dir.join("error.log"),
        dir.join("error.log.1"),
    ];
    write_lines(&paths[0], new_a, false);
    write_lines(&paths[1], old_a, true);
    // Compressed, though its name does not say so: magic bytes decide.
    write_lines(&paths[2], new_e, true);
    write_lines(&paths[3], old_e, false);
    paths.map(|p| p.display().to_string())
}

#[test]
fn gzip_and_rotated_files_in_any_order() {
    let dir = scratch("rotated");
    let [a, a1, e, e1] = write_scenario(&dir);
    let (status, out, err) = cli(&[
        "--access-log",
        &a,
        "--access-log",
        &a1,
        "--error-log",
        &e,
        "--error-log",
        &e1,
        "--log-format",
        FORMAT,
    ]);
    assert_eq!(status, 0, "{err}");
    assert!(out.contains("generation-retry        1"), "{out}");
    assert!(out.contains("generation-first        1"), "{out}");
    assert!(out.contains("other                   1"), "{out}");
    assert!(out.contains("access.log.1.gz (access): 0 of 6"), "{out}");
    assert!(out.contains(
        "2 of 3 502/504s are the generation race (2-hop 1, 1-hop 1); the module generation_retry, or nginx-src-patches, removes them."
    ), "{out}");
    // The verdict is the report's first line, and its last, as before.
    assert_eq!(out.lines().next(), Some(VERDICT), "{out}");
    assert_eq!(out.lines().last(), Some(VERDICT), "{out}");
    fs::remove_dir_all(dir).ok();
}

#[test]
fn json_output_parses_and_has_the_fields() {
    let dir = scratch("json");
    let [a, a1, e, e1] = write_scenario(&dir);
    // An unparseable line in the current access log.
    let mut f = fs::OpenOptions::new().append(true).open(&a).expect("open");
    f.write_all(b"not a log line \xff\n").expect("append");
    drop(f);
    let (status, out, err) = cli(&[
        "--json",
        "--access-log",
        &a,
        "--access-log",
        &a1,
        "--error-log",
        &e,
        "--error-log",
        &e1,
        "--log-format",
        FORMAT,
    ]);
    assert_eq!(status, 0, "{err}");
    let v: Value = serde_json::from_str(&out).expect("valid JSON");
    let incidents = v["incidents"].as_array().expect("incidents array");
    assert_eq!(incidents.len(), 3);
    let first = &incidents[0];
    assert_eq!(first["time"], "1796108401.100");
    assert_eq!(first["request"], "GET /race HTTP/1.1");
    assert_eq!(first["upstream"], "be");
    assert_eq!(first["upstream_addr"], format!("{A}, be"));
    assert_eq!(first["status"], 502);
    assert_eq!(first["family"], "generation-retry");
    assert_eq!(incidents[1]["family"], "generation-first");
    assert_eq!(incidents[2]["family"], "other");
    assert_eq!(incidents[2]["upstream_addr"], A);
    let s = &v["summary"];
    assert_eq!(s["total"], 3);
    assert_eq!(s["by_family"]["generation-retry"], 1);
    assert_eq!(s["by_family"]["generation-first"], 1);
    assert_eq!(s["by_family"]["unavailable"], 0);
    assert_eq!(s["by_family"]["empty"], 0);
    assert_eq!(s["by_family"]["other"], 1);
    assert_eq!(s["by_family"]["unknown"], 0);
    assert_eq!(s["by_family"].as_object().map(|o| o.len()), Some(6));
    assert_eq!(s["by_upstream"]["be"]["generation-retry"], 1);
    assert_eq!(s["by_upstream"]["be"]["other"], 1);
    assert_eq!(s["unparsed"]["access"], 1);
    assert_eq!(s["unparsed"]["error"], 0);
    fs::remove_dir_all(dir).ok();
}

#[test]
fn error_log_only_incidents_in_json() {
    let dir = scratch("erroronly");
    let e = dir.join("error.log");
    let mut l = Logs::new();
    l.no_live(3_000, 5, "/alone");
    write_lines(&e, &l.error, false);
    let (status, out, err) = cli(&["--json", "--error-log", &e.display().to_string()]);
    // No access log read: exit 4, and the analysis is printed all the same.
    assert_eq!(status, 4, "{err}");
    assert!(
        err.contains("no access log read: only error logs were given"),
        "{err}"
    );
    let v: Value = serde_json::from_str(&out).expect("valid JSON");
    let i = &v["incidents"][0];
    assert_eq!(i["status"], 502);
    assert_eq!(i["upstream_addr"], "");
    assert_eq!(i["request"], "GET /alone HTTP/1.1");
    assert_eq!(i["time"], "2026/12/01 07:00:03");
    assert_eq!(i["upstream"], "be");
    assert_eq!(v["summary"]["total"], 1);
    fs::remove_dir_all(dir).ok();
}

#[test]
fn truncated_gzip_names_the_file() {
    let dir = scratch("truncated");
    let whole = gzip(scenario().access.join("\n").repeat(50).as_bytes());
    let path = dir.join("access.log.2.gz");
    fs::write(&path, &whole[..whole.len() / 2]).expect("write");
    let p = path.display().to_string();
    let (status, out, err) = cli(&["--access-log", &p, "--log-format", FORMAT]);
    assert_eq!(status, 1);
    assert!(out.is_empty());
    assert!(
        err.contains(&format!("{p}: truncated gzip stream")),
        "{err}"
    );
    // A damaged (not just short) stream is also an error naming the file.
    let mut bad = whole.clone();
    for b in bad.iter_mut().skip(20).take(40) {
        *b ^= 0x5a;
    }
    fs::write(&path, &bad).expect("write");
    let (status, _, err) = cli(&["--access-log", &p, "--log-format", FORMAT]);
    assert_eq!(status, 1);
    assert!(
        err.contains(&format!("{p}: ")) && err.contains("gzip stream"),
        "{err}"
    );
    fs::remove_dir_all(dir).ok();
}

#[test]
fn missing_file_and_bad_arguments() {
    let (status, _, err) = cli(&["--error-log", "/nonexistent/e.log"]);
    assert_eq!(status, 1);
    assert!(err.contains("/nonexistent/e.log: cannot open"), "{err}");
    let (status, _, err) = cli(&["--access-log", "a.log"]);
    assert_eq!(status, 2);
    assert!(err.contains("--log-format"), "{err}");
    let (status, _, err) = cli(&[
        "--access-log",
        "a.log",
        "--log-format",
        "$msec \"$upstream_addr\"",
    ]);
    assert_eq!(status, 2);
    assert!(err.contains("lacks $status"), "{err}");
    let (status, out, _) = cli(&["--help"]);
    assert_eq!(status, 0);
    assert!(out.contains("--error-log-utc-offset"));
}

#[test]
fn binary_exit_status() {
    let bin = env!("CARGO_BIN_EXE_generation-retry-diagnose");
    let o = std::process::Command::new(bin)
        .args(["--window-ms", "-5", "--error-log", "x"])
        .output()
        .expect("run binary");
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--window-ms"));
}

const BIN: &str = env!("CARGO_BIN_EXE_generation-retry-diagnose");

/// Runs the binary with `input` on its standard input (a pipe); returns
/// (status, stdout, stderr).
fn binary_piped(args: &[&str], input: &[u8]) -> (i32, String, String) {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run binary");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(input).expect("write stdin");
    drop(stdin);
    let o = child.wait_with_output().expect("wait");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Runs the binary with `stdin` as its standard input.
fn binary(args: &[&str], stdin: Stdio) -> (i32, String, String) {
    let o = Command::new(BIN)
        .args(args)
        .stdin(stdin)
        .output()
        .expect("run binary");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The verdict of [`scenario`].
const VERDICT: &str = "2 of 3 502/504s are the generation race (2-hop 1, 1-hop 1); the module \
                       generation_retry, or nginx-src-patches, removes them.";

#[test]
fn version_prints_the_crate_version() {
    for flag in ["--version", "-V"] {
        let (status, out, err) = binary(&[flag], Stdio::null());
        assert_eq!(status, 0, "{err}");
        assert_eq!(
            out,
            format!("generation-retry-diagnose {}\n", env!("CARGO_PKG_VERSION"))
        );
        assert!(err.is_empty(), "{err}");
    }
    let (status, out, _) = cli(&["--version"]);
    assert_eq!(status, 0);
    assert!(out.starts_with("generation-retry-diagnose "), "{out}");
}

#[test]
fn help_documents_stdin_and_exit_statuses() {
    let (status, out, err) = binary(&["--help"], Stdio::null());
    assert_eq!(status, 0, "{err}");
    assert!(out.contains("`-` reads standard input"), "{out}");
    assert!(out.contains("EXIT STATUS"), "{out}");
    assert!(out.contains("4  no access log was read"), "{out}");
}

#[test]
fn a_report_without_failures_leads_with_its_verdict() {
    let dir = scratch("verdict");
    // No 502/504 in lines that matched: still a successful run.
    let mut l = Logs::new();
    l.ok(0, A);
    l.ok(500, B);
    let quiet = dir.join("quiet.log");
    write_lines(&quiet, &l.access, false);
    let q = quiet.display().to_string();
    let (status, out, err) = cli(&["--access-log", &q, "--log-format", FORMAT]);
    assert_eq!(status, 0, "{err}");
    assert_eq!(
        out.lines().next(),
        Some("none of 0 502/504s are the generation race.")
    );
    assert!(err.is_empty(), "{err}");
    fs::remove_dir_all(dir).ok();
}

#[test]
fn dash_reads_standard_input() {
    let dir = scratch("stdin");
    let [a, a1, e, e1] = write_scenario(&dir);
    // The access log, older part first, as one stream.
    let mut access = fs::read(dir.join("access.log.1.gz")).expect("read");
    let mut older = Vec::new();
    input_lines(&access, &mut older);
    access = older;
    access.extend(fs::read(&a).expect("read"));
    let args = [
        "--access-log",
        "-",
        "--error-log",
        &e,
        "--error-log",
        &e1,
        "--log-format",
        FORMAT,
    ];
    // A pipe, plain: classified like the files; its lines cannot be read
    // back for the evidence.
    let (status, out, err) = binary_piped(&args, &access);
    assert_eq!(status, 0, "{err}");
    assert_eq!(out.lines().next(), Some(VERDICT), "{out}");
    assert!(out.contains("generation-retry        1"), "{out}");
    assert!(out.contains("stdin (access): 0 of 10"), "{out}");
    assert!(out.contains("    access:  (not read back)"), "{out}");
    // A pipe, gzip: told by its magic bytes, as a file is.
    let (status, out, err) = binary_piped(&args, &gzip(&access));
    assert_eq!(status, 0, "{err}");
    assert_eq!(out.lines().next(), Some(VERDICT), "{out}");
    assert!(out.contains("stdin (access): 0 of 10"), "{out}");
    // Redirected from a file: read back like one.
    let whole = dir.join("access.whole.log");
    fs::write(&whole, &access).expect("write");
    let file = fs::File::open(&whole).expect("open");
    let (status, out, err) = binary(&args, Stdio::from(file));
    assert_eq!(status, 0, "{err}");
    assert_eq!(out.lines().next(), Some(VERDICT), "{out}");
    assert!(out.contains("    access:  10.9.9.9 - - ["), "{out}");
    assert!(!out.contains("(not read back)"), "{out}");
    // The same with --json: the requests are there.
    let mut json_args = args.to_vec();
    json_args.push("--json");
    let file = fs::File::open(&whole).expect("open");
    let (status, out, err) = binary(&json_args, Stdio::from(file));
    assert_eq!(status, 0, "{err}");
    let v: Value = serde_json::from_str(&out).expect("valid JSON");
    assert_eq!(v["incidents"][0]["request"], "GET /race HTTP/1.1");
    // An error log on standard input, the access logs as files.
    let errors = [fs::read(&e1).expect("read"), {
        let mut plain = Vec::new();
        input_lines(&fs::read(&e).expect("read"), &mut plain);
        plain
    }]
    .concat();
    let (status, out, err) = binary_piped(
        &[
            "--access-log",
            &a,
            "--access-log",
            &a1,
            "--error-log",
            "-",
            "--log-format",
            FORMAT,
        ],
        &errors,
    );
    assert_eq!(status, 0, "{err}");
    assert_eq!(out.lines().next(), Some(VERDICT), "{out}");
    assert!(out.contains("stdin (error): 0 of 3"), "{out}");
    // Two `-`: a usage error.
    let (status, _, err) = binary_piped(
        &[
            "--access-log",
            "-",
            "--error-log",
            "-",
            "--log-format",
            FORMAT,
        ],
        b"",
    );
    assert_eq!(status, 2);
    assert!(err.contains("at most one"), "{err}");
    fs::remove_dir_all(dir).ok();
}

/// Decodes `data` (gzip or plain) into `out`, lines ending in `\n`.
fn input_lines(data: &[u8], out: &mut Vec<u8>) {
    let path = std::env::temp_dir().join(format!("grd-decode-{}", std::process::id()));
    fs::write(&path, data).expect("write");
    generation_retry_diagnose::input::for_each_line(&path, |l| {
        out.extend_from_slice(l);
        out.push(b'\n');
    })
    .expect("decode");
    fs::remove_file(&path).ok();
}

#[test]
fn no_access_line_matching_the_format_exits_3() {
    let dir = scratch("nomatch");
    let [a, a1, e, e1] = write_scenario(&dir);
    // The format of the README's example, not the one these lines were
    // written with (they have no $body_bytes_sent, no referer, no agent).
    let wrong = r#"$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" "$upstream_addr" $msec"#;
    let (status, out, err) = cli(&[
        "--access-log",
        &a1,
        "--access-log",
        &a,
        "--error-log",
        &e,
        "--error-log",
        &e1,
        "--log-format",
        wrong,
    ]);
    assert_eq!(status, 3, "{err}");
    assert!(
        err.contains(&format!(
            "none of the 10 access-log lines matched their log_format '{wrong}'"
        )),
        "{err}"
    );
    let first = &scenario().access[0];
    assert!(err.contains(&format!("({a1} line 1): {first}")), "{err}");
    // The report is still printed, with its note.
    assert!(
        out.contains("no access line matched its log_format"),
        "{out}"
    );
    // The binary exits with it too.
    let (status, _, err) = binary(&["--access-log", &a, "--log-format", wrong], Stdio::null());
    assert_eq!(status, 3, "{err}");
    assert!(err.contains(wrong), "{err}");
    fs::remove_dir_all(dir).ok();
}

#[test]
fn no_access_log_read_exits_4() {
    let dir = scratch("noaccess");
    let [_, _, e, e1] = write_scenario(&dir);
    // Error logs only.
    let (status, out, err) = binary(&["--error-log", &e, "--error-log", &e1], Stdio::null());
    assert_eq!(status, 4, "{err}");
    assert!(err.contains("no access log read"), "{err}");
    assert!(out.contains("note: no access log"), "{out}");
    // Every access log empty (blank lines are no entries either).
    let empty = dir.join("access.empty.log");
    fs::write(&empty, "").expect("write");
    let blank = dir.join("access.blank.log");
    fs::write(&blank, "\n\n").expect("write");
    let (status, _, err) = binary(
        &[
            "--access-log",
            &empty.display().to_string(),
            "--access-log",
            &blank.display().to_string(),
            "--error-log",
            &e,
            "--log-format",
            FORMAT,
        ],
        Stdio::null(),
    );
    assert_eq!(status, 4, "{err}");
    assert!(err.contains("every access log is empty"), "{err}");
    // An empty standard input.
    let (status, _, err) = binary_piped(&["--access-log", "-", "--log-format", FORMAT], b"");
    assert_eq!(status, 4, "{err}");
    assert!(err.contains("every access log is empty (stdin)"), "{err}");
    fs::remove_dir_all(dir).ok();
}
