//! Property tests of the space tree: random change sequences, generated from
//! the current tree (mostly legal, some illegal), checked against a naive
//! model of what each change should do, against the invariants, against a
//! replica fed the serialised changes, and queries against linear scans.
//!
//! Cases: `PROPTEST_CASES` (default 64).

use proptest::prelude::*;
use tessera::core::geom::{Axis, Rect, Vec3};
use tessera::core::ids::{CellId, ShardId};
use tessera::core::space::{
    rect_distance, ChangeOp, LeafInfo, NodeIx, NodeKind, SpaceChange, SpaceError, SpaceParams,
    SpaceTree, SplitDirection, SIDE_TOLERANCE_M,
};

const GR: f64 = 25.0;

fn world() -> Rect {
    Rect::new(-200.0, 100.0, 800.0, 900.0)
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64)
}

fn new_tree() -> SpaceTree {
    SpaceTree::new(
        world(),
        SpaceParams::for_ghost_radius(GR),
        CellId(10),
        ShardId::local(0),
    )
    .unwrap()
}

fn leaves(t: &SpaceTree) -> Vec<LeafInfo> {
    t.leaves().collect()
}

fn internal_nodes(t: &SpaceTree) -> Vec<NodeIx> {
    let mut out = Vec::new();
    let mut stack = vec![t.root()];
    while let Some(ix) = stack.pop() {
        if let NodeKind::Split { low, high, .. } = t.node(ix).unwrap().kind() {
            out.push(ix);
            stack.extend([NodeIx(low), NodeIx(high)]);
        }
    }
    out.sort();
    out
}

fn split_of(t: &SpaceTree, ix: NodeIx) -> (Axis, f64, NodeIx, NodeIx) {
    match t.node(ix).unwrap().kind() {
        NodeKind::Split {
            axis,
            at,
            low,
            high,
        } => (axis, at, NodeIx(low), NodeIx(high)),
        k => panic!("not a split: {k:?}"),
    }
}

fn set_edge(r: &mut Rect, axis: Axis, max: bool, v: f64) {
    match (axis, max) {
        (Axis::X, false) => r.min_x = v,
        (Axis::X, true) => r.max_x = v,
        (Axis::Z, false) => r.min_z = v,
        (Axis::Z, true) => r.max_z = v,
    }
}

/// The naive model of moving the line `old` of node `ix` to `at`: every leaf
/// under the low child whose max edge is on the line gets max `at`, every
/// leaf under the high child whose min edge is on the line gets min `at`.
fn model_move(t: &SpaceTree, ix: NodeIx, at: f64) -> Vec<(CellId, Rect, bool)> {
    let (axis, old, low, high) = split_of(t, ix);
    let mut out = Vec::new();
    for (child, max) in [(low, true), (high, false)] {
        t.for_each_leaf_under(child, &mut |l| {
            let (lo, hi) = l.rect.span(axis);
            if (max && hi == old) || (!max && lo == old) {
                let mut r = l.rect;
                set_edge(&mut r, axis, max, at);
                out.push((l.cell, r, l.merging));
            }
        });
    }
    out
}

fn fits(r: &Rect, merging_axis: Option<Axis>) -> bool {
    [Axis::X, Axis::Z].into_iter().all(|a| {
        let need = if merging_axis == Some(a) {
            0.5 * GR
        } else {
            4.0 * GR
        };
        r.side(a) + SIDE_TOLERANCE_M >= need
    })
}

/// What the model says the step does: `Ok(expected leaf rects)` or `Err(())`.
type Expect = Result<Vec<(CellId, Rect)>, ()>;

fn with_moves(t: &SpaceTree, moves: &[(CellId, Rect, bool)]) -> Vec<(CellId, Rect)> {
    leaves(t)
        .into_iter()
        .map(|l| {
            let r = moves.iter().find(|m| m.0 == l.cell).map_or(l.rect, |m| m.1);
            (l.cell, r)
        })
        .collect()
}

