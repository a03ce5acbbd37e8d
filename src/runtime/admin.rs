//! The admin endpoint: a minimal HTTP/1.1 responder for `GET /metrics`.
//!
//! # Why a plain std thread and std::net
//!
//! Scrapes are rare (every few seconds) and their cost (locking and merging
//! histograms, formatting text) is unrelated to the tick work. Serving them
//! from a glommio listener on a shard would put that work, and HTTP parsing of
//! bytes from outside, inside a shard's tick budget, and glommio's TCP is the
//! slow part of this stack here (MACHINE.md). A dedicated thread that blocks
//! in `accept` costs nothing while idle, never touches a shard's executor, and
//! reads the shards' metrics only through their lock-free counters and
//! `try_lock`-published histograms, so a slow scraper cannot stall a tick.
//!
//! One connection at a time; the request head is bounded by
//! `admin.request_bytes_max` and every read/write by `admin.io_timeout_ms`.
//! Shutdown sets a flag and connects once to the listener to wake `accept`.
//!
//! Runs on: its own thread (`tessera-admin`). Owns: the listening socket.

use super::metrics::{render, ShardStats};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Bounds of the admin server.
#[derive(Clone, Debug)]
pub(crate) struct AdminParams {
    pub(crate) request_bytes_max: usize,
    pub(crate) io_timeout: Duration,
}

/// A running admin server.
#[derive(Debug)]
pub(crate) struct AdminServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl AdminServer {
    /// Binds `addr` and serves `/metrics` for `shards` on a new thread.
    ///
    /// # Errors
    /// The bind or thread-spawn error.
    pub(crate) fn start(
        addr: SocketAddr,
        params: AdminParams,
        shards: Vec<Arc<ShardStats>>,
    ) -> std::io::Result<AdminServer> {
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("tessera-admin".into())
            .spawn(move || serve(&listener, &params, &shards, &flag))?;
        Ok(AdminServer {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    /// The bound address (useful with port 0).
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting and joins the thread.
    pub(crate) fn stop(&mut self) {
        let Some(thread) = self.thread.take() else {
            return;
        };
        self.stop.store(true, Ordering::Release);
        // Wake the blocking accept; if this fails the listener is gone anyway.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if thread.join().is_err() {
            tracing::error!("admin thread panicked");
        }
    }
}

impl Drop for AdminServer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn serve(
    listener: &TcpListener,
    params: &AdminParams,
    shards: &[Arc<ShardStats>],
    stop: &AtomicBool,
) {
    for conn in listener.incoming() {
        if stop.load(Ordering::Acquire) {
            return;
        }
        match conn {
            Ok(stream) => {
                if let Err(err) = handle(stream, params, shards) {
                    tracing::debug!(%err, "admin connection failed");
                }
            }
            Err(err) => tracing::warn!(%err, "admin accept failed"),
        }
    }
}

fn handle(
    mut stream: TcpStream,
    params: &AdminParams,
    shards: &[Arc<ShardStats>],
) -> std::io::Result<()> {
    stream.set_read_timeout(Some(params.io_timeout))?;
    stream.set_write_timeout(Some(params.io_timeout))?;
    let mut head = vec![0u8; params.request_bytes_max];
    let mut len = 0;
    while !head[..len].windows(4).any(|w| w == b"\r\n\r\n") {
        if len == head.len() {
            return respond(
                &mut stream,
                "431 Request Header Fields Too Large",
                "text/plain",
                "",
            );
        }
        let n = stream.read(&mut head[len..])?;
        if n == 0 {
            return Ok(());
        }
        len += n;
    }
    let line = head[..len]
        .split(|&b| b == b'\r')
        .next()
        .unwrap_or_default();
    let mut parts = line.split(|&b| b == b' ');
    let (method, path) = (parts.next(), parts.next());
    match (method, path) {
        (Some(b"GET"), Some(b"/metrics")) => respond(
            &mut stream,
            "200 OK",
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            &render(shards),
        ),
        (Some(b"GET"), _) => respond(&mut stream, "404 Not Found", "text/plain", "not found\n"),
        _ => respond(&mut stream, "405 Method Not Allowed", "text/plain", ""),
    }
}

fn respond(stream: &mut TcpStream, status: &str, ctype: &str, body: &str) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    stream.flush()
}
