//! The operator's commands: the module for the nginx they run, built and
//! installed with one command, and taken out again.
//!
//! - `cargo xtask install --for BINARY`: reads `BINARY -V`; stops with exit 0
//!   below nginx 1.27.3 (no `resolve`, no race) and with the way to build
//!   against the binary's own tree when it lacks `--with-compat`; obtains
//!   that exact version's source (`source/mod.rs`: `--nginx-source`, the
//!   mirror, the `nginx-src` crate, or nginx.org's signed tarball);
//!   configures it with the flags of the binary that decide structure
//!   layouts and which parts the module has (no `make`: no nginx is built);
//!   compiles the module against it; proves the result loads into
//!   `BINARY` in a scratch configuration; installs it into the binary's
//!   modules path beside its predecessor (`.so.old`), writes the
//!   `load_module` snippet (`modules-enabled/` where the configuration
//!   directory has one, else `modules.d/generation-retry.conf`), and runs
//!   `BINARY -t`. When that fails, everything is put back as it was and
//!   nginx's words are printed. Nothing changed is a no-op.
//! - `cargo xtask uninstall --for BINARY`: the snippet out, `BINARY -t`,
//!   then the shared objects; put back when the configuration still needs
//!   the module.
//! - `cargo xtask build --for BINARY`: the build and the load proof only.
//!
//! None of them installs a package: a missing prerequisite is named with
//! the `apt-get install` (or `dnf install`) line that provides it.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::build::{module_against, MODULE_FILE, MODULE_PACKAGE};
use crate::source::{self, Options};
use crate::tree::{nginx_tree, Make};
use crate::workspace::{target_dir, Result};

/// The first nginx with `server ... resolve` in open source, and with it
/// the generation check this module answers.
pub const FLOOR: (u32, u32, u32) = (1, 27, 3);

/// The snippet's name in a Debian-style `modules-enabled/`: after Debian's
/// `50-mod-stream.conf`, which the stream part needs loaded first.
const ENABLED_NAME: &str = "70-mod-http-generation-retry.conf";
/// Elsewhere: a file in `modules.d/`, which nginx.conf includes.
const SNIPPET_DIR: &str = "modules.d";
const SNIPPET_NAME: &str = "generation-retry.conf";

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
    fn has(&self, flag: &str) -> bool {
        self.arguments.iter().any(|a| a == flag)
    }

    /// The value of `--name=value`.
    fn value(&self, name: &str) -> Option<&str> {
        self.arguments
            .iter()
            .find_map(|a| a.strip_prefix(name)?.strip_prefix('='))
    }

    /// `nginx 1.30.4`, `tengine-3.2.0 (nginx 1.31.3)`.
    fn describe(&self) -> String {
        if self.codebase == self.version {
            format!("nginx {}", self.version)
        } else {
            format!("{} (nginx {})", self.codebase, self.version)
        }
    }

    fn version_tuple(&self) -> Option<(u32, u32, u32)> {
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

/// Modules whose `configure` checks need a library beyond OpenSSL, PCRE
/// and zlib; none of them changes a structure the module reads, so the
/// module's tree is configured without them.
const NEEDS_A_LIBRARY: &[&str] = &[
    "--with-http_xslt_module",
    "--with-http_image_filter_module",
    "--with-http_geoip_module",
    "--with-stream_geoip_module",
    "--with-http_perl_module",
    "--with-google_perftools_module",
    "--with-libatomic",
];

/// The configure flags of the module's tree: `--with-compat`, and every
/// value-less `--with-*`/`--without-*` of the binary (they decide the
/// structure layouts and whether the module has its stream part), less
/// the modules that need other libraries; a dynamic stream is configured
/// in, since only its headers matter.
pub fn tree_flags(id: &Identity) -> Vec<String> {
    let mut flags = vec!["--with-compat".to_string()];
    for a in &id.arguments {
        let a = match a.strip_suffix("=dynamic") {
            Some("--with-stream") => "--with-stream",
            Some(_) => continue,
            None => a.as_str(),
        };
        let plain = (a.starts_with("--with-") || a.starts_with("--without-")) && !a.contains('=');
        if plain && !NEEDS_A_LIBRARY.contains(&a) && !flags.iter().any(|f| f == a) {
            flags.push(a.to_string());
        }
    }
    flags
}

/// The options of `install`, `uninstall` and `build --for`.
#[derive(Debug, Default)]
pub struct Args {
    pub binary: PathBuf,
    pub source: Options,
    /// `--prefix DIR`: the prefix the binary runs with (`nginx -p DIR`),
    /// when it is not the compiled-in one.
    pub prefix: Option<PathBuf>,
    pub dry_run: bool,
}

impl Args {
    pub fn parse(args: &[String]) -> Result<Args> {
        let mut out = Args::default();
        let mut binary = None;
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            let (name, inline) = match arg.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (arg.as_str(), None),
            };
            let mut value = || {
                inline
                    .clone()
                    .or_else(|| it.next().cloned())
                    .ok_or(format!("{name} needs a value"))
            };
            match name {
                "--for" => binary = Some(PathBuf::from(value()?)),
                "--nginx-source" => out.source.user = Some(PathBuf::from(value()?)),
                "--sha256" => out.source.sha256 = Some(value()?),
                "--signing-keys" => out.source.keys = Some(PathBuf::from(value()?)),
                "--prefix" => out.prefix = Some(PathBuf::from(value()?)),
                "--dry-run" => out.dry_run = true,
                other => {
                    return Err(format!(
                    "unknown option `{other}` (options: --for NGINX_BINARY, --nginx-source PATH, \
                         --sha256 HEX, --signing-keys DIR, --prefix DIR, --dry-run)"
                ))
                }
            }
        }
        out.binary =
            binary.ok_or("--for NGINX_BINARY is required (for example --for /usr/sbin/nginx)")?;
        Ok(out)
    }
}

