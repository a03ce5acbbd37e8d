//! The balancing policy: pure functions from (tree, loads, params) to tree
//! changes. The space service calls [`decide`] once per load-gathering round
//! and broadcasts what it returns.
//!
//! Follows the seed's `do_balance_space_loads`, in its order: move one
//! boundary, split one hot cell, start merging one cold cell.
//!
//! # Rebalance (seed `calc_shrink_node`, `check_can_shrink`,
//! `calc_best_shrink_new_split_pos`)
//! Bottom-up, low child first: the first node `N` (leaf or internal) that may
//! shrink gives up area to its sibling `S`. `N` may shrink when every leaf of
//! `N` and `S` has more than `rebalance_reports_min` reports since its rect
//! last changed; `N`'s average leaf load is above `rebalance_avg_load_min`
//! and exceeds `S`'s by more than `rebalance_load_diff_min`; no merging leaf
//! would move; and every leaf of `N` on the moving line is at least
//! `min_cell_side_m + ghost_radius_m` across (the seed's `5 x ghost_radius`:
//! a legal side plus the minimum step). The new position is the seed's
//! tenths search: try moves of `ghost_radius_m + i * (room - min_side -
//! ghost_radius_m) / 10` for `i = 0..9`, take the first whose band of
//! entity samples offloads more than the target, else the last.
//!
//! # Split (seed `get_best_cell_to_split`, `calc_best_split_direction`)
//! A leaf splits when it is not merging, has more than `split_reports_min`
//! reports, can be cut in some direction, its smoothed load is at least
//! `split_cell_load_min` and its shard's load at least
//! `split_shard_load_min`; the most loaded such leaf wins. The new cell goes
//! on the least loaded shard, never on the cell's own: a split on the same
//! shard offloads nothing and adds a border (the ghosts of every real near
//! it, their syncs, the migrations: 15-17 % of a one-shard server at 5,000
//! clients, 4 cells against 1), so a server with one shard never splits.
//! The seed's direction rule ([`split_direction`]: the direction whose
//! `min_cell_side_m` strip holds the most entity-sample load, the one
//! parallel to and touching the parent's cut weighted by
//! `split_same_direction_factor`, seed: x0.5; with no samples, the low end
//! of the longer side) breaks ties. A split must pay for its
//! migrations ([`gainful_direction`]): the load a direction moves is the
//! cell's load times the strip's share of its samples ([`split_shares`]);
//! the direction leaving the busier of the two shards least loaded wins
//! (ties: the one moving less, then the seed's gains), and only if that is
//! at least `split_gain_min` below the cell's shard now. So a strip holding
//! the whole hot spot is not handed over (it would move the spot, not share
//! it), nor is a split made onto the cell's own shard.
//!
//! # Merge (seed `get_best_cell_to_merge`)
//! A leaf starts merging when it is not merging, not the master, has more
//! than `merge_reports_min` reports (its age since the split), its sibling
//! is a leaf that is not merging and also has more than `merge_reports_min`
//! reports, its smoothed load is at most `merge_cell_load_max`, and the
//! pair's is at most `merge_pair_load_fraction x split_cell_load_min`
//! (hysteresis: the merged cell is well below the split threshold). The
//! merging leaf's reals move to its sibling, so the choice is by where the
//! merged cell ends: the pair member whose sibling's shard is the less
//! loaded after taking the merging load merges (ties: the lighter, then the
//! lower id); a merge that would bring the survivor's shard to
//! `split_shard_load_min` is not started. Finishing a merge is not a policy
//! decision: the merging cell reports when its reals have left, and the
//! service sends [`ChangeOp::FinishMerge`].
//!
//! # Where this does better than the seed
//! - Z split gains are computed (the seed's loop stops after the x axis) and
//!   directions whose side is below two cells are never chosen.
//! - The rebalance target is the larger of the seed's
//!   `rebalance_load_diff_min / 2` and `rebalance_target_fraction` of the
//!   load that would equalise the two sides, so big imbalances close in a
//!   few rounds instead of one threshold at a time.
//! - Damping, as BigWorld does: each internal node remembers the direction of
//!   its last move; a reversal halves its step scale, a repeat doubles it back
//!   (at most 1). The move is `max(ghost_radius_m, search_move x scale)`.
//! - A move whose estimated result is no more even than now (a heavy clump
//!   that would just hop across the line), or that overshoots so far that
//!   the sibling would be the heavier by more than `rebalance_load_diff_min`
//!   (it would move the line straight back: with damping's floor of one
//!   ghost radius per step, that dithers forever), is not made, so a fixed
//!   load cannot make a boundary oscillate.
//! - Splits and merges are load-aware (the two sections above): no split
//!   that only moves a hot spot, the merged cell on the less loaded shard,
//!   and a hysteresis band between the split and merge thresholds.
//! - No split onto the cell's own shard, so none on a one-shard server (the
//!   seed splits onto the least loaded server even when that is the cell's
//!   own: a border on one core with nothing offloaded).
//!
//! Must not mutate the caller's tree or book; only [`Damping`] carries state
//! between rounds, and only on the caller's say.

