//! One shard: the tick loop of one pinned glommio executor.
//!
//! Every `runtime.tick_ms` (deadlines on a grid from the runtime's epoch,
//! shard `i` of `n` offset by `i/n` of a tick: [`tick_offset`]) a shard:
//! 1. **drains** its inbound queues into its inbox (unless the inbox is at
//!    `mesh.inbox_items_max`, which pushes back on the senders);
//! 2. calls the application's `on_tick(now, inbox, outbox, port)`; the
//!    client port is served by the batched socket loop of
//!    `runtime::gateway_io`, pumped right before the tick (fresh input),
//!    right after it (the tick's output, one write per client) and every
//!    `gateway.io_poll_ms` while the shard sleeps (socket IO is never inside
//!    the measured phases: it has its own `client_io` histogram);
//! 3. **flushes** its outbox: one batch per destination;
//! 4. records metrics, raises the stall alarm if steps 1-3 took longer than
//!    `runtime.tick_budget_ms` (counter + a log line naming the phase that took
//!    the time), and sleeps on a glommio timer until the next deadline. After
//!    an overrun the next tick runs at once, and deadlines that passed
//!    entirely meanwhile are skipped (counted) rather than burst through.
//!
//! # Staggered ticks
//! A batch flushed at the end of a tick is read at the receiver's next tick
//! start. On one grid for all shards that is a whole tick per hop, so a
//! round trip between shards (a client's input to its real on another
//! shard, and the real's view batch back to the proxy) took two ticks, and a
//! real that migrated away from its proxy's shard went two ticks silent
//! (issue 21, "the migration stall"). Offsetting shard `i` by `i/n` of a
//! tick makes the hops of any round trip add up to exactly one tick (`j - i`
//! and `i - j` steps of `1/n`, modulo `n`) while each tick's work fits in
//! `tick/n`; a longer tick delays a hop to the next slot, never loses one.
//!
//! # Shutdown
//! When the stop flag is seen (between ticks, so the current tick completes),
//! the shard stops accepting clients, calls the application's `on_shutdown`
//! (a last chance to queue bytes for clients), closes every client
//! connection (Closed{Shutdown}; queues are written for at most
//! `gateway.linger_ms`, while the rest of the shutdown goes on), stops
//! calling `on_tick` and keeps flushing its outbox and
//! draining its queues until every shard has flushed everything it had; then a
//! last drain hands whatever arrived to the application's `on_stop`. If that
//! does not finish within `runtime.shutdown_drain_ms_max` (a crashed peer), the
//! remainder is counted as `dropped_at_shutdown` and logged.
//!
//! Runs on: its own executor thread. Owns: the application value, its inbox
//! and outbox, its ends of the mesh, its local histograms.

use super::gateway_io::{GatewayIo, IoParams};
use super::mesh::{self, DrainReport, ShardLinks};
use super::metrics::{Hist, LocalHists, ShardStats};
use super::viewer::ViewBoard;
use crate::core::time::Time;
use crate::shard::inbox::{Inbox, InboxBuf};
use crate::shard::outbox::{FlushReport, Outbox};
use crate::shard::port::{ClientPort, CloseReason, PortCounters, PortParams};
use crate::shard::{Count, Level, MetricSink, ShardApp, ShardContext, ViewSink};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A stall is logged at most this often per shard (it is always counted).
const STALL_LOG_INTERVAL: Duration = Duration::from_secs(1);
/// How often a shard retries flushing and draining during shutdown.
const SHUTDOWN_POLL: Duration = Duration::from_millis(1);
/// How often the last wait for closing client sockets pumps them.
const CLOSE_POLL: Duration = Duration::from_millis(1);
/// Beyond `gateway.linger_ms`, how long that wait gives the last sockets.
const CLOSE_SLACK: Duration = Duration::from_millis(50);

/// State shared by all shards of one runtime.
#[derive(Debug)]
pub(crate) struct Shared {
    /// Set to stop ticking (by `shutdown()`, a signal, or a crashing shard).
    pub(crate) stop: Arc<AtomicBool>,
    /// Shards that have flushed everything during shutdown (or crashed).
    pub(crate) done_sending: AtomicUsize,
    /// The instant that maps to `Time::ZERO`.
    pub(crate) epoch: Instant,
    /// Shards that crashed, by index (their lanes are dropped, counted).
    pub(crate) dead: Vec<AtomicBool>,
    /// Inbound queues of crashed shards, kept so that what is in them is
    /// counted as dropped once every thread has stopped.
    pub(crate) orphans: Mutex<Vec<(usize, Vec<super::mesh::Queue>)>>,
    /// Client connections moving between shards (`runtime::handoff`).
    pub(crate) handoffs: Arc<super::handoff::Handoffs>,
}

