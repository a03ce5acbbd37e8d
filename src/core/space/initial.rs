//! The starting cut of a union space: `cells` leaves made by the tree's own
//! changes (so every replica that builds it holds an equal tree): the
//! largest leaf is split across its longer side and the new cut is moved to
//! the middle (a `Split` then a `Rebalance`), so 4 cells are 4 quadrants;
//! leaf `i` on shard `i % shards`.
//!
//! [`initial_tree`] makes exactly `cells` or refuses; [`fitting_tree`]
//! stops early when the world has no room for another cell (the default
//! layout, one cell per shard, asks for as many as fit).
//!
//! Owns only this construction; must not hold state.

use super::change::{ChangeOp, SpaceChange, SplitDirection};
use super::error::SpaceError;
use super::params::SpaceParams;
use super::tree::{NodeKind, SpaceTree, SIDE_TOLERANCE_M};
use crate::core::geom::Rect;
use crate::core::ids::{CellId, ShardId};

/// A tree of `cells` leaves over `world`, master cell 0 on shard 0, cell
/// ids dense from 0, leaf `i` on shard `i % shards` (see the module doc).
///
/// # Errors
/// A [`SpaceError`] when the world or params are refused or a leaf is too
/// small to split again.
pub fn initial_tree(
    world: Rect,
    params: SpaceParams,
    cells: u32,
    shards: u16,
) -> Result<SpaceTree, SpaceError> {
    build(world, params, cells, shards, false)
}

/// As [`initial_tree`], but with at most `cells` leaves: it stops at the
/// first leaf too small to halve (`2 x min_cell_side_m` along its longer
/// side), so it is never refused for want of room (at least one cell).
///
/// # Errors
/// A [`SpaceError`] when the world or params are refused.
pub fn fitting_tree(
    world: Rect,
    params: SpaceParams,
    cells: u32,
    shards: u16,
) -> Result<SpaceTree, SpaceError> {
    build(world, params, cells, shards, true)
}

fn build(
    world: Rect,
    params: SpaceParams,
    cells: u32,
    shards: u16,
    fitting: bool,
) -> Result<SpaceTree, SpaceError> {
    let mut tree = SpaceTree::new(world, params, CellId(0), ShardId::local(0))?;
    for i in 1..cells {
        let largest = tree
            .leaves()
            .max_by(|a, b| {
                (a.rect.width() * a.rect.depth()).total_cmp(&(b.rect.width() * b.rect.depth()))
            })
            .expect("a tree has a leaf");
        let direction = if largest.rect.width() >= largest.rect.depth() {
            SplitDirection::MaxX
        } else {
            SplitDirection::MaxZ
        };
        // Halved along the longer side: two legal cells, or no room left.
        let side = largest.rect.side(direction.axis());
        if fitting && side + SIDE_TOLERANCE_M < 2.0 * params.min_cell_side_m {
            break;
        }
        let change = SpaceChange {
            version: tree.version(),
            op: ChangeOp::Split {
                cell: largest.cell,
                direction,
                new_cell: tree.next_cell_id(),
                new_shard: ShardId::local((i % u32::from(shards.max(1))) as u16),
            },
        };
        tree.apply(&change)?;
        let parent = tree
            .node_of_cell(CellId(tree.next_cell_id().0 - 1))
            .and_then(|n| tree.node(n))
            .and_then(|n| n.parent())
            .expect("a split leaf has a parent");
        let r = largest.rect;
        let mid = match direction {
            SplitDirection::MaxX => 0.5 * (r.min_x + r.max_x),
            _ => 0.5 * (r.min_z + r.max_z),
        };
        let at = match tree.node(parent).map(|n| n.kind()) {
            Some(NodeKind::Split { at, .. }) => at,
            _ => unreachable!("a parent is a split"),
        };
        if at != mid {
            let halve = SpaceChange {
                version: tree.version(),
                op: ChangeOp::Rebalance {
                    node: parent,
                    at: mid,
                },
            };
            tree.apply(&halve)?;
        }
    }
    Ok(tree)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_are_dense_and_round_robin() {
        let t = initial_tree(
            Rect::new(0.0, 0.0, 2000.0, 2000.0),
            SpaceParams::for_ghost_radius(60.0),
            4,
            3,
        )
        .unwrap();
        assert_eq!(t.cell_count(), 4);
        let quadrant = |c| t.rect_of(CellId(c)).unwrap();
        assert_eq!(quadrant(0), Rect::new(0.0, 0.0, 1000.0, 1000.0));
        assert_eq!(quadrant(1), Rect::new(1000.0, 0.0, 2000.0, 1000.0));
        let shards: Vec<_> = t.leaves().map(|l| (l.cell.0, l.shard.index)).collect();
        for (c, s) in shards {
            assert_eq!(u32::from(s), c % 3);
        }
        // A split that already halves needs no move.
        let two = initial_tree(
            Rect::new(0.0, 0.0, 480.0, 240.0),
            SpaceParams::for_ghost_radius(60.0),
            2,
            2,
        )
        .unwrap();
        assert_eq!(two.version(), 1);
        assert!(initial_tree(
            Rect::new(0.0, 0.0, 300.0, 300.0),
            SpaceParams::for_ghost_radius(60.0),
            4,
            1
        )
        .is_err());
    }

    /// The fitting cut makes what was asked where there is room, and stops
    /// at the first leaf too small to halve where there is not.
    #[test]
    fn the_fitting_cut_stops_where_the_world_has_no_room() {
        let p = SpaceParams::for_ghost_radius(60.0);
        let big = Rect::new(0.0, 0.0, 2000.0, 2000.0);
        let exact = initial_tree(big, p, 4, 2).unwrap();
        let fit = fitting_tree(big, p, 4, 2).unwrap();
        assert_eq!(fit.cell_count(), 4);
        let rects = |t: &SpaceTree| {
            t.leaves()
                .map(|l| (l.cell, l.rect, l.shard))
                .collect::<Vec<_>>()
        };
        assert_eq!(rects(&fit), rects(&exact), "the same cut as the exact one");
        // 480 x 240 halves once (two 240 m cells), then no more.
        let strip = Rect::new(0.0, 0.0, 480.0, 240.0);
        assert!(initial_tree(strip, p, 3, 3).is_err());
        assert_eq!(fitting_tree(strip, p, 3, 3).unwrap().cell_count(), 2);
        // Too small for two: one cell, not an error.
        let small = Rect::new(0.0, 0.0, 300.0, 300.0);
        assert_eq!(fitting_tree(small, p, 4, 4).unwrap().cell_count(), 1);
        assert_eq!(fitting_tree(small, p, 1, 1).unwrap().cell_count(), 1);
    }
}
