use super::*;

#[test]
fn finds_the_test_binaries_of_cargos_json() {
    let json = r#"{"reason":"compiler-artifact","manifest_path":"/w/t/Cargo.toml","target":{"kind":["test"],"name":"race","src_path":"/w/t/tests/race.rs"},"profile":{"test":true},"executable":"/w/target/debug/deps/race-1"}
{"reason":"compiler-artifact","manifest_path":"/w/t/Cargo.toml","target":{"kind":["lib"],"name":"generation_retry_t","src_path":"/w/t/src/lib.rs"},"profile":{"test":true},"executable":"/w/target/debug/deps/generation_retry_t-2"}
{"reason":"compiler-artifact","manifest_path":"/w/t/Cargo.toml","target":{"kind":["lib"],"name":"generation_retry_t","src_path":"/w/t/src/lib.rs"},"profile":{"test":false},"executable":null}
{"reason":"build-finished","success":true}"#;
    let b = binaries(json).unwrap();
    assert_eq!(b.len(), 2);
    assert_eq!(b[0].shown, "tests/race.rs");
    assert_eq!(b[0].name, "race");
    assert_eq!(b[0].dir, PathBuf::from("/w/t"));
    assert_eq!(b[1].shown, "unittests src/lib.rs");
    // Read back as cargo's own line is.
    let mut t = TestTotals::default();
    t.add(&format!(
        "     Running {} ({})",
        b[0].shown,
        b[0].exe.display()
    ));
    t.add("test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 40.09s");
    assert_eq!(t.binaries, [("tests/race.rs".to_string(), 40.09)]);
}

#[test]
fn binaries_seen_run_longest_first_and_the_unseen_before_them() {
    let bin = |n: &str| Binary {
        shown: format!("tests/{n}.rs"),
        name: n.into(),
        exe: PathBuf::new(),
        dir: PathBuf::new(),
        suite: false,
        exact: Vec::new(),
        not_run: Vec::new(),
    };
    remember(&[
        ("tests/quick.rs".into(), 1.0),
        ("tests/slow.rs".into(), 40.0),
    ]);
    let mut bins = [bin("quick"), bin("slow"), bin("never_ran_here")];
    slowest_first(&mut bins);
    let order: Vec<&str> = bins.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(order, ["never_ran_here", "slow", "quick"]);
}

#[test]
fn test_arguments_split_into_what_picks_tests_and_what_every_run_gets() {
    let args: Vec<String> = [
        "--skip",
        "patched",
        "stock_",
        "--test-threads",
        "1",
        "--ignored",
        "--exact",
        "--skip=udp::",
        "--format=terse",
    ]
    .map(String::from)
    .to_vec();
    let (pick, rest) = split_test_args(&args);
    assert_eq!(
        pick,
        ["--skip", "patched", "stock_", "--exact", "--skip=udp::"]
    );
    assert_eq!(rest, ["--test-threads", "1", "--ignored", "--format=terse"]);
    assert_eq!(module_of("protocols::fastcgi::x"), Some("protocols"));
    assert_eq!(module_of("top_level"), None);
}

/// A stand-in suite: a script answering libtest's listing as a suite
/// with modules `race` and `module_race` would (the filters ignored
/// but `stock`, which only `race::stock` matches).
fn fake_suite(dir: &std::path::Path) -> Binary {
    use std::os::unix::fs::PermissionsExt;
    let exe = dir.join("suite");
    std::fs::write(
        &exe,
        "#!/bin/sh\ncase \"$*\" in\n*stock*) echo 'race::stock: test' ;;\n\
         *) printf 'race::stock: test\\nrace::on: test\\nmodule_race::on: test\\n' ;;\nesac\n",
    )
    .unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    Binary {
        shown: "tests/suite.rs".into(),
        name: "suite".into(),
        exe,
        dir: dir.to_path_buf(),
        suite: true,
        exact: Vec::new(),
        not_run: Vec::new(),
    }
}

