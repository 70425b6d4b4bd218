//! The bottom of xtask's module graph: where the workspace is, where cargo
//! puts things, and running a command. Every other module may use this
//! one; it uses none of them.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The version `cargo xtask build` and `nginx-test` use without `--nginx`:
/// the release of the nginx-src crate 1.28.1, which nginx-sys builds.
pub const DEFAULT: &str = "1.28.0";

pub type Result<T = ()> = std::result::Result<T, String>;

/// The workspace root (the parent of this crate's manifest directory).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives one level below the workspace root")
        .to_path_buf()
}

/// cargo's target directory, honouring CARGO_TARGET_DIR.
pub fn target_dir() -> PathBuf {
    match env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            if dir.is_absolute() {
                dir
            } else {
                root().join(dir)
            }
        }
        None => root().join("target"),
    }
}

/// Where `build` installs one version: `target/nginx/VERSION`.
pub fn version_dir(version: &str) -> PathBuf {
    target_dir().join("nginx").join(version)
}

/// The cargo that runs xtask, in the workspace root.
pub fn cargo() -> Command {
    let mut cmd = Command::new(env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.current_dir(root());
    cmd
}

pub fn run(cmd: &mut Command) -> Result {
    let status = cmd
        .status()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{cmd:?} failed: {status}"))
    }
}
