//! The typed sections of `tessera.toml` and the rules each one keeps.
//!
//! Every field is a named bound with its unit last. Defaults live in
//! `defaults.toml` (one place), and the reason for each is in
//! `tuning/README.md`.

use super::{invalid, ConfigError};
use crate::core::cell::{CellParams, CellParamsError};
use crate::core::fault::Fault;
use crate::core::geom::Rect;
use crate::core::space::{ParamError, SpaceParams};
use serde::{Deserialize, Serialize};

fn positive(key: &'static str, v: f64) -> Result<(), ConfigError> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(invalid(key, v, "must be a finite number > 0"))
    }
}

/// `gateway.io_uring_entries`: the kernel's limit is 32,768.
const IO_URING_ENTRIES_BOUNDS: (u32, u32) = (64, 32_768);
/// `gateway.io_uring_buffers`: a buffer ring's ids are u16 (at most 32,768
/// entries); fewer than 64 starve the receives of a busy pump.
const IO_URING_BUFFERS_BOUNDS: (u32, u32) = (64, 32_768);
/// `gateway.io_uring_buffer_bytes`: at most 64 KiB per receive.
const IO_URING_BUFFER_BYTES_BOUNDS: (u32, u32) = (64, 65_536);

fn at_least(key: &'static str, v: u64, min: u64) -> Result<(), ConfigError> {
    if v >= min {
        Ok(())
    } else {
        Err(invalid(key, v, format!("must be >= {min}")))
    }
}

/// The world: identical on every shard and node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorldConfig {
    /// West edge, metres.
    pub min_x_m: f64,
    /// South edge, metres.
    pub min_z_m: f64,
    /// East edge, metres.
    pub max_x_m: f64,
    /// North edge, metres.
    pub max_z_m: f64,
    /// Reals within this distance of a neighbour cell have a ghost there.
    pub ghost_radius_m: f64,
}

impl WorldConfig {
    /// The world rectangle.
    pub fn bounds(&self) -> Rect {
        Rect::new(self.min_x_m, self.min_z_m, self.max_x_m, self.max_z_m)
    }

    /// A stable 64-bit digest of the world settings (FNV-1a over the canonical
    /// TOML): shards refuse to join a mesh whose world differs.
    pub fn fingerprint(&self) -> u64 {
        let text = toml::to_string(self).expect("world config serialises");
        text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        })
    }

    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        for (key, v) in [
            ("world.min_x_m", self.min_x_m),
            ("world.min_z_m", self.min_z_m),
            ("world.max_x_m", self.max_x_m),
            ("world.max_z_m", self.max_z_m),
        ] {
            if !v.is_finite() {
                return Err(invalid(key, v, "must be finite"));
            }
        }
        positive("world.ghost_radius_m", self.ghost_radius_m)?;
        let min_side = 4.0 * self.ghost_radius_m;
        if self.max_x_m - self.min_x_m < min_side {
            return Err(invalid(
                "world.max_x_m",
                self.max_x_m,
                format!("the world must be at least 4 x world.ghost_radius_m = {min_side} m wide"),
            ));
        }
        if self.max_z_m - self.min_z_m < min_side {
            return Err(invalid(
                "world.max_z_m",
                self.max_z_m,
                format!("the world must be at least 4 x world.ghost_radius_m = {min_side} m deep"),
            ));
        }
        Ok(())
    }
}

/// Turns a core params error into a config error naming `section.field`.
pub(crate) fn param_error(section: &str, e: &ParamError) -> ConfigError {
    let field = match e {
        ParamError::NotPositive(field) | ParamError::Rule { field, .. } => field,
    };
    invalid(format!("{section}.{field}"), "(see rule)", e.to_string())
}

/// The space tree's geometry rules (seed 001).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpaceConfig {
    /// Smallest side of a cell, and the strip a split cuts off; at least
    /// 4 x `world.ghost_radius_m`, which is the default when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_cell_side_m: Option<f64>,
    /// Side a merging cell shrinks to before it is removed; 0.5 x
    /// `world.ghost_radius_m` when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merging_side_m: Option<f64>,
}

