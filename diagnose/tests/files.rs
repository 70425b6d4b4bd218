//! Reading real files: plain and gzip (told apart by magic bytes), rotated
//! files in any order, a truncated gzip naming the file, and the JSON
//! output of a whole run parsed back with serde_json.

mod common;

use std::ffi::OsString;
use std::fs;
use std::io::Write;
use std::path::Path;

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
    assert_eq!(s["by_family"].as_object().map(|o| o.len()), Some(5));
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
    assert_eq!(status, 0, "{err}");
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
