//! What a shard's application wants sent, batched per destination.
//!
//! During a tick the application pushes envelopes with [`Outbox::send`]; after
//! the tick the driver flushes each destination's batch into that
//! destination's queue (the runtime: `runtime::mesh::flush`, one push per
//! batch): one batch per destination per tick (more only when a tick sends
//! more than `mesh.batch_items_max` to one destination).
//!
//! # Back-pressure policy
//!
//! 1. A full destination queue is not an error: the batch stays at the head of
//!    this destination's lane, the event is counted (`queue_full`), and it is
//!    retried at the next flush. Envelopes sent meanwhile are appended to the
//!    held batch while it has room, so a backed-up lane still ships one batch
//!    per tick once the queue frees up.
//! 2. Each lane holds at most `mesh.outbox_items_max` envelopes. Beyond that
//!    [`Outbox::send`] refuses with [`SendError::Full`], handing the body back
//!    to the caller (counted as `outbox_refused`): the application must slow
//!    down, retry later, or drop with its own counter. [`Outbox::room`] and
//!    [`Outbox::backlogged`] let it see this coming.
//! 3. Nothing is ever dropped silently: once a destination's shard has
//!    crashed (marked dead), the flush drops what its lane holds, counts it
//!    as `dropped_disconnected` and logs an error; what was already in the
//!    dead shard's queues is counted by `runtime::RuntimeHandle::join`.
//!
//! # Ordering
//! FIFO per destination: envelopes are numbered per destination (`seq` from
//! 0) in send order, and batches leave a lane in order.
//!
//! Runs on: the owning shard's thread. Owns the lanes and their sequence
//! numbers; it must not touch queues, executors or clocks (the driver's
//! flush hands it a push into its queues).

use crate::core::ids::ShardId;
use crate::wire::{Body, Envelope};
use std::collections::VecDeque;

/// A batch: the envelopes one shard sends another in one flush.
pub type Batch = Vec<Envelope>;

/// Why a send was refused; the body is handed back.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// The destination is not a shard of this node.
    #[error("no shard {dest} on this node")]
    UnknownShard {
        /// The destination asked for.
        dest: ShardId,
        /// The body, handed back.
        body: Body,
    },
    /// The lane to `dest` holds `mesh.outbox_items_max` envelopes already.
    #[error("outbox to {dest} is full")]
    Full {
        /// The destination.
        dest: ShardId,
        /// The body, handed back.
        body: Body,
    },
}

#[derive(Debug, Default)]
struct Lane {
    /// Sealed batches waiting for queue space, oldest first.
    pending: VecDeque<Batch>,
    /// The batch being filled this tick.
    open: Batch,
    /// Envelopes in `pending` and `open`.
    held: usize,
    /// The seq of the next envelope to this destination.
    next_seq: u64,
    /// Length of the last sealed batch (capacity hint for the next one).
    last_len: usize,
}

/// The outcome of one flush.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct FlushReport {
    pub(crate) batches: u64,
    pub(crate) messages: u64,
    pub(crate) queue_full: u64,
    pub(crate) dropped: u64,
}

/// Per-destination lanes of outgoing envelopes of one shard.
#[derive(Debug)]
pub struct Outbox {
    source: ShardId,
    lanes: Vec<Lane>,
    batch_items_max: usize,
    outbox_items_max: usize,
    refused: u64,
}

impl Outbox {
    pub(crate) fn new(
        source: ShardId,
        shards: u16,
        batch_items_max: usize,
        outbox_items_max: usize,
    ) -> Outbox {
        assert!(batch_items_max >= 1 && outbox_items_max >= batch_items_max);
        Outbox {
            source,
            lanes: (0..shards).map(|_| Lane::default()).collect(),
            batch_items_max,
            outbox_items_max,
            refused: 0,
        }
    }

    /// The shard this outbox sends from.
    pub fn source(&self) -> ShardId {
        self.source
    }

    fn lane_index(&self, dest: ShardId) -> Option<usize> {
        let i = usize::from(dest.index);
        (dest.node == self.source.node && i < self.lanes.len()).then_some(i)
    }

    /// Queues `body` (of message type `kind`) for `dest`; it leaves at the end
    /// of this tick. Sending to this shard itself is allowed (it arrives next
    /// tick, like any other).
    ///
    /// # Errors
    /// [`SendError::UnknownShard`] or [`SendError::Full`], handing the body back.
    ///
    /// # Limits
    /// `mesh.outbox_items_max` envelopes held per destination.
    pub fn send(&mut self, dest: ShardId, kind: u16, body: Body) -> Result<(), SendError> {
        let Some(i) = self.lane_index(dest) else {
            return Err(SendError::UnknownShard { dest, body });
        };
        let (source, batch_max) = (self.source, self.batch_items_max);
        let lane = &mut self.lanes[i];
        if lane.held >= self.outbox_items_max {
            self.refused += 1;
            return Err(SendError::Full { dest, body });
        }
        if lane.open.capacity() == 0 {
            lane.open.reserve(lane.last_len.clamp(1, batch_max));
        }
        lane.open
            .push(Envelope::new(source, dest, kind, lane.next_seq, body));
        lane.next_seq += 1;
        lane.held += 1;
        if lane.open.len() == batch_max {
            Self::seal(lane, batch_max);
        }
        Ok(())
    }

