//! What a cell counts and what it reports to game code: [`Counters`],
//! [`DropReason`] and [`CellEvent`].
//!
//! Owns only these value types. Counters only grow; the runtime exports them
//! as metrics and the simulator flags unexpected drops.

use std::sync::Arc;

use crate::core::combat::CombatEvent;
use crate::core::ids::{CellId, EntityId};
use crate::core::payload::Payload;

/// Why a cell dropped a message. Every drop is counted by reason and reported
/// as a [`CellEvent::Dropped`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DropReason {
    /// A real-bound message with no real, ghost or forwarding entry here to
    /// pass it on: lost.
    UnknownEntity,
    /// A ghost-bound message for an entity with no ghost here (deleted, or
    /// late from an older real).
    NoGhost,
    /// A control message from an older real than the one this cell knows.
    StaleEpoch,
    /// A ghost-bound message for an entity that is real here.
    GhostMsgForReal,
    /// A real-bound message forwarded `forward_hops_max` times.
    ForwardHopsExceeded,
    /// An input ahead of the expected sequence with the buffer full.
    InputBufferFull,
    /// An input already applied.
    DuplicateInput,
    /// A call with the pending-call queue full.
    CallQueueFull,
    /// A sync message with the ghost's reorder buffer full (resync asked).
    ReorderBufferFull,
    /// A sync message already applied or buffered.
    DuplicateSync,
    /// An ack or resync request for a haunt the real no longer has.
    StaleAck,
    /// A ghost-bound message that did not come from a cell.
    BadSource,
    /// A snapshot or payload that does not decode (a full resync is asked).
    BadPayload,
    /// A catch-up owed to a ghost with the catch-up queue full (the ghost
    /// asks again after its retry period).
    CatchUpQueueFull,
    /// A real-bound message for an entity destroyed in this cell (a
    /// straggler sent before the destroy was known).
    Destroyed,
}

impl DropReason {
    /// Number of reasons.
    pub const COUNT: usize = 15;

    /// Every reason, in index order.
    pub const ALL: [DropReason; Self::COUNT] = [
        DropReason::UnknownEntity,
        DropReason::NoGhost,
        DropReason::StaleEpoch,
        DropReason::GhostMsgForReal,
        DropReason::ForwardHopsExceeded,
        DropReason::InputBufferFull,
        DropReason::DuplicateInput,
        DropReason::CallQueueFull,
        DropReason::ReorderBufferFull,
        DropReason::DuplicateSync,
        DropReason::StaleAck,
        DropReason::BadSource,
        DropReason::BadPayload,
        DropReason::CatchUpQueueFull,
        DropReason::Destroyed,
    ];

    /// Index into [`Counters::drops`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// True for drops the protocol expects in normal operation (late or
    /// duplicate copies, or gaps a resync heals); false for those that lose
    /// information.
    pub fn is_benign(self) -> bool {
        matches!(
            self,
            DropReason::NoGhost
                | DropReason::StaleEpoch
                | DropReason::GhostMsgForReal
                | DropReason::DuplicateInput
                | DropReason::ReorderBufferFull
                | DropReason::DuplicateSync
                | DropReason::StaleAck
                | DropReason::CatchUpQueueFull
                | DropReason::Destroyed
        )
    }
}

