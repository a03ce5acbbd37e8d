//! The typed sections of `tessera.toml` and the rules each one keeps.
//!
//! Every field is a named bound with its unit last. Defaults live in
//! `defaults.toml` (one place), and the reason for each is in
//! `tuning/README.md`.

use super::{invalid, ConfigError};
use crate::core::cell::{CellParams, CellParamsError};
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
}

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
        at_least("aoi.max_interest", u64::from(self.max_interest), 1)
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

/// The tick loop.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeConfig {
    /// One simulation tick, milliseconds.
    pub tick_ms: u64,
}

impl RuntimeConfig {
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        at_least("runtime.tick_ms", self.tick_ms, 1)?;
        if self.tick_ms > 1000 {
            return Err(invalid("runtime.tick_ms", self.tick_ms, "must be <= 1000"));
        }
        Ok(())
    }
}
