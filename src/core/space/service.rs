//! The space service's balancer for union spaces (seed `space_service`:
//! `gather_space_loads`, `report_space_load`, `do_balance_space_loads`,
//! `report_finish_cell_merge`), as a sans-IO state machine.
//!
//! Shape (quinn's): [`SpaceService::handle_load_report`] feeds one shard's
//! periodic report (its busy time, its cells' loads and entity samples, the
//! tree version it measured under); [`SpaceService::handle_timeout`] runs a
//! balancing round every `gather_period_ms`; [`SpaceService::poll_change`]
//! drains the versioned [`SpaceChange`]s to broadcast, in the order every
//! replica must apply them. The service applies each change to its own
//! authoritative tree first, so the broadcast sequence is always legal.
//!
//! A round, per union space:
//! 1. Finish merges: a merging cell that reported no reals in
//!    `merge_empty_reports_min` consecutive reports, each measured at a tree
//!    version at or after its `StartMerge`, is removed
//!    ([`ChangeOp::FinishMerge`]).
//! 2. [`decide`]: at most one rebalance (damped), one split (new cell on the
//!    least loaded shard), one start of a merge.
//!
//! Mono spaces (instances) live in `instances.rs`; this file must not know
//! about players or space types, only trees, loads and shards.

use super::balance::{decide, Damping};
use super::change::{ChangeOp, SpaceChange};
use super::load::{EntitySample, LoadBook, LoadError, ShardLoad};
use super::params::{BalanceParams, ParamError};
use super::tree::SpaceTree;
use crate::core::ids::{CellId, ShardId, SpaceId};
use crate::core::time::Time;
use std::collections::VecDeque;

/// Knobs of the space service's balancer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ServiceParams {
    /// Period of load gathering and balancing rounds. Default 1000 ms (the
    /// seed gathers every few seconds; 1 s reacts within a loadgen run).
    pub gather_period_ms: u64,
    /// Consecutive empty reports before a merging cell is removed. Default
    /// 2: one report could have been measured while an `Onload` to the cell
    /// was still in flight; two periods outlast any message latency.
    pub merge_empty_reports_min: u32,
    /// Most changes queued and not yet polled. Default 1024 (a round emits
    /// at most `changes_per_decision_max + merges` per space).
    pub changes_queued_max: usize,
    /// Most shards tracked. Default 1024.
    pub shards_max: usize,
    /// The policy's thresholds.
    pub balance: BalanceParams,
}

impl Default for ServiceParams {
    fn default() -> Self {
        ServiceParams {
            gather_period_ms: 1000,
            merge_empty_reports_min: 2,
            changes_queued_max: 1024,
            shards_max: 1024,
            balance: BalanceParams::default(),
        }
    }
}

impl ServiceParams {
    /// Checks every field.
    ///
    /// # Errors
    /// [`ParamError`] naming the first bad field.
    pub fn validate(&self) -> Result<(), ParamError> {
        if self.gather_period_ms == 0 {
            return Err(ParamError::NotPositive("gather_period_ms"));
        }
        if self.merge_empty_reports_min == 0 {
            return Err(ParamError::NotPositive("merge_empty_reports_min"));
        }
        if self.changes_queued_max == 0 {
            return Err(ParamError::NotPositive("changes_queued_max"));
        }
        if self.shards_max == 0 {
            return Err(ParamError::NotPositive("shards_max"));
        }
        self.balance.validate()
    }
}

/// Why the service refused an input.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ServiceError {
    /// No union space with that id.
    #[error("unknown space {0}")]
    UnknownSpace(SpaceId),
    /// The space id is taken.
    #[error("space {0} exists")]
    SpaceExists(SpaceId),
    /// A report broke a rule of the load book.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// More shards than `shards_max`.
    #[error("more than {0} shards")]
    TooManyShards(usize),
    /// Bad params.
    #[error(transparent)]
    Params(#[from] ParamError),
}

