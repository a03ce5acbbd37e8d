//! The socket side of a shard's [`ClientPort`]: a glommio TCP listener and
//! one task per client connection.
//!
//! # Tasks (all on the shard's own executor, never concurrent with a tick)
//! - **accept**: takes connections off this shard's listener (every shard
//!   listens on the same address with SO_REUSEPORT, so the kernel spreads
//!   connections over shards), sets TCP_NODELAY, registers each with the
//!   port (or refuses it at `gateway.connections_max`: the socket is closed at
//!   once, counted as `TooManyConnections`) and spawns its connection task.
//! - **connection** ([`ConnTask`]): one future that both reads and writes
//!   its socket. It reads up to `read_batch_bytes` at a time into the
//!   connection's inbound buffer and stops reading while the unconsumed input
//!   is at `inbound_bytes_max` (TCP back-pressure); it writes the queued
//!   output as long as the socket takes it. It parks its waker in the port:
//!   queuing the first bytes, consuming input of a paused reader, or closing
//!   wakes it. No polling loop, no spinning: a connection with nothing to do
//!   costs nothing until the kernel or the port wakes it.
//!
//! # Closing
//! - peer EOF or reset: Closed{PeerClosed} (other socket errors: IoError),
//!   the socket is closed at once;
//! - slow reader: the port drops the queue, the socket is closed at once;
//! - app close and shutdown: the queue is written, then the write side shut
//!   down (FIN) and the input drained until the peer closes, so the last
//!   bytes are not lost to a reset; all within `gateway.linger_ms`, after
//!   which the socket is closed regardless.
//!
//! Socket work happens in these tasks, between ticks: none of it is inside
//! the tick's measured phases (the stall alarm measures the app, not IO).
//!
//! Owns the listener and the sockets; it must not call the application.

use super::port::{ClientPort, CloseReason, SlotState};
use futures_lite::io::{AsyncRead, AsyncWrite};
use glommio::net::{TcpListener, TcpStream};
use glommio::timer::Timer;
use std::cell::RefCell;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// Read/write rounds one poll of a connection does before it yields to the
/// other tasks (only reached while the socket keeps having data).
const ROUNDS_PER_POLL: usize = 4;
/// Pause after an accept error (e.g. out of file descriptors) before retrying.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(10);
/// Accept errors are logged at most this often.
const ACCEPT_LOG_INTERVAL: Duration = Duration::from_secs(1);
/// How often shutdown checks whether every connection has closed.
const CLOSE_POLL: Duration = Duration::from_millis(1);

/// Pending connections the kernel queues per listener (it clamps this to
/// `net.core.somaxconn`); glommio's own `bind` uses 1,024, short for a
/// ramp of thousands of clients.
const LISTEN_BACKLOG: i32 = 4096;

