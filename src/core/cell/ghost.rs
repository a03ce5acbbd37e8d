//! The ghost side of the protocol: creating, deleting, syncing and resyncing
//! ghosts, and learning where the real went.
//!
//! # Epoch rules (why ghosts need no buffering of control messages)
//!
//! Every ghost-bound message carries the sending real's epoch; the real's
//! epoch grows by one per migration. Messages from one real reach a haunt in
//! order (FIFO per pair), but messages from an old and a new real travel on
//! different channels and may cross. A haunt therefore keeps the newest epoch
//! it heard of (in the ghost, or in the `Gone` tombstone after deletion) and:
//!
//! - `CreateGhost(e)` creates (or re-creates from the snapshot) unless a newer
//!   epoch deleted or created it already (then it is stale);
//! - `DeleteGhost(e)` deletes unless the ghost is from a newer epoch, and
//!   leaves a tombstone at `e`, so an older `CreateGhost` still in flight on
//!   another channel cannot resurrect a ghost nobody tracks;
//! - `SetNextReal(e)` and `Sync(e)` move `real_at` forward only if `e` is newer.
//!
//! Sync messages are ordered by version, not epoch: one reorder buffer per
//! ghost applies them in version order across migrations.
//!
//! Owns nothing beyond the `impl Cell` handlers; must not touch reals.

use crate::core::ids::{CellId, EntityId};
use crate::core::time::Time;

use super::counters::{CellEvent, DropReason};
use super::forward::ForwardEntry;
use super::machine::Cell;
use super::msg::{CellMsg, ToReal, ToRealBody};
use super::residency::{transition, History, Residency};
use super::sync::{GhostSnapshot, Push, ReorderBuffer, SyncMsg};
use super::table::{Entry, GhostPart, Part};

impl Cell {
    /// Drop reason for a ghost-bound message reaching a real at `real_epoch`.
    fn for_real(epoch: u64, real_epoch: u64) -> DropReason {
        if epoch < real_epoch {
            DropReason::StaleEpoch
        } else {
            DropReason::GhostMsgForReal
        }
    }

    pub(super) fn on_create_ghost(
        &mut self,
        now: Time,
        from: CellId,
        entity: EntityId,
        epoch: u64,
        snapshot: GhostSnapshot,
    ) {
        let prev = self.residency(entity);
        match prev {
            Some(Residency::Real { epoch: re }) => {
                self.drop_msg(entity, Self::for_real(epoch, re));
                return;
            }
            Some(Residency::Ghost { epoch: ge, .. } | Residency::Gone { epoch: ge, .. })
                if epoch < ge =>
            {
                self.drop_msg(entity, DropReason::StaleEpoch);
                return;
            }
            _ => {}
        }
        let version = snapshot.version;
        let entry = match self.entities.remove(entity) {
            // Re-creation: keep early messages past the snapshot, and never go
            // back to an older state than the one already applied.
            Some(mut old) => {
                let g = old.ghost_mut().expect("ghost");
                let newer = g.reorder.reset_to(version);
                g.real_at = from;
                g.epoch = epoch;
                g.since = now;
                if newer {
                    old.pos = snapshot.pos;
                    old.props = snapshot.props;
                    old.version = version;
                }
                old
            }
            None => Entry {
                id: entity,
                pos: snapshot.pos,
                props: snapshot.props,
                version,
                part: Part::Ghost(GhostPart {
                    real_at: from,
                    epoch,
                    reorder: ReorderBuffer::at(version),
                    since: now,
                }),
                history: self
                    .forward
                    .remove(entity)
                    .map(|f| f.history)
                    .unwrap_or_default(),
            },
        };
        let mut entry = entry;
        let to = entry.residency();
        transition(&mut entry.history, now, prev, Some(to));
        let next = entry.ghost_mut().and_then(|g| g.reorder.pop_ready());
        let version = entry.version;
        self.entities.insert(entry);
        self.events
            .push_back(CellEvent::GhostAdded { entity, version });
        let ack = ToReal {
            entity,
            hops: 0,
            body: ToRealBody::GhostCreated {
                cell: self.id,
                epoch,
                version,
            },
        };
        self.send(from, CellMsg::ToReal(ack));
        if let Some(m) = next {
            self.apply_ready(entity, m);
        }
    }

    pub(super) fn on_delete_ghost(
        &mut self,
        now: Time,
        from: CellId,
        entity: EntityId,
        epoch: u64,
    ) {
        let prev = self.residency(entity);
        let until = now + std::time::Duration::from_millis(self.params.forward_ttl_ms);
        let history = match prev {
            Some(Residency::Real { epoch: re }) => {
                self.drop_msg(entity, Self::for_real(epoch, re));
                return;
            }
            Some(Residency::Ghost { epoch: ge, .. } | Residency::Gone { epoch: ge, .. })
                if epoch < ge =>
            {
                self.drop_msg(entity, DropReason::StaleEpoch);
                return;
            }
            Some(Residency::Ghost { .. }) => {
                self.events.push_back(CellEvent::GhostRemoved { entity });
                self.entities.remove(entity).expect("ghost").history
            }
            Some(Residency::Gone { .. }) => self.forward.remove(entity).expect("gone").history,
            None => History::default(),
        };
        let mut entry = ForwardEntry {
            forward_to: from,
            epoch,
            until,
            history,
        };
        let to = entry.residency();
        transition(&mut entry.history, now, prev, Some(to));
        self.forward
            .insert(entity, entry, self.params.forward_table_max);
    }

