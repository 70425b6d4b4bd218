//! What nginx already knows, read from its configuration: `nginx -T`'s dump
//! (every file after a `# configuration file PATH:` line) or a file read
//! with its `include`s. From it: each upstream's servers (names with
//! `resolve`, addresses, `max_fails`, `fail_timeout`, `backup`, `down`),
//! which `location`s and `server`s proxy to which upstream, each
//! `access_log` with its `log_format`, and the error logs. The tokens are
//! nginx's own: blanks separate them, `;`, `{` and `}` end them, quotes
//! (with `\` escapes) keep blanks, `#` starts a comment outside quotes.
//!
//! The parts: `tokens` (the text into nginx's tokens), `parse` (tokens
//! into directives, with the `include`d files from the dump or the disk),
//! `walk` (the directives into what the configuration says), and here the
//! model, [`NginxConf`], and its entry point, [`NginxConf::parse`].

mod parse;
#[cfg(test)]
mod tests;
mod tokens;
mod walk;

use std::path::{Path, PathBuf};

pub use walk::duration_ms;

use parse::{dumped_files, Source};
use walk::Context;

/// nginx's predefined `combined` format (http), what an `access_log`
/// without a format name uses.
pub const COMBINED: &str = "$remote_addr - $remote_user [$time_local] \"$request\" $status \
                            $body_bytes_sent \"$http_referer\" \"$http_user_agent\"";

/// `http` or `stream`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Module {
    Http,
    Stream,
}

/// One `server` line of an `upstream` block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Server {
    /// As written: `app.example.com:8080`, `10.0.0.1:80`, `unix:/...`.
    pub address: String,
    /// `resolve`: the name is re-resolved, and its addresses change.
    pub resolve: bool,
    /// `max_fails=` (nginx's default 1).
    pub max_fails: u32,
    /// `fail_timeout=` in milliseconds (nginx's default 10 s).
    pub fail_timeout_ms: u64,
    pub backup: bool,
    pub down: bool,
}

impl Server {
    /// The host part of [`Server::address`] (no port).
    pub fn host(&self) -> &str {
        match self.address.rsplit_once(':') {
            Some((h, p)) if !h.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => h,
            _ => &self.address,
        }
    }
}

/// One `upstream` block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upstream {
    pub name: String,
    pub module: Module,
    /// Has `zone` (without it there is no generation, and no race).
    pub zone: bool,
    pub servers: Vec<Server>,
}

/// An `access_log` in force somewhere, with its format's text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccessLog {
    pub path: PathBuf,
    pub module: Module,
    /// The `log_format` name (`combined` when none is given).
    pub format_name: String,
    /// Its text, when the configuration defines it (or it is `combined`).
    pub format: Option<String>,
}

/// A `proxy_pass` to an upstream, and where it is (`server_name`s and the
/// `location`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Proxy {
    pub module: Module,
    pub upstream: String,
    pub server_names: Vec<String>,
    pub location: Option<String>,
}

/// An http `location`, whatever it does: its `server` block (an index,
/// in order), its modifier (`""`, `=`, `^~`, `~`, `~*`, `@`) and path, and
/// the host its `proxy_pass` names (an upstream's name, or an address).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    pub server: usize,
    pub modifier: String,
    pub path: String,
    pub proxy_pass: Option<String>,
}

/// What the configuration says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NginxConf {
    pub upstreams: Vec<Upstream>,
    pub access_logs: Vec<AccessLog>,
    pub error_logs: Vec<PathBuf>,
    pub proxies: Vec<Proxy>,
    /// Every http location (see [`Location`]).
    pub locations: Vec<Location>,
    /// How many http `server` blocks there are.
    pub http_servers: usize,
    /// Each stream `server` block's `listen` ports with the `proxy_pass`
    /// of the block: a session's `$server_port` tells its upstream.
    pub stream_routes: Vec<(u16, String)>,
}

impl NginxConf {
    /// `nginx -T` output, or the text of one configuration file whose
    /// `include`s are read from `dir` (relative paths) and the disk.
    pub fn parse(text: &str, dir: &Path) -> Result<NginxConf, String> {
        let files = dumped_files(text);
        let (main, main_path) = match files.first() {
            Some((p, t)) => (t.clone(), p.clone()),
            None => (text.to_string(), dir.join("nginx.conf")),
        };
        let prefix = main_path.parent().unwrap_or(dir).to_path_buf();
        let source = Source {
            dumped: files.into_iter().collect(),
            prefix,
        };
        let tree = source.parse_file(&main, &main_path, 0)?;
        let mut conf = NginxConf::default();
        conf.walk(&tree, None, &Context::default());
        Ok(conf)
    }

    /// The upstream with this name in `module`.
    pub fn upstream(&self, module: Module, name: &str) -> Option<&Upstream> {
        self.upstreams
            .iter()
            .find(|u| u.module == module && u.name == name)
    }
}
