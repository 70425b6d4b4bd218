//! The module loads into nginx and `nginx -t` judges its directive.

use generation_retry_t::nginx::{test_config, test_config_under, Config, Flavor};

fn conf(http: &str) -> Config {
    Config::new(Flavor::with_module(), http)
}

const SERVER: &str = "server { listen 127.0.0.1:${PORT}; location / { proxy_pass http://be; } }";

/// A configuration whose `stream {}` block starts with `snippet`, then an
/// upstream with a zone and a server proxying to it.
fn stream_conf(flavor: Flavor, snippet: &str) -> Config {
    Config::new(flavor, "").stream(format!(
        "{snippet}\nupstream sbe {{ zone sbe 64k; server 127.0.0.2:1; }}\n\
         server {{ listen 127.0.0.1:${{PORT}}; proxy_pass sbe; }}"
    ))
}

/// Each snippet at http level fails `nginx -t` with an `[emerg]` naming
/// `directive`, containing `expect`, with the file:line.
fn assert_rejected(directive: &str, cases: &[(&str, &str)]) {
    assert_rejected_in(
        |snippet| {
            conf(&format!(
                "{snippet}\nupstream be {{ zone be 64k; server 127.0.0.2:1; }}\n{SERVER}"
            ))
        },
        directive,
        cases,
    );
}

/// As [`assert_rejected`], with the configuration `build` makes of each
/// snippet.
fn assert_rejected_in(build: impl Fn(&str) -> Config, directive: &str, cases: &[(&str, &str)]) {
    for (snippet, expect) in cases {
        let t = test_config(&build(snippet));
        assert!(!t.ok, "{snippet}: accepted\n{}", t.stderr);
        assert!(t.stderr.contains("[emerg]"), "{snippet}: {}", t.stderr);
        assert!(
            t.stderr.contains(&format!("\"{directive}\"")),
            "{snippet}: {}",
            t.stderr
        );
        assert!(
            t.stderr.contains(expect),
            "{snippet}: want {expect}: {}",
            t.stderr
        );
        assert!(
            t.stderr.contains("nginx.conf:"),
            "{snippet}: no file:line: {}",
            t.stderr
        );
    }
}

/// Non-regression guard: configuration checks at `nginx -t`, before any peer
/// selection.
#[test]
fn module_loads_and_directive_passes_nginx_t() {
    let t = test_config(&conf(&format!(
        "generation_retry_resnapshot on;\n\
         upstream be {{ zone be 64k; server 127.0.0.2:1; }}\n\
         upstream be2 {{ zone be2 64k; server 127.0.0.2:1; generation_retry_resnapshot off; }}\n\
         upstream be3 {{ zone be3 64k; server 127.0.0.2:1; generation_retry_resnapshot on max=4; }}\n\
         {SERVER}"
    )));
    assert!(t.ok, "{}", t.stderr);
    assert!(t.stderr.contains("test is successful"), "{}", t.stderr);
    assert!(!t.stderr.contains("[warn]"), "{}", t.stderr);
}

/// Non-regression guard: stock nginx, without the module.
#[test]
fn stock_nginx_does_not_know_the_directive() {
    // The control for the test above: without load_module the directive is
    // unknown, so it is our module that accepted it.
    let http = Config::new(
        Flavor::stock(),
        format!("generation_retry_resnapshot on;\nupstream be {{ server 127.0.0.2:1; }}\n{SERVER}"),
    );
    let stream = stream_conf(Flavor::stock(), "generation_retry_resnapshot on;");
    for config in [http, stream] {
        let t = test_config(&config);
        assert!(!t.ok);
        assert!(
            t.stderr
                .contains("unknown directive \"generation_retry_resnapshot\""),
            "{}",
            t.stderr
        );
    }
}

/// Non-regression guard: configuration checks at `nginx -t`, before any peer
/// selection.
#[test]
fn upstream_without_zone_warns_naming_it() {
    let nozone = "upstream nozone { server 127.0.0.2:1; generation_retry_resnapshot on; }";
    let http = conf(&format!(
        "{nozone}\nupstream be {{ server 127.0.0.2:1; }}\n{SERVER}"
    ));
    let stream = stream_conf(Flavor::with_module(), nozone);
    for (config, what) in [(http, "in upstream"), (stream, "in stream upstream")] {
        let t = test_config(&config);
        assert!(t.ok, "{}", t.stderr);
        assert!(
            t.stderr.contains("[warn]")
                && t.stderr.contains("\"generation_retry_resnapshot\"")
                && t.stderr
                    .contains(&format!("{what} \"nozone\" without \"zone\"")),
            "{}",
            t.stderr
        );
    }
}

