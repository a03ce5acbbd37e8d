//! The real side of the protocol: real-bound messages (inputs, calls, ghost
//! acks, resync requests), forwarding them when the real is elsewhere, running
//! queued inputs and calls, and emitting one sync message per changed real.
//!
//! # Forwarding
//!
//! A real-bound message that reaches a cell where the entity is a ghost goes
//! to the ghost's `real_at`; where it is `Gone`, to the forwarding entry's
//! `forward_to`; where it is unknown, it is held until the entity arrives
//! (`early.rs`), then dropped (`UnknownEntity`) if it never does. Each
//! hop counts; past `forward_hops_max` it is dropped. A ghost's `real_at` can
//! lag (a `SetNextReal` still in flight), but every cell the real left knows
//! where it went next, and the old real's `Onload` precedes anything it
//! forwards on the same channel, so a message always catches up.
//!
//! Owns nothing beyond the `impl Cell` handlers.

use std::sync::Arc;

use crate::core::entity::{Fill, SyncMsg};
use crate::core::ids::{CellId, EntityId};
use crate::core::time::Time;

use super::counters::{CellEvent, DropReason};
use super::machine::{CatchUp, Cell};
use super::msg::{CallKind, CellMsg, Haunt, HauntState, Outgoing, Source, ToReal, ToRealBody};
use super::seq_buffer::SeqPush;
use super::table::Part;
use crate::core::payload::Payload;

impl Cell {
    pub(super) fn on_to_real(&mut self, now: Time, from: Source, msg: ToReal) {
        let entity = msg.entity;
        let next_hop = match self.entities.get(entity).map(|e| &e.part) {
            Some(Part::Real(_)) => None,
            Some(Part::Ghost(g)) => Some(g.real_at),
            None if self.destroyed_here(entity) => {
                self.drop_destroyed(entity);
                return;
            }
            None => match self.forward.get(entity) {
                Some(f) => Some(f.forward_to),
                None => {
                    // Perhaps ahead of its CreateGhost (see `early.rs`).
                    self.hold_early(now, from, msg);
                    return;
                }
            },
        };
        if let Some(to) = next_hop {
            self.forward_to_real(to, msg);
            return;
        }
        match msg.body {
            ToRealBody::Input(input) => self.queue_input(entity, input.seq, input.data),
            ToRealBody::Call(call) => {
                let max = self.params.pending_calls_max;
                let r = self.real_part(entity);
                if r.calls.len() >= max {
                    self.drop_msg(entity, DropReason::CallQueueFull);
                } else {
                    r.calls.push_back(call);
                    self.busy_reals.push(entity);
                }
            }
            ToRealBody::Destroy => {
                let _ = self.destroy_real(now, entity);
            }
            ToRealBody::GhostCreated { cell, version, .. } => {
                self.on_ghost_created(entity, cell, version)
            }
            ToRealBody::ResyncRequest {
                cell,
                applied,
                full,
            } => {
                if self.real_part(entity).haunt(cell).is_none() {
                    self.drop_msg(entity, DropReason::StaleAck);
                } else {
                    self.owe_catch_up(entity, cell, applied, full);
                }
            }
        }
    }

    fn real_part(&mut self, entity: EntityId) -> &mut super::table::RealPart {
        self.entities
            .get_mut(entity)
            .and_then(|e| e.real_mut())
            .expect("real")
    }

    fn forward_to_real(&mut self, to: CellId, mut msg: ToReal) {
        if msg.hops >= self.params.forward_hops_max {
            self.drop_msg(msg.entity, DropReason::ForwardHopsExceeded);
            return;
        }
        debug_assert_ne!(to, self.id, "forwarding to itself");
        msg.hops += 1;
        self.counters.forwards += 1;
        self.send(to, CellMsg::ToReal(msg));
    }

    fn queue_input(&mut self, entity: EntityId, seq: u64, data: Payload) {
        let max = self.params.input_buffer_max;
        let r = self.real_part(entity);
        // A full buffer hands the input back (no copy of every input for
        // the rare retry).
        match r.inputs.try_push(seq, data, max) {
            Ok(SeqPush::Held) => self.busy_reals.push(entity),
            Ok(SeqPush::Full) => unreachable!("try_push hands a full buffer's item back"),
            Ok(SeqPush::Duplicate) => self.drop_msg(entity, DropReason::DuplicateInput),
            Err(data) => {
                // Never stall: give up on the missing inputs (the held ones
                // become ready and drain next tick) and keep this one, within
                // a hard cap of twice the bound.
                r.inputs.skip_gap();
                let _ = r.inputs.push(seq, data, max.saturating_mul(2));
                self.busy_reals.push(entity);
                self.drop_msg(entity, DropReason::InputBufferFull);
            }
        }
    }

