//! Balancing in the simulator: the world's layout as a grid or as a
//! replicated [`SpaceTree`] driven by the space service.
//!
//! In tree mode (the `crowd` and `swing` scenarios) every cell ticks
//! against one replica of the tree. Load is measured as on a server but on
//! a deterministic [`WorkClock`]: the entity logic charges `input_us` per
//! applied input and `call_us` per call to the entity (through the
//! nested-depth [`LoadRecorder`]), and every cell tick charges
//! `entity_tick_us` per entity it holds to the cell. Every
//! `gather_period_ms` each shard reports its cells (load, reals, one sample
//! per real with its position) and its busy time (the sum of its cells); the
//! [`SpaceService`] decides, and its changes are applied in version order to
//! the replica. A split creates the new cell; a finished merge retires the
//! old one (it must be empty, which the world checks).
//!
//! Boundary oscillation is measured: for every internal node, a rebalance
//! moving its cut the other way from its previous move is a *reversal*.
//!
//! Owns the tree-mode state; the world wires it in (`world.rs`,
//! `world_logic.rs`) and must not reach inside.

use crate::config::BalancerParams;
use crate::core::cell::Layout;
use crate::core::geom::{Rect, Vec3};
use crate::core::ids::{CellId, EntityId, ShardId, SpaceId};
use crate::core::load::{CostClock, LoadRecorder, WorkClock};
use crate::core::space::{
    CellReport, ChangeOp, EntitySample, LoadReport, NodeIx, NodeKind, ServiceError, SpaceChange,
    SpaceService, SpaceTree,
};
use crate::core::time::Time;
use crate::sim::world_layout::SimLayout;

/// The one union space of the simulated world.
pub const SIM_SPACE: SpaceId = SpaceId(1);

/// The world's layout: a fixed grid (merged and split by the `MergeDrain`
/// plan) or a balanced tree.
#[derive(Clone, Debug)]
pub enum WorldLayout {
    /// The grid of `world_layout.rs`.
    Grid(SimLayout),
    /// The replicated space tree.
    Tree(SpaceTree),
}

impl WorldLayout {
    /// The world's rect.
    pub fn world(&self) -> Rect {
        match self {
            WorldLayout::Grid(g) => g.world(),
            WorldLayout::Tree(t) => t.world(),
        }
    }

    /// Cell ids ever allocated (dense from 0).
    pub fn cell_count(&self) -> u32 {
        match self {
            WorldLayout::Grid(g) => g.cell_count(),
            WorldLayout::Tree(t) => t.next_cell_id().0,
        }
    }

    /// True when `c` existed and is no leaf any more.
    pub fn is_retired(&self, c: CellId) -> bool {
        match self {
            WorldLayout::Grid(g) => g.is_retired(c),
            WorldLayout::Tree(t) => c < t.next_cell_id() && t.node_of_cell(c).is_none(),
        }
    }

    /// The grid, in grid mode.
    pub fn grid(&self) -> Option<&SimLayout> {
        match self {
            WorldLayout::Grid(g) => Some(g),
            WorldLayout::Tree(_) => None,
        }
    }

    /// The tree, in tree mode.
    pub fn tree(&self) -> Option<&SpaceTree> {
        match self {
            WorldLayout::Grid(_) => None,
            WorldLayout::Tree(t) => Some(t),
        }
    }
}

impl Layout for WorldLayout {
    fn version(&self) -> u64 {
        match self {
            WorldLayout::Grid(g) => g.version(),
            WorldLayout::Tree(t) => Layout::version(t),
        }
    }

    fn cell_at(&self, p: Vec3) -> Option<CellId> {
        match self {
            WorldLayout::Grid(g) => g.cell_at(p),
            WorldLayout::Tree(t) => Layout::cell_at(t, p),
        }
    }

    fn rect(&self, c: CellId) -> Option<Rect> {
        match self {
            WorldLayout::Grid(g) => g.rect(c),
            WorldLayout::Tree(t) => Layout::rect(t, c),
        }
    }

    fn is_merging(&self, c: CellId) -> bool {
        match self {
            WorldLayout::Grid(g) => g.is_merging(c),
            WorldLayout::Tree(t) => Layout::is_merging(t, c),
        }
    }

    fn cells_meeting(&self, r: &Rect, out: &mut Vec<CellId>) {
        match self {
            WorldLayout::Grid(g) => g.cells_meeting(r, out),
            WorldLayout::Tree(t) => Layout::cells_meeting(t, r, out),
        }
    }