fn expect_split(t: &SpaceTree, l: &LeafInfo, dir: SplitDirection, fresh: bool) -> Expect {
    let side = 4.0 * GR;
    if l.merging || !fresh || l.rect.side(dir.axis()) + SIDE_TOLERANCE_M < 2.0 * side {
        return Err(());
    }
    let (lo, hi) = l.rect.span(dir.axis());
    let at = if dir.is_min() { lo + side } else { hi - side };
    let (a, b) = l.rect.split(dir.axis(), at);
    let (new_rect, old_rect) = if dir.is_min() { (a, b) } else { (b, a) };
    let mut out = with_moves(t, &[(l.cell, old_rect, false)]);
    out.push((t.next_cell_id(), new_rect));
    out.sort_by_key(|e| e.0);
    Ok(out)
}

fn expect_rebalance(t: &SpaceTree, ix: NodeIx, at: f64) -> Expect {
    let (_, old, _, _) = split_of(t, ix);
    let moves = model_move(t, ix, at);
    let ok = at != old && moves.iter().all(|(_, r, m)| !m && fits(r, None));
    if ok {
        Ok(with_moves(t, &moves))
    } else {
        Err(())
    }
}

fn expect_start_merge(t: &SpaceTree, l: &LeafInfo) -> Expect {
    let Some(parent) = t.node(l.node).unwrap().parent() else {
        return Err(());
    };
    let sib = t.sibling(l.node).unwrap();
    let sib_merging = matches!(
        t.node(sib).unwrap().kind(),
        NodeKind::Leaf { merging: true, .. }
    );
    if l.cell == t.master() || l.merging || sib_merging {
        return Err(());
    }
    let (axis, _, low, _) = split_of(t, parent);
    let (lo, hi) = l.rect.span(axis);
    let at = if low == l.node {
        lo + 0.5 * GR
    } else {
        hi - 0.5 * GR
    };
    let moves = model_move(t, parent, at);
    let ok = moves.iter().all(|(c, r, m)| {
        if *c == l.cell {
            fits(r, Some(axis))
        } else {
            !m && fits(r, None)
        }
    });
    if ok {
        Ok(with_moves(t, &moves))
    } else {
        Err(())
    }
}

fn expect_finish_merge(t: &SpaceTree, l: &LeafInfo) -> Expect {
    if !l.merging {
        return Err(());
    }
    let parent = t.node(l.node).unwrap().parent().unwrap();
    let (axis, old, low, _) = split_of(t, parent);
    let (lo, hi) = l.rect.span(axis);
    let far = if low == l.node { lo } else { hi };
    let mut moves = Vec::new();
    t.for_each_leaf_under(t.sibling(l.node).unwrap(), &mut |s| {
        let (slo, shi) = s.rect.span(axis);
        if slo == old || shi == old {
            let mut r = s.rect;
            set_edge(&mut r, axis, shi == old, far);
            moves.push((s.cell, r, s.merging));
        }
    });
    Ok(with_moves(t, &moves)
        .into_iter()
        .filter(|e| e.0 != l.cell)
        .collect())
}

#[derive(Clone, Debug)]
struct Step {
    kind: u8,
    a: u32,
    b: u32,
    frac: f64,
}

fn step() -> impl Strategy<Value = Step> {
    (0u8..11, any::<u32>(), any::<u32>(), -1.0f64..1.0).prop_map(|(kind, a, b, frac)| Step {
        kind,
        a,
        b,
        frac,
    })
}

