//! The ghost-side reorder buffer: apply a real's sync messages in version order.
//!
//! Owns [`ReorderBuffer`]. Messages for one entity can arrive out of order
//! (a migrated real sends on a different channel than its predecessor) or
//! twice; this buffer releases them strictly in version order, each exactly
//! once, buffers early ones up to a bound, and reports a gap it cannot fill
//! (buffer overflow, or the missing version not arriving within a timeout) as
//! a resync request. A snapshot message resets the expected version. It does
//! not decode payloads or talk to anyone: the cell feeds it and drains it.

use super::sync::{SyncKind, SyncMsg};
use crate::core::time::Time;
use std::collections::VecDeque;
use std::time::Duration;

/// Bounds of a [`ReorderBuffer`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReorderParams {
    /// Most early messages held per entity. Default 32 (a second of
    /// change sets at 30 Hz: more than any migration reorder should need).
    pub reorder_buffer_max: usize,
    /// How long a gap may stay open before a resync is requested. Default 500 ms.
    pub gap_timeout_ms: u64,
    /// How long to wait before requesting a resync again. Default 1000 ms.
    pub resync_retry_ms: u64,
}

impl Default for ReorderParams {
    fn default() -> Self {
        ReorderParams {
            reorder_buffer_max: 32,
            gap_timeout_ms: 500,
            resync_retry_ms: 1000,
        }
    }
}

/// What happened to an offered message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Offered {
    /// It (and maybe buffered successors) can now be drained in order.
    Ready,
    /// Held until the versions before it arrive.
    Buffered,
    /// Already applied, already buffered, or an old snapshot: dropped.
    Duplicate,
    /// The buffer was full: a message was dropped and a resync is needed.
    Overflow,
}

/// A request to the real for a full snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResyncRequest {
    /// The last version this ghost applied.
    pub have: u64,
}

/// Releases one entity's messages in version order.
///
/// Feed with [`ReorderBuffer::handle_msg`], then drain
/// [`ReorderBuffer::poll_ready`] until `None` (quinn style); call
/// [`ReorderBuffer::poll_resync`] each tick.
#[derive(Clone, Debug)]
pub struct ReorderBuffer {
    params: ReorderParams,
    /// Last version released into `ready` (or reset to by a snapshot).
    applied: u64,
    /// Released, in order, not yet drained.
    ready: VecDeque<SyncMsg>,
    /// Early messages, sorted by version, all > applied + 1.
    pending: VecDeque<SyncMsg>,
    /// Since when the head of `pending` has been waiting for a missing version.
    gap_since: Option<Time>,
    /// Highest version dropped on overflow and not yet released since (a
    /// duplicate copy may still bring it; otherwise only a snapshot heals).
    dropped_max: Option<u64>,
    /// When the last resync request was made.
    requested_at: Option<Time>,
}

impl ReorderBuffer {
    /// A buffer whose ghost was created from a snapshot at `version`.
    ///
    /// # Panics
    /// If `params.reorder_buffer_max` is 0.
    pub fn new(params: ReorderParams, version: u64) -> Self {
        assert!(
            params.reorder_buffer_max > 0,
            "reorder_buffer_max must be positive"
        );
        ReorderBuffer {
            params,
            applied: version,
            ready: VecDeque::new(),
            // Grown on the first early message, not reserved up front: with
            // in-order delivery (the usual case, and always between cells of
            // one shard) it stays empty, and `reorder_buffer_max` (256) of
            // them was 16 KiB a ghost, faulted in at every ghost creation
            // and migration (5 % of the host's time on the cost probe with
            // two in view; the ceiling is still the bound, see `handle_msg`).
            pending: VecDeque::new(),
            gap_since: None,
            dropped_max: None,
            requested_at: None,
        }
    }

    /// The last version released (or reset to by a snapshot).
    pub fn applied(&self) -> u64 {
        self.applied
    }

    /// Early messages held.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// True if a gap is open (something is buffered but cannot be released,
    /// or a message was dropped).
    pub fn has_gap(&self) -> bool {
        self.dropped() || self.gap_since.is_some()
    }

    fn dropped(&self) -> bool {
        self.dropped_max.is_some_and(|d| d > self.applied)
    }

