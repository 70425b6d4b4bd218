//! The `generation-retry-diagnose` binary: tells which of an nginx's
//! 502/504s are the upstream generation race, from its stock logs. A thin
//! wrapper around the library's [`run`]; the library's docs name its
//! neighbours (the module, whose `cause=` lines label the lab's logs, and
//! the test bench `t/`, which scores it on them).

use std::process::ExitCode;

use generation_retry_diagnose::run;

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let status = run(
        &args,
        &mut std::io::stdout().lock(),
        &mut std::io::stderr().lock(),
    );
    ExitCode::from(u8::try_from(status).unwrap_or(1))
}
