//! Counters live in shared memory and survive a reload for upstreams that
//! still exist: the zone is reused and each upstream finds its slot again.

use generation_retry_t::nginx::Flavor;
use generation_retry_t::scenario::{Lab, Spec};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn counters_survive_reload_and_keep_counting() {
    let mut lab = Lab::start_spec(Spec::single_peer(
        Flavor::with_module(),
        "",
        "generation_retry_resnapshot on;",
    ))
    .await;
    let race = lab.race_once(0).await;
    lab.assert_rescued(&race);
    assert_eq!(lab.status("be").await["rescued"], 1);

    for i in 1..=3 {
        lab.reload();
        let race = lab.race_once(i).await;
        lab.assert_rescued(&race);
        let s = lab.status("be").await;
        assert_eq!(s["rescued"], (i + 1) as u64, "after reload {i}: {s}");
        assert_eq!(s["busy"]["retry"], (i + 1) as u64, "after reload {i}: {s}");
    }
    lab.finish();
}
