//! Property tests of the load-aware split and merge choices
//! (`pick_split`, `pick_merge`) against brute-force oracles.
//!
//! Random trees (a 1000 m world cut by random legal splits onto random
//! shards), random crowds per cell and random cell and shard loads, with
//! two to four shards:
//!
//! - A split returned goes onto the least loaded shard, from a cell on
//!   another shard that passes every gate, and lowers the busier of the two
//!   shards by at least `split_gain_min`, with no legal direction of that
//!   cell doing strictly better (the oracle counts the strip's samples
//!   itself). No split returned: no gated cell has a direction with that
//!   gain.
//! - A merge returned is of a cold cell whose pair is under the hysteresis
//!   bound and whose survivor's shard stays under `split_shard_load_min`;
//!   and the survivor's shard is the least loaded among the eligible pairs.
//!
//! Cases: `PROPTEST_CASES` (default 64).

use proptest::prelude::*;
use tessera::core::geom::{Axis, Rect};
use tessera::core::ids::{CellId, EntityId, ShardId};
use tessera::core::space::{
    least_loaded, pick_merge, pick_split, BalanceParams, ChangeOp, EntitySample, LoadBook,
    NodeKind, ShardLoad, SpaceChange, SpaceParams, SpaceTree, SplitDirection,
};

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64)
}

const EPS: f64 = 1e-9;

/// A tree cut by `cuts` (cell index, direction, shard), skipping illegal
/// ones.
fn tree(cuts: &[(u8, u8, u8)], shards: u16) -> SpaceTree {
    let world = Rect::new(0.0, 0.0, 1000.0, 1000.0);
    let params = SpaceParams::for_ghost_radius(50.0);
    let mut t = SpaceTree::new(world, params, CellId(1), ShardId::local(0)).unwrap();
    for &(c, d, s) in cuts {
        let leaves: Vec<_> = t.leaves().collect();
        let leaf = leaves[usize::from(c) % leaves.len()];
        let op = ChangeOp::Split {
            cell: leaf.cell,
            direction: SplitDirection::ALL[usize::from(d) % 4],
            new_cell: t.next_cell_id(),
            new_shard: ShardId::local(u16::from(s) % shards),
        };
        let change = SpaceChange {
            version: t.version(),
            op,
        };
        let _ = t.apply(&change);
    }
    t
}

/// Samples of a crowd of `n` around a point given as fractions of `rect`.
fn crowd(rect: &Rect, fx: f64, fz: f64, n: usize, each: f64) -> Vec<EntitySample> {
    (0..n)
        .map(|i| EntitySample {
            entity: EntityId(i as u64),
            x: (rect.min_x + fx * rect.width() + (i % 7) as f64 * 3.0).min(rect.max_x - 0.01),
            z: (rect.min_z + fz * rect.depth() + (i / 7) as f64 * 3.0).min(rect.max_z - 0.01),
            load: each,
            is_real: true,
        })
        .collect()
}

struct Case {
    tree: SpaceTree,
    book: LoadBook,
    samples: Vec<(CellId, f64, Vec<EntitySample>)>,
    shards: Vec<ShardLoad>,
    params: BalanceParams,
}

fn case(
    cuts: &[(u8, u8, u8)],
    nshards: u16,
    cells: &[(f64, f64, u8, u8)],
    shard_loads: &[u8],
    reports: u32,
) -> Case {
    let tree = tree(cuts, nshards);
    let params = BalanceParams {
        split_cell_load_min: 0.3,
        split_shard_load_min: 0.4,
        merge_cell_load_max: 0.2,
        merge_pair_load_fraction: 0.7,
        ..BalanceParams::default()
    };
    let mut book = LoadBook::new(&params);
    book.sync(&tree);
    let mut samples = Vec::new();
    for (i, leaf) in tree.leaves().enumerate() {
        let (fx, fz, n, load) = cells[i % cells.len()];
        let load = f64::from(load) / 100.0;
        let n = usize::from(n);
        let s = crowd(&leaf.rect, fx, fz, n, load / n.max(1) as f64);
        samples.push((leaf.cell, load, s));
    }
    for _ in 0..reports {
        for (cell, load, s) in &samples {
            book.report(*cell, *load, s).unwrap();
        }
    }
    let shards = (0..nshards)
        .map(|i| ShardLoad {
            shard: ShardId::local(i),
            load: f64::from(shard_loads[usize::from(i) % shard_loads.len()]) / 100.0,
        })
        .collect();
    Case {
        tree,
        book,
        samples,
        shards,
        params,
    }
}

