//! Migration: choosing a destination, offloading a real, onloading it.
//!
//! See the module doc of `cell` (the parent) for the step-by-step message
//! flow. The rules here:
//!
//! - **When**: a real migrates once it is outside its cell's rect inflated by
//!   `migrate_margin_m` (hysteresis against border walkers), or at once if
//!   its cell is merging (or gone from the layout).
//! - **Where**: the cell at its position, if that cell is not merging; for a
//!   merging cell, the nearest non-merging cell within `ghost_radius_m` (ties
//!   by id), else the cell at its position if not merging.
//! - **Only through a ghost**: the destination must hold the ghost (acked) or
//!   a `CreateGhost` must have been sent to it by this cell, i.e. on the same
//!   FIFO channel as the `Onload` (BigWorld's rule). Upkeep creates the
//!   destination's ghost in the same check if needed.
//! - **Caps**: at most `migrations_per_check_max` per check.
//! - **Layout versions**: an `Onload` carries the layout version its
//!   migration was decided under; the destination moves the real on only
//!   once its own layout is at least that new. Each shard applies tree
//!   changes when they reach it, so a lagging destination would otherwise
//!   hand the real straight back (ping-pong until it catches up).
//!
//! Owns nothing beyond the `impl Cell` migration steps.

use std::collections::VecDeque;

use crate::core::entity::{Audience, Entity, ReorderBuffer, SyncCache, SyncEmitter, SyncKind};
use crate::core::geom::{Rect, Vec3};
use crate::core::ids::{CellId, EntityId};
use crate::core::time::Time;

use super::counters::CellEvent;
use super::ghosting::Budget;
use super::layout::Layout;
use super::machine::{Cell, CellError};
use super::msg::{CellMsg, Haunt, HauntState, Onload};
use super::residency::transition;
use super::seq_buffer::SeqBuffer;
use super::table::{inputs_to_wire, Entry, GhostPart, Part, RealPart};

impl Cell {
    /// Every check: upkeep and (capped) migration for each real, in id order.
    pub(super) fn check_reals<L: Layout + ?Sized>(&mut self, now: Time, layout: &L) {
        let mut ids = std::mem::take(&mut self.scratch_ids);
        self.entities.real_ids(&mut ids);
        let own = layout.rect(self.id);
        let merging = own.is_none() || layout.is_merging(self.id);
        let version = layout.version();
        let mut budget = Budget::default();
        for &id in &ids {
            let e = self.entities.get(id).expect("real");
            let pos = e.entity.core().pos;
            // Handed over under a newer layout than ours: wait for it.
            let current = e.real().is_some_and(|r| r.layout_version_min <= version);
            if !current {
                self.counters.migrations_held += 1;
            }
            let dest = if current && budget.migrated < self.params.migrations_per_check_max {
                self.migration_dest(layout, own, merging, pos)
            } else {
                None
            };
            self.upkeep(now, layout, id, dest, &mut budget);
            if let Some(d) = dest.filter(|d| self.can_offload_to(id, *d)) {
                budget.migrated += 1;
                self.offload(now, id, d);
            }
        }
        self.scratch_ids = ids;
    }

    /// Where a real at `pos` should migrate now, if anywhere.
    fn migration_dest<L: Layout + ?Sized>(
        &self,
        layout: &L,
        own: Option<Rect>,
        merging: bool,
        pos: Vec3,
    ) -> Option<CellId> {
        let inside = own.is_some_and(|r| r.inflate(self.params.migrate_margin_m).contains(pos));
        if !merging && inside {
            return None;
        }
        let usable = |c: CellId| c != self.id && !layout.is_merging(c) && layout.rect(c).is_some();
        if merging {
            let mut near = Vec::new();
            let r = self.params.ghost_radius_m;
            layout.cells_meeting(&Rect::around(pos.x, pos.z, r), &mut near);
            let best = near
                .into_iter()
                .filter(|c| usable(*c))
                .filter_map(|c| layout.rect(c).map(|r| (r.dist2_to(pos), c)))
                .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            if let Some((_, c)) = best {
                return Some(c);
            }
        }
        layout.cell_at(pos).filter(|c| usable(*c))
    }