use super::change::{ChangeOp, Edge, SpaceChange, SplitDirection};
use super::load::{LoadBook, ShardLoad};
use super::params::BalanceParams;
use super::query::LeafInfo;
use super::tree::{NodeIx, NodeKind, SpaceTree, SIDE_TOLERANCE_M};
use crate::core::geom::{Axis, Rect};
use crate::core::ids::{CellId, ShardId};

/// Per-internal-node memory of the last rebalance direction and step scale.
/// Entries of nodes that no longer exist are dropped on every record, so it
/// never holds more entries than the tree has nodes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Damping {
    entries: Vec<DampEntry>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
struct DampEntry {
    node: NodeIx,
    born: u64,
    dir: i8,
    scale: f64,
}

impl Damping {
    /// No memory.
    pub fn new() -> Self {
        Self::default()
    }

    /// The step scale a move of `node` in direction `dir` (+1 up, -1 down)
    /// gets: halved on a reversal, doubled back (at most 1) on a repeat.
    pub fn scale_for(&self, tree: &SpaceTree, node: NodeIx, dir: i8) -> f64 {
        let born = tree.node(node).map(|n| n.born());
        match self
            .entries
            .iter()
            .find(|e| e.node == node && Some(e.born) == born)
        {
            Some(e) if e.dir != dir => e.scale * 0.5,
            Some(e) => (e.scale * 2.0).min(1.0),
            None => 1.0,
        }
    }

    /// Remembers a move of `node` in direction `dir` with step `scale`.
    pub fn record(&mut self, tree: &SpaceTree, node: NodeIx, dir: i8, scale: f64) {
        self.entries.retain(|e| {
            tree.node(e.node)
                .is_some_and(|n| n.born() == e.born && matches!(n.kind(), NodeKind::Split { .. }))
        });
        let born = tree.node(node).expect("recorded node exists").born();
        let entry = DampEntry {
            node,
            born,
            dir,
            scale,
        };
        match self.entries.iter_mut().find(|e| e.node == node) {
            Some(e) => *e = entry,
            None => self.entries.push(entry),
        }
    }

    /// Number of nodes remembered.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// A chosen boundary move.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RebalancePick {
    /// The internal node whose cut moves.
    pub node: NodeIx,
    /// The new cut position.
    pub at: f64,
    /// The child that shrinks.
    pub shrinking: NodeIx,
    /// Move direction: +1 the cut goes up, -1 down.
    pub dir: i8,
    /// Step scale used (see [`Damping`]).
    pub scale: f64,
    /// Estimated load handed to the sibling, in cores.
    pub offload: f64,
}

/// Leaf statistics of one subtree.
#[derive(Clone, Copy, Debug, Default)]
struct Stats {
    leaves: u32,
    load: f64,
    reports_min: u32,
}

impl Stats {
    fn avg(&self) -> f64 {
        self.load / f64::from(self.leaves.max(1))
    }
}

fn node_stats(tree: &SpaceTree, loads: &LoadBook, ix: u32, out: &mut [Stats]) -> Stats {
    let s = match tree.node(NodeIx(ix)).expect("live node").kind() {
        NodeKind::Split { low, high, .. } => {
            let (a, b) = (
                node_stats(tree, loads, low, out),
                node_stats(tree, loads, high, out),
            );
            Stats {
                leaves: a.leaves + b.leaves,
                load: a.load + b.load,
                reports_min: a.reports_min.min(b.reports_min),
            }
        }
        NodeKind::Leaf { cell, .. } => Stats {
            leaves: 1,
            load: loads.smoothed(cell),
            reports_min: loads.reports(cell),
        },
        NodeKind::Free => unreachable!("free slot in the tree"),
    };
    out[ix as usize] = s;
    s
}