impl Shared {
    pub(crate) fn now(&self, at: Instant) -> Time {
        let micros = at.saturating_duration_since(self.epoch).as_micros();
        Time(u64::try_from(micros).unwrap_or(u64::MAX))
    }
}

/// How far shard `index` of `shards` ticks after shard 0: `index/shards` of
/// a `tick` (see "Staggered ticks" in the module doc). Zero for one shard
/// and for an index out of range.
pub fn tick_offset(index: u16, shards: u16, tick: Duration) -> Duration {
    if index >= shards {
        return Duration::ZERO;
    }
    let nanos = tick.as_nanos() * u128::from(index) / u128::from(shards);
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

/// Everything one shard needs, moved onto its thread.
#[derive(Debug)]
pub(crate) struct ShardParams {
    pub(crate) ctx: ShardContext,
    pub(crate) tick_budget: Duration,
    pub(crate) shutdown_drain_max: Duration,
    pub(crate) metrics_publish_ticks: u64,
    pub(crate) batch_items_max: usize,
    pub(crate) outbox_items_max: usize,
    pub(crate) inbox_items_max: usize,
    pub(crate) port: PortParams,
    /// The client socket loop's backend and its settings.
    pub(crate) io: IoParams,
    /// The live viewer's board (with the admin endpoint on) and how often
    /// this shard publishes to it (`admin.viewer_publish_ticks`).
    pub(crate) viewer: Option<(Arc<ViewBoard>, u64)>,
}

/// Stops the other shards if this one unwinds, and counts it as done
/// sending (once: not again if it had announced that already).
struct PanicGuard<'a> {
    shared: &'a Shared,
    announced: Cell<bool>,
}

impl PanicGuard<'_> {
    /// Announces (once) that this shard has nothing more to send.
    fn announce(&self) {
        if !self.announced.replace(true) {
            self.shared.done_sending.fetch_add(1, Ordering::AcqRel);
        }
    }
}

impl Drop for PanicGuard<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.shared.stop.store(true, Ordering::Release);
            self.announce();
        }
    }
}

struct Shard<A> {
    p: ShardParams,
    /// Always `Some` until `run` takes it back at the very end (an `Option`
    /// only so that `Shard` may implement `Drop`).
    app: Option<A>,
    links: ShardLinks,
    inbox: InboxBuf,
    outbox: Outbox,
    /// The client connections; shared with the socket loop, borrowed
    /// mutably only inside `on_tick`/`on_shutdown` and a pump (never across
    /// an await).
    port: Rc<RefCell<ClientPort>>,
    /// The port's counters as last added to `stats`.
    port_seen: PortCounters,
    /// The listener and client sockets (`None` when the gateway is off).
    gateway: Option<GatewayIo>,
    /// How long the shard sleeps between socket pumps.
    io_poll: Duration,
    stats: Arc<ShardStats>,
    hists: LocalHists,
    sink: MetricSink,
    /// Filled for the viewer every `admin.viewer_publish_ticks` ticks.
    view_sink: Option<ViewSink>,
    shared: Arc<Shared>,
    last_stall_log: Option<Instant>,
}

