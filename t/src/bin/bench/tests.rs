//! The bench's unit tests: its readers of wrk's and callgrind's output,
//! and its statistics.

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
