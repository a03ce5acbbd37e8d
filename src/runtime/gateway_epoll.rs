//! The epoll backend of a shard's client socket loop (`gateway.io_backend =
//! "epoll"`, see `gateway_io`): one batched loop over all of the shard's
//! client sockets (epoll through `mio`), no task per connection.
//!
//! # Why a batched loop
//! On this kind of machine a glommio task per connection cost 2.2-2.7x a
//! tick loop doing the same reads and writes, and capped a core at 3,500-4,000
//! clients before any game work (`MACHINE.md`: each read was a recv plus a
//! fresh poll submission, each frame from the other core a wake-up). Here the
//! shard's tick loop calls `GatewayIo::pump` right before each tick (fresh
//! input), right after it (the tick's output: one write per client, of
//! everything queued to it), and every `gateway.io_poll_ms` between ticks.
//!
//! # One pump
//! 1. One `epoll_wait` with a zero timeout (more while the event buffer of
//!    `gateway.io_events_max` comes back full): readiness edges mark
//!    connections readable or writable again.
//! 2. Accepts while the listener has connections (at most
//!    `io_events_max` a pump): TCP_NODELAY, registered with the port (or
//!    refused at `gateway.connections_max`: closed at once, counted as
//!    `TooManyConnections` by the port).
//! 3. The port's *due* slots (first bytes queued, a paused reader given room,
//!    a close) and the lingering ones join the readable and writable ones;
//!    each is driven once: write what is queued until the socket blocks
//!    (normally one `send`), then read until the socket is drained
//!    (`read_batch_bytes` a call) or the connection's input reaches
//!    `inbound_bytes_max` (the reader pauses: TCP back-pressure until the
//!    application consumes).
//!
//! Edge-triggered readiness: a connection stays marked readable until a read
//! would block or comes back short of its buffer (the queue was emptied; on
//! Linux every arrival is a new edge, so that saves the read that would only
//! say WouldBlock; once the kernel reports the peer's FIN, reads go on to
//! EOF), and a blocked writer waits for the writable edge, so nothing is
//! polled that has nothing to do.
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
//! Pumps run between the tick's measured phases (the stall alarm measures
//! the app); their time is the `client_io` histogram.
//!
//! Owns the listener, the sockets and the epoll set; it must not call the
//! application.

use super::gateway_io::{failure, AcceptLog};
use super::handoff::{Handoff, Handoffs};
use crate::shard::port::{ClientPort, CloseReason, SlotState};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};
use std::cell::RefCell;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The listener's token (connections use their slot index).
const LISTENER: Token = Token(usize::MAX);
/// `epoll_wait` calls one pump makes at most while the event buffer comes
/// back full (the rest wait for the next pump).
const WAITS_PER_PUMP_MAX: usize = 16;

/// One client socket and what the kernel last told about it.
#[derive(Debug)]
struct Conn {
    stream: TcpStream,
    /// Readable since the last read that would have blocked (or came short).
    readable: bool,
    /// The kernel said the peer closed its side (or the socket failed): read
    /// until EOF, a short read is not the end.
    read_closed: bool,
    /// A write would have blocked: wait for the writable edge.
    write_blocked: bool,
    /// The write side was shut down (FIN sent) while lingering.
    write_shut: bool,
    /// When a lingering connection is closed regardless.
    linger_until: Option<Instant>,
}

/// What driving one connection decided.
enum Fate {
    /// Keep the socket.
    Keep,
    /// The connection failed for this reason (the port is told).
    Failed(CloseReason),
    /// The socket is to be closed (the port already knows it is over).
    Close,
}

/// A shard's client sockets; see the module doc.
#[derive(Debug)]
pub(crate) struct EpollIo {
    poll: Poll,
    events: Events,
    listener: Option<TcpListener>,
    /// The listener had a connection waiting at the last look.
    accept_ready: bool,
    /// Indexed by port slot.
    conns: Vec<Option<Conn>>,
    /// Slots to drive in this pump (a slot may appear twice: harmless).
    work: Vec<u32>,
    /// The port's due slots, taken each pump (kept for its capacity).
    due: Vec<u32>,
    /// Slots lingering (their deadline is checked each pump).
    lingering: Vec<u32>,
    port: Rc<RefCell<ClientPort>>,
    /// Reads land here first, then exactly the bytes read are copied to the
    /// connection's buffer (one buffer per shard, not per connection).
    scratch: Vec<u8>,
    linger: Duration,
    accept_log: AcceptLog,
    /// The node's hand-off queues and this shard's index in them.
    handoffs: Arc<Handoffs>,
    me: u16,
}

