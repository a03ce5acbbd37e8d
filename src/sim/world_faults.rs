//! Fault injection for tests: hooks on [`World`] that break one thing on
//! the real path, so a test can show the checker names exactly that
//! violation (`tests/sim.rs` holds the table of kinds and the tests that
//! make each fire).
//!
//! Every hook here is for tests only: a run driven by `tessera sim`,
//! `tuning` or [`crate::sim::world_run::run_one`] never calls one. They
//! change nothing until called. The older hooks ([`World::inject`],
//! [`World::inject_proxy`], [`World::lose_downstream`], [`World::cells_mut`])
//! live beside the state they touch in `world.rs`.
//!
//! Owns the [`FaultyLayout`] wrapper; the hooks' state lives on [`World`]
//! (`layout_faults`, `lose_up`).

use crate::core::cell::Layout;
use crate::core::geom::{Rect, Vec3};
use crate::core::ids::CellId;
use crate::sim::world::World;
use crate::sim::world_balance::WorldLayout;
use crate::sim::world_layout::LayoutError;

/// How a cell's replica of the layout is wrong ([`FaultyLayout`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayoutFault {
    /// Ghost queries ([`Layout::cells_meeting`], and so
    /// [`Layout::neighbours`]) leave this cell out: the replica's spatial
    /// index lost a leaf. A cell ticking with it neither creates nor keeps
    /// ghosts there (it deletes the ones it has, as the cell still exists),
    /// while the world's checker, asking the true layout, still wants them.
    HideFromGhosting(CellId),
    /// The replica has the cell ticking with it merged into this one (its
    /// leaf gone, its area the other cell's), though the world's layout
    /// has no such merge: the cell hands its reals over, though none
    /// crossed a border.
    MergedInto(CellId),
}

/// The layout `inner` as a cell with a corrupt replica of it sees it:
/// everything as `inner` answers but what `fault` changes.
pub struct FaultyLayout<'a, L: Layout + ?Sized> {
    /// The true layout.
    pub inner: &'a L,
    /// The cell ticking with this layout.
    pub cell: CellId,
    /// What is wrong.
    pub fault: LayoutFault,
}

impl<L: Layout + ?Sized> Layout for FaultyLayout<'_, L> {
    fn version(&self) -> u64 {
        self.inner.version()
    }

    fn cell_at(&self, p: Vec3) -> Option<CellId> {
        match (self.inner.cell_at(p), self.fault) {
            (Some(c), LayoutFault::MergedInto(into)) if c == self.cell => Some(into),
            (c, _) => c,
        }
    }

    fn rect(&self, c: CellId) -> Option<Rect> {
        match self.fault {
            LayoutFault::MergedInto(_) if c == self.cell => None,
            _ => self.inner.rect(c),
        }
    }

    fn is_merging(&self, c: CellId) -> bool {
        self.inner.is_merging(c)
    }

    fn cells_meeting(&self, r: &Rect, out: &mut Vec<CellId>) {
        let start = out.len();
        self.inner.cells_meeting(r, out);
        let LayoutFault::HideFromGhosting(hidden) = self.fault else {
            return;
        };
        let mut kept = start;
        for i in start..out.len() {
            if out[i] != hidden {
                out[kept] = out[i];
                kept += 1;
            }
        }
        out.truncate(kept);
    }
}

impl World {
    /// From the next step on, `cell` ticks with a corrupt replica of the
    /// layout ([`FaultyLayout`] with `fault`); replaces an earlier fault of
    /// `cell`. For tests that break an invariant on purpose:
    /// [`LayoutFault::HideFromGhosting`] makes the checker report
    /// [`crate::sim::report::ViolationKind::MissingGhost`] after healing
    /// (for a real near the hidden cell), [`LayoutFault::MergedInto`]
    /// [`crate::sim::report::ViolationKind::MigrationFlap`] (a migration
    /// without a border crossing).
    pub fn corrupt_layout(&mut self, cell: CellId, fault: LayoutFault) {
        self.layout_faults.retain(|&(c, _)| c != cell);
        self.layout_faults.push((cell, fault));
    }

    /// The fault of `cell`'s replica of the layout, if a test set one
    /// ([`World::corrupt_layout`]).
    pub(super) fn layout_fault(&self, cell: CellId) -> Option<LayoutFault> {
        self.layout_faults
            .iter()
            .find(|&&(c, _)| c == cell)
            .map(|&(_, f)| f)
    }

    /// Loses the next `n` inputs `e`'s proxy sends to its real, as a
    /// broken link would (the proxy has numbered them). The real waits for
    /// the missing number until its input buffer overflows and skips the
    /// gap, or the run ends:
    /// [`crate::sim::report::ViolationKind::InputLost`] either way. For
    /// tests that break an invariant on purpose.
    ///
    /// # Panics
    /// If `e` is not an entity of this world.
    pub fn lose_upstream(&mut self, e: crate::core::ids::EntityId, n: u32) {
        self.lose_up[e.0 as usize] += n;
    }

    /// Grid mode: starts merging `m` into `into` and retires `m` at once,
    /// reals and all, as a merge that did not wait for `m` to drain would.
    /// The next step's residency check reports
    /// [`crate::sim::report::ViolationKind::MergeNotDrained`] (the grid
    /// gives retired cells no grace). For tests that break an invariant on
    /// purpose.
    ///
    /// # Errors
    /// [`LayoutError`] if the grid refuses the merge (`m` and `into` not
    /// adjacent plain leaves).
    ///
    /// # Panics
    /// In tree mode (the `crowd` and `swing` scenarios), whose merges the
    /// space service decides.
    pub fn retire_undrained(&mut self, m: CellId, into: CellId) -> Result<(), LayoutError> {
        let WorldLayout::Grid(grid) = &mut self.layout else {
            panic!("retire_undrained needs a grid world");
        };
        grid.begin_merge(m, into)?;
        grid.retire(m)?;
        self.layout_changed("retire", m);
        Ok(())
    }
}
