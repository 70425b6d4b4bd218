use super::*;

/// Stats whose every counter has its own value (`1 + discriminant`).
fn stats(name: &str) -> UpstreamStats {
    UpstreamStats {
        name: name.into(),
        protocol: Protocol::Http,
        rescue: true,
        counters: core::array::from_fn(|i| i as u64 + 1),
        generation: 6,
        peers: 1,
    }
}

#[test]
fn the_table_is_consistent() {
    for (i, c) in Counter::ALL.iter().enumerate() {
        assert_eq!(*c as usize, i, "Counter::ALL is in discriminant order");
        let n = FAMILIES
            .iter()
            .flat_map(|f| f.series)
            .filter(|s| s.value == Value::Counter(*c))
            .count();
        assert_eq!(n, 1, "{c:?} has exactly one series");
        assert_eq!(c.series().0.kind, Kind::Counter);
    }
    for f in FAMILIES {
        assert!(f.name.starts_with(PREFIX), "{}", f.name);
        assert_eq!(f.kind == Kind::Counter, f.name.ends_with("_total"));
        assert!(!f.series.is_empty());
        for s in f.series {
            assert_eq!(f.label.is_some(), s.label_value.is_some(), "{}", f.name);
        }
        assert!(f.label.is_some() || f.series.len() == 1, "{}", f.name);
    }
    for cause in NoLiveCause::ALL {
        assert_eq!(cause.counter().series().0.label, Some("cause"));
    }
}

/// The public names (docs/metrics.md): a rename is a breaking change for
/// every dashboard and alert, so it must show here.
#[test]
fn the_public_names_are_pinned() {
    let names: Vec<&str> = FAMILIES.iter().map(|f| f.name).collect();
    assert_eq!(
        names,
        [
            "nginx_generation_retry_busy_total",
            "nginx_generation_retry_resnapshots_total",
            "nginx_generation_retry_excluded_total",
            "nginx_generation_retry_retried_total",
            "nginx_generation_retry_rescued_total",
            "nginx_generation_retry_failed_total",
            "nginx_generation_retry_no_live_total",
            "nginx_generation_retry_generation",
            "nginx_generation_retry_peers",
            "nginx_generation_retry_mode",
        ]
    );
    let paths: Vec<String> = Counter::ALL
        .iter()
        .map(|c| c.json_path().join("."))
        .collect();
    assert_eq!(
        paths,
        [
            "busy.first",
            "busy.retry",
            "resnapshots",
            "excluded",
            "retried",
            "rescued",
            "failed",
            "no_live.generation",
            "no_live.unavailable",
            "no_live.empty",
        ]
    );
    assert_eq!(Value::Peers.metric(), "nginx_generation_retry_peers");
    assert_eq!(
        Value::Generation.metric(),
        "nginx_generation_retry_generation"
    );
}

#[test]
fn every_counter_appears_in_both_formats_with_its_value() {
    let s = stats("be");
    let text = render_prometheus(core::slice::from_ref(&s));
    let json: serde_json::Value =
        serde_json::from_str(&render_json(core::slice::from_ref(&s))).unwrap();
    let up = &json["upstreams"][0];
    for &c in Counter::ALL {
        let (f, series) = c.series();
        let label = match (f.label, series.label_value) {
            (Some(l), Some(v)) => format!(",{l}=\"{v}\""),
            _ => String::new(),
        };
        let line = format!(
            "{}{{upstream=\"be\",protocol=\"http\"{label}}} {}\n",
            c.metric(),
            s.get(c)
        );
        assert!(text.contains(&line), "{c:?}: {line} in\n{text}");
        let v = c.json_path().iter().fold(up, |v, k| &v[*k]);
        assert_eq!(v.as_u64(), Some(s.get(c)), "{c:?} at {:?}", c.json_path());
    }
    assert_eq!(up["generation"], 6);
    assert_eq!(up["peers"], 1);
    // The mode: a state set in Prometheus text, a string in JSON.
    assert!(
        text.contains(
            "nginx_generation_retry_mode{upstream=\"be\",protocol=\"http\",mode=\"on\"} 1\n"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "nginx_generation_retry_mode{upstream=\"be\",protocol=\"http\",mode=\"off\"} 0\n"
        ),
        "{text}"
    );
    assert_eq!(up["mode"], "on");
    let off = UpstreamStats {
        rescue: false,
        ..stats("be")
    };
    let text = render_prometheus(core::slice::from_ref(&off));
    assert!(
        text.contains("mode=\"on\"} 0\n") && text.contains("mode=\"off\"} 1\n"),
        "{text}"
    );
}

