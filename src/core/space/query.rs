//! Read-only queries on the space tree: which cell holds a point, which cells
//! meet a rectangle (ghosting), a cell's neighbours, the leaf list.
//!
//! All descend the tree from the root, pruning subtrees that cannot match, and
//! allocate nothing beyond the caller's output `Vec`. Results come in a fixed
//! order (tree order: low child first), so replicas answer identically.
//!
//! # Which cell owns a point
//! Leaves are half-open, `[min, max)` on both axes ([`Rect::contains`]). A point
//! on the world's max edge, or outside the world, is clamped: it belongs to the
//! leaf nearest along each axis (descending compares `coord < at`, so it walks
//! to the same leaf as the clamped point). NaN coordinates go to the high side;
//! callers validate positions first.
//!
//! Must not mutate the tree or know about loads.

use super::error::SpaceError;
use super::tree::{NodeIx, NodeKind, SpaceTree};
use crate::core::geom::{Rect, Vec3};
use crate::core::ids::{CellId, ShardId};

/// One cell as the queries report it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LeafInfo {
    /// The cell.
    pub cell: CellId,
    /// The shard hosting it.
    pub shard: ShardId,
    /// Its area.
    pub rect: Rect,
    /// True while it shrinks before removal.
    pub merging: bool,
    /// Its leaf node.
    pub node: NodeIx,
}

/// Euclidean ground distance between two closed rectangles (0 when they meet).
pub fn rect_distance(a: &Rect, b: &Rect) -> f64 {
    let dx = (a.min_x - b.max_x).max(b.min_x - a.max_x).max(0.0);
    let dz = (a.min_z - b.max_z).max(b.min_z - a.max_z).max(0.0);
    (dx * dx + dz * dz).sqrt()
}

/// True when `a` and `b` share a stretch of border of positive length.
pub fn share_edge(a: &Rect, b: &Rect) -> bool {
    let x_touch = a.max_x == b.min_x || b.max_x == a.min_x;
    let z_touch = a.max_z == b.min_z || b.max_z == a.min_z;
    let x_overlap = a.min_x.max(b.min_x) < a.max_x.min(b.max_x);
    let z_overlap = a.min_z.max(b.min_z) < a.max_z.min(b.max_z);
    (x_touch && z_overlap) || (z_touch && x_overlap)
}

impl SpaceTree {
    /// The leaf node holding `p` (see the module doc for edges and clamping).
    pub fn leaf_at(&self, p: Vec3) -> NodeIx {
        let mut ix = self.root;
        loop {
            match self.n(ix).kind {
                NodeKind::Split {
                    axis,
                    at,
                    low,
                    high,
                } => ix = if axis.of(p) < at { low } else { high },
                NodeKind::Leaf { .. } => return NodeIx(ix),
                NodeKind::Free => unreachable!("free slot in the tree"),
            }
        }
    }

    /// The cell holding `p` (see the module doc for edges and clamping).
    pub fn cell_at(&self, p: Vec3) -> CellId {
        self.leaf_info(self.leaf_at(p)).cell
    }

    /// The cell of a leaf node.
    ///
    /// # Panics
    /// When `ix` is not a leaf of this tree (a caller bug).
    pub fn leaf_info(&self, ix: NodeIx) -> LeafInfo {
        let node = self.n(ix.0);
        match node.kind {
            NodeKind::Leaf {
                cell,
                shard,
                merging,
            } => LeafInfo {
                cell,
                shard,
                rect: node.rect,
                merging,
                node: ix,
            },
            _ => panic!("node {ix:?} is not a leaf"),
        }
    }

    /// The cell `cell`, if it exists.
    pub fn cell(&self, cell: CellId) -> Option<LeafInfo> {
        self.node_of_cell(cell).map(|ix| self.leaf_info(ix))
    }

    /// The rect of `cell`.
    pub fn rect_of(&self, cell: CellId) -> Option<Rect> {
        self.cell(cell).map(|l| l.rect)
    }

    /// The shard hosting `cell`.
    pub fn shard_of(&self, cell: CellId) -> Option<ShardId> {
        self.cell(cell).map(|l| l.shard)
    }