    fn neighbours(&self, c: CellId, out: &mut Vec<CellId>) {
        match self {
            WorldLayout::Grid(g) => g.neighbours(c, out),
            WorldLayout::Tree(t) => Layout::neighbours(t, c, out),
        }
    }
}

/// Work units charged on the simulator's clock, in microseconds of CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimCost {
    /// Per applied input. Default 250 µs: 300 bots at 20 inputs/s in one
    /// cell make 1.5 cores, well past the split thresholds.
    pub input_us: u64,
    /// Per call run. Default 100 µs.
    pub call_us: u64,
    /// Per entity (real or ghost) per cell tick. Default 2 µs.
    pub entity_tick_us: u64,
}

impl Default for SimCost {
    fn default() -> Self {
        SimCost {
            input_us: 250,
            call_us: 100,
            entity_tick_us: 2,
        }
    }
}

/// What balancing did in a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BalanceStats {
    /// Splits applied.
    pub splits: u64,
    /// Merges finished.
    pub merges: u64,
    /// Rebalances applied.
    pub rebalances: u64,
    /// Rebalances that reversed their boundary's previous direction.
    pub reversals: u64,
    /// Most reversals of one boundary.
    pub reversals_max: u64,
    /// Most leaves at once.
    pub cells_max: u64,
}

#[derive(Clone, Copy, Debug)]
struct Boundary {
    node: NodeIx,
    born: u64,
    dir: i8,
    reversals: u64,
}

/// Tree-mode state (see the module doc).
#[derive(Clone, Debug)]
pub struct SimBalance {
    /// `balance.enabled`: false sends no reports and runs no rounds, as
    /// on a server.
    enabled: bool,
    /// `balance.report_samples_max`.
    samples_max: usize,
    service: SpaceService,
    recorder: LoadRecorder,
    clock: WorkClock,
    cost: SimCost,
    period_ms: u64,
    next_report: Time,
    /// Per cell id: overhead units this period, and its shard.
    cells: Vec<(u64, ShardId)>,
    boundaries: Vec<Boundary>,
    stats: BalanceStats,
    shards: u16,
}

impl SimBalance {
    /// The balancer of `tree` over `shards` shards, run with `balancer`
    /// (the config's `[balance]` as [`crate::config::BalanceConfig::balancer`]
    /// gives it, as the server's `HostBalance` takes it).
    ///
    /// # Errors
    /// [`ServiceError`] if `balancer.service` does not validate.
    pub fn new(
        tree: &SpaceTree,
        shards: u16,
        balancer: &BalancerParams,
        cost: SimCost,
    ) -> Result<Self, ServiceError> {
        let ids: Vec<_> = (0..shards).map(ShardId::local).collect();
        let params = balancer.service;
        let mut service = SpaceService::new(params, &ids)?;
        service
            .add_union_space(SIM_SPACE, tree.clone())
            .expect("fresh service");
        service.set_frozen(!balancer.enabled);
        let cells = (0..tree.next_cell_id().0)
            .map(|c| (0, tree.shard_of(CellId(c)).unwrap_or(ShardId::local(0))))
            .collect();
        Ok(SimBalance {
            enabled: balancer.enabled,
            samples_max: balancer.report_samples_max,
            service,
            recorder: LoadRecorder::new(params.balance.entity_samples_max),
            clock: WorkClock::new(),
            cost,
            period_ms: params.gather_period_ms,
            next_report: Time::from_millis(params.gather_period_ms),
            cells,
            boundaries: Vec::new(),
            stats: BalanceStats {
                cells_max: u64::from(tree.next_cell_id().0),
                ..BalanceStats::default()
            },
            shards,
        })
    }

    /// The counters so far.
    pub fn stats(&self) -> BalanceStats {
        self.stats
    }

    /// The shard of cell `c` (ever allocated).
    pub fn shard_of(&self, c: CellId) -> ShardId {
        self.cells
            .get(c.0 as usize)
            .map_or(ShardId::local((c.0 % u32::from(self.shards)) as u16), |x| {
                x.1
            })
    }

    /// The entity logic ran an input (`call == false`) or a call for `e`.
    pub fn charge_entity(&mut self, e: EntityId, call: bool) {
        let units = if call {
            self.cost.call_us
        } else {
            self.cost.input_us
        };
        if self.recorder.begin(e, self.clock.stamp()).is_ok() {
            self.clock.charge(units);
            self.recorder.end(e, self.clock.stamp());
        }
    }

