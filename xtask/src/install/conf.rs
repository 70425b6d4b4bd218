//! The operator's configuration as the install reads and edits it: the
//! files `nginx -T` dumps (whether one is included, where the module's
//! directives and variables are used), and the `include` line of the
//! snippets, added with `--edit-conf` under a comment that marks it as
//! the install's, which `uninstall` takes out again.

use std::fmt;
use std::path::{Path, PathBuf};

/// The comment written above the `include` line the install adds: how
/// `uninstall` knows the line is the install's to remove.
pub const ADDED_NOTE: &str =
    "# generation-retry: `cargo xtask install --edit-conf` added the next line; `cargo xtask uninstall` removes it";

/// The blocks of nginx.conf's top level the `include` goes before (a
/// `load_module` inside one is refused).
const BLOCKS: &[&str] = &["events", "http", "stream", "mail"];

/// The configuration as `nginx -T` printed it: each file and its text.
#[derive(Debug, Default)]
pub struct Dump {
    files: Vec<(PathBuf, String)>,
}

/// One use of the module in the configuration: a directive or variable
/// named `generation_retry_*`, where it is.
#[derive(Debug, PartialEq, Eq)]
pub struct Use {
    pub file: PathBuf,
    /// 1-based, as nginx counts.
    pub line: usize,
    /// The directive's or variable's name.
    pub name: String,
    /// The line as written, trimmed.
    pub text: String,
}

impl fmt::Display for Use {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file.display(), self.line, self.text)
    }
}

impl Dump {
    /// `nginx -T`'s standard output: `# configuration file PATH:`, then
    /// that file's lines.
    pub fn parse(text: &str) -> Dump {
        let mut files: Vec<(PathBuf, String)> = Vec::new();
        for line in text.lines() {
            if let Some(path) = line
                .strip_prefix("# configuration file ")
                .and_then(|p| p.strip_suffix(':'))
            {
                files.push((PathBuf::from(path), String::new()));
            } else if let Some((_, body)) = files.last_mut() {
                body.push_str(line);
                body.push('\n');
            }
        }
        Dump { files }
    }

    /// Whether nginx read `path`.
    pub fn includes(&self, path: &Path) -> bool {
        self.files.iter().any(|(f, _)| f == path)
    }

    /// Every use of the module's directives and variables, in the order
    /// nginx read them, but in `skip` (the snippet, whose `load_module`
    /// names the module's file).
    pub fn uses(&self, skip: &Path) -> Vec<Use> {
        let mut out = Vec::new();
        for (file, body) in self.files.iter().filter(|(f, _)| f != skip) {
            for (i, line) in body.lines().enumerate() {
                for name in module_names(uncommented(line)) {
                    out.push(Use {
                        file: file.clone(),
                        line: i + 1,
                        name,
                        text: line.trim().to_string(),
                    });
                }
            }
        }
        out
    }
}

/// `line` without its comment (`#` outside quotes).
fn uncommented(line: &str) -> &str {
    let mut quote = None;
    let mut escaped = false;
    for (i, c) in line.char_indices() {
        match (quote, c) {
            _ if escaped => escaped = false,
            (_, '\\') => escaped = true,
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '#') => return &line[..i],
            _ => {}
        }
    }
    line
}

/// The `generation_retry_*` names in `text` that stand as words of their
/// own (a directive, `$generation_retry_...`, `${...}`), not inside a
/// longer name or a path (`.../ngx_http_upstream_generation_retry_module.so`).
fn module_names(text: &str) -> Vec<String> {
    const PREFIX: &str = "generation_retry_";
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = Vec::new();
    for (at, _) in text.match_indices(PREFIX) {
        let before = text[..at].chars().next_back();
        if before.is_some_and(|c| word(c) || matches!(c, '/' | '.' | '-')) {
            continue;
        }
        let end = text[at..]
            .find(|c: char| !word(c))
            .map_or(text.len(), |n| at + n);
        out.push(text[at..end].to_string());
    }
    out
}

