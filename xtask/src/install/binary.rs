//! The operator's nginx: what `BINARY -V` says of it, whether it can take
//! the module, and running it (`-t`, `-T`) as the install does: with
//! `-e stderr`, so what nginx says while it starts and parses the
//! configuration comes to the install, not into the error log it starts
//! with (the production one, `--error-log-path`); once the
//! configuration's own `error_log` takes over (opening shared zones and
//! listening sockets), nginx logs there.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

use super::conf::Dump;
use super::Args;
use crate::source;
use crate::workspace::{At, Result};

/// The first nginx with `server ... resolve` in open source, and with it
/// the generation check this module answers.
pub const FLOOR: (u32, u32, u32) = (1, 27, 3);

/// What `nginx -V` says about a binary.
#[derive(Debug, PartialEq, Eq)]
pub struct Identity {
    /// The nginx version (Tengine 3.2.0's is 1.31.3).
    pub version: String,
    /// Whose source the module is built against: the nginx version, or
    /// `tengine-X.Y.Z` (`-V` says `Tengine version: Tengine/X.Y.Z`), whose
    /// structures differ from nginx's.
    pub codebase: String,
    pub arguments: Vec<String>,
}

impl Identity {
    pub(super) fn has(&self, flag: &str) -> bool {
        self.arguments.iter().any(|a| a == flag)
    }

    /// The value of `--name=value`.
    pub(super) fn value(&self, name: &str) -> Option<&str> {
        self.arguments
            .iter()
            .find_map(|a| a.strip_prefix(name)?.strip_prefix('='))
    }

    /// `nginx 1.30.4`, `tengine-3.2.0 (nginx 1.31.3)`.
    pub(super) fn describe(&self) -> String {
        if self.codebase == self.version {
            format!("nginx {}", self.version)
        } else {
            format!("{} (nginx {})", self.codebase, self.version)
        }
    }

    pub(super) fn version_tuple(&self) -> Option<(u32, u32, u32)> {
        let mut it = self.version.split('.').map(|p| p.parse::<u32>().ok());
        Some((it.next()??, it.next()??, it.next()??))
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
    let fork = |says: &str, name: &str| {
        text.lines()
            .find_map(|l| l.split(says).nth(1))
            .and_then(|rest| rest.split_whitespace().next())
            .map(|v| format!("{name}-{v}"))
    };
    let codebase = fork("Tengine version: Tengine/", "tengine")
        .or_else(|| fork("Angie version: Angie/", "angie"))
        .unwrap_or_else(|| version.clone());
    Some(Identity {
        version,
        codebase,
        arguments,
    })
}

/// The first nginx with `-e` (the error log it starts with, before its
/// configuration names one).
const HAS_E: (u32, u32, u32) = (1, 19, 5);

/// What `--for PATH` names, when it is no program to run: a directory, a
/// missing file, a file without execute permission (nginx.conf, as like
/// as not). Said for what it is before anything runs it, where running it
/// would only say `Permission denied`.
pub(super) fn not_a_binary(path: &Path) -> Option<String> {
    let shown = path.display();
    let pass = "pass the nginx binary, e.g. --for /usr/sbin/nginx (`command -v nginx` \
                or `ps -o args= -C nginx` names it)";
    let meta = match fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Some(format!("--for {shown}: no such file: {pass}"));
        }
        Err(e) => return Some(format!("--for {shown}: {e}")),
    };
    if meta.is_dir() {
        let inside = ["sbin/nginx", "nginx"]
            .iter()
            .map(|b| path.join(b))
            .find(|b| b.is_file());
        let here = inside.map_or(String::new(), |b| format!("; here: --for {}", b.display()));
        return Some(format!("--for {shown} is a directory: {pass}{here}"));
    }
    if !meta.is_file() {
        return Some(format!("--for {shown} is not a regular file: {pass}"));
    }
    let mode = meta.permissions().mode();
    if mode & 0o111 != 0 {
        return None;
    }
    let looks = if looks_like_configuration(path) {
        "; it looks like a configuration file, which the install finds from the binary \
         (its --conf-path, or --prefix DIR)"
    } else {
        ""
    };
    Some(format!(
        "--for {shown} is not an executable (mode {:04o}){looks}: {pass}",
        mode & 0o7777
    ))
}

/// Whether `path` reads as nginx configuration: a `.conf` name, or
/// directives and blocks in its first kilobytes.
fn looks_like_configuration(path: &Path) -> bool {
    if path.extension().is_some_and(|e| e == "conf") {
        return true;
    }
    let Ok(bytes) = fs::read(path) else {
        return false;
    };
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(16384)]);
    text.lines().any(|l| {
        let l = l.trim();
        [
            "events",
            "http",
            "stream",
            "worker_processes",
            "include",
            "load_module",
        ]
        .iter()
        .any(|d| l.starts_with(d))
            && (l.ends_with(';') || l.ends_with('{'))
    })
}