/// Runs the shard until shutdown; returns the application. With a
/// `listener`, client connections are accepted on it into the port.
pub(crate) async fn run<A: ShardApp>(
    p: ShardParams,
    app: A,
    links: ShardLinks,
    stats: Arc<ShardStats>,
    shared: Arc<Shared>,
    listener: Option<std::net::TcpListener>,
) -> A {
    let outbox = Outbox::new(
        p.ctx.shard,
        p.ctx.shards,
        p.batch_items_max,
        p.outbox_items_max,
    );
    let port = Rc::new(RefCell::new(ClientPort::attached(p.port.clone())));
    let handoffs = (shared.handoffs.clone(), p.ctx.shard.index);
    let gateway = listener.and_then(|l| match GatewayIo::start(l, port.clone(), handoffs, &p.io) {
        Ok(io) => Some(io),
        Err(err) => {
            // Only an out-of-resources epoll_create or io_uring_setup can
            // fail here (io_uring was probed at start); the listener itself
            // was bound and checked at start.
            tracing::error!(shard = %p.ctx.shard, %err, "gateway: cannot start the socket loop; this shard takes no clients");
            None
        }
    });
    let io_poll = match gateway {
        Some(_) => Duration::from_millis(p.port.io_poll_ms.max(1)),
        None => p.ctx.tick,
    };
    let view_sink = p.viewer.as_ref().map(|(board, _)| board.sink());
    let mut shard = Shard {
        p,
        app: Some(app),
        links,
        inbox: InboxBuf::default(),
        outbox,
        gateway,
        io_poll,
        port,
        port_seen: PortCounters::default(),
        stats,
        hists: LocalHists::new(),
        sink: MetricSink::default(),
        view_sink,
        shared: shared.clone(),
        last_stall_log: None,
    };
    let guard = PanicGuard {
        shared: &shared,
        announced: Cell::new(false),
    };
    shard.tick_loop().await;
    shard.shutdown(&guard).await;
    shard.app.take().expect("app present until the end")
}

impl<A: ShardApp> Shard<A> {
    async fn tick_loop(&mut self) {
        let tick = self.p.ctx.tick;
        // Deadlines on this shard's grid: epoch + offset + k * tick.
        let grid = self.shared.epoch + tick_offset(self.p.ctx.shard.index, self.p.ctx.shards, tick);
        let since =
            Instant::now().saturating_duration_since(grid).as_nanos() / tick.as_nanos().max(1);
        let mut next = grid + tick * u32::try_from(since + 1).unwrap_or(u32::MAX);
        let mut ticks: u64 = 0;
        while !self.shared.stop.load(Ordering::Acquire) {
            self.pump_io();
            self.tick_once();
            self.pump_io();
            ticks += 1;
            if ticks % self.p.metrics_publish_ticks == 0 {
                self.publish();
            }
            self.publish_view(ticks);
            next += tick;
            let now = Instant::now();
            if next <= now {
                // Late: the next tick runs at once; deadlines that passed
                // entirely meanwhile are skipped (counted), not burst through.
                let missed = (now - next).as_nanos() / tick.as_nanos().max(1);
                let missed = u32::try_from(missed).unwrap_or(u32::MAX);
                self.stats.add(Count::TicksSkipped, u64::from(missed));
                next += tick * missed;
            }
            self.sleep_until(next).await;
        }
    }

    /// Sleeps until `deadline`, pumping the client sockets every
    /// `gateway.io_poll_ms` meanwhile.
    async fn sleep_until(&mut self, deadline: Instant) {
        loop {
            let now = Instant::now();
            let left = deadline.saturating_duration_since(now);
            if left.is_zero() {
                return;
            }
            if left <= self.io_poll {
                glommio::timer::sleep(left).await;
                return; // the tick's own pump follows
            }
            glommio::timer::sleep(self.io_poll).await;
            self.pump_io();
        }
    }

    /// One pass of the client socket loop (timed as `client_io`).
    fn pump_io(&mut self) {
        if let Some(gateway) = &mut self.gateway {
            let t0 = Instant::now();
            gateway.pump(t0);
            self.hists.record(Hist::ClientIo, micros(t0.elapsed()));
        }
    }

    fn tick_once(&mut self) {
        let t0 = Instant::now();
        let drained = if self.inbox.len() < self.p.inbox_items_max {
            let r = self.links.drain(&mut self.inbox);
            self.hists.record(Hist::InboundQueued, r.queued);
            r
        } else {
            self.stats.add(Count::InboxFullTicks, 1);
            DrainReport::default()
        };
        let t1 = Instant::now();
        let now = self.shared.now(t1);
        let app = self.app.as_mut().expect("app present until the end");
        {
            let mut port = self.port.borrow_mut();
            app.on_tick(
                now,
                Inbox::new(&mut self.inbox),
                &mut self.outbox,
                &mut port,
            );
        }
        let t2 = Instant::now();
        let flushed = mesh::flush(&mut self.outbox, &self.links.tx, &self.shared.dead);
        let t3 = Instant::now();
        self.account(drained, flushed);
        self.account_port();
        let phases = [
            (Hist::Drain, t1 - t0),
            (Hist::App, t2 - t1),
            (Hist::Flush, t3 - t2),
        ];
        for (h, d) in phases {
            self.hists.record(h, micros(d));
        }
        let work = t3 - t0;
        self.hists.record(Hist::Tick, micros(work));
        self.stats.add(Count::Ticks, 1);
        if work > self.p.tick_budget {
            self.stall(now, work, phases, t3);
        }
    }

