//! [`EmbeddedServer`]: the whole server (the runtime, a [`CellHost`] per
//! shard and the client gateway) started in-process, for the `tessera`
//! binary, loadgen and integration tests.
//!
//! Owns the running runtime handle and the reading of its published
//! figures into [`ServerCounters`]. Must not reach into a shard's state
//! while it runs (only the published metrics; the hosts come back at
//! [`EmbeddedServer::stop`]).

use std::collections::BTreeMap;
use std::net::SocketAddr; // tidy: allow(std::net): the address the runtime bound, a value

use crate::config::Config;
use crate::runtime::{Hist, Runtime, RuntimeError, RuntimeHandle, ShardStats};
use crate::shard::{AppMetric, Count, Level};
use crate::wire::client::ErrorCode;

use std::sync::Arc;

use super::balance::SnapshotSink;
use super::door::Door;
use super::gateway::{refused_metric, Disconnect};
use super::CellHost;

/// Why the server could not start or stop.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The configuration cannot build a cell host.
    #[error("config: {0}")]
    Config(String),
    /// The runtime failed (CPU, bind, a shard crashed).
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The gateway is disabled or did not bind.
    #[error("no client address: gateway.enabled is false or the listener did not bind")]
    NoClientAddr,
}

/// What the server did, summed over shards (per shard where a `Vec`).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct ServerCounters {
    /// Shards running.
    pub shards: u16,
    /// Client sessions open.
    pub clients: u64,
    /// Reals hosted.
    pub reals: u64,
    /// Ghosts hosted.
    pub ghosts: u64,
    /// Reals migrated between cells.
    pub migrations: u64,
    /// Messages forwarded to a moved real.
    pub forwards: u64,
    /// Cell splits (balance).
    pub splits: u64,
    /// Cell merges (balance).
    pub merges: u64,
    /// Boundary moves (balance).
    pub rebalances: u64,
    /// AOI enters sent to clients.
    pub aoi_enters: u64,
    /// AOI leaves sent to clients.
    pub aoi_leaves: u64,
    /// Entity versions sent to clients as updates.
    pub view_updates: u64,
    /// Cell and proxy messages sent to another shard.
    pub cross_shard_messages: u64,
    /// Bytes received from clients.
    pub bytes_in: u64,
    /// Bytes written to clients.
    pub bytes_out: u64,
    /// Ticks over their budget.
    pub stalls: u64,
    /// Tick work, median, µs, per shard.
    pub tick_p50_us: Vec<u64>,
    /// Tick work, 99th percentile, µs, per shard.
    pub tick_p99_us: Vec<u64>,
    /// Tick work, maximum, µs, per shard.
    pub tick_max_us: Vec<u64>,
    /// Tick work, 99th percentile over the last metrics window (about a
    /// second), µs, per shard: how each shard is doing now.
    pub tick_p99_window_us: Vec<u64>,
    /// Client connections ended, by reason (`Disconnect::name`).
    pub disconnects: BTreeMap<String, u64>,
    /// Client messages refused, by rule (`ErrorCode::rule`).
    pub refused: BTreeMap<String, u64>,
    /// Mono-space instances live (the directory's count).
    pub instances_live: u64,
    /// Instances created (by a player's entry or by heavy load).
    pub instances_created: u64,
    /// Empty instances reclaimed.
    pub instances_reclaimed: u64,
    /// Players placed in a space (EnterSpace accepted).
    pub space_enters: u64,
    /// EnterSpace requests refused by the directory.
    pub space_refused: u64,
    /// Reals moved to another space.
    pub space_transfers: u64,
}

/// The warning a server with `gateway.auth = "none"` gives once at start
/// (none when the gateway is off or checks tickets).
pub fn auth_warning(config: &Config) -> Option<&'static str> {
    let g = &config.gateway;
    (g.enabled && g.auth == "none").then_some(
        "gateway.auth = \"none\": ANYONE CAN LOG IN AS ANY ACCOUNT (no ticket is checked); \
         for local benchmarks only, use auth = \"hmac\" in production",
    )
}

/// The server, running (see the module doc).
#[derive(Debug)]
pub struct EmbeddedServer {
    handle: RuntimeHandle<CellHost>,
    client_addr: SocketAddr,
    tree_log: SnapshotSink,
}

impl EmbeddedServer {
    /// Starts the runtime with a [`CellHost`] per shard and the gateway on
    /// `gateway.listen_addr` (port 0: any free port, see
    /// [`EmbeddedServer::client_addr`]).
    ///
    /// # Errors
    /// [`ServerError::Config`] if the config cannot build a host (checked
    /// before any thread starts), [`ServerError::Runtime`] if the runtime
    /// cannot start, [`ServerError::NoClientAddr`] if the gateway is off.
    pub fn start(config: &Config) -> Result<EmbeddedServer, ServerError> {
        let probe = crate::shard::ShardContext {
            shard: crate::core::ids::ShardId::local(0),
            shards: config.runtime.shards.max(1),
            tick: std::time::Duration::from_millis(config.runtime.tick_ms),
            unix_at_start_s: 0,
        };
        CellHost::new(config, probe).map_err(|e| ServerError::Config(e.to_string()))?;
        if let Some(text) = auth_warning(config) {
            tracing::warn!("{text}");
        }
        let factory_config = config.clone();
        let door = Arc::new(Door::from_config(config));
        let tree_log = SnapshotSink::default();
        let sink = tree_log.clone();
        let handle = Runtime::start(config, move |ctx| {
            let shard0 = ctx.shard.index == 0;
            let mut host = CellHost::with_door(&factory_config, ctx, door.clone())
                .expect("checked before start");
            if shard0 {
                host.set_snapshot_sink(sink.clone());
            }
            host
        })?;
        let Some(client_addr) = handle.client_addr() else {
            handle.shutdown();
            let _ = handle.join();
            return Err(ServerError::NoClientAddr);
        };
        Ok(EmbeddedServer {
            handle,
            client_addr,
            tree_log,
        })
    }

