//! What one simulation run does: sizes, durations, faults and the scenario.
//!
//! [`SimOptions::swarm`] draws everything from the seed within sane bounds
//! (TigerBeetle's VOPR swarm testing: every seed explores a different corner
//! of the configuration space, and the seed alone replays it);
//! [`SimOptions::test_min`] is the smallest interesting run for unit tests.
//! [`SimOptions::validate`] names the offending field.
//!
//! Owns plain values only; knows nothing of the world that runs them.

use std::fmt;
use std::str::FromStr;

use crate::sim::net::{LatencyModel, NetParams};
use crate::sim::rng::Rng;

/// A bad option, naming the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OptionsError {
    /// A field's value is out of range or inconsistent with another.
    #[error("invalid sim option `{field}`: {reason}")]
    Invalid {
        /// The field, as in the config / command line (`latency.min_us`).
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// A scenario name that is not one of [`Scenario::ALL`].
    #[error("unknown scenario `{0}` (expected one of random-walk, border-walk, teleport, combat-storm, merge-drain, hotspot, crowd, swing)")]
    UnknownScenario(String),
}

/// What the bots do (and which protocol paths get stressed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    /// Everyone wanders: steady migrations everywhere.
    RandomWalk,
    /// Bots walk back and forth across cell borders: hysteresis, ghosts.
    BorderWalk,
    /// Bots jump far away: migrations without a neighbouring ghost.
    Teleport,
    /// Bots fight in clusters: heavy property sync and AOI fan-out.
    CombatStorm,
    /// Load drains from a region so cells merge, then returns so they split.
    MergeDrain,
    /// Everyone converges on one point, then disperses: rebalancing.
    Hotspot,
    /// A crowd gathers at one spot, then moves to another: on the balanced
    /// space tree, cells split under it and merge behind it.
    Crowd,
    /// A crowd swings between two spots: oscillating load on the balanced
    /// tree (boundary reversals are measured).
    Swing,
}

impl Scenario {
    /// Every scenario, in a fixed order (swarm draws from this).
    pub const ALL: [Scenario; 8] = [
        Scenario::RandomWalk,
        Scenario::BorderWalk,
        Scenario::Teleport,
        Scenario::CombatStorm,
        Scenario::MergeDrain,
        Scenario::Hotspot,
        Scenario::Crowd,
        Scenario::Swing,
    ];

    /// The scenarios a swarm draws from: the grid ones (the balanced ones
    /// need worlds big enough to split, see `tests/balance_sim.rs`).
    pub const SWARM: [Scenario; 6] = [
        Scenario::RandomWalk,
        Scenario::BorderWalk,
        Scenario::Teleport,
        Scenario::CombatStorm,
        Scenario::MergeDrain,
        Scenario::Hotspot,
    ];

    /// The command-line name (`border-walk`).
    pub const fn name(self) -> &'static str {
        match self {
            Scenario::RandomWalk => "random-walk",
            Scenario::BorderWalk => "border-walk",
            Scenario::Teleport => "teleport",
            Scenario::CombatStorm => "combat-storm",
            Scenario::MergeDrain => "merge-drain",
            Scenario::Hotspot => "hotspot",
            Scenario::Crowd => "crowd",
            Scenario::Swing => "swing",
        }
    }

    /// True for the scenarios run on the balanced space tree (the others
    /// run on the grid).
    pub const fn is_balanced(self) -> bool {
        matches!(self, Scenario::Crowd | Scenario::Swing)
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Scenario {
    type Err = OptionsError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Scenario::ALL
            .into_iter()
            .find(|sc| sc.name() == s)
            .ok_or_else(|| OptionsError::UnknownScenario(s.to_owned()))
    }
}

/// Hard ceilings that keep one run within seconds (checked by `validate`).
pub mod limits {
    /// Most shards.
    pub const SHARDS_MAX: u16 = 64;
    /// Most cells.
    pub const CELLS_MAX: u32 = 1_024;
    /// Most entities.
    pub const ENTITIES_MAX: u32 = 100_000;
    /// Most ticks in the faulty phase.
    pub const TICKS_MAX: u64 = 1_000_000;
    /// Longest tick.
    pub const TICK_MS_MAX: u64 = 1_000;
    /// Longest stall.
    pub const STALL_MS_MAX: u64 = 60_000;
}

