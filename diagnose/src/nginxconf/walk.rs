//! Walks the directive tree into an [`NginxConf`]: the upstreams and their
//! servers, the http locations and stream listeners with what they proxy
//! to, the access logs with their formats, and the error logs.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::parse::Directive;
use super::{AccessLog, Location, Module, NginxConf, Proxy, Server, Upstream, COMBINED};

impl NginxConf {
    pub(super) fn walk(&mut self, items: &[Directive], module: Option<Module>, ctx: &Context) {
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
pub(super) struct Context {
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