    /// True when `dest` has this real's ghost or was sent its creation on
    /// this cell's channel.
    fn can_offload_to(&self, id: EntityId, dest: CellId) -> bool {
        let r = self.entities.get(id).and_then(|e| e.real()).expect("real");
        match r.haunt(dest).map(|h| h.state) {
            Some(HauntState::Created) => true,
            Some(HauntState::Creating { sent_by, .. }) => sent_by == self.id,
            None => false,
        }
    }

    /// Sends real `id` to `dest`: `SetNextReal` to the other haunts, the
    /// `Onload` to `dest`, and the real becomes a ghost pointing at `dest`.
    ///
    /// # Panics
    /// If `id` is not real here or `dest` cannot take it (internal misuse).
    pub(super) fn offload(&mut self, now: Time, id: EntityId, dest: CellId) {
        self.offload_with(now, id, dest, true);
    }

    /// [`Cell::offload`]; `source_ghost` false for a move between spaces
    /// (the caller then drops the ghost left here).
    pub(super) fn offload_with(
        &mut self,
        now: Time,
        id: EntityId,
        dest: CellId,
        source_ghost: bool,
    ) {
        assert!(
            self.can_offload_to(id, dest),
            "offload of {id} to {dest} without a ghost"
        );
        let reorder = self.params.reorder();
        let ghost_cache = self.views.params.ghost_cache();
        let observer = self.detach_observer(id);
        let combat = self.take_combat(now, id);
        let e = self.entities.get_mut(id).expect("real");
        assert!(
            e.entity.pending_kind().is_none(),
            "offload of {id} with unsynced changes"
        );
        let prev = e.residency();
        let ty = e.entity.props().entity_type().clone();
        let mut state = Vec::new();
        e.entity.encode_snapshot(Audience::Real, &mut state);
        let mut ghost_state = Vec::new();
        e.entity.encode_snapshot(Audience::Ghost, &mut ghost_state);
        let mut ghost_entity = Entity::new_replica(id, ty.clone(), Audience::Ghost);
        ghost_entity
            .apply_payload(SyncKind::Snapshot, &ghost_state)
            .expect("a real's own ghost snapshot decodes");
        e.entity = ghost_entity;
        let ghost = Part::Ghost(GhostPart {
            real_at: dest,
            epoch: prev.epoch() + 1,
            reorder: ReorderBuffer::new(reorder, e.version),
            cache: Box::new(SyncCache::new(ghost_cache, e.version)),
            since: now,
        });
        let Part::Real(mut r) = std::mem::replace(&mut e.part, ghost) else {
            unreachable!("checked real");
        };
        let to = e.residency();
        transition(&mut e.history, now, Some(prev), Some(to));
        let epoch = r.epoch + 1;
        let haunts: Vec<Haunt> = r
            .haunts
            .iter()
            .copied()
            .filter(|h| h.cell != dest)
            .collect();
        let onload = Onload {
            entity: id,
            epoch,
            type_id: ty.id(),
            state,
            version: e.version,
            sync_cache: std::mem::replace(
                &mut r.cache,
                SyncCache::new(self.params.sync_cache(), 0),
            ),
            haunts,
            next_input: r.inputs.next(),
            early_inputs: inputs_to_wire(&mut r.inputs),
            pending_calls: r.calls.drain(..).collect(),
            next_downstream: r.next_downstream,
            has_proxy: r.has_proxy,
            observer,
            combat,
            // Layout versions of another space say nothing here.
            layout_version: if source_ghost { self.layout_version } else { 0 },
            source_ghost,
        };
        for h in &onload.haunts {
            self.out.push_back(super::msg::Outgoing::cell(
                h.cell,
                CellMsg::SetNextReal {
                    entity: id,
                    epoch,
                    next: dest,
                },
            ));
        }
        self.send(dest, CellMsg::Onload(Box::new(onload)));
        self.counters.migrations_out += 1;
        self.events.push_back(CellEvent::BecameGhost {
            entity: id,
            to: dest,
        });
    }

