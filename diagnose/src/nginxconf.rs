//! What nginx already knows, read from its configuration: `nginx -T`'s dump
//! (every file after a `# configuration file PATH:` line) or a file read
//! with its `include`s. From it: each upstream's servers (names with
//! `resolve`, addresses, `max_fails`, `fail_timeout`, `backup`, `down`),
//! which `location`s and `server`s proxy to which upstream, each
//! `access_log` with its `log_format`, and the error logs. The tokens are
//! nginx's own: blanks separate them, `;`, `{` and `}` end them, quotes
//! (with `\` escapes) keep blanks, `#` starts a comment outside quotes.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

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

    fn walk(&mut self, items: &[Directive], module: Option<Module>, ctx: &Context) {
        // Formats first: an access_log may come before its log_format.
        let mut ctx = ctx.clone();
        for d in items {
            if d.name == "log_format" && d.args.len() >= 2 {
                let parts = d.args[1..]
                    .iter()
                    .filter(|a| !a.starts_with("escape="))
                    .cloned()
                    .collect::<String>();
                ctx.formats.insert(d.args[0].clone(), parts);
            }
            if d.name == "server_name" {
                ctx.server_names = d.args.clone();
            }
        }
        for d in items {
            match (d.name.as_str(), &d.block) {
                ("http", Some(b)) => self.walk(b, Some(Module::Http), &ctx),
                ("stream", Some(b)) => self.walk(b, Some(Module::Stream), &ctx),
                ("upstream", Some(b)) if !d.args.is_empty() => {
                    if let Some(m) = module {
                        self.upstreams.push(upstream(&d.args[0], m, b));
                    }
                }
                ("server", Some(b)) | ("location", Some(b)) | ("if", Some(b)) => {
                    let mut inner = ctx.clone();
                    if d.name == "server" && module == Some(Module::Http) {
                        inner.server = Some(self.http_servers);
                        self.http_servers += 1;
                    }
                    if d.name == "server" && module == Some(Module::Stream) {
                        let pass = b
                            .iter()
                            .find(|x| x.name == "proxy_pass" && x.block.is_none());
                        if let Some(upstream) = pass.and_then(|x| x.args.first()) {
                            let ports = b
                                .iter()
                                .filter(|x| x.name == "listen" && x.block.is_none())
                                .filter_map(|x| x.args.first().and_then(|a| listen_port(a)));
                            for port in ports {
                                self.stream_routes.push((port, upstream.clone()));
                            }
                        }
                    }
                    if d.name == "location" {
                        inner.location = Some(d.args.join(" "));
                        if let (Some(server), Some(Module::Http)) = (ctx.server, module) {
                            let (modifier, path) = match d.args.as_slice() {
                                [m, p] => (m.clone(), p.clone()),
                                [p] if p.starts_with('@') => ("@".to_string(), p.clone()),
                                [p] => (String::new(), p.clone()),
                                _ => (String::from("?"), String::new()),
                            };
                            inner.location_index = Some(self.locations.len());
                            self.locations.push(Location {
                                server,
                                modifier,
                                path,
                                proxy_pass: None,
                            });
                        }
                    }
                    self.walk(b, module, &inner);
                }
                ("proxy_pass", None) if !d.args.is_empty() => {
                    if let Some(m) = module {
                        let target = d.args[0].as_str();
                        let name = target
                            .strip_prefix("http://")
                            .or_else(|| target.strip_prefix("https://"))
                            .unwrap_or(target);
                        let name = name.split(['/', ':']).next().unwrap_or(name);
                        if let Some(l) = ctx.location_index.and_then(|i| self.locations.get_mut(i))
                        {
                            l.proxy_pass = Some(name.to_string());
                        }
                        self.proxies.push(Proxy {
                            module: m,
                            upstream: name.to_string(),
                            server_names: ctx.server_names.clone(),
                            location: ctx.location.clone(),
                        });
                    }
                }
                ("access_log", None) if d.args.first().is_some_and(|a| a != "off") => {
                    if let Some(m) = module {
                        let name = d
                            .args
                            .get(1)
                            .filter(|a| !a.contains('='))
                            .cloned()
                            .unwrap_or_else(|| "combined".into());
                        let format = ctx
                            .formats
                            .get(&name)
                            .cloned()
                            .or_else(|| (name == "combined").then(|| COMBINED.to_string()));
                        let log = AccessLog {
                            path: PathBuf::from(&d.args[0]),
                            module: m,
                            format_name: name,
                            format,
                        };
                        if !self.access_logs.contains(&log) {
                            self.access_logs.push(log);
                        }
                    }
                }
                ("error_log", None) if !d.args.is_empty() => {
                    let p = PathBuf::from(&d.args[0]);
                    if d.args[0] != "stderr" && !self.error_logs.contains(&p) {
                        self.error_logs.push(p);
                    }
                }
                (_, Some(b)) => self.walk(b, module, &ctx),
                _ => {}
            }
        }
    }
}