/// `BINARY -V`, read (after [`not_a_binary`]).
pub(super) fn identify(binary: &Path) -> Result<Identity> {
    if let Some(why) = not_a_binary(binary) {
        return Err(why.into());
    }
    let out = Command::new(binary).arg("-V").output().at(binary)?;
    let said = String::from_utf8_lossy(&out.stderr);
    parse_v(&said).ok_or(
        format!(
            "{} -V does not say `nginx version: nginx/...`:\n{said}",
            binary.display()
        )
        .into(),
    )
}

/// Whether this binary can take the module; `Ok(false)` when it has no
/// race to fix (said, exit 0).
pub(super) fn admissible(a: &Args, id: &Identity) -> Result<bool> {
    let v = &id.version;
    let bin = a.binary.display();
    let Some(tuple) = id.version_tuple() else {
        return err!("{bin} says nginx/{v}, which is not a version");
    };
    if tuple < FLOOR {
        println!(
            "nginx {v} is not affected: the race came with `server ... resolve` in nginx \
             1.27.3 (nginx/nginx#1656). Nothing to install."
        );
        return Ok(false);
    }
    if id.codebase.starts_with("angie-") {
        return err!(
            "{bin} is {}: no module on ngx 0.5 can be built for Angie. nginx-sys's module \
             structure names nginx's `spare1`, which Angie calls `angie_sign`, and past that \
             (BINDGEN_EXTRA_CLANG_ARGS=-Dangie_sign=spare1) ngx's logging calls \
             `ngx_log_error_core` as nginx declares it, while Angie's takes a file name \
             first. Angie's fix is its core patch: nginx-src-patches/angie-1.12.1 \
             (docs/versions.md, Tengine and Angie)",
            id.describe()
        );
    }
    if id.has("--without-http_upstream_zone_module") {
        println!(
            "{bin} (nginx {v}) has no http upstream zone module, which the module needs (the \
             generation it follows lives in the zone). Nothing to install."
        );
        return Ok(false);
    }
    if !id.has("--with-compat") {
        return err!(
            "{bin} (nginx {v}) was configured without --with-compat, so it loads only \
             modules built against its own configured tree. Configure nginx {v}'s source with \
             the arguments `nginx -V` prints, then build against that tree's objs: \
             NGINX_BUILD_DIR=/path/to/nginx-{v}/objs cargo build --release \
             --no-default-features --features export-modules (README: Building from source)"
        );
    }
    if id.has("--prefix=/usr/share/nginx") && a.source.user.is_none() {
        // Debian's and Ubuntu's own nginx: their module build is from
        // nginx-dev, and apt should know the module.
        let dev = source::tree_version(Path::new("/usr/share/nginx/src")).ok();
        let then = "then `apt install ./target/debian/libnginx-mod-http-generation-retry_*.deb`";
        return Err(match dev {
            Some(dev) if dev == *v => format!(
                "{bin} is Debian's or Ubuntu's nginx {v}: build the package with \
                 `cargo xtask debian --installed --no-test`, {then}"
            )
            .into(),
            Some(dev) => format!(
                "{bin} is nginx {v} but the installed nginx-dev is {dev}: upgrade them \
                 together (apt install nginx nginx-dev), then `cargo xtask debian --installed \
                 --no-test`, {then}"
            )
            .into(),
            None => format!(
                "{bin} is Debian's or Ubuntu's nginx {v}: `apt install nginx-dev`, then \
                 `cargo xtask debian --installed --no-test`, {then}"
            )
            .into(),
        });
    }
    Ok(true)
}

/// `BINARY [-e stderr] [-p PREFIX] ARGS`: `-e stderr` where the binary
/// has it ([`Args::stderr_log`]), so what nginx says while it starts and
/// parses the configuration reaches the install, not the production
/// error log (see the module's head for what still may).
fn nginx(a: &Args, args: &[&str]) -> Result<Output> {
    let mut cmd = Command::new(&a.binary);
    if a.stderr_log {
        cmd.args(["-e", "stderr"]);
    }
    if let Some(p) = &a.prefix {
        cmd.arg("-p").arg(p);
    }
    cmd.args(args).output().at(&a.binary)
}

/// `BINARY -t` of the running configuration: nginx's words when it fails.
pub(super) fn test_config(a: &Args) -> std::result::Result<(), String> {
    let out = nginx(a, &["-t"]).map_err(|e| e.to_string())?;
    let said = String::from_utf8_lossy(&out.stderr).trim().to_string();
    if out.status.success() {
        Ok(())
    } else {
        Err(said)
    }
}

/// `BINARY -T` of the running configuration: its files as nginx read
/// them, or nginx's words when the test fails.
pub(super) fn dump(a: &Args) -> std::result::Result<Dump, String> {
    let out = nginx(a, &["-T"]).map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(Dump::parse(&String::from_utf8_lossy(&out.stdout)))
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

impl Identity {
    /// Whether the binary takes `-e stderr` (nginx 1.19.5 and later).
    pub(super) fn has_e(&self) -> bool {
        self.version_tuple().is_some_and(|v| v >= HAS_E)
    }
}
