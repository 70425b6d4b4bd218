//! `cargo xtask uninstall --for BINARY`: refused, with every use of the
//! module named at once, while the configuration uses it; else what the
//! install made taken out: the snippet and the `include` it added to
//! nginx.conf (the marked one only, and only while no other snippet needs
//! it), `BINARY -t`, then the shared objects, nginx.conf's backup and the
//! snippets' directory when the install made it and it is empty. The
//! files are put back when the test fails.

use std::fs;
use std::path::Path;

use super::binary::{dump, identify, test_config};
use super::conf::{remove_include, Dump};
use super::place::{package_owner, replace, Layout, Was, MADE_DIR_NOTE};
use super::Args;
use crate::workspace::Result;

/// `cargo xtask uninstall --for BINARY [--prefix DIR] [--dry-run]`.
pub fn uninstall(args: &[String]) -> Result {
    if super::help(args) {
        return Ok(());
    }
    let mut a = Args::parse(args)?;
    let id = identify(&a.binary)?;
    a.stderr_log = id.has_e();
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
        println!("3. {} -t; on failure both are put back", a.binary.display());
        println!(
            "4. remove {}, {}, {} and {} when the install made it and it is empty",
            module.display(),
            previous.display(),
            layout.backup().display(),
            layout.snippet_dir().display()
        );
        return Ok(());
    }
    let snippet = match Was::read(&layout.snippet)? {
        Was::File(b) => Some(b),
        Was::Absent => None,
    };
    let conf = fs::read_to_string(&layout.conf).ok();
    let without_include = conf
        .as_deref()
        .and_then(|c| remove_include(c, &layout.include_line()));
    if snippet.is_none() && !module.is_file() && without_include.is_none() {
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
    let made_dir = snippet
        .as_deref()
        .is_some_and(|b| b.starts_with(MADE_DIR_NOTE.as_bytes()));
    let mut removed = Vec::new();
    let mut kept = Vec::new();
    if snippet.is_some() {
        fs::remove_file(&layout.snippet)
            .map_err(|e| format!("{}: {e}", layout.snippet.display()))?;
        removed.push(layout.snippet.display().to_string());
    }
    // The include goes only when nothing else is left for it to include.
    let others = other_snippets(layout.snippet_dir());
    let edit = match (&without_include, others.is_empty()) {
        (Some(text), true) => Some(text),
        (Some(_), false) => {
            kept.push(format!(
                "the `{}` in {} (it includes {} too)",
                layout.include_line(),
                layout.conf.display(),
                others.join(", ")
            ));
            None
        }
        (None, _) => None,
    };
    if let Some(text) = edit {
        replace(&layout.conf, text.as_bytes())?;
        removed.push(format!(
            "the `{}` from {}",
            layout.include_line(),
            layout.conf.display()
        ));
    }
    if let Err(said) = test_config(&a) {
        if let Some(old) = &snippet {
            replace(&layout.snippet, old)?;
        }
        if let (Some(old), Some(_)) = (&conf, edit) {
            replace(&layout.conf, old.as_bytes())?;
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
            removed.push(f.display().to_string());
        }
    }
    let backup = layout.backup();
    if edit.is_some() && backup.is_file() {
        fs::remove_file(&backup).map_err(|e| format!("{}: {e}", backup.display()))?;
        removed.push(backup.display().to_string());
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
    let kept = if kept.is_empty() {
        String::new()
    } else {
        format!("; kept {}", kept.join(", "))
    };
    println!(
        "xtask: removed {}{kept}; {} -t is successful. Reload nginx: {} -s reload",
        removed.join(", "),
        a.binary.display(),
        a.binary.display()
    );
    Ok(())
}

/// An error naming every use of the module's directives and variables in
/// the configuration, when there is one.
fn refuse_while_used(d: &Dump, layout: &Layout) -> Result {
    let uses = d.uses(&layout.snippet);
    if uses.is_empty() {
        return Ok(());
    }
    let lines: Vec<String> = uses.iter().map(|u| format!("  {u}")).collect();
    Err(format!(
        "the configuration still uses the module in {} place{}; remove {}, then run this \
         again (nothing was removed):\n{}",
        uses.len(),
        if uses.len() == 1 { "" } else { "s" },
        if uses.len() == 1 { "it" } else { "them all" },
        lines.join("\n")
    ))
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
