//! The admin endpoint: a minimal HTTP/1.1 responder for `GET /metrics` and
//! the live viewer (`GET /`, `/api/space`, `/api/entities?cell=ID`,
//! `/api/events`; the API in docs/viewer.md, its handlers in `admin_api.rs`).
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
//! The viewer's data comes the same way: snapshots and an event ring the
//! shards publish with `try_lock` (`runtime::viewer`).
//!
//! One connection at a time; the request head is bounded by
//! `admin.request_bytes_max` and every read/write by `admin.io_timeout_ms`.
//! An event stream (`/api/events`, server-sent events) lives long, so it is
//! handed to a thread of its own, at most `admin.viewer_streams_max` at once
//! (one more is refused with 503): `/metrics` keeps answering meanwhile.
//! Shutdown sets a flag and connects once to the listener to wake `accept`;
//! streams see the flag within `admin.viewer_stream_period_ms`.
//!
//! Runs on: its own thread (`tessera-admin`) and one per event stream
//! (`tessera-sse`). Owns: the listening socket and the streams' threads.

use super::admin_api::{self, ApiError, Request, StreamRequest};
use super::metrics::{render, ShardStats};
use super::viewer::ViewBoard;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Bounds of the admin server.
#[derive(Clone, Debug)]
pub(crate) struct AdminParams {
    pub(crate) request_bytes_max: usize,
    pub(crate) io_timeout: Duration,
    /// Event streams at once (`admin.viewer_streams_max`).
    pub(crate) streams_max: usize,
    /// How often a stream sends (`admin.viewer_stream_period_ms`).
    pub(crate) stream_period: Duration,
    /// Events one stream sends per period at most (the ring's size).
    pub(crate) events_max: usize,
    /// `runtime.tick_budget_ms` in µs (shown against the tick p99).
    pub(crate) tick_budget_us: u64,
    /// The runtime's `Time::ZERO`.
    pub(crate) epoch: Instant,
}

/// What every handler reads.
#[derive(Debug)]
pub(crate) struct AdminState {
    pub(crate) params: AdminParams,
    pub(crate) shards: Vec<Arc<ShardStats>>,
    pub(crate) board: Arc<ViewBoard>,
    pub(crate) stop: Arc<AtomicBool>,
    /// Event streams running.
    pub(crate) streams: AtomicUsize,
}

