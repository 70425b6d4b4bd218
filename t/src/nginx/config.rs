//! What nginx is told: which binary ([`Flavor`]) and the configuration
//! file ([`Config`]), rendered from templates whose `${NAME}`s are filled in;
//! and whether nginx accepts it ([`test_config`]: `nginx -t`).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::builds::{install_dir, installed};
use super::free_port;
use super::process::fresh_prefix;
use crate::scoring::accesslog::{self, LOG_FORMAT_NAME};
use crate::shared::UPSTREAM;

/// Which nginx binary, and whether to `load_module` ours.
#[derive(Clone, Debug)]
pub struct Flavor {
    pub binary: PathBuf,
    pub module: Option<PathBuf>,
    /// A module loaded after ours that wraps every http upstream's
    /// `peer.init` again (the test-only wrapper of `t/wrap/`).
    pub wrapped_by: Option<PathBuf>,
    pub name: &'static str,
}

/// Which fix a twin test runs: the module in stock nginx (with
/// `generation_retry_resnapshot on`), or the patched nginx without it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fix {
    Module,
    Patched,
}

impl Fix {
    pub fn flavor(self) -> Flavor {
        match self {
            Fix::Module => Flavor::with_module(),
            Fix::Patched => Flavor::patched(),
        }
    }

    /// The module's directive, or nothing.
    pub fn on(self) -> &'static str {
        match self {
            Fix::Module => "generation_retry_resnapshot on;",
            Fix::Patched => "",
        }
    }

    /// Whether the fix can run here (a patched nginx for this version);
    /// said when not.
    pub fn available(self) -> bool {
        let here = self == Fix::Module || Flavor::patched_available();
        if !here {
            println!("no patched nginx for this version: nothing to run");
        }
        here
    }
}

impl Flavor {
    /// Stock nginx 1.28.0, no module.
    pub fn stock() -> Flavor {
        Flavor {
            binary: installed("stock/sbin/nginx"),
            module: None,
            wrapped_by: None,
            name: "stock",
        }
    }

    /// nginx 1.28.0 with the core patches of `nginx-src-patches/`, no module.
    pub fn patched() -> Flavor {
        Flavor {
            binary: installed("patched/sbin/nginx"),
            module: None,
            wrapped_by: None,
            name: "patched",
        }
    }

    /// The patched nginx with the module loaded as well.
    pub fn patched_with_module() -> Flavor {
        Flavor {
            module: Flavor::with_module().module,
            name: "patched-module",
            ..Flavor::patched()
        }
    }

    /// Whether `cargo xtask build` produced the patched binary.
    pub fn patched_available() -> bool {
        install_dir().join("patched/sbin/nginx").is_file()
    }

    /// Stock nginx 1.28.0 with the module loaded.
    pub fn with_module() -> Flavor {
        Flavor {
            binary: installed("stock/sbin/nginx"),
            module: Some(installed(
                "modules/ngx_http_upstream_generation_retry_module.so",
            )),
            wrapped_by: None,
            name: "module",
        }
    }

    /// The module, then the test-only wrapper of `t/wrap/` (built by
    /// `cargo xtask build` beside it) wrapping every http upstream's
    /// `peer.init` again, outside ours, as a third-party balancer module
    /// loaded after ours does. It logs `test_wrap: get` and `test_wrap:
    /// free` (`notice`) on each call that goes through it.
    pub fn with_module_wrapped() -> Flavor {
        Flavor {
            wrapped_by: Some(installed(
                "modules/ngx_http_generation_retry_test_wrap_module.so",
            )),
            name: "module-wrapped",
            ..Flavor::with_module()
        }
    }
}

/// Configuration of one nginx run.
#[derive(Clone, Debug)]
pub struct Config {
    pub flavor: Flavor,
    pub workers: u32,
    /// A command to run nginx under (valgrind, ...); nginx then runs with
    /// `master_process off`, as one process the wrapper can follow.
    pub wrapper: Vec<String>,
    /// Log `-` instead of `$generation_retry_resnapshots` even with the
    /// module (so a cost comparison logs the same thing).
    pub plain_log: bool,
    /// Run as a daemon (needed for a binary upgrade: nginx refuses USR2
    /// while its parent is the process that started it).
    pub daemon: bool,
    /// The inside of `http {}`. `${PORT}` is replaced by the listen port,
    /// `${PREFIX}` by nginx's prefix directory, `${UPSTREAM}` by
    /// [`UPSTREAM`], other `${NAME}`s by [`Config::var`].
    pub http: String,
    /// The inside of a `stream {}` block (none when empty), with the same
    /// substitutions; its access log is `logs/stream.log`.
    pub stream: String,
    vars: Vec<(String, String)>,
}

impl Config {
    pub fn new(flavor: Flavor, http: impl Into<String>) -> Config {
        Config {
            flavor,
            workers: 1,
            wrapper: Vec::new(),
            plain_log: false,
            daemon: false,
            http: http.into(),
            stream: String::new(),
            vars: Vec::new(),
        }
    }

    /// Adds a `stream {}` block with this inside.
    pub fn stream(mut self, stream: impl Into<String>) -> Config {
        self.stream = stream.into();
        self
    }

    pub fn var(mut self, name: &str, value: impl ToString) -> Config {
        self.vars.push((name.to_string(), value.to_string()));
        self
    }