/// The seed's rebalance choice (see the module doc), or `None`.
pub fn pick_rebalance(
    tree: &SpaceTree,
    loads: &LoadBook,
    params: &BalanceParams,
    damping: &Damping,
) -> Option<RebalancePick> {
    let root = tree.root().0;
    let mut stats = vec![Stats::default(); tree.nodes.len()];
    node_stats(tree, loads, root, &mut stats);
    let ctx = Ctx {
        tree,
        loads,
        params,
        damping,
        stats: &stats,
    };
    ctx.find(root)
}

struct Ctx<'a> {
    tree: &'a SpaceTree,
    loads: &'a LoadBook,
    params: &'a BalanceParams,
    damping: &'a Damping,
    stats: &'a [Stats],
}

impl Ctx<'_> {
    /// Post-order: children (low first) before the node itself.
    fn find(&self, ix: u32) -> Option<RebalancePick> {
        if let NodeKind::Split { low, high, .. } = self.tree.node(NodeIx(ix))?.kind() {
            if let Some(p) = self.find(low).or_else(|| self.find(high)) {
                return Some(p);
            }
        }
        self.try_shrink(ix)
    }

    fn try_shrink(&self, ix: u32) -> Option<RebalancePick> {
        let (tree, params) = (self.tree, self.params);
        let parent = tree.node(NodeIx(ix))?.parent()?;
        let sib = tree.sibling(NodeIx(ix))?.0;
        let (n, s) = (self.stats[ix as usize], self.stats[sib as usize]);
        if n.reports_min.min(s.reports_min) <= params.rebalance_reports_min {
            return None;
        }
        let (a, b) = (n.avg(), s.avg());
        if a <= params.rebalance_avg_load_min || a - b <= params.rebalance_load_diff_min {
            return None;
        }
        let NodeKind::Split {
            axis, at: old, low, ..
        } = tree.node(parent)?.kind()
        else {
            unreachable!("a parent is always a split")
        };
        let shrink_low = low == ix;
        let gr = tree.params().ghost_radius_m;
        let min_side = tree.params().min_cell_side_m;
        let room = self.room(ix, axis, shrink_low, old);
        if room + SIDE_TOLERANCE_M < min_side + gr {
            return None;
        }
        let (nl, sl) = (f64::from(n.leaves), f64::from(s.leaves));
        let equalising = nl * sl * (a - b) / (nl + sl);
        let target = (params.rebalance_load_diff_min / 2.0)
            .max(params.rebalance_target_fraction * equalising);
        let dir: i8 = if shrink_low { -1 } else { 1 };
        let band = |dist: f64| {
            let (lo, hi) = if shrink_low {
                (old - dist, old)
            } else {
                (old, old + dist)
            };
            self.band_load(ix, axis, lo, hi)
        };
        // The seed's tenths search.
        let unit = ((room - min_side - gr) / 10.0).max(0.0);
        let mut dist = gr;
        for i in 0..10 {
            dist = gr + f64::from(i) * unit;
            if band(dist) > target {
                break;
            }
        }
        let scale = self.damping.scale_for(tree, parent, dir);
        let dist = (dist * scale).max(gr);
        let offload = band(dist);
        // Positive: `N` still the heavier; below `-diff_min`: the sibling
        // would be heavy enough to move the line straight back.
        let after = (a - offload / nl) - (b + offload / sl);
        if after.abs() >= a - b || after < -params.rebalance_load_diff_min {
            return None;
        }
        let at = old + f64::from(dir) * dist;
        let moves = tree.split_move(parent.0, at);
        tree.check_moves(&moves, None).ok()?;
        Some(RebalancePick {
            node: parent,
            at,
            shrinking: NodeIx(ix),
            dir,
            scale,
            offload,
        })
    }

    /// Smallest side across `axis` of `ix`'s leaves on the moving line.
    fn room(&self, ix: u32, axis: Axis, shrink_low: bool, old: f64) -> f64 {
        let edge = if shrink_low { Edge::Max } else { Edge::Min };
        let mut moves = Vec::new();
        self.tree.edge_move(ix, axis, edge, old, &mut moves);
        moves
            .iter()
            .filter(|(m, _)| {
                matches!(
                    self.tree.node(NodeIx(*m)).map(|n| n.kind()),
                    Some(NodeKind::Leaf { .. })
                )
            })
            .map(|(_, r)| r.side(axis))
            .fold(f64::INFINITY, f64::min)
    }

    /// Sample load of `ix`'s leaves inside the closed band `[lo, hi]`.
    fn band_load(&self, ix: u32, axis: Axis, lo: f64, hi: f64) -> f64 {
        let mut sum = 0.0;
        self.tree
            .for_each_leaf_under(NodeIx(ix), &mut |l: LeafInfo| {
                if let Some(c) = self.loads.get(l.cell) {
                    sum += c.load_within(axis, lo, hi);
                }
            });
        sum
    }
}