impl SpaceConfig {
    /// The tree's params for this world.
    pub fn to_params(&self, world: &WorldConfig) -> SpaceParams {
        let seed = SpaceParams::for_ghost_radius(world.ghost_radius_m);
        SpaceParams {
            min_cell_side_m: self.min_cell_side_m.unwrap_or(seed.min_cell_side_m),
            merging_side_m: self.merging_side_m.unwrap_or(seed.merging_side_m),
            ..seed
        }
    }

    pub(crate) fn validate(&self, world: &WorldConfig) -> Result<(), ConfigError> {
        self.to_params(world).validate().map_err(|e| match e {
            ParamError::Rule {
                field: "min_cell_side_m",
                ..
            } => invalid(
                "space.min_cell_side_m",
                self.to_params(world).min_cell_side_m,
                format!(
                    "must be >= 4 x world.ghost_radius_m = {}",
                    4.0 * world.ghost_radius_m
                ),
            ),
            ParamError::NotPositive("ghost_radius_m") => {
                invalid("world.ghost_radius_m", world.ghost_radius_m, e.to_string())
            }
            other => param_error("space", &other),
        })
    }
}

/// The area of interest of an observer's client.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AoiConfig {
    /// An entity enters the view within this distance.
    pub radius_m: f64,
    /// An entity leaves the view beyond this distance (>= `radius_m`).
    pub leave_radius_m: f64,
    /// At most this many entities in one view; the nearest are kept.
    pub max_interest: u32,
    /// An observer's area is brought up to date at every this many of its
    /// flushes (1 = every flush): enters and leaves wait up to this many
    /// update periods, the AOI costs this many times less.
    pub update_every_flushes: u16,
}

/// The most flushes an area may wait between two updates (`aoi.update_every_flushes`).
pub const AOI_UPDATE_EVERY_FLUSHES_MAX: u16 = 8;

impl AoiConfig {
    pub(crate) fn validate(&self, world: &WorldConfig) -> Result<(), ConfigError> {
        positive("aoi.radius_m", self.radius_m)?;
        positive("aoi.leave_radius_m", self.leave_radius_m)?;
        if self.leave_radius_m < self.radius_m {
            return Err(invalid(
                "aoi.leave_radius_m",
                self.leave_radius_m,
                "must be >= aoi.radius_m",
            ));
        }
        if self.leave_radius_m > world.ghost_radius_m {
            return Err(invalid(
                "aoi.leave_radius_m",
                self.leave_radius_m,
                format!("must be <= world.ghost_radius_m = {}: a cell only knows entities within the ghost radius", world.ghost_radius_m),
            ));
        }
        at_least("aoi.max_interest", u64::from(self.max_interest), 1)?;
        if !(1..=AOI_UPDATE_EVERY_FLUSHES_MAX).contains(&self.update_every_flushes) {
            return Err(invalid(
                "aoi.update_every_flushes",
                self.update_every_flushes,
                format!("must be between 1 and {AOI_UPDATE_EVERY_FLUSHES_MAX}"),
            ));
        }
        Ok(())
    }
}

/// Ghost upkeep, migration, forwarding and input knobs (seeds 000 and 002).
/// Field names match [`CellParams`]; `world.ghost_radius_m` completes them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CellConfig {
    /// How often ghosts, gaps and migrations are checked.
    pub check_period_ms: u64,
    /// A ghost is deleted only beyond ghost radius + this margin (hysteresis).
    pub ghost_keep_margin_m: f64,
    /// A real migrates only beyond its cell's rect + this margin (hysteresis).
    pub migrate_margin_m: f64,
    /// Ghost creations per cell per check, at most.
    pub ghosts_created_per_check_max: u32,
    /// Ghost deletions per cell per check, at most.
    pub ghosts_deleted_per_check_max: u32,
    /// A ghost lives at least this long.
    pub ghost_min_lifetime_ms: u64,
    /// A real that just arrived keeps its ghosts this long.
    pub new_real_keep_ghosts_ms: u64,
    /// A ghost creation unacknowledged after this long is abandoned and retried.
    pub ghost_create_timeout_ms: u64,
    /// Migrations out of one cell per check, at most.
    pub migrations_per_check_max: u32,
    /// Forwarding entries (entities that left) one cell keeps, at most.
    pub forward_table_max: usize,
    /// How long a forwarding entry (and a deleted ghost's tombstone) lives.
    pub forward_ttl_ms: u64,
    /// A message forwarded more than this many times is dropped.
    pub forward_hops_max: u8,
    /// Out-of-order client inputs buffered per real, at most.
    pub input_buffer_max: usize,
    /// Cross-entity calls queued at a real between two ticks, at most.
    pub pending_calls_max: usize,
    /// Catch-ups (inherited ghost acks, resync requests) queued per tick, at most.
    pub catch_up_queue_max: usize,
    /// Real-bound messages held for entities a cell has not heard of yet
    /// (forwarded ahead of the entity's `CreateGhost`), at most.
    pub early_msgs_max: usize,
}

