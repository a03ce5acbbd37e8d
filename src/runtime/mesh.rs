//! The shard mesh: one bounded FIFO queue per ordered pair of shards.
//!
//! # Model
//!
//! For `n` shards there are `n * n` bounded lock-free queues (crossbeam's
//! `ArrayQueue`), one per ordered pair `(source, dest)`, including each shard to itself (so a shard's
//! messages to itself take the same path, bounds and counters as any other).
//! A channel carries [`Batch`]es, not single envelopes: every tick a shard
//! puts at most one batch (normally) into each destination's queue.
//!
//! # Why `try_send` + a per-tick drain, and no async wake-ups
//!
//! A shard runs a tick loop and sleeps on its tick timer between ticks. Its
//! application only looks at its inbox at the start of a tick, so a message
//! that arrives mid-sleep cannot be acted on before the next tick anyway.
//! - With `send_async`/`recv_async` each destination would keep a receiving
//!   task parked on every inbound channel; each arriving batch would then wake
//!   the destination's executor from its timer sleep (a cross-core wake-up:
//!   20-60 µs p50 with 4-12 ms tails on this VM, see MACHINE.md) only to
//!   park the batch in a buffer until the tick. That is `n - 1` extra wakes
//!   per shard per tick, for no latency gain.
//! - With a `push` at flush and `pop`s at the start of the next tick, no
//!   receiver is ever parked on a queue, so a send is one lock-free push
//!   (a compare-and-swap on the queue's tail; no lock, no waker): **no
//!   cross-core wake-up at all** in steady state. (Until issue 21 the queues
//!   were flume channels: a mutex on every push and pop, and wakers the
//!   mesh never used.)
//!   The only wake-up per tick is the shard's own timer. Latency is bounded by
//!   one tick, which the tick design imposes anyway.
//! - No polling loop: draining happens once per tick, never by spinning.
//!
//! The `mesh` bench (`bench/benches/mesh.rs`, second part) measures both.
//!
//! # Limits
//! `mesh.batch_queue_depth` batches per queue. A full queue pushes back on
//! the sender (see [`super::outbox`]). Memory per pair is bounded by depth x
//! `mesh.batch_items_max` envelopes.
//!
//! # Ordering
//! FIFO per ordered pair; the receiver asserts it by checking every batch's
//! sequence numbers continue the previous batch's (a gap is a bug).
//!
//! Runs on: built on the starting thread; each [`ShardLinks`] then moves to
//! and lives on its shard's thread.

use super::inbox::InboxBuf;
use super::outbox::Batch;
use crossbeam_queue::ArrayQueue;
use std::sync::Arc;

/// The queue of one ordered pair of shards; the source pushes, the
/// destination pops.
pub(crate) type Queue = Arc<ArrayQueue<Batch>>;

/// One shard's ends of the mesh.
#[derive(Debug)]
pub(crate) struct ShardLinks {
    /// Queues to each destination, indexed by destination shard index.
    pub(crate) tx: Vec<Queue>,
    /// Queues from each source, indexed by source shard index.
    pub(crate) rx: Vec<Queue>,
    /// The next sequence number expected from each source.
    expected_seq: Vec<u64>,
}

/// Builds the `shards x shards` queues, each of `depth` batches (at least
/// one).
pub(crate) fn build(shards: u16, depth: usize) -> Vec<ShardLinks> {
    let n = usize::from(shards);
    let mut tx: Vec<Vec<Queue>> = (0..n).map(|_| Vec::with_capacity(n)).collect();
    let mut rx: Vec<Vec<Queue>> = (0..n).map(|_| Vec::with_capacity(n)).collect();
    // tx[s][d] and rx[d][s] are the same queue (s, d).
    for rx_d in rx.iter_mut() {
        for tx_s in tx.iter_mut() {
            let q = Arc::new(ArrayQueue::new(depth.max(1)));
            tx_s.push(q.clone());
            rx_d.push(q);
        }
    }
    tx.into_iter()
        .zip(rx)
        .map(|(tx, rx)| ShardLinks {
            tx,
            rx,
            expected_seq: vec![0; n],
        })
        .collect()
}

/// The outcome of one drain.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct DrainReport {
    /// Batches found waiting (before draining).
    pub(crate) queued: u64,
    pub(crate) batches: u64,
    pub(crate) messages: u64,
}

impl ShardLinks {
    /// Moves every batch waiting in this shard's inbound queues into `inbox`.
    ///
    /// # Panics
    /// If a batch does not continue its source's sequence (lost or reordered
    /// envelopes inside the process: a bug).
    pub(crate) fn drain(&mut self, inbox: &mut InboxBuf) -> DrainReport {
        let mut r = DrainReport::default();
        for (source, rx) in self.rx.iter().enumerate() {
            r.queued += rx.len() as u64;
            while let Some(batch) = rx.pop() {
                let expected = &mut self.expected_seq[source];
                let first = batch.first().map_or(*expected, |e| e.seq());
                assert_eq!(
                    first, *expected,
                    "mesh broke FIFO from shard {source}: got seq {first}, expected {expected}"
                );
                debug_assert!(batch.iter().zip(first..).all(|(e, s)| e.seq() == s));
                *expected += batch.len() as u64;
                r.batches += 1;
                r.messages += batch.len() as u64;
                inbox.push_batch(batch);
            }
        }
        r
    }

    /// Batches waiting in this shard's outbound queues (a gauge).
    pub(crate) fn outbound_queued(&self) -> usize {
        self.tx.iter().map(|q| q.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::ids::ShardId;
    use crate::wire::{Body, Envelope};

    fn batch(source: u16, dest: u16, seqs: std::ops::Range<u64>) -> Batch {
        seqs.map(|s| {
            let body = Body::encode(&s).expect("encode");
            Envelope::new(ShardId::local(source), ShardId::local(dest), 0, s, body)
        })
        .collect()
    }

    #[test]
    fn every_ordered_pair_has_its_own_queue() {
        let mut links = build(3, 2);
        links[0].tx[2].push(batch(0, 2, 0..2)).expect("room");
        links[1].tx[2].push(batch(1, 2, 0..1)).expect("room");
        links[2].tx[2].push(batch(2, 2, 0..3)).expect("room");
        links[0].tx[2].push(batch(0, 2, 2..3)).expect("room");
        assert!(links[0].tx[2].push(batch(0, 2, 3..4)).is_err(), "depth 2");
        assert_eq!(links[0].outbound_queued(), 2);
        let mut inbox = InboxBuf::default();
        let r = links[2].drain(&mut inbox);
        assert_eq!((r.queued, r.batches, r.messages), (4, 4, 7));
        assert_eq!(inbox.len(), 7);
        assert_eq!(links[1].drain(&mut inbox), DrainReport::default());
    }

    #[test]
    #[should_panic(expected = "broke FIFO")]
    fn a_gap_in_sequence_is_a_bug() {
        let mut links = build(2, 4);
        links[0].tx[1].push(batch(0, 1, 0..2)).expect("room");
        links[0].tx[1].push(batch(0, 1, 3..4)).expect("room");
        links[1].drain(&mut InboxBuf::default());
    }
}