/// Argument misuse, the same in every context the directive is allowed in.
const ARGUMENT_MISUSE: &[(&str, &str)] = &[
    ("generation_retry_resnapshot yes;", "invalid value \"yes\""),
    (
        "generation_retry_resnapshot;",
        "invalid number of arguments",
    ),
    (
        "generation_retry_resnapshot on max=0;",
        "invalid value \"max=0\"",
    ),
    (
        "generation_retry_resnapshot on max=17;",
        "invalid value \"max=17\"",
    ),
    (
        "generation_retry_resnapshot on max=x;",
        "invalid value \"max=x\"",
    ),
    (
        "generation_retry_resnapshot on limit=2;",
        "invalid parameter \"limit=2\"",
    ),
    (
        "generation_retry_resnapshot on max=2 extra;",
        "invalid number of arguments",
    ),
    (
        "generation_retry_resnapshot on;\ngeneration_retry_resnapshot off;",
        "is duplicate",
    ),
    (
        "generation_retry_resnapshot on max=99999999999999999999;",
        "invalid value",
    ),
    ("generation_retry_resnapshot \"\";", "invalid value \"\""),
    (
        "generation_retry_resnapshot off max=1 max=2;",
        "invalid number of arguments",
    ),
    ("generation_retry_resnapshot 1;", "invalid value \"1\""),
];

/// Non-regression guard: configuration checks at `nginx -t`, before any peer
/// selection.
#[test]
fn misuse_is_rejected_naming_the_directive_and_line() {
    assert_rejected("generation_retry_resnapshot", ARGUMENT_MISUSE);
    let contexts: &[(&str, &str)] = &[
        (
            "server { listen 127.0.0.1:1; generation_retry_resnapshot on; }",
            "is not allowed here",
        ),
        (
            "server { listen 127.0.0.1:1; location / { generation_retry_resnapshot on; } }",
            "is not allowed here",
        ),
    ];
    assert_rejected("generation_retry_resnapshot", contexts);
}

/// Non-regression guard: configuration checks at `nginx -t`, before any peer
/// selection.
#[test]
fn status_directive_misuse_is_rejected() {
    let cases: &[(&str, &str)] = &[
        ("generation_retry_status;", "is not allowed here"),
        (
            "server { listen 127.0.0.1:1; generation_retry_status; }",
            "is not allowed here",
        ),
        (
            "server { listen 127.0.0.1:1; location /s { generation_retry_status on; } }",
            "invalid number of arguments",
        ),
        (
            "server { listen 127.0.0.1:1; location /s { generation_retry_status; generation_retry_status; } }",
            "is duplicate",
        ),
        (
            "upstream u { zone u 64k; server 127.0.0.2:1; generation_retry_status; }",
            "is not allowed here",
        ),
        // Another content handler in the same location, in either order:
        // nginx would let the last one answer without a word.
        (
            "server { listen 127.0.0.1:1; location /s { proxy_pass http://be; generation_retry_status; } }",
            "and another content handler (such as \"proxy_pass\") in location \"/s\"",
        ),
        (
            "server { listen 127.0.0.1:1; location /s { generation_retry_status; proxy_pass http://be; } }",
            "and another content handler (such as \"proxy_pass\") in location \"/s\"",
        ),
    ];
    assert_rejected("generation_retry_status", cases);
}

/// `nginx -t` passes with a `[warn]` naming `directive`, containing
/// `expect`, with the file:line.
fn assert_warned(config: &Config, directive: &str, expect: &str) {
    let t = test_config(config);
    assert!(t.ok, "{expect}: refused\n{}", t.stderr);
    let warn = t
        .stderr
        .lines()
        .find(|l| l.contains("[warn]") && l.contains(expect))
        .unwrap_or_else(|| panic!("no [warn] with {expect}:\n{}", t.stderr));
    assert!(warn.contains(&format!("\"{directive}\"")), "{warn}");
    assert!(warn.contains("nginx.conf:"), "no file:line: {warn}");
}

