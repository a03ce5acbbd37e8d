//! Changes to the space tree as values, and their application.
//!
//! A [`SpaceChange`] names the tree version it was computed against; applying
//! it checks the version, checks every rule, then mutates and bumps the
//! version by one. A refused change leaves the tree untouched. Every replica
//! that applies the same sequence holds an equal tree (the arena layout is a
//! pure function of the sequence).
//!
//! The four operations (seed `notify_split_space_with_direction`,
//! `notify_balance_space`, `notify_start_merge_space_node`,
//! `notify_finish_merge_space_node`):
//! - [`ChangeOp::Split`]: a leaf gives a strip of `min_cell_side_m` on one of
//!   its four sides to a new cell; the rest keeps the old id and leaf slot.
//! - [`ChangeOp::Rebalance`]: an internal node's split moves; every node whose
//!   rect touches the moved line follows (seed `update_boundary_with_new_split`).
//! - [`ChangeOp::StartMerge`]: a leaf is marked merging and its parent's split
//!   moves so the leaf is `merging_side_m` across the parent's axis.
//! - [`ChangeOp::FinishMerge`]: the merging leaf is removed and its sibling's
//!   subtree takes the parent's place and rect.
//!
//! Stricter than the seed: a split is refused when the side it cuts is below
//! `2 x min_cell_side_m` (the seed only checks that *one* side is long
//! enough), and no change other than finishing a merge may move the rect of
//! another merging leaf (the seed only guards the direct sibling).

use super::error::SpaceError;
use super::tree::{CellSlot, Node, NodeIx, NodeKind, SpaceTree, NONE};
use crate::core::geom::{Axis, Rect};
use crate::core::ids::{CellId, ShardId};

/// Which side of a leaf a split gives to the new cell (seed
/// `cell_split_direction`: `left_x`, `right_x`, `low_z`, `high_z`).
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    rkyv::Archive,
    rkyv::Serialize,
    rkyv::Deserialize,
)]
#[rkyv(derive(Debug, PartialEq, Eq))]
pub enum SplitDirection {
    /// The new cell is the strip at the low-x side.
    MinX,
    /// The new cell is the strip at the high-x side.
    MaxX,
    /// The new cell is the strip at the low-z side.
    MinZ,
    /// The new cell is the strip at the high-z side.
    MaxZ,
}

impl SplitDirection {
    /// All four, in the seed's order (ties go to the first).
    pub const ALL: [SplitDirection; 4] = [Self::MinX, Self::MaxX, Self::MinZ, Self::MaxZ];

    /// The axis the split cuts across.
    pub fn axis(self) -> Axis {
        match self {
            Self::MinX | Self::MaxX => Axis::X,
            Self::MinZ | Self::MaxZ => Axis::Z,
        }
    }

    /// True when the new cell is on the low side.
    pub fn is_min(self) -> bool {
        matches!(self, Self::MinX | Self::MinZ)
    }
}

/// One tree operation (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub enum ChangeOp {
    /// `cell` gives a `min_cell_side_m` strip on `direction`'s side to
    /// `new_cell`, hosted on `new_shard`.
    Split {
        /// The leaf to split.
        cell: CellId,
        /// Where the strip is.
        direction: SplitDirection,
        /// The new cell's id (at least [`SpaceTree::next_cell_id`]).
        new_cell: CellId,
        /// Where the new cell runs.
        new_shard: ShardId,
    },
    /// Internal node `node`'s split moves to `at`.
    Rebalance {
        /// The internal node.
        node: NodeIx,
        /// The new split position.
        at: f64,
    },
    /// `cell` starts merging into its sibling.
    StartMerge {
        /// The leaf.
        cell: CellId,
    },
    /// The merging `cell` is removed; its sibling takes its area.
    FinishMerge {
        /// The merging leaf.
        cell: CellId,
    },
}

/// A change and the tree version it applies to.
#[derive(Clone, Copy, Debug, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct SpaceChange {
    /// The tree version the change was computed against; the tree is at
    /// `version + 1` after applying it.
    pub version: u64,
    /// The operation.
    pub op: ChangeOp,
}

impl SpaceChange {
    /// The change as rkyv bytes (broadcast to every cell).
    ///
    /// # Panics
    /// Never in practice: serialising plain values into memory cannot fail.
    pub fn to_bytes(&self) -> rkyv::util::AlignedVec {
        rkyv::to_bytes::<rkyv::rancor::Error>(self).expect("serialise a change")
    }