/// One cell's part of a shard's load report.
#[derive(Clone, Debug, PartialEq)]
pub struct CellReport {
    /// The cell.
    pub cell: CellId,
    /// Its load over the period, in cores.
    pub load: f64,
    /// Reals it held when measured.
    pub reals: u32,
    /// Per-entity loads with positions (may be a sample).
    pub samples: Vec<EntitySample>,
}

/// One shard's periodic report for one union space.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadReport {
    /// The reporting shard.
    pub shard: ShardId,
    /// The space.
    pub space: SpaceId,
    /// The tree version the shard had applied when it measured.
    pub version: u64,
    /// The shard's busy time over the period, in cores.
    pub busy: f64,
    /// Its cells in this space.
    pub cells: Vec<CellReport>,
}

/// What the service did, counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServiceCounters {
    /// Split changes emitted.
    pub splits: u64,
    /// Finished merges emitted.
    pub merges: u64,
    /// Started merges emitted.
    pub merges_started: u64,
    /// Rebalance changes emitted.
    pub rebalances: u64,
    /// Reports accepted.
    pub reports: u64,
    /// Cell entries ignored (cell gone or not in the tree).
    pub stale_cells: u64,
    /// Rounds run.
    pub rounds: u64,
}

#[derive(Clone, Debug)]
struct UnionSpace {
    id: SpaceId,
    tree: SpaceTree,
    book: LoadBook,
    damping: Damping,
    /// Merging cells: (cell, version of its StartMerge, empty reports).
    merging: Vec<(CellId, u64, u32)>,
}

/// The balancer (see the module doc).
#[derive(Clone, Debug)]
pub struct SpaceService {
    params: ServiceParams,
    spaces: Vec<UnionSpace>,
    shards: Vec<ShardLoad>,
    changes: VecDeque<(SpaceId, SpaceChange)>,
    next_round: Time,
    counters: ServiceCounters,
    frozen: bool,
}

impl SpaceService {
    /// A service with no space; `shards` are the shards cells may go to
    /// (load 0 until they report).
    ///
    /// # Errors
    /// Bad params, or more shards than `shards_max`.
    pub fn new(params: ServiceParams, shards: &[ShardId]) -> Result<Self, ServiceError> {
        params.validate()?;
        if shards.len() > params.shards_max {
            return Err(ServiceError::TooManyShards(params.shards_max));
        }
        let mut s: Vec<ShardLoad> = shards
            .iter()
            .map(|&shard| ShardLoad { shard, load: 0.0 })
            .collect();
        s.sort_by_key(|l| l.shard);
        s.dedup_by_key(|l| l.shard);
        Ok(SpaceService {
            params,
            spaces: Vec::new(),
            shards: s,
            changes: VecDeque::new(),
            next_round: Time::ZERO,
            counters: ServiceCounters::default(),
            frozen: false,
        })
    }

    /// Adopts `tree` as union space `id` (every replica starts from the same
    /// tree or its snapshot).
    ///
    /// # Errors
    /// [`ServiceError::SpaceExists`].
    pub fn add_union_space(&mut self, id: SpaceId, tree: SpaceTree) -> Result<(), ServiceError> {
        let i = match self.spaces.binary_search_by_key(&id, |s| s.id) {
            Ok(_) => return Err(ServiceError::SpaceExists(id)),
            Err(i) => i,
        };
        let mut book = LoadBook::new(&self.params.balance);
        book.sync(&tree);
        let merging = tree
            .leaves()
            .filter(|l| l.merging)
            .map(|l| (l.cell, tree.version(), 0))
            .collect();
        self.spaces.insert(
            i,
            UnionSpace {
                id,
                tree,
                book,
                damping: Damping::new(),
                merging,
            },
        );
        Ok(())
    }

    /// The authoritative tree of `space`.
    pub fn tree(&self, space: SpaceId) -> Option<&SpaceTree> {
        self.space(space).map(|s| &s.tree)
    }

    /// The load book of `space`.
    pub fn loads(&self, space: SpaceId) -> Option<&LoadBook> {
        self.space(space).map(|s| &s.book)
    }

