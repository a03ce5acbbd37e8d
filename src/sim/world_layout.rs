//! The simulated space layout: a grid of cells that can merge and split.
//!
//! Stands in for the space tree until it is wired in: `nx` by `nz` square
//! *slots* of side `side_m`, each covered by one leaf cell. A merge marks
//! cell `m` as merging into an adjacent leaf `a`: from then on `a`'s rect is
//! the union of both (always a rectangle, checked), [`Layout::cell_at`] gives
//! `a` for points of `m`'s slot (a merging cell accepts no new reals), and
//! `m` keeps its own rect until the world sees it drained and retires it
//! ([`SimLayout::retire`]): it is then no leaf at all (`rect` is `None`).
//! A split gives the slot back to a *fresh* cell id (a new leaf, as the tree
//! would create), so stale ghosts of the retired cell never come back.
//!
//! Every change bumps [`Layout::version`]. Owns only geometry and ids; knows
//! nothing of shards, entities or messages.

use crate::core::cell::Layout;
use crate::core::geom::{Rect, Vec3};
use crate::core::ids::CellId;

/// Why a merge or split was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    /// A cell is not a current, non-merging leaf.
    #[error("cell {0} is not a plain leaf")]
    NotLeaf(CellId),
    /// The merged cell already absorbed others, or is the absorber itself.
    #[error("cell {0} cannot be merged away")]
    NotMergeable(CellId),
    /// The union of the two rects would not be a rectangle.
    #[error("cells {0} and {1} are not side by side")]
    NotAdjacent(CellId, CellId),
    /// The slot is not absorbed by the given cell.
    #[error("slot {0} is not absorbed by cell {1}")]
    NotAbsorbed(u32, CellId),
}

#[derive(Clone, Debug)]
struct CellInfo {
    home_slot: u32,
    extra_slots: Vec<u32>,
    merging_into: Option<CellId>,
    retired: bool,
}

/// A grid of slots whose cells merge and split (see the module doc).
#[derive(Clone, Debug)]
pub struct SimLayout {
    nx: u32,
    nz: u32,
    side_m: f64,
    version: u64,
    slot_owner: Vec<CellId>,
    /// Per slot: its own cell while that cell drains into the owner.
    draining: Vec<Option<CellId>>,
    cells: Vec<CellInfo>,
}

impl SimLayout {
    /// A grid of `nx * nz` cells of side `side_m`, cell `z * nx + x` in slot
    /// `(x, z)`, minimum corner at the origin.
    ///
    /// # Panics
    /// If a dimension is 0 or the side is not finite and positive.
    pub fn new(nx: u32, nz: u32, side_m: f64) -> Self {
        assert!(nx > 0 && nz > 0, "empty grid");
        assert!(side_m.is_finite() && side_m > 0.0, "bad cell side");
        let n = nx * nz;
        SimLayout {
            nx,
            nz,
            side_m,
            version: 1,
            slot_owner: (0..n).map(CellId).collect(),
            draining: vec![None; n as usize],
            cells: (0..n)
                .map(|s| CellInfo {
                    home_slot: s,
                    extra_slots: Vec::new(),
                    merging_into: None,
                    retired: false,
                })
                .collect(),
        }
    }

    /// Grid size `(nx, nz)`.
    pub fn dims(&self) -> (u32, u32) {
        (self.nx, self.nz)
    }

