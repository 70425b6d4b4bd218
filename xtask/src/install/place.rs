//! Where the module and its `load_module` snippet go for the operator's
//! nginx, and placing them there: the one before kept as `.so.old`, every
//! file written beside and renamed, and all of it (nginx.conf too, when
//! `--edit-conf` changed it) put back on failure. A replaced file keeps
//! its mode, owner and group, and a symlinked nginx.conf stays a symlink:
//! the file it points to is the one edited.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use super::binary::Identity;
use crate::build::MODULE_FILE;
use crate::workspace::{At, Result};

/// The snippet's name in a Debian-style `modules-enabled/`: after Debian's
/// `50-mod-stream.conf`, which the stream part needs loaded first.
const ENABLED_NAME: &str = "70-mod-http-generation-retry.conf";
/// Elsewhere: a file in `modules.d/`, which nginx.conf includes.
const SNIPPET_DIR: &str = "modules.d";
const SNIPPET_NAME: &str = "generation-retry.conf";
/// The snippet's first line when the install made its directory: how
/// `uninstall` knows the directory is the install's to remove (once empty).
pub const MADE_DIR_NOTE: &str = "# generation-retry: `cargo xtask install` made this directory for this file; `cargo xtask uninstall` removes both (the directory once empty)";

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

    pub(super) fn module(&self) -> PathBuf {
        self.modules.join(MODULE_FILE)
    }

    pub(super) fn previous(&self) -> PathBuf {
        self.modules.join(format!("{MODULE_FILE}.old"))
    }

    /// The snippet: its `load_module` line, under [`MADE_DIR_NOTE`] when
    /// the install made (`made_dir`) the directory it is in.
    pub(super) fn snippet_text(&self, made_dir: bool) -> String {
        let note = if made_dir {
            format!("{MADE_DIR_NOTE}\n")
        } else {
            String::new()
        };
        format!("{note}load_module {};\n", self.module().display())
    }

    /// Whether the snippet there says the install made its directory
    /// (its first line is [`MADE_DIR_NOTE`]).
    pub(super) fn snippet_made_dir(&self) -> bool {
        fs::read(&self.snippet).is_ok_and(|b| b.starts_with(MADE_DIR_NOTE.as_bytes()))
    }

    /// The directory of the snippet (`modules.d/`, `modules-enabled/`).
    pub(super) fn snippet_dir(&self) -> &Path {
        self.snippet.parent().unwrap_or(Path::new("/"))
    }

    /// The file nginx.conf is: [`Layout::conf`] with its symlinks
    /// resolved, so that an edit (written beside, renamed over) changes
    /// the file a symlink points to and leaves the symlink a symlink; `conf`
    /// itself when it cannot be resolved (it is not there).
    pub(super) fn conf_file(&self) -> PathBuf {
        fs::canonicalize(&self.conf).unwrap_or_else(|_| self.conf.clone())
    }

    /// nginx.conf as it was before `--edit-conf` first changed it:
    /// `nginx.conf.before-generation-retry` beside the file nginx.conf is
    /// ([`Layout::conf_file`]).
    pub(super) fn backup(&self) -> PathBuf {
        let conf = self.conf_file();
        let name = conf.file_name().unwrap_or_default().to_string_lossy();
        conf.with_file_name(format!("{name}.before-generation-retry"))
    }

    /// The line that includes the snippet: [`Layout::include`], or the
    /// snippet itself.
    pub(super) fn include_line(&self) -> String {
        self.include
            .clone()
            .unwrap_or_else(|| format!("include {};", self.snippet.display()))
    }
}

/// The Debian package that installed the module here, if one did: dpkg
/// knows the shared object, or the `modules-enabled` file is a link.
/// Files a package owns are left to apt.
pub(super) fn package_owner(layout: &Layout) -> Option<String> {
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

/// What a file was before the install touched it.
pub(super) enum Was {
    Absent,
    File(Vec<u8>),
}

impl Was {
    /// `path` as it is now: absent, or its bytes. Any other error (a file
    /// that cannot be read) stops the install before it changes anything.
    pub(super) fn read(path: &Path) -> Result<Was> {
        match fs::read(path) {
            Ok(b) => Ok(Was::File(b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Was::Absent),
            Err(e) => err!("{}: {e}", path.display()),
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
                    err!("{}: {e}", path.display())
                }
                _ => Ok(()),
            },
        }
    }
}

/// The files the install may change, as they were before it, to put back
/// on failure.
pub(super) struct Undo {
    module: Was,
    previous: Was,
    snippet: Was,
    conf: Was,
    backup: Was,
    /// Whether the snippet's directory was missing: the install makes it.
    pub(super) snippet_dir_made: bool,
}

impl Undo {
    pub(super) fn take(layout: &Layout) -> Result<Undo> {
        Ok(Undo {
            module: Was::read(&layout.module())?,
            previous: Was::read(&layout.previous())?,
            snippet: Was::read(&layout.snippet)?,
            conf: Was::read(&layout.conf_file())?,
            backup: Was::read(&layout.backup())?,
            snippet_dir_made: !layout.snippet_dir().is_dir(),
        })
    }