/// Property sync ordering and caching (seed 000). Field names match
/// [`CellParams`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SyncConfig {
    /// Early sync messages a ghost buffers per entity before asking for a resync.
    pub reorder_buffer_max: usize,
    /// A ghost waits this long for a version gap to fill before asking for a resync.
    pub resync_gap_timeout_ms: u64,
    /// Interval between repeated resync requests of one ghost.
    pub resync_retry_ms: u64,
    /// Recent sync messages kept per real (and carried on migration).
    pub sync_cache_max: usize,
    /// Payload bytes the sync cache keeps per real, at most.
    pub sync_cache_bytes_max: usize,
    /// Cached sync messages older than this are dropped.
    pub sync_cache_age_max_ms: u64,
}

/// The sync keys among [`CellParams`]' fields (the rest are `cell.*`).
const SYNC_KEYS: &[&str] = &[
    "reorder_buffer_max",
    "resync_gap_timeout_ms",
    "resync_retry_ms",
    "sync_cache_max",
    "sync_cache_bytes_max",
    "sync_cache_age_max_ms",
];

/// Builds the cells' params from the world, cell and sync sections.
pub(crate) fn cell_params(world: &WorldConfig, cell: &CellConfig, sync: &SyncConfig) -> CellParams {
    CellParams {
        ghost_radius_m: world.ghost_radius_m,
        ghost_keep_margin_m: cell.ghost_keep_margin_m,
        migrate_margin_m: cell.migrate_margin_m,
        check_period_ms: cell.check_period_ms,
        ghosts_created_per_check_max: cell.ghosts_created_per_check_max,
        ghosts_deleted_per_check_max: cell.ghosts_deleted_per_check_max,
        ghost_min_lifetime_ms: cell.ghost_min_lifetime_ms,
        new_real_keep_ghosts_ms: cell.new_real_keep_ghosts_ms,
        ghost_create_timeout_ms: cell.ghost_create_timeout_ms,
        migrations_per_check_max: cell.migrations_per_check_max,
        forward_table_max: cell.forward_table_max,
        forward_ttl_ms: cell.forward_ttl_ms,
        forward_hops_max: cell.forward_hops_max,
        input_buffer_max: cell.input_buffer_max,
        pending_calls_max: cell.pending_calls_max,
        reorder_buffer_max: sync.reorder_buffer_max,
        resync_gap_timeout_ms: sync.resync_gap_timeout_ms,
        resync_retry_ms: sync.resync_retry_ms,
        sync_cache_max: sync.sync_cache_max,
        sync_cache_bytes_max: sync.sync_cache_bytes_max,
        sync_cache_age_max_ms: sync.sync_cache_age_max_ms,
        catch_up_queue_max: cell.catch_up_queue_max,
        early_msgs_max: cell.early_msgs_max,
    }
}