    /// Side of one slot, metres.
    pub fn side_m(&self) -> f64 {
        self.side_m
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

    /// Cell ids ever allocated (leaves, merging and retired cells).
    pub fn cell_count(&self) -> u32 {
        self.cells.len() as u32
    }

    /// True if `c` was merged away and is no leaf any more.
    pub fn is_retired(&self, c: CellId) -> bool {
        self.cells.get(c.0 as usize).is_some_and(|i| i.retired)
    }

    /// The cell `c` is merging into, if it is merging.
    pub fn merging_into(&self, c: CellId) -> Option<CellId> {
        let info = self.cells.get(c.0 as usize)?;
        info.merging_into.filter(|_| !info.retired)
    }

    /// The slot a cell was created for.
    pub fn home_slot(&self, c: CellId) -> u32 {
        self.cells[c.0 as usize].home_slot
    }

    /// The cells of the slots left and right / below and above `c`'s home
    /// slot, as currently owned.
    pub fn side_neighbours(&self, c: CellId) -> Vec<CellId> {
        let s = self.home_slot(c);
        let (x, z) = (s % self.nx, s / self.nx);
        let mut out = Vec::new();
        if x > 0 {
            out.push(self.slot_owner[(s - 1) as usize]);
        }
        if x + 1 < self.nx {
            out.push(self.slot_owner[(s + 1) as usize]);
        }
        if z > 0 {
            out.push(self.slot_owner[(s - self.nx) as usize]);
        }
        if z + 1 < self.nz {
            out.push(self.slot_owner[(s + self.nx) as usize]);
        }
        out
    }

    fn slot_rect(&self, s: u32) -> Rect {
        let x = f64::from(s % self.nx) * self.side_m;
        let z = f64::from(s / self.nx) * self.side_m;
        Rect::new(x, z, x + self.side_m, z + self.side_m)
    }

    fn plain_leaf(&self, c: CellId) -> Result<&CellInfo, LayoutError> {
        match self.cells.get(c.0 as usize) {
            Some(i) if !i.retired && i.merging_into.is_none() => Ok(i),
            _ => Err(LayoutError::NotLeaf(c)),
        }
    }

    /// Starts merging `m` into `into`: `into` covers both from now on.
    ///
    /// # Errors
    /// If either is not a plain leaf, `m` absorbed others, or the union is
    /// not a rectangle.
    pub fn begin_merge(&mut self, m: CellId, into: CellId) -> Result<(), LayoutError> {
        let mi = self.plain_leaf(m)?;
        self.plain_leaf(into)?;
        if m == into || !mi.extra_slots.is_empty() {
            return Err(LayoutError::NotMergeable(m));
        }
        let (a, b) = (self.rect(m).expect("leaf"), self.rect(into).expect("leaf"));
        let u = Rect::new(
            a.min_x.min(b.min_x),
            a.min_z.min(b.min_z),
            a.max_x.max(b.max_x),
            a.max_z.max(b.max_z),
        );
        let tight = (u.area() - a.area() - b.area()).abs() <= 1e-6 * u.area();
        if !tight || a.overlaps(&b) {
            return Err(LayoutError::NotAdjacent(m, into));
        }
        let slot = mi.home_slot;
        self.slot_owner[slot as usize] = into;
        self.draining[slot as usize] = Some(m);
        self.cells[into.0 as usize].extra_slots.push(slot);
        self.cells[m.0 as usize].merging_into = Some(into);
        self.version += 1;
        Ok(())
    }

    /// Retires a merging cell (the world saw it drained): no leaf any more.
    ///
    /// # Errors
    /// `NotMergeable` if `m` is not merging.
    pub fn retire(&mut self, m: CellId) -> Result<(), LayoutError> {
        if self.merging_into(m).is_none() {
            return Err(LayoutError::NotMergeable(m));
        }
        self.cells[m.0 as usize].retired = true;
        let slot = self.cells[m.0 as usize].home_slot;
        self.draining[slot as usize] = None;
        self.version += 1;
        Ok(())
    }

    /// Splits `slot` back out of `from` into a fresh cell, returned.
    ///
    /// # Errors
    /// `NotAbsorbed` unless `from` holds `slot` as an extra slot and the
    /// slot's old cell is retired.
    pub fn split(&mut self, from: CellId, slot: u32) -> Result<CellId, LayoutError> {
        let info = self.plain_leaf(from)?;
        let Some(at) = info.extra_slots.iter().position(|&s| s == slot) else {
            return Err(LayoutError::NotAbsorbed(slot, from));
        };
        let old_retired = self.cells.iter().any(|i| i.home_slot == slot && i.retired);
        if !old_retired {
            return Err(LayoutError::NotAbsorbed(slot, from));
        }
        self.cells[from.0 as usize].extra_slots.swap_remove(at);
        let id = CellId(self.cells.len() as u32);
        self.cells.push(CellInfo {
            home_slot: slot,
            extra_slots: Vec::new(),
            merging_into: None,
            retired: false,
        });
        self.slot_owner[slot as usize] = id;
        self.version += 1;
        Ok(id)
    }

    /// The slot index range meeting `[lo, hi]` along one axis.
    fn index_range(&self, lo: f64, hi: f64, n: u32) -> Option<(u32, u32)> {
        let max = f64::from(n) * self.side_m;
        if hi < 0.0 || lo > max || lo.is_nan() || hi.is_nan() {
            return None;
        }
        let first = ((lo / self.side_m).ceil() - 1.0).max(0.0) as u32;
        let last = ((hi / self.side_m).floor().max(0.0) as u32).min(n - 1);
        Some((first.min(n - 1), last))
    }
}

impl Layout for SimLayout {
    fn version(&self) -> u64 {
        self.version
    }

    fn cell_at(&self, p: Vec3) -> Option<CellId> {
        if !self.world().contains(p) {
            return None;
        }
        let x = ((p.x / self.side_m) as u32).min(self.nx - 1);
        let z = ((p.z / self.side_m) as u32).min(self.nz - 1);
        Some(self.slot_owner[(z * self.nx + x) as usize])
    }