/// The port of a `listen` address (`5432`, `127.0.0.1:5432`,
/// `[::1]:5432`); `None` for a UNIX socket.
fn listen_port(address: &str) -> Option<u16> {
    if address.starts_with("unix:") {
        return None;
    }
    address.rsplit(':').next()?.parse().ok()
}

/// What a block inherits from the blocks around it.
#[derive(Clone, Debug, Default)]
struct Context {
    formats: BTreeMap<String, String>,
    server_names: Vec<String>,
    location: Option<String>,
    /// The http `server` block (index) and the innermost location (index
    /// into `NginxConf::locations`).
    server: Option<usize>,
    location_index: Option<usize>,
}

fn upstream(name: &str, module: Module, items: &[Directive]) -> Upstream {
    let mut u = Upstream {
        name: name.to_string(),
        module,
        zone: false,
        servers: Vec::new(),
    };
    for d in items {
        match d.name.as_str() {
            "zone" => u.zone = true,
            "server" if !d.args.is_empty() => {
                let mut s = Server {
                    address: d.args[0].clone(),
                    resolve: false,
                    max_fails: 1,
                    fail_timeout_ms: 10_000,
                    backup: false,
                    down: false,
                };
                for a in &d.args[1..] {
                    match a.split_once('=') {
                        Some(("max_fails", v)) => s.max_fails = v.parse().unwrap_or(1),
                        Some(("fail_timeout", v)) => {
                            s.fail_timeout_ms = duration_ms(v).unwrap_or(10_000)
                        }
                        None if a == "resolve" => s.resolve = true,
                        None if a == "backup" => s.backup = true,
                        None if a == "down" => s.down = true,
                        _ => {}
                    }
                }
                u.servers.push(s);
            }
            _ => {}
        }
    }
    u
}

/// An nginx time (`10s`, `500ms`, `1m30s`, `2h`; a bare number is
/// seconds), in milliseconds.
pub fn duration_ms(v: &str) -> Option<u64> {
    let mut total = 0u64;
    let mut rest = v;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let n: u64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest.bytes().take_while(|b| b.is_ascii_alphabetic()).count();
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let ms = match unit {
            "ms" => 1,
            "" | "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            "w" => 604_800_000,
            _ => return None,
        };
        total = total.checked_add(n.checked_mul(ms)?)?;
    }
    Some(total)
}

/// One directive: its name, arguments and block.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Directive {
    name: String,
    args: Vec<String>,
    block: Option<Vec<Directive>>,
}

/// `nginx -T`'s files, in order: (path, text).
fn dumped_files(text: &str) -> Vec<(PathBuf, String)> {
    let mut out: Vec<(PathBuf, String)> = Vec::new();
    for line in text.split_inclusive('\n') {
        let marker = line
            .trim_end()
            .strip_prefix("# configuration file ")
            .and_then(|r| r.strip_suffix(':'));
        match (marker, out.last_mut()) {
            (Some(p), _) => out.push((PathBuf::from(p), String::new())),
            (None, Some((_, t))) => t.push_str(line),
            (None, None) => {}
        }
    }
    out
}

/// Where included files come from: the dump, else the disk.
struct Source {
    dumped: BTreeMap<PathBuf, String>,
    prefix: PathBuf,
}

impl Source {
    fn parse_file(&self, text: &str, path: &Path, depth: usize) -> Result<Vec<Directive>, String> {
        if depth > 16 {
            return Err(format!("{}: includes nested too deep", path.display()));
        }
        let tokens = tokenize(text).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut pos = 0;
        let (items, closed) = self.block(&tokens, &mut pos, path, depth)?;
        if closed {
            return Err(format!("{}: unexpected \"}}\"", path.display()));
        }
        Ok(items)
    }