    /// The last reported load of every shard.
    pub fn shard_loads(&self) -> &[ShardLoad] {
        &self.shards
    }

    /// Counters.
    pub fn counters(&self) -> ServiceCounters {
        self.counters
    }

    /// Frozen: rounds only finish merges already started (no new boundary
    /// moves, splits or merges). For operators, and for the simulator's
    /// healing phase.
    pub fn set_frozen(&mut self, frozen: bool) {
        self.frozen = frozen;
    }

    /// When the next round is due.
    pub fn poll_timeout(&self) -> Time {
        self.next_round
    }

    fn space(&self, id: SpaceId) -> Option<&UnionSpace> {
        let i = self.spaces.binary_search_by_key(&id, |s| s.id).ok()?;
        Some(&self.spaces[i])
    }

    /// Feeds one shard's report. Cells no longer in the tree are skipped
    /// (counted in `stale_cells`); a bad number refuses the rest of the
    /// report.
    ///
    /// # Errors
    /// Unknown space, too many shards, or a [`LoadError`].
    pub fn handle_load_report(&mut self, _now: Time, r: &LoadReport) -> Result<(), ServiceError> {
        let i = self
            .spaces
            .binary_search_by_key(&r.space, |s| s.id)
            .map_err(|_| ServiceError::UnknownSpace(r.space))?;
        self.set_shard_load(r.shard, r.busy)?;
        let space = &mut self.spaces[i];
        for c in &r.cells {
            if space.tree.node_of_cell(c.cell).is_none() {
                self.counters.stale_cells += 1;
                continue;
            }
            match space.book.report(c.cell, c.load, &c.samples) {
                Ok(()) => {}
                Err(LoadError::UnknownCell(_)) => {
                    self.counters.stale_cells += 1;
                    continue;
                }
                Err(e) => return Err(e.into()),
            }
            if let Some(m) = space.merging.iter_mut().find(|m| m.0 == c.cell) {
                if c.reals > 0 || r.version < m.1 {
                    m.2 = 0;
                } else {
                    m.2 += 1;
                }
            }
        }
        self.counters.reports += 1;
        Ok(())
    }

    fn set_shard_load(&mut self, shard: ShardId, busy: f64) -> Result<(), ServiceError> {
        let busy = if busy.is_finite() { busy.max(0.0) } else { 0.0 };
        match self.shards.binary_search_by_key(&shard, |s| s.shard) {
            Ok(i) => self.shards[i].load = busy,
            Err(i) => {
                if self.shards.len() >= self.params.shards_max {
                    return Err(ServiceError::TooManyShards(self.params.shards_max));
                }
                self.shards.insert(i, ShardLoad { shard, load: busy });
            }
        }
        Ok(())
    }

    /// Runs a balancing round if one is due at `now` (see the module doc).
    pub fn handle_timeout(&mut self, now: Time) {
        if now < self.next_round {
            return;
        }
        self.next_round = now + std::time::Duration::from_millis(self.params.gather_period_ms);
        self.counters.rounds += 1;
        for i in 0..self.spaces.len() {
            self.round(i);
        }
    }

    /// Forces a round now regardless of the period (tests, tools).
    pub fn balance_now(&mut self) {
        self.counters.rounds += 1;
        for i in 0..self.spaces.len() {
            self.round(i);
        }
    }

    fn round(&mut self, i: usize) {
        let need = self.params.merge_empty_reports_min;
        let done: Vec<CellId> = self.spaces[i]
            .merging
            .iter()
            .filter(|m| m.2 >= need)
            .map(|m| m.0)
            .collect();
        for cell in done {
            self.emit(i, ChangeOp::FinishMerge { cell });
        }
        if self.frozen {
            return;
        }
        let s = &mut self.spaces[i];
        let changes = decide(
            &s.tree,
            &s.book,
            &self.shards,
            &self.params.balance,
            &mut s.damping,
        );
        for c in changes {
            self.emit(i, c.op);
        }
    }

