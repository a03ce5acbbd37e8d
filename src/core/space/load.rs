//! The load model the balancer reads: per-cell load reports, smoothed, and
//! per-entity load samples with positions, sorted per axis.
//!
//! Seed `space_node::update_load` / `make_sorted_loads`: each report replaces
//! the cell's entity samples and sorts index arrays by x and by z. We keep
//! those index arrays and add prefix sums over them, so "how much load lies
//! between two coordinates" is two binary searches instead of a walk.
//!
//! Smoothing is exponential: `smoothed = a * report + (1 - a) * smoothed` with
//! `a = BalanceParams::load_smoothing`. When a cell's rect changes (split,
//! rebalance, merge; seen by [`LoadBook::sync`]) its report counter restarts at
//! 0 and its next report replaces the smoothed value outright: loads measured
//! over the old area say little about the new one (the seed restarts its
//! counter at 1 but keeps averaging older samples).
//!
//! Owns only numbers keyed by cell id; must not hold tree structure.

use super::params::BalanceParams;
use super::tree::SpaceTree;
use crate::core::geom::{Axis, Rect};
use crate::core::ids::{CellId, EntityId, ShardId};

/// Why a load report was refused.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum LoadError {
    /// No such cell in the book (not synced, or gone).
    #[error("no load entry for cell {0}")]
    UnknownCell(CellId),
    /// A load or position is NaN, infinite or a load is negative.
    #[error("non-finite or negative load or position")]
    BadNumber,
    /// More samples than `entity_samples_max`.
    #[error("{got} entity samples, at most {max} allowed")]
    TooManySamples {
        /// Samples in the report.
        got: usize,
        /// The bound.
        max: usize,
    },
}

/// One entity's load over the last period, where it stood.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EntitySample {
    /// The entity.
    pub entity: EntityId,
    /// Position on the ground.
    pub x: f64,
    /// Position on the ground.
    pub z: f64,
    /// CPU time over the period, in cores.
    pub load: f64,
    /// A real (false: a ghost held by this cell).
    pub is_real: bool,
}

/// A shard's total load, in cores.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ShardLoad {
    /// The shard.
    pub shard: ShardId,
    /// Its load in cores.
    pub load: f64,
}

/// What the book knows about one cell.
#[derive(Clone, Debug, PartialEq)]
pub struct CellLoad {
    cell: CellId,
    rect: Rect,
    reports: u32,
    smoothed: f64,
    latest: f64,
    samples: Vec<EntitySample>,
    /// Sample indices sorted by x (`[0]`) and by z (`[1]`).
    order: [Vec<u32>; 2],
    /// `prefix[a][i]`: load of the first `i` samples in `order[a]`.
    prefix: [Vec<f64>; 2],
}

fn axis_index(axis: Axis) -> usize {
    match axis {
        Axis::X => 0,
        Axis::Z => 1,
    }
}

impl CellLoad {
    fn new(cell: CellId, rect: Rect) -> Self {
        CellLoad {
            cell,
            rect,
            reports: 0,
            smoothed: 0.0,
            latest: 0.0,
            samples: Vec::new(),
            order: [Vec::new(), Vec::new()],
            prefix: [vec![0.0], vec![0.0]],
        }
    }

    /// The cell.
    pub fn cell(&self) -> CellId {
        self.cell
    }

    /// Reports received since the cell's rect last changed.
    pub fn reports(&self) -> u32 {
        self.reports
    }

    /// The smoothed load, in cores.
    pub fn smoothed(&self) -> f64 {
        self.smoothed
    }

    /// The last reported load, in cores.
    pub fn latest(&self) -> f64 {
        self.latest
    }

    /// The last report's entity samples.
    pub fn samples(&self) -> &[EntitySample] {
        &self.samples
    }

    /// Total sample load with `lo <= coord <= hi` along `axis` (closed band).
    pub fn load_within(&self, axis: Axis, lo: f64, hi: f64) -> f64 {
        if lo.partial_cmp(&hi).is_none_or(|o| o.is_gt()) {
            return 0.0;
        }
        let a = axis_index(axis);
        let coord = |i: &u32| {
            let s = &self.samples[*i as usize];
            if a == 0 {
                s.x
            } else {
                s.z
            }
        };
        let start = self.order[a].partition_point(|i| coord(i) < lo);
        let end = self.order[a].partition_point(|i| coord(i) <= hi);
        (self.prefix[a][end] - self.prefix[a][start]).max(0.0)
    }

    fn record(&mut self, load: f64, samples: &[EntitySample], smoothing: f64) {
        self.smoothed = if self.reports == 0 {
            load
        } else {
            smoothing * load + (1.0 - smoothing) * self.smoothed
        };
        self.latest = load;
        self.reports = self.reports.saturating_add(1);
        self.samples.clear();
        self.samples.extend_from_slice(samples);
        for a in 0..2 {
            let order = &mut self.order[a];
            order.clear();
            order.extend(0..samples.len() as u32);
            let key = |i: &u32| {
                let s = &samples[*i as usize];
                if a == 0 {
                    s.x
                } else {
                    s.z
                }
            };
            order.sort_by(|p, q| key(p).total_cmp(&key(q)).then(p.cmp(q)));
            let prefix = &mut self.prefix[a];
            prefix.clear();
            prefix.push(0.0);
            let mut acc = 0.0;
            for &i in order.iter() {
                acc += samples[i as usize].load;
                prefix.push(acc);
            }
        }
    }
}

/// Loads of every cell of one space, kept in step with the tree by
/// [`sync`](Self::sync). Sorted by cell id.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadBook {
    cells: Vec<CellLoad>,
    smoothing: f64,
    samples_max: usize,
}