fn can_split(tree: &SpaceTree, rect: &Rect, dir: SplitDirection) -> bool {
    rect.side(dir.axis()) + SIDE_TOLERANCE_M >= 2.0 * tree.params().min_cell_side_m
}

/// The split choice (see the module doc), or `None`.
pub fn pick_split(
    tree: &SpaceTree,
    loads: &LoadBook,
    shards: &[ShardLoad],
    params: &BalanceParams,
) -> Option<ChangeOp> {
    let new_shard = least_loaded(shards)?;
    let cold = shard_load(shards, new_shard);
    let mut best: Option<(CellId, SplitDirection, f64)> = None;
    for leaf in tree.leaves() {
        let Some(c) = loads.get(leaf.cell) else {
            continue;
        };
        if leaf.merging
            || c.reports() <= params.split_reports_min
            || !SplitDirection::ALL
                .iter()
                .any(|&d| can_split(tree, &leaf.rect, d))
            || c.smoothed() < params.split_cell_load_min
        {
            continue;
        }
        let hot = shard_load(shards, leaf.shard);
        if !shards.iter().any(|s| s.shard == leaf.shard) || hot < params.split_shard_load_min {
            continue;
        }
        // Onto its own shard (always so with one shard): nothing is
        // offloaded, and the new border costs the shard its ghosts.
        if leaf.shard == new_shard {
            continue;
        }
        let Some(direction) = gainful_direction(tree, loads, leaf.cell, params, hot, cold) else {
            continue;
        };
        if best.is_none_or(|(_, _, l)| c.smoothed() > l) {
            best = Some((leaf.cell, direction, c.smoothed()));
        }
    }
    let (cell, direction, _) = best?;
    Some(ChangeOp::Split {
        cell,
        direction,
        new_cell: tree.next_cell_id(),
        new_shard,
    })
}

/// The load of `shard` in `shards` (0 if absent).
fn shard_load(shards: &[ShardLoad], shard: ShardId) -> f64 {
    shards
        .iter()
        .find(|s| s.shard == shard)
        .map_or(0.0, |s| s.load)
}

/// The share of `cell`'s sample load (or, if the samples carry no load, of
/// its samples) that a split in each of [`SplitDirection::ALL`] hands to the
/// new cell; `None` without samples.
pub fn split_shares(tree: &SpaceTree, loads: &LoadBook, cell: CellId) -> Option<[f64; 4]> {
    let r = tree.rect_of(cell)?;
    let c = loads.get(cell)?;
    let samples = c.samples();
    if samples.is_empty() {
        return None;
    }
    let strip = tree.params().min_cell_side_m;
    let total: f64 = samples.iter().map(|s| s.load).sum();
    let by_load = total > 0.0;
    let mut shares = [0.0; 4];
    for s in samples {
        let w = if by_load {
            s.load / total
        } else {
            1.0 / samples.len() as f64
        };
        let inside = [
            s.x < r.min_x + strip,
            s.x >= r.max_x - strip,
            s.z < r.min_z + strip,
            s.z >= r.max_z - strip,
        ];
        for (share, hit) in shares.iter_mut().zip(inside) {
            if hit {
                *share += w;
            }
        }
    }
    Some(shares)
}

/// With two or more shards: the direction whose split leaves the busier of
/// the cell's shard (load `hot`) and the new cell's shard (load `cold`) the
/// least loaded, if that is at least `split_gain_min` below `hot`. The load
/// moved is the cell's smoothed load times the new cell's share (half if
/// there are no samples, in the seed's direction). Ties: the direction that
/// moves less (fewer migrations), then the seed's gains.
pub fn gainful_direction(
    tree: &SpaceTree,
    loads: &LoadBook,
    cell: CellId,
    params: &BalanceParams,
    hot: f64,
    cold: f64,
) -> Option<SplitDirection> {
    let rect = tree.rect_of(cell)?;
    let load = loads.smoothed(cell);
    let after = |moved: f64| (hot - moved).max(cold + moved);
    let Some(shares) = split_shares(tree, loads, cell) else {
        let d = split_direction(tree, loads, cell, params)?;
        return (hot - after(0.5 * load) >= params.split_gain_min).then_some(d);
    };
    let gains = split_gains(tree, loads, cell, params)?;
    let mut best: Option<(f64, f64, f64, SplitDirection)> = None;
    for (i, d) in SplitDirection::ALL.into_iter().enumerate() {
        if !can_split(tree, &rect, d) {
            continue;
        }
        let moved = load * shares[i];
        let key = (after(moved), moved, -gains[i], d);
        let better = best.is_none_or(|b| {
            key.0
                .total_cmp(&b.0)
                .then(key.1.total_cmp(&b.1))
                .then(key.2.total_cmp(&b.2))
                .is_lt()
        });
        if better {
            best = Some(key);
        }
    }
    let (after, _, _, d) = best?;
    (hot - after >= params.split_gain_min).then_some(d)
}

