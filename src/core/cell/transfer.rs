//! A move between spaces: a real leaves this cell's space for a cell of
//! another space (an instance, or back to the world).
//!
//! Same migration path as a teleport inside one space (the whole real,
//! properties, inputs, observer and combat state travel in one `Onload`
//! after a fresh `CreateGhost` on the same channel), with three
//! differences, because nothing of the old space may see the entity
//! afterwards:
//!
//! 1. Every ghost of the old space is deleted first (`DeleteGhost` at the
//!    real's epoch, as a destroy does), so their observers see it leave.
//! 2. The observer's last batch of the old space leaves from here, then
//!    the caller's `notice` (opaque client bytes, e.g. "your space
//!    changed"), so the client reads the notice before anything of the
//!    new space. The new cell's first view of the observer has leaves for
//!    everything of the old space and enters for the new.
//! 3. No ghost stays here: the entity becomes a `Gone` forwarding entry
//!    to the destination (stragglers follow it), and the `Onload` says so
//!    (`source_ghost = false`), so the new real keeps no haunt here.
//!
//! Owns nothing beyond the `impl Cell` transfer step; must not know spaces,
//! the layout or the wire.

use crate::core::geom::Vec3;
use crate::core::ids::{CellId, EntityId};
use crate::core::time::Time;

use super::forward::ForwardEntry;
use super::machine::{Cell, CellError};
use super::msg::{CellMsg, Haunt, HauntState};
use super::residency::transition;
use super::table::Part;

impl Cell {
    /// Moves real `entity` to `pos` in cell `dest` of another space (see
    /// the module doc). `notice` goes to its client (if it has one) after
    /// the last batch of this space.
    ///
    /// # Errors
    /// `NotReal`; `OutsideWorld` for a non-finite `pos`; `WrongCell` if
    /// `dest` is this cell.
    pub fn transfer(
        &mut self,
        now: Time,
        entity: EntityId,
        pos: Vec3,
        dest: CellId,
        notice: Option<crate::core::down::DownBody>,
    ) -> Result<(), CellError> {
        self.real_entry(entity)?;
        if !pos.is_finite() {
            return Err(CellError::OutsideWorld);
        }
        if dest == self.id {
            return Err(CellError::WrongCell(dest));
        }
        self.drop_all_ghosts(entity);
        self.move_real(entity, pos)?;
        self.emit_syncs(now);
        self.run_catch_ups(now);
        self.flush_observer(entity);
        if let Some(n) = notice {
            // No client: nothing to tell.
            let _ = self.send_to_client(entity, n);
        }
        self.create_dest_ghost(now, entity, dest);
        self.offload_with(now, entity, dest, false);
        self.forget_left_ghost(now, entity, dest);
        self.counters.transfers_out += 1;
        Ok(())
    }

    /// Step 1: `DeleteGhost` to every haunt; the real keeps none.
    fn drop_all_ghosts(&mut self, entity: EntityId) {
        let e = self.entities.get_mut(entity).expect("real");
        let Part::Real(r) = &mut e.part else {
            unreachable!("real")
        };
        let epoch = r.epoch;
        let haunts = std::mem::take(&mut r.haunts);
        for h in &haunts {
            self.send(h.cell, CellMsg::DeleteGhost { entity, epoch });
            self.counters.ghosts_deleted += 1;
        }
        self.catch_ups.retain(|c| c.entity != entity);
    }

    /// A fresh ghost at `dest`, sent on this cell's channel before the
    /// `Onload` (the ghost rule).
    fn create_dest_ghost(&mut self, now: Time, entity: EntityId, dest: CellId) {
        let me = self.id;
        let e = self.entities.get_mut(entity).expect("real");
        let type_id = e.entity.core().type_id;
        let Part::Real(r) = &mut e.part else {
            unreachable!("real")
        };
        let snapshot = r.emitter.ghost_snapshot(now, &e.entity);
        r.haunts.push(Haunt {
            cell: dest,
            state: HauntState::Creating {
                sent_at: now,
                sent_by: me,
            },
            since: now,
        });
        let epoch = r.epoch;
        self.counters.ghosts_created += 1;
        self.send(
            dest,
            CellMsg::CreateGhost {
                entity,
                epoch,
                type_id,
                snapshot,
            },
        );
    }

    /// Step 3: the ghost the offload left here becomes a forwarding entry
    /// to `dest` (observers here see the entity leave).
    fn forget_left_ghost(&mut self, now: Time, entity: EntityId, dest: CellId) {
        let prev = self.residency(entity);
        self.views.remove(entity);
        let Some(old) = self.entities.remove(entity) else {
            return;
        };
        let epoch = prev.map_or(0, |p| p.epoch());
        let until = now + std::time::Duration::from_millis(self.params.forward_ttl_ms);
        let mut entry = ForwardEntry {
            forward_to: dest,
            epoch,
            until,
            history: old.history,
        };
        let to = entry.residency();
        transition(&mut entry.history, now, prev, Some(to));
        self.forward
            .insert(entity, entry, self.params.forward_table_max);
    }
}