fn shard_load(shards: &[ShardLoad], s: ShardId) -> f64 {
    shards.iter().find(|l| l.shard == s).map_or(0.0, |l| l.load)
}

/// The oracle's share of `samples` in the strip a split in `d` cuts off.
fn share(rect: &Rect, strip: f64, samples: &[EntitySample], d: SplitDirection) -> f64 {
    let total: f64 = samples.iter().map(|s| s.load).sum();
    let w = |s: &EntitySample| {
        if total > 0.0 {
            s.load / total
        } else {
            1.0 / samples.len() as f64
        }
    };
    samples
        .iter()
        .filter(|s| match d {
            SplitDirection::MinX => s.x < rect.min_x + strip,
            SplitDirection::MaxX => s.x >= rect.max_x - strip,
            SplitDirection::MinZ => s.z < rect.min_z + strip,
            SplitDirection::MaxZ => s.z >= rect.max_z - strip,
        })
        .map(w)
        .sum()
}

/// For every gated cell: its best `max(hot - moved, cold + moved)` over
/// legal directions, by brute force.
fn best_after(c: &Case, cell: CellId) -> Option<f64> {
    let leaf = c.tree.leaves().find(|l| l.cell == cell)?;
    let (_, _, samples) = c.samples.iter().find(|s| s.0 == cell)?;
    if samples.is_empty() {
        return None;
    }
    let strip = c.tree.params().min_cell_side_m;
    let load = c.book.smoothed(cell);
    let hot = shard_load(&c.shards, leaf.shard);
    let cold = shard_load(&c.shards, least_loaded(&c.shards)?);
    SplitDirection::ALL
        .into_iter()
        .filter(|d| {
            let axis = if matches!(d, SplitDirection::MinX | SplitDirection::MaxX) {
                Axis::X
            } else {
                Axis::Z
            };
            leaf.rect.side(axis) + 1e-6 >= 2.0 * strip
        })
        .map(|d| {
            let moved = load * share(&leaf.rect, strip, samples, d);
            (hot - moved).max(cold + moved)
        })
        .min_by(f64::total_cmp)
}

fn gated(c: &Case, cell: CellId) -> bool {
    let Some(leaf) = c.tree.leaves().find(|l| l.cell == cell) else {
        return false;
    };
    !leaf.merging
        && c.book.reports(cell) > c.params.split_reports_min
        && c.book.smoothed(cell) >= c.params.split_cell_load_min
        && shard_load(&c.shards, leaf.shard) >= c.params.split_shard_load_min
        && Some(leaf.shard) != least_loaded(&c.shards)
}

fn cells() -> impl Strategy<Value = Vec<(f64, f64, u8, u8)>> {
    prop::collection::vec((0.0..1.0f64, 0.0..1.0f64, 0u8..40, 0u8..80), 1..6)
}

fn cuts() -> impl Strategy<Value = Vec<(u8, u8, u8)>> {
    prop::collection::vec((any::<u8>(), any::<u8>(), any::<u8>()), 0..5)
}