    fn on_ghost_created(&mut self, entity: EntityId, cell: CellId, version: u64) {
        let me = self.id;
        let queue_full = self.catch_ups.len() >= self.params.catch_up_queue_max;
        let r = self.real_part(entity);
        let Some(h) = r.haunt_mut(cell) else {
            self.drop_msg(entity, DropReason::StaleAck);
            return;
        };
        let HauntState::Creating { sent_by, .. } = h.state else {
            self.drop_msg(entity, DropReason::StaleAck);
            return;
        };
        if sent_by == me {
            h.state = HauntState::Created;
            return;
        }
        // Created by an older real on another channel: it got none of our
        // syncs (held back until this ack), so it is caught up at the next
        // tick. If that cannot be queued, the haunt stays `Creating` and is
        // re-created after the timeout.
        if queue_full {
            self.drop_msg(entity, DropReason::CatchUpQueueFull);
            return;
        }
        h.state = HauntState::Created;
        self.owe_catch_up(entity, cell, version, false);
    }

    fn owe_catch_up(&mut self, entity: EntityId, cell: CellId, have: u64, full: bool) {
        if let Some(c) = self
            .catch_ups
            .iter_mut()
            .find(|c| c.entity == entity && c.cell == cell)
        {
            c.have = c.have.min(have);
            c.full |= full;
            return;
        }
        if self.catch_ups.len() >= self.params.catch_up_queue_max {
            self.drop_msg(entity, DropReason::CatchUpQueueFull);
            return;
        }
        self.catch_ups.push(CatchUp {
            entity,
            cell,
            have,
            full,
        });
    }

    /// Runs the owed catch-ups (after this tick's syncs, so the real has no
    /// unflushed change): the cached messages after `have` if the cache
    /// reaches back that far, else a snapshot. A catch-up for an entity that
    /// left or a haunt it dropped is skipped (the ghost asks again).
    pub(super) fn run_catch_ups(&mut self, now: Time) {
        let owed = std::mem::take(&mut self.catch_ups);
        for c in &owed {
            let Some(e) = self.entities.get_mut(c.entity) else {
                continue;
            };
            let Part::Real(r) = &mut e.part else { continue };
            if r.haunt(c.cell).is_none() {
                continue;
            }
            let epoch = r.epoch;
            let fill = if c.full {
                Fill::ResyncNeeded
            } else {
                r.cache.fill(c.have)
            };
            match fill {
                Fill::UpToDate => {}
                Fill::Msgs(msgs) => {
                    for m in msgs {
                        let sync = CellMsg::Sync {
                            epoch,
                            msg: Arc::new(m.clone()),
                        };
                        self.out.push_back(Outgoing::cell(c.cell, sync));
                    }
                }
                Fill::ResyncNeeded => {
                    let snapshot = r.emitter.ghost_snapshot(now, &e.entity);
                    self.counters.resyncs_sent += 1;
                    let sync = CellMsg::Sync {
                        epoch,
                        msg: Arc::new(snapshot),
                    };
                    self.out.push_back(Outgoing::cell(c.cell, sync));
                }
            }
        }
        self.catch_ups = owed;
        self.catch_ups.clear();
    }

    /// Runs every real's ready inputs (in sequence order) and queued calls
    /// (combat calls in the real's combat state, the others as events).
    ///
    /// Only the reals given an input or a call since the last run can have
    /// any (`busy_reals`: nothing else makes an input ready or queues a
    /// call), so only those are visited, in slab order (the order a walk
    /// over every entry takes, so the game sees its events in the same
    /// order), each once: a walk over every entry read each real's boxed
    /// part, a cache miss apiece, every tick, for the half or less of the
    /// reals that had news.
    pub(super) fn run_reals(&mut self, now: Time) {
        let mut combat = std::mem::take(&mut self.scratch_calls);
        let mut at = std::mem::take(&mut self.scratch_at);
        (self.entities).positions_in_order(self.busy_reals.drain(..), &mut at);
        for &i in &at {
            let e = self.entities.at_mut(i);
            let Part::Real(r) = &mut e.part else { continue };
            // Calls first: what an older real deferred to this one (client
            // inputs it released but could not apply, their replies) came
            // behind the `Onload`, ahead of any input this real releases,
            // and goes to the game in that order (inputs in seq order across
            // a migration; acks never going back).
            while let Some(call) = r.calls.pop_front() {
                self.counters.calls_run += 1;
                if call.kind == CallKind::Combat {
                    combat.push((e.id, call.data));
                    continue;
                }
                self.events.push_back(CellEvent::CallRun {
                    entity: e.id,
                    id: call.id,
                    data: call.data,
                });
            }
            while let Some((seq, data)) = r.inputs.pop_ready() {
                self.counters.inputs_applied += 1;
                self.events.push_back(CellEvent::InputApplied {
                    entity: e.id,
                    seq,
                    data,
                });
            }
        }
        self.scratch_at = at;
        #[cfg(debug_assertions)]
        self.verify_busy_reals();
        for (entity, data) in combat.drain(..) {
            self.run_combat_call(now, entity, &data);
        }
        self.scratch_calls = combat;
    }