/// Accepted but meaningless, said out loud in http and stream: `max=` with
/// `off` (in an upstream and at the top level), and the directive at the
/// top level where no upstream takes it (none has a `zone`, or every one
/// with a `zone` has its own setting).
///
/// Non-regression guard: configuration checks at `nginx -t`, before any peer
/// selection.
#[test]
fn meaningless_settings_warn_naming_the_directive() {
    const D: &str = "generation_retry_resnapshot";
    let max_off = "\"max=4\" has no effect with \"off\"";
    let unused = |level: &str| format!("has no effect at {level} level");
    let http = |top: &str, upstream: &str| {
        conf(&format!(
            "{top}\nupstream be {{ {upstream} server 127.0.0.2:1; }}\n{SERVER}"
        ))
    };
    let stream = |top: &str, upstream: &str| {
        Config::new(Flavor::with_module(), "").stream(format!(
            "{top}\nupstream sbe {{ {upstream} server 127.0.0.2:1; }}\n\
             server {{ listen 127.0.0.1:${{PORT}}; proxy_pass sbe; }}"
        ))
    };
    for (build, level) in [
        (&http as &dyn Fn(&str, &str) -> Config, "http"),
        (&stream, "stream"),
    ] {
        let zone = if level == "http" {
            "zone be 64k;"
        } else {
            "zone sbe 64k;"
        };
        let own_off = format!("{zone} {D} off max=4;");
        assert_warned(&build("", &own_off), D, max_off);
        assert_warned(&build(&format!("{D} off max=4;"), zone), D, max_off);
        assert_warned(&build(&format!("{D} on;"), ""), D, &unused(level));
        assert_warned(
            &build(&format!("{D} on;"), &format!("{zone} {D} off;")),
            D,
            &unused(level),
        );
        // The controls: the top level reaches an upstream; `off` alone.
        for config in [
            build(&format!("{D} on;"), zone),
            build(&format!("{D} off;"), zone),
        ] {
            let t = test_config(&config);
            assert!(t.ok && !t.stderr.contains("[warn]"), "{}", t.stderr);
        }
    }
}

/// Non-regression guard: configuration checks at `nginx -t`, before any peer
/// selection.
#[test]
fn stream_directive_passes_nginx_t_at_stream_and_upstream_level() {
    let t = test_config(&stream_conf(
        Flavor::with_module(),
        "generation_retry_resnapshot on max=3;\n\
         upstream other { zone other 64k; server 127.0.0.2:2; generation_retry_resnapshot off; }",
    ));
    assert!(t.ok, "{}", t.stderr);
    assert!(!t.stderr.contains("[warn]"), "{}", t.stderr);
}

/// Non-regression guard: configuration checks at `nginx -t`, before any peer
/// selection.
#[test]
fn stream_misuse_is_rejected_naming_the_directive_and_line() {
    let stream = |snippet: &str| stream_conf(Flavor::with_module(), snippet);
    assert_rejected_in(stream, "generation_retry_resnapshot", ARGUMENT_MISUSE);
    let contexts: &[(&str, &str)] = &[
        (
            "upstream u { zone u 64k; server 127.0.0.2:1; \
             generation_retry_resnapshot on; generation_retry_resnapshot on; }",
            "is duplicate",
        ),
        (
            "server { listen 127.0.0.1:1; proxy_pass sbe; generation_retry_resnapshot on; }",
            "is not allowed here",
        ),
    ];
    assert_rejected_in(stream, "generation_retry_resnapshot", contexts);
    // The status endpoint is http's: in stream it is misplaced.
    assert_rejected_in(
        stream,
        "generation_retry_status",
        &[("generation_retry_status;", "is not allowed here")],
    );
}

/// `nginx_version` of a version string: 1.30.4 is 1030004.
fn version_number(version: &str) -> Option<u64> {
    let parts: Vec<u64> = version
        .split('.')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    match parts.as_slice() {
        [a, b, c] => Some(a * 1_000_000 + b * 1_000 + c),
        _ => None,
    }
}

