//! Inputs and calls a client sent and waits on.
//!
//! Owns [`InputTracker`] (consecutive input seqs from 1, the send time of
//! each unacknowledged one, the ack rules: acks rise and never pass the
//! last seq sent) and [`CallTracker`] (pending Hit and SetProp calls by
//! seq). Both are bounded; the session refuses to send beyond the bounds.
//! No I/O, no clock: times are passed in.

use super::report::{CallKind, SessionRule};
use crate::core::time::Time;
use std::collections::VecDeque;

/// Consecutive input seqs and their send times (see the module doc).
#[derive(Clone, Debug)]
pub struct InputTracker {
    next_seq: u64,
    last_acked: u64,
    sent: VecDeque<(u64, Time)>,
    in_flight_max: usize,
}

impl InputTracker {
    /// A tracker keeping at most `in_flight_max` unacknowledged inputs.
    pub fn new(in_flight_max: usize) -> Self {
        InputTracker {
            next_seq: 1,
            last_acked: 0,
            sent: VecDeque::with_capacity(in_flight_max),
            in_flight_max,
        }
    }

    /// The seq the next input gets.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Numbering starts at `next_seq` (the Welcome's: after a takeover the
    /// avatar's inputs go on from the replaced connection's). Acks of the
    /// replaced connection's inputs (below `next_seq`) are then accepted.
    ///
    /// # Panics
    /// If an input was sent already (a bug of the caller).
    pub fn resume_at(&mut self, next_seq: u64) {
        assert!(
            self.sent.is_empty() && self.next_seq == 1,
            "before any input"
        );
        self.next_seq = next_seq.max(1);
    }

    /// The last seq sent (0 before the first).
    pub fn last_sent(&self) -> u64 {
        self.next_seq - 1
    }

    /// The last seq acknowledged (0 before the first ack).
    pub fn last_acked(&self) -> u64 {
        self.last_acked
    }

    /// Inputs sent and not acknowledged.
    pub fn in_flight(&self) -> usize {
        self.sent.len()
    }

    /// True if one more input fits.
    pub fn can_send(&self) -> bool {
        self.sent.len() < self.in_flight_max
    }

    /// Takes the next seq for an input sent at `now`.
    ///
    /// # Panics
    /// If no input fits (check [`InputTracker::can_send`]).
    pub fn record(&mut self, now: Time) -> u64 {
        assert!(self.can_send(), "input tracker full");
        let seq = self.next_seq;
        self.next_seq += 1;
        self.sent.push_back((seq, now));
        seq
    }

    /// Applies an ack of every seq `<= last`, calling `each(seq, sent_at)`
    /// for the newly acknowledged ones in order.
    ///
    /// # Errors
    /// [`SessionRule::AckUnsent`] or [`SessionRule::AckNotIncreasing`];
    /// nothing changes then.
    pub fn ack(&mut self, last: u64, mut each: impl FnMut(u64, Time)) -> Result<u64, SessionRule> {
        if last > self.last_sent() {
            return Err(SessionRule::AckUnsent {
                sent: self.last_sent(),
                got: last,
            });
        }
        if last <= self.last_acked {
            return Err(SessionRule::AckNotIncreasing {
                prev: self.last_acked,
                got: last,
            });
        }
        let mut n = 0;
        while let Some(&(seq, at)) = self.sent.front() {
            if seq > last {
                break;
            }
            self.sent.pop_front();
            each(seq, at);
            n += 1;
        }
        self.last_acked = last;
        debug_assert!(self.sent.front().is_none_or(|&(s, _)| s == last + 1));
        Ok(n)
    }
}

/// One pending call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PendingCall {
    /// Its input seq.
    pub seq: u64,
    /// Hit or SetProp.
    pub kind: CallKind,
    /// When it was sent.
    pub sent_at: Time,
}

/// Pending calls, in seq order (results may arrive in any order).
#[derive(Clone, Debug)]
pub struct CallTracker {
    pending: Vec<PendingCall>,
    pending_max: usize,
}

impl CallTracker {
    /// A tracker of at most `pending_max` calls.
    pub fn new(pending_max: usize) -> Self {
        CallTracker {
            pending: Vec::with_capacity(pending_max),
            pending_max,
        }
    }

    /// Calls pending.
    pub fn pending(&self) -> &[PendingCall] {
        &self.pending
    }

    /// True if one more call fits.
    pub fn can_send(&self) -> bool {
        self.pending.len() < self.pending_max
    }

    /// Records a call.
    ///
    /// # Panics
    /// If full, or if `seq` is not above every pending seq.
    pub fn record(&mut self, seq: u64, kind: CallKind, sent_at: Time) {
        assert!(self.can_send(), "call tracker full");
        assert!(self.pending.last().is_none_or(|c| c.seq < seq));
        self.pending.push(PendingCall { seq, kind, sent_at });
    }

    /// Ends the call `seq`, if pending.
    pub fn finish(&mut self, seq: u64) -> Option<PendingCall> {
        let i = self.pending.binary_search_by_key(&seq, |c| c.seq).ok()?;
        Some(self.pending.remove(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acks_rise_and_never_pass_the_last_sent() {
        let mut t = InputTracker::new(3);
        assert_eq!(t.record(Time(10)), 1);
        assert_eq!(t.record(Time(20)), 2);
        assert_eq!(t.record(Time(30)), 3);
        assert!(!t.can_send());
        assert_eq!(
            t.ack(4, |_, _| {}),
            Err(SessionRule::AckUnsent { sent: 3, got: 4 })
        );
        let mut got = Vec::new();
        assert_eq!(t.ack(2, |s, at| got.push((s, at))), Ok(2));
        assert_eq!(got, vec![(1, Time(10)), (2, Time(20))]);
        assert_eq!(
            t.ack(2, |_, _| {}),
            Err(SessionRule::AckNotIncreasing { prev: 2, got: 2 })
        );
        assert_eq!((t.in_flight(), t.last_acked()), (1, 2));
        assert_eq!(t.ack(3, |_, _| {}), Ok(1));
        assert_eq!(t.in_flight(), 0);
    }

    #[test]
    fn calls_finish_in_any_order_once() {
        let mut c = CallTracker::new(2);
        c.record(3, CallKind::Hit, Time(1));
        c.record(5, CallKind::SetProp, Time(2));
        assert!(!c.can_send());
        assert_eq!(c.finish(5).map(|p| p.kind), Some(CallKind::SetProp));
        assert_eq!(c.finish(5), None);
        assert_eq!(c.finish(4), None);
        assert_eq!(c.finish(3).map(|p| p.sent_at), Some(Time(1)));
        assert!(c.pending().is_empty());
    }
}