    /// nginx.conf as it was.
    pub(super) fn conf(&self) -> Option<&[u8]> {
        match &self.conf {
            Was::File(b) => Some(b),
            Was::Absent => None,
        }
    }

    /// Whether a backup of nginx.conf was there before.
    pub(super) fn had_backup(&self) -> bool {
        matches!(self.backup, Was::File(_))
    }

    /// Puts back every file as it was (each one tried, the first error
    /// said).
    pub(super) fn put_back(&self, layout: &Layout) -> Result {
        let results = [
            self.module.restore(&layout.module()),
            self.previous.restore(&layout.previous()),
            self.snippet.restore(&layout.snippet),
            self.conf.restore(&layout.conf_file()),
            self.backup.restore(&layout.backup()),
        ];
        if self.snippet_dir_made {
            let _ = fs::remove_dir(layout.snippet_dir());
        }
        results.into_iter().collect::<Result<Vec<()>>>().map(|_| ())
    }
}

/// Installs the shared object (unless `same_module`: the one there is the
/// same bytes), the one there before kept as `.so.old`, and the snippet.
/// The module's path never goes missing: the old file is hard-linked to
/// `.so.old`, then the new one renamed over it, so a reload at any moment
/// finds a module, and a running nginx keeps the file it mapped.
pub(super) fn put_in(layout: &Layout, new: &[u8], text: &str, same_module: bool) -> Result {
    let module = layout.module();
    fs::create_dir_all(&layout.modules).at(&layout.modules)?;
    if !same_module {
        if module.is_file() {
            let previous = layout.previous();
            let _ = fs::remove_file(&previous);
            fs::hard_link(&module, &previous)
                .map_err(|e| format!("{} -> {}: {e}", module.display(), previous.display()))?;
        }
        replace(&module, new)?;
    }
    let dir = layout.snippet_dir();
    fs::create_dir_all(dir).at(dir)?;
    replace(&layout.snippet, text.as_bytes())
}

/// nginx.conf with the `include` of the snippets added (see
/// [`super::conf::add_include`]), its state before kept as
/// [`Layout::backup`] unless one is there from an earlier run. The file
/// a symlinked nginx.conf points to is edited; the backup has its mode,
/// owner and group.
pub(super) fn edit_conf(layout: &Layout, before: &[u8], had_backup: bool) -> Result {
    let conf = layout.conf_file();
    let text = String::from_utf8(before.to_vec())
        .map_err(|_| format!("{}: not UTF-8 text; not edited", conf.display()))?;
    let edited = super::conf::add_include(&text, &layout.include_line());
    if !had_backup {
        // As private as nginx.conf is.
        replace_as(&layout.backup(), before, Keep::of(&conf))?;
    }
    replace(&conf, edited.as_bytes())
}

/// What a replaced file keeps of the one there: its permission bits, its
/// owner and group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Keep {
    mode: u32,
    /// The owner and group, when a file was there (a new file is the
    /// invoking user's).
    owner: Option<(u32, u32)>,
}

impl Keep {
    /// What `path` (followed when a symlink) has; 0644 and the invoking
    /// user's for a file not there.
    pub(super) fn of(path: &Path) -> Keep {
        match fs::metadata(path) {
            Ok(m) => Keep {
                mode: m.permissions().mode() & 0o7777,
                owner: Some((m.uid(), m.gid())),
            },
            Err(_) => Keep {
                mode: 0o644,
                owner: None,
            },
        }
    }
}

/// `path` replaced by `bytes`, with the mode, owner and group of the
/// file there (0644 and the invoking user's for a new one): written
/// beside, then renamed.
pub(super) fn replace(path: &Path, bytes: &[u8]) -> Result {
    replace_as(path, bytes, Keep::of(path))
}

/// `path` replaced by `bytes` with `keep`'s mode, owner and group:
/// written beside, then renamed.
fn replace_as(path: &Path, bytes: &[u8], keep: Keep) -> Result {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let tmp = path.with_file_name(format!(".{name}.new"));
    if let Err(e) = write_file(&tmp, bytes, keep) {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    fs::rename(&tmp, path).at(path)
}

/// A new file at `path` holding `bytes`, with `keep`'s mode from its
/// creation on (never readable by more than the file it replaces), then
/// its owner and group.
fn write_file(path: &Path, bytes: &[u8], keep: Keep) -> Result {
    // One left by a run that died between write and rename.
    match fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e).at(path),
        _ => {}
    }
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(keep.mode)
        .open(path)
        .at(path)?;
    f.write_all(bytes).at(path)?;
    if let Some((uid, gid)) = keep.owner {
        std::os::unix::fs::fchown(&f, Some(uid), Some(gid)).map_err(|e| {
            format!(
                "{}: cannot give it the owner {uid}:{gid} of the file it replaces: {e}",
                path.display()
            )
        })?;
    }
    // After the owner: a chown may clear set-id bits; the umask may have
    // cleared others at creation.
    f.set_permissions(fs::Permissions::from_mode(keep.mode))
        .at(path)
}