/// Where the binary keeps its modules and configuration.
#[derive(Debug, PartialEq, Eq)]
pub struct Layout {
    pub modules: PathBuf,
    pub conf: PathBuf,
    /// The file holding the `load_module` line.
    pub snippet: PathBuf,
    /// The `include` nginx.conf needs for it (none in `modules-enabled/`,
    /// which Debian's nginx.conf includes).
    pub include: Option<String>,
}

impl Layout {
    pub fn of(id: &Identity, prefix: Option<&Path>) -> Layout {
        let prefix = prefix
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from(id.value("--prefix").unwrap_or("/usr/local/nginx")));
        let at = |p: &str| {
            let p = Path::new(p);
            if p.is_absolute() {
                p.to_path_buf()
            } else {
                prefix.join(p)
            }
        };
        let modules = at(id.value("--modules-path").unwrap_or("modules"));
        let conf = at(id.value("--conf-path").unwrap_or("conf/nginx.conf"));
        let conf_dir = conf.parent().unwrap_or(Path::new("/")).to_path_buf();
        let enabled = conf_dir.join("modules-enabled");
        let (snippet, include) = if enabled.is_dir() {
            (enabled.join(ENABLED_NAME), None)
        } else {
            (
                conf_dir.join(SNIPPET_DIR).join(SNIPPET_NAME),
                Some(format!(
                    "include {}/*.conf;",
                    conf_dir.join(SNIPPET_DIR).display()
                )),
            )
        };
        Layout {
            modules,
            conf,
            snippet,
            include,
        }
    }

    fn module(&self) -> PathBuf {
        self.modules.join(MODULE_FILE)
    }

    fn previous(&self) -> PathBuf {
        self.modules.join(format!("{MODULE_FILE}.old"))
    }

    fn snippet_text(&self) -> String {
        format!("load_module {};\n", self.module().display())
    }
}

/// The Debian package that installed the module here, if one did: dpkg
/// knows the shared object, or the `modules-enabled` file is a link.
/// Files a package owns are left to apt.
fn package_owner(layout: &Layout) -> Option<String> {
    let linked = fs::symlink_metadata(&layout.snippet).is_ok_and(|m| m.file_type().is_symlink());
    let out = Command::new("dpkg-query")
        .arg("--search")
        .arg(layout.module())
        .output()
        .ok()
        .filter(|o| o.status.success());
    match out {
        Some(o) => String::from_utf8_lossy(&o.stdout)
            .split(':')
            .next()
            .map(|p| p.trim().to_string()),
        None if linked => Some("a package (the modules-enabled file is a link)".into()),
        None => None,
    }
}

/// `BINARY -V`, read.
fn identify(binary: &Path) -> Result<Identity> {
    let out = Command::new(binary)
        .arg("-V")
        .output()
        .map_err(|e| format!("{}: {e}", binary.display()))?;
    let said = String::from_utf8_lossy(&out.stderr);
    parse_v(&said).ok_or(format!(
        "{} -V does not say `nginx version: nginx/...`:\n{said}",
        binary.display()
    ))
}

