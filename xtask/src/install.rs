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
//!   `BINARY -T`. When nginx.conf does not include the snippet, it prints
//!   the line to add, or with `--edit-conf` adds it (marked, the file
//!   before kept as `nginx.conf.before-generation-retry`) and tests again.
//!   When a test fails, everything is put back as it was and nginx's words
//!   are printed. Nothing changed is a no-op. Every `-t` and `-T` runs with
//!   `-e stderr`: nginx's startup and parsing messages go to the install,
//!   not into the production error log (what nginx logs once the
//!   configuration's own `error_log` has taken over still goes there).
//! - `cargo xtask uninstall --for BINARY`: refused, with every use named,
//!   while the configuration uses the module; else the snippet and the
//!   marked `include` out, `BINARY -t`, then the shared objects, the backup
//!   and a `modules.d/` the install made; all put back when any step fails.
//! - `cargo xtask build --for BINARY`: the build and the load proof only.
//!
//! None of them installs a package: a missing prerequisite is named with
//! the `apt-get install` (or `dnf install`) line that provides it.
//!
//! Here the commands and their options; the binary read and judged in
//! `binary.rs`, the build in `compile.rs` (its prerequisites in
//! `prerequisites.rs`), the files placed and put back in `place.rs`, the
//! configuration read and edited in `conf.rs`, `uninstall` in
//! `uninstall.rs`.

mod binary;
mod compile;
mod conf;
mod place;
mod prerequisites;
mod uninstall;

use std::fs;
use std::path::{Path, PathBuf};

use crate::build::MODULE_PACKAGE;
use crate::source::{self, Options};
use crate::workspace::{target_dir, At, Result};

use binary::{admissible, dump, identify, Identity};
use compile::{build_module, prove_loads, tree_flags};
use conf::Dump;
use place::{edit_conf, package_owner, put_in, Layout, Undo};

pub use uninstall::uninstall;

/// The options of `install`, `uninstall` and `build --for`.
#[derive(clap::Args, Debug, Default)]
pub struct Args {
    /// the nginx binary to build for (/usr/sbin/nginx, not nginx.conf), as its
    /// `nginx -V` describes it
    #[arg(long = "for", id = "binary", value_name = "NGINX_BINARY")]
    pub for_binary: Option<PathBuf>,
    /// `--for`'s binary, once [`Args::named`] took it.
    #[arg(skip)]
    pub binary: PathBuf,
    #[command(flatten)]
    pub source: Options,
    /// the prefix the binary runs with (`nginx -p DIR`)
    #[arg(long, value_name = "DIR", requires = "binary")]
    pub prefix: Option<PathBuf>,
    /// say what would change, change nothing
    #[arg(long, requires = "binary")]
    pub dry_run: bool,
    /// install: when nginx.conf does not include the snippet, add the `include`
    /// line (before its first block, marked, nginx.conf.before-generation-retry
    /// kept; uninstall removes it); without it, the line is printed for you to add
    #[arg(long, requires = "binary")]
    pub edit_conf: bool,
    /// Whether nginx runs with `-e stderr` (the binary has it): set from
    /// its version once it is known.
    #[arg(skip)]
    pub stderr_log: bool,
}

impl Args {
    /// With `--for`'s binary in [`Args::binary`] (`install` and
    /// `uninstall` require it; `build` has it or is not here).
    pub fn named(mut self) -> Result<Args> {
        self.binary = self
            .for_binary
            .take()
            .ok_or("--for NGINX_BINARY is required (for example --for /usr/sbin/nginx)")?;
        Ok(self)
    }
}

/// What `build --for` and `install` start with: the options, the binary's
/// identity and its layout; `None` when the binary has no race to fix
/// (said, exit 0).
fn start(a: Args) -> Result<Option<(Args, Identity, Layout)>> {
    let mut a = a.named()?;
    let id = identify(&a.binary)?;
    a.stderr_log = id.has_e();
    eprintln!("xtask: {} is {}", a.binary.display(), id.describe());
    if !admissible(&a, &id)? {
        return Ok(None);
    }
    let layout = Layout::of(&id, a.prefix.as_deref());
    Ok(Some((a, id, layout)))
}

/// `cargo xtask build --for BINARY`: the module, proven to load, not installed.
pub fn build_for(a: Args) -> Result {
    let Some((a, id, layout)) = start(a)? else {
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
        layout.snippet_text(false).trim()
    );
    println!(
        "8. {} -T; when {} does not include it, {}",
        a.binary.display(),
        layout.conf.display(),
        if a.edit_conf {
            format!(
                "add `{}` before its first block (the file before kept as {}), and -T again",
                layout.include_line(),
                layout.backup().display()
            )
        } else {
            "print the line to add (--edit-conf adds it)".to_string()
        }
    );
    println!(
        "9. on failure {}, {} and {} are put back as they were",
        layout.module().display(),
        layout.snippet.display(),
        layout.conf.display()
    );
    Ok(())
}