    /// Offers a message (a change set or a snapshot).
    ///
    /// # Limits
    /// At most `reorder_buffer_max` early messages are held; on overflow the
    /// highest version is dropped and a resync becomes due at once.
    ///
    /// # Ordering
    /// Released messages have versions `applied + 1, applied + 2, ...`; a
    /// snapshot newer than `applied` is released after everything released
    /// before it and resets `applied` to its version.
    pub fn handle_msg(&mut self, now: Time, msg: SyncMsg) -> Offered {
        if msg.version <= self.applied {
            return Offered::Duplicate;
        }
        if msg.kind == SyncKind::Snapshot {
            while self
                .pending
                .front()
                .is_some_and(|m| m.version <= msg.version)
            {
                self.pending.pop_front();
            }
            self.applied = msg.version;
            self.ready.push_back(msg);
            self.requested_at = None;
            self.gap_since = None;
            self.advance(now);
            return Offered::Ready;
        }
        let at = match self
            .pending
            .binary_search_by_key(&msg.version, |m| m.version)
        {
            Ok(_) => return Offered::Duplicate,
            Err(at) => at,
        };
        let mut result = if msg.version == self.applied + 1 {
            Offered::Ready
        } else {
            Offered::Buffered
        };
        // The next version is released at once, so it never overflows.
        if result == Offered::Buffered && self.pending.len() == self.params.reorder_buffer_max {
            result = Offered::Overflow;
            let dropped = if at == self.pending.len() {
                msg.version // the newcomer is the highest: drop it
            } else {
                let last = self.pending.pop_back().expect("buffer is full");
                self.pending.insert(at, msg);
                last.version
            };
            self.dropped_max = self.dropped_max.max(Some(dropped));
            self.advance(now);
            return result;
        }
        self.pending.insert(at, msg);
        self.advance(now);
        debug_assert!(self.pending.len() <= self.params.reorder_buffer_max);
        result
    }

    /// Moves consecutive messages to `ready` and updates the gap clock.
    fn advance(&mut self, now: Time) {
        while self
            .pending
            .front()
            .is_some_and(|m| m.version == self.applied + 1)
        {
            let m = self.pending.pop_front().expect("front exists");
            self.applied = m.version;
            self.ready.push_back(m);
        }
        if self.dropped_max.is_some_and(|d| d <= self.applied) {
            self.dropped_max = None;
            self.requested_at = None;
        }
        if self.pending.is_empty() {
            self.gap_since = None;
        } else if self.gap_since.is_none() {
            self.gap_since = Some(now);
        }
        debug_assert!(self.pending.iter().all(|p| p.version > self.applied + 1));
    }

    /// The next message to apply, in release order.
    pub fn poll_ready(&mut self) -> Option<SyncMsg> {
        self.ready.pop_front()
    }

    /// A resync request if one is due: at once after an overflow, after
    /// `gap_timeout_ms` of an open gap, then every `resync_retry_ms` until a
    /// snapshot arrives.
    pub fn poll_resync(&mut self, now: Time) -> Option<ResyncRequest> {
        let timeout = Duration::from_millis(self.params.gap_timeout_ms);
        let due_gap = self
            .gap_since
            .is_some_and(|t| now.saturating_since(t) >= timeout);
        if !(self.dropped() || due_gap) {
            return None;
        }
        let retry = Duration::from_millis(self.params.resync_retry_ms);
        if self
            .requested_at
            .is_some_and(|t| now.saturating_since(t) < retry)
        {
            return None;
        }
        self.requested_at = Some(now);
        Some(ResyncRequest { have: self.applied })
    }