impl LoadBook {
    /// An empty book using `params.load_smoothing` and
    /// `params.entity_samples_max`. Call [`sync`](Self::sync) before reporting.
    pub fn new(params: &BalanceParams) -> Self {
        LoadBook {
            cells: Vec::new(),
            smoothing: params.load_smoothing,
            samples_max: params.entity_samples_max,
        }
    }

    /// Brings the book in line with `tree`: drops gone cells, adds new ones,
    /// restarts the counter of every cell whose rect changed.
    pub fn sync(&mut self, tree: &SpaceTree) {
        self.cells.retain(|c| tree.node_of_cell(c.cell).is_some());
        for leaf in tree.leaves() {
            match self.cells.binary_search_by_key(&leaf.cell, |c| c.cell) {
                Ok(i) => {
                    let c = &mut self.cells[i];
                    if c.rect != leaf.rect {
                        c.rect = leaf.rect;
                        c.reports = 0;
                    }
                }
                Err(i) => self.cells.insert(i, CellLoad::new(leaf.cell, leaf.rect)),
            }
        }
        debug_assert_eq!(self.cells.len(), tree.cell_count());
    }

    /// Records one period's report for `cell`: its total load and its
    /// entities' samples (reals and ghosts).
    ///
    /// # Errors
    /// [`LoadError`] for an unknown cell or bad numbers; the book is unchanged.
    pub fn report(
        &mut self,
        cell: CellId,
        load: f64,
        samples: &[EntitySample],
    ) -> Result<(), LoadError> {
        if samples.len() > self.samples_max {
            return Err(LoadError::TooManySamples {
                got: samples.len(),
                max: self.samples_max,
            });
        }
        let good = |v: f64| v.is_finite() && v >= 0.0;
        if !good(load)
            || samples
                .iter()
                .any(|s| !good(s.load) || !s.x.is_finite() || !s.z.is_finite())
        {
            return Err(LoadError::BadNumber);
        }
        let i = self
            .cells
            .binary_search_by_key(&cell, |c| c.cell)
            .map_err(|_| LoadError::UnknownCell(cell))?;
        self.cells[i].record(load, samples, self.smoothing);
        Ok(())
    }

    /// The entry of `cell`.
    pub fn get(&self, cell: CellId) -> Option<&CellLoad> {
        self.cells
            .binary_search_by_key(&cell, |c| c.cell)
            .ok()
            .map(|i| &self.cells[i])
    }

    /// Reports since `cell`'s rect last changed (0 when unknown).
    pub fn reports(&self, cell: CellId) -> u32 {
        self.get(cell).map_or(0, |c| c.reports)
    }

    /// Smoothed load of `cell` (0 when unknown).
    pub fn smoothed(&self, cell: CellId) -> f64 {
        self.get(cell).map_or(0.0, |c| c.smoothed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::space::SpaceParams;

    fn sample(x: f64, z: f64, load: f64) -> EntitySample {
        EntitySample {
            entity: EntityId(0),
            x,
            z,
            load,
            is_real: true,
        }
    }

    fn book() -> (SpaceTree, LoadBook) {
        let world = Rect::new(0.0, 0.0, 1000.0, 1000.0);
        let t =
            SpaceTree::new(world, SpaceParams::default(), CellId(1), ShardId::local(0)).unwrap();
        let mut b = LoadBook::new(&BalanceParams::default());
        b.sync(&t);
        (t, b)
    }

    #[test]
    fn smoothing_is_exponential() {
        let (_, mut b) = book();
        b.report(CellId(1), 1.0, &[]).unwrap();
        assert_eq!(b.smoothed(CellId(1)), 1.0);
        b.report(CellId(1), 0.0, &[]).unwrap();
        assert_eq!(b.smoothed(CellId(1)), 0.5);
        assert_eq!(b.reports(CellId(1)), 2);
        assert_eq!(b.get(CellId(1)).unwrap().latest(), 0.0);
    }

    #[test]
    fn band_loads_match_a_scan() {
        let (_, mut b) = book();
        let s: Vec<_> = (0..50)
            .map(|i| sample((i * 37 % 101) as f64, (i * 13 % 29) as f64, i as f64 * 0.01))
            .collect();
        b.report(CellId(1), 1.0, &s).unwrap();
        let c = b.get(CellId(1)).unwrap();
        for (lo, hi) in [(0.0, 50.0), (10.0, 10.0), (37.0, 100.0), (60.0, 5.0)] {
            let scan: f64 = s
                .iter()
                .filter(|e| e.x >= lo && e.x <= hi)
                .map(|e| e.load)
                .sum();
            assert!((c.load_within(Axis::X, lo, hi) - scan).abs() < 1e-9);
            let scan_z: f64 = s
                .iter()
                .filter(|e| e.z >= lo && e.z <= hi)
                .map(|e| e.load)
                .sum();
            assert!((c.load_within(Axis::Z, lo, hi) - scan_z).abs() < 1e-9);
        }
    }

    #[test]
    fn bad_reports_are_refused() {
        let (_, mut b) = book();
        assert_eq!(
            b.report(CellId(7), 1.0, &[]),
            Err(LoadError::UnknownCell(CellId(7)))
        );
        assert_eq!(
            b.report(CellId(1), f64::NAN, &[]),
            Err(LoadError::BadNumber)
        );
        let bad = [sample(f64::INFINITY, 0.0, 0.1)];
        assert_eq!(b.report(CellId(1), 1.0, &bad), Err(LoadError::BadNumber));
        assert_eq!(b.reports(CellId(1)), 0);
    }
}