/// Checks the cell and sync sections (through [`CellParams::validate`]) and
/// the relation an observer near a border needs.
pub(crate) fn validate_cell(
    world: &WorldConfig,
    aoi: &AoiConfig,
    cell: &CellConfig,
    sync: &SyncConfig,
) -> Result<(), ConfigError> {
    cell_params(world, cell, sync)
        .validate()
        .map_err(|e| match e {
            CellParamsError::Invalid { key, reason } => {
                let section = if SYNC_KEYS.contains(&key) {
                    "sync"
                } else {
                    "cell"
                };
                invalid(format!("{section}.{key}"), "(see rule)", reason)
            }
        })?;
    // An observer up to migrate_margin_m outside its cell sees up to
    // leave_radius_m further: all of that must be ghosted into its cell.
    let reach = cell.migrate_margin_m + aoi.leave_radius_m;
    if reach > world.ghost_radius_m {
        return Err(invalid(
            "cell.migrate_margin_m",
            cell.migrate_margin_m,
            format!(
                "cell.migrate_margin_m + aoi.leave_radius_m = {reach} must be <= world.ghost_radius_m = {}, \
                 or observers near a border miss entities",
                world.ghost_radius_m
            ),
        ));
    }
    Ok(())
}

/// The shard runtime: executors, placement, the tick loop and shutdown.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeConfig {
    /// One simulation tick, milliseconds.
    pub tick_ms: u64,
    /// Shards (executors) on this node; 0 = one per CPU in `cpus` (or per
    /// available CPU when `cpus` is empty).
    pub shards: u16,
    /// CPU ids to pin shards to; shard `i` runs on `cpus[i % len]`. Empty =
    /// every CPU this process may run on.
    pub cpus: Vec<u16>,
    /// Pin each shard to its CPU (`false`: let the OS place the threads).
    pub pin: bool,
    /// A tick whose work (drain + app + flush) takes longer than this is a
    /// stall: counted and logged with the phase that took the time.
    pub tick_budget_ms: u64,
    /// On shutdown, how long shards keep flushing and draining queues before
    /// giving up and counting what is left as dropped.
    pub shutdown_drain_ms_max: u64,
    /// Shards publish their histograms to the metrics endpoint every this
    /// many ticks (counters are always live).
    pub metrics_publish_ticks: u32,
}

impl RuntimeConfig {
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        at_least("runtime.tick_ms", self.tick_ms, 1)?;
        if self.tick_ms > 1000 {
            return Err(invalid("runtime.tick_ms", self.tick_ms, "must be <= 1000"));
        }
        if self.shards > 1024 {
            return Err(invalid("runtime.shards", self.shards, "must be <= 1024"));
        }
        at_least("runtime.tick_budget_ms", self.tick_budget_ms, 1)?;
        if self.tick_budget_ms > self.tick_ms {
            return Err(invalid(
                "runtime.tick_budget_ms",
                self.tick_budget_ms,
                format!("must be <= runtime.tick_ms = {}", self.tick_ms),
            ));
        }
        at_least(
            "runtime.shutdown_drain_ms_max",
            self.shutdown_drain_ms_max,
            self.tick_ms,
        )?;
        at_least(
            "runtime.metrics_publish_ticks",
            u64::from(self.metrics_publish_ticks),
            1,
        )
    }
}

/// The mesh of queues between shards (one per ordered pair).
///
/// There is no `body_bytes_max` any more: it was validated and read nowhere
/// (the mesh carries batches in process, no link reads envelope bytes); a
/// byte link gives its own bound to `wire::envelope::Frame::decode`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeshConfig {
    /// Batches in flight per ordered pair of shards; a full queue pushes back.
    pub batch_queue_depth: u32,
    /// Envelopes in one batch, at most.
    pub batch_items_max: u32,
    /// Envelopes a shard holds for one destination (not yet accepted by the
    /// queue) before it refuses new sends to it.
    pub outbox_items_max: u32,
    /// Received envelopes a shard holds unread before it stops draining its
    /// queues (which then fill and push back on the senders).
    pub inbox_items_max: u32,
}

impl MeshConfig {
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        at_least(
            "mesh.batch_queue_depth",
            u64::from(self.batch_queue_depth),
            1,
        )?;
        at_least("mesh.batch_items_max", u64::from(self.batch_items_max), 1)?;
        for (key, v) in [
            ("mesh.outbox_items_max", self.outbox_items_max),
            ("mesh.inbox_items_max", self.inbox_items_max),
        ] {
            if v < self.batch_items_max {
                return Err(invalid(
                    key,
                    v,
                    format!("must be >= mesh.batch_items_max = {}", self.batch_items_max),
                ));
            }
        }
        Ok(())
    }
}