/// `cargo xtask install --for BINARY [...]`.
pub fn install(a: Args) -> Result {
    let Some((a, id, layout)) = start(a)? else {
        return Ok(());
    };
    if a.dry_run {
        return dry_run(&a, &id, &layout, true);
    }
    if let Some(owner) = package_owner(&layout) {
        return err!(
            "{} was installed by {owner}: upgrade it as a package (cargo xtask debian \
             --installed --no-test, then apt install ./target/debian/*.deb), or \
             apt remove it before installing this way",
            layout.module().display()
        );
    }
    let before = match dump(&a) {
        Ok(d) => Some(d),
        Err(said) if stale_module(&said, &layout.module()) => {
            // After an nginx upgrade: the module there was built for the
            // nginx before, which this one refuses. Replacing it is the fix.
            eprintln!(
                "xtask: {} refuses the module installed for another nginx; replacing it",
                a.binary.display()
            );
            None
        }
        Err(said) => {
            return err!(
                "{} -t fails before anything was changed; fix the configuration first:\n{said}",
                a.binary.display()
            )
        }
    };
    let built = build_module(&a, &id)?;
    prove_loads(&a, &id, &layout, &built.so)?;

    let new = fs::read(&built.so).at(&built.so)?;
    let undo = Undo::take(&layout)?;
    let made_dir = undo.snippet_dir_made || layout.snippet_made_dir();
    let text = layout.snippet_text(made_dir);
    let same_module = fs::read(layout.module()).is_ok_and(|b| b == new);
    let same_snippet = fs::read(&layout.snippet).is_ok_and(|b| b == text.as_bytes());
    if let (true, true, Some(d)) = (same_module, same_snippet, &before) {
        if d.includes(&layout.snippet) || !a.edit_conf {
            println!(
                "xtask: already installed: {} and {} are up to date; nothing changed",
                layout.module().display(),
                layout.snippet.display()
            );
            return next_steps(&a, &layout, d);
        }
    }

    let outcome = put_in(&layout, &new, &text, same_module)
        .map_err(|e| format!("installing failed: {e}").into())
        .and_then(|()| tested(&a, &layout, &undo));
    let (after, edited) = match outcome {
        Ok(done) => done,
        Err(why) => {
            let restored = match undo.put_back(&layout) {
                Ok(()) => "everything was put back as it was".to_string(),
                Err(e) => format!("putting it back failed too: {e}"),
            };
            return err!("{why}\n{restored}");
        }
    };
    let added = if edited {
        format!(
            ", added `{}` to {} (as it was before: {})",
            layout.include_line(),
            layout.conf.display(),
            layout.backup().display()
        )
    } else {
        String::new()
    };
    println!(
        "xtask: installed {} for nginx {} and wrote {}{added}; {} -t is successful",
        layout.module().display(),
        built.version,
        layout.snippet.display(),
        a.binary.display()
    );
    next_steps(&a, &layout, &after)
}

/// `BINARY -T` with the module in place; with `--edit-conf`, when
/// nginx.conf does not include the snippet, the `include` added and
/// `-T` again. The configuration as nginx read it, and whether nginx.conf
/// was edited; nginx's words and a hint when a test fails.
fn tested(a: &Args, layout: &Layout, undo: &Undo) -> Result<(Dump, bool)> {
    let bin = a.binary.display();
    let d = dump(a).map_err(|said| {
        format!(
            "{bin} -t failed with the module installed (nginx said:\n{said})\n{}",
            hint(&said, layout)
        )
    })?;
    if d.includes(&layout.snippet) || !a.edit_conf {
        return Ok((d, false));
    }
    let conf = layout.conf.display();
    let before = undo
        .conf()
        .ok_or(format!("--edit-conf: {conf} is not there to edit"))?;
    edit_conf(layout, before, undo.had_backup())?;
    let d = dump(a).map_err(|said| {
        format!(
            "{bin} -t failed once {conf} included the snippets (nginx said:\n{said})\n{}\n{}",
            hint(&said, layout),
            by_hand(layout)
        )
    })?;
    if !d.includes(&layout.snippet) {
        return err!(
            "{conf} includes `{}` now, and nginx still does not read {}\n{}",
            layout.include_line(),
            layout.snippet.display(),
            by_hand(layout)
        );
    }
    Ok((d, true))
}

/// What to do when the `include` `--edit-conf` added does not work where
/// it went: place it by hand.
fn by_hand(layout: &Layout) -> String {
    format!(
        "--edit-conf could not place the line: add `{}` to {} by hand, at its top \
         level before the first events, http, stream or mail block (and before any \
         include of a file that holds one), then run this again without --edit-conf.",
        layout.include_line(),
        layout.conf.display()
    )
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
    } else if said.contains("\"load_module\" directive is specified too late") {
        format!(
            "nginx read a block (events, http, stream or mail) before `{}`: \
             one of {}'s blocks comes before it, perhaps in a file it includes.",
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

/// What comes next: the `include` while nginx.conf lacks it, switching
/// the module on while nothing sets `generation_retry_resnapshot`, the
/// reload.
fn next_steps(a: &Args, layout: &Layout, d: &Dump) -> Result {
    let included = d.includes(&layout.snippet);
    let on = d
        .uses(&layout.snippet)
        .into_iter()
        .any(|u| u.name == "generation_retry_resnapshot");
    let mut n = 1;
    println!("next:");
    if !included {
        println!(
            "  {n}. {conf} does not include {snippet}, so nginx does not load the module: \
             add this line to {conf} at its top level, before its events block:\n         \
             {line}\n     (or run this again with --edit-conf, which adds it, and uninstall \
             takes it out again)",
            conf = layout.conf.display(),
            snippet = layout.snippet.display(),
            line = layout.include_line()
        );
        n += 1;
    }
    if !on {
        println!(
            "  {n}. switch it on where your upstreams are: `generation_retry_resnapshot on;` in \
             http {{}} (and stream {{}}); `off` only counts (docs/directives.md)"
        );
        n += 1;
    }
    println!(
        "  {n}. {} -t && {} -s reload   (or: systemctl reload nginx)",
        a.binary.display(),
        a.binary.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests;