    /// Replaces the value of `${name}` (for a reconfiguration).
    pub fn set_var(mut self, name: &str, value: impl ToString) -> Config {
        self.vars.retain(|(k, _)| k != name);
        self.var(name, value)
    }

    /// Runs nginx under `command` (e.g. `valgrind --tool=callgrind ...`).
    pub fn wrapped(mut self, command: &[&str]) -> Config {
        self.wrapper = command.iter().map(|s| s.to_string()).collect();
        self
    }

    pub fn workers(mut self, n: u32) -> Config {
        self.workers = n;
        self
    }

    /// `text` with `${PORT}`, `${UPSTREAM}` ([`UPSTREAM`]) and the
    /// variables substituted.
    fn substitute(&self, text: &str, port: u16) -> String {
        // Values may themselves name variables (an `${UPSTREAM_EXTRA}` that
        // mentions `${BPORT}`): substitute until nothing changes (bounded).
        let mut text = text.to_string();
        for _ in 0..4 {
            let before = text.clone();
            text = text
                .replace("${PORT}", &port.to_string())
                .replace("${UPSTREAM}", UPSTREAM);
            for (k, v) in &self.vars {
                text = text.replace(&format!("${{{k}}}"), v);
            }
            if text == before {
                break;
            }
        }
        text
    }

    /// The whole nginx.conf for an nginx in `prefix` listening on `port`.
    pub(super) fn render(&self, prefix: &Path, port: u16) -> String {
        let p = prefix.display();
        let http = self
            .substitute(&self.http, port)
            .replace("${PREFIX}", &p.to_string());
        let stream = if self.stream.is_empty() {
            String::new()
        } else {
            format!(
                "stream {{\n    log_format stream_log '$remote_port|$upstream_addr|$status|\
                 $bytes_received|$bytes_sent|$upstream_connect_time|$msec|$server_port';\n    \
                 access_log {p}/logs/stream.log stream_log;\n{}\n}}\n",
                self.substitute(&self.stream, port)
                    .replace("${PREFIX}", &p.to_string())
            )
        };
        // An nginx whose stream module is dynamic (Debian's) names it in
        // `modules-first.conf` beside its binaries: it is loaded first, as
        // its `50-mod-stream.conf` is before any module that needs it.
        let mut load =
            fs::read_to_string(install_dir().join("modules-first.conf")).unwrap_or_default();
        for m in self.flavor.module.iter().chain(&self.flavor.wrapped_by) {
            load.push_str(&format!("load_module {};\n", m.display()));
        }
        // As root, workers would switch to `nobody` and could not enter a
        // 0700 prefix; nginx's own test suite runs them as root for this.
        let user = if is_root() { "user root;\n" } else { "" };
        format!(
            "{load}{user}daemon {daemon};\nmaster_process {master};\nworker_processes {workers};\n\
             error_log {p}/logs/error.log info;\npid {p}/logs/nginx.pid;\n\
             events {{ worker_connections 4096; }}\n\
             http {{\n    log_format {LOG_FORMAT_NAME} {format};\n    \
             access_log {p}/logs/access.log {LOG_FORMAT_NAME};\n    \
             client_body_temp_path {p}/client_body_temp;\n    \
             proxy_temp_path {p}/proxy_temp;\n    \
             fastcgi_temp_path {p}/fastcgi_temp;\n    \
             uwsgi_temp_path {p}/uwsgi_temp;\n    \
             scgi_temp_path {p}/scgi_temp;\n{http}\n}}\n{stream}",
            workers = self.workers,
            master = if self.wrapper.is_empty() { "on" } else { "off" },
            daemon = if self.daemon { "on" } else { "off" },
            format = accesslog::log_format(self.flavor.module.is_some() && !self.plain_log),
        )
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The result of `nginx -t`.
#[derive(Debug)]
pub struct ConfigTest {
    pub ok: bool,
    pub stderr: String,
}

/// Runs `nginx -t` on a configuration.
pub fn test_config(config: &Config) -> ConfigTest {
    test_config_under(config, &[])
}

/// Runs `nginx -t` on a configuration under `wrapper` (a command and its
/// arguments, nginx's command line following them), e.g. gdb in batch
/// mode; nothing when empty.
pub fn test_config_under(config: &Config, wrapper: &[&str]) -> ConfigTest {
    let prefix = fresh_prefix(config.flavor.name);
    let tested = run_test(config, wrapper, &prefix, free_port(), "nginx.conf");
    let _ = fs::remove_dir_all(&prefix);
    tested
}

/// `nginx -t` of `config`, rendered for `prefix` and `port` into the file
/// `name` there, under `wrapper` (see [`test_config_under`]).
pub(super) fn run_test(
    config: &Config,
    wrapper: &[&str],
    prefix: &Path,
    port: u16,
    name: &str,
) -> ConfigTest {
    let conf = prefix.join(name);
    fs::write(&conf, config.render(prefix, port)).unwrap();
    let mut cmd = match wrapper.split_first() {
        Some((program, args)) => {
            let mut cmd = Command::new(program);
            cmd.args(args).arg(&config.flavor.binary);
            cmd
        }
        None => Command::new(&config.flavor.binary),
    };
    let out = cmd
        .arg("-p")
        .arg(prefix)
        .arg("-c")
        .arg(&conf)
        .arg("-t")
        .output()
        .expect("run nginx -t");
    ConfigTest {
        ok: out.status.success(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}