/// Whether this binary can take the module; `Ok(false)` when it has no
/// race to fix (said, exit 0).
fn admissible(a: &Args, id: &Identity) -> Result<bool> {
    let v = &id.version;
    let bin = a.binary.display();
    let Some(tuple) = id.version_tuple() else {
        return Err(format!("{bin} says nginx/{v}, which is not a version"));
    };
    if tuple < FLOOR {
        println!(
            "nginx {v} is not affected: the race came with `server ... resolve` in nginx \
             1.27.3 (nginx/nginx#1656). Nothing to install."
        );
        return Ok(false);
    }
    if id.codebase.starts_with("angie-") {
        return Err(format!(
            "{bin} is {}: no module on ngx 0.5 can be built for Angie (nginx-sys's module \
             structure names nginx's `spare1`, which Angie calls `angie_sign`). Angie's fix is \
             its core patch: nginx-src-patches/angie-1.12.1 (README, Tengine and Angie)",
            id.describe()
        ));
    }
    if id.has("--without-http_upstream_zone_module") {
        println!(
            "{bin} (nginx {v}) has no http upstream zone module, which the module needs (the \
             generation it follows lives in the zone). Nothing to install."
        );
        return Ok(false);
    }
    if !id.has("--with-compat") {
        return Err(format!(
            "{bin} (nginx {v}) was configured without --with-compat, so it loads only \
             modules built against its own configured tree. Configure nginx {v}'s source with \
             the arguments `nginx -V` prints, then build against that tree's objs: \
             NGINX_BUILD_DIR=/path/to/nginx-{v}/objs cargo build --release \
             --no-default-features --features export-modules (README: Building from source)"
        ));
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
            ),
            Some(dev) => format!(
                "{bin} is nginx {v} but the installed nginx-dev is {dev}: upgrade them \
                 together (apt install nginx nginx-dev), then `cargo xtask debian --installed \
                 --no-test`, {then}"
            ),
            None => format!(
                "{bin} is Debian's or Ubuntu's nginx {v}: `apt install nginx-dev`, then \
                 `cargo xtask debian --installed --no-test`, {then}"
            ),
        });
    }
    Ok(true)
}

/// A build prerequisite: how to tell it is there, and its packages.
struct Prerequisite {
    what: &'static str,
    apt: &'static str,
    dnf: &'static str,
}

const CC: Prerequisite = Prerequisite {
    what: "a C compiler (cc)",
    apt: "gcc",
    dnf: "gcc",
};
const CURL: Prerequisite = Prerequisite {
    what: "curl (the download from nginx.org)",
    apt: "curl",
    dnf: "curl",
};
const GPGV: Prerequisite = Prerequisite {
    what: "gpgv (the release signature's check)",
    apt: "gpgv",
    dnf: "gnupg2",
};
const LIBCLANG: Prerequisite = Prerequisite {
    what: "libclang (bindgen)",
    apt: "libclang-dev",
    dnf: "clang-devel",
};

/// Headers `configure` needs for the flags: (header, prerequisite).
fn headers(flags: &[String]) -> Vec<(&'static str, Prerequisite)> {
    let has = |f: &str| flags.iter().any(|x| x == f);
    let mut out = Vec::new();
    if flags.iter().any(|f| f.contains("ssl_module")) {
        out.push((
            "#include <openssl/ssl.h>",
            Prerequisite {
                what: "OpenSSL headers",
                apt: "libssl-dev",
                dnf: "openssl-devel",
            },
        ));
    }
    if !has("--without-pcre") && !has("--without-http_rewrite_module") {
        out.push((
            // nginx takes PCRE2, or the older PCRE when that is all there is.
            "#if __has_include(<pcre2.h>)\n#else\n#include <pcre.h>\n#endif",
            Prerequisite {
                what: "PCRE2 headers",
                apt: "libpcre2-dev",
                dnf: "pcre2-devel",
            },
        ));
    }
    if !has("--without-http_gzip_module") {
        out.push((
            "#include <zlib.h>",
            Prerequisite {
                what: "zlib headers",
                apt: "zlib1g-dev",
                dnf: "zlib-devel",
            },
        ));
    }
    out
}

fn has_libclang() -> bool {
    let mut dirs: Vec<PathBuf> = std::env::var_os("LIBCLANG_PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    dirs.extend(
        [
            "/usr/lib",
            "/usr/lib64",
            "/usr/local/lib",
            "/usr/lib/x86_64-linux-gnu",
            "/usr/lib/aarch64-linux-gnu",
        ]
        .map(PathBuf::from),
    );
    for base in ["/usr/lib", "/usr/lib64"] {
        if let Ok(rd) = fs::read_dir(base) {
            for e in rd.flatten() {
                if e.file_name().to_string_lossy().starts_with("llvm") {
                    dirs.push(e.path().join("lib"));
                    dirs.push(e.path().join("lib64"));
                }
            }
        }
    }
    dirs.iter().any(|d| {
        fs::read_dir(d).is_ok_and(|rd| {
            rd.flatten().any(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                n.starts_with("libclang") && n.contains(".so")
            })
        })
    })
}