/// The module of another nginx version (any other version `cargo xtask
/// build` left beside this one) is refused with nginx's own words, naming
/// both versions, as the README's "What nginx says when the module does not
/// fit" explains. CI runs it on every version after 1.28.0's was built.
///
/// Non-regression guard: nginx refuses a mismatched build before any of the
/// module runs.
#[test]
fn a_module_built_for_another_version_is_refused_naming_both_versions() {
    let stock = Flavor::stock();
    let out = std::process::Command::new(&stock.binary)
        .arg("-v")
        .output()
        .expect("nginx -v");
    let said = String::from_utf8_lossy(&out.stderr);
    let this = said
        .split("nginx/")
        .nth(1)
        .and_then(|v| version_number(v.split_whitespace().next()?))
        .unwrap_or_else(|| panic!("nginx -v: {said}"));
    let here = generation_retry_t::nginx::install_dir();
    let others: Vec<(std::path::PathBuf, u64)> = here
        .parent()
        .and_then(|p| std::fs::read_dir(p).ok())
        .into_iter()
        .flatten()
        .filter_map(|e| {
            let dir = e.ok()?.path();
            let n = version_number(dir.file_name()?.to_str()?)?;
            let so = dir.join("modules/ngx_http_upstream_generation_retry_module.so");
            (n != this && so.is_file()).then_some((so, n))
        })
        .collect();
    if others.is_empty() {
        // `cargo xtask nginx-test --nginx all` (CI) sets this once the
        // default version's module is built beside the matrix's: there the
        // check must run.
        assert!(
            std::env::var_os("GENERATION_RETRY_OTHER_MODULES_BUILT").is_none(),
            "no module of another nginx version beside {}, though the run built one",
            here.display()
        );
        println!("no module of another nginx version is built beside this one: nothing to load");
        return;
    }
    for (so, other) in others {
        let flavor = Flavor {
            module: Some(so.clone()),
            name: "other-version",
            ..stock.clone()
        };
        let t = test_config(&Config::new(flavor, ""));
        assert!(
            !t.ok,
            "{} loaded into nginx {this}:\n{}",
            so.display(),
            t.stderr
        );
        let want = format!("version {other} instead of {this}");
        assert!(
            t.stderr.contains("[emerg]") && t.stderr.contains(&want),
            "want `{want}`:\n{}",
            t.stderr
        );
    }
}

/// When the module's shared header does not fit in its zone, `nginx -t`
/// fails with the module's `[emerg]` naming the zone, its size and the page
/// size, not nginx's bare `ngx_slab_alloc() failed`. The zone is sized to
/// fit (`generation_retry_core::zone`, whose unit tests cover 4, 16 and
/// 64 KiB pages), so the shortage is forced: gdb makes the module's first
/// slab allocation (its header, larger than any slot or anything else in
/// this configuration) return NULL, as a zone too small for it would.
///
/// Non-regression guard: the counters zone is set up whether or not any peer
/// selection is wrapped; this checks its sizing and message.
#[test]
fn counters_that_do_not_fit_fail_nginx_t_naming_the_zone() {
    let config = conf(&format!(
        "upstream be {{ zone be 64k; server 127.0.0.2:1; \
         generation_retry_resnapshot on; }}\n{SERVER}"
    ));
    let t = test_config_under(
        &config,
        &[
            "gdb",
            "-q",
            "-batch",
            "-ex",
            "break ngx_slab_calloc if size > 10000",
            "-ex",
            "run",
            "-ex",
            "return (void *) 0",
            "-ex",
            "continue",
            "--args",
        ],
    );
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
    let head = "[emerg] generation_retry: shared zone \"generation_retry\" of ";
    let (size, header) = t
        .stderr
        .split_once(head)
        .and_then(|(_, rest)| rest.split_once(" bytes cannot hold the counters ("))
        .and_then(|(size, rest)| {
            let (header, rest) = rest.split_once(" bytes on ")?;
            rest.starts_with(&format!("{page}-byte pages)"))
                .then_some((size.parse::<usize>().ok()?, header.parse::<usize>().ok()?))
        })
        .unwrap_or_else(|| panic!("expected `{head}SIZE bytes cannot hold the counters (N bytes on {page}-byte pages)`:\n{}", t.stderr));
    assert_eq!(size % page, 0, "{size}");
    assert!(header > 10_000 && header < size, "{header} of {size}");
    assert!(t.stderr.contains("test failed"), "{}", t.stderr);
    assert!(!t.stderr.contains("[alert]"), "{}", t.stderr);
}