/// Builds the change for `s` from the current tree, and the model's verdict.
fn plan(t: &SpaceTree, s: &Step) -> (SpaceChange, Expect) {
    let ls = leaves(t);
    let l = ls[s.a as usize % ls.len()];
    let v = t.version();
    let (op, expect) = match s.kind {
        0..=3 => {
            let dir = SplitDirection::ALL[s.b as usize % 4];
            let fresh = s.b % 11 != 0;
            let new_cell = if fresh { t.next_cell_id() } else { t.master() };
            let op = ChangeOp::Split {
                cell: l.cell,
                direction: dir,
                new_cell,
                new_shard: ShardId::local((s.b % 3) as u16),
            };
            (op, expect_split(t, &l, dir, fresh))
        }
        4..=6 => {
            let nodes = internal_nodes(t);
            if nodes.is_empty() {
                let op = ChangeOp::Rebalance {
                    node: l.node,
                    at: 0.0,
                };
                (op, Err(()))
            } else {
                let node = nodes[s.b as usize % nodes.len()];
                let (_, old, _, _) = split_of(t, node);
                let at = if s.b % 13 == 0 {
                    f64::NAN
                } else {
                    old + s.frac * 3.0 * GR
                };
                let expect = if at.is_nan() {
                    Err(())
                } else {
                    expect_rebalance(t, node, at)
                };
                (ChangeOp::Rebalance { node, at }, expect)
            }
        }
        7 | 8 => (
            ChangeOp::StartMerge { cell: l.cell },
            expect_start_merge(t, &l),
        ),
        9 => {
            let merging: Vec<_> = ls.iter().filter(|l| l.merging).collect();
            let target = if merging.is_empty() || s.b % 5 == 0 {
                l
            } else {
                *merging[s.b as usize % merging.len()]
            };
            (
                ChangeOp::FinishMerge { cell: target.cell },
                expect_finish_merge(t, &target),
            )
        }
        _ => {
            // Plainly illegal: a stale version, an unknown cell.
            let op = ChangeOp::StartMerge {
                cell: CellId(t.next_cell_id().0 + s.b % 5),
            };
            let version = if s.b % 2 == 0 { v + 1 } else { v };
            return (SpaceChange { version, op }, Err(()));
        }
    };
    (SpaceChange { version: v, op }, expect)
}

fn leaf_rects(t: &SpaceTree) -> Vec<(CellId, Rect)> {
    leaves(t).into_iter().map(|l| (l.cell, l.rect)).collect()
}

/// Leaves tile the world: areas add up, no two interiors overlap.
fn check_tiling(t: &SpaceTree) {
    let ls = leaves(t);
    let area: f64 = ls.iter().map(|l| l.rect.area()).sum();
    assert!((area - t.world().area()).abs() < 1e-6 * t.world().area());
    for (i, a) in ls.iter().enumerate() {
        assert!(t.world().covers(&a.rect));
        for b in &ls[i + 1..] {
            assert!(!a.rect.overlaps(&b.rect), "{a:?} overlaps {b:?}");
        }
    }
}

/// The naive owner of a point: half-open leaves, closed at the world's max
/// edges, after clamping into the world.
fn naive_cell_at(t: &SpaceTree, p: Vec3) -> CellId {
    let w = t.world();
    let c = w.clamp(p);
    let owns = |r: &Rect, v: f64, lo: f64, hi: f64, wmax: f64| {
        lo <= v && (v < hi || (hi == wmax && v == hi)) && r.is_valid()
    };
    let hits: Vec<_> = leaves(t)
        .into_iter()
        .filter(|l| {
            owns(&l.rect, c.x, l.rect.min_x, l.rect.max_x, w.max_x)
                && owns(&l.rect, c.z, l.rect.min_z, l.rect.max_z, w.max_z)
        })
        .collect();
    assert_eq!(hits.len(), 1, "exactly one owner of {p:?}");
    hits[0].cell
}