/// A running admin server.
#[derive(Debug)]
pub(crate) struct AdminServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl AdminServer {
    /// Binds `addr` and serves `/metrics` for `shards` and the viewer's
    /// pages from `board` on a new thread.
    ///
    /// # Errors
    /// The bind or thread-spawn error.
    pub(crate) fn start(
        addr: SocketAddr,
        params: AdminParams,
        shards: Vec<Arc<ShardStats>>,
        board: Arc<ViewBoard>,
    ) -> std::io::Result<AdminServer> {
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let state = Arc::new(AdminState {
            params,
            shards,
            board,
            stop: stop.clone(),
            streams: AtomicUsize::new(0),
        });
        let thread = std::thread::Builder::new()
            .name("tessera-admin".into())
            .spawn(move || serve(&listener, &state))?;
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

fn serve(listener: &TcpListener, state: &Arc<AdminState>) {
    let mut streams: Vec<JoinHandle<()>> = Vec::new();
    for conn in listener.incoming() {
        if state.stop.load(Ordering::Acquire) {
            break;
        }
        streams.retain(|t| !t.is_finished());
        match conn {
            Ok(stream) => match handle(stream, state) {
                Ok(Some(thread)) => streams.push(thread),
                Ok(None) => {}
                Err(err) => tracing::debug!(%err, "admin connection failed"),
            },
            Err(err) => tracing::warn!(%err, "admin accept failed"),
        }
    }
    for t in streams {
        if t.join().is_err() {
            tracing::error!("admin event stream thread panicked");
        }
    }
}

/// A request head as read.
enum Head {
    /// The peer closed before a whole head.
    Closed,
    /// Over `admin.request_bytes_max`.
    TooLong,
    /// The head.
    Got(Vec<u8>),
}

/// Reads the request head (bounded, with timeouts).
///
/// # Errors
/// The socket's error (a timeout included).
fn read_head(stream: &mut TcpStream, max: usize) -> std::io::Result<Head> {
    let mut head = vec![0u8; max];
    let mut len = 0;
    while !head[..len].windows(4).any(|w| w == b"\r\n\r\n") {
        if len == head.len() {
            return Ok(Head::TooLong);
        }
        let n = stream.read(&mut head[len..])?;
        if n == 0 {
            return Ok(Head::Closed);
        }
        len += n;
    }
    head.truncate(len);
    Ok(Head::Got(head))
}

/// Serves one connection; returns the thread of an event stream it started.
fn handle(
    mut stream: TcpStream,
    state: &Arc<AdminState>,
) -> std::io::Result<Option<JoinHandle<()>>> {
    let params = &state.params;
    stream.set_read_timeout(Some(params.io_timeout))?;
    stream.set_write_timeout(Some(params.io_timeout))?;
    let head = match read_head(&mut stream, params.request_bytes_max)? {
        Head::Closed => return Ok(None),
        Head::TooLong => {
            respond(
                &mut stream,
                "431 Request Header Fields Too Large",
                "text/plain",
                "",
            )?;
            return Ok(None);
        }
        Head::Got(head) => head,
    };
    let line = head.split(|&b| b == b'\r').next().unwrap_or_default();
    let mut parts = line.split(|&b| b == b' ');
    let (method, target) = (parts.next(), parts.next());
    if method != Some(b"GET") {
        respond(&mut stream, "405 Method Not Allowed", "text/plain", "")?;
        return Ok(None);
    }
    let target = std::str::from_utf8(target.unwrap_or_default()).unwrap_or("");
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let answer = match path {
        "/metrics" => Ok((
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            render(&state.shards),
        )),
        "/" | "/index.html" => Ok(("text/html; charset=utf-8", admin_api::PAGE.to_owned())),
        "/api/space" => Ok(("application/json", admin_api::space(state))),
        "/api/entities" => Request::entities(query)
            .and_then(|r| admin_api::entities(state, r))
            .map(|body| ("application/json", body)),
        "/api/events" => match StreamRequest::parse(query, &head) {
            Ok(req) => return start_stream(stream, state, req),
            Err(err) => Err(err),
        },
        other => Err(ApiError::NotFound(other.to_owned())),
    };
    match answer {
        Ok((ctype, body)) => respond(&mut stream, "200 OK", ctype, &body)?,
        Err(err) => respond(&mut stream, err.status(), "application/json", &err.body())?,
    }
    Ok(None)
}

/// `/api/events`: a thread of its own if a slot is free, else 503.
fn start_stream(
    mut stream: TcpStream,
    state: &Arc<AdminState>,
    req: StreamRequest,
) -> std::io::Result<Option<JoinHandle<()>>> {
    let max = state.params.streams_max;
    let taken = state
        .streams
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < max).then_some(n + 1)
        });
    if taken.is_err() {
        let err = ApiError::StreamsBusy(max);
        respond(&mut stream, err.status(), "application/json", &err.body())?;
        return Ok(None);
    }
    let st = state.clone();
    let spawned = std::thread::Builder::new()
        .name("tessera-sse".into())
        .spawn(move || {
            let mut stream = stream;
            if let Err(err) = admin_api::stream_events(&mut stream, &st, req) {
                tracing::debug!(%err, "event stream ended");
            }
            // The slot is free before the client sees the end.
            st.streams.fetch_sub(1, Ordering::AcqRel);
            drop(stream);
        });
    match spawned {
        Ok(t) => Ok(Some(t)),
        Err(err) => {
            state.streams.fetch_sub(1, Ordering::AcqRel);
            Err(err)
        }
    }
}

pub(crate) fn respond(
    stream: &mut TcpStream,
    status: &str,
    ctype: &str,
    body: &str,
) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    stream.flush()
}
