//! The `nginx-src` crate on crates.io, which carries some nginx releases:
//! which release carries which, and its `nginx/` tree fetched by cargo
//! (checked against the registry's checksum).

use std::fs;
use std::path::{Path, PathBuf};

use super::download::remedies;
use crate::workspace::{cargo, target_dir, At, Result};

/// The releases of the `nginx-src` crate, by the nginx they carry (the
/// newest crate release for each): crates.io's index on 2026-12-02.
pub const CRATES: &[(&str, &str)] = &[
    ("1.28.0", "1.28.1+1.28.0"),
    ("1.28.1", "1.28.3+1.28.1"),
    ("1.28.2", "1.28.4+1.28.2"),
    ("1.28.3", "1.28.5+1.28.3"),
];

/// The `nginx/` tree of the `nginx-src` crate release `krate`, which cargo
/// fetches from crates.io (checked against the registry's checksum) into
/// its own cache, through a stub package that depends on exactly it.
pub(super) fn from_crate(krate: &str) -> Result<(PathBuf, String)> {
    let stub = target_dir().join("nginx/crates").join(krate);
    fs::create_dir_all(stub.join("src")).at(&stub)?;
    let plain = krate.split('+').next().unwrap_or(krate);
    fs::write(
        stub.join("Cargo.toml"),
        format!(
            "[package]\nname = \"nginx-src-fetch\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\
             publish = false\n\n[dependencies]\nnginx-src = \"={plain}\"\n\n[workspace]\n"
        ),
    )
    .at(stub.join("Cargo.toml"))?;
    fs::write(stub.join("src/lib.rs"), "").at(stub.join("src/lib.rs"))?;
    let out = cargo()
        .current_dir(&stub)
        .args(["metadata", "--format-version", "1"])
        .env_remove("CARGO_TARGET_DIR")
        .output()
        .running("cargo metadata")?;
    if !out.status.success() {
        let nginx = krate.rsplit('+').next().unwrap_or(krate);
        return err!(
            "cargo could not fetch nginx-src {krate} (nginx {nginx}) from crates.io: {}\n{}",
            String::from_utf8_lossy(&out.stderr).trim(),
            remedies(&super::tarball_name(nginx))
        );
    }
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("cargo metadata printed no JSON: {e}"))?;
    let manifest = meta["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == "nginx-src" && p["version"] == krate)
        .and_then(|p| p["manifest_path"].as_str())
        .ok_or(format!("cargo metadata lists no nginx-src {krate}"))?;
    let tree = Path::new(manifest)
        .parent()
        .map(|d| d.join("nginx"))
        .ok_or("nginx-src's manifest has no directory")?;
    Ok((tree, format!("nginx-src {krate}")))
}
