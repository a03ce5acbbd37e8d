//! The live viewer's API on a real server (2 shards, wandering NPCs,
//! loopback): `/api/space` gives the cells with shard and load,
//! `/api/entities?cell=` their entities (sampled above
//! `admin.viewer_entities_max`), `/api/events` streams events, bad queries
//! get a 4xx naming the problem, `/metrics` answers while streams are open,
//! and one stream more than `admin.viewer_streams_max` is refused.

mod viewer_support;

use serde_json::Value;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};
use viewer_support::{config, get, get_json, start};

/// Waits until every shard has published (cells from both shards).
fn space_when_published(addr: SocketAddr) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let space = get_json(addr, "/api/space");
        let published = space["shards"]
            .as_array()
            .is_some_and(|s| s.iter().all(|s| s["published"].as_u64() > Some(0)));
        if published || Instant::now() > deadline {
            return space;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Opens `/api/events` and reads until `want` is seen (or `within` passes);
/// returns everything read.
fn open_stream(addr: SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).expect("connect");
    write!(s, "GET /api/events HTTP/1.1\r\nHost: t\r\n\r\n").expect("send");
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    s
}

fn read_until(s: &mut TcpStream, want: &str, within: Duration) -> String {
    let deadline = Instant::now() + within;
    let mut text = String::new();
    let mut buf = [0u8; 4096];
    while !text.contains(want) && Instant::now() < deadline {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => text.push_str(&String::from_utf8_lossy(&buf[..n])),
            Err(_) => {} // a read timeout: try again until the deadline
        }
    }
    text
}

#[test]
fn the_viewer_api_serves_cells_entities_and_events() {
    let c = config(40, &["admin.viewer_streams_max=2"]);
    let (handle, addr) = start(&c);
    let space = space_when_published(addr);
    check_space(&space);
    let cells = space["cells"].as_array().expect("cells");
    check_entities(addr, cells);
    check_bad_requests(addr);
    let stream = check_events(addr);
    check_stream_bound(addr);
    drop(stream);
    handle.shutdown();
    handle.join().expect("clean join");
}

/// Cells with shard and load, on both shards; the space; shard figures.
fn check_space(space: &Value) {
    let cells = space["cells"].as_array().expect("cells");
    assert_eq!(cells.len(), 4, "{space}");
    let mut shards: Vec<u64> = cells.iter().filter_map(|c| c["shard"].as_u64()).collect();
    shards.sort_unstable();
    shards.dedup();
    assert_eq!(shards, vec![0, 1], "cells on both shards: {space}");
    for cell in cells {
        for key in ["id", "rect", "shard", "node", "load", "reals", "ghosts"] {
            assert!(!cell[key].is_null(), "cell without {key}: {cell}");
        }
        assert_eq!(cell["rect"].as_array().map(Vec::len), Some(4));
        assert!(cell["load"].as_f64().is_some_and(|l| l >= 0.0), "{cell}");
    }
    let reals: u64 = cells.iter().filter_map(|c| c["reals"].as_u64()).sum();
    assert!(
        (30..=40).contains(&reals),
        "40 NPCs, {reals} reals: {space}"
    );
    assert_eq!(space["spaces"].as_array().map(Vec::len), Some(1), "{space}");
    assert_eq!(space["tick_budget_us"], 20_000);
    let p99 = &space["shards"][0]["tick_p99_us"];
    assert!(p99.is_u64(), "{space}");
}