    fn block(
        &self,
        tokens: &[Token],
        pos: &mut usize,
        path: &Path,
        depth: usize,
    ) -> Result<(Vec<Directive>, bool), String> {
        let mut items = Vec::new();
        let mut words: Vec<String> = Vec::new();
        while *pos < tokens.len() {
            let t = &tokens[*pos];
            *pos += 1;
            match t {
                Token::Word(w) => words.push(w.clone()),
                Token::Semi => {
                    let Some((name, args)) = words.split_first() else {
                        continue;
                    };
                    if name == "include" && !args.is_empty() {
                        for (p, text) in self.included(&args[0]) {
                            items.extend(self.parse_file(&text, &p, depth + 1)?);
                        }
                    } else {
                        items.push(Directive {
                            name: name.clone(),
                            args: args.to_vec(),
                            block: None,
                        });
                    }
                    words.clear();
                }
                Token::Open => {
                    let (inner, closed) = self.block(tokens, pos, path, depth)?;
                    if !closed {
                        return Err(format!(
                            "{}: unexpected end of file, expecting \"}}\"",
                            path.display()
                        ));
                    }
                    let Some((name, args)) = words.split_first() else {
                        return Err(format!("{}: a block without a name", path.display()));
                    };
                    items.push(Directive {
                        name: name.clone(),
                        args: args.to_vec(),
                        block: Some(inner),
                    });
                    words.clear();
                }
                Token::Close => return Ok((items, true)),
            }
        }
        Ok((items, false))
    }

    /// The files an `include PATTERN` names: from the dump when it has
    /// them, else from the disk; sorted, as nginx's glob gives them.
    fn included(&self, pattern: &str) -> Vec<(PathBuf, String)> {
        let full = if Path::new(pattern).is_absolute() {
            PathBuf::from(pattern)
        } else {
            self.prefix.join(pattern)
        };
        let full_s = full.to_string_lossy().into_owned();
        let mut found: Vec<(PathBuf, String)> = self
            .dumped
            .iter()
            .filter(|(p, _)| glob_match(&full_s, &p.to_string_lossy()))
            .map(|(p, t)| (p.clone(), t.clone()))
            .collect();
        if found.is_empty() && self.dumped.is_empty() {
            let dir = full.parent().unwrap_or(Path::new("/"));
            let name = full
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            if let Ok(rd) = fs::read_dir(dir) {
                for e in rd.flatten() {
                    let n = e.file_name().to_string_lossy().into_owned();
                    if glob_match(&name, &n) {
                        if let Ok(t) = fs::read_to_string(e.path()) {
                            found.push((e.path(), t));
                        }
                    }
                }
            }
        }
        found.sort();
        found
    }
}

/// `*` and `?` as glob(3) has them (`*` not crossing `/`).
fn glob_match(pattern: &str, name: &str) -> bool {
    fn go(p: &[u8], n: &[u8]) -> bool {
        match (p.first(), n.first()) {
            (None, None) => true,
            (Some(b'*'), _) => go(&p[1..], n) || (!n.is_empty() && n[0] != b'/' && go(p, &n[1..])),
            (Some(b'?'), Some(c)) if *c != b'/' => go(&p[1..], &n[1..]),
            (Some(a), Some(b)) if a == b => go(&p[1..], &n[1..]),
            _ => false,
        }
    }
    go(pattern.as_bytes(), name.as_bytes())
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    Word(String),
    Semi,
    Open,
    Close,
}

fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    let mut word = String::new();
    let mut line = 1;
    let flush = |word: &mut String, out: &mut Vec<Token>| {
        if !word.is_empty() {
            out.push(Token::Word(std::mem::take(word)));
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '\n' => {
                line += 1;
                flush(&mut word, &mut out);
            }
            c if c.is_whitespace() => flush(&mut word, &mut out),
            '#' if word.is_empty() => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        line += 1;
                        break;
                    }
                }
            }
            ';' | '{' | '}' => {
                flush(&mut word, &mut out);
                out.push(match c {
                    ';' => Token::Semi,
                    '{' => Token::Open,
                    _ => Token::Close,
                });
            }
            '"' | '\'' if word.is_empty() => {
                let quote = c;
                let mut closed = false;
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => {
                            if let Some(n) = chars.next() {
                                // nginx keeps a backslash before anything
                                // but the quote, itself and a few escapes.
                                match n {
                                    '"' | '\'' | '\\' => word.push(n),
                                    'n' => word.push('\n'),
                                    't' => word.push('\t'),
                                    'r' => word.push('\r'),
                                    other => {
                                        word.push('\\');
                                        word.push(other);
                                    }
                                }
                            }
                        }
                        c if c == quote => {
                            closed = true;
                            break;
                        }
                        '\n' => {
                            line += 1;
                            word.push('\n');
                        }
                        c => word.push(c),
                    }
                }
                if !closed {
                    return Err(format!("unterminated quote from line {line}"));
                }
                // A quoted empty string is still an argument.
                out.push(Token::Word(std::mem::take(&mut word)));
            }
            c => word.push(c),
        }
    }
    flush(&mut word, &mut out);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An `nginx -T` dump, abridged from what nginx prints: the main file,
    /// then each included one.
    const DUMP: &str = r#"nginx: the configuration file /etc/nginx/nginx.conf syntax is ok
