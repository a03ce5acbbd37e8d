//! The typed sections of `tessera.toml` and the rules each one keeps.
//!
//! Every field is a named bound with its unit last. Defaults live in
//! `defaults.toml` (one place), and the reason for each is in
//! `tuning/README.md`.

use super::{invalid, ConfigError};
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

/// Ghost upkeep and migration knobs (seeds 000 and 002).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CellConfig {
    /// How often ghosts and migrations are checked.
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
    /// A ghost creation unacknowledged after this long is retried.
    pub ghost_create_timeout_ms: u64,
    /// Migrations out of one cell per check, at most.
    pub migrations_per_check_max: u32,
    /// Forwarding entries (entities that left) one cell keeps, at most.
    pub forward_table_max: u32,
    /// How long a forwarding entry lives.
    pub forward_ttl_ms: u64,
    /// Out-of-order client inputs buffered per entity, at most.
    pub input_buffer_max: u32,
}

impl CellConfig {
    pub(crate) fn validate(&self, world: &WorldConfig, aoi: &AoiConfig) -> Result<(), ConfigError> {
        at_least("cell.check_period_ms", self.check_period_ms, 1)?;
        if !(self.ghost_keep_margin_m.is_finite() && self.ghost_keep_margin_m >= 0.0) {
            return Err(invalid(
                "cell.ghost_keep_margin_m",
                self.ghost_keep_margin_m,
                "must be finite and >= 0",
            ));
        }
        positive("cell.migrate_margin_m", self.migrate_margin_m)?;
        // An observer up to migrate_margin_m outside its cell sees up to
        // leave_radius_m further: all of that must be ghosted into its cell.
        let reach = self.migrate_margin_m + aoi.leave_radius_m;
        if reach > world.ghost_radius_m {
            return Err(invalid(
                "cell.migrate_margin_m",
                self.migrate_margin_m,
                format!(
                    "cell.migrate_margin_m + aoi.leave_radius_m = {reach} must be <= world.ghost_radius_m = {}, \
                     or observers near a border miss entities",
                    world.ghost_radius_m
                ),
            ));
        }
        at_least(
            "cell.ghosts_created_per_check_max",
            u64::from(self.ghosts_created_per_check_max),
            1,
        )?;
        at_least(
            "cell.ghosts_deleted_per_check_max",
            u64::from(self.ghosts_deleted_per_check_max),
            1,
        )?;
        at_least(
            "cell.ghost_create_timeout_ms",
            self.ghost_create_timeout_ms,
            self.check_period_ms,
        )?;
        at_least(
            "cell.migrations_per_check_max",
            u64::from(self.migrations_per_check_max),
            1,
        )?;
        at_least(
            "cell.forward_table_max",
            u64::from(self.forward_table_max),
            1,
        )?;
        at_least(
            "cell.forward_ttl_ms",
            self.forward_ttl_ms,
            self.check_period_ms,
        )?;
        at_least("cell.input_buffer_max", u64::from(self.input_buffer_max), 1)
    }
}

/// Property sync ordering and caching (seed 000).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SyncConfig {
    /// Early sync messages a ghost buffers per entity before asking for a resync.
    pub reorder_buffer_max: u32,
    /// Recent sync messages kept per entity (and carried on migration).
    pub cache_len_max: u32,
    /// Cached sync messages older than this are dropped.
    pub cache_age_ms: u64,
}

impl SyncConfig {
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        at_least(
            "sync.reorder_buffer_max",
            u64::from(self.reorder_buffer_max),
            1,
        )?;
        at_least("sync.cache_len_max", u64::from(self.cache_len_max), 1)?;
        at_least("sync.cache_age_ms", self.cache_age_ms, 1)
    }
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
