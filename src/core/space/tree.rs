//! The space tree's storage: a KD-tree over the world rectangle kept in a `Vec`
//! arena, its accessors, its whole-structure check and its rkyv snapshot.
//!
//! Leaves are cells (a [`CellId`] and the [`ShardId`] hosting it); internal
//! nodes cut their rectangle in two across an [`Axis`] at a position. The low
//! child (`x < at` or `z < at`) comes first. Changes live in `change.rs`,
//! queries in `query.rs`; this file owns the layout and the invariants and must
//! not know about loads or policy.
//!
//! # Invariants (checked by [`SpaceTree::validate`])
//! - The root's rect is the world; each internal node's children are exactly
//!   its rect split at `at` (bit-equal bounds), so the leaves tile the world
//!   with no gap and no overlap.
//! - Parent and child links agree; every arena slot is reachable or free.
//! - Every leaf side is `>= min_cell_side_m`, except a merging leaf's side
//!   across its parent's axis, which is `>= merging_side_m`.
//! - The cell index lists every leaf once, sorted by id; ids are below
//!   `next_cell`, so an id is never reused; the master cell is a leaf.

use super::error::SpaceError;
use super::params::SpaceParams;
use crate::core::geom::{Axis, Rect};
use crate::core::ids::{CellId, ShardId};

/// Slack when comparing a computed side with a minimum, in metres. Split
/// positions are computed as `min + side`, which can round a hair below
/// `side`; real violations are metres, not nanometres.
pub const SIDE_TOLERANCE_M: f64 = 1e-6;

/// "No node" in the arena's parent links.
pub(crate) const NONE: u32 = u32::MAX;

/// Index of a node in the tree's arena. Stable while the node lives; a freed
/// slot may be reused by a later split, so hold it only together with the
/// tree version it was read at (changes carry that version).
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
pub struct NodeIx(pub u32);

/// What a node is.
#[derive(Clone, Copy, Debug, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub enum NodeKind {
    /// A cell.
    Leaf {
        /// The cell's id.
        cell: CellId,
        /// The shard hosting it.
        shard: ShardId,
        /// Shrunk and shedding its reals before it is removed.
        merging: bool,
    },
    /// A cut of the node's rect across `axis` at `at`.
    Split {
        /// The axis cut across (`X`: the line `x = at`).
        axis: Axis,
        /// The cut's position; the low child is `[min, at)`.
        at: f64,
        /// Arena index of the low child.
        low: u32,
        /// Arena index of the high child.
        high: u32,
    },
    /// An unused arena slot.
    Free,
}

/// One arena slot.
#[derive(Clone, Copy, Debug, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct Node {
    pub(super) rect: Rect,
    pub(super) parent: u32,
    /// Tree version at which this node took its current shape (leaf created
    /// or became a split). Lets callers tell a reused slot from the old node.
    pub(super) born: u64,
    pub(super) kind: NodeKind,
}

impl Node {
    /// The node's rectangle.
    pub fn rect(&self) -> Rect {
        self.rect
    }

    /// The parent, `None` at the root.
    pub fn parent(&self) -> Option<NodeIx> {
        (self.parent != NONE).then_some(NodeIx(self.parent))
    }

    /// Version at which the node took its current shape.
    pub fn born(&self) -> u64 {
        self.born
    }

    /// Leaf, split or free.
    pub fn kind(&self) -> NodeKind {
        self.kind
    }
}

/// A cell id and the arena slot of its leaf (the cell index, sorted by id).
#[derive(Clone, Copy, Debug, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub(super) struct CellSlot {
    pub(super) cell: CellId,
    pub(super) node: u32,
}

/// One space's KD-tree of cells: replicated, versioned, changed only by
/// [`SpaceChange`](super::SpaceChange)s.
///
/// The *master cell* is the cell the tree was created with. It is never
/// merged (its rect may shrink by splits and move by rebalancing), so global
/// space logic has a fixed home (seed `m_master_cell_id`).
#[derive(Clone, Debug, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct SpaceTree {
    pub(super) params: SpaceParams,
    pub(super) world: Rect,
    pub(super) version: u64,
    pub(super) master: CellId,
    pub(super) next_cell: u32,
    pub(super) root: u32,
    pub(super) nodes: Vec<Node>,
    pub(super) free: Vec<u32>,
    pub(super) cells: Vec<CellSlot>,
}