#[test]
fn a_suite_runs_as_one_job_per_module_and_a_selection_it_lacks_fails() {
    let dir = std::env::temp_dir().join(format!("xtask-suite-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let b = fake_suite(&dir);
    let cmd = Command::new("true");
    let jobs = jobs_of(vec![b.clone()], &cmd, &[], Modules::All, true, None).unwrap();
    let got: Vec<(&str, &str, Vec<String>)> = jobs
        .iter()
        .map(|j| (j.name.as_str(), j.shown.as_str(), j.exact.clone()))
        .collect();
    let package = dir.file_name().unwrap().to_string_lossy().into_owned();
    assert_eq!(
        got,
        [
            (
                "race",
                &*format!("{package}/race"),
                vec!["race::stock".into(), "race::on".into()]
            ),
            (
                "module_race",
                &*format!("{package}/module_race"),
                vec!["module_race::on".into()]
            ),
        ]
    );
    // `race` only, though `race::` is a part of `module_race::on`.
    let only = jobs_of(
        vec![b.clone()],
        &cmd,
        &[],
        Modules::Only(&["race"]),
        true,
        None,
    )
    .unwrap();
    assert_eq!(only.len(), 1);
    assert_eq!(only[0].exact, ["race::stock", "race::on"]);
    let but = jobs_of(
        vec![b.clone()],
        &cmd,
        &[],
        Modules::AllBut(&["race"]),
        true,
        None,
    )
    .unwrap();
    assert_eq!(but.len(), 1);
    assert_eq!(but[0].name, "module_race");
    // A module the suite lacks is an error, not a module left out.
    let e = jobs_of(
        vec![b.clone()],
        &cmd,
        &[],
        Modules::Only(&["gone"]),
        false,
        None,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("gone"), "{e}");
    // A module the filters leave empty: an error where it must run.
    let pick = ["stock".to_string()];
    let only = Modules::Only(&["race", "module_race"]);
    let e = jobs_of(vec![b.clone()], &cmd, &pick, only, true, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("module_race"), "{e}");
    let narrowed = jobs_of(vec![b], &cmd, &pick, only, false, None).unwrap();
    assert_eq!(narrowed.len(), 1);
    assert_eq!(narrowed[0].exact, ["race::stock"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn waiting_binaries_run_more_tests_at_once_unless_told() {
    assert_eq!(
        test_threads("protocols", &[]),
        Some("--test-threads=12".to_string())
    );
    assert_eq!(test_threads("race", &[]), None);
    let told = ["--test-threads=1".to_string()];
    assert_eq!(test_threads("protocols", &told), None);
}

/// A module's job fails when it is killed, exits non-zero, prints no
/// result of libtest, or runs none of its tests, whatever the other jobs
/// passed (issue 48, item 5): each a real process, a script standing in
/// for the suite.
#[test]
fn a_job_killed_silent_or_running_nothing_fails() {
    let job = |exact: usize| Binary {
        shown: "t/race".into(),
        name: "race".into(),
        exe: PathBuf::new(),
        dir: PathBuf::new(),
        suite: true,
        exact: vec!["race::x".into(); exact],
        not_run: Vec::new(),
    };
    let run = |script: &str| {
        let (status, text) = run_captured(Command::new("sh").args(["-c", script]));
        verdict(&job(2), &status, &text)
    };
    let result = |n: u32| {
        format!("echo 'test result: ok. {n} passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.01s'")
    };
    assert_eq!(run(&result(2)), None);
    let killed = run(&format!("{}; kill -9 $$", result(2))).unwrap();
    assert!(killed.contains("signal: 9"), "{killed}");
    let failed = run(&format!("{}; exit 101", result(2))).unwrap();
    assert!(failed.contains("101"), "{failed}");
    assert_eq!(run("true").as_deref(), Some("printed no test result"));
    assert_eq!(run(&result(0)).as_deref(), Some("ran none of its 2 tests"));
    let e = run_captured(&mut Command::new("/nonexistent/suite")).0;
    assert!(e.is_err_and(|e| e.to_string().contains("cannot run")));
    // A unit-test binary may hold no test.
    let (status, text) = run_captured(Command::new("sh").args(["-c", &result(0)]));
    let unit = Binary {
        suite: false,
        ..job(0)
    };
    assert_eq!(verdict(&unit, &status, &text), None);
}

/// A test of a protocol the nginx under test does not speak is not run
/// but reported, by the version `crate::since` says it needs.
#[test]
fn a_test_of_a_protocol_the_nginx_does_not_speak_is_reported_not_run() {
    let dir = std::env::temp_dir().join(format!("xtask-since-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let b = fake_suite(&dir);
    std::fs::write(
        &b.exe,
        "#!/bin/sh\nprintf 'protocols::grpc::on: test\\nprotocols::http2::on: test\\n'\n",
    )
    .unwrap();
    let cmd = Command::new("true");
    let needs = crate::since::since("http2");
    let older = (needs.0, needs.1, needs.2 - 1);
    let jobs = jobs_of(vec![b.clone()], &cmd, &[], Modules::All, true, Some(older)).unwrap();
    assert_eq!(jobs[0].exact, ["protocols::grpc::on"]);
    assert_eq!(
        jobs[0].not_run,
        [format!(
            "test protocols::http2::on ... not run: needs nginx {}, this is {}",
            crate::since::show(needs),
            crate::since::show(older)
        )]
    );
    for nginx in [Some(needs), None] {
        let jobs = jobs_of(vec![b.clone()], &cmd, &[], Modules::All, true, nginx).unwrap();
        assert_eq!(
            jobs[0].exact,
            ["protocols::grpc::on", "protocols::http2::on"]
        );
        assert!(jobs[0].not_run.is_empty());
    }
    let _ = std::fs::remove_dir_all(&dir);
}
