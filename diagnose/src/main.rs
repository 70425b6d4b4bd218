//! The `generation-retry-diagnose` binary: see the library's [`run`].

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
