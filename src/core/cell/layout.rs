//! What a cell needs to know about the space's cells: the [`Layout`] trait.
//!
//! The cell never walks the space tree itself; it asks a `Layout`. The
//! replicated [`SpaceTree`] implements it (every cell applies the same tree
//! changes, so all cells answer alike), and [`GridLayout`] is a fixed grid for
//! tests. This keeps the cell state machine independent of how the tree is
//! stored and versioned. Owns no cell state.

use crate::core::geom::{Rect, Vec3};
use crate::core::ids::CellId;
use crate::core::space::SpaceTree;

/// A read-only view of the cells of one space, as of one tree version.
pub trait Layout {
    /// The tree version this view reflects (grows with every change).
    fn version(&self) -> u64;
    /// The leaf whose half-open rect contains `p`, if `p` is in the world.
    fn cell_at(&self, p: Vec3) -> Option<CellId>;
    /// The rect of cell `c`, if `c` is a current leaf.
    fn rect(&self, c: CellId) -> Option<Rect>;
    /// True when `c` is being merged away (it drains its reals and accepts
    /// no new ones).
    fn is_merging(&self, c: CellId) -> bool;
    /// Appends every leaf whose closed rect meets the closed rect `r`.
    fn cells_meeting(&self, r: &Rect, out: &mut Vec<CellId>);
    /// Appends every leaf whose closed rect touches `c`'s (not `c` itself).
    /// The default asks [`Layout::cells_meeting`] for `c`'s rect and drops
    /// `c`, keeping the order.
    fn neighbours(&self, c: CellId, out: &mut Vec<CellId>) {
        let Some(r) = self.rect(c) else { return };
        let start = out.len();
        self.cells_meeting(&r, out);
        let mut kept = start;
        for i in start..out.len() {
            if out[i] != c {
                out[kept] = out[i];
                kept += 1;
            }
        }
        out.truncate(kept);
    }
}

impl Layout for SpaceTree {
    fn version(&self) -> u64 {
        SpaceTree::version(self)
    }

    /// Points outside the world are clamped to the nearest leaf (the tree's
    /// rule), so this always answers.
    fn cell_at(&self, p: Vec3) -> Option<CellId> {
        Some(SpaceTree::cell_at(self, p))
    }

    fn rect(&self, c: CellId) -> Option<Rect> {
        self.rect_of(c)
    }

    fn is_merging(&self, c: CellId) -> bool {
        self.cell(c).is_some_and(|l| l.merging)
    }

    fn cells_meeting(&self, r: &Rect, out: &mut Vec<CellId>) {
        self.for_each_cell_meeting(r, &mut |l| out.push(l.cell));
    }

    fn neighbours(&self, c: CellId, out: &mut Vec<CellId>) {
        let Some(rect) = self.rect_of(c) else { return };
        self.for_each_cell_meeting(&rect, &mut |l| {
            if l.cell != c {
                out.push(l.cell);
            }
        });
    }
}

/// A space of one cell (an instance of a mono space): every point is in
/// it (points outside its rect are clamped to it, as the tree does), and
/// it has no neighbours, so its reals never migrate or get ghosts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SoloLayout {
    /// The one cell.
    pub cell: CellId,
    /// Its rect (the world's bounds).
    pub rect: Rect,
}

impl Layout for SoloLayout {
    fn version(&self) -> u64 {
        1
    }

    fn cell_at(&self, p: Vec3) -> Option<CellId> {
        p.is_finite().then_some(self.cell)
    }

    fn rect(&self, c: CellId) -> Option<Rect> {
        (c == self.cell).then_some(self.rect)
    }

    fn is_merging(&self, _c: CellId) -> bool {
        false
    }

    fn cells_meeting(&self, r: &Rect, out: &mut Vec<CellId>) {
        if self.rect.intersects(r) {
            out.push(self.cell);
        }
    }
}

/// A fixed grid of `nx` by `nz` square cells of side `side_m`, with its
/// minimum corner at the origin. Cell ids are `z * nx + x`.
#[derive(Clone, Debug)]
pub struct GridLayout {
    nx: u32,
    nz: u32,
    side_m: f64,
    version: u64,
    merging: Vec<bool>,
}

impl GridLayout {
    /// A grid of `nx * nz` cells of side `side_m`.
    ///
    /// # Panics
    /// If a dimension is 0 or the side is not finite and positive.
    pub fn new(nx: u32, nz: u32, side_m: f64) -> Self {
        assert!(nx > 0 && nz > 0, "empty grid");
        assert!(side_m.is_finite() && side_m > 0.0, "bad side");
        GridLayout {
            nx,
            nz,
            side_m,
            version: 1,
            merging: vec![false; (nx * nz) as usize],
        }
    }

    /// Every cell id of the grid, in order.
    pub fn cells(&self) -> impl Iterator<Item = CellId> {
        (0..self.nx * self.nz).map(CellId)
    }

    /// Marks `c` as merging (or not); bumps the version.
    ///
    /// # Panics
    /// If `c` is not a cell of this grid.
    pub fn set_merging(&mut self, c: CellId, merging: bool) {
        self.merging[c.0 as usize] = merging;
        self.version += 1;
    }

    /// The whole world's rect.
    pub fn world(&self) -> Rect {
        Rect::new(
            0.0,
            0.0,
            f64::from(self.nx) * self.side_m,
            f64::from(self.nz) * self.side_m,
        )
    }