#[test]
fn prometheus_has_one_help_and_type_per_metric_and_well_formed_samples() {
    let other = UpstreamStats {
        protocol: Protocol::Stream,
        ..stats("other")
    };
    let text = render_prometheus(&[stats("be"), other]);
    assert!(text.ends_with('\n'));
    for f in FAMILIES {
        assert_eq!(text.matches(&format!("# HELP {} ", f.name)).count(), 1);
        assert_eq!(
            text.matches(&format!("# TYPE {} {}\n", f.name, f.kind.label()))
                .count(),
            1
        );
    }
    assert!(text.contains(
        "nginx_generation_retry_busy_total{upstream=\"be\",protocol=\"http\",phase=\"retry\"} 2\n"
    ));
    assert!(text.contains(
        "nginx_generation_retry_no_live_total{upstream=\"be\",protocol=\"http\",cause=\"empty\"} 10\n"
    ));
    assert!(text
        .contains("nginx_generation_retry_generation{upstream=\"other\",protocol=\"stream\"} 6\n"));
    assert!(
        text.contains("nginx_generation_retry_peers{upstream=\"other\",protocol=\"stream\"} 1\n")
    );
    // Every sample line is `name{labels} value`.
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (series, value) = line.rsplit_once(' ').unwrap();
        assert!(series.ends_with('}'), "{line}");
        value.parse::<u64>().unwrap();
    }
}

#[test]
fn label_values_are_escaped() {
    assert_eq!(escape_label("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
    let text = render_prometheus(&[stats("we\"ird")]);
    assert!(text.contains("{upstream=\"we\\\"ird\",protocol=\"http\"}"));
}

#[test]
fn json_escapes_every_control_character() {
    for c in (0u32..0x20).filter_map(char::from_u32) {
        let escaped = escape_json(&c.to_string());
        assert!(
            !escaped.chars().any(|e| (e as u32) < 0x20),
            "{c:?} left raw: {escaped:?}"
        );
        assert!(escaped.starts_with('\\'), "{c:?}: {escaped:?}");
    }
    assert_eq!(escape_json("\u{1b}"), "\\u001b");
}

#[test]
fn empty_stats_still_declare_the_metrics() {
    let text = render_prometheus(&[]);
    assert_eq!(text.lines().count(), FAMILIES.len() * 2);
    assert_eq!(render_json(&[]), "{\"upstreams\":[]}\n");
}

#[test]
fn json_shape_is_the_public_one() {
    let json = render_json(&[stats("be")]);
    assert_eq!(
        json,
        "{\"upstreams\":[{\"upstream\":\"be\",\"protocol\":\"http\",\"mode\":\"on\",\"busy\":{\"first\":1,\"retry\":2},\
         \"resnapshots\":3,\"excluded\":4,\"retried\":5,\"rescued\":6,\"failed\":7,\
         \"no_live\":{\"generation\":8,\"unavailable\":9,\"empty\":10},\
         \"generation\":6,\"peers\":1}]}\n"
    );
    assert_eq!(escape_json("a\"\\\n\u{1}"), "a\\\"\\\\\\n\\u0001");
    let odd = render_json(&[stats("q\"\\\n\u{e9}")]);
    let v: serde_json::Value = serde_json::from_str(&odd).unwrap();
    assert_eq!(v["upstreams"][0]["upstream"], "q\"\\\n\u{e9}");
}

#[test]
fn causes() {
    assert_eq!(NoLiveCause::of_list(0, 0), NoLiveCause::Empty);
    assert_eq!(NoLiveCause::of_list(0, 1), NoLiveCause::Unavailable);
    assert_eq!(NoLiveCause::of_list(2, 0), NoLiveCause::Unavailable);
    assert_eq!(NoLiveCause::Empty.counter(), Counter::NoLiveEmpty);
    let labels: Vec<_> = NoLiveCause::ALL.iter().map(|c| c.label()).collect();
    assert_eq!(labels, ["generation", "unavailable", "empty"]);
    assert_eq!(Counter::BusyRetry.json_path(), ["busy", "retry"]);
    assert_eq!(Counter::Rescued.json_path(), ["rescued"]);
    assert_eq!(
        Counter::Rescued.metric(),
        "nginx_generation_retry_rescued_total"
    );
}

#[test]
fn decimal_digits() {
    let mut b = [0u8; 10];
    assert_eq!(decimal(0, &mut b), b"0");
    assert_eq!(decimal(7, &mut b), b"7");
    assert_eq!(decimal(1656, &mut b), b"1656");
    assert_eq!(decimal(u32::MAX, &mut b), b"4294967295");
}

#[test]
fn format_argument() {
    assert!(wants_json(b"format=json"));
    assert!(wants_json(b"a=1&format=json"));
    assert!(!wants_json(b""));
    assert!(!wants_json(b"format=jsonx"));
    assert!(!wants_json(b"xformat=json"));
    assert!(!wants_json(b"format=JSON&%%%&&="));
}
