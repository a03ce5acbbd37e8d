//! Running one configuration on the simulator and reducing the runs to the
//! figures a tuner compares (`sweep` and `recommend` both measure here).
//!
//! Owns the seeds loop and the figures' definitions; knows nothing of
//! command lines or printing.

use std::path::Path;

use tessera::config::{Config, ConfigError};
use tessera::sim::options::{Scenario, SimOptions};
use tessera::sim::report::SimSummary;
use tessera::sim::world::{WorldError, WorldParams};
use tessera::sim::world_run::run_one;

/// Why a configuration could not be measured.
#[derive(Debug, thiserror::Error)]
pub enum MeasureError {
    /// The config (base file, overrides and the tried value) does not load.
    #[error("{key} = {value}: {source}")]
    Config {
        /// The key being tried.
        key: String,
        /// Its value.
        value: String,
        /// What validation said.
        #[source]
        source: ConfigError,
    },
    /// The simulator refused to build a world.
    #[error("seed {seed}: {source}")]
    World {
        /// The seed.
        seed: u64,
        /// Why.
        #[source]
        source: WorldError,
    },
    /// Every value of a key gives the simulator the same parameters: it
    /// does not read the key, so measuring it would only show noise-free
    /// identical rows.
    #[error("the simulator does not read `{0}` (every value gives it the same parameters): it cannot be swept or recommended")]
    NotRead(String),
    /// A `[balance]` key on runs whose scenario has no balancer (the grid
    /// scenarios, or a swarm, which draws only those): every value would
    /// run the same worlds.
    #[error("`{key}` steers the balancer, which runs only in the tree scenarios: pass --scenario crowd or --scenario swing ({scenario} runs on the fixed grid)")]
    NoBalancer {
        /// The key.
        key: String,
        /// The scenario given, or `swarm`.
        scenario: String,
    },
}

/// Which runs: seeds `0..seeds` of the swarm, with the scenario and the
/// length forced when given.
#[derive(Clone, Copy, Debug)]
pub struct Runs {
    /// Seeds per value, at least 1.
    pub seeds: u64,
    /// Every seed runs this scenario (otherwise each seed draws one).
    pub scenario: Option<Scenario>,
    /// Ticks of phase one per seed (otherwise drawn from the seed).
    pub ticks: Option<u64>,
}

impl Runs {
    /// The options of seed `seed`. A tree scenario (`crowd`, `swing`)
    /// keeps the seed's network, stalls and length but takes the world
    /// shape of `tests/balance_sim.rs`, since the swarm's small worlds are
    /// too small for the tree to cut into their cells and their crowds too
    /// light to load one: at most 4 cells (shards at most the cells), a
    /// side of at least 2,000 m, 240 entities, bots at 40 m/s.
    pub fn options(&self, seed: u64) -> SimOptions {
        let mut o = SimOptions::swarm(seed);
        if let Some(s) = self.scenario {
            o.scenario = s;
        }
        if o.scenario.is_balanced() {
            o.cells = o.cells.clamp(2, 4);
            o.shards = o.shards.min(o.cells as u16);
            o.world_side_m = o.world_side_m.max(2_000.0);
            o.entities = 240;
            o.bot_speed_mps = 40.0;
        }
        if let Some(t) = self.ticks {
            o.ticks = t;
        }
        o
    }
}

/// The config `base` file and `overrides`, then `key = value`.
///
/// # Errors
/// [`MeasureError::Config`] naming the key and value.
pub fn config_with(
    base: Option<&Path>,
    overrides: &[String],
    key: &str,
    value: &str,
) -> Result<Config, MeasureError> {
    let mut all = overrides.to_vec();
    all.push(format!("{key}={value}"));
    all.extend(followers(base, overrides, key, value));
    Config::load(base, &all).map_err(|source| MeasureError::Config {
        key: key.to_owned(),
        value: value.to_owned(),
        source,
    })
}

