//! The plain types of the client port: ids, events, errors, bounds, counters.
//!
//! Owns no state; it must not touch sockets.

use crate::config::Config;
use std::net::SocketAddr; // tidy: allow(std::net): an address value, no socket

/// One client connection on this shard: slot index + generation, never
/// reused while alive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnId(pub u64);

impl ConnId {
    pub(crate) fn new(slot: u32, generation: u32) -> ConnId {
        ConnId((u64::from(slot) << 32) | u64::from(generation))
    }

    /// The slot index.
    pub fn slot(self) -> u32 {
        (self.0 >> 32) as u32
    }

    /// The slot's generation.
    pub fn generation(self) -> u32 {
        self.0 as u32
    }
}

/// Why a connection was closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseReason {
    /// The peer closed its end (EOF) or reset.
    PeerClosed,
    /// Reading or writing failed.
    IoError,
    /// The send queue would have passed `gateway.send_queue_bytes_max`.
    SlowReader,
    /// The application called [`super::ClientPort::close`].
    ClosedByApp,
    /// The runtime is shutting down.
    Shutdown,
    /// Refused at accept: `gateway.connections_max` were in use.
    TooManyConnections,
}

impl CloseReason {
    /// Every reason, in declaration order (the index of [`CloseReason::index`]).
    pub const ALL: [CloseReason; 6] = [
        CloseReason::PeerClosed,
        CloseReason::IoError,
        CloseReason::SlowReader,
        CloseReason::ClosedByApp,
        CloseReason::Shutdown,
        CloseReason::TooManyConnections,
    ];

    /// Position in [`CloseReason::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// A stable snake_case name (metrics, logs).
    pub fn name(self) -> &'static str {
        match self {
            CloseReason::PeerClosed => "peer_closed",
            CloseReason::IoError => "io_error",
            CloseReason::SlowReader => "slow_reader",
            CloseReason::ClosedByApp => "closed_by_app",
            CloseReason::Shutdown => "shutdown",
            CloseReason::TooManyConnections => "too_many_connections",
        }
    }
}

/// What happened to a connection, in order per connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PortEvent {
    /// A client connected.
    Opened {
        /// Its id.
        conn: ConnId,
        /// Its address.
        peer: SocketAddr,
    },
    /// A connection handed over by another shard of the node
    /// ([`super::ClientPort::hand_off`]): open, with the input that shard
    /// had not consumed already readable.
    Adopted {
        /// Its id here.
        conn: ConnId,
        /// Its address.
        peer: SocketAddr,
        /// What the handing shard's application attached.
        note: Vec<u8>,
    },
    /// After this the id is dead: sends fail with Unknown, input() is empty.
    Closed {
        /// The connection.
        conn: ConnId,
        /// Why.
        reason: CloseReason,
    },
}

/// Why a port call failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PortError {
    /// The id names no open connection (never was, or closed).
    #[error("connection {0:?} is not open")]
    Unknown(ConnId),
    /// The send queue would pass `gateway.send_queue_bytes_max`: nothing was
    /// queued; the port closes the connection with CloseReason::SlowReader (a
    /// Closed event follows next tick).
    #[error("send queue of {conn:?} full ({queued} bytes queued)")]
    SendQueueFull {
        /// The connection.
        conn: ConnId,
        /// Bytes that were queued.
        queued: usize,
    },
}

/// The bounds of a port (from `[gateway]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortParams {
    /// Connections (slots) in use at once, at most.
    pub connections_max: usize,
    /// Unconsumed input per connection, at most (the reader stops there).
    pub inbound_bytes_max: usize,
    /// Queued output per connection, at most (slow readers are cut off).
    pub send_queue_bytes_max: usize,
    /// Bytes one read call takes, at most.
    pub read_batch_bytes: usize,
    /// How long a closing connection may take to flush its queue.
    pub linger_ms: u64,
    /// Interval of the socket loop between ticks, ms.
    pub io_poll_ms: u64,
    /// Readiness events taken per epoll wait.
    pub io_events_max: usize,
    /// Connections handed to this shard and not yet adopted, at most.
    pub handoffs_max: usize,
}

impl Default for PortParams {
    /// The `[gateway]` defaults of `defaults.toml`.
    fn default() -> Self {
        PortParams {
            connections_max: 10_000,
            inbound_bytes_max: 65_536,
            send_queue_bytes_max: 1_048_576,
            read_batch_bytes: 65_536,
            linger_ms: 500,
            io_poll_ms: 5,
            io_events_max: 1024,
            handoffs_max: 256,
        }
    }
}

impl PortParams {
    /// The bounds configured in `[gateway]`.
    pub fn from_config(c: &Config) -> PortParams {
        let g = &c.gateway;
        PortParams {
            connections_max: g.connections_max as usize,
            inbound_bytes_max: g.inbound_bytes_max as usize,
            send_queue_bytes_max: g.send_queue_bytes_max as usize,
            read_batch_bytes: g.read_batch_bytes as usize,
            linger_ms: g.linger_ms,
            io_poll_ms: g.io_poll_ms,
            io_events_max: g.io_events_max as usize,
            handoffs_max: g.handoffs_max as usize,
        }
    }
}

/// Cumulative figures of one port.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortCounters {
    /// Connections opened.
    pub opened: u64,
    /// Connections closed, by [`CloseReason::index`] (refusals included).
    pub closed: [u64; 6],
    /// Bytes received from clients.
    pub bytes_in: u64,
    /// Bytes written to clients.
    pub bytes_out: u64,
    /// Write calls that sent bytes.
    pub writes: u64,
    /// Connections handed to another shard.
    pub handed_off: u64,
    /// Connections adopted from another shard.
    pub adopted: u64,
    /// Hand-offs dropped (the destination's queue was full).
    pub handoffs_failed: u64,
}