    fn rect(&self, c: CellId) -> Option<Rect> {
        let info = self.cells.get(c.0 as usize)?;
        if info.retired {
            return None;
        }
        let mut r = self.slot_rect(info.home_slot);
        for &s in &info.extra_slots {
            let o = self.slot_rect(s);
            r = Rect::new(
                r.min_x.min(o.min_x),
                r.min_z.min(o.min_z),
                r.max_x.max(o.max_x),
                r.max_z.max(o.max_z),
            );
        }
        Some(r)
    }

    fn is_merging(&self, c: CellId) -> bool {
        self.merging_into(c).is_some()
    }

    fn cells_meeting(&self, r: &Rect, out: &mut Vec<CellId>) {
        let Some((x0, x1)) = self.index_range(r.min_x, r.max_x, self.nx) else {
            return;
        };
        let Some((z0, z1)) = self.index_range(r.min_z, r.max_z, self.nz) else {
            return;
        };
        let start = out.len();
        for z in z0..=z1 {
            for x in x0..=x1 {
                let s = z * self.nx + x;
                if !self.slot_rect(s).intersects(r) {
                    continue;
                }
                let owner = self.slot_owner[s as usize];
                out.push(owner);
                // A draining cell is still a leaf over its own slot.
                if let Some(m) = self.draining[s as usize] {
                    out.push(m);
                }
            }
        }
        out[start..].sort_unstable();
        let mut w = start;
        for i in start..out.len() {
            if w == start || out[i] != out[w - 1] {
                out[w] = out[i];
                w += 1;
            }
        }
        out.truncate(w);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn brute_meeting(l: &SimLayout, r: &Rect) -> Vec<CellId> {
        (0..l.cell_count())
            .map(CellId)
            .filter(|&c| l.rect(c).is_some_and(|cr| cr.intersects(r)))
            .collect()
    }

    #[test]
    fn plain_grid_matches_brute_force() {
        let l = SimLayout::new(4, 3, 100.0);
        assert_eq!(l.cell_at(Vec3::ground(150.0, 250.0)), Some(CellId(9)));
        assert_eq!(l.cell_at(Vec3::ground(400.0, 0.0)), None);
        for r in [
            Rect::around(50.0, 50.0, 10.0),
            Rect::around(100.0, 100.0, 1.0),
            Rect::around(399.0, 299.0, 60.0),
            Rect::around(-50.0, -50.0, 40.0),
            Rect::around(200.0, 150.0, 500.0),
        ] {
            let mut got = Vec::new();
            l.cells_meeting(&r, &mut got);
            assert_eq!(got, brute_meeting(&l, &r), "{r:?}");
        }
    }

    #[test]
    fn merge_retire_split_cycle() {
        let mut l = SimLayout::new(3, 1, 100.0);
        assert_eq!(
            l.begin_merge(CellId(0), CellId(2)),
            Err(LayoutError::NotAdjacent(CellId(0), CellId(2)))
        );
        l.begin_merge(CellId(1), CellId(2)).expect("adjacent");
        assert!(l.is_merging(CellId(1)));
        assert_eq!(l.rect(CellId(2)), Some(Rect::new(100.0, 0.0, 300.0, 100.0)));
        assert_eq!(l.cell_at(Vec3::ground(150.0, 50.0)), Some(CellId(2)));
        let probe = Rect::around(150.0, 50.0, 10.0);
        let mut got = Vec::new();
        l.cells_meeting(&probe, &mut got);
        assert_eq!(got, vec![CellId(1), CellId(2)]);
        assert_eq!(got, brute_meeting(&l, &probe));
        assert_eq!(
            l.split(CellId(2), 1),
            Err(LayoutError::NotAbsorbed(1, CellId(2)))
        );
        l.retire(CellId(1)).expect("merging");
        assert_eq!(l.rect(CellId(1)), None);
        got.clear();
        l.cells_meeting(&probe, &mut got);
        assert_eq!(got, vec![CellId(2)]);
        let v = l.version();
        let fresh = l.split(CellId(2), 1).expect("absorbed");
        assert_eq!(fresh, CellId(3));
        assert!(l.version() > v);
        assert_eq!(l.cell_at(Vec3::ground(150.0, 50.0)), Some(CellId(3)));
        assert_eq!(l.rect(CellId(2)), Some(Rect::new(200.0, 0.0, 300.0, 100.0)));
        let mut n = Vec::new();
        l.neighbours(CellId(3), &mut n);
        assert_eq!(n, vec![CellId(0), CellId(2)]);
    }
}