/// What follows a swept `aoi.radius_m` unless the caller set it with
/// `--set`: the leave radius keeps its margin over the view radius (as in
/// the base config), and the ghost radius keeps its slack over the leave
/// radius where it would fall short (it is never lowered). Without them a
/// view radius swept past the default leave radius is refused (leave below
/// enter, or beyond the ghost radius), and one swept below it widens the
/// hysteresis, so the sweep would measure two knobs at once. Each follower
/// is said once on stderr.
fn followers(base: Option<&Path>, overrides: &[String], key: &str, value: &str) -> Vec<String> {
    const LEAVE: &str = "aoi.leave_radius_m";
    const GHOST: &str = "world.ghost_radius_m";
    let set = |k: &str| overrides.iter().any(|o| o.starts_with(&format!("{k}=")));
    let (Ok(radius), false) = (value.trim().parse::<f64>(), key != "aoi.radius_m") else {
        return Vec::new();
    };
    let Ok(start) = Config::load(base, overrides) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut leave = start.aoi.leave_radius_m;
    if !set(LEAVE) {
        leave = radius + (start.aoi.leave_radius_m - start.aoi.radius_m);
        out.push(format!("{LEAVE}={leave}"));
    }
    let slack = start.world.ghost_radius_m - start.aoi.leave_radius_m;
    if !set(GHOST) && leave + slack > start.world.ghost_radius_m {
        out.push(format!("{GHOST}={}", leave + slack));
    }
    if !out.is_empty() {
        eprintln!(
            "tuning: {key}={value} with {} (the margins of the base config; --set them to hold them)",
            out.join(", ")
        );
    }
    out
}

/// Refuses a key the simulator ignores: at least two of `configs` (the
/// valid ones) must give it different parameters.
///
/// # Errors
/// [`MeasureError::NotRead`] when all of them map to the same
/// [`WorldParams`] (a single value is accepted: nothing to compare).
pub fn check_read(key: &str, configs: &[&Config]) -> Result<(), MeasureError> {
    let params: Vec<WorldParams> = configs
        .iter()
        .map(|c| WorldParams::from_config(c))
        .collect();
    if params.len() >= 2 && params.iter().all(|p| *p == params[0]) {
        return Err(MeasureError::NotRead(key.to_owned()));
    }
    Ok(())
}

/// Refuses a `[balance]` key unless every run has a balancer (`runs`
/// forces a tree scenario: `crowd` or `swing`).
///
/// # Errors
/// [`MeasureError::NoBalancer`] naming the key and the scenario.
pub fn check_scenario(key: &str, runs: &Runs) -> Result<(), MeasureError> {
    let balanced = runs.scenario.is_some_and(Scenario::is_balanced);
    if key.starts_with("balance.") && !balanced {
        return Err(MeasureError::NoBalancer {
            key: key.to_owned(),
            scenario: runs
                .scenario
                .map_or_else(|| "the swarm".to_owned(), |s| s.to_string()),
        });
    }
    Ok(())
}

/// What the runs of one configuration measured.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Figures {
    /// Invariant violations over all seeds (anything but 0 disqualifies).
    pub violations: u64,
    /// Seeds run.
    pub seeds: u64,
    /// Ticks run, all seeds (heal ticks included).
    pub ticks: u64,
    /// Migrations over border crossings (1.0: one migration per crossing;
    /// below 1 a real walking back before the margin did not migrate).
    pub migrations_per_crossing: f64,
    /// Migrations per 1,000 ticks.
    pub migrations_per_kilotick: f64,
    /// Messages forwarded to a moved real per 1,000 ticks.
    pub forwarded_per_kilotick: f64,
    /// Ghosts created per 1,000 ticks (ghost churn).
    pub ghosts_created_per_kilotick: f64,
    /// Syncs applied by ghosts per 1,000 ticks (the steady ghost cost).
    pub ghost_syncs_per_kilotick: f64,
    /// Bytes of view batches per simulated client per second.
    pub view_bytes_per_client_s: f64,
    /// Entity versions sent to clients as updates, per client per second.
    pub view_updates_per_client_s: f64,
    /// View batches clients received and checked.
    pub view_batches: u64,
    /// The same per 1,000 ticks.
    pub view_batches_per_kilotick: f64,
    /// The busiest shard's work over the mean shard's, mean over seeds.
    pub load_spread_mean: f64,
    /// The same, the worst seed.
    pub load_spread_max: f64,
    /// Combat hits that landed.
    pub hits_landed: u64,
}