    /// Applies `op` to space `i`'s tree, queues it, counts it. Drops it
    /// (without applying) when the queue is full: the round is retried.
    fn emit(&mut self, i: usize, op: ChangeOp) {
        if self.changes.len() >= self.params.changes_queued_max {
            return;
        }
        let s = &mut self.spaces[i];
        let change = SpaceChange {
            version: s.tree.version(),
            op,
        };
        if s.tree.apply(&change).is_err() {
            debug_assert!(false, "service emitted an illegal change {change:?}");
            return;
        }
        s.book.sync(&s.tree);
        match op {
            ChangeOp::Split { new_shard, .. } => {
                self.counters.splits += 1;
                // The new cell adds load to its shard before it reports:
                // spread consecutive splits over shards.
                if let Ok(j) = self.shards.binary_search_by_key(&new_shard, |l| l.shard) {
                    self.shards[j].load += self.params.balance.split_cell_load_min / 2.0;
                }
            }
            ChangeOp::Rebalance { .. } => self.counters.rebalances += 1,
            ChangeOp::StartMerge { cell } => {
                self.counters.merges_started += 1;
                s.merging.push((cell, s.tree.version(), 0));
            }
            ChangeOp::FinishMerge { cell } => {
                self.counters.merges += 1;
                s.merging.retain(|m| m.0 != cell);
            }
        }
        self.changes.push_back((s.id, change));
    }

