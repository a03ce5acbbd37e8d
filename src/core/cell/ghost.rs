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
//! ghost applies them in version order across migrations; a snapshot (the
//! answer to a resync request) jumps forward.
//!
//! Owns nothing beyond the `impl Cell` handlers; must not touch reals.

use std::sync::Arc;

use crate::core::entity::{
    Audience, Entity, EntityTypeId, Offered, ReorderBuffer, SyncCache, SyncKind, SyncMsg,
};
use crate::core::ids::{CellId, EntityId};
use crate::core::time::Time;

use super::counters::{CellEvent, DropReason};
use super::forward::ForwardEntry;
use super::machine::Cell;
use super::msg::{CellMsg, ToReal, ToRealBody};
use super::residency::{transition, History, Residency};
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
        type_id: EntityTypeId,
        snapshot: SyncMsg,
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
        if snapshot.kind != SyncKind::Snapshot || snapshot.entity != entity {
            self.drop_msg(entity, DropReason::BadPayload);
            return;
        }
        let version = snapshot.version;
        let mut entry = match self.entities.remove(entity) {
            // Re-creation: keep early messages past the snapshot, never go
            // back to an older state than the one already applied.
            Some(mut old) => {
                let g = old.ghost_mut().expect("ghost");
                g.real_at = from;
                g.epoch = epoch;
                g.since = now;
                if version > g.reorder.applied() {
                    g.reorder.handle_msg(now, snapshot);
                }
                old
            }
            None => {
                let Some(entry) = self.new_ghost(now, from, epoch, type_id, &snapshot) else {
                    self.drop_msg(entity, DropReason::BadPayload);
                    return;
                };
                if !self.views.put(&entry.entity) {
                    self.counters.aoi_refused += 1;
                }
                entry
            }
        };
        let to = entry.residency();
        transition(&mut entry.history, now, prev, Some(to));
        self.entities.insert(entry);
        self.drain_ready(now, entity);
        let version = self.entities.get(entity).expect("ghost").version;
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
    }

    /// A ghost entry built from `snapshot`, or `None` if the type is unknown
    /// or the snapshot does not decode.
    fn new_ghost(
        &mut self,
        now: Time,
        from: CellId,
        epoch: u64,
        type_id: EntityTypeId,
        snapshot: &SyncMsg,
    ) -> Option<Entry> {
        let entity = snapshot.entity;
        let ty = self.types.get(type_id)?.clone();
        let mut replica = Entity::new_replica(entity, ty, Audience::Ghost);
        replica
            .apply_payload(SyncKind::Snapshot, snapshot.ghost_payload())
            .ok()?;
        let history = self
            .forward
            .remove(entity)
            .map(|f| f.history)
            .unwrap_or_default();
        Some(Entry {
            id: entity,
            listed_changed: false,
            entity: replica,
            version: snapshot.version,
            part: Part::Ghost(GhostPart {
                real_at: from,
                epoch,
                reorder: ReorderBuffer::new(self.params.reorder(), snapshot.version),
                cache: Box::new(SyncCache::new(
                    self.views.params.ghost_cache(),
                    snapshot.version,
                )),
                since: now,
            }),
            history,
        })
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
                self.views.remove(entity);
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

    pub(super) fn on_sync(&mut self, now: Time, from: CellId, epoch: u64, msg: Arc<SyncMsg>) {
        let entity = msg.entity;
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
            let to = e.residency();
            transition(&mut e.history, now, Some(prev), Some(to));
        }
        let g = e.ghost_mut().expect("ghost");
        let msg = Arc::try_unwrap(msg).unwrap_or_else(|shared| (*shared).clone());
        let offered = g.reorder.handle_msg(now, msg);
        let buffered = g.reorder.pending() as u64;
        let high = &mut self.counters.reorder_buffered_max;
        *high = (*high).max(buffered);
        match offered {
            Offered::Ready | Offered::Buffered => {}
            Offered::Duplicate => self.drop_msg(entity, DropReason::DuplicateSync),
            Offered::Overflow => self.drop_msg(entity, DropReason::ReorderBufferFull),
        }
        self.drain_ready(now, entity);
    }

    /// Applies every released message of `entity`'s ghost, then asks for a
    /// resync if one is due (overflow) or the state is damaged.
    fn drain_ready(&mut self, now: Time, entity: EntityId) {
        let mut damaged = false;
        loop {
            let Some(e) = self.entities.get_mut(entity) else {
                return;
            };
            let Some(g) = e.ghost_mut() else { return };
            let Some(m) = g.reorder.poll_ready() else {
                break;
            };
            if e.entity.apply_payload(m.kind, m.ghost_payload()).is_err() {
                damaged = true;
            }
            e.version = m.version;
            let (version, kind) = (m.version, m.kind);
            if let Some(g) = e.ghost_mut() {
                g.cache.push(now, m);
                let high = &mut self.counters.sync_cache_len_max;
                *high = (*high).max(g.cache.len() as u64);
            }
            let moved = kind.has_movement() || kind == SyncKind::Snapshot;
            if moved && !self.views.moved(entity, e.entity.core().pos) {
                self.counters.aoi_refused += 1;
            }
            let event = if kind == SyncKind::Snapshot {
                CellEvent::GhostResynced { entity, version }
            } else {
                self.counters.syncs_applied += 1;
                CellEvent::GhostSynced { entity, version }
            };
            self.events.push_back(event);
        }
        if damaged {
            self.drop_msg(entity, DropReason::BadPayload);
        }
        self.poll_resync(now, entity, damaged);
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

    /// Sends a resync request for `entity`'s ghost if its buffer says one is
    /// due, or a full one at once if `damaged`.
    fn poll_resync(&mut self, now: Time, entity: EntityId, damaged: bool) {
        let id = self.id;
        let Some(g) = self.entities.get_mut(entity).and_then(|e| e.ghost_mut()) else {
            return;
        };
        let due = g.reorder.poll_resync(now).map(|r| r.have);
        let (to, applied) = match (due, damaged) {
            (Some(have), _) => (g.real_at, have),
            (None, true) => (g.real_at, g.reorder.applied()),
            (None, false) => return,
        };
        self.counters.resync_requests += 1;
        let body = ToRealBody::ResyncRequest {
            cell: id,
            applied,
            full: damaged,
        };
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
    /// resync (and again after each retry period).
    pub(super) fn check_gaps(&mut self, now: Time) {
        let mut gaps = std::mem::take(&mut self.scratch_ids);
        gaps.clear();
        for e in self.entities.iter() {
            if let Part::Ghost(g) = &e.part {
                if g.reorder.has_gap() {
                    gaps.push(e.id);
                }
            }
        }
        gaps.sort_unstable();
        for &entity in &gaps {
            self.poll_resync(now, entity, false);
        }
        self.scratch_ids = gaps;
    }
}
