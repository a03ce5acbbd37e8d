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
//! the sender (see [`crate::shard::outbox`]). Memory per pair is bounded by depth x
//! `mesh.batch_items_max` envelopes.
//!
//! # Ordering
//! FIFO per ordered pair; the receiver asserts it by checking every batch's
//! sequence numbers continue the previous batch's (a gap is a bug).
//!
//! Runs on: built on the starting thread; each [`ShardLinks`] then moves to
//! and lives on its shard's thread.

use crate::shard::inbox::InboxBuf;
use crate::shard::outbox::{Batch, FlushReport, Outbox};
use crossbeam_queue::ArrayQueue;
use std::sync::atomic::{AtomicBool, Ordering};
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

/// Flushes `out` into the queues to each destination (`queues[dest index]`):
/// each lane's batches are pushed until the lane is empty or the queue is
/// full (see the back-pressure policy in [`crate::shard::outbox`]). Lanes to
/// shards marked in `dead` are emptied and counted as dropped.
pub(crate) fn flush(out: &mut Outbox, queues: &[Queue], dead: &[AtomicBool]) -> FlushReport {
    debug_assert_eq!(queues.len(), out.destinations());
    out.flush_with(
        |dest, batch| queues[dest].push(batch),
        |dest| dead[dest].load(Ordering::Acquire),
    )
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

#[cfg(test)]
mod flush_tests {
    use super::*;
    use crate::core::ids::ShardId;
    use crate::shard::outbox::SendError;
    use crate::wire::{Body, Envelope};

    fn body(n: u64) -> Body {
        Body::encode(&n).expect("encode")
    }

    static ALIVE: [AtomicBool; 2] = [AtomicBool::new(false), AtomicBool::new(false)];

    fn queue(depth: usize) -> Queue {
        Arc::new(ArrayQueue::new(depth))
    }

    fn seqs(batch: &Batch) -> Vec<u64> {
        batch.iter().map(Envelope::seq).collect()
    }

    #[test]
    fn one_batch_per_destination_per_flush() {
        let (tx0, tx1) = (queue(4), queue(4));
        let (rx0, rx1) = (tx0.clone(), tx1.clone());
        let mut out = Outbox::new(ShardId::local(0), 2, 8, 16);
        for n in 0..5 {
            out.send(ShardId::local(1), 7, body(n)).expect("room");
        }
        out.send(ShardId::local(0), 7, body(9)).expect("self");
        let r = flush(&mut out, &[tx0, tx1], &ALIVE);
        assert_eq!((r.batches, r.messages), (2, 6));
        assert_eq!(seqs(&rx1.pop().expect("batch")), [0, 1, 2, 3, 4]);
        assert!(rx1.pop().is_none());
        assert_eq!(seqs(&rx0.pop().expect("batch")), [0]);
        assert_eq!(out.held(), 0);
    }

    #[test]
    fn full_queue_holds_batches_and_full_outbox_refuses() {
        let tx = queue(1);
        let rx = tx.clone();
        let mut out = Outbox::new(ShardId::local(0), 1, 2, 4);
        let me = ShardId::local(0);
        for n in 0..3 {
            out.send(me, 0, body(n)).expect("room");
        }
        // Batches of 2: [0,1] sent, [2] held (queue depth 1).
        let r = flush(&mut out, std::slice::from_ref(&tx), &ALIVE[..1]);
        assert_eq!((r.batches, r.queue_full), (1, 1));
        assert!(out.backlogged(me));
        out.send(me, 0, body(3)).expect("room");
        assert_eq!(out.room(me), 2);
        out.send(me, 0, body(4)).expect("room");
        out.send(me, 0, body(5)).expect("room");
        match out.send(me, 0, body(6)) {
            Err(SendError::Full { body, .. }) => assert_eq!(body.len(), 8),
            other => panic!("expected Full, got {other:?}"),
        }
        assert_eq!(out.take_refused(), 1);
        // Drain and flush until all arrive, in order, nothing lost.
        let mut got = Vec::new();
        for _ in 0..4 {
            got.extend(std::iter::from_fn(|| rx.pop()).flat_map(|b| seqs(&b)));
            flush(&mut out, std::slice::from_ref(&tx), &ALIVE[..1]);
        }
        got.extend(std::iter::from_fn(|| rx.pop()).flat_map(|b| seqs(&b)));
        assert_eq!(got, [0, 1, 2, 3, 4, 5]);
        assert_eq!(out.held(), 0);
    }

    #[test]
    fn unknown_and_crashed_destinations_are_reported() {
        let mut out = Outbox::new(ShardId::local(0), 1, 2, 4);
        assert!(matches!(
            out.send(ShardId::local(5), 0, body(0)),
            Err(SendError::UnknownShard { .. })
        ));
        // A crashed destination (marked dead): its lane is dropped, counted.
        let tx = queue(1);
        let dead = [AtomicBool::new(true)];
        out.send(ShardId::local(0), 0, body(0)).expect("room");
        out.send(ShardId::local(0), 0, body(1)).expect("room");
        let r = flush(&mut out, std::slice::from_ref(&tx), &dead);
        assert_eq!((r.dropped, r.batches, out.held()), (2, 0, 0));
    }
}
