//! The application's side of a shard: [`ShardApp`] and [`ShardContext`].
//!
//! A driver (the runtime, or a sans-IO test harness) knows nothing of cells,
//! entities or the space tree. Each shard owns one application value (built
//! on the shard's own thread by the factory given to the driver, e.g.
//! `runtime::Runtime::start`) and calls it once per tick with the time, what
//! arrived since the last tick, and an outbox for what it wants sent. The
//! application is a sans-IO state machine in the quinn shape: it never sees
//! an executor, a queue, a socket or a clock.
//!
//! Runs on: the shard's thread. Owns: nothing but the trait and the
//! context; it must not touch executors, queues, sockets or clocks.

use super::inbox::Inbox;
use super::metric_sink::MetricSink;
use super::outbox::Outbox;
use super::port::ClientPort;
use super::view_sink::ViewSink;
use crate::core::ids::ShardId;
use crate::core::load::CostClock;
use crate::core::time::Time;
use std::time::Duration;

/// Where an application instance runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardContext {
    /// This shard.
    pub shard: ShardId,
    /// How many shards this node runs (shard indices are `0..shards`).
    pub shards: u16,
    /// The tick period.
    pub tick: Duration,
    /// Unix time (seconds) at the world's `Time::ZERO`: what login tickets'
    /// expiries are compared with (`now` stays monotonic).
    pub unix_at_start_s: u64,
}

impl ShardContext {
    /// Every shard of this node, in index order.
    pub fn all_shards(&self) -> impl Iterator<Item = ShardId> + '_ {
        (0..self.shards).map(move |index| ShardId {
            node: self.shard.node,
            index,
        })
    }
}

/// The application a shard drives (the server's cell host).
pub trait ShardApp: Send + 'static {
    /// One tick at time `now`.
    ///
    /// `inbox` yields the envelopes received since the last tick (plus any the
    /// application left unread last time), in FIFO order per source shard.
    /// Envelopes not taken stay for the next tick. What is pushed to `out` is
    /// flushed after this returns, as one batch per destination.
    ///
    /// `port` holds this shard's client connections: events, input received
    /// since the last tick, and send queues the runtime writes out after this
    /// returns (see [`ClientPort`]).
    fn on_tick(&mut self, now: Time, inbox: Inbox<'_>, out: &mut Outbox, port: &mut ClientPort);

    /// Takes the clock to stamp its own work with (load measurement);
    /// the runtime calls it once, on the shard's thread, right after the
    /// factory built the application (the runtime gives its
    /// `runtime::MonotonicClock`).
    fn set_cost_clock(&mut self, clock: Box<dyn CostClock + Send>) {
        let _ = clock;
    }

    /// Shutdown, before [`ShardApp::on_stop`]: the last chance to queue bytes
    /// for clients (a goodbye). The port may hold events and input that
    /// arrived since the last tick; no new connection is accepted any more. After it returns the runtime closes every
    /// connection (each gets Closed{Shutdown}), writing what is queued for at
    /// most `gateway.linger_ms`.
    fn on_shutdown(&mut self, now: Time, port: &mut ClientPort) {
        let _ = (now, port);
    }

    /// Shutdown: every shard has stopped ticking and flushed its outbox, and
    /// `inbox` holds everything still in flight to this shard. Nothing can be
    /// sent any more. Envelopes left unread are counted as dropped.
    fn on_stop(&mut self, now: Time, inbox: Inbox<'_>) {
        let _ = (now, inbox);
    }

    /// Reports application metrics; called every
    /// `runtime.metrics_publish_ticks` ticks and at shutdown.
    fn export_metrics(&self, sink: &mut MetricSink) {
        let _ = sink;
    }

    /// Reports what the live viewer shows (cells, entities, the events since
    /// the last call); called every `admin.viewer_publish_ticks` ticks while
    /// the admin endpoint is on, between ticks. `sink` bounds what it takes
    /// (see [`ViewSink`]).
    fn export_view(&mut self, now: Time, sink: &mut ViewSink) {
        let _ = (now, sink);
    }
}
