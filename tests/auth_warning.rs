//! `gateway.auth = "none"` is said loudly at start, and once: the embedded
//! server (what `tessera` and loadgen's one-line command run) builds a
//! probe host before its shards, and each shard builds its own host, on
//! its own thread; the warning must come from neither, but from the start
//! itself. A process-wide subscriber sees every thread's events.

mod gateway_support;

use std::io::Write;
use std::sync::{Arc, Mutex};

use gateway_support::config;
use tessera::server::EmbeddedServer;

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("log buffer").extend_from_slice(b);
        Ok(b.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn the_auth_none_warning_is_printed_once_per_start() {
    let log = Captured::default();
    let writer = log.clone();
    tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .init();
    let count = || {
        let text = String::from_utf8_lossy(&log.0.lock().expect("log")).into_owned();
        text.matches("ANYONE CAN LOG IN").count()
    };
    // Two shards: a warning per host would print three times.
    let server = EmbeddedServer::start(&config(&[])).expect("start");
    drop(server.stop().expect("stop"));
    assert_eq!(count(), 1, "once with auth = \"none\"");
    let key = tessera::server::gateway::TicketKey::from_hex(&"5a".repeat(32)).expect("key");
    let path = std::env::temp_dir().join(format!("tessera-warn-{}.hex", std::process::id()));
    std::fs::write(&path, key.to_hex()).expect("key file");
    let file = format!("gateway.key_file=\"{}\"", path.display());
    let server = EmbeddedServer::start(&config(&["gateway.auth=\"hmac\"", &file])).expect("start");
    drop(server.stop().expect("stop"));
    let _ = std::fs::remove_file(path);
    assert_eq!(count(), 1, "none more with auth = \"hmac\"");
}