    /// A change from [`to_bytes`](Self::to_bytes) output, checked.
    ///
    /// # Errors
    /// [`SpaceError::Decode`] for malformed bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, SpaceError> {
        rkyv::from_bytes::<SpaceChange, rkyv::rancor::Error>(bytes)
            .map_err(|e| SpaceError::Decode(e.to_string()))
    }
}

/// Which edge of a rect moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Edge {
    Min,
    Max,
}

fn with_edge(mut r: Rect, axis: Axis, edge: Edge, v: f64) -> Rect {
    match (axis, edge) {
        (Axis::X, Edge::Min) => r.min_x = v,
        (Axis::X, Edge::Max) => r.max_x = v,
        (Axis::Z, Edge::Min) => r.min_z = v,
        (Axis::Z, Edge::Max) => r.max_z = v,
    }
    r
}

impl SpaceTree {
    /// Applies `change`, bumping the version by one.
    ///
    /// # Errors
    /// A [`SpaceError`] naming the broken rule; the tree is then unchanged.
    pub fn apply(&mut self, change: &SpaceChange) -> Result<(), SpaceError> {
        if change.version != self.version {
            return Err(SpaceError::VersionMismatch {
                tree: self.version,
                change: change.version,
            });
        }
        match change.op {
            ChangeOp::Split {
                cell,
                direction,
                new_cell,
                new_shard,
            } => self.split(cell, direction, new_cell, new_shard)?,
            ChangeOp::Rebalance { node, at } => self.rebalance(node, at)?,
            ChangeOp::StartMerge { cell } => self.start_merge(cell)?,
            ChangeOp::FinishMerge { cell } => self.finish_merge(cell)?,
        }
        self.version += 1;
        #[cfg(any(test, feature = "verify"))]
        self.verify();
        Ok(())
    }

    /// Every node whose rect changes when the `edge` of node `ix` across
    /// `axis` moves to `v`, with its new rect, in pre-order (seed
    /// `update_boundary_with_new_split`: a cut along the same axis passes the
    /// move to the child on that edge only, a cut across the other axis to
    /// both).
    pub(super) fn edge_move(
        &self,
        ix: u32,
        axis: Axis,
        edge: Edge,
        v: f64,
        out: &mut Vec<(u32, Rect)>,
    ) {
        let node = self.n(ix);
        out.push((ix, with_edge(node.rect, axis, edge, v)));
        if let NodeKind::Split {
            axis: a, low, high, ..
        } = node.kind
        {
            if a == axis {
                let child = if edge == Edge::Min { low } else { high };
                self.edge_move(child, axis, edge, v, out);
            } else {
                self.edge_move(low, axis, edge, v, out);
                self.edge_move(high, axis, edge, v, out);
            }
        }
    }

    /// The rect moves of putting split node `ix`'s cut at `at`.
    pub(super) fn split_move(&self, ix: u32, at: f64) -> Vec<(u32, Rect)> {
        let NodeKind::Split {
            axis, low, high, ..
        } = self.n(ix).kind
        else {
            unreachable!("split_move on a leaf")
        };
        let mut moves = Vec::new();
        self.edge_move(low, axis, Edge::Max, at, &mut moves);
        self.edge_move(high, axis, Edge::Min, at, &mut moves);
        moves
    }

    /// Checks the leaves among `moves`: size rule (with `merging` treated as
    /// merging) and no other merging leaf moved.
    pub(super) fn check_moves(
        &self,
        moves: &[(u32, Rect)],
        merging: Option<u32>,
    ) -> Result<(), SpaceError> {
        for &(ix, rect) in moves {
            let NodeKind::Leaf {
                cell, merging: m, ..
            } = self.n(ix).kind
            else {
                continue;
            };
            if m && Some(ix) != merging {
                return Err(SpaceError::TouchesMergingCell(cell));
            }
            let axis = if Some(ix) == merging {
                self.parent_axis(ix)
            } else {
                None
            };
            if !self.leaf_fits(&rect, axis) {
                return Err(SpaceError::SizeRule(cell));
            }
        }
        Ok(())
    }

    fn parent_axis(&self, ix: u32) -> Option<Axis> {
        match self.nodes.get(self.n(ix).parent as usize)?.kind {
            NodeKind::Split { axis, .. } => Some(axis),
            _ => None,
        }
    }

    fn commit_moves(&mut self, moves: &[(u32, Rect)]) {
        for &(ix, rect) in moves {
            debug_assert!(rect.is_valid());
            self.nodes[ix as usize].rect = rect;
        }
    }