impl SpaceTree {
    /// A tree of one leaf, the master cell `master` on `shard`, covering `world`.
    /// Version 0.
    ///
    /// # Errors
    /// [`SpaceError::Params`] for bad params, [`SpaceError::Corrupt`] for a
    /// non-finite world or one with a side below `min_cell_side_m`.
    pub fn new(
        world: Rect,
        params: SpaceParams,
        master: CellId,
        shard: ShardId,
    ) -> Result<Self, SpaceError> {
        params.validate()?;
        if !world.is_valid()
            || world.width() < params.min_cell_side_m
            || world.depth() < params.min_cell_side_m
        {
            return Err(SpaceError::Corrupt("world smaller than one cell"));
        }
        let leaf = Node {
            rect: world,
            parent: NONE,
            born: 0,
            kind: NodeKind::Leaf {
                cell: master,
                shard,
                merging: false,
            },
        };
        let tree = SpaceTree {
            params,
            world,
            version: 0,
            master,
            next_cell: master
                .0
                .checked_add(1)
                .ok_or(SpaceError::CellIdUsed(master))?,
            root: 0,
            nodes: vec![leaf],
            free: Vec::new(),
            cells: vec![CellSlot {
                cell: master,
                node: 0,
            }],
        };
        tree.verify();
        Ok(tree)
    }

    /// The geometry rules.
    pub fn params(&self) -> &SpaceParams {
        &self.params
    }

    /// The world rectangle (the root's rect).
    pub fn world(&self) -> Rect {
        self.world
    }

    /// Number of changes applied since creation.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The master cell (never merged).
    pub fn master(&self) -> CellId {
        self.master
    }

    /// The smallest cell id a split may use next (ids are never reused).
    pub fn next_cell_id(&self) -> CellId {
        CellId(self.next_cell)
    }

    /// Number of cells (leaves).
    pub fn cell_count(&self) -> usize {
        self.cells.len()
    }

    /// The root node.
    pub fn root(&self) -> NodeIx {
        NodeIx(self.root)
    }

    /// A node by index; `None` for an index outside the arena or a free slot.
    pub fn node(&self, ix: NodeIx) -> Option<&Node> {
        self.nodes
            .get(ix.0 as usize)
            .filter(|n| !matches!(n.kind, NodeKind::Free))
    }

    /// The leaf node of `cell`.
    pub fn node_of_cell(&self, cell: CellId) -> Option<NodeIx> {
        self.cells
            .binary_search_by_key(&cell, |s| s.cell)
            .ok()
            .map(|i| NodeIx(self.cells[i].node))
    }

    /// The other child of `ix`'s parent; `None` at the root.
    pub fn sibling(&self, ix: NodeIx) -> Option<NodeIx> {
        let parent = self.node(ix)?.parent()?;
        match self.nodes[parent.0 as usize].kind {
            NodeKind::Split { low, high, .. } => Some(NodeIx(if low == ix.0 { high } else { low })),
            _ => unreachable!("a parent is always a split"),
        }
    }

    pub(super) fn n(&self, ix: u32) -> &Node {
        &self.nodes[ix as usize]
    }

    /// True when `rect` is a legal leaf; `merging_axis` is the parent's axis
    /// for a merging leaf (its side across that axis may be `merging_side_m`).
    pub(super) fn leaf_fits(&self, rect: &Rect, merging_axis: Option<Axis>) -> bool {
        [Axis::X, Axis::Z].into_iter().all(|axis| {
            let need = if merging_axis == Some(axis) {
                self.params.merging_side_m
            } else {
                self.params.min_cell_side_m
            };
            rect.side(axis) + SIDE_TOLERANCE_M >= need
        })
    }