impl EpollIo {
    /// Serves `listener`'s connections into `port`, and the connections
    /// other shards hand to shard `me` through `handoffs`.
    pub(crate) fn start(
        listener: std::net::TcpListener,
        port: Rc<RefCell<ClientPort>>,
        (handoffs, me): (Arc<Handoffs>, u16),
    ) -> io::Result<EpollIo> {
        let (batch, linger_ms, events_max) = {
            let p = port.borrow();
            let p = p.params();
            (p.read_batch_bytes, p.linger_ms, p.io_events_max)
        };
        listener.set_nonblocking(true)?;
        let mut listener = TcpListener::from_std(listener);
        let poll = Poll::new()?;
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        Ok(EpollIo {
            poll,
            events: Events::with_capacity(events_max.max(1)),
            listener: Some(listener),
            accept_ready: true,
            conns: Vec::new(),
            work: Vec::new(),
            due: Vec::new(),
            lingering: Vec::new(),
            port,
            scratch: vec![0; batch.max(1)],
            linger: Duration::from_millis(linger_ms),
            accept_log: AcceptLog::default(),
            handoffs,
            me,
        })
    }

    /// Stops accepting and closes the listener.
    pub(crate) fn stop_accepting(&mut self) {
        if let Some(mut listener) = self.listener.take() {
            let _ = self.poll.registry().deregister(&mut listener);
        }
        self.accept_ready = false;
    }

    /// Connections whose socket is still open.
    pub(crate) fn live(&self) -> usize {
        self.port.borrow().io_live()
    }

    /// One pass over the sockets (see the module doc); `now` is the time
    /// linger deadlines are measured against.
    pub(crate) fn pump(&mut self, now: Instant) {
        self.work.clear();
        self.wait_events();
        let port_rc = self.port.clone();
        let mut port = port_rc.borrow_mut();
        if self.accept_ready {
            self.accept(&mut port, now);
        }
        while let Some(h) = self.handoffs.pop(self.me) {
            self.adopt(&mut port, h);
        }
        port.io_take_due(&mut self.due);
        self.work.extend_from_slice(&self.due);
        self.work.extend_from_slice(&self.lingering);
        let work = std::mem::take(&mut self.work);
        for &index in &work {
            self.drive(&mut port, index, now);
        }
        self.work = work;
        let conns = &self.conns;
        self.lingering.retain(|&i| {
            conns[i as usize]
                .as_ref()
                .is_some_and(|c| c.linger_until.is_some())
        });
    }

    /// Takes the readiness edges the kernel has (never blocks).
    fn wait_events(&mut self) {
        for _ in 0..WAITS_PER_PUMP_MAX {
            if let Err(err) = self.poll.poll(&mut self.events, Some(Duration::ZERO)) {
                if err.kind() != io::ErrorKind::Interrupted {
                    tracing::warn!(%err, "gateway: epoll wait failed");
                }
                return;
            }
            let mut n = 0;
            for event in &self.events {
                n += 1;
                if event.token() == LISTENER {
                    self.accept_ready = true;
                    continue;
                }
                let index = event.token().0;
                let Some(Some(conn)) = self.conns.get_mut(index) else {
                    continue; // closed since: a stale edge
                };
                if event.is_readable() || event.is_read_closed() || event.is_error() {
                    conn.readable = true;
                }
                if event.is_read_closed() || event.is_error() {
                    conn.read_closed = true;
                }
                if event.is_writable() || event.is_write_closed() || event.is_error() {
                    conn.write_blocked = false;
                }
                self.work.push(index as u32);
            }
            if n < self.events.capacity() {
                return;
            }
        }
    }

    /// Accepts what the listener holds, at most `io_events_max` a pump.
    fn accept(&mut self, port: &mut ClientPort, now: Instant) {
        for _ in 0..self.events.capacity() {
            let Some(listener) = &self.listener else {
                return;
            };
            let (stream, peer) = match listener.accept() {
                Ok(x) => x,
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => {
                    self.accept_ready = false;
                    return;
                }
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                Err(err) => {
                    self.accept_log.failed(&err, now);
                    return;
                }
            };
            let Some(conn) = port.io_open(peer) else {
                drop(stream); // refused: counted by the port
                continue;
            };
            if let Err(err) = stream.set_nodelay(true) {
                tracing::debug!(%err, %peer, "gateway: cannot set TCP_NODELAY");
            }
            self.register(port, conn.slot(), stream, peer);
        }
    }

    /// Puts a socket in the epoll set under its port slot `index` and
    /// drives it in this pump (a socket that cannot be registered fails).
    fn register(
        &mut self,
        port: &mut ClientPort,
        index: u32,
        mut stream: TcpStream,
        peer: SocketAddr,
    ) {
        let registered = self.poll.registry().register(
            &mut stream,
            Token(index as usize),
            Interest::READABLE | Interest::WRITABLE,
        );
        if let Err(err) = registered {
            tracing::warn!(%err, %peer, "gateway: cannot register a connection");
            port.io_failed(index, CloseReason::IoError);
            port.io_release(index);
            return;
        }
        let i = index as usize;
        if self.conns.len() <= i {
            self.conns.resize_with(i + 1, || None);
        }
        debug_assert!(self.conns[i].is_none(), "a free slot has no socket");
        self.conns[i] = Some(Conn {
            stream,
            readable: true,
            read_closed: false,
            write_blocked: false,
            write_shut: false,
            linger_until: None,
        });
        self.work.push(index);
    }