    fn account(&mut self, d: DrainReport, f: FlushReport) {
        let s = &self.stats;
        s.add(Count::BatchesReceived, d.batches);
        s.add(Count::MessagesReceived, d.messages);
        s.add(Count::BatchesSent, f.batches);
        s.add(Count::MessagesSent, f.messages);
        s.add(Count::QueueFull, f.queue_full);
        s.add(Count::DroppedDisconnected, f.dropped);
        s.add(Count::OutboxRefused, self.outbox.take_refused());
        s.set(Level::OutboxHeld, self.outbox.held() as u64);
        s.set(Level::InboxHeld, self.inbox.len() as u64);
        s.set(Level::OutboundQueued, self.links.outbound_queued() as u64);
    }

    /// Adds what the port counted since last time to the shard's counters.
    fn account_port(&mut self) {
        let port = self.port.borrow();
        let (now, seen) = (port.counters(), &mut self.port_seen);
        let s = &self.stats;
        s.add(Count::ClientOpened, now.opened - seen.opened);
        for r in CloseReason::ALL {
            let i = r.index();
            s.add(Count::client_closed(r), now.closed[i] - seen.closed[i]);
        }
        s.add(Count::ClientBytesIn, now.bytes_in - seen.bytes_in);
        s.add(Count::ClientBytesOut, now.bytes_out - seen.bytes_out);
        s.add(Count::ClientWrites, now.writes - seen.writes);
        s.add(Count::ClientHandedOff, now.handed_off - seen.handed_off);
        s.add(Count::ClientAdopted, now.adopted - seen.adopted);
        s.add(
            Count::ClientHandoffFailed,
            now.handoffs_failed - seen.handoffs_failed,
        );
        seen.clone_from(now);
        s.set(Level::ClientConnections, port.open_connections() as u64);
        s.set(Level::ClientInboundHeld, port.inbound_held() as u64);
        s.set(Level::ClientSendQueued, port.outbound_held() as u64);
    }

    fn stall(&mut self, now: Time, work: Duration, phases: [(Hist, Duration); 3], at: Instant) {
        self.stats.add(Count::Stalls, 1);
        let quiet = self
            .last_stall_log
            .is_some_and(|t| at.duration_since(t) < STALL_LOG_INTERVAL);
        if quiet {
            return;
        }
        self.last_stall_log = Some(at);
        let (worst, took) = phases
            .iter()
            .max_by_key(|(_, d)| *d)
            .map(|&(h, d)| (h, d))
            .expect("three phases");
        let phase = match worst {
            Hist::Drain => "drain",
            Hist::App => "app",
            _ => "flush",
        };
        tracing::warn!(
            shard = %self.p.ctx.shard,
            phase,
            phase_us = micros(took),
            tick_us = micros(work),
            budget_us = micros(self.p.tick_budget),
            ?now,
            "stall: tick overran its budget"
        );
    }

    fn publish(&mut self) {
        // Before the window's samples are folded in (and reset); a window
        // whose publish is skipped (lock busy) spans two periods.
        let window_p99 = self.hists.quantile(Hist::Tick, 0.99);
        self.stats.set(Level::TickP99WindowUs, window_p99);
        self.stats.try_publish(&mut self.hists);
        if let Some(app) = &self.app {
            app.export_metrics(&mut self.sink);
        }
        self.stats.try_publish_app(&mut self.sink);
    }

    /// Every `admin.viewer_publish_ticks` ticks: the application fills the
    /// viewer's sink, published with `try_lock` only (never waits).
    fn publish_view(&mut self, ticks: u64) {
        let (Some((board, every)), Some(sink)) = (&self.p.viewer, &mut self.view_sink) else {
            return;
        };
        if ticks % every != 0 {
            return;
        }
        let now = self.shared.now(Instant::now());
        if let Some(app) = &mut self.app {
            app.export_view(now, sink);
        }
        board.try_publish(usize::from(self.p.ctx.shard.index), sink);
    }