    /// Every cell, sorted by id.
    pub fn leaves(&self) -> impl Iterator<Item = LeafInfo> + '_ {
        self.cells.iter().map(|s| self.leaf_info(NodeIx(s.node)))
    }

    /// Calls `f` for every cell whose closed rect meets the closed `area`
    /// (touching counts), in tree order.
    pub fn for_each_cell_meeting(&self, area: &Rect, f: &mut impl FnMut(LeafInfo)) {
        self.visit_meeting(self.root, area, f);
    }

    fn visit_meeting(&self, ix: u32, area: &Rect, f: &mut impl FnMut(LeafInfo)) {
        let node = self.n(ix);
        if !node.rect.intersects(area) {
            return;
        }
        match node.kind {
            NodeKind::Split { low, high, .. } => {
                self.visit_meeting(low, area, f);
                self.visit_meeting(high, area, f);
            }
            NodeKind::Leaf { .. } => f(self.leaf_info(NodeIx(ix))),
            NodeKind::Free => unreachable!("free slot in the tree"),
        }
    }

    /// Replaces `out` with the cells whose closed rect meets the closed `area`,
    /// in tree order.
    pub fn cells_meeting(&self, area: &Rect, out: &mut Vec<CellId>) {
        out.clear();
        self.for_each_cell_meeting(area, &mut |l| out.push(l.cell));
    }

    /// Replaces `out` with the cells other than `real_cell` that should hold a
    /// ghost of a real at `p`: those meeting the square of half side
    /// `ghost_radius_m` around `p` (BigWorld's ghosting rule).
    pub fn ghost_cells(&self, p: Vec3, real_cell: CellId, out: &mut Vec<CellId>) {
        let area = Rect::around(p.x, p.z, self.params.ghost_radius_m);
        out.clear();
        self.for_each_cell_meeting(&area, &mut |l| {
            if l.cell != real_cell {
                out.push(l.cell);
            }
        });
    }

    /// Replaces `out` with the cells other than `cell` within `within_m` of
    /// it (closed: with 0, the cells sharing an edge or a corner), in tree
    /// order.
    ///
    /// # Errors
    /// [`SpaceError::UnknownCell`].
    pub fn neighbours(
        &self,
        cell: CellId,
        within_m: f64,
        out: &mut Vec<CellId>,
    ) -> Result<(), SpaceError> {
        let rect = self.rect_of(cell).ok_or(SpaceError::UnknownCell(cell))?;
        out.clear();
        let area = rect.inflate(within_m.max(0.0));
        self.for_each_cell_meeting(&area, &mut |l| {
            if l.cell != cell && rect_distance(&rect, &l.rect) <= within_m.max(0.0) {
                out.push(l.cell);
            }
        });
        Ok(())
    }

    /// Leaves under node `ix` (the node itself if a leaf), in tree order.
    pub fn for_each_leaf_under(&self, ix: NodeIx, f: &mut impl FnMut(LeafInfo)) {
        match self.n(ix.0).kind {
            NodeKind::Split { low, high, .. } => {
                self.for_each_leaf_under(NodeIx(low), f);
                self.for_each_leaf_under(NodeIx(high), f);
            }
            NodeKind::Leaf { .. } => f(self.leaf_info(ix)),
            NodeKind::Free => unreachable!("free slot in the tree"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::geom::Axis;
    use crate::core::space::{ChangeOp, SpaceChange, SpaceParams, SplitDirection};

    fn two_cells() -> SpaceTree {
        let world = Rect::new(0.0, 0.0, 1000.0, 1000.0);
        let mut t =
            SpaceTree::new(world, SpaceParams::default(), CellId(1), ShardId::local(0)).unwrap();
        let op = ChangeOp::Split {
            cell: CellId(1),
            direction: SplitDirection::MaxX,
            new_cell: CellId(2),
            new_shard: ShardId::local(1),
        };
        t.apply(&SpaceChange { version: 0, op }).unwrap();
        t
    }

    #[test]
    fn point_lookup_is_half_open_and_clamps() {
        let t = two_cells();
        assert_eq!(t.cell_at(Vec3::ground(799.9, 5.0)), CellId(1));
        assert_eq!(t.cell_at(Vec3::ground(800.0, 5.0)), CellId(2));
        assert_eq!(t.cell_at(Vec3::ground(1000.0, 1000.0)), CellId(2));
        assert_eq!(t.cell_at(Vec3::ground(-50.0, 2000.0)), CellId(1));
        assert_eq!(t.rect_of(CellId(2)).unwrap().side(Axis::X), 200.0);
        assert_eq!(t.shard_of(CellId(2)), Some(ShardId::local(1)));
    }

    #[test]
    fn ghosting_and_neighbours() {
        let t = two_cells();
        let mut out = Vec::new();
        t.ghost_cells(Vec3::ground(760.0, 10.0), CellId(1), &mut out);
        assert_eq!(out, vec![CellId(2)]);
        t.ghost_cells(Vec3::ground(700.0, 10.0), CellId(1), &mut out);
        assert!(out.is_empty());
        t.neighbours(CellId(1), 0.0, &mut out).unwrap();
        assert_eq!(out, vec![CellId(2)]);
        assert!(t.neighbours(CellId(9), 0.0, &mut out).is_err());
        let a = t.rect_of(CellId(1)).unwrap();
        let b = t.rect_of(CellId(2)).unwrap();
        assert!(share_edge(&a, &b));
        assert_eq!(
            rect_distance(&b, &Rect::new(900.0, 1100.0, 950.0, 1200.0)),
            100.0
        );
        assert!(
            (rect_distance(&a, &Rect::new(900.0, 1100.0, 950.0, 1200.0)) - 200f64.sqrt() * 10.0)
                .abs()
                < 1e-9
        );
    }
}
