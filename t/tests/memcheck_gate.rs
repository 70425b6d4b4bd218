//! The memcheck gate itself (`cargo xtask valgrind` runs it; it needs
//! valgrind): without `ci/valgrind.supp`, memcheck reports nginx's own
//! known leak at exit, the harness reads it as a failure with its stack,
//! and names the module when the module is in that stack; with the
//! suppressions, the same run is clean. So "0 errors" means the gate looked.

use std::path::{Path, PathBuf};

use generation_retry_t::memcheck::{self, involves_module};
use generation_retry_t::nginx::Flavor;
use generation_retry_t::scenarios::http::{Lab, Spec};

/// The module on in a `hash ... consistent` upstream with a zone: every
/// request's peer.init goes through the module's wrapper into nginx's
/// `ngx_http_upstream_update_chash`, whose heap table nginx leaks at exit.
async fn run(log: &Path, suppressions: bool) -> memcheck::Report {
    let command: Vec<String> = memcheck::command(log)
        .into_iter()
        .filter(|a| suppressions || !a.starts_with("--suppressions="))
        .collect();
    let spec = Spec {
        wrapper: command,
        ..Spec::two_peers(
            Flavor::with_module(),
            "hash $request_uri consistent;",
            "generation_retry_resnapshot on;",
        )
    };
    let lab = Lab::start_spec(spec).await;
    assert_eq!(lab.client.get("/gate").await.status(), 200);
    lab.finish();
    memcheck::read(log)
}

fn log_path(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("generation-retry-gate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("gate log directory");
    dir.join(name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs valgrind; run by `cargo xtask valgrind`"]
async fn memcheck_gate_reports_leaks_with_stacks_and_suppresses_only_nginx_own() {
    let bare = run(&log_path("bare.log"), false).await;
    assert!(bare.complete, "{bare:?}");
    assert!(!bare.clean(), "no leak reported without suppressions");
    assert!(bare.definitely_lost_blocks >= 2, "{bare:?}");
    let chash: Vec<&String> = bare
        .excerpts
        .iter()
        .filter(|e| e.contains("ngx_http_upstream_update_chash"))
        .collect();
    assert!(!chash.is_empty(), "{:#?}", bare.excerpts);
    assert!(
        chash.iter().all(|e| involves_module(e)),
        "the module's wrapper is in the stack but not named: {chash:#?}"
    );
    assert!(
        bare.excerpts
            .iter()
            .any(|e| e.contains("ngx_set_environment")),
        "{:#?}",
        bare.excerpts
    );

    let suppressed = run(&log_path("suppressed.log"), true).await;
    assert!(
        suppressed.clean(),
        "{}",
        suppressed.describe(Path::new("suppressed.log"))
    );
    let _ = std::fs::remove_dir_all(log_path("x").parent().unwrap());
}