    fn leaf(&self, cell: CellId) -> Result<(u32, bool), SpaceError> {
        let ix = self
            .node_of_cell(cell)
            .ok_or(SpaceError::UnknownCell(cell))?
            .0;
        match self.n(ix).kind {
            NodeKind::Leaf { merging, .. } => Ok((ix, merging)),
            _ => unreachable!("cell index points at a non-leaf"),
        }
    }

    fn alloc(&mut self, node: Node) -> u32 {
        match self.free.pop() {
            Some(ix) => {
                self.nodes[ix as usize] = node;
                ix
            }
            None => {
                self.nodes.push(node);
                u32::try_from(self.nodes.len() - 1).expect("arena fits u32")
            }
        }
    }

    fn release(&mut self, ix: u32) {
        self.nodes[ix as usize].kind = NodeKind::Free;
        self.nodes[ix as usize].parent = NONE;
        self.free.push(ix);
    }

    fn split(
        &mut self,
        cell: CellId,
        dir: SplitDirection,
        new_cell: CellId,
        new_shard: ShardId,
    ) -> Result<(), SpaceError> {
        let (ix, merging) = self.leaf(cell)?;
        if merging {
            return Err(SpaceError::CellMerging(cell));
        }
        if new_cell.0 < self.next_cell || new_cell.0 == u32::MAX {
            return Err(SpaceError::CellIdUsed(new_cell));
        }
        let rect = self.n(ix).rect;
        let axis = dir.axis();
        let strip = self.params.min_cell_side_m;
        let (lo, hi) = rect.span(axis);
        let at = if dir.is_min() { lo + strip } else { hi - strip };
        let (low_rect, high_rect) = rect.split(axis, at.clamp(lo, hi));
        let fits = lo < at
            && at < hi
            && self.leaf_fits(&low_rect, None)
            && self.leaf_fits(&high_rect, None);
        if !fits {
            return Err(SpaceError::SizeRule(cell));
        }
        let old = *self.n(ix);
        let NodeKind::Leaf { shard, .. } = old.kind else {
            unreachable!()
        };
        let born = self.version + 1;
        // The split node takes the leaf's place; the old leaf keeps its slot.
        let parent = self.alloc(Node {
            kind: NodeKind::Free,
            ..old
        });
        let fresh = Node {
            rect,
            parent,
            born,
            kind: NodeKind::Leaf {
                cell: new_cell,
                shard: new_shard,
                merging: false,
            },
        };
        let new_ix = self.alloc(fresh);
        let (low, high) = if dir.is_min() {
            (new_ix, ix)
        } else {
            (ix, new_ix)
        };
        self.nodes[low as usize].rect = low_rect;
        self.nodes[high as usize].rect = high_rect;
        self.nodes[ix as usize].parent = parent;
        self.nodes[parent as usize].born = born;
        self.nodes[parent as usize].kind = NodeKind::Split {
            axis,
            at,
            low,
            high,
        };
        self.replace_child(old.parent, ix, parent);
        let pos = self.cells.partition_point(|s| s.cell < new_cell);
        self.cells.insert(
            pos,
            CellSlot {
                cell: new_cell,
                node: new_ix,
            },
        );
        self.next_cell = new_cell.0 + 1;
        debug_assert!(matches!(self.n(ix).kind, NodeKind::Leaf { shard: s, .. } if s == shard));
        Ok(())
    }

    /// Points `parent`'s link to `old` at `new` (or the root when `parent` is
    /// none) and sets `new`'s parent.
    fn replace_child(&mut self, parent: u32, old: u32, new: u32) {
        self.nodes[new as usize].parent = parent;
        if parent == NONE {
            assert_eq!(self.root, old, "only the root has no parent");
            self.root = new;
            return;
        }
        match &mut self.nodes[parent as usize].kind {
            NodeKind::Split { low, high, .. } => {
                if *low == old {
                    *low = new;
                } else {
                    assert_eq!(*high, old, "child link");
                    *high = new;
                }
            }
            _ => unreachable!("a parent is always a split"),
        }
    }

    fn rebalance(&mut self, node: NodeIx, at: f64) -> Result<(), SpaceError> {
        let ix = node.0;
        let current = match self.node(node).map(|n| n.kind) {
            Some(NodeKind::Split { at, .. }) => at,
            _ => return Err(SpaceError::NotSplitNode(node)),
        };
        if !at.is_finite() {
            return Err(SpaceError::NonFinite);
        }
        if at == current {
            return Err(SpaceError::NoMove);
        }
        let moves = self.split_move(ix, at);
        self.check_moves(&moves, None)?;
        self.commit_moves(&moves);
        if let NodeKind::Split { at: a, .. } = &mut self.nodes[ix as usize].kind {
            *a = at;
        }
        Ok(())
    }

