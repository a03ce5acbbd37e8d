//! Load measurement: the seed's `entity_load_stat` (a nested-depth recorder
//! that counts only the outermost call) and a bounded per-entity table of
//! them, [`LoadRecorder`].
//!
//! Sans-IO: the recorder never reads a clock. Every `begin`/`end` takes a
//! *stamp* (a `u64` that only grows, in any unit: nanoseconds from the
//! runtime's monotonic clock on a server, work units from a deterministic
//! [`WorkClock`] in the simulator). Work done between the outermost `begin`
//! and its matching `end` is charged once; nested pairs (an input handler
//! that runs a call on the same entity, an enter inside a create) add
//! nothing, so nothing is counted twice.
//!
//! Per period the owner drains the table ([`LoadRecorder::drain_period`]):
//! each entity's load since the last drain, then zeroed. What a period is,
//! and how stamps become cores, is the caller's business (the server's
//! `balance` module divides by the period length).
//!
//! Owns only counters keyed by entity id; must not know about cells, trees
//! or shards.

use crate::core::ids::EntityId;

/// One entity's load counters (seed `entity_load_stat`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadStat {
    current: u64,
    accumulated: u64,
    depth: u32,
    begin: u64,
}

impl LoadStat {
    /// Load recorded since the last [`take_period`](Self::take_period).
    pub fn current(&self) -> u64 {
        self.current
    }

    /// Load recorded since creation.
    pub fn accumulated(&self) -> u64 {
        self.accumulated
    }

    /// True while inside at least one `push`.
    pub fn is_recording(&self) -> bool {
        self.depth > 0
    }

    /// Adds `load` directly (work measured elsewhere).
    pub fn add(&mut self, load: u64) {
        self.current = self.current.saturating_add(load);
        self.accumulated = self.accumulated.saturating_add(load);
    }

    /// Enters a recorded call at `stamp`; only the outermost one starts the
    /// measurement.
    pub fn push(&mut self, stamp: u64) {
        if self.depth == 0 {
            self.begin = stamp;
        }
        self.depth = self.depth.saturating_add(1);
    }

    /// Leaves a recorded call at `stamp`; the outermost one adds the time
    /// since its `push`. A stamp before the start counts as zero.
    ///
    /// # Panics
    /// In debug builds, on a `pop` without a `push` (a pairing bug).
    pub fn pop(&mut self, stamp: u64) {
        debug_assert!(self.depth > 0, "load pop without push");
        if self.depth == 0 {
            return;
        }
        self.depth -= 1;
        if self.depth == 0 {
            self.add(stamp.saturating_sub(self.begin));
        }
    }

    /// The load of the period that ends now; the period counter restarts.
    pub fn take_period(&mut self) -> u64 {
        std::mem::take(&mut self.current)
    }
}

/// A source of stamps for [`LoadRecorder::scope`].
pub trait CostClock {
    /// The current stamp (never decreases).
    fn stamp(&self) -> u64;
}

/// A deterministic clock that moves only when told: the simulator charges
/// work units to it, so loads are a pure function of the seed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkClock {
    now: u64,
}

impl WorkClock {
    /// At stamp 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves the clock by `units`.
    pub fn charge(&mut self, units: u64) {
        self.now = self.now.saturating_add(units);
    }
}

impl CostClock for WorkClock {
    fn stamp(&self) -> u64 {
        self.now
    }
}

/// Why the recorder refused an entity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LoadRecorderError {
    /// The table already tracks `entities_max` entities.
    #[error("load recorder full ({max} entities)")]
    Full {
        /// The bound.
        max: usize,
    },
}

/// Per-entity [`LoadStat`]s, sorted by entity id, at most `entities_max`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadRecorder {
    stats: Vec<(EntityId, LoadStat)>,
    entities_max: usize,
    refused: u64,
}

impl LoadRecorder {
    /// An empty table that tracks at most `entities_max` entities (further
    /// ones are counted in [`refused`](Self::refused), not tracked).
    pub fn new(entities_max: usize) -> Self {
        LoadRecorder {
            stats: Vec::new(),
            entities_max,
            refused: 0,
        }
    }

    fn slot(&mut self, e: EntityId) -> Result<&mut LoadStat, LoadRecorderError> {
        match self.stats.binary_search_by_key(&e, |s| s.0) {
            Ok(i) => Ok(&mut self.stats[i].1),
            Err(i) => {
                if self.stats.len() >= self.entities_max {
                    self.refused += 1;
                    return Err(LoadRecorderError::Full {
                        max: self.entities_max,
                    });
                }
                self.stats.insert(i, (e, LoadStat::default()));
                Ok(&mut self.stats[i].1)
            }
        }
    }

    /// Enters a recorded call of `e` at `stamp` (see [`LoadStat::push`]).
    ///
    /// # Errors
    /// [`LoadRecorderError::Full`] when `e` is new and the table is full;
    /// the matching `end` is then a no-op.
    pub fn begin(&mut self, e: EntityId, stamp: u64) -> Result<(), LoadRecorderError> {
        self.slot(e).map(|s| s.push(stamp))
    }