/// The admin HTTP endpoint (`GET /metrics`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminConfig {
    /// Serve the admin endpoint at all.
    pub enabled: bool,
    /// `host:port` to listen on (port 0 = any free port).
    pub listen_addr: String,
    /// Bytes of one request head read at most; longer requests are refused.
    pub request_bytes_max: u32,
    /// Read and write timeout of one admin connection, milliseconds.
    pub io_timeout_ms: u64,
    /// Every this many ticks each shard publishes its cells and entities for
    /// the live viewer (`/api/space`, `/api/entities`) and hands over its
    /// viewer events.
    pub viewer_publish_ticks: u64,
    /// Entities per cell a shard publishes at most; above it the cell's
    /// entities are sampled evenly (the reply says so).
    pub viewer_entities_max: u32,
    /// Events the viewer's ring keeps (`/api/events`); a stream that falls
    /// further behind loses the oldest and is told how many. Also the bound
    /// of each shard's events waiting for their next publish.
    pub viewer_events_max: u32,
    /// `/api/events` streams served at once (one thread each); more are
    /// refused with 503.
    pub viewer_streams_max: u32,
    /// How often an event stream sends what is new and the shards' figures,
    /// milliseconds.
    pub viewer_stream_period_ms: u64,
}

impl AdminConfig {
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        if self.listen_addr.parse::<std::net::SocketAddr>().is_err() {
            return Err(invalid(
                "admin.listen_addr",
                &self.listen_addr,
                "must be an ip:port address such as 127.0.0.1:9187",
            ));
        }
        at_least(
            "admin.request_bytes_max",
            u64::from(self.request_bytes_max),
            256,
        )?;
        at_least("admin.io_timeout_ms", self.io_timeout_ms, 1)?;
        at_least("admin.viewer_publish_ticks", self.viewer_publish_ticks, 1)?;
        at_least(
            "admin.viewer_entities_max",
            u64::from(self.viewer_entities_max),
            1,
        )?;
        at_least(
            "admin.viewer_events_max",
            u64::from(self.viewer_events_max),
            16,
        )?;
        at_least(
            "admin.viewer_streams_max",
            u64::from(self.viewer_streams_max),
            1,
        )?;
        at_least(
            "admin.viewer_stream_period_ms",
            self.viewer_stream_period_ms,
            10,
        )
    }
}

/// The server's initial world: cells and NPCs (`[server]`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// Cells the space tree is split into at start (round-robin on shards);
    /// 0 = one per shard, as many as the world has room for (the default).
    pub initial_cells: u32,
    /// NPC wanderers spawned at start, spread over the world.
    pub npcs: u32,
    /// NPC walking speed, metres per second.
    pub npc_speed_mps: f64,
    /// Bytes of downstream body buffers one shard keeps for reuse
    /// (`core::down::DownPool`; at most 1 GiB, 0 = none kept).
    pub down_pool_bytes_max: u64,
}

impl ServerConfig {
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        if !(self.npc_speed_mps.is_finite() && self.npc_speed_mps >= 0.0) {
            return Err(invalid(
                "server.npc_speed_mps",
                self.npc_speed_mps.to_string(),
                "must be a finite speed >= 0",
            ));
        }
        if self.down_pool_bytes_max > 1 << 30 {
            return Err(invalid(
                "server.down_pool_bytes_max",
                self.down_pool_bytes_max.to_string(),
                "must be at most 1 GiB",
            ));
        }
        Ok(())
    }
}