    /// Handles an `Onload`: the entity becomes real here and takes over the
    /// haunts (minus this cell, plus the cell it came from).
    ///
    /// # Panics
    /// If the entity is already real here or a newer epoch is known (two
    /// reals would exist), or its state does not decode with this cell's
    /// type registry (the real would be lost): protocol or deployment bugs.
    pub(super) fn on_onload(&mut self, now: Time, from: CellId, o: Onload) {
        let entity = o.entity;
        let prev = self.residency(entity);
        if let Some(p) = prev {
            assert!(
                !matches!(p, super::residency::Residency::Real { .. }) && p.epoch() <= o.epoch,
                "onload of {entity} at epoch {} meets {p:?}; history {:?}",
                o.epoch,
                self.history(entity)
            );
        }
        let history = match self.entities.remove(entity) {
            Some(old) => old.history,
            None => self
                .forward
                .remove(entity)
                .map(|f| f.history)
                .unwrap_or_default(),
        };
        let mut haunts: Vec<Haunt> = o.haunts.into_iter().filter(|h| h.cell != self.id).collect();
        if o.source_ghost && !haunts.iter().any(|h| h.cell == from) {
            haunts.push(Haunt {
                cell: from,
                state: HauntState::Created,
                since: now,
            });
        }
        let ty = self
            .types
            .get(o.type_id)
            .unwrap_or_else(|| {
                panic!(
                    "onload of {entity}: type {:?} unknown (registries differ)",
                    o.type_id
                )
            })
            .clone();
        let mut state = Entity::new_replica(entity, ty, Audience::Real);
        if let Err(err) = state.apply_payload(SyncKind::Snapshot, &o.state) {
            panic!("onload of {entity}: state does not decode ({err:?}); the real would be lost");
        }
        debug_assert!(
            state.pending_kind().is_none(),
            "a decoded state has nothing to sync"
        );
        let max = self.params.input_buffer_max;
        let early = o.early_inputs.into_iter().map(|i| (i.seq, i.data));
        let real = RealPart {
            epoch: o.epoch,
            emitter: SyncEmitter::resume(o.version),
            cache: o.sync_cache,
            haunts,
            inputs: SeqBuffer::restore(o.next_input, early, max),
            calls: VecDeque::from(o.pending_calls),
            next_downstream: o.next_downstream,
            has_proxy: o.has_proxy,
            combat: self.restore_combat(entity, &o.combat),
            since: now,
            layout_version_min: o.layout_version,
            watch_hint: u32::MAX,
            combat_listed: false,
            ack_due: 0,
        };
        if !self.views.put(&state) {
            self.counters.aoi_refused += 1;
        }
        let mut entry = Entry {
            id: entity,
            entity: state,
            version: o.version,
            part: Part::Real(Box::new(real)),
            history,
            listed_changed: true,
        };
        let to = entry.residency();
        transition(&mut entry.history, now, prev, Some(to));
        // What it brought (held inputs, deferred calls) runs at its first
        // tick here.
        self.busy_reals.push(entity);
        self.changed_reals.push(entity);
        if let Part::Real(r) = &mut entry.part {
            super::fight::list_combat(&mut self.combat_reals, entity, r);
        }
        self.entities.insert(entry);
        self.counters.migrations_in += 1;
        if o.has_proxy {
            self.attach_observer(entity, &o.observer);
        }
        self.events.push_back(CellEvent::BecameReal {
            entity,
            from: Some(from),
        });
        self.notify_proxy(entity);
    }

    /// Teleports real `entity` to `pos`, possibly far away: same cell, a plain
    /// move; another cell, the offload path (a fresh `CreateGhost`, then the
    /// `Onload`, on the same channel). Pending changes are synced first.
    ///
    /// # Errors
    /// `NotReal`, `OutsideWorld`, or `DestinationMerging`.
    pub fn teleport<L: Layout + ?Sized>(
        &mut self,
        now: Time,
        entity: EntityId,
        pos: Vec3,
        layout: &L,
    ) -> Result<(), CellError> {
        self.real_entry(entity)?;
        self.layout_version = layout.version();
        let dest = layout.cell_at(pos).ok_or(CellError::OutsideWorld)?;
        if dest == self.id {
            return self.move_real(entity, pos);
        }
        if layout.is_merging(dest) {
            return Err(CellError::DestinationMerging(dest));
        }
        self.move_real(entity, pos)?;
        self.emit_syncs(now);
        self.run_catch_ups(now);
        let me = self.id;
        let e = self.entities.get_mut(entity).expect("real");
        let type_id = e.entity.core().type_id;
        let Part::Real(r) = &mut e.part else {
            unreachable!("real")
        };
        let snapshot = r.emitter.ghost_snapshot(now, &e.entity);
        r.haunts.retain(|h| h.cell != dest);
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
        self.offload(now, entity, dest);
        Ok(())
    }
}