/// One configuration measured: the merged summary and the figures.
#[derive(Clone, Debug)]
pub struct Measured {
    /// Every seed's summary merged in order (its speed is left at 0: the
    /// caller owns the clock).
    pub summary: SimSummary,
    /// The figures.
    pub figures: Figures,
}

/// Runs `config` on the seeds of `runs`.
///
/// # Errors
/// [`MeasureError::World`] if a world cannot be built.
pub fn measure(config: &Config, runs: &Runs) -> Result<Measured, MeasureError> {
    let params = WorldParams::from_config(config);
    let mut total = SimSummary::default();
    let (mut client_s, mut view_batches, mut hits_landed) = (0.0, 0u64, 0u64);
    let mut spread_sum = 0.0;
    for seed in 0..runs.seeds {
        let o = runs.options(seed);
        let out = run_one(&o, &params).map_err(|source| MeasureError::World { seed, source })?;
        let s = &out.summary;
        client_s += f64::from(o.entities) * s.ticks as f64 * o.tick_ms as f64 / 1_000.0;
        spread_sum += s.load_spread_max;
        total.merge(s);
        view_batches += out.stats.view_batches;
        hits_landed += out.stats.hits_landed;
    }
    let per_kilotick = |n: u64| n as f64 * 1_000.0 / (total.ticks.max(1) as f64);
    let per_client_s = |n: u64| {
        if client_s > 0.0 {
            n as f64 / client_s
        } else {
            0.0
        }
    };
    let figures = Figures {
        violations: total.violations,
        seeds: total.seeds,
        ticks: total.ticks,
        migrations_per_crossing: total.migrations as f64 / total.crossings.max(1) as f64,
        migrations_per_kilotick: per_kilotick(total.migrations),
        forwarded_per_kilotick: per_kilotick(total.forwarded),
        ghosts_created_per_kilotick: per_kilotick(total.ghosts_created),
        ghost_syncs_per_kilotick: per_kilotick(total.ghost_syncs_applied),
        view_bytes_per_client_s: per_client_s(total.view_bytes),
        view_updates_per_client_s: per_client_s(total.view_updates),
        view_batches,
        view_batches_per_kilotick: per_kilotick(view_batches),
        load_spread_mean: spread_sum / runs.seeds.max(1) as f64,
        load_spread_max: total.load_spread_max,
        hits_landed,
    };
    Ok(Measured {
        summary: total,
        figures,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_swept_view_radius_takes_its_margins_along_unless_they_are_set() {
        let c = config_with(None, &[], "aoi.radius_m", "80").expect("followers make it valid");
        let d = Config::default();
        assert_eq!(c.aoi.radius_m, 80.0);
        let margin = d.aoi.leave_radius_m - d.aoi.radius_m;
        assert_eq!(c.aoi.leave_radius_m, 80.0 + margin);
        let slack = d.world.ghost_radius_m - d.aoi.leave_radius_m;
        assert_eq!(c.world.ghost_radius_m, 80.0 + margin + slack);
        // Below the default: the ghost radius is never lowered.
        let c = config_with(None, &[], "aoi.radius_m", "30").expect("valid");
        assert_eq!(c.aoi.leave_radius_m, 30.0 + margin);
        assert_eq!(c.world.ghost_radius_m, d.world.ghost_radius_m);
        // A leave radius the caller set is held (and 80 is then refused).
        let set = ["aoi.leave_radius_m=48".to_owned()];
        let err = config_with(None, &set, "aoi.radius_m", "80").unwrap_err();
        assert!(err.to_string().contains("aoi.leave_radius_m"), "{err}");
        // Other keys have no followers.
        assert!(followers(None, &[], "aoi.max_interest", "10").is_empty());
    }
}
