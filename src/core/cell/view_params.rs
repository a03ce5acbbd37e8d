//! The bounds of what a cell hosts for its clients: the AOI index, the
//! observers (client views), the ghosts' sync caches and combat.
//!
//! Owns [`ViewParams`] and its validation; holds no state. Kept apart from
//! [`super::CellParams`] so the cell protocol's knobs and the view's knobs
//! (config sections `[aoi]`, and later `[view]`/`[combat]`) evolve
//! separately; [`super::Cell::with_views`] takes both.

use crate::core::aoi::{AoiParams, AreaSpec, FlagFilter};
use crate::core::combat::CombatParams;
use crate::core::entity::SyncCacheParams;
use crate::core::view::ObserverParams;

use super::params::CellParamsError;

/// What a cell needs to host client views and combat.
#[derive(Clone, Debug, PartialEq)]
pub struct ViewParams {
    /// The AOI grid: its `world` should be the world rectangle (entities
    /// outside are still indexed, clamped to the edge), `grid_cell_m` near
    /// `leave_radius_m`. Default: [`AoiParams::default`].
    pub aoi: AoiParams,
    /// An entity enters an observer's view within this ground distance
    /// (config `aoi.radius_m`). Default 45 m.
    pub radius_m: f64,
    /// An entity leaves the view beyond this distance, `>= radius_m`
    /// (config `aoi.leave_radius_m`). Default 48 m. The cell's
    /// `migrate_margin_m + leave_radius_m` should stay within the ghost
    /// radius (the config layer checks it) or views near a border miss
    /// entities across it.
    pub leave_radius_m: f64,
    /// Most entities in one view, the nearest kept (config
    /// `aoi.max_interest`). Default 100.
    pub max_interest: u32,
    /// Bounds of each observer; `view_entities_max` must be at least
    /// `max_interest`. Default: [`ObserverParams::default`].
    pub observer: ObserverParams,
    /// Recent sync messages each ghost keeps so observers that arrive by
    /// migration (or miss a message) fill gaps without a resync. Default 16.
    pub ghost_cache_max: usize,
    /// Payload bytes each ghost's cache keeps. Default 16 KiB.
    pub ghost_cache_bytes_max: usize,
    /// Cached ghost messages older than this are dropped. Default 3000 ms.
    pub ghost_cache_age_max_ms: u64,
    /// Combat timings and bounds. Default: [`CombatParams::default`].
    pub combat: CombatParams,
    /// Each observer's batch is flushed (sent) every this many ticks, at
    /// its own phase so that the cell's flushes spread evenly over the
    /// ticks (config `view.client_update_hz`). The observer's budget
    /// counts in flushes: its `tick_ms` is the flush period. Default 1.
    pub flush_every_ticks: u16,
    /// Whether the observers' flushes are spread over the
    /// `flush_every_ticks` ticks (each at its own phase) or all made in
    /// the same tick (config `view.client_phases`). Default spread.
    pub flush_phases: FlushPhases,
    /// An observer's area is brought up to date at every this many of its
    /// flushes, each area at its own phase so a cell's AOI work spreads
    /// evenly (config `aoi.update_every_flushes`); arrivals and restarts
    /// are brought up to date at once whatever it is. Default 1.
    pub aoi_every_flushes: u16,
}

/// When the observers of a cell flush, with `flush_every_ticks` > 1.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FlushPhases {
    /// Each observer at the phase of its slot: a cell's flushes, and its
    /// sends, spread evenly over the ticks (a smooth tick).
    #[default]
    Spread,
    /// Every observer in the ticks where the step is a multiple of
    /// `flush_every_ticks`: the sends leave in one burst per update
    /// period (cheaper for the kernel on loopback, a heavier tick).
    Aligned,
    /// Each observer in the tick of the period its owner's changes (its
    /// client's inputs) come in, starting at its spread phase: the answer
    /// to an input leaves in the tick it was applied (`flush_phase`).
    Input,
}