    /// When [`ReorderBuffer::poll_resync`] may next return a request, if ever.
    pub fn poll_timeout(&self) -> Option<Time> {
        let retry = Duration::from_millis(self.params.resync_retry_ms);
        let due = if self.dropped() {
            Some(Time::ZERO)
        } else {
            self.gap_since
                .map(|t| t + Duration::from_millis(self.params.gap_timeout_ms))
        };
        match (due, self.requested_at) {
            (Some(t), Some(r)) => Some(t.max(r + retry)),
            (t, _) => t,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::ids::EntityId;

    fn msg(v: u64) -> SyncMsg {
        SyncMsg::new(EntityId(1), v, SyncKind::Props, Time::ZERO, &[0], &[0])
    }

    fn drain(rb: &mut ReorderBuffer) -> Vec<u64> {
        std::iter::from_fn(|| rb.poll_ready())
            .map(|m| m.version)
            .collect()
    }

    #[test]
    fn releases_in_order_and_drops_duplicates() {
        let mut rb = ReorderBuffer::new(ReorderParams::default(), 0);
        assert_eq!(rb.handle_msg(Time::ZERO, msg(2)), Offered::Buffered);
        assert_eq!(rb.handle_msg(Time::ZERO, msg(2)), Offered::Duplicate);
        assert_eq!(drain(&mut rb), Vec::<u64>::new());
        assert!(rb.has_gap());
        assert_eq!(rb.handle_msg(Time::ZERO, msg(1)), Offered::Ready);
        assert_eq!(drain(&mut rb), vec![1, 2]);
        assert_eq!(rb.handle_msg(Time::ZERO, msg(1)), Offered::Duplicate);
        assert!(!rb.has_gap());
        assert_eq!(rb.poll_timeout(), None);
    }

    #[test]
    fn gap_times_out_into_a_resync_then_snapshot_heals() {
        let p = ReorderParams {
            gap_timeout_ms: 100,
            resync_retry_ms: 300,
            ..Default::default()
        };
        let mut rb = ReorderBuffer::new(p, 5);
        rb.handle_msg(Time::from_millis(10), msg(8));
        assert_eq!(rb.poll_resync(Time::from_millis(109)), None);
        assert_eq!(rb.poll_timeout(), Some(Time::from_millis(110)));
        assert_eq!(
            rb.poll_resync(Time::from_millis(110)),
            Some(ResyncRequest { have: 5 })
        );
        assert_eq!(rb.poll_resync(Time::from_millis(200)), None);
        assert_eq!(
            rb.poll_resync(Time::from_millis(410)),
            Some(ResyncRequest { have: 5 })
        );
        rb.handle_msg(Time::from_millis(500), msg(9));
        let snap = SyncMsg::new(EntityId(1), 8, SyncKind::Snapshot, Time::ZERO, &[], &[]);
        assert_eq!(rb.handle_msg(Time::from_millis(500), snap), Offered::Ready);
        assert_eq!(drain(&mut rb), vec![8, 9]);
        assert!(!rb.has_gap());
        assert_eq!(rb.poll_resync(Time::from_millis(10_000)), None);
    }

    #[test]
    fn overflow_requests_resync_at_once() {
        let p = ReorderParams {
            reorder_buffer_max: 2,
            ..Default::default()
        };
        let mut rb = ReorderBuffer::new(p, 0);
        rb.handle_msg(Time::ZERO, msg(3));
        rb.handle_msg(Time::ZERO, msg(5));
        assert_eq!(rb.handle_msg(Time::ZERO, msg(4)), Offered::Overflow);
        assert_eq!(rb.pending(), 2);
        assert_eq!(rb.poll_resync(Time::ZERO), Some(ResyncRequest { have: 0 }));
        rb.handle_msg(Time::ZERO, msg(1));
        rb.handle_msg(Time::ZERO, msg(2));
        assert_eq!(drain(&mut rb), vec![1, 2, 3, 4]);
        assert!(rb.has_gap(), "5 was dropped: only a snapshot heals");
    }

    #[test]
    fn in_order_delivery_reserves_little_and_the_bound_holds_as_it_grows() {
        let p = ReorderParams {
            reorder_buffer_max: 256,
            ..Default::default()
        };
        let mut rb = ReorderBuffer::new(p, 0);
        for v in 1..=100 {
            assert_eq!(rb.handle_msg(Time::ZERO, msg(v)), Offered::Ready);
            drain(&mut rb);
        }
        // Each in-order message passes through the buffer: room for a few,
        // not for `reorder_buffer_max`.
        assert!(rb.pending.capacity() <= 4, "{}", rb.pending.capacity());
        // 255 early messages behind a gap at 101 fill it; one more overflows.
        for v in 102..=356 {
            assert_eq!(rb.handle_msg(Time::ZERO, msg(v)), Offered::Buffered, "{v}");
        }
        assert_eq!(rb.pending(), 255);
        assert_eq!(rb.handle_msg(Time::ZERO, msg(357)), Offered::Buffered);
        assert_eq!(rb.pending(), 256);
        assert_eq!(rb.handle_msg(Time::ZERO, msg(358)), Offered::Overflow);
        assert_eq!(rb.pending(), 256, "the bound holds as the buffer grows");
    }
}