/// `conf` with [`ADDED_NOTE`] and `include` inserted at its top level,
/// before its first `events`, `http`, `stream` or `mail` block (after the
/// `load_module` lines above it), or at its end when it has none (its
/// blocks may be in files it includes: then `nginx -t` says the
/// `load_module` comes too late, and the line is the operator's to
/// place). A block that shares its line with statements before it
/// (`worker_processes 1; events {}`) gets a line of its own.
pub fn add_include(conf: &str, include: &str) -> String {
    let Some(at) = first_block(conf) else {
        let newline = if conf.is_empty() || conf.ends_with('\n') {
            ""
        } else {
            "\n"
        };
        return format!("{conf}{newline}{ADDED_NOTE}\n{include}\n");
    };
    let line = conf[..at].rfind('\n').map_or(0, |n| n + 1);
    if conf[line..at].trim().is_empty() {
        let (head, tail) = conf.split_at(line);
        return format!("{head}{ADDED_NOTE}\n{include}\n{tail}");
    }
    let head = conf[..at].trim_end_matches([' ', '\t']);
    format!("{head}\n{ADDED_NOTE}\n{include}\n{}", &conf[at..])
}

/// Where the first statement of `conf`'s top level that opens one of
/// [`BLOCKS`] starts. Read by statements as nginx tokenizes them, not
/// by lines: a `{`, `}` or `;` inside quotes, a comment or a variable's
/// `${name}` is no structure, and a `#` starts a comment only where a
/// token would start.
fn first_block(conf: &str) -> Option<usize> {
    let mut depth = 0usize;
    // Whether the next character starts a token, and where the statement
    // being read started (None between statements).
    let (mut at_token, mut statement) = (true, None);
    let (mut quote, mut escaped, mut comment, mut dollar) = (None, false, false, false);
    for (i, c) in conf.char_indices() {
        let after_dollar = std::mem::take(&mut dollar);
        if comment {
            comment = c != '\n';
            continue;
        }
        if std::mem::take(&mut escaped) {
            continue;
        }
        if let Some(q) = quote {
            match c {
                '\\' => escaped = true,
                _ if c == q => quote = None,
                _ => {}
            }
            continue;
        }
        let boundary = match c {
            _ if c.is_whitespace() => {
                at_token = true;
                false
            }
            ';' => true,
            '{' if !at_token && after_dollar => false,
            '{' => {
                depth += 1;
                true
            }
            '}' if at_token => {
                depth = depth.saturating_sub(1);
                true
            }
            '#' if at_token => {
                comment = true;
                false
            }
            _ => {
                if statement.is_none() {
                    statement = Some(i);
                    let word = conf[i..]
                        .split(|c: char| c.is_whitespace() || matches!(c, '{' | ';'))
                        .next()
                        .unwrap_or("");
                    if depth == 0 && BLOCKS.contains(&word) {
                        return Some(i);
                    }
                }
                match c {
                    '\\' => escaped = true,
                    '"' | '\'' if at_token => quote = Some(c),
                    '$' => dollar = true,
                    _ => {}
                }
                at_token = false;
                false
            }
        };
        if boundary {
            at_token = true;
            statement = None;
        }
    }
    None
}

/// `conf` without the lines [`add_include`] added for `include` (the
/// note and the line under it); `None` when it has no such pair, so a
/// line the operator wrote is never taken.
pub fn remove_include(conf: &str, include: &str) -> Option<String> {
    let lines: Vec<&str> = conf.split_inclusive('\n').collect();
    let i = lines
        .windows(2)
        .position(|w| w[0].trim_end() == ADDED_NOTE && w[1].trim() == include)?;
    let mut out = String::with_capacity(conf.len());
    for (j, l) in lines.iter().enumerate() {
        if j != i && j != i + 1 {
            out.push_str(l);
        }
    }
    Some(out)
}
