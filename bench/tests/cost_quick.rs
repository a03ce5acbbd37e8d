//! The cost probe runs on a small crowd and its checks fire.

use tessera_bench::cost::{parse_args, run, run_workload, ProbeError, Workload};

#[test]
fn a_small_crowd_is_probed_and_sees_itself_move() {
    let p = run(100, 1).expect("a probe of a healthy server");
    assert_eq!(p.clients, 100);
    assert!(p.host_us_per_client_s > 0.0);
    assert!(p.updates_per_client_s >= 1.0, "{p:?}");
    assert!((9.5..=10.5).contains(&p.moves_per_client_s), "{p:?}");
}

#[test]
fn an_idle_crowd_sends_half_the_moves_and_still_sees_the_walkers() {
    let idle = Workload {
        idle: 0.5,
        ..Workload::default()
    };
    let p = run_workload(200, 1, &idle).expect("an idle crowd is probed");
    assert_eq!(p.idle, 0.5);
    // Walkers send 10 moves a second; half the crowd sends none.
    assert!((4.5..=5.5).contains(&p.moves_per_client_s), "{p:?}");
    assert!(p.updates_per_client_s > 1.0, "{p:?}");
    assert!(p.host_us_per_client_s > 0.0);
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
    // 200 m/s (20 m a move), far over the speed limit.
    let fast = Workload {
        speed_mps: 200.0,
        ..Workload::default()
    };
    match run_workload(50, 1, &fast) {
        Err(ProbeError::Errors(n)) => assert!(n > 0),
        Err(ProbeError::Unacked { acked, sent }) => assert!(acked * 2 < sent),
        other => panic!("refused walkers measure nothing: {other:?}"),
    }
}

fn args(s: &str) -> Vec<String> {
    s.split_whitespace().map(str::to_owned).collect()
}

#[test]
fn the_probe_s_counts_and_knobs_parse_and_bad_ones_are_named() {
    let a = parse_args(args(
        "--bench 500 2 --speed 1.5 --in-view 30 --idle 0.25 --set server.initial_cells=1",
    ))
    .expect("valid");
    assert_eq!((a.clients, a.seconds, a.runs), (500, 2, 3));
    assert_eq!((a.work.in_view, a.work.speed_mps), (30.0, 1.5));
    assert_eq!(a.work.idle, 0.25);
    assert_eq!(a.work.sets, ["server.initial_cells=1"]);
    let d = parse_args(args("")).expect("defaults");
    assert_eq!((d.clients, d.seconds, d.runs), (2000, 10, 3));
    assert_eq!(d.work, Workload::default());
    for (bad, says) in [
        ("--speed 0", "--speed"),
        ("--in-view x", "--in-view"),
        ("--idle 1", "not a share"),
        ("--idle -0.1", "not a share"),
        ("--set", "needs a value"),
        ("--fast", "unknown option"),
        ("12 x", "argument 2"),
        ("1 2 3 4", "at most three"),
    ] {
        let e = parse_args(args(bad)).expect_err(bad).to_string();
        assert!(e.contains(says), "{bad}: {e}");
    }
}

#[test]
fn help_is_asked_for_by_name_and_names_every_option() {
    use tessera_bench::cost::{wants_help, USAGE};
    assert!(wants_help(&["500", "--help"]));
    assert!(wants_help(&["-h"]));
    assert!(!wants_help(&["500", "2", "--in-view", "30"]));
    for option in ["--in-view", "--speed", "--idle", "--set"] {
        assert!(USAGE.contains(option), "{option} missing from the usage");
        // Every option the usage names is one the parser takes.
        let e = parse_args(args(option)).expect_err(option).to_string();
        assert!(e.contains("needs a value"), "{option}: {e}");
    }
}

#[test]
fn a_workload_reaches_the_server_s_config_and_a_bad_set_is_refused() {
    let one = Workload {
        sets: vec!["server.initial_cells=1".to_owned()],
        ..Workload::default()
    };
    let c = tessera_bench::cost::config_for(100, &one).expect("valid");
    assert_eq!(c.server.initial_cells, 1);
    let sparse = Workload {
        in_view: 15.0,
        ..Workload::default()
    };
    let (d, s) = (
        tessera_bench::cost::config(2000).expect("default"),
        tessera_bench::cost::config_for(2000, &sparse).expect("sparse"),
    );
    // A quarter of the density: twice the side.
    assert!(
        s.world.max_x_m > 1.9 * d.world.max_x_m,
        "{} vs {}",
        s.world.max_x_m,
        d.world.max_x_m
    );
    let bad = Workload {
        sets: vec!["server.no_such_key=1".to_owned()],
        ..Workload::default()
    };
    match run_workload(10, 1, &bad) {
        Err(ProbeError::Config(e)) => assert!(e.contains("no_such_key"), "{e}"),
        other => panic!("a bad key must be refused: {other:?}"),
    }
    // A valid config the world cannot hold (four cells in a world two
    // minimum cells wide): the hosts refuse it, the probe says so.
    let crowded = Workload {
        sets: vec!["server.initial_cells=4".to_owned()],
        ..Workload::default()
    };
    match run_workload(100, 1, &crowded) {
        Err(ProbeError::Config(e)) => assert!(e.contains("size rule"), "{e}"),
        other => panic!("a layout the world cannot hold must be refused: {other:?}"),
    }
}