    async fn shutdown(&mut self, guard: &PanicGuard<'_>) {
        if let Some(gateway) = &mut self.gateway {
            gateway.stop_accepting();
        }
        {
            let now = self.shared.now(Instant::now());
            let mut port = self.port.borrow_mut();
            let app = self.app.as_mut().expect("app present");
            app.on_shutdown(now, &mut port);
            port.shutdown_all();
        }
        let n = usize::from(self.p.ctx.shards);
        let deadline = Instant::now() + self.p.shutdown_drain_max;
        loop {
            let d = self.links.drain(&mut self.inbox);
            let f = mesh::flush(&mut self.outbox, &self.links.tx, &self.shared.dead);
            self.account(d, f);
            if self.outbox.held() == 0 {
                guard.announce();
            }
            if self.shared.done_sending.load(Ordering::Acquire) >= n {
                break;
            }
            if Instant::now() >= deadline {
                let stuck = self.outbox.held() as u64;
                tracing::error!(shard = %self.p.ctx.shard, stuck, "shutdown drain timed out");
                self.stats.add(Count::DroppedAtShutdown, stuck);
                break;
            }
            self.pump_io();
            glommio::timer::sleep(SHUTDOWN_POLL).await;
        }
        let d = self.links.drain(&mut self.inbox);
        self.account(d, FlushReport::default());
        let now = self.shared.now(Instant::now());
        let inbox = Inbox::new(&mut self.inbox);
        self.app.as_mut().expect("app present").on_stop(now, inbox);
        let unread = self.inbox.clear() as u64;
        if unread > 0 {
            tracing::warn!(shard = %self.p.ctx.shard, unread, "envelopes unread at stop");
            self.stats.add(Count::DroppedAtShutdown, unread);
        }
        self.stats.set(Level::InboxHeld, 0);
        self.close_clients().await;
        self.publish();
    }
}

impl<A: ShardApp> Shard<A> {
    /// Waits (at most `gateway.linger_ms`) for the client connections closed
    /// at the start of the shutdown to write their queues and close.
    async fn close_clients(&mut self) {
        if self.gateway.is_some() {
            let linger = Duration::from_millis(self.p.port.linger_ms);
            let deadline = Instant::now() + linger + CLOSE_SLACK;
            let left = loop {
                self.pump_io();
                let live = self.gateway.as_ref().map_or(0, GatewayIo::live);
                if live == 0 || Instant::now() >= deadline {
                    break live;
                }
                glommio::timer::sleep(CLOSE_POLL).await;
            };
            if left > 0 {
                tracing::warn!(shard = %self.p.ctx.shard, left, "client sockets still flushing at exit: closed");
            }
        }
        self.port.borrow_mut().discard_events();
        self.account_port();
    }
}

impl<A> Drop for Shard<A> {
    /// On a crash: mark this shard dead, count what it held as dropped, and
    /// hand its inbound queues to the runtime to count the rest after join.
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let me = usize::from(self.p.ctx.shard.index);
        self.shared.dead[me].store(true, Ordering::Release);
        let lost = self.inbox.clear() + self.outbox.held();
        self.stats.add(Count::DroppedDisconnected, lost as u64);
        let rx = std::mem::take(&mut self.links.rx);
        let mut orphans = self
            .shared
            .orphans
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        orphans.push((me, rx));
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::tick_offset;
    use std::time::Duration;

    /// The wait from shard `i`'s tick to shard `j`'s next one.
    fn hop(i: u16, j: u16, n: u16, tick: Duration) -> Duration {
        let (a, b) = (tick_offset(i, n, tick), tick_offset(j, n, tick));
        if b > a {
            b - a
        } else {
            tick + b - a
        }
    }

    #[test]
    fn a_round_trip_between_any_two_shards_is_one_tick() {
        let tick = Duration::from_millis(50);
        assert_eq!(tick_offset(0, 1, tick), Duration::ZERO);
        assert_eq!(tick_offset(1, 2, tick), Duration::from_millis(25));
        assert_eq!(tick_offset(5, 2, tick), Duration::ZERO, "out of range");
        for n in 2..=7u16 {
            for i in 0..n {
                assert!(tick_offset(i, n, tick) < tick);
                for j in (0..n).filter(|&j| j != i) {
                    let trip = hop(i, j, n, tick) + hop(j, i, n, tick);
                    assert_eq!(trip, tick, "{i} <-> {j} of {n}");
                }
            }
        }
    }
}