/// One simulation run.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct SimOptions {
    /// Seeds the run's RNG; the seed replays the run.
    pub seed: u64,
    /// Shards (executors), at least 1.
    pub shards: u16,
    /// Initial cells, at least `shards`.
    pub cells: u32,
    /// Bot-driven entities (players).
    pub entities: u32,
    /// Ticks of phase one (faults injected, safety checked every step).
    pub ticks: u64,
    /// Ticks of phase two (faults healed) within which views must converge.
    pub heal_ticks: u64,
    /// Tick period, milliseconds.
    pub tick_ms: u64,
    /// Side of the square world, metres.
    pub world_side_m: f64,
    /// Bot walking speed, metres per second.
    pub bot_speed_mps: f64,
    /// Per-message latency between endpoints.
    pub latency: LatencyModel,
    /// Bound on messages in flight per ordered pair.
    pub in_flight_per_pair_max: usize,
    /// Chance per shard per tick that it stalls (phase one only).
    pub stall_probability: f64,
    /// Longest stall, milliseconds (drawn uniformly in `1..=` this).
    pub stall_ms_max: u64,
    /// What the bots do.
    pub scenario: Scenario,
}

impl Default for SimOptions {
    /// 4 shards, 16 cells, 200 bots walking at random for 500 ticks of
    /// 50 ms in a 2 km world, default latency, rare 200 ms stalls.
    fn default() -> Self {
        SimOptions {
            seed: 0,
            shards: 4,
            cells: 16,
            entities: 200,
            ticks: 500,
            heal_ticks: 200,
            tick_ms: 50,
            world_side_m: 2_000.0,
            bot_speed_mps: 5.0,
            latency: LatencyModel::default(),
            in_flight_per_pair_max: NetParams::default().in_flight_per_pair_max,
            stall_probability: 0.001,
            stall_ms_max: 200,
            scenario: Scenario::RandomWalk,
        }
    }
}

impl SimOptions {
    /// The smallest interesting run: 2 shards, 4 cells, 8 bots, 50 ticks.
    pub fn test_min() -> Self {
        SimOptions {
            shards: 2,
            cells: 4,
            entities: 8,
            ticks: 50,
            heal_ticks: 50,
            world_side_m: 400.0,
            stall_probability: 0.01,
            ..SimOptions::default()
        }
    }

    /// Everything drawn from `seed` (VOPR swarm): shard, cell and entity
    /// counts, tick length, latency and burst shape, stall rate and length,
    /// scenario. Always valid. Draws from its own RNG, so the run's RNG
    /// (also seeded by `seed`) is unaffected by how many draws this makes.
    pub fn swarm(seed: u64) -> Self {
        let mut r = Rng::new(seed ^ 0x5357_4152_4D5F_4F50); // "SWARM_OP"
        let shards = r.range(1, 8) as u16;
        let cells = r.range(u64::from(shards), u64::from(shards) * 4) as u32;
        let min_us = r.range(0, 2_000);
        let latency = LatencyModel {
            min_us,
            max_us: min_us + r.range(0, 20_000),
            pair_skew_us_max: r.range(0, 5_000),
            burst_probability: *r.choose(&[0.0, 0.001, 0.01, 0.05]).expect("non-empty"),
            burst_us_max: r.range(1_000, 200_000),
        };
        let options = SimOptions {
            seed,
            shards,
            cells,
            entities: r.range(1, 400) as u32,
            ticks: r.range(100, 600),
            heal_ticks: 200,
            tick_ms: *r.choose(&[20, 33, 50, 100]).expect("non-empty"),
            world_side_m: r.f64_range(300.0, 3_000.0).round(),
            bot_speed_mps: r.f64_range(1.0, 12.0),
            latency,
            in_flight_per_pair_max: *r.choose(&[64, 1_024, 4_096]).expect("non-empty"),
            stall_probability: *r.choose(&[0.0, 0.001, 0.005, 0.02]).expect("non-empty"),
            stall_ms_max: r.range(10, 1_000),
            scenario: *r.choose(&Scenario::SWARM).expect("non-empty"),
        };
        debug_assert_eq!(options.validate(), Ok(()));
        options
    }

    /// The network parameters these options imply.
    pub fn net_params(&self) -> NetParams {
        NetParams {
            latency: self.latency,
            in_flight_per_pair_max: self.in_flight_per_pair_max,
        }
    }