    /// Where clients connect.
    pub fn client_addr(&self) -> SocketAddr {
        self.client_addr
    }

    /// The tree's history: shard 0 pushes a snapshot (leaves, shards,
    /// loads, reals) every balancing period while balancing is on.
    pub fn tree_log(&self) -> SnapshotSink {
        self.tree_log.clone()
    }

    /// Where `/metrics` is served, if the admin endpoint is on.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.handle.admin_addr()
    }

    /// The runtime (metrics, shutdown on signals).
    pub fn handle(&mut self) -> &mut RuntimeHandle<CellHost> {
        &mut self.handle
    }

    /// A live snapshot from the published shard figures (may lag one
    /// `runtime.metrics_publish_ticks` period).
    pub fn counters(&self) -> ServerCounters {
        counters_of(self.handle.stats())
    }

    /// Whether shutdown was asked (a signal, a crash).
    pub fn is_stopping(&self) -> bool {
        self.handle.is_stopping()
    }

    /// Stops every shard (clients get Kick `shutdown`), joins them and
    /// returns the final counters.
    ///
    /// # Errors
    /// [`ServerError::Runtime`] if a shard failed.
    pub fn stop(self) -> Result<ServerCounters, ServerError> {
        Ok(self.stop_with_hosts()?.0)
    }

    /// As [`EmbeddedServer::stop`], with the hosts (their final state: tests
    /// check that nothing of a client is left anywhere).
    ///
    /// # Errors
    /// [`ServerError::Runtime`] if a shard failed.
    pub fn stop_with_hosts(self) -> Result<(ServerCounters, Vec<CellHost>), ServerError> {
        self.handle.shutdown();
        let stats: Vec<_> = self.handle.stats().to_vec();
        let hosts = self.handle.join()?;
        let mut c = counters_of(&stats);
        // The final figures, from the hosts themselves.
        c.reals = hosts.iter().map(|h| h.reals() as u64).sum();
        c.ghosts = hosts.iter().map(|h| h.ghosts() as u64).sum();
        c.migrations = hosts.iter().map(CellHost::migrations).sum();
        Ok((c, hosts))
    }
}

fn app(metrics: &[AppMetric], name: &str) -> u64 {
    metrics
        .iter()
        .filter(|m| m.name == name)
        .map(|m| m.value)
        .sum()
}

/// Sums the published figures of `stats`.
pub fn counters_of(stats: &[std::sync::Arc<ShardStats>]) -> ServerCounters {
    let metrics: Vec<Vec<AppMetric>> = stats.iter().map(|s| s.app_metrics()).collect();
    let sum = |name: &str| -> u64 { metrics.iter().map(|m| app(m, name)).sum() };
    let mut c = ServerCounters {
        shards: u16::try_from(stats.len()).unwrap_or(u16::MAX),
        clients: sum("gateway_clients"),
        reals: sum("host_reals"),
        ghosts: sum("host_ghosts"),
        migrations: sum("host_migrations"),
        forwards: sum("host_forwards"),
        splits: sum("host_splits"),
        merges: sum("host_merges"),
        rebalances: sum("host_rebalances"),
        aoi_enters: sum("host_aoi_enters"),
        aoi_leaves: sum("host_aoi_leaves"),
        view_updates: sum("host_view_updates"),
        cross_shard_messages: sum("host_remote_messages"),
        bytes_in: sum("gateway_bytes_in"),
        bytes_out: sum("gateway_bytes_out"),
        stalls: stats.iter().map(|s| s.count(Count::Stalls)).sum(),
        instances_live: sum("spaces_instances_live"),
        instances_created: sum("spaces_instances_created"),
        instances_reclaimed: sum("spaces_instances_reclaimed"),
        space_enters: sum("spaces_enters"),
        space_refused: sum("spaces_refused"),
        space_transfers: sum("spaces_transfers"),
        ..ServerCounters::default()
    };
    for s in stats {
        c.tick_p50_us.push(s.quantile(Hist::Tick, 0.5));
        c.tick_p99_us.push(s.quantile(Hist::Tick, 0.99));
        c.tick_max_us.push(s.quantile(Hist::Tick, 1.0));
        c.tick_p99_window_us.push(s.level(Level::TickP99WindowUs));
    }
    for d in Disconnect::ALL {
        let n = sum(d.metric());
        if n > 0 {
            c.disconnects.insert(d.name().to_owned(), n);
        }
    }
    for &code in ErrorCode::ALL {
        let n = sum(refused_metric(code));
        if n > 0 {
            c.refused.insert(code.rule().to_owned(), n);
        }
    }
    c
}
