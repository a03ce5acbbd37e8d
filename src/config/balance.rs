//! The `[balance]` section (the space service: on/off, gathering period,
//! merge draining, report bounds, the NPC crowd demo knob, and the policy
//! thresholds of [`BalanceParams`], flattened into the same table) and the
//! `[spaces]` section (space types of the instance directory).
//!
//! Owns only values and their validation.

use super::{invalid, ConfigError};
use crate::core::space::{BalanceParams, ServiceParams, SpaceKind, SpaceTypeConfig};
use serde::{Deserialize, Serialize};

/// `[balance]`: the space service of the server.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BalanceConfig {
    /// Run the balancer (shard 0 gathers loads and moves, splits and merges
    /// cells). Off: the tree stays as built at start (compare runs).
    pub enabled: bool,
    /// Load reports and balancing rounds every this many milliseconds.
    pub gather_period_ms: u64,
    /// Consecutive empty reports before a merging cell is removed.
    pub merge_empty_reports_min: u32,
    /// Most entity samples one cell report carries (reals beyond it are
    /// summed into the cell's load only).
    pub report_samples_max: usize,
    /// Demo and test knob: NPCs walk to within this radius of
    /// (`npc_crowd_x_m`, `npc_crowd_z_m`) and mill there. 0 = they wander.
    pub npc_crowd_radius_m: f64,
    /// Centre of the NPC crowd, x.
    pub npc_crowd_x_m: f64,
    /// Centre of the NPC crowd, z.
    pub npc_crowd_z_m: f64,
    /// The policy's thresholds (same table).
    #[serde(flatten)]
    pub policy: BalanceParams,
}

/// What a balancer takes of `[balance]`: the server's `HostBalance` and the
/// simulator's `SimBalance` are both built from [`BalanceConfig::balancer`],
/// so a key means the same in both.
///
/// The NPC crowd keys (`npc_crowd_radius_m`, `npc_crowd_x_m`,
/// `npc_crowd_z_m`) are left out: they steer the server's NPCs, and the
/// simulator has no NPCs (its bots follow the scenario). `tuning sweep`
/// refuses them as keys the simulator does not read.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BalancerParams {
    /// `enabled`: false freezes the service (the start-up tree stays).
    pub enabled: bool,
    /// `gather_period_ms`, `merge_empty_reports_min` and the policy
    /// thresholds (`entity_samples_max` also bounds the load recorder).
    pub service: ServiceParams,
    /// `report_samples_max`: entity samples per cell report (the loads of
    /// reals beyond it are summed into the cell's load only).
    pub report_samples_max: usize,
}

impl BalanceConfig {
    /// The service params these keys give.
    pub fn service_params(&self) -> ServiceParams {
        ServiceParams {
            gather_period_ms: self.gather_period_ms,
            merge_empty_reports_min: self.merge_empty_reports_min,
            balance: self.policy,
            ..ServiceParams::default()
        }
    }

    /// Everything a balancer takes of these keys (see [`BalancerParams`]).
    pub fn balancer(&self) -> BalancerParams {
        BalancerParams {
            enabled: self.enabled,
            service: self.service_params(),
            report_samples_max: self.report_samples_max,
        }
    }

    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        self.service_params()
            .validate()
            .map_err(|e| super::sections::param_error("balance", &e))?;
        if self.report_samples_max == 0 {
            return Err(invalid("balance.report_samples_max", 0, "must be >= 1"));
        }
        let finite = [
            ("balance.npc_crowd_radius_m", self.npc_crowd_radius_m),
            ("balance.npc_crowd_x_m", self.npc_crowd_x_m),
            ("balance.npc_crowd_z_m", self.npc_crowd_z_m),
        ];
        for (key, v) in finite {
            if !v.is_finite() {
                return Err(invalid(key, v, "must be finite"));
            }
        }
        if self.npc_crowd_radius_m < 0.0 {
            return Err(invalid(
                "balance.npc_crowd_radius_m",
                self.npc_crowd_radius_m,
                "must be >= 0",
            ));
        }
        Ok(())
    }
}

/// Refuses keys of `[balance]` that no field takes (`flatten` cannot deny
/// unknown fields itself): the known keys are those a serialised
/// [`BalanceConfig`] has.
///
/// # Errors
/// [`ConfigError::Invalid`] naming the first unknown key.
pub(crate) fn check_keys(table: &toml::Table) -> Result<(), ConfigError> {
    let Some(toml::Value::Table(given)) = table.get("balance") else {
        return Ok(());
    };
    let known = toml::Table::try_from(BalanceConfig {
        enabled: true,
        gather_period_ms: 1,
        merge_empty_reports_min: 1,
        report_samples_max: 1,
        npc_crowd_radius_m: 0.0,
        npc_crowd_x_m: 0.0,
        npc_crowd_z_m: 0.0,
        policy: BalanceParams::default(),
    })
    .expect("balance config serialises");
    match given.keys().find(|k| !known.contains_key(*k)) {
        Some(k) => Err(invalid(format!("balance.{k}"), "(set)", "unknown key")),
        None => Ok(()),
    }
}