/// The client TCP gateway (`[gateway]`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatewayConfig {
    /// Accept client connections at all (`false`: the bare shard mesh).
    pub enabled: bool,
    /// `host:port` clients connect to (port 0 = any free port); every shard
    /// listens on it (SO_REUSEPORT) and the kernel spreads connections.
    pub listen_addr: String,
    /// Largest client frame accepted, bytes; larger ones are refused.
    pub frame_bytes_max: u32,
    /// Bytes read from one socket per read call.
    pub read_batch_bytes: u32,
    /// Bytes queued for one client before it is cut off as a slow reader.
    pub send_queue_bytes_max: u32,
    /// Refused frames tolerated from one client before it is disconnected.
    pub abuse_strikes_max: u32,
    /// Speed limit of client moves, metres per second of server time.
    pub move_speed_max_mps: f64,
    /// Distance a client may get ahead of the speed limit in a burst.
    pub move_slack_m: f64,
    /// Inputs of one client forwarded and not yet acknowledged; more are
    /// refused (`rate-limited`).
    pub inputs_in_flight_max: u32,
    /// Where avatars appear: `"random"` (uniform over the world, from
    /// `spawn_seed`) or `"center"` (the world's centre).
    pub spawn: String,
    /// Seed of the `"random"` spawn rule (each shard mixes in its index).
    pub spawn_seed: u64,
    /// A `"random"` spawn prefers a point in a cell of the shard that
    /// accepted the connection, so the client's proxy and its real share a
    /// shard (no cross-shard hop each way) until the real migrates.
    pub spawn_local: bool,
    /// A live client's connection and proxy follow its real to the shard
    /// of the real's cell (ARCHITECTURE.md, "The proxy follows its real").
    pub proxy_follow: bool,
    /// The least time between two hand-overs of one client's connection,
    /// ms: a proxy follows its real at once, unless its connection moved
    /// less than this long ago (then when that long has passed since);
    /// hysteresis against a real on a shard border.
    pub proxy_follow_ms: u64,
    /// Client connections one shard holds at once; more are refused.
    pub connections_max: u32,
    /// Received bytes one connection holds unconsumed before its socket is
    /// no longer read (TCP back-pressure on the client).
    pub inbound_bytes_max: u32,
    /// How long a closing connection may take to write what is queued.
    pub linger_ms: u64,
    /// Interval of the batched client socket loop between ticks, ms: the
    /// longest an input waits before the next tick can see it.
    pub io_poll_ms: u64,
    /// Readiness events taken per epoll wait of the client socket loop.
    pub io_events_max: u32,
    /// The client socket loop's kernel interface: `"auto"` (io_uring if the
    /// start probe passes, else epoll with a warning), `"epoll"` or
    /// `"io_uring"` (Linux >= 6.1, checked at start).
    pub io_backend: String,
    /// io_uring: submission queue entries (the completion queue holds a
    /// whole pump's completions: `gateway_uring::cq_entries`).
    pub io_uring_entries: u32,
    /// io_uring: buffers in the provided buffer ring (a power of two).
    pub io_uring_buffers: u32,
    /// io_uring: bytes of one provided buffer (at most one receive's bytes).
    pub io_uring_buffer_bytes: u32,
    /// A connection that has not sent a whole Login this long after it
    /// opened is closed (Error `idle-timeout`).
    pub handshake_timeout_ms: u64,
    /// A logged-in connection that sent no whole frame for this long is
    /// closed (Kick `idle-timeout`); a quiet client sends Ping.
    pub idle_timeout_ms: u64,
    /// After a connection drops (not Bye, not a Kick for abuse), the avatar
    /// stays this long for a login of the same account to take it over.
    pub reconnect_window_ms: u64,
    /// How logins are checked: `"none"` (the name is the account; local
    /// benchmarks only) or `"hmac"` (the token is a signed ticket).
    pub auth: String,
    /// File holding the ticket key as hex (at least 32 bytes), for
    /// `auth = "hmac"`.
    pub key_file: String,
    /// Longest ticket lifetime accepted (expiry minus now), seconds.
    pub ticket_ttl_max_s: u64,
    /// Tickets remembered against replay (until they expire), node-wide
    /// (one table for every shard); when full of unexpired tickets, logins
    /// are refused.
    pub replay_table_max: u32,
    /// Accounts with an avatar (live or waiting in its reconnect window),
    /// node-wide; a login of a new account past it is refused
    /// (`server-full`).
    pub accounts_max: u32,
    /// Client connections handed to one shard (a login that landed on
    /// another shard than its account's avatar) and not yet taken up
    /// there; past it the connection is closed (counted).
    pub handoffs_max: u32,
}

