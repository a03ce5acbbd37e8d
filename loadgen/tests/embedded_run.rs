//! A tiny benchmark against the embedded server, end to end over loopback
//! TCP: every bot connects, sees others move (timed end to end), hits
//! through the combat flow, and no rule is broken.

mod common;
use common::run;

#[test]
fn a_tiny_embedded_benchmark_has_no_violations() {
    let out = run(&[
        "--bots",
        "20",
        "--duration",
        "3s",
        "--ramp",
        "1s",
        "--shards",
        "2",
        "--scenario",
        "border-patrol",
        "--attack-rate",
        "0.5",
    ]);
    let s = &out.summary;
    assert_eq!(s.violations, 0, "{:?}", s.violation_samples);
    assert_eq!(s.bots_connected, 20, "{:?}", s.counters);
    assert_eq!(
        s.counters.disconnects + s.counters.connect_failures,
        0,
        "{:?}",
        s.counters
    );
    assert!(
        s.counters.updates > 0 && s.updates_per_bot_per_s > 0.0,
        "{:?}",
        s.counters
    );
    assert!(
        s.update_latency_ms.count > 0,
        "updates were timed end to end"
    );
    assert!(s.update_latency_ms.p50 > 0.0 && s.update_latency_ms.p50 < 1_000.0);
    assert!(s.ack_rtt_ms.count > 0, "moves were acknowledged");
    assert!(s.counters.hits > 0, "bots attacked");
    assert_eq!(s.server["source"], "embedded", "{}", s.server);
    assert!(out.failures.is_empty(), "{:?}", out.failures);
    let json = serde_json::to_value(s).expect("serialises");
    assert!(json["update_latency_ms"]["p99"].is_number());
}
