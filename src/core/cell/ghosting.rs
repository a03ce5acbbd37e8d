//! Ghost upkeep, run for every real at every check (BigWorld's
//! `EntityGhostMaintainer`, with Mosaic's rect rule).
//!
//! For a real at `p`, with `R = ghost_radius_m` and `K = ghost_keep_margin_m`:
//!
//! 1. **Timeouts**: a haunt still `Creating` after `ghost_create_timeout_ms`
//!    is abandoned (a `DeleteGhost` cleans up whatever did arrive) and will
//!    be asked again by step 2, now or at a later check.
//! 2. **Create**: every cell (not this one) whose rect inflated by `R` covers
//!    `p` (equivalently: that meets the square of half-side `R` around `p`)
//!    gets a ghost, at most `ghosts_created_per_check_max` per check. A real
//!    about to migrate only creates the destination's ghost (the destination
//!    creates the rest); if an older real's `CreateGhost` to the destination
//!    is still unacked, it is sent again on this cell's channel.
//! 3. **Delete**: a haunt whose rect inflated by `R + K` no longer covers `p`
//!    is deleted (hysteresis), except the migration destination, a ghost
//!    younger than `ghost_min_lifetime_ms`, or any ghost of a real that
//!    arrived less than `new_real_keep_ghosts_ms` ago; at most
//!    `ghosts_deleted_per_check_max` per check. A haunt whose cell no longer
//!    exists is dropped without a message.
//!
//! Owns nothing beyond the `impl Cell` upkeep; must not migrate.

use std::time::Duration;

use crate::core::geom::Rect;
use crate::core::ids::{CellId, EntityId};
use crate::core::time::Time;

use super::layout::Layout;
use super::machine::Cell;
use super::msg::{CellMsg, Haunt, HauntState};
use super::table::Part;

/// What one check may still do.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Budget {
    pub created: u32,
    pub deleted: u32,
    pub migrated: u32,
}

impl Cell {
    /// Runs ghost upkeep for real `id`; `dest` is where it migrates this check.
    pub(super) fn upkeep<L: Layout + ?Sized>(
        &mut self,
        now: Time,
        layout: &L,
        id: EntityId,
        dest: Option<CellId>,
        budget: &mut Budget,
    ) {
        let pos = self.entities.get(id).expect("real").entity.core().pos;
        let mut required = std::mem::take(&mut self.scratch_cells);
        let mut keep = std::mem::take(&mut self.scratch_keep);
        required.clear();
        keep.clear();
        match dest {
            Some(d) => required.push(d),
            None => {
                let r = self.params.ghost_radius_m;
                layout.cells_meeting(&Rect::around(pos.x, pos.z, r), &mut required);
            }
        }
        let k = self.params.ghost_keep_radius_m();
        layout.cells_meeting(&Rect::around(pos.x, pos.z, k), &mut keep);
        required.retain(|c| *c != self.id);
        self.expire_creating(now, id);
        self.create_required(now, layout, id, dest, &required, budget);
        self.delete_unneeded(now, layout, id, dest, &keep, budget);
        self.scratch_cells = required;
        self.scratch_keep = keep;
    }

    fn expire_creating(&mut self, now: Time, id: EntityId) {
        let timeout = Duration::from_millis(self.params.ghost_create_timeout_ms);
        let expired = |h: &Haunt| {
            matches!(h.state, HauntState::Creating { sent_at, .. }
                if now.saturating_since(sent_at) >= timeout)
        };
        // Looked at first through `&`: a real with nothing to expire (nearly
        // all, every check) is not given out `&mut`, so its dense head is
        // not rewritten and observers see it held still
        // (`EntityTable::head_unchanged_since`).
        let r = self.entities.get(id).and_then(|e| e.real()).expect("real");
        if !r.haunts.iter().any(expired) {
            return;
        }
        let r = self
            .entities
            .get_mut(id)
            .and_then(|e| e.real_mut())
            .expect("real");
        let epoch = r.epoch;
        let mut i = 0;
        while i < r.haunts.len() {
            let h = r.haunts[i];
            match h.state {
                HauntState::Creating { .. } if expired(&h) => {
                    r.haunts.swap_remove(i);
                    self.counters.ghost_create_timeouts += 1;
                    self.counters.ghosts_deleted += 1;
                    self.out.push_back(super::msg::Outgoing::cell(
                        h.cell,
                        CellMsg::DeleteGhost { entity: id, epoch },
                    ));
                }
                _ => i += 1,
            }
        }
    }

