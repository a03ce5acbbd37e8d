//! The names of every shard's counters ([`Count`]) and levels ([`Level`]):
//! mesh, ticks and client connections, with their exported names and help
//! texts. The runtime keeps and exports them (storage and encoding are in
//! `runtime::metrics`); its drivers read them back by these names.
//!
//! Owns names only; it must not touch queues, sockets or clocks.

/// Event counters kept by every shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum Count {
    /// Ticks run.
    Ticks,
    /// Tick deadlines skipped because a tick overran the tick period.
    TicksSkipped,
    /// Ticks whose work exceeded `runtime.tick_budget_ms`.
    Stalls,
    /// Batches accepted by a destination queue.
    BatchesSent,
    /// Envelopes in those batches.
    MessagesSent,
    /// Batches taken off inbound queues.
    BatchesReceived,
    /// Envelopes in those batches.
    MessagesReceived,
    /// Flushes that found a destination queue full (back-pressure events).
    QueueFull,
    /// Sends refused because the destination's outbox was at its bound.
    OutboxRefused,
    /// Ticks on which the inbox was at its bound, so queues were not drained.
    InboxFullTicks,
    /// Envelopes lost to a crashed shard: held by it, queued for it, or
    /// dropped by a sender after the crash.
    DroppedDisconnected,
    /// Envelopes still undelivered when the shutdown drain gave up.
    DroppedAtShutdown,
    /// Client connections opened.
    ClientOpened,
    /// Client connections closed: the peer went away (EOF, reset).
    ClientClosedPeer,
    /// Client connections closed: a socket error.
    ClientClosedIoError,
    /// Client connections closed: their send queue overflowed (slow reader).
    ClientClosedSlowReader,
    /// Client connections closed by the application.
    ClientClosedByApp,
    /// Client connections closed by the shutdown.
    ClientClosedShutdown,
    /// Client connections refused at `gateway.connections_max`.
    ClientRefused,
    /// Bytes received from clients.
    ClientBytesIn,
    /// Bytes written to clients.
    ClientBytesOut,
    /// Write calls that sent bytes to clients (the per-write cost is the
    /// client port's main one: ideally one per client per tick).
    ClientWrites,
    /// Client connections handed to another shard of the node (a login of
    /// an account whose avatar's proxy is there).
    ClientHandedOff,
    /// Client connections taken over from another shard of the node.
    ClientAdopted,
    /// Hand-offs dropped: the destination's queue held
    /// `gateway.handoffs_max` (the connection is closed).
    ClientHandoffFailed,
}

impl Count {
    /// The counter of client connections closed for `reason`.
    pub fn client_closed(reason: super::port::CloseReason) -> Count {
        use super::port::CloseReason as R;
        match reason {
            R::PeerClosed => Count::ClientClosedPeer,
            R::IoError => Count::ClientClosedIoError,
            R::SlowReader => Count::ClientClosedSlowReader,
            R::ClosedByApp => Count::ClientClosedByApp,
            R::Shutdown => Count::ClientClosedShutdown,
            R::TooManyConnections => Count::ClientRefused,
        }
    }
}

