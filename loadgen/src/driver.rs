//! The bot threads: plain OS threads (pinned unless `--no-pin`), each
//! running its share of the bots in one batched I/O loop
//! ([`crate::event_loop`]) that also sends the thread's measurements to the
//! main thread once per second.
//!
//! Owns [`Plan`] (what every bot needs to know, shared read-only),
//! [`Clock`] (the one clock of the process), [`ThreadCtx`] (the per-thread
//! state bots share: measurements, the entity cache) and the thread start
//! ([`spawn`]). The per-bot logic is [`crate::bot`]; sockets and timers are
//! [`crate::event_loop`]'s. Nothing here touches a socket.

use std::net::SocketAddr;
use std::sync::mpsc::{self, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tessera::client::ClientSessionParams;
use tessera::core::entity::TypeRegistry;
use tessera::core::geom::Rect;
use tessera::core::time::Time;

use crate::cli::IoKind;
use crate::latency::{EntityCache, MoveBook};
use crate::measure::{Interval, IntervalPool};
use crate::scenario::{CellMap, ScenarioParams};

/// The process's one clock: microseconds since the run started. Every bot
/// on every thread reads the same epoch, so a mover's send time and an
/// observer's receipt time compare directly.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    epoch: Instant,
}

impl Clock {
    /// A clock starting now.
    pub fn start() -> Clock {
        Clock {
            epoch: Instant::now(),
        }
    }

    /// Now.
    pub fn now(&self) -> Time {
        Time(self.epoch.elapsed().as_micros() as u64)
    }

    /// How long until `t` (zero if past).
    pub fn until(&self, t: Time) -> Duration {
        t.saturating_since(self.now())
    }
}

/// Everything the bots of a run share (read-only).
#[derive(Debug)]
pub struct Plan {
    /// The server's client address.
    pub addr: SocketAddr,
    /// Bots in the run.
    pub bots: u32,
    /// Bot threads.
    pub threads: usize,
    /// Pin threads to CPUs.
    pub pin: bool,
    /// Bot `i` connects at `ramp * i / bots`.
    pub ramp: Duration,
    /// Bots stop moving at this time.
    pub stop_moves_at: Time,
    /// Bots say Bye at this time (after a settle period for acks).
    pub close_at: Time,
    /// A session not welcomed within this long counts as failed.
    pub handshake_timeout: Duration,
    /// The world's bounds.
    pub world: Rect,
    /// How the bots move.
    pub scenario: ScenarioParams,
    /// Hits per bot per second.
    pub attack_rate: f64,
    /// Space hops per bot per second (scenario `spaces`, else 0): into a
    /// town or a dungeon by type, later back to the world.
    pub space_rate: f64,
    /// Bots hit only targets within 0.8 x this distance (the server's
    /// `hit_range_m`).
    pub hit_range_m: f64,
    /// Distance bands for the per-band figures (the server's `[view]`
    /// bands).
    pub bands: crate::bands::BandEdges,
    /// The layout used to estimate migrations client-side.
    pub cells: CellMap,
    /// How long after a cell crossing the own-stream gap counts as the
    /// migration gap.
    pub migration_window: Duration,
    /// Bounds of each client session.
    pub session: ClientSessionParams,
    /// Bytes read per socket read (the thread's one read buffer).
    pub read_bytes: usize,
    /// Readiness events taken per wait of a bot thread's epoll loop.
    pub events_max: usize,
    /// The bot threads' socket I/O.
    pub io: crate::cli::IoKind,
    /// Provided receive buffers per bot thread (io_uring; a power of two).
    pub uring_buffers: u16,
    /// Bytes per receive buffer (io_uring).
    pub uring_buffer_bytes: u32,
    /// Share of bots whose sessions run every view check (the others
    /// decode every frame, ack and time their own stream, but skip the
    /// other entities' events): bot `i` is checked if
    /// `floor((i + 1) * f) > floor(i * f)`, spreading them evenly.
    pub check_fraction: f64,
    /// Prefix of bot login names.
    pub name_prefix: String,
    /// The key bots sign their login tickets with (none: no ticket, for a
    /// server with `gateway.auth = "none"`).
    pub ticket_key: Option<tessera::server::gateway::TicketKey>,
}

/// A thread's measurements for one interval.
#[derive(Debug)]
pub struct Report {
    /// The thread.
    pub thread: usize,
    /// When the interval ended.
    pub at: Time,
    /// What was measured.
    pub interval: Interval,
    /// True for the thread's last report.
    pub last: bool,
}

