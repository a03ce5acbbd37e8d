//! What a shard received and its application has not read yet.
//!
//! Batches the driver drained from its inbound queues (the runtime's mesh)
//! are appended whole (no copy, no per-message work); [`Inbox`] hands the
//! envelopes out one by one. Envelopes the application leaves unread stay,
//! in order, ahead of later arrivals.
//!
//! # Limits
//! `mesh.inbox_items_max`: while this many envelopes are held, the shard does
//! not drain its queues; they fill up and push back on the senders. One drain
//! may overshoot the bound by at most what the queues hold (shards x
//! `mesh.batch_queue_depth` x `mesh.batch_items_max`).
//!
//! # Ordering
//! FIFO per source shard (batches from one source are appended in queue
//! order); sources interleave batch by batch.
//!
//! Runs on: the owning shard's thread. Owns the held batches; it must not
//! touch queues, executors or clocks (the driver pushes batches in).

use crate::wire::Envelope;
use std::collections::VecDeque;

/// The received envelopes of one shard (the driver's side).
#[derive(Debug, Default)]
pub(crate) struct InboxBuf {
    batches: VecDeque<std::vec::IntoIter<Envelope>>,
    held: usize,
}

impl InboxBuf {
    pub(crate) fn push_batch(&mut self, batch: Vec<Envelope>) {
        self.held += batch.len();
        self.batches.push_back(batch.into_iter());
    }

    /// Envelopes held.
    pub(crate) fn len(&self) -> usize {
        self.held
    }

    /// Drops everything held; returns how many envelopes that was.
    pub(crate) fn clear(&mut self) -> usize {
        let n = self.held;
        self.batches.clear();
        self.held = 0;
        n
    }
}

/// The application's view of its inbox for one tick: an iterator of
/// envelopes, FIFO per source shard.
#[derive(Debug)]
pub struct Inbox<'a> {
    buf: &'a mut InboxBuf,
}

impl<'a> Inbox<'a> {
    pub(crate) fn new(buf: &'a mut InboxBuf) -> Inbox<'a> {
        Inbox { buf }
    }

    /// Envelopes not yet taken.
    pub fn remaining(&self) -> usize {
        self.buf.held
    }
}

impl Iterator for Inbox<'_> {
    type Item = Envelope;

    fn next(&mut self) -> Option<Envelope> {
        loop {
            let front = self.buf.batches.front_mut()?;
            if let Some(env) = front.next() {
                self.buf.held -= 1;
                return Some(env);
            }
            self.buf.batches.pop_front();
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.buf.held, Some(self.buf.held))
    }
}

impl ExactSizeIterator for Inbox<'_> {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::ids::ShardId;
    use crate::wire::Body;

    fn env(seq: u64) -> Envelope {
        let body = Body::encode(&seq).expect("encode");
        Envelope::new(ShardId::local(1), ShardId::local(0), 0, seq, body)
    }

    #[test]
    fn unread_envelopes_stay_in_order() {
        let mut buf = InboxBuf::default();
        buf.push_batch(vec![env(0), env(1), env(2)]);
        buf.push_batch(Vec::new());
        buf.push_batch(vec![env(3)]);
        let mut inbox = Inbox::new(&mut buf);
        assert_eq!(inbox.len(), 4);
        let first: Vec<u64> = inbox.by_ref().take(2).map(|e| e.seq()).collect();
        assert_eq!(first, [0, 1]);
        assert_eq!(buf.len(), 2);
        let rest: Vec<u64> = Inbox::new(&mut buf).map(|e| e.seq()).collect();
        assert_eq!(rest, [2, 3]);
        assert_eq!(buf.len(), 0);
    }
}
