//! The operator's commands: the module for the nginx they run, built and
//! installed with one command, and taken out again.
//!
//! - `cargo xtask install --for BINARY`: reads `BINARY -V`; stops with exit 0
//!   below nginx 1.27.3 (no `resolve`, no race) and with the way to build
//!   against the binary's own tree when it lacks `--with-compat`; obtains
//!   that exact version's source (`source/`: `--nginx-source`, the
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
//!
//! Here the commands and their options; the binary read and judged in
//! `binary.rs`, the build in `compile.rs` (its prerequisites in
//! `prerequisites.rs`), the files placed and put back in `place.rs`,
//! `uninstall` in `uninstall.rs`.

mod binary;
mod compile;
mod place;
mod prerequisites;
mod uninstall;

use std::fs;
use std::path::{Path, PathBuf};

use crate::build::MODULE_PACKAGE;
use crate::source::{self, Options};
use crate::workspace::{target_dir, Result};

use binary::{admissible, config_files, identify, test_config, Identity};
use compile::{build_module, prove_loads, tree_flags};
use place::{package_owner, put_in, Layout, Undo};

pub use uninstall::uninstall;

/// What `install`, `uninstall` and `build --for` take (`--help`).
pub const USAGE: &str = "\
cargo xtask install --for NGINX_BINARY [OPTIONS]    build, prove, install, `nginx -t`
cargo xtask build --for NGINX_BINARY [OPTIONS]      build and prove only
cargo xtask uninstall --for NGINX_BINARY [--prefix DIR] [--dry-run]

  --for NGINX_BINARY   the nginx to build for, as `nginx -V` describes it
  --nginx-source PATH  that version's source tree or tarball (else the
                       mirror, the nginx-src crate, or nginx.org, signed)
  --sha256 HEX         the tarball's expected SHA-256
  --signing-keys DIR   the keys nginx.org's signature is checked with
  --prefix DIR         the prefix the binary runs with (`nginx -p DIR`)
  --dry-run            say what would change, change nothing
  --help, -h           this";

/// Whether `args` ask for `--help` (or `-h`): then [`USAGE`] is printed.
pub fn help(args: &[String]) -> bool {
    let asked = args.iter().any(|a| a == "--help" || a == "-h");
    if asked {
        println!("{USAGE}");
    }
    asked
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
                other => return Err(format!("unknown option `{other}`\n{USAGE}")),
            }
        }
        out.binary =
            binary.ok_or("--for NGINX_BINARY is required (for example --for /usr/sbin/nginx)")?;
        Ok(out)
    }
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
    if help(args) {
        return Ok(());
    }
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

/// `cargo xtask install --for BINARY [...]`.
pub fn install(args: &[String]) -> Result {
    if help(args) {
        return Ok(());
    }
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
            layout.include_line(),
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
            layout.include_line()
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

#[cfg(test)]
mod tests;