    pub(super) fn on_sync(&mut self, now: Time, from: CellId, epoch: u64, msg: SyncMsg) {
        let entity = msg.entity;
        let max = self.params.reorder_buffer_max;
        let Some(e) = self.entities.get_mut(entity) else {
            self.drop_msg(entity, DropReason::NoGhost);
            return;
        };
        let prev = e.residency();
        let Some(g) = e.ghost_mut() else {
            let re = prev.epoch();
            self.drop_msg(entity, Self::for_real(epoch, re));
            return;
        };
        if epoch > g.epoch {
            g.real_at = from;
            g.epoch = epoch;
            let to = e.residency();
            transition(&mut e.history, now, Some(prev), Some(to));
        }
        let g = e.ghost_mut().expect("ghost");
        match g.reorder.push(now, msg, max) {
            (Push::Ready, Some(m)) => self.apply_ready(entity, m),
            (Push::Buffered, _) => {}
            (Push::Duplicate, _) => self.drop_msg(entity, DropReason::DuplicateSync),
            (Push::Full, _) => {
                self.drop_msg(entity, DropReason::ReorderBufferFull);
                self.request_resync(now, entity);
            }
            (Push::Ready, None) => unreachable!("ready without message"),
        }
    }

    /// Applies `m` (the next version) and every buffered message after it.
    fn apply_ready(&mut self, entity: EntityId, m: SyncMsg) {
        let mut next = Some(m);
        while let Some(m) = next {
            let e = self.entities.get_mut(entity).expect("ghost");
            e.pos = m.pos;
            e.props = m.payload;
            e.version = m.version;
            let g = e.ghost_mut().expect("ghost");
            g.reorder.mark_applied(m.version);
            next = g.reorder.pop_ready();
            self.counters.syncs_applied += 1;
            self.events.push_back(CellEvent::GhostSynced {
                entity,
                version: m.version,
            });
        }
    }

    pub(super) fn on_set_next_real(
        &mut self,
        now: Time,
        entity: EntityId,
        epoch: u64,
        next: CellId,
    ) {
        if self.forward.get(entity).is_some() {
            self.forward.update(entity, next, epoch);
            return;
        }
        let Some(e) = self.entities.get_mut(entity) else {
            self.drop_msg(entity, DropReason::NoGhost);
            return;
        };
        let prev = e.residency();
        match e.ghost_mut() {
            Some(g) if epoch > g.epoch => {
                g.real_at = next;
                g.epoch = epoch;
                let to = e.residency();
                transition(&mut e.history, now, Some(prev), Some(to));
            }
            Some(_) => self.drop_msg(entity, DropReason::StaleEpoch),
            None => self.drop_msg(entity, Self::for_real(epoch, prev.epoch())),
        }
    }

    pub(super) fn on_resync(
        &mut self,
        now: Time,
        from: CellId,
        entity: EntityId,
        epoch: u64,
        snapshot: GhostSnapshot,
    ) {
        let Some(e) = self.entities.get_mut(entity) else {
            self.drop_msg(entity, DropReason::NoGhost);
            return;
        };
        let prev = e.residency();
        let Some(g) = e.ghost_mut() else {
            self.drop_msg(entity, Self::for_real(epoch, prev.epoch()));
            return;
        };
        if epoch > g.epoch {
            g.real_at = from;
            g.epoch = epoch;
        }
        if snapshot.version <= g.reorder.applied() {
            self.drop_msg(entity, DropReason::DuplicateSync);
            return;
        }
        g.reorder.reset_to(snapshot.version);
        let next = g.reorder.pop_ready();
        e.pos = snapshot.pos;
        e.props = snapshot.props;
        e.version = snapshot.version;
        let to = e.residency();
        if to != prev {
            transition(&mut e.history, now, Some(prev), Some(to));
        }
        self.events.push_back(CellEvent::GhostResynced {
            entity,
            version: snapshot.version,
        });
        if let Some(m) = next {
            self.apply_ready(entity, m);
        }
    }

    /// Asks the real for a full resync of `entity`'s ghost here.
    pub(super) fn request_resync(&mut self, now: Time, entity: EntityId) {
        let id = self.id;
        let Some(g) = self.entities.get_mut(entity).and_then(|e| e.ghost_mut()) else {
            return;
        };
        g.reorder.restart_gap_timer(now);
        let (to, applied) = (g.real_at, g.reorder.applied());
        self.counters.resync_requests += 1;
        let body = ToRealBody::ResyncRequest { cell: id, applied };
        self.send(
            to,
            CellMsg::ToReal(ToReal {
                entity,
                hops: 0,
                body,
            }),
        );
    }

    /// Every check: ghosts whose version gap outlived the timeout ask for a
    /// resync (and again after each further timeout).
    pub(super) fn check_gaps(&mut self, now: Time) {
        let timeout = std::time::Duration::from_millis(self.params.resync_gap_timeout_ms);
        let mut late = std::mem::take(&mut self.scratch_ids);
        late.clear();
        for e in self.entities.iter() {
            if let Part::Ghost(g) = &e.part {
                if g.reorder
                    .gap_since()
                    .is_some_and(|t| now.saturating_since(t) >= timeout)
                {
                    late.push(e.id);
                }
            }
        }
        late.sort_unstable();
        for &entity in &late {
            self.request_resync(now, entity);
        }
        self.scratch_ids = late;
    }
}
