//! Knobs of the space tree ([`SpaceParams`]) and of its balancing policy
//! ([`BalanceParams`]), with their defaults and the reason for each.
//!
//! Owns only plain values and their validation. Must not hold state or know
//! about shards, cells or loads beyond the numbers.
//!
//! Loads are measured in *cores*: 1.0 is one core busy the whole period, for a
//! cell (its entities' CPU time over the period) and for a shard alike. The
//! seed measures cell loads the same way (ns spent / ns elapsed) and process
//! loads in percent; we use one unit for both.

/// Why a params struct was refused. Names the field.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ParamError {
    /// The field is NaN, infinite, zero or negative where it must be positive.
    #[error("{0} must be finite and positive")]
    NotPositive(&'static str),
    /// The field breaks a rule relating it to another field.
    #[error("{field}: {rule}")]
    Rule {
        /// The offending field.
        field: &'static str,
        /// The rule it breaks.
        rule: &'static str,
    },
}

/// Geometry rules of one space's tree. Identical on every replica (it travels
/// inside the snapshot).
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    serde::Serialize,
    serde::Deserialize,
    rkyv::Archive,
    rkyv::Serialize,
    rkyv::Deserialize,
)]
#[rkyv(derive(Debug))]
#[serde(default)]
pub struct SpaceParams {
    /// Ghost radius: a real within this distance of another cell has a ghost
    /// there. Default 50 m (a typical AOI radius; the seed passes it in).
    pub ghost_radius_m: f64,
    /// Smallest side of a normal leaf, and the width of the strip a split cuts
    /// off. Default `4 x ghost_radius_m`, the seed's rule: a real can then be
    /// ghosted at most one cell deep on each side, and a split strip is
    /// itself a legal cell. Must be `>= 4 x ghost_radius_m`.
    pub min_cell_side_m: f64,
    /// Side a merging leaf shrinks to across its parent's split axis.
    /// Default `0.5 x ghost_radius_m` (seed): small enough that its reals
    /// migrate out, non-zero so the tree keeps a real rectangle. Must be
    /// `> 0` and `< min_cell_side_m`.
    pub merging_side_m: f64,
}

impl SpaceParams {
    /// The seed's rules for a given ghost radius: sides `4 x`, merging `0.5 x`.
    pub fn for_ghost_radius(ghost_radius_m: f64) -> Self {
        SpaceParams {
            ghost_radius_m,
            min_cell_side_m: 4.0 * ghost_radius_m,
            merging_side_m: 0.5 * ghost_radius_m,
        }
    }

    /// Checks every field and the rules between them.
    ///
    /// # Errors
    /// [`ParamError`] naming the first bad field.
    pub fn validate(&self) -> Result<(), ParamError> {
        positive(self.ghost_radius_m, "ghost_radius_m")?;
        positive(self.min_cell_side_m, "min_cell_side_m")?;
        positive(self.merging_side_m, "merging_side_m")?;
        if self.min_cell_side_m < 4.0 * self.ghost_radius_m {
            return Err(ParamError::Rule {
                field: "min_cell_side_m",
                rule: "must be at least 4 x ghost_radius_m",
            });
        }
        if self.merging_side_m >= self.min_cell_side_m {
            return Err(ParamError::Rule {
                field: "merging_side_m",
                rule: "must be below min_cell_side_m",
            });
        }
        Ok(())
    }
}

impl Default for SpaceParams {
    fn default() -> Self {
        SpaceParams::for_ghost_radius(50.0)
    }
}

/// Thresholds of the balancing policy (the seed's `cell_load_balance_param`),
/// plus the load model's smoothing and bounds.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BalanceParams {
    /// Weight of a new cell load report in the exponential smoothing,
    /// `smoothed = a * new + (1 - a) * smoothed`. Default 0.5: the weight of a
    /// report halves each period, so the smoothed value mostly reflects the
    /// last ~3 reports, the span the seed's ring of recent loads covers and
    /// the span the `*_reports_min` gates wait for.
    pub load_smoothing: f64,
    /// Most entity samples one cell report may carry (bounds the load book).
    /// Default 20 000: far above a cell's entity count, so it only stops
    /// garbage.
    pub entity_samples_max: usize,
    /// A cell splits only after more than this many reports since its rect
    /// last changed (seed `min_cell_load_report_counter_when_split`; "high
    /// load in several recent reports"). Default 3.
    pub split_reports_min: u32,
    /// A cell splits only when its smoothed load is at least this (seed
    /// `min_cell_load_when_split`). Default 0.6 cores.
    pub split_cell_load_min: f64,
    /// A cell splits only when its shard's load is at least this: a shard
    /// with spare time needs no split (seed `min_game_load_when_split`).
    /// Default 0.8 cores.
    pub split_shard_load_min: f64,
    /// Penalty on a split direction parallel to and touching the parent's
    /// split, so cuts alternate instead of slicing thin parallel strips
    /// (seed: x0.5).
    pub split_same_direction_factor: f64,
    /// A split is made only if it is predicted to lower the load of the
    /// busier of the cell's shard and the new cell's shard by at least this
    /// (cores): the load moved is the cell's load times the share of its
    /// sample load inside the new cell. A split whose strip holds the whole
    /// hot spot would only move it to the other shard (every real migrating
    /// for nothing), and one onto the cell's own shard gains nothing. Not
    /// applied with a single shard (cells then split for granularity, as in
    /// the seed). Default 0.05 cores. Not in the seed.
    pub split_gain_min: f64,
    /// A boundary moves only after more than this many reports on every leaf
    /// of both sides since their rects last changed (seed: "not adjusted
    /// recently", load needs time to settle). Default 3.
    pub rebalance_reports_min: u32,
    /// The shrinking side's average leaf load must exceed this; below it
    /// the seed prefers moves deeper down the tree. Default 0.1 cores.
    pub rebalance_avg_load_min: f64,
    /// The two sides' average leaf loads must differ by more than this (seed
    /// `min_sibling_game_load_diff_when_shrink`). Also the stop condition:
    /// pairs closer than this are left alone. Default 0.1 cores.
    pub rebalance_load_diff_min: f64,
    /// Fraction of the equalising load the tenths search aims to move in
    /// one step (never below the seed's `rebalance_load_diff_min / 2`).
    /// Default 0.5: converges geometrically while smoothed loads lag.
    pub rebalance_target_fraction: f64,
    /// A leaf merges only after more than this many reports on it and on its
    /// sibling (seed `min_cell_load_report_counter_when_remove`). Default 3.
    pub merge_reports_min: u32,
    /// A leaf merges only when its smoothed load is at most this (seed
    /// `max_cell_load_when_remove`). Default 0.05 cores.
    pub merge_cell_load_max: f64,
    /// Hysteresis between split and merge: a pair merges only when its
    /// summed smoothed load is at most this fraction of
    /// `split_cell_load_min`, so the merged cell is well below the split
    /// threshold and a half-gathered crowd does not split and merge in turn.
    /// Default 0.5. Not in the seed (its thresholds are far apart).
    pub merge_pair_load_fraction: f64,
    /// Most changes one decision returns (the seed does at most one
    /// rebalance, one split and one merge per round). Default 3.
    pub changes_per_decision_max: usize,
}

