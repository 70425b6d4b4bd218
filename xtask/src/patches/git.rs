//! git in a scratch repository under `target/patches/`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::resolve::{resolve, Resolution};
use super::COMMITTER;
use crate::workspace::{At, Result};

/// git in the scratch repository, with the fixed committer.
pub(super) struct Git(pub(super) PathBuf);

/// git as the series are made with anywhere: no `GIT_*` variable of the
/// caller's (a hook's `GIT_INDEX_FILE` would point at the project's index),
/// no system or user configuration, attributes, ignore file, template or
/// hooks (each could change what is committed or how `format-patch`
/// writes it), and the settings that decide the output named. `home` is
/// an empty directory standing for `$HOME`.
pub(super) fn isolated(home: &Path) -> Command {
    let mut cmd = Command::new("git");
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("GIT_") {
            cmd.env_remove(name);
        }
    }
    cmd.env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home)
        .env("LC_ALL", "C")
        .args(["-c", "core.abbrev=7", "-c", "commit.gpgsign=false"])
        .args(["-c", "tag.gpgSign=false", "-c", "core.autocrlf=false"])
        .args(["-c", "core.hooksPath=/dev/null", "-c", "init.templateDir="])
        .args([
            "-c",
            "merge.conflictStyle=merge",
            "-c",
            "diff.algorithm=myers",
        ]);
    cmd
}

impl Git {
    pub(super) fn cmd(&self, args: &[&str]) -> Command {
        let home = self.0.parent().unwrap_or(&self.0).join("home");
        let _ = fs::create_dir_all(&home);
        let mut cmd = isolated(&home);
        cmd.args(args)
            .current_dir(&self.0)
            // The repository lives under target/, inside this project's
            // work tree: never let git find the project's repository.
            .env(
                "GIT_CEILING_DIRECTORIES",
                self.0.parent().unwrap_or(&self.0),
            )
            .envs(COMMITTER)
            .env("GIT_AUTHOR_NAME", COMMITTER[0].1)
            .env("GIT_AUTHOR_EMAIL", COMMITTER[1].1)
            .env("GIT_AUTHOR_DATE", COMMITTER[2].1);
        cmd
    }

    /// Runs git; its output on success, git's account on failure.
    pub(super) fn output(&self, args: &[&str]) -> Result<String> {
        let out = self.cmd(args).output().running("git")?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            err!(
                "git {} ({}) failed: {}{}",
                args.join(" "),
                self.0.display(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        }
    }

    pub(super) fn run(&self, args: &[&str]) -> Result {
        self.output(args).map(drop)
    }

    pub(super) fn lines(&self, args: &[&str]) -> Result<Vec<String>> {
        Ok(self.output(args)?.lines().map(String::from).collect())
    }

    /// Commits `tree`'s `src/` (every patch touches only `src/`) as `name`
    /// and tags it so.
    pub(super) fn commit_tree(&self, tree: &Path, name: &str) -> Result {
        let status = Command::new("cp")
            .arg("-a")
            .arg(tree.join("src"))
            .arg(&self.0)
            .status()
            .running("cp")?;
        if !status.success() {
            return err!("cannot copy {}/src", tree.display());
        }
        self.run(&["add", "-A", "src"])?;
        self.run(&["commit", "-q", "-m", name])?;
        self.run(&["tag", name])
    }

    /// `git am` of each patch, the patch's author and date kept.
    pub(super) fn am(&self, patches: &[PathBuf]) -> Result {
        for p in patches {
            let path = p.to_str().ok_or("a non-UTF-8 patch path")?;
            if let Err(e) = self.run(&["am", "-q", path]) {
                let _ = self.run(&["am", "--abort"]);
                return err!("{} does not apply: {e}", p.display());
            }
        }
        Ok(())
    }

    /// Carries canonical `commit` (from `patch`) over to `tree` by a
    /// three-way merge; on a conflict the error names the files and the
    /// repository, left as git left it, to resolve by hand.
    pub(super) fn cherry_pick(
        &self,
        commit: &str,
        patch: &Path,
        tree: &str,
        work: &Path,
        recorded: &[Resolution],
    ) -> Result {
        let picked = match self.run(&["cherry-pick", "--strategy=ort", "--allow-empty", commit]) {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        let unmerged = self.lines(&["diff", "--name-only", "--diff-filter=U"])?;
        // Not a conflict git marked in a file (a file the tree lacks, say):
        // git's own account.
        if unmerged.is_empty() {
            return err!(
                "{} does not carry over to {tree}: {picked}",
                patch.display()
            );
        }
        let mut conflicts = Vec::new();
        for file in unmerged {
            let path = self.0.join(&file);
            let text = fs::read_to_string(&path).at(&path)?;
            match resolve(&file, &text, recorded) {
                Ok(resolved) => {
                    fs::write(&path, resolved).at(&path)?;
                    self.run(&["add", &file])?;
                }
                Err(e) => conflicts.push(format!("{file}: {e}")),
            }
        }
        // Every conflict resolved as recorded: the commit, as the
        // canonical one's.
        if conflicts.is_empty() {
            return self.run(&["commit", "-q", "--allow-empty", "-C", commit]);
        }
        err!(
            "{} does not carry over to {tree} by a three-way merge ({}). The \
             scratch repository is {}: edit nginx-src-patches/{tree}/ by hand to what \
             {tree} needs (the resolution there is a guide), then `cargo xtask patches \
             --derive {tree}` records it as {tree}'s delta",
            patch.display(),
            conflicts.join("; "),
            work.join("repo").display()
        )
    }

    /// Applies the delta `fold` to the last commit and folds it in, its
    /// message body appended to the commit's message.
    pub(super) fn fold(&self, fold: &Path, tree: &str, work: &Path) -> Result {
        let split = work.join("fold");
        fs::create_dir_all(&split).at(&split)?;
        let (msg, diff) = (split.join("msg"), split.join("diff"));
        let input = fs::File::open(fold).at(fold)?;
        let status = self
            .cmd(&[
                "mailinfo",
                msg.to_str().ok_or("a non-UTF-8 path")?,
                diff.to_str().ok_or("a non-UTF-8 path")?,
            ])
            .stdin(input)
            .stdout(std::process::Stdio::null())
            .status()
            .running("git mailinfo")?;
        if !status.success() {
            return err!("{}: not a patch git can read", fold.display());
        }
        if fs::metadata(&diff).is_ok_and(|m| m.len() > 0) {
            let path = diff.to_str().ok_or("a non-UTF-8 path")?;
            self.run(&["apply", "--index", path]).map_err(|e| {
                format!(
                    "{} does not apply to {tree} once the canonical patch is carried over \
                     (refresh it against {}): {e}",
                    fold.display(),
                    work.join("repo").display()
                )
            })?;
        }
        let body = fs::read_to_string(&msg).at(&msg)?;
        let message = self.output(&["log", "-1", "--format=%B"])?;
        let message = format!("{}\n\n{}\n", message.trim_end(), body.trim());
        self.run(&["commit", "-q", "--amend", "--allow-empty", "-m", &message])
    }
}