/// Every prerequisite of configuring with `flags` and running bindgen,
/// checked; the missing ones named with the one line that installs them.
fn check_prerequisites(flags: &[String], download: Option<&source::Options>) -> Result {
    let mut missing = Vec::new();
    // A download needs curl, and gpgv unless a SHA-256 stands in for the
    // signature.
    let runs = |tool: &str| {
        Command::new(tool)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if let Some(opts) = download {
        if !runs("curl") {
            missing.push(CURL);
        }
        if opts.sha256.is_none() && !runs("gpgv") {
            missing.push(GPGV);
        }
    }
    let cc_runs = Command::new("cc")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !cc_runs {
        missing.push(CC);
    } else {
        for (code, pre) in headers(flags) {
            let ok = Command::new("sh")
                .arg("-c")
                .arg(format!(
                    "printf '%s\\n' '{code}' | cc -E -x c - >/dev/null 2>&1"
                ))
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                missing.push(pre);
            }
        }
    }
    if !has_libclang() {
        missing.push(LIBCLANG);
    }
    if missing.is_empty() {
        return Ok(());
    }
    let what: Vec<&str> = missing.iter().map(|p| p.what).collect();
    let apt = format!(
        "apt-get install {}",
        missing.iter().map(|p| p.apt).collect::<Vec<_>>().join(" ")
    );
    let dnf = format!(
        "dnf install {}",
        missing.iter().map(|p| p.dnf).collect::<Vec<_>>().join(" ")
    );
    let line = if Path::new("/usr/bin/apt-get").exists() {
        apt
    } else if Path::new("/usr/bin/dnf").exists() {
        dnf
    } else {
        format!("{apt} (or: {dnf})")
    };
    Err(format!(
        "missing build prerequisites: {}; install them with: {line}",
        what.join(", ")
    ))
}

/// What a build for a binary made.
pub struct ModuleBuild {
    pub so: PathBuf,
    pub version: String,
}

/// The module for `id`: its source obtained and checked, a copy configured
/// with [`tree_flags`], the module compiled against it (both reused when
/// nothing that decides them changed). Nothing else is built.
fn build_module(a: &Args, id: &Identity) -> Result<ModuleBuild> {
    let flags = tree_flags(id);
    let download = matches!(
        source::origin(&id.codebase, &a.source),
        source::Origin::Download(_)
    );
    check_prerequisites(&flags, download.then_some(&a.source))?;
    let src = source::obtain(&id.codebase, &a.source)?;
    eprintln!("xtask: nginx {} from {}", src.version, src.origin);
    let work = target_dir().join("install").join(&src.version);
    let (tree, _, stamp) = nginx_tree(
        &src.tree,
        &src.identity,
        &work.join("tree"),
        &flags,
        &[],
        Make::ConfigureOnly,
    )?;
    let so = module_against(&tree.join("objs"), &stamp, &work.join("module"))?;
    Ok(ModuleBuild {
        so,
        version: src.version,
    })
}

/// `BINARY [-p PREFIX] ARGS`.
fn nginx(a: &Args, args: &[&str]) -> Result<Output> {
    let mut cmd = Command::new(&a.binary);
    if let Some(p) = &a.prefix {
        cmd.arg("-p").arg(p);
    }
    cmd.args(args)
        .output()
        .map_err(|e| format!("{}: {e}", a.binary.display()))
}

/// `BINARY -t` of the running configuration: nginx's words when it fails.
fn test_config(a: &Args) -> std::result::Result<(), String> {
    let out = nginx(a, &["-t"])?;
    let said = String::from_utf8_lossy(&out.stderr).trim().to_string();
    if out.status.success() {
        Ok(())
    } else {
        Err(said)
    }
}

/// The files `BINARY -T` dumps (`# configuration file PATH:`).
fn config_files(a: &Args) -> Result<Vec<PathBuf>> {
    let out = nginx(a, &["-T"])?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix("# configuration file "))
        .map(|l| PathBuf::from(l.trim_end_matches(':')))
        .collect())
}

