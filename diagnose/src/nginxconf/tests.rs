//! Unit tests of the configuration reader: a dump, a file with its
//! includes from the disk, and the times, tokens and globs.

use std::fs;

use super::parse::glob_match;
use super::tokens::{tokenize, Token};
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
