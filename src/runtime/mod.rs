//! The server runtime: the only code that touches executors, queues, clocks,
//! sockets, threads and signals. It is the IO adapter under the shard
//! contract ([`crate::shard`]): it drives any [`ShardApp`] and feeds and
//! drains the contract's [`Inbox`](crate::shard::Inbox),
//! [`Outbox`](crate::shard::Outbox) and [`ClientPort`](crate::shard::ClientPort) from its queues and
//! sockets; the application never imports this module (only the server's
//! drivers that start it do).
//!
//! # Model
//!
//! ```text
//!   shard 0 (glommio, CPU c0)      shard 1 (glommio, CPU c1)     ...
//!   ┌────────────────────────┐      ┌────────────────────────┐
//!   │ drain ─> app.on_tick ─>│flush │ drain ─> app.on_tick ─>│flush
//!   │  ^        (ShardApp)   │──┐   │  ^                     │──┐
//!   └──┼─────────────────────┘  │   └──┼─────────────────────┘  │
//!      └──── queue (1,0) <──────┼──────┘      queue (0,1) <─────┘
//!   one bounded FIFO queue of batches per ordered pair (mesh)
//!
//!   admin thread: GET /metrics  <── per-shard counters and histograms
//!                 GET / /api/*  <── the viewer board (shards publish with
//!                                   try_lock every few ticks; docs/viewer.md)
//! ```
//!
//! - [`Runtime::start`] spawns one glommio `LocalExecutor` per shard, each on
//!   its own thread, pinned with `Placement::Fixed(cpus[i % cpus.len()])`, so
//!   more shards than CPUs work (several shards then share a core).
//! - Each shard runs the tick loop of [`shard`]: drain, [`ShardApp::on_tick`],
//!   flush, sleep until the next deadline on a glommio timer. No busy spinning
//!   anywhere: a shard is parked between ticks.
//! - Messages are [`crate::wire::Envelope`]s, batched per destination per tick
//!   over the [`mesh`] (see there why `try_send` + a per-tick drain).
//! - The monotonic clock is mapped onto [`crate::core::time::Time`]: microseconds since
//!   the runtime's start, the same epoch on every shard.
//! - Client TCP connections reach the application as bytes through the
//!   shard-local [`ClientPort`](crate::shard::ClientPort) passed to `on_tick`: when `gateway.enabled`,
//!   shard 0 binds `gateway.listen_addr` (port 0 allowed) and every other
//!   shard binds the address it resolved (SO_REUSEPORT: the kernel spreads
//!   connections over shards); one batched socket loop per shard
//!   (`gateway_io`: io_uring or epoll, `gateway.io_backend`) fills and drains the port right before and after
//!   each tick and every `gateway.io_poll_ms` between ticks. [`RuntimeHandle::client_addr`] gives the
//!   address.
//! - [`RuntimeHandle::shutdown`] (or SIGINT/SIGTERM after
//!   [`RuntimeHandle::stop_on_signals`]) stops ticking after the current
//!   tick, drains the mesh into the applications' `on_stop`, and
//!   [`RuntimeHandle::join`] joins every thread and returns the applications.
//!
//! Owns: the executors, the mesh queues and their flush ([`mesh`]), the tick
//! loop ([`shard`]), the socket loop and hand-over (`gateway_io`, `handoff`),
//! the published stats and their rendering ([`metrics`]), the viewer board
//! ([`viewer`]) and the admin endpoint ([`admin`]), and the OS clock
//! ([`MonotonicClock`]). The runtime is generic over the application: the
//! cell host (`crate::server`) plugs in as a [`ShardApp`].

pub mod admin;
mod admin_api;
pub mod buf_ring;
mod clock;
mod gateway_epoll;
mod gateway_io;
mod gateway_uring;
mod handoff;
mod launch;
pub use gateway_uring::UringError;
pub mod mesh;
pub mod metrics;
pub mod shard;
pub mod viewer;

pub use clock::MonotonicClock;
pub use metrics::{Hist, ShardStats};
pub use shard::tick_offset;

use crate::config::Config;
use crate::core::ids::ShardId;
use crate::shard::{Count, PortParams, ShardApp, ShardContext};
use admin::{AdminParams, AdminServer};
use glommio::Placement;
use launch::{gateway_addr, Launch, BIND_WAIT_MAX};
use shard::{ShardParams, Shared};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use viewer::ViewBoard;