/// `[spaces]`: the space types (`[[spaces.types]]`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpacesConfig {
    /// A type gets a new instance when its players per instance pass this
    /// fraction of `max_player_load`. Default 0.8.
    #[serde(default = "heavy_default")]
    pub heavy_load_threshold: f64,
    /// An instance empty this long is reclaimed. Default 30 000 ms.
    #[serde(default = "reclaim_default")]
    pub reclaim_empty_after_ms: u64,
    /// Most spaces (the world and live instances). Default 4096.
    #[serde(default = "instances_default")]
    pub instances_max: usize,
    /// Period of the directory's round (heavy-load creation, reclaiming),
    /// on shard 0. Default 1000 ms.
    #[serde(default = "round_default")]
    pub round_ms: u64,
    /// Messages held per shard for instance cells whose creation has not
    /// arrived yet (more are dropped, counted). Default 16 384.
    #[serde(default = "parked_default")]
    pub parked_max: usize,
    /// Every space type; exactly one of kind `union` (the world).
    #[serde(default)]
    pub types: Vec<SpaceTypeConfig>,
}

fn heavy_default() -> f64 {
    0.8
}
fn reclaim_default() -> u64 {
    30_000
}
fn instances_default() -> usize {
    4096
}
fn round_default() -> u64 {
    1000
}
fn parked_default() -> usize {
    16_384
}

impl SpacesConfig {
    /// The instance directory's params.
    pub fn instance_params(&self) -> crate::core::space::InstanceParams {
        crate::core::space::InstanceParams {
            heavy_load_threshold: self.heavy_load_threshold,
            reclaim_empty_after_ms: self.reclaim_empty_after_ms,
            instances_max: self.instances_max,
            ..Default::default()
        }
    }

    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        if !(self.heavy_load_threshold > 0.0 && self.heavy_load_threshold.is_finite()) {
            return Err(invalid(
                "spaces.heavy_load_threshold",
                self.heavy_load_threshold,
                "must be > 0",
            ));
        }
        if self.instances_max < 1 || self.round_ms == 0 || self.parked_max < 1 {
            return Err(invalid(
                "spaces.instances_max / spaces.round_ms / spaces.parked_max",
                format!(
                    "{} / {} / {}",
                    self.instances_max, self.round_ms, self.parked_max
                ),
                "must be >= 1",
            ));
        }
        let mut ids: Vec<u32> = self.types.iter().map(|t| t.type_id).collect();
        ids.sort_unstable();
        if let Some(w) = ids.windows(2).find(|w| w[0] == w[1]) {
            return Err(invalid("spaces.types.type_id", w[0], "defined twice"));
        }
        let unions = self
            .types
            .iter()
            .filter(|t| t.kind == SpaceKind::Union)
            .count();
        if !self.types.is_empty() && unions != 1 {
            return Err(invalid(
                "spaces.types.kind",
                unions,
                "exactly one type must be `union` (the world)",
            ));
        }
        if let Some(t) = self.types.iter().find(|t| t.max_player_load == 0) {
            return Err(invalid(
                "spaces.types.max_player_load",
                format!("0 (type {})", t.type_id),
                "must be >= 1",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    #[test]
    fn balance_keys_parse_flat_and_validate() {
        let c = Config::default();
        assert!(c.balance.enabled);
        assert_eq!(c.balance.policy.split_cell_load_min, 0.6);
        assert_eq!(c.spaces.types.len(), 4);
        let off = Config::from_toml("[balance]\nenabled = false\nsplit_cell_load_min = 0.9\n")
            .expect("valid");
        assert!(!off.balance.enabled);
        assert_eq!(off.balance.policy.split_cell_load_min, 0.9);
        let bad = Config::from_toml("[balance]\ngather_period_ms = 0\n").unwrap_err();
        assert!(
            bad.to_string().contains("balance.gather_period_ms"),
            "{bad}"
        );
        let unknown = Config::from_toml("[balance]\nno_such_key = 1\n");
        assert!(unknown.is_err(), "unknown keys are refused");
        let twice = "[[spaces.types]]\ntype_id = 1\nname = \"a\"\nkind = \"union\"\nmax_player_load = 1\n\
                     [[spaces.types]]\ntype_id = 1\nname = \"b\"\nkind = \"town\"\nmax_player_load = 1\n";
        assert!(Config::from_toml(twice).is_err());
    }
}