    /// How many more envelopes `dest` accepts now (0 for an unknown shard).
    pub fn room(&self, dest: ShardId) -> usize {
        self.lane_index(dest)
            .map_or(0, |i| self.outbox_items_max - self.lanes[i].held)
    }

    /// Whether envelopes to `dest` are still waiting from an earlier tick
    /// (its queue was full): a hint to slow down.
    pub fn backlogged(&self, dest: ShardId) -> bool {
        self.lane_index(dest)
            .is_some_and(|i| !self.lanes[i].pending.is_empty())
    }

    /// Envelopes held for all destinations.
    pub fn held(&self) -> usize {
        self.lanes.iter().map(|l| l.held).sum()
    }

    /// Moves the open batch to the pending list, merging it into the last
    /// pending batch when both fit in one.
    fn seal(lane: &mut Lane, batch_max: usize) {
        if lane.open.is_empty() {
            return;
        }
        lane.last_len = lane.open.len();
        match lane.pending.back_mut() {
            Some(last) if last.len() + lane.open.len() <= batch_max => {
                last.append(&mut lane.open);
            }
            _ => lane.pending.push_back(std::mem::take(&mut lane.open)),
        }
    }

    /// Destinations (one lane each, indexed by shard index).
    pub(crate) fn destinations(&self) -> usize {
        self.lanes.len()
    }

    /// Hands every lane's batches to `push(dest index, batch)` until the
    /// lane is empty or `push` hands the batch back (the destination's queue
    /// is full). Lanes to shards for which `dead(dest index)` holds are
    /// emptied and counted as dropped. The driver supplies both: the
    /// runtime's mesh flush (`runtime::mesh::flush`) pushes into the
    /// destination's queue and reads the crash flags.
    pub(crate) fn flush_with(
        &mut self,
        mut push: impl FnMut(usize, Batch) -> Result<(), Batch>,
        dead: impl Fn(usize) -> bool,
    ) -> FlushReport {
        let mut r = FlushReport::default();
        for (dest, lane) in self.lanes.iter_mut().enumerate() {
            Self::seal(lane, self.batch_items_max);
            if lane.held > 0 && dead(dest) {
                tracing::error!(
                    source = %self.source, dest, lost = lane.held,
                    "destination shard crashed; envelopes dropped"
                );
                r.dropped += lane.held as u64;
                lane.held = 0;
                lane.pending.clear();
            }
            while let Some(batch) = lane.pending.pop_front() {
                let n = batch.len();
                match push(dest, batch) {
                    Ok(()) => {
                        r.batches += 1;
                        r.messages += n as u64;
                        lane.held -= n;
                    }
                    Err(batch) => {
                        lane.pending.push_front(batch);
                        r.queue_full += 1;
                        break;
                    }
                }
            }
        }
        r
    }

    /// Takes the count of refused sends since the last call.
    pub(crate) fn take_refused(&mut self) -> u64 {
        std::mem::take(&mut self.refused)
    }
}

#[cfg(test)]
mod tests {
    //! The lanes without any queue: `flush_with` over plain vectors (the
    //! runtime's flush into the mesh is tested in `runtime::mesh`).
    use super::*;

    fn body(n: u64) -> Body {
        Body::encode(&n).expect("encode")
    }

    #[test]
    fn a_refused_push_keeps_the_batch_at_the_head_of_its_lane() {
        let me = ShardId::local(0);
        let mut out = Outbox::new(me, 2, 2, 8);
        for n in 0..3 {
            out.send(ShardId::local(1), 0, body(n)).expect("room");
        }
        assert_eq!(out.destinations(), 2);
        // Room for one batch only: [0, 1] leaves, [2] is handed back.
        let mut sent: Vec<(usize, Vec<u64>)> = Vec::new();
        let r = out.flush_with(
            |dest, batch| match sent.len() {
                0 => {
                    sent.push((dest, batch.iter().map(Envelope::seq).collect()));
                    Ok(())
                }
                _ => Err(batch),
            },
            |_| false,
        );
        assert_eq!((r.batches, r.messages, r.queue_full), (1, 2, 1));
        assert_eq!(sent, [(1, vec![0, 1])]);
        assert!(out.backlogged(ShardId::local(1)));
        // A dead destination: what its lane holds is dropped and counted.
        let r = out.flush_with(|_, batch| Err(batch), |dest| dest == 1);
        assert_eq!((r.dropped, r.batches, out.held()), (1, 0, 0));
    }
}