impl FlushPhases {
    /// True when the observer in watch slot `slot`, flushing at `step`,
    /// also has its area brought up to date: at every `aoi_every`-th of its
    /// flushes, the slots that flush together spread evenly over those
    /// flushes.
    #[inline]
    pub fn aoi_due(self, step: u64, slot: usize, every: u64, aoi_every: u64) -> bool {
        let nth = match self {
            // The slots flushing at `step` are every `every`-th one: their
            // flush counts differ by one from each to the next.
            FlushPhases::Spread => (step + slot as u64) / every,
            // All flush together: the slot spreads them.
            FlushPhases::Aligned => step / every + slot as u64,
            // At the phases of their own: a slot's flushes are `every`
            // steps apart (a moved phase skips or repeats one), and those
            // that kept the spread phase flush together every `every`-th.
            FlushPhases::Input => step / every + slot as u64 / every,
        };
        nth % aoi_every.max(1) == 0
    }
}

impl Default for ViewParams {
    fn default() -> Self {
        ViewParams {
            aoi_every_flushes: 1,
            aoi: AoiParams::default(),
            radius_m: 45.0,
            leave_radius_m: 48.0,
            max_interest: 100,
            observer: ObserverParams::default(),
            ghost_cache_max: 16,
            ghost_cache_bytes_max: 16 * 1024,
            ghost_cache_age_max_ms: 3_000,
            combat: CombatParams::default(),
            flush_every_ticks: 1,
            flush_phases: FlushPhases::Spread,
        }
    }
}

fn invalid(key: &'static str, reason: &'static str) -> CellParamsError {
    CellParamsError::Invalid { key, reason }
}

impl ViewParams {
    /// Checks every value and the relations between them.
    ///
    /// # Errors
    /// [`CellParamsError::Invalid`] naming the first bad key.
    pub fn validate(&self) -> Result<(), CellParamsError> {
        if self.aoi.validate().is_err() {
            return Err(invalid("aoi.world", "AOI grid parameters are unusable"));
        }
        if !(self.radius_m.is_finite() && self.radius_m > 0.0) {
            return Err(invalid("aoi.radius_m", "must be finite and > 0"));
        }
        if !(self.leave_radius_m.is_finite() && self.leave_radius_m >= self.radius_m) {
            return Err(invalid(
                "aoi.leave_radius_m",
                "must be finite and >= radius_m",
            ));
        }
        if self.max_interest == 0 {
            return Err(invalid("aoi.max_interest", "must be > 0"));
        }
        if self.observer.view_entities_max < self.max_interest as usize {
            return Err(invalid(
                "view.view_entities_max",
                "must be >= aoi.max_interest",
            ));
        }
        if self.flush_every_ticks == 0 {
            return Err(invalid(
                "view.client_update_hz",
                "flush period must be >= 1 tick",
            ));
        }
        if self.aoi_every_flushes == 0 {
            return Err(invalid("aoi.update_every_flushes", "must be >= 1"));
        }
        if self.ghost_cache_max == 0 || self.ghost_cache_bytes_max == 0 {
            return Err(invalid("view.ghost_cache_max", "must be > 0"));
        }
        // An observer pulls at its flush from the copies' caches: a period
        // longer than a ghost's cache would find it run past and resync
        // every moving entity at every update.
        if usize::from(self.flush_every_ticks) > self.ghost_cache_max {
            return Err(invalid(
                "view.client_update_hz",
                "the update period must be at most the ghost cache's length in ticks (ghost_cache_max)",
            ));
        }
        if self.ghost_cache_age_max_ms == 0 {
            return Err(invalid("view.ghost_cache_age_max_ms", "must be > 0"));
        }
        let c = &self.combat;
        if !(c.hit_range_m.is_finite() && c.hit_range_m >= 0.0) {
            return Err(invalid("combat.hit_range_m", "must be finite and >= 0"));
        }
        if c.pending_hits_max == 0 || c.resolved_hits_max == 0 {
            return Err(invalid("combat.pending_hits_max", "must be > 0"));
        }
        Ok(())
    }

    /// The AOI area of one observer.
    pub fn area(&self) -> AreaSpec {
        AreaSpec {
            radius_m: self.radius_m,
            leave_radius_m: Some(self.leave_radius_m),
            filter: FlagFilter::ACCEPT_ALL,
            height: None,
            max_interest: Some(self.max_interest),
        }
    }