/// `BINARY -t` of a scratch configuration that loads `module` (after
/// the binary's own dynamic stream module, if it has one): the module
/// fits this binary, whatever its running configuration says.
fn prove_loads(a: &Args, id: &Identity, layout: &Layout, module: &Path) -> Result {
    let dir = target_dir().join(format!("install-probe-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(dir.join("logs")).map_err(|e| e.to_string())?;
    let mut conf = String::new();
    let stream_so = layout.modules.join("ngx_stream_module.so");
    if id.has("--with-stream=dynamic") && stream_so.is_file() {
        conf.push_str(&format!("load_module {};\n", stream_so.display()));
    }
    conf.push_str(&format!(
        "load_module {};\nerror_log stderr;\npid {}/nginx.pid;\nevents {{}}\n",
        module.display(),
        dir.display()
    ));
    let path = dir.join("nginx.conf");
    fs::write(&path, conf).map_err(|e| e.to_string())?;
    let out = Command::new(&a.binary)
        .arg("-e")
        .arg("stderr")
        .arg("-p")
        .arg(&dir)
        .arg("-c")
        .arg(&path)
        .arg("-t")
        .output()
        .map_err(|e| format!("{}: {e}", a.binary.display()));
    let _ = fs::remove_dir_all(&dir);
    let out = out?;
    let said = String::from_utf8_lossy(&out.stderr);
    if out.status.success() && said.contains("test is successful") {
        return Ok(());
    }
    Err(format!(
        "{} refuses the module built for it; nothing was installed:\n{said}",
        a.binary.display()
    ))
}

/// What `build --for` and `install` start with: the options, the binary's
/// identity and its layout; `None` when the binary has no race to fix
/// (said, exit 0).
fn start(args: &[String]) -> Result<Option<(Args, Identity, Layout)>> {
    let a = Args::parse(args)?;
    let id = identify(&a.binary)?;
    eprintln!("xtask: {} is {}", a.binary.display(), id.describe());
    if !admissible(&a, &id)? {
        return Ok(None);
    }
    let layout = Layout::of(&id, a.prefix.as_deref());
    Ok(Some((a, id, layout)))
}

/// `cargo xtask build --for BINARY`: the module, proven to load, not installed.
pub fn build_for(args: &[String]) -> Result {
    let Some((a, id, layout)) = start(args)? else {
        return Ok(());
    };
    if a.dry_run {
        return dry_run(&a, &id, &layout, false);
    }
    let built = build_module(&a, &id)?;
    prove_loads(&a, &id, &layout, &built.so)?;
    println!(
        "xtask: {} loads into {} (nginx {}); install it with cargo xtask install --for {}",
        built.so.display(),
        a.binary.display(),
        built.version,
        a.binary.display()
    );
    Ok(())
}

/// What `--dry-run` prints: each step, nothing done.
fn dry_run(a: &Args, id: &Identity, layout: &Layout, install: bool) -> Result {
    let flags = tree_flags(id);
    let work = target_dir().join("install").join(&id.codebase).join("tree");
    println!("dry run: nothing is fetched, built, written or tested");
    println!(
        "1. source of {}: {}",
        id.describe(),
        source::origin(&id.codebase, &a.source)
    );
    println!(
        "2. configure a copy in {} with: {}",
        work.join("src").display(),
        flags.join(" ")
    );
    println!(
        "3. NGINX_BUILD_DIR={} cargo build --release --locked -p {MODULE_PACKAGE} \
         --no-default-features --features export-modules --target-dir {}",
        work.join("src/objs").display(),
        crate::build::module_target_dir().display()
    );
    println!(
        "4. {} -t of a scratch configuration that loads it",
        a.binary.display()
    );
    if !install {
        return Ok(());
    }
    println!(
        "5. {} -t of the running configuration, before any change",
        a.binary.display()
    );
    println!(
        "6. install {} (the one there kept as {})",
        layout.module().display(),
        layout.previous().display()
    );
    println!(
        "7. write {}: {}",
        layout.snippet.display(),
        layout.snippet_text().trim()
    );
    println!(
        "8. {} -t; on failure {} and {} are put back as they were",
        a.binary.display(),
        layout.module().display(),
        layout.snippet.display()
    );
    Ok(())
}

/// What a file was before the install touched it.
enum Was {
    Absent,
    File(Vec<u8>),
}

impl Was {
    /// `path` as it is now: absent, or its bytes. Any other error (a file
    /// that cannot be read) stops the install before it changes anything.
    fn read(path: &Path) -> Result<Was> {
        match fs::read(path) {
            Ok(b) => Ok(Was::File(b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Was::Absent),
            Err(e) => Err(format!("{}: {e}", path.display())),
        }
    }

    /// Puts `path` back as it was.
    fn restore(&self, path: &Path) -> Result {
        match self {
            Was::File(b) => {
                if fs::read(path).ok().as_deref() != Some(&b[..]) {
                    replace(path, b)?;
                }
                Ok(())
            }
            Was::Absent => match fs::remove_file(path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    Err(format!("{}: {e}", path.display()))
                }
                _ => Ok(()),
            },
        }
    }
}

/// The files the install may change, as they were before it, to put back
/// on failure.
struct Undo {
    module: Was,
    previous: Was,
    snippet: Was,
    snippet_dir_made: bool,
}

impl Undo {
    fn take(layout: &Layout) -> Result<Undo> {
        let dir = layout.snippet.parent().unwrap_or(Path::new("/"));
        Ok(Undo {
            module: Was::read(&layout.module())?,
            previous: Was::read(&layout.previous())?,
            snippet: Was::read(&layout.snippet)?,
            snippet_dir_made: !dir.is_dir(),
        })
    }

    /// Puts back every file as it was (each one tried, the first error
    /// said).
    fn put_back(&self, layout: &Layout) -> Result {
        let results = [
            self.module.restore(&layout.module()),
            self.previous.restore(&layout.previous()),
            self.snippet.restore(&layout.snippet),
        ];
        if self.snippet_dir_made {
            let _ = fs::remove_dir(layout.snippet.parent().unwrap_or(Path::new("/")));
        }
        results.into_iter().collect::<Result<Vec<()>>>().map(|_| ())
    }
}

/// `cargo xtask install --for BINARY [...]`.
pub fn install(args: &[String]) -> Result {
    let Some((a, id, layout)) = start(args)? else {
        return Ok(());
    };
    if a.dry_run {
        return dry_run(&a, &id, &layout, true);
    }
    if let Some(owner) = package_owner(&layout) {
        return Err(format!(
            "{} was installed by {owner}: upgrade it as a package (cargo xtask debian \
             --installed --no-test, then apt install ./target/debian/*.deb), or \
             apt remove it before installing this way",
            layout.module().display()
        ));
    }
    if let Err(said) = test_config(&a) {
        if !stale_module(&said, &layout.module()) {
            return Err(format!(
                "{} -t fails before anything was changed; fix the configuration first:\n{said}",
                a.binary.display()
            ));
        }
        // After an nginx upgrade: the module there was built for the
        // nginx before, which this one refuses. Replacing it is the fix.
        eprintln!(
            "xtask: {} refuses the module installed for another nginx; replacing it",
            a.binary.display()
        );
    }
    let built = build_module(&a, &id)?;
    prove_loads(&a, &id, &layout, &built.so)?;

    let new = fs::read(&built.so).map_err(|e| format!("{}: {e}", built.so.display()))?;
    let text = layout.snippet_text();
    let same_module = fs::read(layout.module()).is_ok_and(|b| b == new);
    let same_snippet = fs::read(&layout.snippet).is_ok_and(|b| b == text.as_bytes());
    if same_module && same_snippet {
        println!(
            "xtask: already installed: {} and {} are up to date; nothing changed",
            layout.module().display(),
            layout.snippet.display()
        );
        return next_steps(&a, &layout);
    }

    let undo = Undo::take(&layout)?;
    let failed = match put_in(&layout, &new, &text, same_module) {
        Err(e) => Some(format!("installing failed: {e}")),
        Ok(()) => test_config(&a).err().map(|said| {
            format!(
                "{} -t failed with the module installed (nginx said:\n{said})\n{}",
                a.binary.display(),
                hint(&said, &layout)
            )
        }),
    };
    if let Some(why) = failed {
        let restored = match undo.put_back(&layout) {
            Ok(()) => "everything was put back as it was".to_string(),
            Err(e) => format!("putting it back failed too: {e}"),
        };
        return Err(format!("{why}\n{restored}"));
    }
    println!(
        "xtask: installed {} for nginx {} and wrote {}; {} -t is successful",
        layout.module().display(),
        built.version,
        layout.snippet.display(),
        a.binary.display()
    );
    next_steps(&a, &layout)
}

/// Installs the shared object (unless `same_module`: the one there is the
/// same bytes), the one there before kept as `.so.old`, and the snippet.
/// The module's path never goes missing: the old file is hard-linked to
/// `.so.old`, then the new one renamed over it, so a reload at any moment
/// finds a module, and a running nginx keeps the file it mapped.
fn put_in(layout: &Layout, new: &[u8], text: &str, same_module: bool) -> Result {
    let module = layout.module();
    fs::create_dir_all(&layout.modules)
        .map_err(|e| format!("{}: {e}", layout.modules.display()))?;
    if !same_module {
        if module.is_file() {
            let previous = layout.previous();
            let _ = fs::remove_file(&previous);
            fs::hard_link(&module, &previous)
                .map_err(|e| format!("{} -> {}: {e}", module.display(), previous.display()))?;
        }
        replace(&module, new)?;
    }
    let dir = layout.snippet.parent().unwrap_or(Path::new("/"));
    fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    replace(&layout.snippet, text.as_bytes())
}

/// `path` replaced by `bytes` (mode 0644): written beside, then renamed.
fn replace(path: &Path, bytes: &[u8]) -> Result {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let tmp = path.with_file_name(format!(".{name}.new"));
    write_file(&tmp, bytes)?;
    fs::rename(&tmp, path).map_err(|e| format!("{}: {e}", path.display()))
}

fn write_file(path: &Path, bytes: &[u8]) -> Result {
    fs::write(path, bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o644))
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// Whether nginx's only complaint is this module built for another nginx
/// (`module ".../MODULE.so" version 1028000 instead of 1030004`, or `is
/// not binary compatible`): what an nginx upgrade leaves behind.
fn stale_module(said: &str, module: &Path) -> bool {
    let emerg: Vec<&str> = said.lines().filter(|l| l.contains("[emerg]")).collect();
    emerg.len() == 1
        && emerg[0].contains(&format!("module \"{}\"", module.display()))
        && (emerg[0].contains(" instead of ") || emerg[0].contains("is not binary compatible"))
}

/// What to do about a failed `nginx -t`, where its words say.
fn hint(said: &str, layout: &Layout) -> String {
    if said.contains("\"load_module\" directive is not allowed here") {
        format!(
            "The snippet is included inside a block: `{}` belongs at the top of {}, \
             outside http, stream and events.",
            layout
                .include
                .clone()
                .unwrap_or_else(|| format!("include {};", layout.snippet.display())),
            layout.conf.display()
        )
    } else if said.contains("is already loaded") {
        format!(
            "{} already loads the module with a load_module line of its own: remove that \
             line (the snippet {} replaces it), then run this again.",
            layout.conf.display(),
            layout.snippet.display()
        )
    } else {
        "Fix what nginx names, then run this again.".to_string()
    }
}

/// Whether the configuration includes the snippet, and what comes next.
fn next_steps(a: &Args, layout: &Layout) -> Result {
    let included = config_files(a)?.contains(&layout.snippet);
    let mut n = 1;
    println!("next:");
    if !included {
        println!(
            "  {n}. {} does not include {} yet: add this line at its top, outside any block:\n         {}",
            layout.conf.display(),
            layout.snippet.display(),
            layout
                .include
                .clone()
                .unwrap_or_else(|| format!("include {};", layout.snippet.display()))
        );
        n += 1;
    }
    println!(
        "  {n}. switch it on where your upstreams are: `generation_retry_resnapshot on;` in http {{}} \
         (and stream {{}}); `off` only counts (docs/directives.md)"
    );
    n += 1;
    println!(
        "  {n}. {} -t && {} -s reload   (or: systemctl reload nginx)",
        a.binary.display(),
        a.binary.display()
    );
    Ok(())
}

/// `cargo xtask uninstall --for BINARY [--prefix DIR] [--dry-run]`.
pub fn uninstall(args: &[String]) -> Result {
    let a = Args::parse(args)?;
    let id = identify(&a.binary)?;
    let layout = Layout::of(&id, a.prefix.as_deref());
    let (module, previous) = (layout.module(), layout.previous());
    if let Some(owner) = package_owner(&layout) {
        return Err(format!(
            "{} was installed by {owner}: remove it with apt remove (or apt purge)",
            module.display()
        ));
    }
    if a.dry_run {
        println!("dry run: nothing is removed");
        println!("1. remove {}", layout.snippet.display());
        println!(
            "2. {} -t; on failure the snippet is put back",
            a.binary.display()
        );
        println!("3. remove {} and {}", module.display(), previous.display());
        return Ok(());
    }
    let snippet = match Was::read(&layout.snippet)? {
        Was::File(b) => Some(b),
        Was::Absent => None,
    };
    if snippet.is_none() && !module.is_file() {
        println!(
            "xtask: neither {} nor {} is there; nothing changed",
            layout.snippet.display(),
            module.display()
        );
        return Ok(());
    }
    if snippet.is_some() {
        fs::remove_file(&layout.snippet)
            .map_err(|e| format!("{}: {e}", layout.snippet.display()))?;
    }
    if let Err(said) = test_config(&a) {
        if let Some(old) = snippet {
            replace(&layout.snippet, &old)?;
        }
        return Err(format!(
            "{} -t fails without the module, so {} was put back and nothing was removed; the \
             configuration still uses it (remove its directives and `generation_retry_*` \
             variables, then run this again). nginx said:\n{said}",
            a.binary.display(),
            layout.snippet.display()
        ));
    }
    for f in [&module, &previous] {
        if f.is_file() {
            fs::remove_file(f).map_err(|e| format!("{}: {e}", f.display()))?;
        }
    }
    println!(
        "xtask: removed {} and {}; {} -t is successful. Reload nginx: {} -s reload",
        layout.snippet.display(),
        module.display(),
        a.binary.display(),
        a.binary.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(args: &str) -> Identity {
        parse_v(&format!(
            "nginx version: nginx/1.30.4\nconfigure arguments: {args}\n"
        ))
        .unwrap()
    }

    #[test]
    fn nginx_v_is_parsed() {
        let id = parse_v(
            "nginx version: nginx/1.30.6 (Debian)\nbuilt with OpenSSL 3.6.5\n\
             configure arguments: --with-cc-opt='-g -O2 -fPIC' --prefix=/usr/share/nginx --with-compat\n",
        )
        .unwrap();
        assert_eq!(id.version, "1.30.6");
        assert_eq!(id.version_tuple(), Some((1, 30, 6)));
        assert_eq!(
            id.arguments,
            [
                "--with-cc-opt=-g -O2 -fPIC",
                "--prefix=/usr/share/nginx",
                "--with-compat"
            ]
        );
        assert!(id.has("--with-compat"));
        assert_eq!(id.value("--prefix"), Some("/usr/share/nginx"));
        assert_eq!(id.codebase, "1.30.6");
        assert!(parse_v("Usage: something else").is_none());
        // Tengine says both; its module is built against Tengine's tree.
        let t = parse_v(
            "Tengine version: Tengine/3.2.0\nnginx version: nginx/1.31.3\n\
             configure arguments: --with-compat\n",
        )
        .unwrap();
        assert_eq!(
            (t.version.as_str(), t.codebase.as_str()),
            ("1.31.3", "tengine-3.2.0")
        );
        assert_eq!(t.describe(), "tengine-3.2.0 (nginx 1.31.3)");
        let a = parse_v(
            "Angie version: Angie/1.12.1\nnginx version: nginx/1.31.2\n\
             configure arguments: --with-compat\n",
        )
        .unwrap();
        assert_eq!(a.codebase, "angie-1.12.1");
    }

    #[test]
    fn the_tree_is_configured_with_the_flags_that_decide_layouts() {
        // nginx.org's packages, abridged.
        let f = tree_flags(&id(
            "--prefix=/etc/nginx --with-compat --with-threads --with-http_ssl_module \
             --with-http_v2_module --with-stream --with-stream_ssl_module \
             --with-cc-opt='-O2 -g' --with-openssl=../openssl-3 --with-http_xslt_module=dynamic \
             --with-http_perl_module --without-pcre",
        ));
        assert_eq!(
            f,
            [
                "--with-compat",
                "--with-threads",
                "--with-http_ssl_module",
                "--with-http_v2_module",
                "--with-stream",
                "--with-stream_ssl_module",
                "--without-pcre"
            ]
        );
        // Debian's dynamic stream is configured in: the module's stream
        // part is built, and loaded after Debian's stream module.
        assert!(tree_flags(&id("--with-compat --with-stream=dynamic"))
            .contains(&"--with-stream".into()));
        assert_eq!(tree_flags(&id("")), ["--with-compat"]);
    }

    #[test]
    fn the_layout_follows_the_binary_and_the_prefix() {
        let l = Layout::of(&id("--with-compat"), Some(Path::new("/tmp/p")));
        assert_eq!(l.modules, Path::new("/tmp/p/modules"));
        assert_eq!(l.conf, Path::new("/tmp/p/conf/nginx.conf"));
        assert_eq!(
            l.snippet,
            Path::new("/tmp/p/conf/modules.d/generation-retry.conf")
        );
        assert_eq!(
            l.include.as_deref(),
            Some("include /tmp/p/conf/modules.d/*.conf;")
        );
        let l = Layout::of(
            &id("--prefix=/etc/nginx --modules-path=/usr/lib/nginx/modules --conf-path=/etc/nginx/nginx.conf"),
            None,
        );
        assert_eq!(
            l.module(),
            Path::new("/usr/lib/nginx/modules").join(MODULE_FILE)
        );
        assert_eq!(l.conf, Path::new("/etc/nginx/nginx.conf"));
    }

    #[test]
    fn only_this_module_built_for_another_nginx_is_stale() {
        let stale = format!(
            "nginx: [emerg] module \"/usr/lib/nginx/modules/{MODULE_FILE}\" version 1028000 \
             instead of 1030004 in /etc/nginx/modules.d/generation-retry.conf:1\n\
             nginx: configuration file /etc/nginx/nginx.conf test failed"
        );
        let ours = Path::new("/usr/lib/nginx/modules").join(MODULE_FILE);
        assert!(stale_module(&stale, &ours));
        assert!(!stale_module(
            &stale,
            &Path::new("/opt/elsewhere").join(MODULE_FILE)
        ));
        assert!(!stale_module(
            &stale.replace(MODULE_FILE, "ngx_other_module.so"),
            &ours
        ));
        assert!(!stale_module(
            "nginx: [emerg] unknown directive \"frob\" in /etc/nginx/nginx.conf:3",
            &ours
        ));
    }

    #[test]
    fn options_are_parsed_and_for_is_required() {
        let a = Args::parse(&["--for=/usr/sbin/nginx".into(), "--dry-run".into()]).unwrap();
        assert_eq!(a.binary, Path::new("/usr/sbin/nginx"));
        assert!(a.dry_run);
        assert!(Args::parse(&["--dry-run".into()])
            .unwrap_err()
            .contains("--for"));
        assert!(Args::parse(&["--for".into()])
            .unwrap_err()
            .contains("needs a value"));
        assert!(Args::parse(&["--frob".into()])
            .unwrap_err()
            .contains("unknown option"));
    }
}
