//! The bench's unit tests: its command line, its readers of wrk's and
//! callgrind's output, and its statistics.

use std::time::Duration;

use clap::{CommandFactory, Parser};
use generation_retry_t::actors::backend::Wire;
use generation_retry_t::scenarios::churn;

use crate::args::Args;
use crate::callgrind::inclusive;
use crate::measure::{median, spread, wrk_rps};

#[test]
fn parses_wrk_and_medians() {
    let out = "Running 5s test @ http://127.0.0.1:1/\n  1 threads and 32 connections\n\
               Requests/sec:  12345.67\nTransfer/sec:      1.00MB\n";
    assert_eq!(wrk_rps(out), Some(12345.67));
    assert_eq!(wrk_rps("nothing"), None);
    assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
    assert_eq!(spread(&[3.0, 1.0, 2.0]), (1.0, 3.0));
}

#[test]
fn inclusive_counts_from_callgrind_annotate() {
    let out = "\
5,076,054 (100.0%)  PROGRAM TOTALS
  817,470 (16.10%)  ???:ngx_http_upstream_generation_retry_module::peer::get_peer<x::Http> [/m.so]
      400 ( 0.01%)  ???:ngx_http_upstream_generation_retry_module::peer::get_peer::h0123456789abcdef [/m.so]
    1,000 ( 0.02%)  ???:mod::peer::get_peer_data [/m.so]
   12,345 ( 0.24%)  src/core/ngx_log.c:ngx_log_error_core [/usr/sbin/nginx]
";
    assert_eq!(inclusive(out, "peer::get_peer"), Some(817_870));
    assert_eq!(inclusive(out, "ngx_log_error_core"), Some(12_345));
    assert_eq!(inclusive(out, "peer::decide"), None);
}

fn parse(args: &str) -> Result<Args, clap::Error> {
    Args::try_parse_from(std::iter::once("bench").chain(args.split_whitespace()))
}

#[test]
fn the_defaults_are_the_old_ones() {
    let a = parse("").unwrap();
    assert_eq!(
        (a.rounds(), a.duration, a.rate),
        (5, Duration::from_secs(5), 1000.0)
    );
    assert_eq!(
        (a.connections(), a.races, a.callgrind_requests),
        (32, 10, 2000)
    );
    assert!(a.out.is_none() && a.churn().is_none());
    let a = parse("--churn").unwrap();
    assert_eq!(
        (a.rounds(), &a.upstreams[..], &a.protocols[..]),
        (3, &[40, 1000][..], &[Wire::Http][..])
    );
    let (c, d) = (a.churn().unwrap(), churn::Options::default());
    assert_eq!(
        (c.requests, c.connections, c.workers, c.reclaim),
        (d.requests, d.connections, d.workers, d.reclaim)
    );
    assert_eq!(
        (d.requests, d.connections, d.workers, d.reclaim),
        (200_000, 64, 2, 0.05)
    );
}

#[test]
fn values_as_before() {
    // Numbers below 1 are 1 (but --races and --callgrind-requests); a
    // --connections given is --churn's too; the last of a repeated option wins.
    let a =
        parse("--rounds 0 --duration=0 --rate 0 --connections 0 --races 0 --callgrind-requests 0")
            .unwrap();
    assert_eq!(
        (a.rounds(), a.duration, a.rate, a.connections()),
        (1, Duration::from_secs(1), 1.0, 1)
    );
    assert_eq!((a.races, a.callgrind_requests), (0, 0));
    let c = parse("--churn --workers 0 --requests 0")
        .unwrap()
        .churn()
        .unwrap();
    assert_eq!((c.workers, c.requests), (1, 1));
    let a = parse(
        "--churn --rounds 2 --connections 8 --upstreams 1,0 --upstreams 40,7 --requests 100 \
         --workers 4 --reclaim 1 --protocols http2,proxy --out x",
    )
    .unwrap();
    let c = a.churn().unwrap();
    assert_eq!(
        (a.rounds(), &a.upstreams[..], &a.protocols[..]),
        (2, &[40, 7][..], &[Wire::Http2, Wire::Http][..])
    );
    assert_eq!(
        (c.connections, c.requests, c.workers, c.reclaim),
        (8, 100, 4, 1.0)
    );
    assert_eq!(a.out.as_deref(), Some(std::path::Path::new("x")));
    assert_eq!(parse("--protocols all").unwrap().protocols, Wire::ALL);
    assert_eq!(
        Args::try_parse_from(["bench", "--upstreams", "40, 1000"])
            .unwrap()
            .upstreams,
        [40, 1000]
    );
    let e = parse("--protocols proxy,nope").unwrap_err().to_string();
    assert!(
        e.contains("--protocols") && e.contains("unknown `nope`; expected all or proxy,"),
        "{e}"
    );
    for bad in [
        "--reclaim 1.5",
        "--rounds x",
        "--upstreams 1,x",
        "--rate -1",
        "--workers x",
        "--out",
    ] {
        let e = parse(bad).unwrap_err().to_string();
        assert!(e.contains(bad.split(' ').next().unwrap()), "{bad}: {e}");
    }
    // --help names every protocol.
    let help = Args::command().render_help().to_string();
    assert!(Wire::ALL.iter().all(|w| help.contains(w.name())), "{help}");
}

#[test]
fn the_documented_command_lines_parse() {
    // docs/results.md's and docs/directives.md's runs.
    for line in [
        "--rounds 1 --duration 1 --races 200 --callgrind-requests 10000",
        "--churn --protocols all --upstreams 40 --requests 100000 --rounds 1",
        "--churn --protocols http2,proxy --upstreams 40 --requests 100000 --rounds 1",
    ] {
        parse(line).unwrap();
    }
}

#[test]
fn a_misspelled_option_is_an_error_naming_it() {
    let e = parse("--connection 8").unwrap_err();
    assert_eq!(e.kind(), clap::error::ErrorKind::UnknownArgument);
    assert!(e.to_string().contains("--connection"), "{e}");
}
