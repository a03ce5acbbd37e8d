//! The real side of the protocol: real-bound messages (inputs, calls, ghost
//! acks, resync requests), forwarding them when the real is elsewhere, running
//! queued inputs and calls, and emitting one sync message per changed real.
//!
//! # Forwarding
//!
//! A real-bound message that reaches a cell where the entity is a ghost goes
//! to the ghost's `real_at`; where it is `Gone`, to the forwarding entry's
//! `forward_to`; where it is unknown, it is dropped (`UnknownEntity`). Each
//! hop counts; past `forward_hops_max` it is dropped. A ghost's `real_at` can
//! lag (a `SetNextReal` still in flight), but every cell the real left knows
//! where it went next, and the old real's `Onload` precedes anything it
//! forwards on the same channel, so a message always catches up.
//!
//! Owns nothing beyond the `impl Cell` handlers.

use crate::core::ids::{CellId, EntityId};
use crate::core::time::Time;

use super::counters::{CellEvent, DropReason};
use super::machine::Cell;
use super::msg::{CellMsg, HauntState, Source, ToReal, ToRealBody};
use super::seq_buffer::SeqPush;
use super::sync::SyncMsg;
use super::table::Part;

impl Cell {
    pub(super) fn on_to_real(&mut self, now: Time, _from: Source, msg: ToReal) {
        let entity = msg.entity;
        let next_hop = match self.entities.get(entity).map(|e| &e.part) {
            Some(Part::Real(_)) => None,
            Some(Part::Ghost(g)) => Some(g.real_at),
            None => match self.forward.get(entity) {
                Some(f) => Some(f.forward_to),
                None => {
                    self.drop_msg(entity, DropReason::UnknownEntity);
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
                let r = self
                    .real_entry(entity)
                    .expect("real")
                    .real_mut()
                    .expect("real");
                if r.calls.len() >= max {
                    self.drop_msg(entity, DropReason::CallQueueFull);
                } else {
                    r.calls.push_back(call);
                }
            }
            ToRealBody::GhostCreated { cell, version, .. } => {
                self.on_ghost_created(entity, cell, version)
            }
            ToRealBody::ResyncRequest { cell, applied } => {
                self.on_resync_request(now, entity, cell, applied)
            }
        }
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

    fn queue_input(&mut self, entity: EntityId, seq: u64, data: std::sync::Arc<[u8]>) {
        let max = self.params.input_buffer_max;
        let r = self
            .real_entry(entity)
            .expect("real")
            .real_mut()
            .expect("real");
        match r.inputs.push(seq, data.clone(), max) {
            SeqPush::Held => {}
            SeqPush::Duplicate => self.drop_msg(entity, DropReason::DuplicateInput),
            SeqPush::Full => {
                // Never stall: give up on the missing inputs (the held ones
                // become ready and drain next tick) and keep this one, within
                // a hard cap of twice the bound.
                r.inputs.skip_gap();
                let _ = r.inputs.push(seq, data, max.saturating_mul(2));
                self.drop_msg(entity, DropReason::InputBufferFull);
            }
        }
    }

    fn on_ghost_created(&mut self, entity: EntityId, cell: CellId, version: u64) {
        let me = self.id;
        let r = self
            .real_entry(entity)
            .expect("real")
            .real_mut()
            .expect("real");
        let Some(h) = r.haunt_mut(cell) else {
            self.drop_msg(entity, DropReason::StaleAck);
            return;
        };
        let HauntState::Creating { sent_by, .. } = h.state else {
            self.drop_msg(entity, DropReason::StaleAck);
            return;
        };
        h.state = HauntState::Created;
        // A ghost created by an older real on another channel got none of our
        // syncs (they are held back until this ack): catch it up.
        if sent_by != me {
            self.catch_up(entity, cell, version);
        }
    }

    fn on_resync_request(&mut self, _now: Time, entity: EntityId, cell: CellId, applied: u64) {
        let r = self
            .real_entry(entity)
            .expect("real")
            .real_mut()
            .expect("real");
        if r.haunt(cell).is_none() {
            self.drop_msg(entity, DropReason::StaleAck);
            return;
        }
        self.catch_up(entity, cell, applied);
    }

    /// Sends `cell` everything after `version`: the cached messages if the
    /// cache reaches back that far, else a full snapshot.
    fn catch_up(&mut self, entity: EntityId, cell: CellId, version: u64) {
        let e = self.entities.get(entity).expect("real");
        let r = e.real().expect("real");
        let epoch = r.epoch;
        if e.version <= version {
            return;
        }
        if let Some(msgs) = r.cache.since(version) {
            for msg in msgs {
                let sync = CellMsg::Sync {
                    epoch,
                    msg: msg.clone(),
                };
                self.out.push_back(super::msg::Outgoing::cell(cell, sync));
            }
            return;
        }
        let snapshot = e.snapshot();
        self.counters.resyncs_sent += 1;
        self.send(
            cell,
            CellMsg::Resync {
                entity,
                epoch,
                snapshot,
            },
        );
    }

    /// Runs every real's ready inputs (in sequence order) and queued calls.
    pub(super) fn run_reals(&mut self) {
        for e in self.entities.iter_mut() {
            let Part::Real(r) = &mut e.part else { continue };
            while let Some((seq, data)) = r.inputs.pop_ready() {
                self.counters.inputs_applied += 1;
                self.events.push_back(CellEvent::InputApplied {
                    entity: e.id,
                    seq,
                    data,
                });
            }
            while let Some(call) = r.calls.pop_front() {
                self.counters.calls_run += 1;
                self.events.push_back(CellEvent::CallRun {
                    entity: e.id,
                    id: call.id,
                    data: call.data,
                });
            }
        }
    }

    /// One sync message per changed real, built once and sent to every haunt
    /// that can take it (created, or being created on this cell's channel).
    pub(super) fn emit_syncs(&mut self, now: Time) {
        let me = self.id;
        let cache_max = self.params.sync_cache_max;
        for e in self.entities.iter_mut() {
            let Part::Real(r) = &mut e.part else { continue };
            let Some(kind) = r.dirty.take() else { continue };
            e.version += 1;
            let msg = SyncMsg {
                entity: e.id,
                version: e.version,
                kind,
                timestamp: now,
                pos: e.pos,
                payload: e.props.clone(),
            };
            self.counters.syncs_built += 1;
            for h in &r.haunts {
                let reachable = match h.state {
                    HauntState::Created => true,
                    HauntState::Creating { sent_by, .. } => sent_by == me,
                };
                if reachable {
                    self.out.push_back(super::msg::Outgoing::cell(
                        h.cell,
                        CellMsg::Sync {
                            epoch: r.epoch,
                            msg: msg.clone(),
                        },
                    ));
                }
            }
            r.cache.push(msg, cache_max);
        }
    }
}