impl GatewayConfig {
    /// `io_backend` and the io_uring bounds.
    fn validate_io_uring(&self) -> Result<(), ConfigError> {
        if !matches!(self.io_backend.as_str(), "auto" | "epoll" | "io_uring") {
            return Err(invalid(
                "gateway.io_backend",
                &self.io_backend,
                "must be \"auto\", \"epoll\" or \"io_uring\"",
            ));
        }
        let within = |key: &'static str, v: u32, (lo, hi): (u32, u32)| {
            if (lo..=hi).contains(&v) {
                Ok(())
            } else {
                Err(invalid(key, v, format!("must be in {lo}..={hi}")))
            }
        };
        within(
            "gateway.io_uring_entries",
            self.io_uring_entries,
            IO_URING_ENTRIES_BOUNDS,
        )?;
        within(
            "gateway.io_uring_buffers",
            self.io_uring_buffers,
            IO_URING_BUFFERS_BOUNDS,
        )?;
        if !self.io_uring_buffers.is_power_of_two() {
            return Err(invalid(
                "gateway.io_uring_buffers",
                self.io_uring_buffers,
                "must be a power of two",
            ));
        }
        within(
            "gateway.io_uring_buffer_bytes",
            self.io_uring_buffer_bytes,
            IO_URING_BUFFER_BYTES_BOUNDS,
        )
    }

    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        if self.listen_addr.parse::<std::net::SocketAddr>().is_err() {
            return Err(invalid(
                "gateway.listen_addr",
                &self.listen_addr,
                "must be an ip:port address such as 0.0.0.0:7400",
            ));
        }
        at_least(
            "gateway.frame_bytes_max",
            u64::from(self.frame_bytes_max),
            64,
        )?;
        at_least(
            "gateway.read_batch_bytes",
            u64::from(self.read_batch_bytes),
            u64::from(self.frame_bytes_max),
        )?;
        at_least(
            "gateway.send_queue_bytes_max",
            u64::from(self.send_queue_bytes_max),
            u64::from(self.frame_bytes_max),
        )?;
        at_least("gateway.io_poll_ms", self.io_poll_ms, 1)?;
        if self.io_poll_ms > 1000 {
            return Err(invalid(
                "gateway.io_poll_ms",
                self.io_poll_ms,
                "must be <= 1000",
            ));
        }
        at_least("gateway.io_events_max", u64::from(self.io_events_max), 16)?;
        self.validate_io_uring()?;
        at_least("gateway.accounts_max", u64::from(self.accounts_max), 1)?;
        at_least("gateway.handoffs_max", u64::from(self.handoffs_max), 1)?;
        if self.proxy_follow_ms > 600_000 {
            return Err(invalid(
                "gateway.proxy_follow_ms",
                self.proxy_follow_ms,
                "must be <= 600000 (set gateway.proxy_follow = false to keep proxies where they are)",
            ));
        }
        at_least(
            "gateway.abuse_strikes_max",
            u64::from(self.abuse_strikes_max),
            1,
        )?;
        for (key, v) in [
            ("gateway.move_speed_max_mps", self.move_speed_max_mps),
            ("gateway.move_slack_m", self.move_slack_m),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(invalid(key, v, "must be finite and > 0"));
            }
        }
        at_least(
            "gateway.inputs_in_flight_max",
            u64::from(self.inputs_in_flight_max),
            1,
        )?;
        if !matches!(self.spawn.as_str(), "random" | "center") {
            return Err(invalid(
                "gateway.spawn",
                &self.spawn,
                "must be \"random\" or \"center\"",
            ));
        }
        at_least(
            "gateway.connections_max",
            u64::from(self.connections_max),
            1,
        )?;
        if self.connections_max > 1_000_000 {
            return Err(invalid(
                "gateway.connections_max",
                self.connections_max,
                "must be <= 1000000 per shard",
            ));
        }
        at_least(
            "gateway.inbound_bytes_max",
            u64::from(self.inbound_bytes_max),
            u64::from(self.frame_bytes_max),
        )
        .map_err(|_| {
            invalid(
                "gateway.inbound_bytes_max",
                self.inbound_bytes_max,
                format!(
                    "must be >= gateway.frame_bytes_max = {}: a whole frame must fit",
                    self.frame_bytes_max
                ),
            )
        })?;
        if self.linger_ms > 60_000 {
            return Err(invalid(
                "gateway.linger_ms",
                self.linger_ms,
                "must be <= 60000",
            ));
        }
        self.validate_door()
    }

    fn validate_door(&self) -> Result<(), ConfigError> {
        for (key, v) in [
            ("gateway.handshake_timeout_ms", self.handshake_timeout_ms),
            ("gateway.idle_timeout_ms", self.idle_timeout_ms),
        ] {
            if !(100..=3_600_000).contains(&v) {
                return Err(invalid(key, v, "must be within 100..=3600000"));
            }
        }
        if self.reconnect_window_ms > 3_600_000 {
            return Err(invalid(
                "gateway.reconnect_window_ms",
                self.reconnect_window_ms,
                "must be <= 3600000",
            ));
        }
        match self.auth.as_str() {
            "none" => {}
            "hmac" if self.key_file.is_empty() => {
                return Err(invalid(
                    "gateway.key_file",
                    "\"\"",
                    "auth = \"hmac\" needs a key file",
                ))
            }
            "hmac" => {}
            other => {
                return Err(invalid(
                    "gateway.auth",
                    other,
                    "must be \"none\" or \"hmac\"",
                ))
            }
        }
        if !(1..=86_400).contains(&self.ticket_ttl_max_s) {
            return Err(invalid(
                "gateway.ticket_ttl_max_s",
                self.ticket_ttl_max_s,
                "must be within 1..=86400",
            ));
        }
        at_least(
            "gateway.replay_table_max",
            u64::from(self.replay_table_max),
            1,
        )
    }

    /// The ticket key of `auth = "hmac"` (read from `key_file`); `None` for
    /// `auth = "none"`.
    ///
    /// # Errors
    /// `gateway.key_file` unreadable or not a key.
    pub fn ticket_key(&self) -> Result<Option<crate::server::gateway::TicketKey>, ConfigError> {
        if self.auth != "hmac" {
            return Ok(None);
        }
        let text = std::fs::read_to_string(&self.key_file)
            .map_err(|e| invalid("gateway.key_file", &self.key_file, e.to_string()))?;
        crate::server::gateway::TicketKey::from_hex(&text)
            .map(Some)
            .map_err(|e| invalid("gateway.key_file", &self.key_file, e.to_string()))
    }
}

