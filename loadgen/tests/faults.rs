//! A broken server fails loadgen: each `testing.fault` injected on the
//! embedded server's real data path makes a tiny run over loopback TCP
//! fail, naming what broke; the same run without a fault passes.
//!
//! The runs take turns (one lock): five embedded servers and their bots at
//! once on a 2-core machine would measure the machine, not the server.

use std::sync::Mutex;

mod common;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// A tiny run (30 bots, 1 s ramp, 3 s of moves) with `fault`; its failures.
fn failures(fault: &str, extra: &[&str]) -> Vec<String> {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let set = format!("testing.fault=\"{fault}\"");
    let mut all = vec![
        "--shards",
        "2",
        "--bots",
        "30",
        "--ramp",
        "1s",
        "--duration",
        "3s",
        "--set",
        &set,
    ];
    all.extend_from_slice(extra);
    let out = common::run(&all);
    println!("{fault}: {:?}", out.failures);
    out.failures
}

fn assert_names(failures: &[String], any_of: &[&str]) {
    assert!(
        failures
            .iter()
            .any(|f| any_of.iter().any(|name| f.contains(name))),
        "expected a failure naming one of {any_of:?}: {failures:?}"
    );
}

#[test]
fn without_a_fault_the_run_passes() {
    let f = failures("none", &[]);
    assert!(f.is_empty(), "{f:?}");
}

#[test]
fn dropped_leaves_fail_as_an_entity_shown_twice() {
    // Teleports make every view lose and gain entities often.
    let f = failures(
        "drop-leave",
        &["--scenario", "teleport", "--teleport-rate", "1"],
    );
    assert_names(&f, &["DoubleEnter", "EntityTwice"]);
}

#[test]
fn stale_versions_fail_as_stale_or_a_gap() {
    let f = failures("stale-version", &[]);
    assert_names(&f, &["Stale", "VersionGap"]);
}

#[test]
fn silence_fails_as_no_updates() {
    let f = failures("silence", &[]);
    assert_names(&f, &["no updates received", "(silence)"]);
}

#[test]
fn dropped_acks_fail_as_unacknowledged_moves() {
    let f = failures("drop-ack", &[]);
    assert_names(&f, &["moves acknowledged", "(acks)"]);
}