/// The least loaded shard (ties: the smallest id).
pub fn least_loaded(shards: &[ShardLoad]) -> Option<ShardId> {
    shards
        .iter()
        .min_by(|a, b| a.load.total_cmp(&b.load).then(a.shard.cmp(&b.shard)))
        .map(|s| s.shard)
}

/// The seed's split gains of `cell` for [`SplitDirection::ALL`]: the sample
/// load in each `min_cell_side_m` strip, with the parent penalty applied and
/// infeasible directions at `-inf`.
pub fn split_gains(
    tree: &SpaceTree,
    loads: &LoadBook,
    cell: CellId,
    params: &BalanceParams,
) -> Option<[f64; 4]> {
    let leaf = tree.cell(cell)?;
    let r = leaf.rect;
    let strip = tree.params().min_cell_side_m;
    let mut gains = [0.0; 4];
    if let Some(c) = loads.get(cell) {
        let inf = f64::INFINITY;
        gains = [
            c.load_within(Axis::X, -inf, r.min_x + strip),
            c.load_within(Axis::X, r.max_x - strip, inf),
            c.load_within(Axis::Z, -inf, r.min_z + strip),
            c.load_within(Axis::Z, r.max_z - strip, inf),
        ];
    }
    if let Some(parent) = tree.node(leaf.node).and_then(|n| n.parent()) {
        if let Some(NodeKind::Split { axis, low, .. }) = tree.node(parent).map(|n| n.kind()) {
            let is_low = low == leaf.node.0;
            let penalised = match (axis, is_low) {
                (Axis::X, true) => 1,
                (Axis::X, false) => 0,
                (Axis::Z, true) => 3,
                (Axis::Z, false) => 2,
            };
            gains[penalised] *= params.split_same_direction_factor;
        }
    }
    for (g, d) in gains.iter_mut().zip(SplitDirection::ALL) {
        if !can_split(tree, &r, d) {
            *g = f64::NEG_INFINITY;
        }
    }
    Some(gains)
}

/// The direction `cell` should split in (see the module doc), or `None` when
/// it cannot split at all.
pub fn split_direction(
    tree: &SpaceTree,
    loads: &LoadBook,
    cell: CellId,
    params: &BalanceParams,
) -> Option<SplitDirection> {
    let rect = tree.rect_of(cell)?;
    let no_samples = loads.get(cell).is_none_or(|c| c.samples().is_empty());
    if no_samples {
        let longest = if rect.width() > rect.depth() {
            SplitDirection::MinX
        } else {
            SplitDirection::MinZ
        };
        return [longest, SplitDirection::MinX, SplitDirection::MinZ]
            .into_iter()
            .find(|&d| can_split(tree, &rect, d));
    }
    let gains = split_gains(tree, loads, cell, params)?;
    let mut best = None;
    for (i, &g) in gains.iter().enumerate() {
        if g > f64::NEG_INFINITY && best.is_none_or(|(_, b)| g > b) {
            best = Some((SplitDirection::ALL[i], g));
        }
    }
    best.map(|(d, _)| d)
}

