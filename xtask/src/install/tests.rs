//! The install commands' unit tests: `nginx -V` read, the tree's flags,
//! the layout, a stale module told apart, and the options.

use super::binary::parse_v;
use super::*;
use crate::build::MODULE_FILE;

fn id(args: &str) -> Identity {
    parse_v(&format!(
        "nginx version: nginx/1.30.4\nconfigure arguments: {args}\n"
    ))
    .unwrap()
}

#[test]
fn nginx_v_is_parsed() {
    let id = parse_v(
        "nginx version: nginx/1.30.6 (Debian)\nbuilt with OpenSSL 3.6.5\n\
         configure arguments: --with-cc-opt='-g -O2 -fPIC' --prefix=/usr/share/nginx --with-compat\n",
    )
    .unwrap();
    assert_eq!(id.version, "1.30.6");
    assert_eq!(id.version_tuple(), Some((1, 30, 6)));
    assert_eq!(
        id.arguments,
        [
            "--with-cc-opt=-g -O2 -fPIC",
            "--prefix=/usr/share/nginx",
            "--with-compat"
        ]
    );
    assert!(id.has("--with-compat"));
    assert_eq!(id.value("--prefix"), Some("/usr/share/nginx"));
    assert_eq!(id.codebase, "1.30.6");
    assert!(parse_v("Usage: something else").is_none());
    // Tengine says both; its module is built against Tengine's tree.
    let t = parse_v(
        "Tengine version: Tengine/3.2.0\nnginx version: nginx/1.31.3\n\
         configure arguments: --with-compat\n",
    )
    .unwrap();
    assert_eq!(
        (t.version.as_str(), t.codebase.as_str()),
        ("1.31.3", "tengine-3.2.0")
    );
    assert_eq!(t.describe(), "tengine-3.2.0 (nginx 1.31.3)");
    let a = parse_v(
        "Angie version: Angie/1.12.1\nnginx version: nginx/1.31.2\n\
         configure arguments: --with-compat\n",
    )
    .unwrap();
    assert_eq!(a.codebase, "angie-1.12.1");
}

#[test]
fn the_tree_is_configured_with_the_flags_that_decide_layouts() {
    // nginx.org's packages, abridged.
    let f = tree_flags(&id(
        "--prefix=/etc/nginx --with-compat --with-threads --with-http_ssl_module \
         --with-http_v2_module --with-stream --with-stream_ssl_module \
         --with-cc-opt='-O2 -g' --with-openssl=../openssl-3 --with-http_xslt_module=dynamic \
         --with-http_perl_module --without-pcre",
    ));
    assert_eq!(
        f,
        [
            "--with-compat",
            "--with-threads",
            "--with-http_ssl_module",
            "--with-http_v2_module",
            "--with-stream",
            "--with-stream_ssl_module",
            "--without-pcre"
        ]
    );
    // Debian's dynamic stream is configured in: the module's stream
    // part is built, and loaded after Debian's stream module.
    assert!(
        tree_flags(&id("--with-compat --with-stream=dynamic")).contains(&"--with-stream".into())
    );
    assert_eq!(tree_flags(&id("")), ["--with-compat"]);
}

#[test]
fn the_layout_follows_the_binary_and_the_prefix() {
    let l = Layout::of(&id("--with-compat"), Some(Path::new("/tmp/p")));
    assert_eq!(l.modules, Path::new("/tmp/p/modules"));
    assert_eq!(l.conf, Path::new("/tmp/p/conf/nginx.conf"));
    assert_eq!(
        l.snippet,
        Path::new("/tmp/p/conf/modules.d/generation-retry.conf")
    );
    assert_eq!(
        l.include.as_deref(),
        Some("include /tmp/p/conf/modules.d/*.conf;")
    );
    let l = Layout::of(
        &id("--prefix=/etc/nginx --modules-path=/usr/lib/nginx/modules --conf-path=/etc/nginx/nginx.conf"),
        None,
    );
    assert_eq!(
        l.module(),
        Path::new("/usr/lib/nginx/modules").join(MODULE_FILE)
    );
    assert_eq!(l.conf, Path::new("/etc/nginx/nginx.conf"));
}

#[test]
fn only_this_module_built_for_another_nginx_is_stale() {
    let stale = format!(
        "nginx: [emerg] module \"/usr/lib/nginx/modules/{MODULE_FILE}\" version 1028000 \
         instead of 1030004 in /etc/nginx/modules.d/generation-retry.conf:1\n\
         nginx: configuration file /etc/nginx/nginx.conf test failed"
    );
    let ours = Path::new("/usr/lib/nginx/modules").join(MODULE_FILE);
    assert!(stale_module(&stale, &ours));
    assert!(!stale_module(
        &stale,
        &Path::new("/opt/elsewhere").join(MODULE_FILE)
    ));
    assert!(!stale_module(
        &stale.replace(MODULE_FILE, "ngx_other_module.so"),
        &ours
    ));
    assert!(!stale_module(
        "nginx: [emerg] unknown directive \"frob\" in /etc/nginx/nginx.conf:3",
        &ours
    ));
}

#[test]
fn options_are_parsed_and_for_is_required() {
    let a = Args::parse(&["--for=/usr/sbin/nginx".into(), "--dry-run".into()]).unwrap();
    assert_eq!(a.binary, Path::new("/usr/sbin/nginx"));
    assert!(a.dry_run);
    assert!(Args::parse(&["--dry-run".into()])
        .unwrap_err()
        .contains("--for"));
    assert!(Args::parse(&["--for".into()])
        .unwrap_err()
        .contains("needs a value"));
    assert!(Args::parse(&["--frob".into()])
        .unwrap_err()
        .contains("unknown option"));
}

#[test]
fn help_names_every_option_parse_takes() {
    let help = |a: &[&str]| super::help(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    assert!(help(&["--help"]) && help(&["--for", "/usr/sbin/nginx", "-h"]));
    assert!(!help(&["--for", "/usr/sbin/nginx"]));
    for option in [
        "--for",
        "--nginx-source",
        "--sha256",
        "--signing-keys",
        "--prefix",
        "--dry-run",
    ] {
        assert!(super::USAGE.contains(option), "{option}");
        // Each is one `parse` knows (a value where it takes one).
        let value = if option == "--dry-run" {
            None
        } else {
            Some("v")
        };
        let args: Vec<String> = ["--for", "/x", option]
            .into_iter()
            .chain(value)
            .map(String::from)
            .collect();
        let parsed = Args::parse(&args);
        assert!(
            parsed
                .as_ref()
                .err()
                .is_none_or(|e| !e.contains("unknown option")),
            "{option}: {parsed:?}"
        );
    }
    let err = Args::parse(&["--frob".into()]).unwrap_err();
    assert!(err.contains(super::USAGE), "{err}");
}