    /// The next change to broadcast, in application order.
    pub fn poll_change(&mut self) -> Option<(SpaceId, SpaceChange)> {
        self.changes.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::geom::Rect;
    use crate::core::ids::EntityId;
    use crate::core::space::{SpaceParams, SplitDirection};

    fn service(shards: u16) -> (SpaceService, SpaceId) {
        let world = Rect::new(0.0, 0.0, 1000.0, 1000.0);
        let tree = SpaceTree::new(
            world,
            SpaceParams::for_ghost_radius(50.0),
            CellId(0),
            ShardId::local(0),
        )
        .unwrap();
        let ids: Vec<_> = (0..shards).map(ShardId::local).collect();
        let mut s = SpaceService::new(ServiceParams::default(), &ids).unwrap();
        s.add_union_space(SpaceId(1), tree).unwrap();
        (s, SpaceId(1))
    }

    fn crowd(x: f64, z: f64, n: u64, each: f64) -> Vec<EntitySample> {
        (0..n)
            .map(|i| EntitySample {
                entity: EntityId(i),
                x: x + (i % 10) as f64,
                z: z + (i / 10) as f64,
                load: each,
                is_real: true,
            })
            .collect()
    }

    fn report(s: &mut SpaceService, space: SpaceId, shard: u16, busy: f64) {
        let tree = s.tree(space).unwrap().clone();
        let cells = tree
            .leaves()
            .filter(|l| l.shard == ShardId::local(shard))
            .map(|l| {
                // Spread over the rect: every strip a split can cut holds
                // some of the load.
                let samples = if busy > 0.5 {
                    let mut v = crowd(0.0, 0.0, 100, busy / 100.0);
                    for (i, e) in v.iter_mut().enumerate() {
                        e.x = l.rect.min_x + l.rect.width() * ((i % 10) as f64 + 0.5) / 10.0;
                        e.z = l.rect.min_z + l.rect.depth() * ((i / 10) as f64 + 0.5) / 10.0;
                    }
                    v
                } else {
                    Vec::new()
                };
                CellReport {
                    cell: l.cell,
                    load: busy,
                    reals: samples.len() as u32,
                    samples,
                }
            })
            .collect();
        let r = LoadReport {
            shard: ShardId::local(shard),
            space,
            version: tree.version(),
            busy,
            cells,
        };
        s.handle_load_report(Time::ZERO, &r).unwrap();
    }

    #[test]
    fn a_hot_cell_splits_onto_the_least_loaded_shard() {
        let (mut s, sp) = service(3);
        for _ in 0..4 {
            report(&mut s, sp, 0, 1.0);
            report(&mut s, sp, 1, 0.3);
            report(&mut s, sp, 2, 0.1);
        }
        s.handle_timeout(Time::ZERO);
        let (space, c) = s.poll_change().expect("a split");
        assert_eq!(space, sp);
        assert_eq!(c.version, 0);
        match c.op {
            ChangeOp::Split {
                cell, new_shard, ..
            } => {
                assert_eq!(cell, CellId(0));
                assert_eq!(new_shard, ShardId::local(2));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(s.counters().splits, 1);
        assert_eq!(s.tree(sp).unwrap().cell_count(), 2);
        // Not due again before the period.
        s.handle_timeout(Time::from_millis(10));
        assert_eq!(s.counters().rounds, 1);
    }

    #[test]
    fn an_idle_cell_merges_after_it_reports_empty() {
        let (mut s, sp) = service(2);
        let split = ChangeOp::Split {
            cell: CellId(0),
            direction: SplitDirection::MaxX,
            new_cell: CellId(1),
            new_shard: ShardId::local(1),
        };
        s.emit(0, split);
        s.poll_change().unwrap();
        for _ in 0..4 {
            report(&mut s, sp, 0, 0.01);
            report(&mut s, sp, 1, 0.0);
        }
        s.balance_now();
        let (_, c) = s.poll_change().expect("start merge");
        let ChangeOp::StartMerge { cell } = c.op else {
            panic!("{c:?}")
        };
        // An empty report measured before the StartMerge does not count.
        let mut stale = LoadReport {
            shard: s.tree(sp).unwrap().shard_of(cell).unwrap(),
            space: sp,
            version: c.version,
            busy: 0.0,
            cells: vec![CellReport {
                cell,
                load: 0.0,
                reals: 0,
                samples: Vec::new(),
            }],
        };
        for _ in 0..3 {
            s.handle_load_report(Time::ZERO, &stale).unwrap();
        }
        s.balance_now();
        assert!(s.poll_change().is_none());
        stale.version = c.version + 1;
        s.handle_load_report(Time::ZERO, &stale).unwrap();
        s.balance_now();
        assert!(s.poll_change().is_none(), "one empty report is not enough");
        s.handle_load_report(Time::ZERO, &stale).unwrap();
        s.set_frozen(true);
        s.balance_now();
        let (_, f) = s.poll_change().expect("finish merge, even when frozen");
        assert_eq!(f.op, ChangeOp::FinishMerge { cell });
        assert_eq!(s.tree(sp).unwrap().cell_count(), 1);
        assert_eq!(s.counters().merges, 1);
    }

    #[test]
    fn replicas_applying_the_broadcast_stay_equal() {
        let (mut s, sp) = service(4);
        let mut replica = s.tree(sp).unwrap().clone();
        for round in 0..40u64 {
            for shard in 0..4 {
                let hot = if round < 20 { 1.2 } else { 0.0 };
                report(&mut s, sp, shard, if shard == 0 { hot } else { 0.05 });
            }
            s.handle_timeout(Time::from_millis(round * 1000));
            while let Some((_, c)) = s.poll_change() {
                replica.apply(&c).unwrap();
            }
            assert_eq!(&replica, s.tree(sp).unwrap());
        }
        assert!(s.counters().splits > 0);
    }

    #[test]
    fn bad_input_is_refused() {
        let (mut s, sp) = service(1);
        let r = LoadReport {
            shard: ShardId::local(0),
            space: SpaceId(9),
            version: 0,
            busy: 0.0,
            cells: Vec::new(),
        };
        assert_eq!(
            s.handle_load_report(Time::ZERO, &r),
            Err(ServiceError::UnknownSpace(SpaceId(9)))
        );
        let tree = s.tree(sp).unwrap().clone();
        assert_eq!(
            s.add_union_space(sp, tree),
            Err(ServiceError::SpaceExists(sp))
        );
        let p = ServiceParams {
            gather_period_ms: 0,
            ..ServiceParams::default()
        };
        assert!(SpaceService::new(p, &[]).is_err());
    }
}