/// Monotonic counters of one cell.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Reals sent away (`Onload` sent).
    pub migrations_out: u64,
    /// Reals received (`Onload` handled).
    pub migrations_in: u64,
    /// Reals sent to another space ([`Cell::transfer`](super::Cell::transfer)).
    pub transfers_out: u64,
    /// Real-bound messages passed on towards the real.
    pub forwards: u64,
    /// Checks that held a real back because it came under a newer layout
    /// than this cell's (its shard had not applied a tree change yet).
    pub migrations_held: u64,
    /// Real-bound messages held for an entity not here yet (`early.rs`).
    pub early_held: u64,
    /// High-water mark: most early sync messages one ghost held at once.
    pub reorder_buffered_max: u64,
    /// High-water mark: most messages one real's or ghost's sync cache held.
    pub sync_cache_len_max: u64,
    /// `CreateGhost` sent.
    pub ghosts_created: u64,
    /// `DeleteGhost` sent.
    pub ghosts_deleted: u64,
    /// Ghost creations abandoned after the timeout.
    pub ghost_create_timeouts: u64,
    /// Sync messages built (each fanned out to every haunt).
    pub syncs_built: u64,
    /// Sync messages applied by ghosts here.
    pub syncs_applied: u64,
    /// Resync requests sent by ghosts here.
    pub resync_requests: u64,
    /// Resync snapshots sent by reals here.
    pub resyncs_sent: u64,
    /// Client inputs applied by reals here.
    pub inputs_applied: u64,
    /// Calls run by reals here.
    pub calls_run: u64,
    /// Client view batches sent (one per observer per tick with news).
    pub view_batches: u64,
    /// Bytes in those batches.
    pub view_bytes: u64,
    /// Input acknowledgements that rode a view batch (`Cell::owe_ack`)
    /// instead of a downstream message of their own.
    pub acks_carried: u64,
    /// AOI enters sent to this cell's clients (observers' enter events).
    pub view_enters: u64,
    /// AOI leaves sent to this cell's clients.
    pub view_leaves: u64,
    /// Versions delivered to this cell's clients as updates.
    pub view_updates: u64,
    /// Resync snapshots sent to this cell's clients.
    pub view_resyncs: u64,
    /// Delta entries of detail properties cut for clients beyond their
    /// reach (levels of detail).
    pub view_detail_cut: u64,
    /// Level-of-detail catch-ups (Detail events) sent to this cell's clients.
    pub view_details: u64,
    /// Shown entities the observers' pulls brought up to their copies.
    pub view_visits: u64,
    /// Shown entities the observers' paced flushes skipped (band-rate
    /// visits, `view.band_rate_visits`).
    pub view_skips: u64,
    /// Of the visits, the shown entities passed by unread: quiet at the
    /// observer's last pull, their copies' heads unchanged since.
    pub view_quiet: u64,
    /// Observer blobs that did not decode on onload (a fresh view started).
    pub observer_blob_errors: u64,
    /// Combat states that did not decode on onload (a fresh one started).
    pub combat_state_errors: u64,
    /// Entities or areas the AOI index refused (full, bad position).
    pub aoi_refused: u64,
    /// Observer areas brought up to date (each processing of one area;
    /// `aoi.update_every_flushes` divides it).
    pub aoi_areas_updated: u64,
    /// Hits started through `Cell::try_hit`.
    pub hits_tried: u64,
    /// Combat calls (hits, feedback) routed towards a real.
    pub combat_calls: u64,
    /// Combat calls that did not decode or apply.
    pub bad_combat_calls: u64,
    /// Reals destroyed here (`Cell::destroy_real`).
    pub reals_destroyed: u64,
    /// Drops by [`DropReason::index`].
    pub drops: [u64; DropReason::COUNT],
}

impl Counters {
    /// Adds `other`'s counts to these (high-water marks take the larger):
    /// a host keeps the counters of cells it dropped, so what it exports
    /// never runs backwards.
    pub fn absorb(&mut self, other: &Counters) {
        // Names every field: a counter added to `Counters` does not compile
        // until it is absorbed below too.
        let Counters {
            migrations_out: _,
            migrations_in: _,
            transfers_out: _,
            forwards: _,
            migrations_held: _,
            early_held: _,
            reorder_buffered_max: _,
            sync_cache_len_max: _,
            ghosts_created: _,
            ghosts_deleted: _,
            ghost_create_timeouts: _,
            syncs_built: _,
            syncs_applied: _,
            resync_requests: _,
            resyncs_sent: _,
            inputs_applied: _,
            calls_run: _,
            view_batches: _,
            view_bytes: _,
            acks_carried: _,
            view_enters: _,
            view_leaves: _,
            view_updates: _,
            view_resyncs: _,
            view_detail_cut: _,
            view_details: _,
            view_visits: _,
            view_skips: _,
            view_quiet: _,
            observer_blob_errors: _,
            combat_state_errors: _,
            aoi_refused: _,
            aoi_areas_updated: _,
            hits_tried: _,
            combat_calls: _,
            bad_combat_calls: _,
            reals_destroyed: _,
            drops: _,
        } = other;
        self.migrations_out += other.migrations_out;
        self.migrations_in += other.migrations_in;
        self.transfers_out += other.transfers_out;
        self.forwards += other.forwards;
        self.migrations_held += other.migrations_held;
        self.early_held += other.early_held;
        self.reorder_buffered_max = self.reorder_buffered_max.max(other.reorder_buffered_max);
        self.sync_cache_len_max = self.sync_cache_len_max.max(other.sync_cache_len_max);
        self.ghosts_created += other.ghosts_created;
        self.ghosts_deleted += other.ghosts_deleted;
        self.ghost_create_timeouts += other.ghost_create_timeouts;
        self.syncs_built += other.syncs_built;
        self.syncs_applied += other.syncs_applied;
        self.resync_requests += other.resync_requests;
        self.resyncs_sent += other.resyncs_sent;
        self.inputs_applied += other.inputs_applied;
        self.calls_run += other.calls_run;
        self.view_batches += other.view_batches;
        self.view_bytes += other.view_bytes;
        self.acks_carried += other.acks_carried;
        self.view_enters += other.view_enters;
        self.view_leaves += other.view_leaves;
        self.view_updates += other.view_updates;
        self.view_resyncs += other.view_resyncs;
        self.view_detail_cut += other.view_detail_cut;
        self.view_details += other.view_details;
        self.view_visits += other.view_visits;
        self.view_skips += other.view_skips;
        self.view_quiet += other.view_quiet;
        self.observer_blob_errors += other.observer_blob_errors;
        self.combat_state_errors += other.combat_state_errors;
        self.aoi_refused += other.aoi_refused;
        self.aoi_areas_updated += other.aoi_areas_updated;
        self.hits_tried += other.hits_tried;
        self.combat_calls += other.combat_calls;
        self.bad_combat_calls += other.bad_combat_calls;
        self.reals_destroyed += other.reals_destroyed;
        for (a, b) in self.drops.iter_mut().zip(other.drops) {
            *a += b;
        }
    }