    /// Checks every field.
    ///
    /// # Errors
    /// [`OptionsError::Invalid`] naming the first bad field.
    pub fn validate(&self) -> Result<(), OptionsError> {
        use limits::*;
        let bad = |field, reason: String| Err(OptionsError::Invalid { field, reason });
        if !(1..=SHARDS_MAX).contains(&self.shards) {
            return bad("shards", format!("{} not in 1..={SHARDS_MAX}", self.shards));
        }
        if !(u32::from(self.shards)..=CELLS_MAX).contains(&self.cells) {
            let reason = format!("{} not in shards..={CELLS_MAX}", self.cells);
            return bad("cells", reason);
        }
        if self.entities > ENTITIES_MAX {
            return bad("entities", format!("{} > {ENTITIES_MAX}", self.entities));
        }
        if !(1..=TICKS_MAX).contains(&self.ticks) {
            return bad("ticks", format!("{} not in 1..={TICKS_MAX}", self.ticks));
        }
        if self.heal_ticks > TICKS_MAX {
            return bad("heal_ticks", format!("{} > {TICKS_MAX}", self.heal_ticks));
        }
        if !(1..=TICK_MS_MAX).contains(&self.tick_ms) {
            return bad(
                "tick_ms",
                format!("{} not in 1..={TICK_MS_MAX}", self.tick_ms),
            );
        }
        if !(self.world_side_m.is_finite() && self.world_side_m >= 10.0) {
            return bad("world_side_m", format!("{} < 10 m", self.world_side_m));
        }
        if !(self.bot_speed_mps.is_finite() && (0.0..=100.0).contains(&self.bot_speed_mps)) {
            return bad(
                "bot_speed_mps",
                format!("{} not in [0, 100]", self.bot_speed_mps),
            );
        }
        self.net_params().validate()?;
        if !(0.0..=1.0).contains(&self.stall_probability) {
            return bad(
                "stall_probability",
                format!("{} not in [0, 1]", self.stall_probability),
            );
        }
        if !(1..=STALL_MS_MAX).contains(&self.stall_ms_max) {
            let reason = format!("{} not in 1..={STALL_MS_MAX}", self.stall_ms_max);
            return bad("stall_ms_max", reason);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of(r: Result<(), OptionsError>) -> &'static str {
        match r {
            Err(OptionsError::Invalid { field, .. }) => field,
            other => panic!("expected an invalid field, got {other:?}"),
        }
    }

    #[test]
    fn defaults_and_test_min_are_valid() {
        assert_eq!(SimOptions::default().validate(), Ok(()));
        assert_eq!(SimOptions::test_min().validate(), Ok(()));
    }

    #[test]
    fn swarm_is_valid_deterministic_and_varied() {
        let mut scenarios = std::collections::BTreeSet::new();
        let mut shard_counts = std::collections::BTreeSet::new();
        for seed in 0..500 {
            let o = SimOptions::swarm(seed);
            assert_eq!(o.validate(), Ok(()), "seed {seed}");
            assert_eq!(o, SimOptions::swarm(seed));
            assert_eq!(o.seed, seed);
            scenarios.insert(o.scenario);
            shard_counts.insert(o.shards);
        }
        assert_eq!(scenarios.len(), Scenario::SWARM.len());
        assert!(shard_counts.len() >= 6);
    }

    #[test]
    fn validation_names_the_field() {
        let base = SimOptions::test_min();
        let mut o = base.clone();
        o.shards = 0;
        assert_eq!(field_of(o.validate()), "shards");
        let mut o = base.clone();
        o.cells = 1;
        assert_eq!(field_of(o.validate()), "cells");
        let mut o = base.clone();
        o.tick_ms = 0;
        assert_eq!(field_of(o.validate()), "tick_ms");
        let mut o = base.clone();
        o.latency.min_us = o.latency.max_us + 1;
        assert_eq!(field_of(o.validate()), "latency.min_us");
        let mut o = base.clone();
        o.latency.burst_probability = 1.5;
        assert_eq!(field_of(o.validate()), "latency.burst_probability");
        let mut o = base.clone();
        o.in_flight_per_pair_max = 0;
        assert_eq!(field_of(o.validate()), "in_flight_per_pair_max");
        let mut o = base.clone();
        o.stall_probability = f64::NAN;
        assert_eq!(field_of(o.validate()), "stall_probability");
        let mut o = base;
        o.world_side_m = f64::INFINITY;
        assert_eq!(field_of(o.validate()), "world_side_m");
    }

    #[test]
    fn scenario_names_round_trip() {
        for sc in Scenario::ALL {
            assert_eq!(sc.name().parse::<Scenario>(), Ok(sc));
        }
        assert!(matches!(
            "nope".parse::<Scenario>(),
            Err(OptionsError::UnknownScenario(_))
        ));
    }
}