    /// Checks that every real with a queued call or a ready input is listed
    /// in `busy_reals` (`run_reals` visits no other).
    ///
    /// # Panics
    /// On the first real that is not.
    pub(super) fn verify_busy_reals(&self) {
        let mut busy = self.busy_reals.clone();
        busy.sort_unstable();
        for e in self.entities.iter() {
            let Some(r) = e.real() else { continue };
            if !r.calls.is_empty() || r.inputs.has_ready() {
                assert!(
                    busy.binary_search(&e.id).is_ok(),
                    "{} has a call or a ready input but is not listed busy",
                    e.id
                );
            }
        }
    }

    /// One sync message per changed real, built once and sent (one shared
    /// allocation) to every haunt that can take it: created, or being created
    /// on this cell's channel. Haunts inherited while still being created by
    /// an older real wait for their ack (then a catch-up).
    ///
    /// Only the reals listed in `changed_reals` can have a change (every
    /// way to change a real's entity goes through `real_entry`, a combat
    /// call or an arrival, which list it), so only those are visited, in
    /// slab order (the order of a walk over every entry: the same messages
    /// in the same order), each once. A walk over every entry read each
    /// real's boxed part and its entity's dirty state every tick, two cache
    /// misses apiece, for the half of the reals that move at 10 Hz on a
    /// 20 Hz tick and for every one that stands still.
    pub(super) fn emit_syncs(&mut self, now: Time) {
        #[cfg(debug_assertions)]
        self.verify_changed_reals();
        let me = self.id;
        let mut at = std::mem::take(&mut self.scratch_at);
        // (A real that left and came back in one tick is listed twice.)
        (self.entities).positions_in_order(self.changed_reals.drain(..), &mut at);
        for &i in &at {
            let e = self.entities.at_mut(i);
            e.listed_changed = false;
            let Part::Real(r) = &mut e.part else { continue };
            let Some(cs) = r.emitter.flush(now, &mut e.entity) else {
                continue;
            };
            if let Some(w) = self.views.watch_mut_hinted(e.id, &mut r.watch_hint) {
                w.observer.handle_own(cs.msg.version, cs.msg.kind, cs.own);
                self.views.owner_changed(r.watch_hint);
            }
            e.version = cs.msg.version;
            self.counters.syncs_built += 1;
            if cs.msg.kind.has_movement() && !self.views.moved(e.id, e.entity.core().pos) {
                self.counters.aoi_refused += 1;
            }
            let reachable = |h: &&Haunt| match h.state {
                HauntState::Created => true,
                HauntState::Creating { sent_by, .. } => sent_by == me,
            };
            if r.haunts.iter().any(|h| reachable(&h)) {
                // Serialised once for every ghost: they share one buffer.
                let msg: Arc<SyncMsg> = Arc::new(cs.msg);
                for h in r.haunts.iter().filter(reachable) {
                    let sync = CellMsg::Sync {
                        epoch: r.epoch,
                        msg: msg.clone(),
                    };
                    self.out.push_back(Outgoing::cell(h.cell, sync));
                }
                let copy = SyncMsg::clone(&msg);
                r.cache.push_keep(now, copy, r.emitter.spare());
            } else {
                // No ghost to share with (a lone cell): no shared copy. The
                // cache hands back a spent buffer for the next message.
                r.cache.push_keep(now, cs.msg, r.emitter.spare());
            }
            let high = &mut self.counters.sync_cache_len_max;
            *high = (*high).max(r.cache.len() as u64);
        }
        self.scratch_at = at;
    }

    /// Checks that every real with an unsynced change is listed in
    /// `changed_reals` (`emit_syncs` visits no other), and that every
    /// entry flagged listed is (or it would never be listed again).
    ///
    /// # Panics
    /// On the first real that is not.
    pub(super) fn verify_changed_reals(&self) {
        let mut listed = self.changed_reals.clone();
        listed.sort_unstable();
        for e in self.entities.iter() {
            let on_list = listed.binary_search(&e.id).is_ok();
            assert!(
                on_list || !e.listed_changed,
                "{} flagged listed changed but not on the list",
                e.id
            );
            if e.real().is_some() && e.entity.pending_kind().is_some() {
                assert!(
                    on_list && e.listed_changed,
                    "{} has a change to sync but is not listed changed",
                    e.id
                );
            }
        }
    }
}
