//! The bot threads' batched loops over loopback TCP: refused connections
//! end as connect failures under both loops (and the run still ends), each
//! loop's bounds at their smallest still serve every bot, and a sampled run
//! (`--check-fraction`) checks the fraction asked, times updates from
//! those bots only and says so.
//!
//! The runs take turns (one lock), as in faults.rs.

use std::sync::Mutex;

mod common;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn run(args: &[&str]) -> loadgen::run::Outcome {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    common::run(args)
}

#[test]
fn refused_connections_are_connect_failures_and_the_run_ends() {
    // A port nobody listens on: bind, learn it, close it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let addr = format!("127.0.0.1:{port}");
    for io in ["io-uring", "epoll"] {
        let out = run(&[
            "--server",
            &addr,
            "--bots",
            "6",
            "--threads",
            "2",
            "--ramp",
            "200ms",
            "--duration",
            "1s",
            "--io",
            io,
        ]);
        let c = &out.summary.counters;
        assert_eq!((c.connects, c.connect_failures), (0, 6), "{io}: {c:?}");
        assert_eq!(
            out.failures,
            vec!["no bot connected (connect)".to_owned()],
            "{io}: {c:?}"
        );
    }
}

#[test]
fn one_event_per_wait_and_tiny_reads_still_serve_every_bot() {
    // One readiness event per wait and 64-byte reads: every round serves
    // one socket, and a batch takes many reads; nothing is lost.
    let out = run(&[
        "--bots",
        "12",
        "--threads",
        "1",
        "--duration",
        "2s",
        "--ramp",
        "500ms",
        "--shards",
        "1",
        "--io",
        "epoll",
        "--events-max",
        "1",
        "--read-bytes",
        "64",
    ]);
    let s = &out.summary;
    assert!(out.failures.is_empty(), "{:?}", out.failures);
    assert_eq!(s.bots_connected, 12);
    assert!(s.update_latency_ms.count > 0 && s.ack_rtt_ms.count > 0);
    assert!(s.per_bot_per_s.moves > 8.0, "{:?}", s.per_bot_per_s);
}

#[test]
fn one_receive_buffer_of_64_bytes_still_serves_every_bot() {
    // The io_uring loop with a single 64-byte receive buffer: a multishot
    // receive fills it and the next finds none, so receives end for want
    // of buffers (ENOBUFS) all the time and are armed again the next
    // round; a batch takes many completions. Nothing is lost: every bot
    // connects, hears its updates and its acks, and moves on time.
    let out = run(&[
        "--bots",
        "12",
        "--threads",
        "1",
        "--duration",
        "2s",
        "--ramp",
        "500ms",
        "--shards",
        "1",
        "--io",
        "io-uring",
        "--uring-buffers",
        "1",
        "--uring-buffer-bytes",
        "64",
    ]);
    let s = &out.summary;
    assert!(out.failures.is_empty(), "{:?}", out.failures);
    assert_eq!(s.bots_connected, 12);
    assert_eq!(s.violations, 0);
    assert!(s.update_latency_ms.count > 0 && s.ack_rtt_ms.count > 0);
    assert!(s.per_bot_per_s.moves > 8.0, "{:?}", s.per_bot_per_s);
    assert_eq!(s.io, loadgen::cli::IoKind::IoUring);
    assert!(
        s.counters.recv_rearms > 0,
        "receives ran out of buffers and were armed again: {:?}",
        s.counters
    );
}

#[test]
fn a_sampled_run_checks_the_fraction_asked_and_says_so() {
    let out = run(&[
        "--bots",
        "20",
        "--threads",
        "1",
        "--duration",
        "3s",
        "--ramp",
        "1s",
        "--shards",
        "1",
        "--check-fraction",
        "0.5",
    ]);
    let s = &out.summary;
    assert!(out.failures.is_empty(), "{:?}", out.failures);
    assert_eq!(
        (s.bots_connected, s.bots_checked),
        (20, 10),
        "{:?}",
        s.counters
    );
    assert_eq!(s.check_fraction, 0.5);
    assert!(s.update_latency_ms.count > 0, "checked bots time updates");
    // Every bot counts its updates, only the checked half can time them.
    assert!(
        s.updates_timed_fraction > 0.2 && s.updates_timed_fraction < 0.8,
        "{}",
        s.updates_timed_fraction
    );
    assert!(s.ack_rtt_ms.count > 0 && s.own_gap_ms.count > 0);
    let table = loadgen::report::summary_table(s);
    assert!(
        table.contains("10 of 20 bots (--check-fraction 0.5)"),
        "{table}"
    );
    // Reported; its value may round to 0 here: 20 bots use less CPU over
    // the steady window than one clock tick (10 ms) now and then (the sum
    // arithmetic is checked by `run::tests::loadgen_cpu_is_per_bot_second`).
    assert!(
        s.loadgen_cpu_us_per_bot_s
            .is_some_and(|us| us.is_finite() && us >= 0.0),
        "{:?}",
        s.loadgen_cpu_us_per_bot_s
    );
}
