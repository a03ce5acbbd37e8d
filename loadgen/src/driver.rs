//! The bot threads: pinned glommio executors, each running its share of the
//! bots as tasks, and a reporter task sending that thread's measurements to
//! the main thread once per second.
//!
//! Owns [`Plan`] (what every bot needs to know, shared read-only),
//! [`Clock`] (the one clock of the process), [`ThreadCtx`] (the per-thread
//! state bots share: measurements, the entity cache, a read buffer) and the
//! thread start ([`spawn`]). The per-connection logic is [`crate::bot`].

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::{Duration, Instant};

use glommio::timer::Timer;
use glommio::{LocalExecutorBuilder, Placement};
use tessera::client::ClientSessionParams;
use tessera::core::entity::TypeRegistry;
use tessera::core::geom::Rect;
use tessera::core::time::Time;

use crate::latency::{EntityCache, MoveBook};
use crate::measure::Interval;
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
    /// Executor threads.
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
    /// Bytes read per socket read.
    pub read_bytes: usize,
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

/// What the bots of one thread share.
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
    pub interval: RefCell<Interval>,
    /// Entity -> bot cache.
    pub cache: RefCell<EntityCache>,
    /// The read buffer every bot of this thread reads into.
    pub scratch: RefCell<Vec<u8>>,
    /// Bots of this thread still running.
    pub running: Cell<usize>,
}

/// Starts `plan.threads` executor threads running the bots; each sends a
/// [`Report`] per second on `tx` and a last one when its bots are done.
///
/// # Errors
/// If an executor cannot start (e.g. a CPU is unavailable).
pub fn spawn(
    plan: Arc<Plan>,
    clock: Clock,
    book: Arc<MoveBook>,
    tx: Sender<Report>,
) -> anyhow::Result<Vec<glommio::ExecutorJoinHandle<()>>> {
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    let mut joins = Vec::with_capacity(plan.threads);
    for t in 0..plan.threads {
        // Last CPUs first: the embedded server pins its shards from CPU 0.
        let placement = if plan.pin {
            Placement::Fixed(cpus - 1 - t % cpus)
        } else {
            Placement::Unbound
        };
        let (plan, book, tx) = (plan.clone(), book.clone(), tx.clone());
        let join = LocalExecutorBuilder::new(placement)
            .name(&format!("loadgen-{t}"))
            .spawn(move || async move { thread_main(t, plan, clock, book, tx).await })
            .map_err(|e| anyhow::anyhow!("starting loadgen thread {t}: {e}"))?;
        joins.push(join);
    }
    Ok(joins)
}

async fn thread_main(
    t: usize,
    plan: Arc<Plan>,
    clock: Clock,
    book: Arc<MoveBook>,
    tx: Sender<Report>,
) {
    let mine: Vec<u32> = (0..plan.bots)
        .filter(|i| *i as usize % plan.threads == t)
        .collect();
    let ctx = Rc::new(ThreadCtx {
        scratch: RefCell::new(vec![0; plan.read_bytes]),
        plan,
        clock,
        book,
        registry: Arc::new(TypeRegistry::with_builtins()),
        interval: RefCell::new(Interval::default()),
        cache: RefCell::new(EntityCache::default()),
        running: Cell::new(mine.len()),
    });
    let reporter = glommio::spawn_local(report_loop(t, ctx.clone(), tx));
    let tasks: Vec<_> = mine
        .into_iter()
        .map(|i| glommio::spawn_local(crate::bot::run(ctx.clone(), i)))
        .collect();
    for task in tasks {
        task.await;
    }
    reporter.await;
}

async fn report_loop(thread: usize, ctx: Rc<ThreadCtx>, tx: Sender<Report>) {
    let period = Duration::from_secs(1);
    let mut next = ctx.clock.now() + period;
    loop {
        Timer::new(ctx.clock.until(next)).await;
        next = next + period;
        let last = ctx.running.get() == 0;
        let interval = std::mem::take(&mut *ctx.interval.borrow_mut());
        let report = Report {
            thread,
            at: ctx.clock.now(),
            interval,
            last,
        };
        if tx.send(report).is_err() || last {
            return;
        }
    }
}