/// The merge choice (see the module doc), or `None`.
pub fn pick_merge(
    tree: &SpaceTree,
    loads: &LoadBook,
    shards: &[ShardLoad],
    params: &BalanceParams,
) -> Option<CellId> {
    let pair_max = params.merge_pair_load_fraction * params.split_cell_load_min;
    // (survivor's shard load after the merge, merging load, cell)
    let mut best: Option<(f64, f64, CellId)> = None;
    for leaf in tree.leaves() {
        if leaf.merging
            || leaf.cell == tree.master()
            || loads.reports(leaf.cell) <= params.merge_reports_min
        {
            continue;
        }
        let Some(sib) = tree.sibling(leaf.node).and_then(|s| tree.node(s)) else {
            continue;
        };
        let NodeKind::Leaf {
            cell: sib_cell,
            merging: sib_merging,
            shard: sib_shard,
            ..
        } = sib.kind()
        else {
            continue;
        };
        let load = loads.smoothed(leaf.cell);
        if sib_merging
            || loads.reports(sib_cell) <= params.merge_reports_min
            || load > params.merge_cell_load_max
            || load + loads.smoothed(sib_cell) > pair_max
        {
            continue;
        }
        let mut survivor = shard_load(shards, sib_shard);
        if sib_shard != leaf.shard {
            survivor += load;
        }
        if !shards.is_empty() && survivor >= params.split_shard_load_min && sib_shard != leaf.shard
        {
            // It would make the survivor's shard hot enough to split again.
            continue;
        }
        let key = (survivor, load, leaf.cell);
        let better = best.is_none_or(|b| {
            key.0
                .total_cmp(&b.0)
                .then(key.1.total_cmp(&b.1))
                .then(key.2.cmp(&b.2))
                .is_lt()
        });
        if better {
            best = Some(key);
        }
    }
    best.map(|(_, _, c)| c)
}