    /// Leaves a recorded call of `e` at `stamp` (unknown entities: no-op).
    pub fn end(&mut self, e: EntityId, stamp: u64) {
        if let Ok(i) = self.stats.binary_search_by_key(&e, |s| s.0) {
            self.stats[i].1.pop(stamp);
        }
    }

    /// Runs `f` as one recorded call of `e`, stamped by `clock` before and
    /// after (the RAII recorder of the seed, as a closure).
    pub fn scope<C: CostClock + ?Sized, R>(
        &mut self,
        e: EntityId,
        clock: &C,
        f: impl FnOnce(&mut Self) -> R,
    ) -> R {
        let tracked = self.begin(e, clock.stamp()).is_ok();
        let r = f(self);
        if tracked {
            self.end(e, clock.stamp());
        }
        r
    }

    /// Adds `load` to `e` directly.
    ///
    /// # Errors
    /// [`LoadRecorderError::Full`] as for [`begin`](Self::begin).
    pub fn add(&mut self, e: EntityId, load: u64) -> Result<(), LoadRecorderError> {
        self.slot(e).map(|s| s.add(load))
    }

    /// `e`'s counters.
    pub fn get(&self, e: EntityId) -> Option<&LoadStat> {
        self.stats
            .binary_search_by_key(&e, |s| s.0)
            .ok()
            .map(|i| &self.stats[i].1)
    }

    /// The period load of `e` (0 when unknown), zeroing it.
    pub fn take(&mut self, e: EntityId) -> u64 {
        match self.stats.binary_search_by_key(&e, |s| s.0) {
            Ok(i) => self.stats[i].1.take_period(),
            Err(_) => 0,
        }
    }

    /// Stops tracking `e` (it left this shard); returns its period load.
    pub fn forget(&mut self, e: EntityId) -> u64 {
        match self.stats.binary_search_by_key(&e, |s| s.0) {
            Ok(i) if !self.stats[i].1.is_recording() => self.stats.remove(i).1.current,
            Ok(i) => self.stats[i].1.take_period(),
            Err(_) => 0,
        }
    }

    /// Calls `f(entity, period load)` for every tracked entity in id order
    /// and starts a new period. Entities with nothing recorded this period
    /// and not inside a call are dropped from the table, so it only holds
    /// active entities.
    pub fn drain_period(&mut self, mut f: impl FnMut(EntityId, u64)) {
        self.stats.retain_mut(|(e, s)| {
            let load = s.take_period();
            f(*e, load);
            load > 0 || s.is_recording()
        });
    }

    /// Entities tracked.
    pub fn len(&self) -> usize {
        self.stats.len()
    }

    /// True when nothing is tracked.
    pub fn is_empty(&self) -> bool {
        self.stats.is_empty()
    }

    /// Entities refused because the table was full.
    pub fn refused(&self) -> u64 {
        self.refused
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_outermost_call_counts() {
        let mut s = LoadStat::default();
        s.push(10);
        s.push(12);
        s.pop(15);
        assert!(s.is_recording());
        s.pop(20);
        assert_eq!(s.current(), 10);
        s.push(30);
        s.pop(31);
        assert_eq!(s.take_period(), 11);
        assert_eq!(s.current(), 0);
        assert_eq!(s.accumulated(), 11);
    }

    #[test]
    fn scope_charges_the_clock_once() {
        let mut r = LoadRecorder::new(8);
        let mut clock = WorkClock::new();
        clock.charge(100);
        let e = EntityId(7);
        r.begin(e, clock.stamp()).unwrap();
        clock.charge(5);
        let stamp = clock.stamp();
        r.scope(e, &clock, |r| {
            r.scope(EntityId(8), &clock, |_| ());
        });
        clock.charge(3);
        r.end(e, clock.stamp());
        assert_eq!(stamp, 105);
        assert_eq!(r.get(e).unwrap().current(), 8);
        let mut seen = Vec::new();
        r.drain_period(|e, l| seen.push((e, l)));
        assert_eq!(seen, vec![(EntityId(7), 8), (EntityId(8), 0)]);
        // Idle entities leave the table.
        assert_eq!(r.len(), 1);
        r.drain_period(|_, _| ());
        assert!(r.is_empty());
    }

    #[test]
    fn a_full_table_refuses_and_counts() {
        let mut r = LoadRecorder::new(1);
        r.add(EntityId(1), 4).unwrap();
        assert_eq!(
            r.begin(EntityId(2), 0),
            Err(LoadRecorderError::Full { max: 1 })
        );
        r.end(EntityId(2), 9);
        assert_eq!(r.refused(), 1);
        assert_eq!(r.forget(EntityId(1)), 4);
        assert_eq!(r.take(EntityId(1)), 0);
        assert!(r.is_empty());
    }
}