    /// The parent's axis when `ix` is a merging leaf.
    pub(super) fn merging_axis(&self, ix: u32) -> Option<Axis> {
        let node = self.n(ix);
        match node.kind {
            NodeKind::Leaf { merging: true, .. } => match self.n(node.parent).kind {
                NodeKind::Split { axis, .. } => Some(axis),
                _ => None,
            },
            _ => None,
        }
    }

    /// Panics when any invariant is broken (a bug, not bad input).
    ///
    /// # Panics
    /// On the first broken invariant, naming it.
    pub fn verify(&self) {
        if let Err(e) = self.validate() {
            panic!("space tree invariant broken: {e} in {self:?}");
        }
    }

    /// Checks every invariant of the module doc in `O(nodes)`.
    ///
    /// # Errors
    /// [`SpaceError::Corrupt`] naming the first broken invariant (used when a
    /// snapshot comes from outside).
    pub fn validate(&self) -> Result<(), SpaceError> {
        let corrupt = |why| Err(SpaceError::Corrupt(why));
        self.params.validate()?;
        if !self.world.is_valid() {
            return corrupt("world not finite");
        }
        let root = self.nodes.get(self.root as usize);
        if root.is_none_or(|r| r.rect != self.world || r.parent != NONE) {
            return corrupt("root rect is not the world");
        }
        let mut seen = vec![false; self.nodes.len()];
        let mut leaves = 0usize;
        let mut stack = vec![self.root];
        while let Some(ix) = stack.pop() {
            if std::mem::replace(&mut seen[ix as usize], true) {
                return corrupt("node reached twice");
            }
            let node = self.n(ix);
            match node.kind {
                NodeKind::Free => return corrupt("free slot in the tree"),
                NodeKind::Leaf { cell, merging, .. } => {
                    leaves += 1;
                    self.validate_leaf(ix, cell, merging)?;
                }
                NodeKind::Split {
                    axis,
                    at,
                    low,
                    high,
                } => {
                    self.validate_split(ix, axis, at, low, high)?;
                    stack.extend([low, high]);
                }
            }
        }
        self.validate_tables(&seen, leaves)
    }

    fn validate_leaf(&self, ix: u32, cell: CellId, merging: bool) -> Result<(), SpaceError> {
        let node = self.n(ix);
        if merging && (node.parent == NONE || cell == self.master) {
            return Err(SpaceError::Corrupt("root or master leaf merging"));
        }
        if !self.leaf_fits(&node.rect, self.merging_axis(ix)) {
            return Err(SpaceError::Corrupt("leaf breaks the size rule"));
        }
        if merging {
            let sib = self.sibling(NodeIx(ix)).expect("merging leaf has a parent");
            if matches!(self.n(sib.0).kind, NodeKind::Leaf { merging: true, .. }) {
                return Err(SpaceError::Corrupt("two merging siblings"));
            }
        }
        if self.node_of_cell(cell) != Some(NodeIx(ix)) || cell.0 >= self.next_cell {
            return Err(SpaceError::Corrupt("cell index disagrees with a leaf"));
        }
        Ok(())
    }

    fn validate_split(
        &self,
        ix: u32,
        axis: Axis,
        at: f64,
        low: u32,
        high: u32,
    ) -> Result<(), SpaceError> {
        let len = self.nodes.len() as u32;
        if low >= len || high >= len || low == high {
            return Err(SpaceError::Corrupt("child index out of the arena"));
        }
        let rect = self.n(ix).rect;
        let (lo, hi) = rect.span(axis);
        if !(at.is_finite() && lo < at && at < hi) {
            return Err(SpaceError::Corrupt("split outside its rect"));
        }
        let (want_low, want_high) = rect.split(axis, at);
        let (l, h) = (self.n(low), self.n(high));
        if l.parent != ix || h.parent != ix {
            return Err(SpaceError::Corrupt("child does not point at its parent"));
        }
        if l.rect != want_low || h.rect != want_high {
            return Err(SpaceError::Corrupt("children do not tile their parent"));
        }
        Ok(())
    }

