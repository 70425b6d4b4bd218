//! `cargo xtask build --for /path/to/nginx`: the module for the nginx an
//! operator runs. It reads that binary's `nginx -V`, builds the module for
//! its version (the matrix, or `--nginx-source`), and proves the result
//! loads into that very binary with `nginx -t`; or says why it cannot, and
//! what to do instead.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::build::{build_version, MODULE_FILE};
use crate::versions::MATRIX;
use crate::workspace::Result;

/// What `nginx -V` says about a binary.
#[derive(Debug, PartialEq, Eq)]
pub struct Identity {
    pub version: String,
    pub arguments: Vec<String>,
}

impl Identity {
    fn has(&self, flag: &str) -> bool {
        self.arguments.iter().any(|a| a == flag)
    }
}

/// Parses `nginx -V` output: `nginx version: nginx/1.30.4 (Ubuntu)` and
/// `configure arguments: ...` (arguments split on blanks outside quotes).
pub fn parse_v(text: &str) -> Option<Identity> {
    let version = text
        .lines()
        .find_map(|l| l.split("nginx version: nginx/").nth(1))?
        .split_whitespace()
        .next()?
        .to_string();
    let args = text
        .lines()
        .find_map(|l| l.strip_prefix("configure arguments:"))
        .unwrap_or("");
    let mut arguments = Vec::new();
    let mut cur = String::new();
    let mut quoted = None;
    for c in args.chars() {
        match (quoted, c) {
            (None, '\'' | '"') => quoted = Some(c),
            (Some(q), c) if c == q => quoted = None,
            (None, c) if c.is_whitespace() => {
                if !cur.is_empty() {
                    arguments.push(std::mem::take(&mut cur));
                }
            }
            (_, c) => cur.push(c),
        }
    }
    if !cur.is_empty() {
        arguments.push(cur);
    }
    Some(Identity { version, arguments })
}

/// `cargo xtask build --for BINARY [--nginx-source PATH]`.
pub fn build_for(binary: &Path, source: Option<&Path>) -> Result {
    let out = Command::new(binary)
        .arg("-V")
        .output()
        .map_err(|e| format!("{}: {e}", binary.display()))?;
    let said = String::from_utf8_lossy(&out.stderr);
    let id = parse_v(&said).ok_or(format!(
        "{} -V does not say `nginx version: nginx/...`:\n{said}",
        binary.display()
    ))?;
    let v = &id.version;
    eprintln!("xtask: {} is nginx {v}", binary.display());

    if !id.has("--with-compat") {
        return Err(format!(
            "{} (nginx {v}) was configured without --with-compat, so it loads only \
             modules built against its own configured tree. Configure nginx {v}'s source \
             with its arguments (`nginx -V`), then build against that tree's objs: \
             NGINX_BUILD_DIR=/path/to/nginx-{v}/objs cargo build --release \
             --no-default-features --features export-modules (README: Against your own \
             configured tree)",
            binary.display()
        ));
    }
    let debian_src = Path::new("/usr/share/nginx/src");
    if id.has("--prefix=/usr/share/nginx") && source.is_none() {
        // Debian's and Ubuntu's layout: their module build is from nginx-dev.
        let dev = crate::versions::tree_version(debian_src).ok();
        return Err(match dev {
            Some(dev) if dev == *v => format!(
                "{} is a Debian or Ubuntu nginx {v}: build its package with \
                 `cargo xtask debian --installed` (nginx-dev {dev} is installed)",
                binary.display()
            ),
            Some(dev) => format!(
                "{} is nginx {v} but the installed nginx-dev is {dev}: upgrade them \
                 together (apt install nginx nginx-dev), then `cargo xtask debian --installed`",
                binary.display()
            ),
            None => format!(
                "{} is a Debian or Ubuntu nginx {v}: `apt install nginx-dev`, then \
                 `cargo xtask debian --installed`",
                binary.display()
            ),
        });
    }
    if source.is_none() && !MATRIX.contains(&v.as_str()) {
        return Err(format!(
            "nginx {v} has no pinned source here (the matrix is {}): get nginx.org's \
             nginx-{v}.tar.gz and add --nginx-source /path/to/nginx-{v}.tar.gz",
            MATRIX.join(", ")
        ));
    }
    let built = build_version(v, source)?;
    let module = built.install.join("modules").join(MODULE_FILE);
    prove_loads(binary, &module)?;
    println!(
        "xtask: {} loads into {}: add to the top of its nginx.conf\n    load_module {};",
        module.display(),
        binary.display(),
        module.display()
    );
    Ok(())
}

/// `BINARY -t` of a configuration that loads `module`, in a scratch
/// prefix; fails with nginx's words when it refuses.
fn prove_loads(binary: &Path, module: &Path) -> Result {
    let dir = std::env::temp_dir().join(format!("xtask-for-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(dir.join("logs")).map_err(|e| e.to_string())?;
    let conf: PathBuf = dir.join("nginx.conf");
    fs::write(
        &conf,
        format!(
            "load_module {};\nerror_log stderr;\npid {}/nginx.pid;\nevents {{}}\n",
            module.display(),
            dir.display()
        ),
    )
    .map_err(|e| e.to_string())?;
    let out = Command::new(binary)
        .arg("-e")
        .arg("stderr")
        .arg("-p")
        .arg(&dir)
        .arg("-c")
        .arg(&conf)
        .arg("-t")
        .output()
        .map_err(|e| format!("{}: {e}", binary.display()))?;
    let _ = fs::remove_dir_all(&dir);
    let said = String::from_utf8_lossy(&out.stderr);
    if out.status.success() && said.contains("test is successful") {
        return Ok(());
    }
    Err(format!(
        "{} refuses the module it should take:\n{said}",
        binary.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nginx_v_is_parsed() {
        let id = parse_v(
            "nginx version: nginx/1.30.6 (Debian)\nbuilt with OpenSSL 3.6.5\n\
             configure arguments: --with-cc-opt='-g -O2 -fPIC' --prefix=/usr/share/nginx --with-compat\n",
        )
        .unwrap();
        assert_eq!(id.version, "1.30.6");
        assert_eq!(
            id.arguments,
            [
                "--with-cc-opt=-g -O2 -fPIC",
                "--prefix=/usr/share/nginx",
                "--with-compat"
            ]
        );
        assert!(id.has("--with-compat"));
        assert!(parse_v("Usage: something else").is_none());
    }
}