    /// The ghosts' sync cache bounds.
    pub fn ghost_cache(&self) -> SyncCacheParams {
        SyncCacheParams {
            cache_msgs_max: self.ghost_cache_max,
            cache_bytes_max: self.ghost_cache_bytes_max,
            cache_age_max_ms: self.ghost_cache_age_max_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each observer's area is due at exactly one of every `k` of its
    /// flushes, and at each step a `k`-th of the observers flushing then
    /// (within one) are due, both phasings; spread, every step carries the
    /// same share of the areas (within one).
    #[test]
    fn aoi_due_takes_every_kth_flush_and_spreads_the_slots() {
        for phases in [
            FlushPhases::Spread,
            FlushPhases::Aligned,
            FlushPhases::Input,
        ] {
            for every in 1..=4u64 {
                for k in 1..=5u64 {
                    let slots = 60usize;
                    let mut table = super::super::flush_phase::PhaseTable::default();
                    for slot in 0..slots as u32 {
                        table.insert(slot, 0, false);
                    }
                    let mut per_slot = vec![(0u64, 0u64); slots];
                    let mut per_step = Vec::new();
                    for step in 0..every * k * 6 {
                        let (mut flushing, mut due_now) = (0u64, 0u64);
                        table.collect(phases, step, every, slots);
                        for &slot in table.flushing() {
                            let slot = slot as usize;
                            let (flushes, due) = &mut per_slot[slot];
                            *flushes += 1;
                            flushing += 1;
                            if phases.aoi_due(step, slot, every, k) {
                                *due += 1;
                                due_now += 1;
                            }
                        }
                        // Of the observers flushing now, a k-th, within one.
                        assert!(
                            due_now * k <= flushing + k && due_now * k + k >= flushing,
                            "{phases:?} every {every}, k {k}, step {step}: {due_now} of {flushing}"
                        );
                        per_step.push(due_now);
                    }
                    for (slot, &(flushes, due)) in per_slot.iter().enumerate() {
                        assert_eq!(flushes % k, 0, "{phases:?} every {every}, k {k}");
                        assert_eq!(
                            due * k,
                            flushes,
                            "{phases:?} every {every}, k {k}, slot {slot}"
                        );
                    }
                    if phases == FlushPhases::Aligned {
                        continue;
                    }
                    let (lo, hi) = (per_step.iter().min(), per_step.iter().max());
                    let (lo, hi) = (lo.copied().unwrap_or(0), hi.copied().unwrap_or(0));
                    let ideal = slots as u64 / (every * k);
                    assert!(
                        lo + 1 >= ideal && hi <= ideal + 1,
                        "every {every}, k {k}: {lo}..{hi} areas a step, ideally {ideal}"
                    );
                }
            }
        }
    }

    #[test]
    fn defaults_are_valid_and_bad_values_name_their_key() {
        ViewParams::default().validate().expect("defaults");
        let p = ViewParams {
            leave_radius_m: 10.0,
            ..ViewParams::default()
        };
        let err = p.validate().unwrap_err().to_string();
        assert!(err.contains("aoi.leave_radius_m"), "{err}");
        let p = ViewParams {
            max_interest: 5000,
            ..ViewParams::default()
        };
        let err = p.validate().unwrap_err().to_string();
        assert!(err.contains("view_entities_max"), "{err}");
        let cache = ViewParams::default().ghost_cache_max;
        let p = ViewParams {
            flush_every_ticks: u16::try_from(cache + 1).expect("small"),
            ..ViewParams::default()
        };
        let err = p.validate().unwrap_err().to_string();
        assert!(err.contains("view.client_update_hz"), "{err}");
        let p = ViewParams {
            flush_every_ticks: u16::try_from(cache).expect("small"),
            ..ViewParams::default()
        };
        p.validate()
            .expect("an update period as long as the cache is fine");
        let p = ViewParams {
            aoi_every_flushes: 0,
            ..ViewParams::default()
        };
        let err = p.validate().unwrap_err().to_string();
        assert!(err.contains("aoi.update_every_flushes"), "{err}");
    }
}