    fn start_merge(&mut self, cell: CellId) -> Result<(), SpaceError> {
        let (ix, merging) = self.leaf(cell)?;
        if cell == self.master {
            return Err(SpaceError::MasterCell(cell));
        }
        if merging {
            return Err(SpaceError::CellMerging(cell));
        }
        let sib = self
            .sibling(NodeIx(ix))
            .ok_or(SpaceError::NoSibling(cell))?
            .0;
        if matches!(self.n(sib).kind, NodeKind::Leaf { merging: true, .. }) {
            return Err(SpaceError::SiblingMerging(cell));
        }
        let parent = self.n(ix).parent;
        let NodeKind::Split { axis, low, .. } = self.n(parent).kind else {
            unreachable!("a parent is always a split")
        };
        let (lo, hi) = self.n(ix).rect.span(axis);
        let keep = self.params.merging_side_m;
        let at = if low == ix { lo + keep } else { hi - keep };
        let moves = self.split_move(parent, at);
        self.check_moves(&moves, Some(ix))?;
        self.commit_moves(&moves);
        if let NodeKind::Split { at: a, .. } = &mut self.nodes[parent as usize].kind {
            *a = at;
        }
        if let NodeKind::Leaf { merging, .. } = &mut self.nodes[ix as usize].kind {
            *merging = true;
        }
        Ok(())
    }