fn check_queries(t: &SpaceTree, probes: &[(f64, f64, f64, f64)]) {
    let mut points: Vec<Vec3> = probes.iter().map(|p| Vec3::ground(p.0, p.1)).collect();
    for l in leaves(t) {
        let r = l.rect;
        points.extend([
            Vec3::ground(r.min_x, r.min_z),
            Vec3::ground(r.max_x, r.max_z),
            Vec3::ground(r.min_x, r.max_z),
        ]);
    }
    for p in points {
        assert_eq!(t.cell_at(p), naive_cell_at(t, p), "point {p:?}");
    }
    let mut got = Vec::new();
    for p in probes {
        let area = Rect::around(p.0, p.1, p.2.abs());
        t.cells_meeting(&area, &mut got);
        got.sort();
        let want: Vec<_> = leaves(t)
            .into_iter()
            .filter(|l| l.rect.intersects(&area))
            .map(|l| l.cell)
            .collect();
        assert_eq!(got, want, "cells meeting {area:?}");
        let ls = leaves(t);
        let me = ls[(p.3.abs() * 1e6) as usize % ls.len()];
        t.neighbours(me.cell, p.2.abs(), &mut got).unwrap();
        got.sort();
        let want: Vec<_> = ls
            .iter()
            .filter(|l| l.cell != me.cell && rect_distance(&l.rect, &me.rect) <= p.2.abs())
            .map(|l| l.cell)
            .collect();
        assert_eq!(
            got,
            want,
            "neighbours of {:?} within {}",
            me.cell,
            p.2.abs()
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn random_changes_keep_the_invariants_and_replicas_agree(
        steps in prop::collection::vec(step(), 1..60),
        probes in prop::collection::vec((-300.0f64..900.0, 0.0f64..1000.0, 0.0f64..150.0, 0.0f64..1.0), 8),
    ) {
        let mut t = new_tree();
        let mut replica = SpaceTree::from_snapshot_bytes(&t.to_snapshot_bytes()).unwrap();
        let (mut ok, mut refused) = (0, 0);
        for s in &steps {
            let (change, expect) = plan(&t, s);
            let before = t.clone();
            let result = t.apply(&change);
            t.validate().unwrap();
            match (&result, expect) {
                (Ok(()), Ok(mut want)) => {
                    ok += 1;
                    prop_assert_eq!(t.version(), before.version() + 1);
                    want.sort_by_key(|e| e.0);
                    prop_assert_eq!(leaf_rects(&t), want, "{:?}", change);
                    let wire = SpaceChange::from_bytes(&change.to_bytes()).unwrap();
                    replica.apply(&wire).unwrap();
                }
                (Err(e), Err(())) => {
                    refused += 1;
                    prop_assert_eq!(&t, &before, "refused {:?} ({}) changed the tree", change, e);
                    if let ChangeOp::StartMerge { cell } = change.op {
                        if cell == t.master() && change.version == t.version() {
                            prop_assert_eq!(e, &SpaceError::MasterCell(cell));
                        }
                    }
                }
                (r, want) => prop_assert!(false, "{:?}: tree said {:?}, model said {:?}", change, r, want.is_ok()),
            }
            prop_assert_eq!(&t, &replica);
            check_tiling(&t);
        }
        prop_assert_eq!(t.version(), ok as u64);
        prop_assert_eq!(SpaceTree::from_snapshot_bytes(&t.to_snapshot_bytes()).unwrap(), t.clone());
        check_queries(&t, &probes);
        prop_assert_eq!(ok + refused, steps.len());
    }

    #[test]
    fn corrupted_snapshots_are_refused_not_panicking(
        steps in prop::collection::vec(step(), 1..20),
        flips in prop::collection::vec((any::<usize>(), any::<u8>()), 1..4),
    ) {
        let mut t = new_tree();
        for s in &steps {
            let (change, _) = plan(&t, s);
            let _ = t.apply(&change);
        }
        let mut bytes = t.to_snapshot_bytes().to_vec();
        for (at, x) in flips {
            let i = at % bytes.len();
            bytes[i] ^= x | 1;
        }
        let mut aligned = rkyv::util::AlignedVec::<16>::new();
        aligned.extend_from_slice(&bytes);
        if let Ok(back) = SpaceTree::from_snapshot_bytes(&aligned) {
            back.validate().unwrap();
        }
    }
}