    /// Drops for one reason.
    pub fn dropped(&self, reason: DropReason) -> u64 {
        self.drops[reason.index()]
    }

    /// Drops that lose information (see [`DropReason::is_benign`]).
    pub fn harmful_drops(&self) -> u64 {
        DropReason::ALL
            .iter()
            .filter(|r| !r.is_benign())
            .map(|r| self.dropped(*r))
            .sum()
    }
}

/// Something game code (or the simulator) must know; drained with
/// `Cell::poll_event`.
#[derive(Clone, Debug, PartialEq)]
pub enum CellEvent {
    /// The entity is now real here; `from` is the cell it migrated from.
    BecameReal {
        /// The entity.
        entity: EntityId,
        /// Previous real's cell (None for a new entity).
        from: Option<CellId>,
    },
    /// The real here migrated away and is now a ghost pointing at `to`.
    BecameGhost {
        /// The entity.
        entity: EntityId,
        /// The new real's cell.
        to: CellId,
    },
    /// A ghost was created here (or re-created from a fresh snapshot).
    GhostAdded {
        /// The entity.
        entity: EntityId,
        /// The snapshot version it starts at.
        version: u64,
    },
    /// A ghost here was deleted.
    GhostRemoved {
        /// The entity.
        entity: EntityId,
    },
    /// A ghost applied the sync message with `version`.
    GhostSynced {
        /// The entity.
        entity: EntityId,
        /// The version applied (always previous + 1).
        version: u64,
    },
    /// A ghost jumped to a snapshot at `version` after a gap.
    GhostResynced {
        /// The entity.
        entity: EntityId,
        /// The new version.
        version: u64,
    },
    /// A real's change set as its own client sees it. No longer emitted:
    /// the own stream goes to the owner's observer (`Cell::observer`) and
    /// reaches the client in its batches. Kept for source compatibility.
    OwnChange {
        /// The entity.
        entity: EntityId,
        /// The change set's version.
        version: u64,
        /// Encoded for `Audience::OwnClient`.
        payload: Arc<[u8]>,
    },
    /// A real applied a client input (exactly once, in sequence order).
    InputApplied {
        /// The entity.
        entity: EntityId,
        /// The input's sequence number.
        seq: u64,
        /// The input.
        data: Payload,
    },
    /// A real ran a call.
    CallRun {
        /// The entity.
        entity: EntityId,
        /// The call's id.
        id: u64,
        /// The call.
        data: Arc<[u8]>,
    },
    /// Combat at real `entity`: a hit it took (`Damaged`, resolved once),
    /// the feedback of its own hit (`HitLanded`), a hit of its own that got
    /// no feedback in time (`HitExpired`), a duplicate hit or late feedback.
    Combat {
        /// The real.
        entity: EntityId,
        /// What happened.
        event: CombatEvent,
    },
    /// The real here was destroyed (`Cell::destroy_real`); its ghosts are
    /// being deleted.
    Destroyed {
        /// The entity.
        entity: EntityId,
    },
    /// A message was dropped.
    Dropped {
        /// The entity it was about.
        entity: EntityId,
        /// Why.
        reason: DropReason,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_index_their_slots() {
        for (i, r) in DropReason::ALL.iter().enumerate() {
            assert_eq!(r.index(), i);
        }
        let mut c = Counters::default();
        c.drops[DropReason::InputBufferFull.index()] += 2;
        c.drops[DropReason::UnknownEntity.index()] += 1;
        c.drops[DropReason::DuplicateSync.index()] += 5;
        assert_eq!(c.harmful_drops(), 3);
        assert_eq!(c.dropped(DropReason::DuplicateSync), 5);
    }
}
