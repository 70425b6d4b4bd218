//! The mixed scenario's unit tests: a stream session's log line, and the
//! load's shares.

use super::http::{pick, SHARES};
use super::score::stream_entry;
use super::*;

#[test]
fn a_stream_session_line_is_named_by_its_connection() {
    let e = stream_entry(r#"1796252587.597 41 502 "127.0.0.2:9, srace" 1.002"#).unwrap();
    assert_eq!(e.path, "*41");
    assert_eq!(e.status, 502);
    assert_eq!(
        e.shape(),
        crate::scoring::accesslog::Shape::TwoHop { attempts: 1 }
    );
    assert!(stream_entry("garbage").is_none());
}

#[test]
fn shares_sum_to_one_and_every_upstream_is_drawn() {
    assert!((SHARES.iter().sum::<f64>() - 1.0).abs() < 1e-9);
    let mut rng = Rng::new(1);
    let mut seen = [0usize; 9];
    for _ in 0..10_000 {
        seen[pick(&mut rng)] += 1;
    }
    for (k, n) in seen.iter().enumerate() {
        let want = SHARES[k] * 10_000.0;
        assert!(
            (*n as f64 - want).abs() < want * 0.2,
            "{}: {n}",
            UPSTREAMS[k]
        );
    }
}