/// What the bots of one thread share (owned by the thread's loop and lent
/// to one bot at a time: no cell, no lock).
#[derive(Debug)]
pub struct ThreadCtx {
    /// The run.
    pub plan: Arc<Plan>,
    /// The clock.
    pub clock: Clock,
    /// Sent positions of every bot.
    pub book: Arc<MoveBook>,
    /// Entity types (for decoding snapshots).
    pub registry: Arc<TypeRegistry>,
    /// This interval's measurements.
    pub interval: Interval,
    /// Where the next interval comes from (used ones, handed back by the
    /// main thread).
    pub pool: Arc<IntervalPool>,
    /// Entity -> bot cache.
    pub cache: EntityCache,
}

impl Plan {
    /// True if bot `i` runs every view check (see [`Plan::check_fraction`]).
    pub fn checks(&self, i: u32) -> bool {
        let f = self.check_fraction.clamp(0.0, 1.0);
        (f64::from(i + 1) * f).floor() > (f64::from(i) * f).floor()
    }
}

/// The CPU bot thread `t` of `cpus` pins to: the last CPUs first (the
/// embedded server pins its shards from CPU 0).
pub fn cpu_of(t: usize, cpus: usize) -> usize {
    let cpus = cpus.max(1);
    cpus - 1 - t % cpus
}

/// Starts `plan.threads` bot threads (named `loadgen-N`, which is how
/// [`crate::cpu`] tells them from the server's); each sends a [`Report`]
/// per second on `tx` and a last one when its bots are done. A thread's
/// result is its loop's error, if it failed.
///
/// # Errors
/// If a thread cannot start or cannot pin to its CPU.
pub fn spawn(
    plan: Arc<Plan>,
    clock: Clock,
    book: Arc<MoveBook>,
    pool: Arc<IntervalPool>,
    tx: Sender<Report>,
) -> anyhow::Result<Vec<JoinHandle<anyhow::Result<()>>>> {
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    let mut joins = Vec::with_capacity(plan.threads);
    for t in 0..plan.threads {
        let cpu = plan.pin.then(|| cpu_of(t, cpus));
        let (plan, book, tx) = (plan.clone(), book.clone(), tx.clone());
        let pool = pool.clone();
        let (ready_tx, ready_rx) = mpsc::sync_channel::<Result<(), String>>(1);
        let join = std::thread::Builder::new()
            .name(format!("loadgen-{t}"))
            .spawn(move || {
                if let Some(id) = cpu {
                    if !core_affinity::set_for_current(core_affinity::CoreId { id }) {
                        let _ = ready_tx.send(Err(format!("cannot pin to CPU {id}")));
                        return Ok(());
                    }
                }
                let _ = ready_tx.send(Ok(()));
                let ctx = ThreadCtx {
                    registry: Arc::new(TypeRegistry::with_builtins()),
                    interval: pool.take(),
                    pool,
                    cache: EntityCache::default(),
                    plan,
                    clock,
                    book,
                };
                match ctx.plan.io {
                    IoKind::IoUring => {
                        crate::uring_loop::run(t, ctx, tx).map_err(anyhow::Error::from)
                    }
                    // `run` resolved `Auto` before the plan was made.
                    IoKind::Epoll | IoKind::Auto => {
                        crate::event_loop::run(t, ctx, tx).map_err(anyhow::Error::from)
                    }
                }
            })
            .map_err(|e| anyhow::anyhow!("starting loadgen thread {t}: {e}"))?;
        match ready_rx.recv() {
            Ok(Ok(())) => joins.push(join),
            Ok(Err(e)) => anyhow::bail!("loadgen thread {t}: {e}"),
            Err(_) => anyhow::bail!("loadgen thread {t} ended before starting"),
        }
    }
    Ok(joins)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checked_of(f: f64, bots: u32) -> Vec<u32> {
        let plan = crate::run::tests::tests_plan(f);
        (0..bots).filter(|&i| plan.checks(i)).collect()
    }

    #[test]
    fn the_checked_bots_are_the_fraction_asked_spread_evenly() {
        assert_eq!(checked_of(1.0, 1000).len(), 1000);
        assert!(checked_of(0.0, 1000).is_empty());
        let tenth = checked_of(0.1, 1000);
        assert_eq!(tenth.len(), 100);
        assert!(tenth.windows(2).all(|w| w[1] - w[0] == 10), "{tenth:?}");
        assert_eq!(checked_of(0.5, 20).len(), 10);
    }

    #[test]
    fn bot_threads_pin_from_the_last_cpu() {
        assert_eq!(cpu_of(0, 2), 1);
        assert_eq!(cpu_of(1, 2), 0);
        assert_eq!(cpu_of(2, 2), 1);
        assert_eq!(cpu_of(0, 0), 0);
    }
}
