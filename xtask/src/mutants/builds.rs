//! What a mutant's tests run against: each nginx version's builds (stock,
//! patched, the unmutated copy's module), the mutant's module or patched
//! nginx rebuilt from the copy, and the install directory linking them.

use std::fs;
use std::path::{Path, PathBuf};

use crate::build::{self, MODULE_FILE};
use crate::test_wrap;
use crate::tree::copy_if_changed;
use crate::versions::{DEFAULT, FLAGS};
use crate::workspace::{At, Result};

/// One version's builds for the mutants of it: its stock and patched nginx
/// (`target/nginx/VERSION`), the copy's module built for it, and how a
/// mutant's module or patched nginx is rebuilt.
pub(super) struct Context {
    pub(super) version: &'static str,
    /// `target/nginx/VERSION`: its stock and patched nginx.
    pub(super) main_install: PathBuf,
    /// The unmutated copy's module for this version.
    pub(super) base_module: PathBuf,
    /// The objs the module binds to (for the default, nginx-sys's own).
    pub(super) objs: PathBuf,
    /// The copy's cargo target directory for this version.
    pub(super) target: PathBuf,
    /// Another version's pristine source and its identity, for its
    /// patched nginx.
    pub(super) source: Option<(PathBuf, String)>,
}

impl Context {
    pub(super) fn prepare(version: &'static str, tree: &Path, dir: &Path) -> Result<Context> {
        let built = build::build_version(version, None)?;
        eprintln!("xtask: mutants: baseline build (nginx {version})");
        if version == DEFAULT {
            let target = dir.join("target");
            let base = build::cargo_build_module_in(tree, Some(&target))?;
            return Ok(Context {
                version,
                main_install: built.install,
                base_module: base.module,
                objs: base.nginx_build_dir,
                target,
                source: None,
            });
        }
        let objs = built.install.join("stock-build/src/objs");
        let target = dir.join(format!("target-{version}"));
        let base_module = build::cargo_build_against_in(tree, &objs, &target)?;
        let src = crate::versions::source(version, None)?;
        Ok(Context {
            version,
            main_install: built.install,
            base_module,
            objs,
            target,
            source: Some((src.tree, src.identity)),
        })
    }

    /// The copy's module, as mutated now.
    pub(super) fn module(&self, tree: &Path) -> Result<PathBuf> {
        match self.source {
            None => build::cargo_build_module_in(tree, Some(&self.target)).map(|o| o.module),
            Some(_) => build::cargo_build_against_in(tree, &self.objs, &self.target),
        }
    }

    /// The patched nginx from the copy's patches in `patches`, into
    /// `install`.
    pub(super) fn patched(&self, patches: &Path, install: &Path) -> Result<PathBuf> {
        match &self.source {
            None => build::patched_default_from(patches, &self.objs, install),
            Some((_, identity)) => {
                let flags: Vec<String> = FLAGS.iter().map(|f| f.to_string()).collect();
                // The stock build's tree holds its objs.
                let stock = crate::patched::StockTree {
                    source: self.objs.parent().ok_or("objs has no parent")?,
                    objs: &self.objs,
                };
                crate::patched::build_with(
                    self.version,
                    &crate::patched::patches_in(patches)?,
                    stock,
                    identity,
                    &flags,
                    install,
                )
            }
        }
    }
}

/// A mutant's install directory: `stock`, `patched` and the test-only
/// wrapper module linked to the default build's (or `patched` the
/// mutant's own, already in place), and the module copied there.
pub(super) fn install(
    dir: &Path,
    main: &Path,
    module: &Path,
    patched: Option<&Path>,
) -> Result<PathBuf> {
    let link = |rel: &str| -> Result {
        let at = dir.join(rel);
        if let Some(parent) = at.parent() {
            fs::create_dir_all(parent).at(parent)?;
        }
        let _ = fs::remove_file(&at);
        std::os::unix::fs::symlink(main.join(rel), &at).at(&at)
    };
    link("stock/sbin/nginx")?;
    link(&format!("modules/{}", test_wrap::FILE))?;
    match patched {
        Some(p) => {
            let want = dir.join("patched/sbin/nginx");
            if p != want {
                return Err(
                    format!("patched nginx at {}, not {}", p.display(), want.display()).into(),
                );
            }
        }
        None => link("patched/sbin/nginx")?,
    }
    let so = dir.join("modules").join(MODULE_FILE);
    let _ = fs::remove_file(&so);
    copy_if_changed(module, &so)?;
    Ok(dir.to_path_buf())
}