impl Default for BalanceParams {
    fn default() -> Self {
        BalanceParams {
            load_smoothing: 0.5,
            entity_samples_max: 20_000,
            split_reports_min: 3,
            split_cell_load_min: 0.6,
            split_shard_load_min: 0.8,
            split_same_direction_factor: 0.5,
            split_gain_min: 0.05,
            rebalance_reports_min: 3,
            rebalance_avg_load_min: 0.1,
            rebalance_load_diff_min: 0.1,
            rebalance_target_fraction: 0.5,
            merge_reports_min: 3,
            merge_cell_load_max: 0.05,
            merge_pair_load_fraction: 0.5,
            changes_per_decision_max: 3,
        }
    }
}

impl BalanceParams {
    /// Checks every field.
    ///
    /// # Errors
    /// [`ParamError`] naming the first bad field.
    pub fn validate(&self) -> Result<(), ParamError> {
        if !(self.load_smoothing > 0.0 && self.load_smoothing <= 1.0) {
            return Err(ParamError::Rule {
                field: "load_smoothing",
                rule: "must be in (0, 1]",
            });
        }
        if self.entity_samples_max == 0 {
            return Err(ParamError::NotPositive("entity_samples_max"));
        }
        non_negative(self.split_cell_load_min, "split_cell_load_min")?;
        non_negative(self.split_shard_load_min, "split_shard_load_min")?;
        non_negative(self.rebalance_avg_load_min, "rebalance_avg_load_min")?;
        positive(self.rebalance_load_diff_min, "rebalance_load_diff_min")?;
        positive(self.rebalance_target_fraction, "rebalance_target_fraction")?;
        non_negative(self.merge_cell_load_max, "merge_cell_load_max")?;
        non_negative(self.split_gain_min, "split_gain_min")?;
        if !(self.merge_pair_load_fraction >= 0.0 && self.merge_pair_load_fraction <= 1.0) {
            return Err(ParamError::Rule {
                field: "merge_pair_load_fraction",
                rule: "must be in [0, 1]",
            });
        }
        if !(self.split_same_direction_factor >= 0.0 && self.split_same_direction_factor <= 1.0) {
            return Err(ParamError::Rule {
                field: "split_same_direction_factor",
                rule: "must be in [0, 1]",
            });
        }
        Ok(())
    }
}

fn positive(v: f64, name: &'static str) -> Result<(), ParamError> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(ParamError::NotPositive(name))
    }
}

/// Infinity is allowed here: it disables the rule it gates.
fn non_negative(v: f64, name: &'static str) -> Result<(), ParamError> {
    if v >= 0.0 {
        Ok(())
    } else {
        Err(ParamError::Rule {
            field: name,
            rule: "must be >= 0",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_follow_the_seed() {
        let s = SpaceParams::default();
        s.validate().unwrap();
        assert_eq!(s.min_cell_side_m, 4.0 * s.ghost_radius_m);
        assert_eq!(s.merging_side_m, 0.5 * s.ghost_radius_m);
        BalanceParams::default().validate().unwrap();
    }

    #[test]
    fn bad_params_name_the_field() {
        let mut s = SpaceParams::default();
        s.min_cell_side_m = 3.0 * s.ghost_radius_m;
        assert!(matches!(
            s.validate(),
            Err(ParamError::Rule {
                field: "min_cell_side_m",
                ..
            })
        ));
        s = SpaceParams::for_ghost_radius(f64::NAN);
        assert_eq!(s.validate(), Err(ParamError::NotPositive("ghost_radius_m")));
        let b = BalanceParams {
            load_smoothing: 0.0,
            ..BalanceParams::default()
        };
        assert!(b.validate().is_err());
    }
}