    fn validate_tables(&self, seen: &[bool], leaves: usize) -> Result<(), SpaceError> {
        let corrupt = |why| Err(SpaceError::Corrupt(why));
        if leaves != self.cells.len() {
            return corrupt("cell index size differs from the leaf count");
        }
        if self.cells.windows(2).any(|w| w[0].cell >= w[1].cell) {
            return corrupt("cell index not sorted");
        }
        if self.node_of_cell(self.master).is_none() {
            return corrupt("master cell missing");
        }
        let mut free_seen = vec![false; self.nodes.len()];
        for &f in &self.free {
            let ok = self
                .nodes
                .get(f as usize)
                .is_some_and(|n| n.kind == NodeKind::Free);
            if !ok || std::mem::replace(&mut free_seen[f as usize], true) {
                return corrupt("free list names a live or repeated slot");
            }
        }
        if seen.iter().zip(&free_seen).any(|(s, f)| s == f) {
            return corrupt("an arena slot is neither reachable nor free");
        }
        Ok(())
    }

    /// The whole tree as rkyv bytes (sent to a new cell, seed `encode()`).
    ///
    /// # Panics
    /// Never in practice: serialising plain values into memory cannot fail.
    pub fn to_snapshot_bytes(&self) -> rkyv::util::AlignedVec {
        rkyv::to_bytes::<rkyv::rancor::Error>(self).expect("serialise a space tree")
    }

    /// A tree from [`to_snapshot_bytes`](Self::to_snapshot_bytes) output,
    /// checked byte by byte and then invariant by invariant.
    ///
    /// # Errors
    /// [`SpaceError::Decode`] for malformed bytes, [`SpaceError::Corrupt`]
    /// or [`SpaceError::Params`] for a well-formed but broken tree.
    pub fn from_snapshot_bytes(bytes: &[u8]) -> Result<Self, SpaceError> {
        let tree = rkyv::from_bytes::<SpaceTree, rkyv::rancor::Error>(bytes)
            .map_err(|e| SpaceError::Decode(e.to_string()))?;
        tree.validate()?;
        Ok(tree)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn world() -> Rect {
        Rect::new(0.0, 0.0, 1000.0, 800.0)
    }

    #[test]
    fn new_tree_is_one_master_leaf() {
        let t = SpaceTree::new(
            world(),
            SpaceParams::default(),
            CellId(1),
            ShardId::local(0),
        )
        .unwrap();
        assert_eq!(t.cell_count(), 1);
        assert_eq!(t.master(), CellId(1));
        assert_eq!(t.next_cell_id(), CellId(2));
        assert_eq!(t.version(), 0);
        assert_eq!(t.node_of_cell(CellId(1)), Some(t.root()));
        assert_eq!(t.sibling(t.root()), None);
        t.validate().unwrap();
    }

    #[test]
    fn refuses_tiny_or_broken_worlds() {
        let p = SpaceParams::default();
        let tiny = Rect::new(0.0, 0.0, 100.0, 1000.0);
        assert!(SpaceTree::new(tiny, p, CellId(0), ShardId::local(0)).is_err());
        let nan = Rect {
            min_x: f64::NAN,
            ..world()
        };
        assert!(SpaceTree::new(nan, p, CellId(0), ShardId::local(0)).is_err());
    }

    #[test]
    fn validate_catches_corruption() {
        let mut t = SpaceTree::new(
            world(),
            SpaceParams::default(),
            CellId(1),
            ShardId::local(0),
        )
        .unwrap();
        t.nodes[0].rect.max_x = 999.0;
        assert!(matches!(t.validate(), Err(SpaceError::Corrupt(_))));
    }

    #[test]
    fn snapshot_round_trips_and_rejects_garbage() {
        let t = SpaceTree::new(
            world(),
            SpaceParams::default(),
            CellId(3),
            ShardId::local(1),
        )
        .unwrap();
        let bytes = t.to_snapshot_bytes();
        assert_eq!(SpaceTree::from_snapshot_bytes(&bytes).unwrap(), t);
        assert!(SpaceTree::from_snapshot_bytes(&bytes[..bytes.len() / 2]).is_err());
    }
}