/// One balancing round: at most one rebalance, one split and one start of a
/// merge, in that order, each computed on the tree after the previous ones
/// (cells whose rect just changed wait for fresh reports), at most
/// `changes_per_decision_max` in all. Records the rebalance in `damping`.
///
/// # Panics
/// If the policy produced a change its own tree refuses (a bug).
pub fn decide(
    tree: &SpaceTree,
    loads: &LoadBook,
    shards: &[ShardLoad],
    params: &BalanceParams,
    damping: &mut Damping,
) -> Vec<SpaceChange> {
    let mut out = Vec::new();
    let mut t = tree.clone();
    let mut book = loads.clone();
    let max = params.changes_per_decision_max;
    let mut push = |t: &mut SpaceTree, book: &mut LoadBook, op: ChangeOp| {
        let change = SpaceChange {
            version: t.version(),
            op,
        };
        t.apply(&change).expect("the policy emits legal changes");
        book.sync(t);
        out.push(change);
    };
    let room = |t: &SpaceTree| ((t.version() - tree.version()) as usize) < max;
    if room(&t) {
        if let Some(p) = pick_rebalance(&t, &book, params, damping) {
            damping.record(&t, p.node, p.dir, p.scale);
            push(
                &mut t,
                &mut book,
                ChangeOp::Rebalance {
                    node: p.node,
                    at: p.at,
                },
            );
        }
    }
    if room(&t) {
        if let Some(op) = pick_split(&t, &book, shards, params) {
            push(&mut t, &mut book, op);
        }
    }
    if room(&t) {
        if let Some(cell) = pick_merge(&t, &book, shards, params) {
            push(&mut t, &mut book, ChangeOp::StartMerge { cell });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::ids::EntityId;
    use crate::core::space::{EntitySample, SpaceParams};

    fn tree() -> SpaceTree {
        let world = Rect::new(0.0, 0.0, 1000.0, 1000.0);
        SpaceTree::new(
            world,
            SpaceParams::for_ghost_radius(50.0),
            CellId(1),
            ShardId::local(0),
        )
        .unwrap()
    }

    fn at(x: f64, z: f64, load: f64) -> EntitySample {
        EntitySample {
            entity: EntityId(0),
            x,
            z,
            load,
            is_real: true,
        }
    }

    #[test]
    fn split_direction_weighs_z_strips_too() {
        let t = tree();
        let params = BalanceParams::default();
        let mut book = LoadBook::new(&params);
        book.sync(&t);
        let samples = [at(500.0, 950.0, 0.5), at(100.0, 500.0, 0.1)];
        book.report(CellId(1), 0.6, &samples).unwrap();
        let gains = split_gains(&t, &book, CellId(1), &params).unwrap();
        assert_eq!(gains, [0.1, 0.0, 0.0, 0.5]);
        assert_eq!(
            split_direction(&t, &book, CellId(1), &params),
            Some(SplitDirection::MaxZ)
        );
    }

    #[test]
    fn the_parent_parallel_direction_is_penalised() {
        let mut t = tree();
        let op = ChangeOp::Split {
            cell: CellId(1),
            direction: SplitDirection::MaxX,
            new_cell: CellId(2),
            new_shard: ShardId::local(1),
        };
        t.apply(&SpaceChange { version: 0, op }).unwrap();
        // Cell 1 is the low child of an x cut: its MaxX strip touches the cut.
        let params = BalanceParams::default();
        let mut book = LoadBook::new(&params);
        book.sync(&t);
        let samples = [at(700.0, 500.0, 0.4), at(300.0, 950.0, 0.3)];
        book.report(CellId(1), 0.7, &samples).unwrap();
        let gains = split_gains(&t, &book, CellId(1), &params).unwrap();
        assert!((gains[1] - 0.2).abs() < 1e-12, "{gains:?}");
        assert_eq!(
            split_direction(&t, &book, CellId(1), &params),
            Some(SplitDirection::MaxZ)
        );
        // With no samples: the low end of the longer side.
        book.report(CellId(1), 0.7, &[]).unwrap();
        assert_eq!(
            split_direction(&t, &book, CellId(1), &params),
            Some(SplitDirection::MinZ)
        );
    }

    #[test]
    fn damping_halves_on_reversal_and_recovers() {
        let mut t = tree();
        let op = ChangeOp::Split {
            cell: CellId(1),
            direction: SplitDirection::MaxX,
            new_cell: CellId(2),
            new_shard: ShardId::local(1),
        };
        t.apply(&SpaceChange { version: 0, op }).unwrap();
        let root = t.root();
        let mut d = Damping::new();
        assert_eq!(d.scale_for(&t, root, 1), 1.0);
        d.record(&t, root, 1, 1.0);
        assert_eq!(d.scale_for(&t, root, -1), 0.5);
        d.record(&t, root, -1, 0.5);
        assert_eq!(d.scale_for(&t, root, 1), 0.25);
        assert_eq!(d.scale_for(&t, root, -1), 1.0);
        assert_eq!(d.len(), 1);
    }

    fn shards(loads: &[f64]) -> Vec<ShardLoad> {
        loads
            .iter()
            .enumerate()
            .map(|(i, &load)| ShardLoad {
                shard: ShardId::local(i as u16),
                load,
            })
            .collect()
    }

    fn crowd_at(x: f64, z: f64, n: usize, each: f64) -> Vec<EntitySample> {
        (0..n)
            .map(|i| at(x + (i % 5) as f64, z + (i / 5) as f64, each))
            .collect()
    }

    fn reported(
        t: &SpaceTree,
        params: &BalanceParams,
        cells: &[(u32, f64, &[EntitySample])],
    ) -> LoadBook {
        let mut book = LoadBook::new(params);
        book.sync(t);
        for _ in 0..5 {
            for &(cell, load, samples) in cells {
                book.report(CellId(cell), load, samples).unwrap();
            }
        }
        book
    }

    #[test]
    fn a_split_that_would_only_move_the_hot_spot_is_not_made() {
        let t = tree();
        let params = BalanceParams::default();
        // The whole crowd inside the MaxZ strip (z >= 800), none elsewhere:
        // the only gain is moving all of it to shard 1.
        let hot = crowd_at(500.0, 900.0, 50, 0.02);
        let book = reported(&t, &params, &[(1, 1.0, &hot)]);
        // The cell is all its shard's load: moving it all to an idle shard
        // only moves the hot spot.
        assert_eq!(pick_split(&t, &book, &shards(&[1.0, 0.0]), &params), None);
        // The shard has 0.4 more: moving the cell's 1.0 to a shard at 0.8
        // makes that one the hot one (1.8).
        assert_eq!(pick_split(&t, &book, &shards(&[1.4, 0.8]), &params), None);
        // To an idle shard it is a gain (1.4 -> 1.0).
        let op = pick_split(&t, &book, &shards(&[1.4, 0.0]), &params).expect("a split");
        assert!(matches!(
            op,
            ChangeOp::Split {
                direction: SplitDirection::MaxZ,
                ..
            }
        ));
    }

    #[test]
    fn a_split_prefers_the_line_that_halves_the_load() {
        let t = tree();
        let params = BalanceParams::default();
        // 20 % of the load in the MinX strip, 60 % in the MaxZ strip.
        let mut s = crowd_at(100.0, 500.0, 20, 0.01);
        s.extend(crowd_at(500.0, 900.0, 60, 0.01));
        s.extend(crowd_at(500.0, 500.0, 20, 0.01));
        let book = reported(&t, &params, &[(1, 1.0, &s)]);
        let shares = split_shares(&t, &book, CellId(1)).unwrap();
        assert!((shares[0] - 0.2).abs() < 1e-9 && (shares[3] - 0.6).abs() < 1e-9);
        // Both shards at 1.0 + 0.0: moving 0.6 leaves max 0.6, 0.2 leaves 0.8.
        assert_eq!(
            gainful_direction(&t, &book, CellId(1), &params, 1.0, 0.0),
            Some(SplitDirection::MaxZ)
        );
        // The other shard at 0.5: 0.2 moved leaves max(0.8, 0.7) = 0.8,
        // 0.6 moved leaves max(0.4, 1.1): MinX wins.
        assert_eq!(
            gainful_direction(&t, &book, CellId(1), &params, 1.0, 0.5),
            Some(SplitDirection::MinX)
        );
        // Onto its own shard nothing is gained: not with two shards, nor
        // with one (the seed would split there too, for granularity; on
        // one core it only adds a border).
        assert_eq!(pick_split(&t, &book, &shards(&[0.9, 1.0]), &params), None);
        assert_eq!(pick_split(&t, &book, &shards(&[1.0]), &params), None);
        assert!(pick_split(&t, &book, &shards(&[1.0, 0.0]), &params).is_some());
    }

    fn split_pair() -> SpaceTree {
        let mut t = tree();
        let op = ChangeOp::Split {
            cell: CellId(1),
            direction: SplitDirection::MaxX,
            new_cell: CellId(2),
            new_shard: ShardId::local(1),
        };
        t.apply(&SpaceChange { version: 0, op }).unwrap();
        let op = ChangeOp::Split {
            cell: CellId(2),
            direction: SplitDirection::MaxZ,
            new_cell: CellId(3),
            new_shard: ShardId::local(0),
        };
        t.apply(&SpaceChange { version: 1, op }).unwrap();
        t
    }

    #[test]
    fn the_merged_cell_ends_on_the_less_loaded_shard() {
        // 1 (master, shard 0) | 2 (shard 1) over 3 (shard 0): 2 and 3 pair.
        let t = split_pair();
        let params = BalanceParams::default();
        let book = reported(
            &t,
            &params,
            &[(1, 0.5, &[]), (2, 0.01, &[]), (3, 0.02, &[])],
        );
        // Shard 0 busier: 3 merges into 2 (shard 1), though 2 is lighter.
        assert_eq!(
            pick_merge(&t, &book, &shards(&[0.6, 0.1]), &params),
            Some(CellId(3))
        );
        // Shard 1 busier: 2 merges into 3.
        assert_eq!(
            pick_merge(&t, &book, &shards(&[0.1, 0.6]), &params),
            Some(CellId(2))
        );
        // A survivor's shard that would reach the split threshold: no merge.
        let hot = BalanceParams {
            split_shard_load_min: 0.1,
            ..params
        };
        assert_eq!(pick_merge(&t, &book, &shards(&[0.6, 0.6]), &hot), None);
    }

    #[test]
    fn a_pair_merges_only_well_under_the_split_threshold() {
        let t = split_pair();
        let params = BalanceParams {
            split_cell_load_min: 0.4,
            merge_cell_load_max: 0.2,
            merge_pair_load_fraction: 0.5,
            ..BalanceParams::default()
        };
        let sh = shards(&[0.3, 0.3]);
        // 0.15 + 0.1 = 0.25 > 0.5 x 0.4: merged it would be near a split.
        let book = reported(&t, &params, &[(1, 0.1, &[]), (2, 0.15, &[]), (3, 0.1, &[])]);
        assert_eq!(pick_merge(&t, &book, &sh, &params), None);
        let book = reported(&t, &params, &[(1, 0.1, &[]), (2, 0.1, &[]), (3, 0.08, &[])]);
        assert!(pick_merge(&t, &book, &sh, &params).is_some());
        // Too young (reports since the split): no merge.
        let young = BalanceParams {
            merge_reports_min: 5,
            ..params
        };
        assert_eq!(pick_merge(&t, &book, &sh, &young), None);
    }

    #[test]
    fn least_loaded_breaks_ties_by_id() {
        let s = |i, load| ShardLoad {
            shard: ShardId::local(i),
            load,
        };
        assert_eq!(
            least_loaded(&[s(2, 0.1), s(1, 0.1), s(0, 0.5)]),
            Some(ShardId::local(1))
        );
        assert_eq!(least_loaded(&[]), None);
    }
}
