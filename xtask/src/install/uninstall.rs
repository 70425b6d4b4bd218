//! `cargo xtask uninstall --for BINARY`: refused, with every use of the
//! module named at once, while the configuration uses it; else what the
//! install made taken out: the snippet and the `include` it added to
//! nginx.conf (the marked one only; the `modules.d/*.conf` glob only
//! while no other snippet is left for it), `BINARY -t`, then the shared
//! objects, nginx.conf's backup and the snippets' directory when the
//! install made it and it is empty. Every file is put back as it was when
//! the test, or any step, fails.

use std::fs;
use std::path::Path;

use super::binary::{dump, identify, test_config};
use super::conf::{remove_include, Dump};
use super::place::{package_owner, replace, Layout, Undo};
use super::Args;
use crate::workspace::{At, Error, Result};

/// `cargo xtask uninstall --for BINARY [--prefix DIR] [--dry-run]`.
pub fn uninstall(a: Args) -> Result {
    let mut a = a.named()?;
    let id = identify(&a.binary)?;
    a.stderr_log = id.has_e();
    let layout = Layout::of(&id, a.prefix.as_deref());
    let (module, previous) = (layout.module(), layout.previous());
    if let Some(owner) = package_owner(&layout) {
        return err!(
            "{} was installed by {owner}: remove it with apt remove (or apt purge)",
            module.display()
        );
    }
    if a.dry_run {
        println!("dry run: nothing is removed");
        println!(
            "1. refuse if the configuration (nginx -T) uses generation_retry_* anywhere, \
             naming every use"
        );
        println!(
            "2. remove {}, and from {} the `{}` the install added (marked by its comment)",
            layout.snippet.display(),
            layout.conf.display(),
            layout.include_line()
        );
        println!(
            "3. {} -t; on its failure, or any step's, everything is put back",
            a.binary.display()
        );
        println!(
            "4. remove {}, {}, {} and {} when the install made it and it is empty",
            module.display(),
            previous.display(),
            layout.backup().display(),
            layout.snippet_dir().display()
        );
        return Ok(());
    }
    let conf = fs::read_to_string(layout.conf_file()).ok();
    let marked = conf
        .as_deref()
        .is_some_and(|c| remove_include(c, &layout.include_line()).is_some());
    if !layout.snippet.exists() && !module.is_file() && !marked {
        println!(
            "xtask: neither {} nor {} is there; nothing changed",
            layout.snippet.display(),
            module.display()
        );
        return Ok(());
    }
    // Every use at once, before anything changes; nginx would name only
    // the first, one run at a time.
    if let Ok(d) = dump(&a) {
        refuse_while_used(&d, &layout)?;
    }
    let bin = a.binary.display();
    let (removed, kept) = take_out(&layout, || {
        test_config(&a).map_err(|said| {
            Error::Said(format!(
                "{bin} -t fails without the module: the configuration still uses it \
                 (remove its directives and `generation_retry_*` variables, then run this \
                 again). nginx said:\n{said}"
            ))
        })
    })?;
    let kept = if kept.is_empty() {
        String::new()
    } else {
        format!("; kept {}", kept.join(", "))
    };
    println!(
        "xtask: removed {}{kept}; {bin} -t is successful. Reload nginx: {bin} -s reload",
        removed.join(", ")
    );
    Ok(())
}

/// What the install made, taken out: the snippet and the marked
/// `include`, then `test` (`nginx -t`, its error said as it is), then the
/// shared objects, nginx.conf's backup and a snippets' directory the
/// install made. What was removed and what was kept, each named; on any
/// failure, every file put back as it was (as the install's [`Undo`]
/// does) and the failure said with how the putting back went.
pub(super) fn take_out(
    layout: &Layout,
    test: impl FnOnce() -> Result,
) -> Result<(Vec<String>, Vec<String>)> {
    let undo = Undo::take(layout)?;
    steps(layout, test).map_err(|why| {
        Error::Said(match undo.put_back(layout) {
            Ok(()) => format!("{why}\neverything was put back as it was"),
            Err(e) => format!("{why}\nputting it back failed too: {e}"),
        })
    })
}

/// [`take_out`]'s steps, stopping at the first failure.
fn steps(layout: &Layout, test: impl FnOnce() -> Result) -> Result<(Vec<String>, Vec<String>)> {
    let (mut removed, mut kept) = (Vec::new(), Vec::new());
    let made_dir = layout.snippet_made_dir();
    if layout.snippet.is_file() {
        fs::remove_file(&layout.snippet).at(&layout.snippet)?;
        removed.push(layout.snippet.display().to_string());
    }
    let conf = layout.conf_file();
    let line = layout.include_line();
    let without = fs::read_to_string(&conf)
        .ok()
        .and_then(|c| remove_include(&c, &line));
    // The glob (`modules.d/*.conf`) stays while other snippets are left
    // for it to include; a line naming the snippet itself
    // (`modules-enabled/`) goes with it, or nginx -t fails on its
    // missing file.
    let others = match layout.include {
        Some(_) => other_snippets(layout.snippet_dir()),
        None => Vec::new(),
    };
    let edited = match without {
        Some(_) if !others.is_empty() => {
            kept.push(format!(
                "the `{line}` in {} (it includes {} too)",
                conf.display(),
                others.join(", ")
            ));
            false
        }
        Some(text) => {
            replace(&conf, text.as_bytes())?;
            removed.push(format!("the `{line}` from {}", conf.display()));
            true
        }
        None => false,
    };
    test()?;
    let backup = layout.backup();
    let backup = Some(backup).filter(|b| edited && b.is_file());
    for f in [layout.module(), layout.previous()]
        .into_iter()
        .chain(backup)
    {
        if f.is_file() {
            fs::remove_file(&f).at(&f)?;
            removed.push(f.display().to_string());
        }
    }
    let dir = layout.snippet_dir();
    if made_dir {
        match fs::remove_dir(dir) {
            Ok(()) => removed.push(dir.display().to_string()),
            Err(_) => kept.push(format!(
                "{} (the install made it; it holds other files now)",
                dir.display()
            )),
        }
    }
    Ok((removed, kept))
}

/// An error naming every use of the module's directives and variables in
/// the configuration, when there is one.
fn refuse_while_used(d: &Dump, layout: &Layout) -> Result {
    let uses = d.uses(&layout.snippet);
    if uses.is_empty() {
        return Ok(());
    }
    let lines: Vec<String> = uses.iter().map(|u| format!("  {u}")).collect();
    err!(
        "the configuration still uses the module in {} place{}; remove {}, then run this \
         again (nothing was removed):\n{}",
        uses.len(),
        if uses.len() == 1 { "" } else { "s" },
        if uses.len() == 1 { "it" } else { "them all" },
        lines.join("\n")
    )
}

/// The `*.conf` files left in the snippets' directory (what its `include`
/// still loads).
fn other_snippets(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".conf"))
        .collect();
    out.sort();
    out
}
