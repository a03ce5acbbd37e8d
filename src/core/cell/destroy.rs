//! Destroying a real: the end of an entity's life (its client left).
//!
//! A destroy reaches the real through the same ordered, forwarded path as
//! the client's inputs ([`ToRealBody::Destroy`](super::ToRealBody), or a
//! local [`Cell::destroy_real`]), so it follows every input the proxy sent
//! before it and catches the real across any migration in flight.
//!
//! # What happens, in one step at the real's cell
//!
//! 1. The observer (if the real has a client) is detached: its last batch
//!    leaves as usual, its area is removed.
//! 2. Every haunt (created or being created) gets `DeleteGhost` at the
//!    real's epoch: ghosts are deleted by the ghost protocol and leave
//!    `Gone` tombstones there, so a `CreateGhost` of an older real still in
//!    flight on another channel is stale when it lands.
//! 3. The entity leaves the AOI index: observers here see it leave at the
//!    next view step (observers in other cells see the leave when their
//!    ghost is deleted).
//! 4. Queued inputs, calls, owed catch-ups and the combat state are dropped.
//! 5. The entity becomes `Gone { forward_to: this cell, epoch + 1 }`: a
//!    tombstone pointing at itself. Real-bound stragglers reaching it
//!    (inputs, calls, acks) are dropped as [`DropReason::Destroyed`], and
//!    so are stragglers forwarded here from the haunts' tombstones.
//!
//! Owns nothing beyond the `impl Cell` destroy step; must not touch the
//! layout or the wire.

use crate::core::ids::EntityId;
use crate::core::time::Time;

use super::counters::{CellEvent, DropReason};
use super::forward::ForwardEntry;
use super::machine::{Cell, CellError};
use super::msg::CellMsg;
use super::residency::transition;
use super::table::Part;

impl Cell {
    /// Destroys real `entity` here (see the module doc): its ghosts are
    /// deleted, observers see it leave, and a tombstone drops stragglers.
    ///
    /// # Errors
    /// `NotReal` if the entity is not real in this cell.
    pub fn destroy_real(&mut self, now: Time, entity: EntityId) -> Result<(), CellError> {
        self.real_entry(entity)?;
        let _ = self.detach_observer(entity);
        self.views.remove(entity);
        self.catch_ups.retain(|c| c.entity != entity);
        let mut entry = self.entities.remove(entity).expect("real");
        let prev = entry.residency();
        let Part::Real(r) = &entry.part else {
            unreachable!("checked real")
        };
        let epoch = r.epoch;
        for h in &r.haunts {
            self.send(h.cell, CellMsg::DeleteGhost { entity, epoch });
            self.counters.ghosts_deleted += 1;
        }
        let until = now + std::time::Duration::from_millis(self.params.forward_ttl_ms);
        let mut tomb = ForwardEntry {
            forward_to: self.id,
            epoch: epoch + 1,
            until,
            history: std::mem::take(&mut entry.history),
        };
        let to = tomb.residency();
        transition(&mut tomb.history, now, Some(prev), Some(to));
        self.forward
            .insert(entity, tomb, self.params.forward_table_max);
        self.counters.reals_destroyed += 1;
        self.events.push_back(CellEvent::Destroyed { entity });
        Ok(())
    }

    /// True if `entity` was destroyed here (a tombstone pointing at this
    /// cell): real-bound messages for it are dropped, not forwarded.
    pub(super) fn destroyed_here(&self, entity: EntityId) -> bool {
        self.forward
            .get(entity)
            .is_some_and(|f| f.forward_to == self.id)
    }

    /// Drops a real-bound straggler for an entity destroyed here.
    pub(super) fn drop_destroyed(&mut self, entity: EntityId) {
        self.drop_msg(entity, DropReason::Destroyed);
    }
}