nginx: configuration file /etc/nginx/nginx.conf test is successful
# configuration file /etc/nginx/nginx.conf:
user www-data;
error_log /var/log/nginx/error.log warn;
events { worker_connections 1024; }
http {
    log_format upstreams '$remote_addr [$time_local] "$request" $status '
                         '"$upstream_addr" $msec $request_time';
    access_log /var/log/nginx/access.log upstreams buffer=32k;
    include /etc/nginx/conf.d/*.conf;
}
stream {
    log_format s '$remote_addr $status "$upstream_addr" $msec';
    upstream db { zone db 64k; server db.test:5432 resolve max_fails=0; }
    server { listen 5432; proxy_pass db; access_log /var/log/nginx/stream.log s; }
    server { listen 127.0.0.1:6432; listen [::1]:6433; listen unix:/run/db.sock; proxy_pass db; }
}

# configuration file /etc/nginx/conf.d/app.conf:
upstream be {
    zone be 64k;
    server app.test:8080 resolve max_fails=3 fail_timeout=30s;
    server 10.0.0.9:8080 backup;   # the old box
}
upstream wipe { zone wipe 64k; server 127.0.0.6:1 max_fails=1 fail_timeout=2s; server 127.0.0.7:1 down; }
server {
    listen 80;
    server_name app.example.com "quoted name";
    access_log /var/log/nginx/app.log;
    location /api/ { proxy_pass http://be/v1/; }
    location = /old { proxy_pass http://wipe; error_log /var/log/nginx/old.log; }
}
"#;

    #[test]
    fn a_dump_is_read_with_its_includes() {
        let c = NginxConf::parse(DUMP, Path::new("/nonexistent")).unwrap();
        let be = c.upstream(Module::Http, "be").unwrap();
        assert!(be.zone);
        assert_eq!(
            be.servers[0],
            Server {
                address: "app.test:8080".into(),
                resolve: true,
                max_fails: 3,
                fail_timeout_ms: 30_000,
                backup: false,
                down: false
            }
        );
        assert_eq!(be.servers[0].host(), "app.test");
        assert!(be.servers[1].backup && !be.servers[1].resolve);
        // Each stream listener's port leads to its block's upstream; a
        // UNIX socket has none. No http server counts.
        assert_eq!(
            c.stream_routes,
            [
                (5432, "db".to_string()),
                (6432, "db".into()),
                (6433, "db".into())
            ]
        );
        let wipe = c.upstream(Module::Http, "wipe").unwrap();
        assert_eq!(wipe.servers[0].fail_timeout_ms, 2_000);
        assert!(wipe.servers[1].down);
        let db = c.upstream(Module::Stream, "db").unwrap();
        assert!(db.servers[0].resolve && db.servers[0].max_fails == 0);
        assert!(c.upstream(Module::Http, "db").is_none());

        assert_eq!(
            c.access_logs,
            [
                AccessLog {
                    path: "/var/log/nginx/access.log".into(),
                    module: Module::Http,
                    format_name: "upstreams".into(),
                    format: Some(
                        "$remote_addr [$time_local] \"$request\" $status \"$upstream_addr\" \
                         $msec $request_time"
                            .into()
                    ),
                },
                AccessLog {
                    path: "/var/log/nginx/app.log".into(),
                    module: Module::Http,
                    format_name: "combined".into(),
                    format: Some(COMBINED.into()),
                },
                AccessLog {
                    path: "/var/log/nginx/stream.log".into(),
                    module: Module::Stream,
                    format_name: "s".into(),
                    format: Some("$remote_addr $status \"$upstream_addr\" $msec".into()),
                },
            ]
        );
        assert_eq!(
            c.error_logs,
            [
                PathBuf::from("/var/log/nginx/error.log"),
                PathBuf::from("/var/log/nginx/old.log")
            ]
        );
        let to = |u: &str| {
            c.proxies
                .iter()
                .filter(|p| p.upstream == u)
                .map(|p| (p.server_names.clone(), p.location.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            to("be"),
            [(
                vec!["app.example.com".to_string(), "quoted name".to_string()],
                Some("/api/".to_string())
            )]
        );
        assert_eq!(to("wipe")[0].1.as_deref(), Some("= /old"));
        assert_eq!(to("db").len(), 2);
        let old = c.locations.iter().find(|l| l.path == "/old").unwrap();
        assert_eq!(
            (old.modifier.as_str(), old.proxy_pass.as_deref()),
            ("=", Some("wipe"))
        );
        let api = c.locations.iter().find(|l| l.path == "/api/").unwrap();
        assert_eq!((api.modifier.as_str(), api.server), ("", old.server));
    }

    #[test]
    fn a_file_is_read_with_its_includes_from_the_disk() {
        let dir = std::env::temp_dir().join(format!("nginxconf-{}", std::process::id()));
        fs::create_dir_all(dir.join("sites")).unwrap();
        fs::write(
            dir.join("sites/a.conf"),
            "upstream a { zone a 64k; server a.test resolve; }",
        )
        .unwrap();
        fs::write(
            dir.join("sites/b.conf"),
            "upstream b { server 127.0.0.1:1; }",
        )
        .unwrap();
        fs::write(dir.join("sites/skip.txt"), "upstream c { }").unwrap();
        let main = "http { include sites/*.conf; }";
        let c = NginxConf::parse(main, &dir).unwrap();
        let _ = fs::remove_dir_all(&dir);
        let names: Vec<(&str, bool)> = c
            .upstreams
            .iter()
            .map(|u| (u.name.as_str(), u.zone))
            .collect();
        assert_eq!(names, [("a", true), ("b", false)]);
    }

    #[test]
    fn times_tokens_and_globs_are_nginxs() {
        assert_eq!(duration_ms("10s"), Some(10_000));
        assert_eq!(duration_ms("500ms"), Some(500));
        assert_eq!(duration_ms("1m30s"), Some(90_000));
        assert_eq!(duration_ms("7"), Some(7_000));
        assert_eq!(duration_ms("x"), None);
        assert_eq!(duration_ms("5y"), None);
        assert_eq!(
            tokenize("a 'b c' \"d\\\"e\" f;#c\n{}").unwrap(),
            [
                Token::Word("a".into()),
                Token::Word("b c".into()),
                Token::Word("d\"e".into()),
                Token::Word("f".into()),
                Token::Semi,
                Token::Open,
                Token::Close
            ]
        );
        assert!(tokenize("a 'b").unwrap_err().contains("unterminated"));
        assert!(glob_match(
            "/etc/nginx/conf.d/*.conf",
            "/etc/nginx/conf.d/app.conf"
        ));
        assert!(!glob_match(
            "/etc/nginx/conf.d/*.conf",
            "/etc/nginx/conf.d/x/app.conf"
        ));
        assert!(glob_match("a?c", "abc") && !glob_match("a?c", "ac"));
        assert!(NginxConf::parse("http { }}", Path::new("/")).is_err());
        assert!(NginxConf::parse("http { ", Path::new("/"))
            .unwrap_err()
            .contains("expecting"));
    }
}