    /// Takes up a connection another shard handed here (refused at
    /// `connections_max`: the socket is closed, counted by the port).
    fn adopt(&mut self, port: &mut ClientPort, h: Handoff) {
        let Handoff {
            stream,
            peer,
            input,
            note,
        } = h;
        if let Some(conn) = port.io_adopt(peer, &input, note) {
            self.register(port, conn.slot(), stream, peer);
        }
    }

    /// Moves a handed-off connection's socket and unread input to its
    /// destination shard's queue (a full queue: the socket is closed,
    /// counted), then frees the slot.
    fn hand_over(&mut self, port: &mut ClientPort, index: u32) {
        let Some(mut conn) = self.conns[index as usize].take() else {
            return;
        };
        let _ = self.poll.registry().deregister(&mut conn.stream);
        let taken = port.io_take_handoff(index);
        let peer = conn.stream.peer_addr();
        let moved = match (taken, peer) {
            (Some((to, note, input)), Ok(peer)) => {
                let h = Handoff {
                    stream: conn.stream,
                    peer,
                    input,
                    note,
                };
                self.handoffs.push(to, h).is_ok()
            }
            _ => false,
        };
        port.io_handed_off(moved);
        port.io_release(index);
    }

    /// Drives one connection as its port state asks; closes its socket when
    /// it is over.
    fn drive(&mut self, port: &mut ClientPort, index: u32, now: Instant) {
        let Some(Some(conn)) = self.conns.get_mut(index as usize) else {
            return;
        };
        let fate = match port.io_state(index) {
            SlotState::Open => drive_open(conn, port, index, &mut self.scratch),
            SlotState::Lingering => {
                if conn.linger_until.is_none() {
                    conn.linger_until = Some(now + self.linger);
                    self.lingering.push(index);
                }
                drive_linger(conn, port, index, &mut self.scratch, now)
            }
            SlotState::HandingOff => {
                self.hand_over(port, index);
                return;
            }
            SlotState::Done | SlotState::Free => Fate::Close,
        };
        match fate {
            Fate::Keep => {}
            Fate::Failed(reason) => {
                port.io_failed(index, reason);
                self.close(port, index);
            }
            Fate::Close => self.close(port, index),
        }
    }

    fn close(&mut self, port: &mut ClientPort, index: u32) {
        if let Some(mut conn) = self.conns[index as usize].take() {
            let _ = self.poll.registry().deregister(&mut conn.stream);
            drop(conn);
            port.io_release(index);
        }
    }
}

/// Open: write what is queued, then read until drained or paused.
fn drive_open(conn: &mut Conn, port: &mut ClientPort, index: u32, scratch: &mut [u8]) -> Fate {
    if let Err(reason) = write_queued(conn, port, index) {
        return Fate::Failed(reason);
    }
    while conn.readable {
        let room = port.io_read_room(index);
        if room == 0 {
            break; // paused: the consume that makes room makes the slot due
        }
        let take = room.min(scratch.len());
        let buf = &mut scratch[..take];
        match conn.stream.read(buf) {
            Ok(0) => return Fate::Failed(CloseReason::PeerClosed),
            Ok(n) => {
                port.io_received(index, &buf[..n]);
                // A short read emptied the socket's queue: the next bytes
                // bring a new edge (Linux's epoll signals every arrival),
                // so the read that would only say WouldBlock is saved (one
                // syscall per input, the usual case).
                if n < take && !conn.read_closed {
                    conn.readable = false;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => conn.readable = false,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Fate::Failed(failure(&e)),
        }
    }
    Fate::Keep
}

/// Lingering: flush, shut the write side, drain input until EOF, all before
/// the deadline.
fn drive_linger(
    conn: &mut Conn,
    port: &mut ClientPort,
    index: u32,
    scratch: &mut [u8],
    now: Instant,
) -> Fate {
    if conn.linger_until.is_some_and(|t| now >= t) {
        return Fate::Close;
    }
    if write_queued(conn, port, index).is_err() {
        return Fate::Close;
    }
    if !port.io_pending_output(index).is_empty() {
        return Fate::Keep; // blocked: the writable edge brings it back
    }
    if !conn.write_shut {
        conn.write_shut = true;
        if conn.stream.shutdown(Shutdown::Write).is_err() {
            return Fate::Close;
        }
    }
    while conn.readable {
        match conn.stream.read(scratch) {
            Ok(0) => return Fate::Close,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => conn.readable = false,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Fate::Close,
        }
    }
    Fate::Keep
}

/// Writes the queued output until it is all written or the socket blocks.
fn write_queued(conn: &mut Conn, port: &mut ClientPort, index: u32) -> Result<(), CloseReason> {
    while !conn.write_blocked {
        let pending = port.io_pending_output(index);
        if pending.is_empty() {
            return Ok(());
        }
        match conn.stream.write(pending) {
            Ok(0) => return Err(CloseReason::PeerClosed),
            Ok(n) => port.io_wrote(index, n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => conn.write_blocked = true,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(failure(&e)),
        }
    }
    Ok(())
}