    /// Cell `c` ticked holding `entities` entities.
    pub fn charge_cell(&mut self, c: CellId, entities: usize) {
        let units = self.cost.entity_tick_us * entities as u64;
        self.clock.charge(units);
        if let Some(x) = self.cells.get_mut(c.0 as usize) {
            x.0 += units;
        }
    }

    /// Phase two: only merges already started finish.
    pub fn freeze(&mut self) {
        self.service.set_frozen(true);
    }

    /// Reports due at `now`: `reals(c)` gives the reals of a live cell with
    /// their positions. Then a balancing round; returns the changes to apply
    /// to the replica, in order.
    pub fn gather(
        &mut self,
        now: Time,
        tree: &SpaceTree,
        mut reals: impl FnMut(CellId, &mut Vec<(EntityId, Vec3)>),
    ) -> Vec<SpaceChange> {
        if !self.enabled || now < self.next_report {
            return Vec::new();
        }
        self.next_report = now + std::time::Duration::from_millis(self.period_ms);
        let period_us = (self.period_ms * 1000) as f64;
        let mut reports: Vec<LoadReport> = (0..self.shards)
            .map(|s| LoadReport {
                shard: ShardId::local(s),
                space: SIM_SPACE,
                version: tree.version(),
                busy: 0.0,
                cells: Vec::new(),
            })
            .collect();
        let mut scratch = Vec::new();
        for leaf in tree.leaves() {
            scratch.clear();
            reals(leaf.cell, &mut scratch);
            let overhead = std::mem::take(&mut self.cells[leaf.cell.0 as usize].0);
            let share = overhead as f64 / period_us / scratch.len().max(1) as f64;
            // As the server reports (`server/balance.rs`): every real's
            // load counts, at most `report_samples_max` are sampled.
            let mut load = if scratch.is_empty() {
                overhead as f64 / period_us
            } else {
                0.0
            };
            let mut samples = Vec::with_capacity(scratch.len().min(self.samples_max));
            for &(entity, p) in &scratch {
                let l = self.recorder.take(entity) as f64 / period_us + share;
                load += l;
                if samples.len() < self.samples_max {
                    samples.push(EntitySample {
                        entity,
                        x: p.x,
                        z: p.z,
                        load: l,
                        is_real: true,
                    });
                }
            }
            let r = &mut reports[usize::from(leaf.shard.index)];
            r.busy += load;
            r.cells.push(CellReport {
                cell: leaf.cell,
                load,
                reals: scratch.len() as u32,
                samples,
            });
        }
        self.recorder.drain_period(|_, _| ());
        for r in &reports {
            self.service
                .handle_load_report(now, r)
                .expect("the simulator's reports are well formed");
        }
        self.service.handle_timeout(now);
        let mut out = Vec::new();
        while let Some((_, c)) = self.service.poll_change() {
            out.push(c);
        }
        out
    }

    /// Bookkeeping for `change`, called just before the replica applies it.
    pub fn before_apply(&mut self, tree: &SpaceTree, change: &SpaceChange) {
        match change.op {
            ChangeOp::Split {
                new_cell,
                new_shard,
                ..
            } => {
                self.stats.splits += 1;
                debug_assert_eq!(new_cell.0 as usize, self.cells.len());
                self.cells.push((0, new_shard));
                let leaves = tree.cell_count() as u64 + 1;
                self.stats.cells_max = self.stats.cells_max.max(leaves);
            }
            ChangeOp::FinishMerge { .. } => self.stats.merges += 1,
            ChangeOp::StartMerge { .. } => {}
            ChangeOp::Rebalance { node, at } => {
                self.stats.rebalances += 1;
                let Some(n) = tree.node(node) else { return };
                let NodeKind::Split { at: old, .. } = n.kind() else {
                    return;
                };
                let dir: i8 = if at > old { 1 } else { -1 };
                self.note_move(node, n.born(), dir);
            }
        }
    }

    fn note_move(&mut self, node: NodeIx, born: u64, dir: i8) {
        match self
            .boundaries
            .iter_mut()
            .find(|b| b.node == node && b.born == born)
        {
            Some(b) => {
                if b.dir != dir {
                    b.reversals += 1;
                    self.stats.reversals += 1;
                    self.stats.reversals_max = self.stats.reversals_max.max(b.reversals);
                }
                b.dir = dir;
            }
            None => self.boundaries.push(Boundary {
                node,
                born,
                dir,
                reversals: 0,
            }),
        }
    }
}
