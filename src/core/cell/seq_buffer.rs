//! A bounded sequence-ordered buffer: releases items numbered `next`,
//! `next + 1`, ... exactly once each, in order, whatever order they arrive in.
//!
//! Used by a real for client inputs (the expected sequence and the early
//! items travel with the real on migration) and by a proxy for downstream
//! data. Owns only its items; knows nothing about cells.

use std::collections::VecDeque;

/// What [`SeqBuffer::push`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeqPush {
    /// Held; released by [`SeqBuffer::pop_ready`] once its turn comes.
    Held,
    /// Already released or already held.
    Duplicate,
    /// Ahead of `next` and the buffer is full: refused.
    Full,
}

/// Items waiting for their turn, sorted by sequence number.
#[derive(Clone, Debug, PartialEq)]
pub struct SeqBuffer<T> {
    next: u64,
    early: VecDeque<(u64, T)>,
}

impl<T> SeqBuffer<T> {
    /// A buffer expecting `next` first.
    pub fn new(next: u64) -> Self {
        SeqBuffer {
            next,
            early: VecDeque::new(),
        }
    }

    /// A buffer restored from a migration: `next` expected, `early` held.
    /// Items at or below `next - 1` are discarded; duplicates keep the first.
    pub fn restore(next: u64, early: impl IntoIterator<Item = (u64, T)>, max: usize) -> Self {
        let mut b = SeqBuffer::new(next);
        for (seq, item) in early {
            let _ = b.push(seq, item, max);
        }
        b
    }

    /// The next sequence number to release.
    pub fn next(&self) -> u64 {
        self.next
    }

    /// Items held.
    pub fn len(&self) -> usize {
        self.early.len()
    }

    /// True when nothing is held.
    pub fn is_empty(&self) -> bool {
        self.early.is_empty()
    }

    /// Offers item `seq`; it is held until [`Self::pop_ready`] releases it.
    ///
    /// # Limits
    /// At most `max` items are held ahead of the next one (which is always
    /// taken, so a full buffer still drains).
    pub fn push(&mut self, seq: u64, item: T, max: usize) -> SeqPush {
        self.try_push(seq, item, max).unwrap_or(SeqPush::Full)
    }

    /// As [`Self::push`], but a full buffer gives the item back (never
    /// `Ok(SeqPush::Full)`), so the caller can make room and offer it again
    /// without a copy.
    ///
    /// # Errors
    /// The item, when the buffer is full.
    pub fn try_push(&mut self, seq: u64, item: T, max: usize) -> Result<SeqPush, T> {
        if seq < self.next {
            return Ok(SeqPush::Duplicate);
        }
        let at = self.early.partition_point(|(s, _)| *s < seq);
        if self.early.get(at).is_some_and(|(s, _)| *s == seq) {
            return Ok(SeqPush::Duplicate);
        }
        // The next item is always taken: it lets the buffer drain.
        if seq > self.next && self.early.len() >= max {
            return Err(item);
        }
        self.early.insert(at, (seq, item));
        Ok(SeqPush::Held)
    }

    /// Releases `seq` at once if it is the next one and nothing is held
    /// (what [`Self::push`] then [`Self::pop_ready`] would do, without
    /// holding the item); false otherwise (push it).
    pub fn pass_next(&mut self, seq: u64) -> bool {
        if seq != self.next || !self.early.is_empty() {
            return false;
        }
        self.next += 1;
        true
    }

    /// True if the item numbered `next` is held ([`SeqBuffer::pop_ready`]
    /// would release it).
    pub fn has_ready(&self) -> bool {
        self.early.front().is_some_and(|(s, _)| *s == self.next)
    }

    /// The held item numbered `next`, if any (released).
    pub fn pop_ready(&mut self) -> Option<(u64, T)> {
        if self.early.front()?.0 != self.next {
            return None;
        }
        self.next += 1;
        self.early.pop_front()
    }

    /// Gives up on the missing items before the first held one (used when
    /// the buffer is full, so it cannot stall forever); returns how many
    /// sequence numbers were skipped.
    pub fn skip_gap(&mut self) -> u64 {
        let Some(&(first, _)) = self.early.front() else {
            return 0;
        };
        let skipped = first - self.next;
        self.next = first;
        skipped
    }

    /// Takes every held item (for a migration), leaving the buffer empty.
    pub fn drain_early(&mut self) -> impl Iterator<Item = (u64, T)> + '_ {
        self.early.drain(..)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn release(b: &mut SeqBuffer<u64>, seq: u64, out: &mut Vec<u64>) -> bool {
        let held = b.push(seq, seq, 3) == SeqPush::Held;
        while let Some((s, v)) = b.pop_ready() {
            assert_eq!(s, v);
            out.push(v);
        }
        held
    }

    #[test]
    fn releases_once_in_order() {
        let mut b = SeqBuffer::new(1);
        let mut out = Vec::new();
        for s in [3, 2, 2, 4, 1, 3, 5, 1] {
            release(&mut b, s, &mut out);
        }
        assert_eq!(out, vec![1, 2, 3, 4, 5]);
        assert!(b.is_empty());
        assert_eq!(b.next(), 6);
    }

    #[test]
    fn pass_next_releases_only_the_next_with_nothing_held() {
        let mut b = SeqBuffer::new(1);
        assert!(!b.pass_next(2), "not the next");
        assert!(b.pass_next(1));
        assert_eq!(b.next(), 2);
        assert!(!b.pass_next(1), "a duplicate");
        assert_eq!(b.push(3, 3, 3), SeqPush::Held);
        assert!(!b.pass_next(2), "something is held: push it");
        assert_eq!(b.push(2, 2, 3), SeqPush::Held);
        assert_eq!(b.pop_ready(), Some((2, 2)));
        assert_eq!(b.pop_ready(), Some((3, 3)));
        assert!(b.pass_next(4));
        assert_eq!(b.next(), 5);
    }

    #[test]
    fn refuses_beyond_bound() {
        let mut b = SeqBuffer::new(1);
        let mut out = Vec::new();
        for s in [2, 3, 4] {
            assert!(release(&mut b, s, &mut out));
        }
        assert_eq!(b.push(5, 5, 3), SeqPush::Full);
        assert_eq!(b.len(), 3);
        assert_eq!(b.push(1, 1, 3), SeqPush::Held);
        let mut c = b.clone();
        while let Some((_, v)) = b.pop_ready() {
            out.push(v);
        }
        assert_eq!(out, vec![1, 2, 3, 4]);
        // Without item 1, skipping the gap releases the rest.
        c.early.retain(|(s, _)| *s != 1);
        assert_eq!(c.skip_gap(), 1);
        assert_eq!(c.pop_ready(), Some((2, 2)));
    }

    #[test]
    fn restore_keeps_early_items_for_a_new_owner() {
        let mut a = SeqBuffer::new(1);
        let mut out = Vec::new();
        release(&mut a, 1, &mut out);
        release(&mut a, 3, &mut out);
        let early: Vec<_> = a.drain_early().collect();
        let mut b = SeqBuffer::restore(a.next(), early, 3);
        release(&mut b, 2, &mut out);
        assert_eq!(out, vec![1, 2, 3]);
    }
}