    fn index_range(&self, lo: f64, hi: f64, n: u32) -> Option<(u32, u32)> {
        let max = f64::from(n) * self.side_m;
        if hi < 0.0 || lo > max {
            return None;
        }
        // A closed rect touching a cut meets both cells that share it.
        let first = ((lo / self.side_m).ceil() - 1.0).max(0.0) as u32;
        let last = ((hi / self.side_m).floor() as u32).min(n - 1);
        Some((first.min(n - 1), last))
    }
}

impl Layout for GridLayout {
    fn version(&self) -> u64 {
        self.version
    }

    fn cell_at(&self, p: Vec3) -> Option<CellId> {
        if !self.world().contains(p) {
            return None;
        }
        let x = ((p.x / self.side_m) as u32).min(self.nx - 1);
        let z = ((p.z / self.side_m) as u32).min(self.nz - 1);
        Some(CellId(z * self.nx + x))
    }

    fn rect(&self, c: CellId) -> Option<Rect> {
        if c.0 >= self.nx * self.nz {
            return None;
        }
        let x = f64::from(c.0 % self.nx) * self.side_m;
        let z = f64::from(c.0 / self.nx) * self.side_m;
        Some(Rect::new(x, z, x + self.side_m, z + self.side_m))
    }

    fn is_merging(&self, c: CellId) -> bool {
        self.merging.get(c.0 as usize).copied().unwrap_or(false)
    }

    fn cells_meeting(&self, r: &Rect, out: &mut Vec<CellId>) {
        let Some((x0, x1)) = self.index_range(r.min_x, r.max_x, self.nx) else {
            return;
        };
        let Some((z0, z1)) = self.index_range(r.min_z, r.max_z, self.nz) else {
            return;
        };
        for z in z0..=z1 {
            for x in x0..=x1 {
                let c = CellId(z * self.nx + x);
                if self.rect(c).is_some_and(|cr| cr.intersects(r)) {
                    out.push(c);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn brute_meeting(g: &GridLayout, r: &Rect) -> Vec<CellId> {
        g.cells()
            .filter(|c| g.rect(*c).is_some_and(|cr| cr.intersects(r)))
            .collect()
    }

    #[test]
    fn cell_at_tiles_the_world() {
        let g = GridLayout::new(3, 2, 100.0);
        assert_eq!(g.cell_at(Vec3::ground(0.0, 0.0)), Some(CellId(0)));
        assert_eq!(g.cell_at(Vec3::ground(100.0, 0.0)), Some(CellId(1)));
        assert_eq!(g.cell_at(Vec3::ground(299.9, 150.0)), Some(CellId(5)));
        assert_eq!(g.cell_at(Vec3::ground(300.0, 0.0)), None);
        assert_eq!(g.cell_at(Vec3::ground(-1.0, 0.0)), None);
    }

    #[test]
    fn cells_meeting_matches_brute_force() {
        let g = GridLayout::new(4, 3, 100.0);
        let probes = [
            Rect::around(50.0, 50.0, 10.0),
            Rect::around(100.0, 100.0, 1.0),
            Rect::around(100.0, 50.0, 0.0),
            Rect::around(399.0, 299.0, 60.0),
            Rect::around(-50.0, -50.0, 40.0),
            Rect::around(200.0, 150.0, 500.0),
        ];
        for r in probes {
            let mut got = Vec::new();
            g.cells_meeting(&r, &mut got);
            assert_eq!(got, brute_meeting(&g, &r), "{r:?}");
        }
    }

    #[test]
    fn the_space_tree_answers_like_a_grid_of_the_same_cut() {
        use crate::core::ids::ShardId;
        use crate::core::space::{ChangeOp, SpaceChange, SpaceParams, SplitDirection};
        let world = Rect::new(0.0, 0.0, 400.0, 200.0);
        let params = SpaceParams::for_ghost_radius(50.0);
        let mut tree = SpaceTree::new(world, params, CellId(0), ShardId::local(0)).expect("tree");
        let split = SpaceChange {
            version: 0,
            op: ChangeOp::Split {
                cell: CellId(0),
                direction: SplitDirection::MaxX,
                new_cell: CellId(1),
                new_shard: ShardId::local(1),
            },
        };
        tree.apply(&split).expect("split");
        let grid = GridLayout::new(2, 1, 200.0);
        for p in [
            Vec3::ground(10.0, 10.0),
            Vec3::ground(200.0, 50.0),
            Vec3::ground(399.0, 199.0),
        ] {
            assert_eq!(Layout::cell_at(&tree, p), grid.cell_at(p), "{p:?}");
        }
        for r in [
            Rect::around(190.0, 100.0, 15.0),
            Rect::around(50.0, 50.0, 10.0),
        ] {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            Layout::cells_meeting(&tree, &r, &mut a);
            grid.cells_meeting(&r, &mut b);
            a.sort();
            assert_eq!(a, b, "{r:?}");
        }
        let mut n = Vec::new();
        Layout::neighbours(&tree, CellId(0), &mut n);
        assert_eq!(n, vec![CellId(1)]);
        assert!(!Layout::is_merging(&tree, CellId(1)));
        assert_eq!(Layout::rect(&tree, CellId(1)), grid.rect(CellId(1)));
    }

    #[test]
    fn neighbours_exclude_self() {
        let g = GridLayout::new(3, 3, 100.0);
        let mut out = Vec::new();
        g.neighbours(CellId(4), &mut out);
        assert_eq!(out.len(), 8);
        assert!(!out.contains(&CellId(4)));
        out.clear();
        g.neighbours(CellId(0), &mut out);
        assert_eq!(out, vec![CellId(1), CellId(3), CellId(4)]);
    }
}