/// The busiest cell's entities: reals, ghosts, and where a real's ghosts are.
fn check_entities(addr: SocketAddr, cells: &[Value]) {
    let busiest = cells
        .iter()
        .max_by_key(|c| c["reals"].as_u64())
        .expect("a cell");
    let id = busiest["id"].as_u64().expect("id");
    let ents = get_json(addr, &format!("/api/entities?cell={id}"));
    assert_eq!(ents["cell"].as_u64(), Some(id));
    let list = ents["entities"].as_array().expect("entities");
    assert!(!list.is_empty(), "{ents}");
    for e in list {
        for key in ["id", "type", "x", "z", "real", "version", "haunts"] {
            assert!(!e[key].is_null(), "entity without {key}: {e}");
        }
        assert_eq!(e["cell"].as_u64(), Some(id));
        if e["real"] == false {
            assert!(e["real_at"].is_u64(), "a ghost says where its real is: {e}");
        }
    }
    assert!(list.iter().any(|e| e["real"] == true), "{ents}");
    let all = get_json(addr, "/api/entities?cell=all");
    assert_eq!(all["cells"].as_array().map(Vec::len), Some(4), "{all}");
    let haunted = all["cells"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|c| c["entities"].as_array().cloned().unwrap_or_default())
        .any(|e| e["real"] == true && e["haunts"].as_array().is_some_and(|h| !h.is_empty()));
    let ghosts: u64 = cells.iter().filter_map(|c| c["ghosts"].as_u64()).sum();
    assert!(
        ghosts == 0 || haunted,
        "ghosts exist, so some real lists its haunts: {all}"
    );
}

/// Bad requests: a 4xx whose body names the problem.
fn check_bad_requests(addr: SocketAddr) {
    for (path, status, needle) in [
        ("/api/entities?cell=99999", 404, "unknown cell 99999"),
        ("/api/entities?cell=abc", 400, "\"abc\" is not a cell id"),
        ("/api/entities", 400, "`cell` is missing"),
        ("/api/entities?shard=1", 400, "unknown query parameter"),
        ("/api/nothing", 404, "not found"),
    ] {
        let (got, body) = get(addr, path);
        assert_eq!(got, status, "{path}: {body}");
        let msg: Value = serde_json::from_str(&body).expect("JSON error");
        assert!(
            msg["error"].as_str().is_some_and(|m| m.contains(needle)),
            "{path}: {body}"
        );
    }
}