/// Test hooks (`[testing]`): faults injected on purpose on the server's
/// data path, so tests can show the client's checks and loadgen's rules
/// catch a broken server. Never for a real deployment: `tessera` refuses
/// any fault but `"none"` unless started with `--allow-faults`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestingConfig {
    /// `"none"`, `"drop-leave"`, `"stale-version"`, `"silence"` or
    /// `"drop-ack"` (see [`Fault`]).
    pub fault: String,
}

impl TestingConfig {
    /// The fault as a value (`Fault::None` for a name [`Config::validate`]
    /// refuses).
    ///
    /// [`Config::validate`]: super::Config::validate
    pub fn fault(&self) -> Fault {
        Fault::from_name(&self.fault).unwrap_or_default()
    }

    /// Refuses a fault other than none unless `allowed` (`tessera
    /// --allow-faults`; loadgen's embedded server allows it).
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming `testing.fault`.
    pub fn check_allowed(&self, allowed: bool) -> Result<(), ConfigError> {
        if allowed || self.fault() == Fault::None {
            return Ok(());
        }
        Err(invalid(
            "testing.fault",
            format!("{:?}", self.fault),
            "injects a fault on purpose; start tessera with --allow-faults to accept it",
        ))
    }

    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        if Fault::from_name(&self.fault).is_none() {
            let names: Vec<String> = Fault::ALL.iter().map(|f| format!("\"{f}\"")).collect();
            return Err(invalid(
                "testing.fault",
                format!("{:?}", self.fault),
                format!("must be one of {}", names.join(", ")),
            ));
        }
        Ok(())
    }
}
