//! The cost probe runs on a small crowd and its checks fire.

use tessera_bench::cost::{run, run_with, ProbeError};

#[test]
fn a_small_crowd_is_probed_and_sees_itself_move() {
    let p = run(100, 1).expect("a probe of a healthy server");
    assert_eq!(p.clients, 100);
    assert!(p.host_us_per_client_s > 0.0);
    assert!(p.updates_per_client_s >= 1.0, "{p:?}");
}

#[test]
fn a_lone_client_sees_no_one_and_the_probe_says_so() {
    match run(1, 1) {
        Err(ProbeError::NoUpdates(u)) => assert!(u < 1.0),
        other => panic!("one client cannot see anyone move: {other:?}"),
    }
}

#[test]
fn walkers_too_fast_are_refused_and_the_probe_fails() {
    // 20 m a move at 10 moves a second: 200 m/s, far over the speed limit.
    match run_with(50, 1, 20.0) {
        Err(ProbeError::Errors(n)) => assert!(n > 0),
        Err(ProbeError::Unacked { acked, sent }) => assert!(acked * 2 < sent),
        other => panic!("refused walkers measure nothing: {other:?}"),
    }
}
