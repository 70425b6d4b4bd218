//! The bottom of xtask's module graph: where the workspace is, where cargo
//! puts things, and running a command. Every other module may use this
//! one; it uses none of them.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The version `cargo xtask build` and `nginx-test` use without `--nginx`:
/// the release of the nginx-src crate 1.28.1, which nginx-sys builds.
pub const DEFAULT: &str = "1.28.0";

pub type Result<T = ()> = std::result::Result<T, Error>;

/// What went wrong: the file or the program it concerned and the cause,
/// or what a command found wrong, in words.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot run {program}: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error("{0}")]
    Said(String),
}

/// `Err` of what a command found wrong: `return err!("{path}: no version")`.
macro_rules! err {
    ($($what:tt)*) => {
        Err(format!($($what)*).into())
    };
}

impl From<String> for Error {
    fn from(said: String) -> Error {
        Error::Said(said)
    }
}

impl From<&str> for Error {
    fn from(said: &str) -> Error {
        Error::Said(said.to_string())
    }
}

/// An I/O result with the path it was about, `fs::read(&p).at(&p)?`, or
/// the program that could not be run, `cmd.output().running("git")?`.
pub trait At<T> {
    fn at(self, path: impl AsRef<Path>) -> Result<T>;
    fn running(self, program: impl std::fmt::Display) -> Result<T>;
}

impl<T> At<T> for std::io::Result<T> {
    fn at(self, path: impl AsRef<Path>) -> Result<T> {
        self.map_err(|source| Error::Io {
            path: path.as_ref().to_path_buf(),
            source,
        })
    }

    fn running(self, program: impl std::fmt::Display) -> Result<T> {
        self.map_err(|source| Error::Spawn {
            program: program.to_string(),
            source,
        })
    }
}

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
    let status = cmd.status().running(format!("{cmd:?}"))?;
    if status.success() {
        Ok(())
    } else {
        err!("{cmd:?} failed: {status}")
    }
}