/// Binds a listener on the current executor; returns it with the address
/// it resolved to. SO_REUSEPORT: every shard listens on the address and
/// the kernel spreads connections. SO_REUSEADDR: the connections accepted
/// here inherit it, so after a stop their TIME_WAIT remains do not fail a
/// restarted server's start-up check (`launch::gateway_addr`; glommio's
/// `TcpListener::bind` sets only SO_REUSEPORT, and a restart right after a
/// run failed with "address in use" for a minute); a live listener still
/// fails that check.
pub(crate) fn bind(addr: SocketAddr) -> io::Result<(TcpListener, SocketAddr)> {
    use socket2::{Domain, Protocol, Socket, Type};
    use std::os::fd::{FromRawFd, IntoRawFd};
    let domain = if addr.is_ipv6() {
        Domain::IPV6
    } else {
        Domain::IPV4
    };
    let socket = Socket::new(domain, Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.bind(&addr.into())?;
    socket.listen(LISTEN_BACKLOG)?;
    let local = socket
        .local_addr()?
        .as_socket()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not an IP socket"))?;
    // SAFETY: `into_raw_fd` gives up a bound, listening TCP socket that
    // nothing else owns; glommio's listener takes ownership of the fd (and
    // closes it). Exercised by every gateway test and by
    // `a_restarted_listener_binds_over_time_wait` below.
    let listener = unsafe { TcpListener::from_raw_fd(socket.into_raw_fd()) };
    Ok((listener, local))
}

/// What the connection tasks of one shard share.
#[derive(Debug)]
struct IoShared {
    port: Rc<RefCell<ClientPort>>,
    /// Reads land here first, then exactly the bytes read are copied to the
    /// connection's buffer (one buffer per shard, not per connection).
    scratch: RefCell<Vec<u8>>,
    linger: Duration,
}

/// A shard's gateway: the accept task, and the shared state of the
/// connection tasks it spawned.
#[derive(Debug)]
pub(crate) struct GatewayIo {
    accept: Option<glommio::Task<()>>,
    shared: Rc<IoShared>,
}

impl GatewayIo {
    /// Starts accepting on `listener` into `port`.
    pub(crate) fn start(listener: TcpListener, port: Rc<RefCell<ClientPort>>) -> GatewayIo {
        let (batch, linger_ms) = {
            let p = port.borrow();
            (p.params().read_batch_bytes, p.params().linger_ms)
        };
        let shared = Rc::new(IoShared {
            port,
            scratch: RefCell::new(vec![0; batch.max(1)]),
            linger: Duration::from_millis(linger_ms),
        });
        let accept = glommio::spawn_local(accept_loop(listener, shared.clone()));
        GatewayIo {
            accept: Some(accept),
            shared,
        }
    }

    /// Stops accepting and closes the listener.
    pub(crate) async fn stop_accepting(&mut self) {
        if let Some(task) = self.accept.take() {
            task.cancel().await;
        }
    }

    /// Waits until every connection task has closed its socket, at most
    /// `linger_ms` (plus a little) from now; returns how many were still
    /// open then (their sockets close when the executor ends).
    pub(crate) async fn wait_closed(&self) -> usize {
        let deadline = Instant::now() + self.shared.linger + Duration::from_millis(50);
        loop {
            let live = self.shared.port.borrow().io_live();
            if live == 0 || Instant::now() >= deadline {
                return live;
            }
            glommio::timer::sleep(CLOSE_POLL).await;
        }
    }
}

async fn accept_loop(listener: TcpListener, shared: Rc<IoShared>) {
    let mut last_log: Option<Instant> = None;
    loop {
        let accepted = listener
            .accept()
            .await
            .and_then(|s| s.peer_addr().map(|peer| (s, peer)))
            .map_err(io::Error::from);
        let (stream, peer) = match accepted {
            Ok(x) => x,
            Err(err) => {
                if last_log.is_none_or(|t| t.elapsed() >= ACCEPT_LOG_INTERVAL) {
                    tracing::warn!(%err, "gateway: accept failed");
                    last_log = Some(Instant::now());
                }
                glommio::timer::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let Some(conn) = shared.port.borrow_mut().io_open(peer) else {
            drop(stream); // refused: counted by the port
            continue;
        };
        if let Err(err) = stream.set_nodelay(true) {
            tracing::debug!(%err, %peer, "gateway: cannot set TCP_NODELAY");
        }
        let task = ConnTask {
            stream,
            slot: conn.slot(),
            shared: shared.clone(),
            linger: None,
            write_shut: false,
            released: false,
        };
        glommio::spawn_local(task).detach();
    }
}

/// What one read or write attempt did.
enum Step {
    /// Bytes moved.
    Progress,
    /// Nothing to do, or the socket is not ready (the waker is registered).
    Idle,
    /// The connection is over, for this reason.
    Failed(CloseReason),
}

fn failure(err: &io::Error) -> CloseReason {
    match err.kind() {
        io::ErrorKind::ConnectionReset
        | io::ErrorKind::ConnectionAborted
        | io::ErrorKind::BrokenPipe
        | io::ErrorKind::UnexpectedEof => CloseReason::PeerClosed,
        _ => CloseReason::IoError,
    }
}

/// One client connection's socket task; see the module doc.
struct ConnTask {
    stream: TcpStream,
    slot: u32,
    shared: Rc<IoShared>,
    /// Started when the connection begins to linger.
    linger: Option<Timer>,
    /// The write side was shut down (FIN sent) while lingering.
    write_shut: bool,
    released: bool,
}

impl ConnTask {
    /// Writes queued output until the socket blocks or the queue is empty.
    fn write(&mut self, cx: &mut Context<'_>, port: &mut ClientPort) -> Step {
        let mut step = Step::Idle;
        loop {
            let pending = port.io_pending_output(self.slot);
            if pending.is_empty() {
                return step;
            }
            match Pin::new(&mut self.stream).poll_write(cx, pending) {
                Poll::Ready(Ok(0)) => return Step::Failed(CloseReason::PeerClosed),
                Poll::Ready(Ok(n)) => {
                    port.io_wrote(self.slot, n);
                    step = Step::Progress;
                }
                Poll::Ready(Err(e)) => return Step::Failed(failure(&e)),
                Poll::Pending => return step,
            }
        }
    }

    /// Reads once into the inbound buffer (or, when `discard`, into nowhere).
    fn read(&mut self, cx: &mut Context<'_>, port: &mut ClientPort, discard: bool) -> Step {
        let mut scratch = self.shared.scratch.borrow_mut();
        let room = if discard {
            scratch.len()
        } else {
            port.io_read_room(self.slot)
        };
        if room == 0 {
            return Step::Idle; // paused: a consume wakes this task
        }
        let buf = &mut scratch[..room.min(port.params().read_batch_bytes.max(1))];
        match Pin::new(&mut self.stream).poll_read(cx, buf) {
            Poll::Ready(Ok(0)) => Step::Failed(CloseReason::PeerClosed),
            Poll::Ready(Ok(n)) => {
                if !discard {
                    port.io_received(self.slot, &buf[..n]);
                }
                Step::Progress
            }
            Poll::Ready(Err(e)) => Step::Failed(failure(&e)),
            Poll::Pending => Step::Idle,
        }
    }

    /// Open: read and write until both block; `Ready` when the socket must close.
    fn drive_open(&mut self, cx: &mut Context<'_>, port: &mut ClientPort) -> Poll<bool> {
        let w = self.write(cx, port);
        let r = match w {
            Step::Failed(_) => Step::Idle,
            _ => self.read(cx, port, false),
        };
        match (w, r) {
            (Step::Failed(reason), _) | (_, Step::Failed(reason)) => {
                port.io_failed(self.slot, reason);
                Poll::Ready(true)
            }
            (Step::Progress, _) | (_, Step::Progress) => Poll::Ready(false),
            _ => Poll::Pending,
        }
    }

    /// Lingering: flush, shut the write side, drain input until EOF, all
    /// before the linger timer fires. `Ready` when the socket may close.
    fn drive_linger(&mut self, cx: &mut Context<'_>, port: &mut ClientPort) -> Poll<bool> {
        let linger = self.shared.linger;
        let timer = self.linger.get_or_insert_with(|| Timer::new(linger));
        if Pin::new(timer).poll(cx).is_ready() {
            return Poll::Ready(true);
        }
        if !port.io_pending_output(self.slot).is_empty() {
            return match self.write(cx, port) {
                Step::Failed(_) => Poll::Ready(true),
                Step::Progress => Poll::Ready(false),
                Step::Idle => Poll::Pending,
            };
        }
        if !self.write_shut {
            self.write_shut = true;
            if Pin::new(&mut self.stream).poll_close(cx).is_pending() {
                return Poll::Pending;
            }
        }
        match self.read(cx, port, true) {
            Step::Failed(_) => Poll::Ready(true),
            Step::Progress => Poll::Ready(false),
            Step::Idle => Poll::Pending,
        }
    }

    /// One poll: `Ready(())` when the socket is to be closed.
    fn drive(&mut self, cx: &mut Context<'_>, port: &mut ClientPort) -> Poll<()> {
        for _ in 0..ROUNDS_PER_POLL {
            let done = match port.io_state(self.slot) {
                SlotState::Open => self.drive_open(cx, port),
                SlotState::Lingering => self.drive_linger(cx, port),
                SlotState::Done | SlotState::Free => Poll::Ready(true),
            };
            match done {
                Poll::Ready(true) => return Poll::Ready(()),
                Poll::Ready(false) => {} // progress: another round
                Poll::Pending => return Poll::Pending,
            }
        }
        // Still busy: let the other tasks (and the tick) run first.
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    fn release(&mut self) {
        if !self.released {
            self.released = true;
            if let Ok(mut port) = self.shared.port.try_borrow_mut() {
                port.io_release(self.slot);
            }
        }
    }
}

impl Future for ConnTask {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let shared = this.shared.clone();
        let mut port = shared.port.borrow_mut();
        match this.drive(cx, &mut port) {
            Poll::Ready(()) => {
                drop(port);
                this.release();
                Poll::Ready(())
            }
            Poll::Pending => {
                port.io_park(this.slot, cx.waker());
                Poll::Pending
            }
        }
    }
}

impl Drop for ConnTask {
    /// A task dropped unfinished (the executor ending) still frees its slot.
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn a_restarted_listener_binds_over_time_wait() {
        let ex = glommio::LocalExecutorBuilder::default()
            .make()
            .expect("executor");
        ex.run(async {
            let (listener, addr) = bind("127.0.0.1:0".parse().expect("addr")).expect("bind");
            let mut client = std::net::TcpStream::connect(addr).expect("connect");
            let accepted = listener.accept().await.expect("accept");
            // The server closes first: its side of the connection goes to
            // TIME_WAIT on the listening port.
            drop(accepted);
            let mut buf = [0u8; 1];
            assert_eq!(client.read(&mut buf).expect("eof"), 0);
            drop(client);
            drop(listener);
            // A restart: the start-up check (`launch::gateway_addr`, a plain
            // std bind with SO_REUSEADDR) conflicts with TIME_WAIT sockets
            // whose listener lacked SO_REUSEADDR; then the shard's bind.
            let check = std::net::TcpListener::bind(addr);
            assert!(check.is_ok(), "start-up check after a restart: {check:?}");
            drop(check);
            let (_live, again) = bind(addr).expect("the port binds again at once");
            assert_eq!(again, addr);
            // A live listener still fails the check: no second server
            // silently shares the port through SO_REUSEPORT.
            assert!(std::net::TcpListener::bind(addr).is_err());
        });
    }
}