pub(crate) const COUNTS: [(Count, &str, &str); 25] = [
    (Count::Ticks, "ticks", "Ticks run"),
    (
        Count::TicksSkipped,
        "ticks_skipped",
        "Tick deadlines skipped after an overrun",
    ),
    (
        Count::Stalls,
        "stalls",
        "Ticks whose work exceeded runtime.tick_budget_ms",
    ),
    (
        Count::BatchesSent,
        "batches_sent",
        "Batches accepted by a destination queue",
    ),
    (
        Count::MessagesSent,
        "messages_sent",
        "Envelopes sent in batches",
    ),
    (
        Count::BatchesReceived,
        "batches_received",
        "Batches drained from inbound queues",
    ),
    (
        Count::MessagesReceived,
        "messages_received",
        "Envelopes received",
    ),
    (
        Count::QueueFull,
        "queue_full",
        "Flushes that found a destination queue full (back-pressure)",
    ),
    (
        Count::OutboxRefused,
        "outbox_refused",
        "Sends refused: the destination's outbox was full",
    ),
    (
        Count::InboxFullTicks,
        "inbox_full_ticks",
        "Ticks that skipped draining: inbox at its bound",
    ),
    (
        Count::DroppedDisconnected,
        "dropped_disconnected",
        "Envelopes lost to a crashed shard",
    ),
    (
        Count::DroppedAtShutdown,
        "dropped_at_shutdown",
        "Envelopes undelivered when the shutdown drain gave up",
    ),
    (
        Count::ClientOpened,
        "client_opened",
        "Client connections opened",
    ),
    (
        Count::ClientClosedPeer,
        "client_closed_peer_closed",
        "Client connections closed by the peer (EOF, reset)",
    ),
    (
        Count::ClientClosedIoError,
        "client_closed_io_error",
        "Client connections closed on a socket error",
    ),
    (
        Count::ClientClosedSlowReader,
        "client_closed_slow_reader",
        "Client connections cut off: send queue over gateway.send_queue_bytes_max",
    ),
    (
        Count::ClientClosedByApp,
        "client_closed_by_app",
        "Client connections closed by the application",
    ),
    (
        Count::ClientClosedShutdown,
        "client_closed_shutdown",
        "Client connections closed by the shutdown",
    ),
    (
        Count::ClientRefused,
        "client_refused",
        "Client connections refused at gateway.connections_max",
    ),
    (
        Count::ClientBytesIn,
        "client_bytes_in",
        "Bytes received from clients",
    ),
    (
        Count::ClientBytesOut,
        "client_bytes_out",
        "Bytes written to clients",
    ),
    (
        Count::ClientWrites,
        "client_writes",
        "Socket write calls that sent bytes to clients",
    ),
    (
        Count::ClientHandedOff,
        "client_handed_off",
        "Client connections handed to the shard of their account's avatar",
    ),
    (
        Count::ClientAdopted,
        "client_adopted",
        "Client connections taken over from another shard",
    ),
    (
        Count::ClientHandoffFailed,
        "client_handoff_failed",
        "Hand-offs dropped: the destination queue held gateway.handoffs_max",
    ),
];

/// Current levels (gauges) of every shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum Level {
    /// Envelopes held in the outbox (not yet accepted by a queue).
    OutboxHeld,
    /// Envelopes received and not yet read by the application.
    InboxHeld,
    /// Batches this shard has put in queues that their destinations have not
    /// drained yet (queue depth, outbound).
    OutboundQueued,
    /// Client connections open.
    ClientConnections,
    /// Bytes received from clients, not yet consumed by the application.
    ClientInboundHeld,
    /// Bytes queued for clients, not yet written.
    ClientSendQueued,
    /// The 99th percentile of tick work over the last metrics window
    /// (`runtime.metrics_publish_ticks` ticks), µs: how this shard is doing
    /// now, where the tick histogram holds the whole run.
    TickP99WindowUs,
}

pub(crate) const LEVELS: [(Level, &str, &str); 7] = [
    (
        Level::OutboxHeld,
        "outbox_held",
        "Envelopes waiting in the outbox",
    ),
    (
        Level::InboxHeld,
        "inbox_held",
        "Envelopes received, unread by the app",
    ),
    (
        Level::OutboundQueued,
        "outbound_queued_batches",
        "Batches in outbound queues, not yet drained",
    ),
    (
        Level::ClientConnections,
        "client_connections",
        "Client connections open",
    ),
    (
        Level::ClientInboundHeld,
        "client_inbound_held_bytes",
        "Bytes received from clients, unconsumed",
    ),
    (
        Level::ClientSendQueued,
        "client_send_queued_bytes",
        "Bytes queued for clients, unwritten",
    ),
    (
        Level::TickP99WindowUs,
        "tick_p99_window_us",
        "Tick work 99th percentile over the last metrics window, microseconds",
    ),
];