/// Events: shard figures at once, a migration within a few seconds; a
/// stream resumed with Last-Event-ID. Returns the first stream, open.
fn check_events(addr: SocketAddr) -> TcpStream {
    let mut stream = open_stream(addr);
    let head = read_until(&mut stream, "event: shards", Duration::from_secs(3));
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    assert!(head.contains("text/event-stream"), "{head}");
    let shards_line = head
        .lines()
        .skip_while(|l| *l != "event: shards")
        .nth(1)
        .and_then(|l| l.strip_prefix("data: "))
        .expect("a shards event");
    let figures: Value = serde_json::from_str(shards_line).expect("JSON");
    assert_eq!(figures["shards"].as_array().map(Vec::len), Some(2));
    assert!(figures["shards"][1]["tick_budget_us"].is_u64());
    let more = read_until(&mut stream, "event: migration", Duration::from_secs(8));
    let data = more
        .lines()
        .skip_while(|l| *l != "event: migration")
        .nth(1)
        .and_then(|l| l.strip_prefix("data: "))
        .unwrap_or_else(|| panic!("no migration streamed in 8 s:\n{head}{more}"));
    let m: Value = serde_json::from_str(data).expect("JSON");
    assert_eq!(m["kind"], "migration");
    assert_ne!(m["from_cell"], m["to_cell"], "{m}");
    // Resuming with Last-Event-ID starts right after that event, and
    // `for_ms` ends the stream by itself.
    let mut text = format!("{head}{more}");
    let ids = |t: &str| -> Vec<u64> {
        t.lines()
            .filter_map(|l| l.strip_prefix("id: "))
            .filter_map(|v| v.parse().ok())
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(8);
    while ids(&text).len() < 2 && Instant::now() < deadline {
        text.push_str(&read_until(&mut stream, "id: ", Duration::from_secs(1)));
    }
    let seen = ids(&text);
    assert!(seen.len() >= 2, "two events with ids: {text}");
    let (before, last) = (seen[seen.len() - 2], seen[seen.len() - 1]);
    assert_eq!(last, before + 1, "ids count up by one: {seen:?}");
    let mut resumed = TcpStream::connect(addr).expect("connect");
    write!(
        resumed,
        "GET /api/events?for_ms=200 HTTP/1.1\r\nLast-Event-ID: {before}\r\n\r\n"
    )
    .expect("send");
    resumed
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let mut all = String::new();
    resumed
        .read_to_string(&mut all)
        .expect("the stream ends after for_ms");
    assert_eq!(ids(&all).first(), Some(&last), "{all}");
    stream
}

/// Opens a stream, retrying while the slots are taken (a stream that just
/// ended frees its slot a moment later).
fn open_stream_ok(addr: SocketAddr) -> TcpStream {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut s = open_stream(addr);
        let text = read_until(&mut s, "event: shards", Duration::from_secs(2));
        if text.starts_with("HTTP/1.1 200") {
            return s;
        }
        assert!(Instant::now() < deadline, "no stream slot freed: {text}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// With one stream open: /metrics answers; a second stream fits, a third is
/// refused naming the bound; a closed stream frees its slot.
fn check_stream_bound(addr: SocketAddr) {
    let (status, metrics) = get(addr, "/metrics");
    assert_eq!(status, 200);
    assert!(metrics.contains("tessera_shard_ticks_total"), "{metrics}");
    let second = open_stream_ok(addr);
    let (status, body) = get(addr, "/api/events");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("admin.viewer_streams_max = 2"), "{body}");
    let (status, _) = get(addr, "/metrics");
    assert_eq!(status, 200, "/metrics with every stream slot taken");
    drop(second);
    drop(open_stream_ok(addr));
}

#[test]
fn entities_above_the_cap_are_sampled_and_say_so() {
    let c = config(60, &["admin.viewer_entities_max=5"]);
    let (handle, addr) = start(&c);
    let space = space_when_published(addr);
    let cells = space["cells"].as_array().expect("cells");
    let crowded = cells
        .iter()
        .find(|c| c["reals"].as_u64().unwrap_or(0) + c["ghosts"].as_u64().unwrap_or(0) > 5)
        .unwrap_or_else(|| panic!("a cell above 5 entities: {space}"));
    let id = crowded["id"].as_u64().expect("id");
    let ents = get_json(addr, &format!("/api/entities?cell={id}"));
    let n = ents["entities"].as_array().map_or(0, Vec::len);
    assert!((1..=5).contains(&n), "{n} entities published: {ents}");
    assert_eq!(ents["sampled"], true, "{ents}");
    assert_eq!(ents["entities_max"], 5);
    handle.shutdown();
    handle.join().expect("clean join");
}

#[test]
fn a_stream_that_falls_behind_the_ring_is_told_what_it_lost() {
    // A ring of 16 events and a stream woken every 1.5 s: 60 fast NPCs
    // migrate more often than that between two wake-ups.
    let c = config(
        60,
        &[
            "admin.viewer_events_max=16",
            "admin.viewer_stream_period_ms=1500",
        ],
    );
    let (handle, addr) = start(&c);
    let mut stream = open_stream(addr);
    let text = read_until(&mut stream, "event: lost", Duration::from_secs(10));
    let data = text
        .lines()
        .skip_while(|l| *l != "event: lost")
        .nth(1)
        .and_then(|l| l.strip_prefix("data: "))
        .unwrap_or_else(|| panic!("no loss reported in 10 s:\n{text}"));
    let lost: Value = serde_json::from_str(data).expect("JSON");
    assert!(lost["lost"].as_u64() > Some(0), "{lost}");
    assert_eq!(lost["events_max"], 16);
    let (status, _) = get(addr, "/metrics");
    assert_eq!(status, 200);
    drop(stream);
    handle.shutdown();
    handle.join().expect("clean join");
}
