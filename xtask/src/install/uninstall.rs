//! `cargo xtask uninstall --for BINARY`: the snippet out, `BINARY -t`, then
//! the shared objects; the snippet put back when the configuration still
//! needs the module.

use std::fs;

use super::binary::{identify, test_config};
use super::place::{package_owner, replace, Layout, Was};
use super::Args;
use crate::workspace::Result;

/// `cargo xtask uninstall --for BINARY [--prefix DIR] [--dry-run]`.
pub fn uninstall(args: &[String]) -> Result {
    if super::help(args) {
        return Ok(());
    }
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
