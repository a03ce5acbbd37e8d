//! What the viewer tests share: a 2-shard server with wandering NPCs and
//! the admin endpoint on a free loopback port, and a tiny HTTP/1.1 client
//! (the admin port closes every connection after one answer).

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;
use tessera::config::Config;
use tessera::runtime::{Runtime, RuntimeHandle};
use tessera::server::CellHost;

/// A config of `npcs` fast NPCs on 2 shards and 4 cells, with `extra`
/// `--set` overrides after the test's own.
/// Overrides: world, cells and admin first, then `extra`.
pub fn config(npcs: u32, extra: &[&str]) -> Config {
    let mut sets: Vec<String> = [
        "world.max_x_m=480.0",
        "world.max_z_m=480.0",
        "server.initial_cells=4",
        "server.npc_speed_mps=60.0",
        "runtime.shards=2",
        "runtime.pin=false",
        "runtime.tick_ms=20",
        "runtime.tick_budget_ms=20",
        "admin.enabled=true",
        "admin.listen_addr=127.0.0.1:0",
        "admin.viewer_publish_ticks=5",
        "admin.viewer_stream_period_ms=100",
        "gateway.listen_addr=127.0.0.1:0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    sets.push(format!("server.npcs={npcs}"));
    sets.extend(extra.iter().map(|s| s.to_string()));
    Config::load(None, &sets).expect("valid test config")
}

/// Starts the cell hosts on `config`; returns the runtime and its admin
/// address.
pub fn start(config: &Config) -> (RuntimeHandle<CellHost>, SocketAddr) {
    let shared = std::sync::Arc::new(config.clone());
    let handle = Runtime::start(config, move |ctx| {
        CellHost::new(&shared, ctx).expect("host")
    })
    .expect("runtime starts");
    let addr = handle.admin_addr().expect("admin endpoint on");
    (handle, addr)
}

/// `GET path`: the status code and the body.
pub fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    write!(s, "GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").expect("send");
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("read the answer");
    let text = String::from_utf8(raw).expect("utf-8 answer");
    let (head, body) = text.split_once("\r\n\r\n").expect("a head");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("a status code");
    (status, body.to_owned())
}

/// `GET path` parsed as JSON, asserting 200.
pub fn get_json(addr: SocketAddr, path: &str) -> serde_json::Value {
    let (status, body) = get(addr, path);
    assert_eq!(status, 200, "{path}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"))
}