/// Why the runtime could not start or did not stop cleanly.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// `runtime.cpus` names a CPU this process may not run on.
    #[error("config key `runtime.cpus`: CPU {cpu} is not available (available: {available:?})")]
    CpuUnavailable {
        /// The CPU asked for.
        cpu: u16,
        /// The CPUs this process may use.
        available: Vec<usize>,
    },
    /// No CPU could be found to run on.
    #[error("no CPU available to run shards on")]
    NoCpu,
    /// An executor could not be created.
    #[error("cannot start shard {shard}: {message}")]
    Spawn {
        /// The shard.
        shard: ShardId,
        /// glommio's error.
        message: String,
    },
    /// The admin endpoint could not be bound.
    #[error("config key `admin.listen_addr`: cannot serve on {addr}: {source}")]
    Admin {
        /// The address.
        addr: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A shard could not listen for clients.
    #[error("config key `gateway.listen_addr`: cannot listen on {addr}: {source}")]
    Gateway {
        /// The address.
        addr: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// `gateway.io_backend = "io_uring"` and the kernel (or a seccomp
    /// profile) refuses what it needs.
    #[error(transparent)]
    IoBackend(#[from] UringError),
    /// A shard's thread panicked or its executor failed.
    #[error("shard {shard} failed: {message}")]
    ShardFailed {
        /// The shard.
        shard: ShardId,
        /// The panic or error message.
        message: String,
    },
    /// Installing signal handlers failed.
    #[error("cannot install signal handlers: {0}")]
    Signals(std::io::Error),
}

/// Starts runtimes; see the module doc.
#[derive(Debug)]
pub struct Runtime;

/// A running set of shards.
#[derive(Debug)]
pub struct RuntimeHandle<A: ShardApp> {
    joins: Vec<(ShardId, glommio::ExecutorJoinHandle<A>)>,
    stats: Vec<Arc<ShardStats>>,
    shared: Arc<Shared>,
    admin: Option<AdminServer>,
    /// What the shards publish for the live viewer (with the admin endpoint).
    board: Option<Arc<ViewBoard>>,
    client_addr: Option<SocketAddr>,
    signals: Vec<signal_hook::SigId>,
}

/// The CPUs shards are placed on, in order.
fn resolve_cpus(config: &Config) -> Result<Vec<usize>, RuntimeError> {
    let available: Vec<usize> = core_affinity::get_core_ids()
        .unwrap_or_default()
        .into_iter()
        .map(|c| c.id)
        .collect();
    if config.runtime.cpus.is_empty() {
        if available.is_empty() {
            return Err(RuntimeError::NoCpu);
        }
        return Ok(available);
    }
    config
        .runtime
        .cpus
        .iter()
        .map(|&cpu| {
            if available.contains(&usize::from(cpu)) {
                Ok(usize::from(cpu))
            } else {
                Err(RuntimeError::CpuUnavailable {
                    cpu,
                    available: available.clone(),
                })
            }
        })
        .collect()
}

fn shard_params(config: &Config, ctx: ShardContext) -> ShardParams {
    let r = &config.runtime;
    let m = &config.mesh;
    ShardParams {
        ctx,
        tick_budget: Duration::from_millis(r.tick_budget_ms),
        shutdown_drain_max: Duration::from_millis(r.shutdown_drain_ms_max),
        metrics_publish_ticks: u64::from(r.metrics_publish_ticks),
        batch_items_max: m.batch_items_max as usize,
        outbox_items_max: m.outbox_items_max as usize,
        inbox_items_max: m.inbox_items_max as usize,
        port: PortParams::from_config(config),
        io: gateway_io::IoParams::from_config(config),
        viewer: None,
    }
}

impl Runtime {
    /// Starts the shards of this node (node 0) and the admin endpoint.
    ///
    /// `factory` builds each shard's application on that shard's own thread.
    ///
    /// # Errors
    /// [`RuntimeError`] if a CPU is unavailable, an executor cannot start, or
    /// the admin address cannot be bound. Shards already started are stopped.
    pub fn start<A, F>(config: &Config, factory: F) -> Result<RuntimeHandle<A>, RuntimeError>
    where
        A: ShardApp,
        F: Fn(ShardContext) -> A + Send + Sync + 'static,
    {
        let cpus = resolve_cpus(config)?;
        let shards = match config.runtime.shards {
            0 => u16::try_from(cpus.len()).unwrap_or(u16::MAX),
            n => n,
        };
        let shared = Arc::new(Shared {
            stop: Arc::new(AtomicBool::new(false)),
            done_sending: AtomicUsize::new(0),
            epoch: Instant::now(),
            dead: (0..shards).map(|_| AtomicBool::new(false)).collect(),
            orphans: std::sync::Mutex::new(Vec::new()),
            handoffs: Arc::new(handoff::Handoffs::new(
                shards,
                config.gateway.handoffs_max as usize,
            )),
        });
        let factory = Arc::new(factory);
        let links = mesh::build(shards, config.mesh.batch_queue_depth as usize);
        let a = &config.admin;
        let board = a.enabled.then(|| {
            Arc::new(ViewBoard::new(
                usize::from(shards),
                a.viewer_entities_max as usize,
                a.viewer_events_max as usize,
            ))
        });
        let mut handle = RuntimeHandle {
            joins: Vec::with_capacity(usize::from(shards)),
            stats: Vec::with_capacity(usize::from(shards)),
            shared: shared.clone(),
            admin: None,
            board: board.clone(),
            client_addr: None,
            signals: Vec::new(),
        };
        let gateway = gateway_addr(config)?;
        let io = gateway_io::IoParams::from_config(config).resolve(gateway.is_some())?;
        let unix_at_start_s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        // Shard 0 binds the configured address; the others then bind the
        // address it resolved (the same port, SO_REUSEPORT).
        let mut bind_to = gateway;
        for (index, links) in (0..shards).zip(links) {
            let id = ShardId::local(index);
            let ctx = ShardContext {
                shard: id,
                shards,
                tick: Duration::from_millis(config.runtime.tick_ms),
                unix_at_start_s,
            };
            let stats = Arc::new(ShardStats::new(id));
            handle.stats.push(stats.clone());
            let placement = if config.runtime.pin {
                Placement::Fixed(cpus[usize::from(index) % cpus.len()])
            } else {
                Placement::Unbound
            };
            let mut p = shard_params(config, ctx);
            p.io = io.clone();
            p.viewer = board.clone().map(|b| (b, a.viewer_publish_ticks));
            let bind = bind_to;
            let launch = Launch {
                placement,
                links,
                stats,
                shared: shared.clone(),
                bind,
            };
            let (spawned, bind_rx) = launch.spawn(p, factory.clone());
            match spawned {
                Ok(join) => handle.joins.push((id, join)),
                Err(err) => {
                    handle.abort();
                    return Err(RuntimeError::Spawn {
                        shard: id,
                        message: err.to_string(),
                    });
                }
            }
            if let Some(addr) = bind {
                let resolved = handle.await_bind(addr, &bind_rx)?;
                bind_to = Some(resolved);
                handle.client_addr.get_or_insert(resolved);
            }
        }
        if let Some(addr) = handle.client_addr {
            tracing::info!(%addr, shards, "gateway: every shard listening for clients");
        }
        if let Some(board) = board {
            handle.start_admin(config, board)?;
        }
        Ok(handle)
    }
}

impl<A: ShardApp> RuntimeHandle<A> {
    /// Waits for the shard just spawned to report its listener; on failure
    /// stops the shards started so far.
    fn await_bind(
        &mut self,
        addr: SocketAddr,
        rx: &std::sync::mpsc::Receiver<std::io::Result<SocketAddr>>,
    ) -> Result<SocketAddr, RuntimeError> {
        let reply = rx.recv_timeout(BIND_WAIT_MAX).unwrap_or_else(|_| {
            Err(std::io::Error::other(
                "the shard did not report its listener",
            ))
        });
        reply.map_err(|source| {
            self.abort();
            RuntimeError::Gateway {
                addr: addr.to_string(),
                source,
            }
        })
    }

    fn start_admin(&mut self, config: &Config, board: Arc<ViewBoard>) -> Result<(), RuntimeError> {
        let a = &config.admin;
        let params = AdminParams {
            request_bytes_max: a.request_bytes_max as usize,
            io_timeout: Duration::from_millis(a.io_timeout_ms),
            streams_max: a.viewer_streams_max as usize,
            stream_period: Duration::from_millis(a.viewer_stream_period_ms),
            events_max: a.viewer_events_max as usize,
            tick_budget_us: config.runtime.tick_budget_ms.saturating_mul(1000),
            epoch: self.shared.epoch,
        };

        let addr = config.admin.listen_addr.as_str();
        let started = addr
            .parse::<SocketAddr>()
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))
            .and_then(|a| AdminServer::start(a, params, self.stats.clone(), board));
        match started {
            Ok(server) => {
                tracing::info!(addr = %server.addr(), "admin endpoint serving /metrics and the live viewer on /");
                self.admin = Some(server);
                Ok(())
            }
            Err(source) => {
                self.abort();
                Err(RuntimeError::Admin {
                    addr: addr.to_owned(),
                    source,
                })
            }
        }
    }

    /// Stops and joins the shards started so far, ignoring their results.
    fn abort(&mut self) {
        self.shutdown();
        for (_, join) in self.joins.drain(..) {
            let _ = join.join();
        }
    }

    /// Counts what is left in the queues of crashed shards as dropped (all
    /// threads have stopped: nothing can be added any more).
    fn count_orphans(&self) {
        let mut orphans = self
            .shared
            .orphans
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        for (index, rx) in orphans.drain(..) {
            let lost: usize = (rx.iter())
                .flat_map(|q| std::iter::from_fn(|| q.pop()))
                .map(|b| b.len())
                .sum();
            if lost > 0 {
                tracing::error!(
                    shard = index,
                    lost,
                    "envelopes queued to a crashed shard dropped"
                );
            }
            self.stats[index].add(Count::DroppedDisconnected, lost as u64);
        }
    }

    /// Shards running.
    pub fn shards(&self) -> usize {
        self.stats.len()
    }

    /// Each shard's metrics, by shard index.
    pub fn stats(&self) -> &[Arc<ShardStats>] {
        &self.stats
    }

    /// Sum of one counter over all shards.
    pub fn total(&self, c: Count) -> u64 {
        self.stats.iter().map(|s| s.count(c)).sum()
    }

    /// The metrics as served on `/metrics`.
    pub fn metrics_text(&self) -> String {
        metrics::render(&self.stats)
    }

    /// The address clients connect to (every shard listens on it), if
    /// `gateway.enabled`.
    pub fn client_addr(&self) -> Option<SocketAddr> {
        self.client_addr
    }

    /// What the shards publish for the live viewer (`None` with the admin
    /// endpoint off).
    pub fn viewer(&self) -> Option<&Arc<ViewBoard>> {
        self.board.as_ref()
    }

    /// The admin endpoint's bound address, if it is enabled.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin.as_ref().map(AdminServer::addr)
    }

    /// Asks every shard to stop after its current tick (returns at once;
    /// [`RuntimeHandle::join`] waits).
    pub fn shutdown(&self) {
        self.shared.stop.store(true, Ordering::Release);
    }

    /// Whether shutdown has been asked for (by a call, a signal or a crash).
    pub fn is_stopping(&self) -> bool {
        self.shared.stop.load(Ordering::Acquire)
    }

    /// Makes SIGINT and SIGTERM call [`RuntimeHandle::shutdown`]; a second
    /// signal while stopping exits the process at once with status 1.
    ///
    /// # Errors
    /// [`RuntimeError::Signals`] if a handler cannot be installed.
    pub fn stop_on_signals(&mut self) -> Result<(), RuntimeError> {
        use signal_hook::consts::{SIGINT, SIGTERM};
        for sig in [SIGINT, SIGTERM] {
            let flag = self.shared.stop.clone();
            // Registered first, so it sees the flag as it was before this
            // signal: set already means this is the second signal.
            let id = signal_hook::flag::register_conditional_shutdown(sig, 1, flag.clone())
                .map_err(RuntimeError::Signals)?;
            self.signals.push(id);
            let id = signal_hook::flag::register(sig, flag).map_err(RuntimeError::Signals)?;
            self.signals.push(id);
        }
        Ok(())
    }

    /// Waits until every shard has stopped (after [`RuntimeHandle::shutdown`]
    /// or a signal), stops the admin endpoint, and returns the applications in
    /// shard order.
    ///
    /// # Errors
    /// [`RuntimeError::ShardFailed`] for the first shard that panicked (all
    /// threads are joined regardless).
    pub fn join(mut self) -> Result<Vec<A>, RuntimeError> {
        let mut apps = Vec::with_capacity(self.joins.len());
        let mut first_err = None;
        for (shard, join) in self.joins.drain(..) {
            match join.join() {
                Ok(app) => apps.push(app),
                Err(err) => {
                    self.shared.stop.store(true, Ordering::Release);
                    first_err.get_or_insert(RuntimeError::ShardFailed {
                        shard,
                        message: err.to_string(),
                    });
                }
            }
        }
        self.count_orphans();
        if let Some(mut admin) = self.admin.take() {
            admin.stop();
        }
        for id in self.signals.drain(..) {
            signal_hook::low_level::unregister(id);
        }
        first_err.map_or(Ok(apps), Err)
    }
}

impl<A: ShardApp> Drop for RuntimeHandle<A> {
    fn drop(&mut self) {
        if !self.joins.is_empty() {
            self.abort();
        }
        for id in self.signals.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}