    fn create_required<L: Layout + ?Sized>(
        &mut self,
        now: Time,
        layout: &L,
        id: EntityId,
        dest: Option<CellId>,
        required: &[CellId],
        budget: &mut Budget,
    ) {
        let max = self.params.ghosts_created_per_check_max;
        for &c in required {
            if budget.created >= max {
                return;
            }
            let me = self.id;
            let e = self.entities.get_mut(id).expect("real");
            let type_id = e.entity.core().type_id;
            let Part::Real(r) = &mut e.part else {
                unreachable!("real")
            };
            match r.haunt(c).map(|h| h.state) {
                // A migration destination whose ghost is still being created
                // by an older real (another channel) is asked again on ours,
                // so our `CreateGhost` precedes our `Onload`.
                Some(HauntState::Creating { sent_by, .. }) if sent_by != me && dest == Some(c) => {
                    r.haunts.retain(|h| h.cell != c);
                }
                Some(_) => continue,
                None if layout.rect(c).is_none() => continue,
                None => {}
            }
            r.haunts.push(Haunt {
                cell: c,
                state: HauntState::Creating {
                    sent_at: now,
                    sent_by: self.id,
                },
                since: now,
            });
            let epoch = r.epoch;
            let snapshot = r.emitter.ghost_snapshot(now, &e.entity);
            budget.created += 1;
            self.counters.ghosts_created += 1;
            self.send(
                c,
                CellMsg::CreateGhost {
                    entity: id,
                    epoch,
                    type_id,
                    snapshot,
                },
            );
        }
    }

    fn delete_unneeded<L: Layout + ?Sized>(
        &mut self,
        now: Time,
        layout: &L,
        id: EntityId,
        dest: Option<CellId>,
        keep: &[CellId],
        budget: &mut Budget,
    ) {
        let min_life = Duration::from_millis(self.params.ghost_min_lifetime_ms);
        let new_real = Duration::from_millis(self.params.new_real_keep_ghosts_ms);
        let max = self.params.ghosts_deleted_per_check_max;
        let deletable = |h: &Haunt, deleted: u32| {
            layout.rect(h.cell).is_none()
                || (Some(h.cell) != dest
                    && !keep.contains(&h.cell)
                    && now.saturating_since(h.since) >= min_life
                    && deleted < max)
        };
        // Through `&` first, as in `expire_creating`.
        let r = self.entities.get(id).and_then(|e| e.real()).expect("real");
        if now.saturating_since(r.since) < new_real
            || !r.haunts.iter().any(|h| deletable(h, budget.deleted))
        {
            return;
        }
        let r = self
            .entities
            .get_mut(id)
            .and_then(|e| e.real_mut())
            .expect("real");
        let epoch = r.epoch;
        let mut i = 0;
        while i < r.haunts.len() {
            let h = r.haunts[i];
            let exists = layout.rect(h.cell).is_some();
            if !deletable(&h, budget.deleted) {
                i += 1;
                continue;
            }
            r.haunts.swap_remove(i);
            if exists {
                budget.deleted += 1;
                self.counters.ghosts_deleted += 1;
                self.out.push_back(super::msg::Outgoing::cell(
                    h.cell,
                    CellMsg::DeleteGhost { entity: id, epoch },
                ));
            }
        }
    }
}