    fn finish_merge(&mut self, cell: CellId) -> Result<(), SpaceError> {
        let (ix, merging) = self.leaf(cell)?;
        if !merging {
            return Err(SpaceError::NotMerging(cell));
        }
        let sib = self
            .sibling(NodeIx(ix))
            .expect("a merging leaf has a sibling")
            .0;
        let parent = self.n(ix).parent;
        let NodeKind::Split { axis, low, .. } = self.n(parent).kind else {
            unreachable!("a parent is always a split")
        };
        let prect = self.n(parent).rect;
        let (edge, v) = if low == ix {
            (Edge::Min, prect.span(axis).0)
        } else {
            (Edge::Max, prect.span(axis).1)
        };
        let mut moves = Vec::new();
        self.edge_move(sib, axis, edge, v, &mut moves);
        // Growing never breaks the size rule; merging leaves may grow here.
        self.commit_moves(&moves);
        assert_eq!(
            self.n(sib).rect,
            prect,
            "the sibling takes the parent's rect"
        );
        let grand = self.n(parent).parent;
        self.replace_child(grand, parent, sib);
        self.release(ix);
        self.release(parent);
        let pos = self
            .cells
            .binary_search_by_key(&cell, |s| s.cell)
            .expect("indexed");
        self.cells.remove(pos);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::space::SpaceParams;

    const GR: f64 = 50.0;

    fn tree() -> SpaceTree {
        let world = Rect::new(0.0, 0.0, 1000.0, 1000.0);
        SpaceTree::new(
            world,
            SpaceParams::for_ghost_radius(GR),
            CellId(1),
            ShardId::local(0),
        )
        .unwrap()
    }

    fn go(t: &mut SpaceTree, op: ChangeOp) -> Result<(), SpaceError> {
        let before = t.clone();
        let r = t.apply(&SpaceChange {
            version: t.version(),
            op,
        });
        if r.is_err() {
            assert_eq!(*t, before, "a refused change leaves the tree alone");
        }
        r
    }

    fn split(cell: u32, direction: SplitDirection, new_cell: u32) -> ChangeOp {
        ChangeOp::Split {
            cell: CellId(cell),
            direction,
            new_cell: CellId(new_cell),
            new_shard: ShardId::local(1),
        }
    }

    #[test]
    fn split_cuts_a_strip_on_the_named_side() {
        let mut t = tree();
        go(&mut t, split(1, SplitDirection::MinZ, 2)).unwrap();
        assert_eq!(
            t.rect_of(CellId(2)),
            Some(Rect::new(0.0, 0.0, 1000.0, 200.0))
        );
        assert_eq!(
            t.rect_of(CellId(1)),
            Some(Rect::new(0.0, 200.0, 1000.0, 1000.0))
        );
        assert_eq!(t.version(), 1);
        assert_eq!(
            go(&mut t, split(1, SplitDirection::MaxX, 2)),
            Err(SpaceError::CellIdUsed(CellId(2)))
        );
        assert_eq!(
            go(&mut t, split(2, SplitDirection::MaxZ, 3)),
            Err(SpaceError::SizeRule(CellId(2)))
        );
        assert_eq!(
            go(&mut t, split(9, SplitDirection::MaxZ, 3)),
            Err(SpaceError::UnknownCell(CellId(9)))
        );
        let stale = SpaceChange {
            version: 0,
            op: split(1, SplitDirection::MaxX, 3),
        };
        assert!(matches!(
            t.apply(&stale),
            Err(SpaceError::VersionMismatch { tree: 1, change: 0 })
        ));
    }

    #[test]
    fn rebalance_moves_every_touching_rect_and_keeps_sizes() {
        let mut t = tree();
        go(&mut t, split(1, SplitDirection::MaxX, 2)).unwrap(); // 1: x<800, 2: x>=800
        go(&mut t, split(2, SplitDirection::MinZ, 3)).unwrap(); // 3: low z strip of 2
        let root = t.root();
        go(
            &mut t,
            ChangeOp::Rebalance {
                node: root,
                at: 700.0,
            },
        )
        .unwrap();
        assert_eq!(t.rect_of(CellId(2)).unwrap().min_x, 700.0);
        assert_eq!(t.rect_of(CellId(3)).unwrap().min_x, 700.0);
        assert_eq!(t.rect_of(CellId(1)).unwrap().max_x, 700.0);
        assert_eq!(
            go(
                &mut t,
                ChangeOp::Rebalance {
                    node: root,
                    at: 850.0
                }
            ),
            Err(SpaceError::SizeRule(CellId(3)))
        );
        assert_eq!(
            go(
                &mut t,
                ChangeOp::Rebalance {
                    node: root,
                    at: f64::NAN
                }
            ),
            Err(SpaceError::NonFinite)
        );
        assert_eq!(
            go(
                &mut t,
                ChangeOp::Rebalance {
                    node: root,
                    at: 700.0
                }
            ),
            Err(SpaceError::NoMove)
        );
        let leaf = t.node_of_cell(CellId(1)).unwrap();
        assert_eq!(
            go(
                &mut t,
                ChangeOp::Rebalance {
                    node: leaf,
                    at: 1.0
                }
            ),
            Err(SpaceError::NotSplitNode(leaf))
        );
    }

    #[test]
    fn merge_shrinks_then_hands_the_area_to_the_sibling() {
        let mut t = tree();
        go(&mut t, split(1, SplitDirection::MaxX, 2)).unwrap();
        go(&mut t, split(2, SplitDirection::MaxZ, 3)).unwrap();
        assert_eq!(
            go(&mut t, ChangeOp::StartMerge { cell: CellId(1) }),
            Err(SpaceError::MasterCell(CellId(1)))
        );
        assert_eq!(
            go(&mut t, ChangeOp::FinishMerge { cell: CellId(3) }),
            Err(SpaceError::NotMerging(CellId(3)))
        );
        go(&mut t, ChangeOp::StartMerge { cell: CellId(3) }).unwrap();
        assert_eq!(
            t.rect_of(CellId(3)),
            Some(Rect::new(800.0, 975.0, 1000.0, 1000.0))
        );
        assert_eq!(
            go(&mut t, ChangeOp::StartMerge { cell: CellId(2) }),
            Err(SpaceError::SiblingMerging(CellId(2)))
        );
        assert_eq!(
            go(&mut t, split(3, SplitDirection::MinX, 4)),
            Err(SpaceError::CellMerging(CellId(3)))
        );
        let root = t.root();
        assert_eq!(
            go(
                &mut t,
                ChangeOp::Rebalance {
                    node: root,
                    at: 700.0
                }
            ),
            Err(SpaceError::TouchesMergingCell(CellId(3)))
        );
        go(&mut t, ChangeOp::FinishMerge { cell: CellId(3) }).unwrap();
        assert_eq!(
            t.rect_of(CellId(2)),
            Some(Rect::new(800.0, 0.0, 1000.0, 1000.0))
        );
        assert_eq!(t.cell_count(), 2);
        assert_eq!(t.rect_of(CellId(3)), None);
        // The freed slots are reused by the next split, deterministically.
        go(&mut t, split(2, SplitDirection::MinZ, 4)).unwrap();
        assert_eq!(t.nodes.len(), 5);
    }

    #[test]
    fn changes_round_trip_through_rkyv() {
        let c = SpaceChange {
            version: 7,
            op: split(1, SplitDirection::MaxZ, 9),
        };
        assert_eq!(SpaceChange::from_bytes(&c.to_bytes()).unwrap(), c);
        assert!(SpaceChange::from_bytes(&[1, 2, 3]).is_err());
    }
}