/// Mostly cold cells (merges are then often possible).
fn cold_cells() -> impl Strategy<Value = Vec<(f64, f64, u8, u8)>> {
    prop::collection::vec((0.0..1.0f64, 0.0..1.0f64, 0u8..40, 0u8..25), 1..6)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn a_split_is_made_exactly_when_it_pays(
        cuts in cuts(),
        nshards in 2u16..5,
        cells in cells(),
        loads in prop::collection::vec(0u8..150, 1..5),
    ) {
        let c = case(&cuts, nshards, &cells, &loads, 5);
        let gain_min = c.params.split_gain_min;
        let picked = pick_split(&c.tree, &c.book, &c.shards, &c.params);
        match picked {
            Some(ChangeOp::Split { cell, direction, new_shard, .. }) => {
                prop_assert_eq!(Some(new_shard), least_loaded(&c.shards));
                prop_assert!(gated(&c, cell));
                let leaf = c.tree.leaves().find(|l| l.cell == cell).unwrap();
                let (_, _, samples) = c.samples.iter().find(|s| s.0 == cell).unwrap();
                let hot = shard_load(&c.shards, leaf.shard);
                let cold = shard_load(&c.shards, new_shard);
                let load = c.book.smoothed(cell);
                let after = if samples.is_empty() {
                    (hot - 0.5 * load).max(cold + 0.5 * load)
                } else {
                    let s = share(&leaf.rect, c.tree.params().min_cell_side_m, samples, direction);
                    let after = (hot - load * s).max(cold + load * s);
                    prop_assert!(after <= best_after(&c, cell).unwrap() + EPS);
                    after
                };
                prop_assert!(hot - after >= gain_min - EPS, "gain {} < {}", hot - after, gain_min);
            }
            Some(other) => prop_assert!(false, "not a split: {:?}", other),
            None => {
                for leaf in c.tree.leaves() {
                    if !gated(&c, leaf.cell) {
                        continue;
                    }
                    if let Some(after) = best_after(&c, leaf.cell) {
                        let hot = shard_load(&c.shards, leaf.shard);
                        prop_assert!(hot - after < gain_min + EPS, "{:?} would gain", leaf.cell);
                    }
                }
            }
        }
    }

    #[test]
    fn a_merge_ends_on_the_less_loaded_shard_under_the_bounds(
        cuts in prop::collection::vec((any::<u8>(), any::<u8>(), any::<u8>()), 1..5),
        nshards in 2u16..5,
        cells in cold_cells(),
        loads in prop::collection::vec(0u8..60, 1..5),
        reports in 3u32..6,
    ) {
        let c = case(&cuts, nshards, &cells, &loads, reports);
        let p = c.params;
        let pair_max = p.merge_pair_load_fraction * p.split_cell_load_min;
        // Eligible (merging cell, survivor shard load after) by brute force.
        let mut eligible = Vec::new();
        for leaf in c.tree.leaves() {
            let Some(sib) = c.tree.sibling(leaf.node).and_then(|s| c.tree.node(s)) else {
                continue;
            };
            let NodeKind::Leaf { cell: sc, shard: ss, merging: sm } = sib.kind() else {
                continue;
            };
            let load = c.book.smoothed(leaf.cell);
            let mut after = shard_load(&c.shards, ss);
            if ss != leaf.shard {
                after += load;
            }
            let ok = !leaf.merging
                && !sm
                && leaf.cell != c.tree.master()
                && c.book.reports(leaf.cell) > p.merge_reports_min
                && c.book.reports(sc) > p.merge_reports_min
                && load <= p.merge_cell_load_max
                && load + c.book.smoothed(sc) <= pair_max
                && (ss == leaf.shard || after < p.split_shard_load_min);
            if ok {
                eligible.push((leaf.cell, after));
            }
        }
        match pick_merge(&c.tree, &c.book, &c.shards, &p) {
            Some(cell) => {
                let Some(&(_, after)) = eligible.iter().find(|e| e.0 == cell) else {
                    return Err(TestCaseError::fail(format!("{cell:?} is not eligible")));
                };
                let best = eligible.iter().map(|e| e.1).fold(f64::INFINITY, f64::min);
                prop_assert!(after <= best + EPS);
            }
            None => prop_assert!(eligible.is_empty(), "{:?} eligible", eligible),
        }
    }
}
