//! Versioned real-to-ghost sync as the cell uses it: the message, the ghost's
//! reorder buffer and the real's cache of recent messages.
//!
//! A real's sync version is a `u64` that grows by one per emitted message and
//! never wraps; it travels with the real on migration, so versions from the
//! old and the new real form one sequence. Ghosts apply strictly in version
//! order: early messages wait in a bounded [`ReorderBuffer`], duplicates are
//! dropped, and a gap that does not fill is healed by a full resync.
//!
//! This module owns only these three value types; it must not know about
//! cells, layouts or routing. (The entity work provides the property model
//! and per-audience encoding; the payload here is its opaque output.)

use std::collections::VecDeque;
use std::sync::Arc;

use crate::core::geom::Vec3;
use crate::core::ids::EntityId;
use crate::core::time::Time;

/// One versioned change of a real, sent once and shared by every haunt.
#[derive(Clone, Debug, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct SyncMsg {
    /// The entity that changed.
    pub entity: EntityId,
    /// The real's sync version after this change (first message is 1).
    pub version: u64,
    /// What kind of change (property delta, movement, ghost rpc...).
    pub kind: u8,
    /// When the real emitted it.
    pub timestamp: Time,
    /// Position of the real after this change.
    pub pos: Vec3,
    /// Encoded ghost-visible change; one buffer shared by all destinations.
    pub payload: Arc<[u8]>,
}

/// The ghost-visible state of an entity at one version: what a new ghost or
/// a resynced ghost starts from.
#[derive(Clone, Debug, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct GhostSnapshot {
    /// The version this snapshot is at (0 before any change).
    pub version: u64,
    /// Position.
    pub pos: Vec3,
    /// Encoded ghost-visible properties.
    pub props: Arc<[u8]>,
}

/// What [`ReorderBuffer::push`] did with a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Push {
    /// It was the next version: apply it, then drain with [`ReorderBuffer::pop_ready`].
    Ready,
    /// Kept until the versions before it arrive.
    Buffered,
    /// Version already applied or already buffered.
    Duplicate,
    /// The buffer is full; the message was refused (a resync is needed).
    Full,
}

/// A ghost's in-order applier: the last applied version and the early
/// messages waiting for a gap to fill, sorted by version.
#[derive(Clone, Debug, Default)]
pub struct ReorderBuffer {
    applied: u64,
    early: VecDeque<SyncMsg>,
    gap_since: Option<Time>,
}

impl ReorderBuffer {
    /// A buffer whose state is at `version`.
    pub fn at(version: u64) -> Self {
        ReorderBuffer {
            applied: version,
            early: VecDeque::new(),
            gap_since: None,
        }
    }

    /// The last applied version.
    pub fn applied(&self) -> u64 {
        self.applied
    }

    /// Early messages held.
    pub fn buffered(&self) -> usize {
        self.early.len()
    }

    /// Since when a gap has been waiting (None when nothing is buffered).
    pub fn gap_since(&self) -> Option<Time> {
        self.gap_since
    }

    /// Restarts the gap timer (after a resync request).
    pub fn restart_gap_timer(&mut self, now: Time) {
        if self.gap_since.is_some() {
            self.gap_since = Some(now);
        }
    }

    /// Offers `msg`. `Ready` means the caller applies `msg` now and must call
    /// [`Self::mark_applied`] with its version.
    ///
    /// # Limits
    /// At most `max` early messages are held; beyond that `Full` is returned.
    pub fn push(&mut self, now: Time, msg: SyncMsg, max: usize) -> (Push, Option<SyncMsg>) {
        if msg.version <= self.applied {
            return (Push::Duplicate, None);
        }
        if msg.version == self.applied + 1 {
            return (Push::Ready, Some(msg));
        }
        let at = self.early.partition_point(|m| m.version < msg.version);
        if self.early.get(at).is_some_and(|m| m.version == msg.version) {
            return (Push::Duplicate, None);
        }
        if self.early.len() >= max {
            return (Push::Full, None);
        }
        self.early.insert(at, msg);
        self.gap_since.get_or_insert(now);
        (Push::Buffered, None)
    }

    /// Records that `version` (the next one) was applied.
    ///
    /// # Panics
    /// If `version` is not `applied + 1` (an internal ordering bug).
    pub fn mark_applied(&mut self, version: u64) {
        assert_eq!(version, self.applied + 1, "sync applied out of order");
        self.applied = version;
        if self.early.is_empty() {
            self.gap_since = None;
        }
    }

    /// The next buffered message if it is now in order.
    pub fn pop_ready(&mut self) -> Option<SyncMsg> {
        while self
            .early
            .front()
            .is_some_and(|m| m.version <= self.applied)
        {
            self.early.pop_front();
        }
        if self.early.front()?.version == self.applied + 1 {
            return self.early.pop_front();
        }
        None
    }

    /// Jumps to a snapshot at `version` (resync or re-creation): drops every
    /// buffered message at or below it. No-op if `version` is not newer.
    pub fn reset_to(&mut self, version: u64) -> bool {
        if version < self.applied {
            return false;
        }
        self.applied = version;
        while self.early.front().is_some_and(|m| m.version <= version) {
            self.early.pop_front();
        }
        if self.early.is_empty() {
            self.gap_since = None;
        }
        true
    }
}

/// A real's most recent sync messages, oldest first, bounded. It travels with
/// the real so a new real can catch up ghosts the old one could not reach.
#[derive(Clone, Debug, Default, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct SyncCache {
    msgs: VecDeque<SyncMsg>,
}

impl SyncCache {
    /// Appends `msg`, dropping the oldest beyond `max`.
    ///
    /// # Panics
    /// If `msg` does not directly follow the newest cached version.
    pub fn push(&mut self, msg: SyncMsg, max: usize) {
        if let Some(last) = self.msgs.back() {
            assert_eq!(msg.version, last.version + 1, "sync cache gap");
        }
        self.msgs.push_back(msg);
        while self.msgs.len() > max {
            self.msgs.pop_front();
        }
    }

    /// Messages newer than `version`, if the cache reaches back that far.
    pub fn since(&self, version: u64) -> Option<impl Iterator<Item = &SyncMsg>> {
        let first = self.msgs.front()?.version;
        if first > version + 1 {
            return None;
        }
        Some(self.msgs.iter().filter(move |m| m.version > version))
    }

    /// Cached messages.
    pub fn len(&self) -> usize {
        self.msgs.len()
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.msgs.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(v: u64) -> SyncMsg {
        SyncMsg {
            entity: EntityId(1),
            version: v,
            kind: 0,
            timestamp: Time::ZERO,
            pos: Vec3::default(),
            payload: Arc::from(&[v as u8][..]),
        }
    }

    fn drive(buf: &mut ReorderBuffer, m: SyncMsg, out: &mut Vec<u64>) -> Push {
        let (r, ready) = buf.push(Time::ZERO, m, 4);
        if let Some(m) = ready {
            buf.mark_applied(m.version);
            out.push(m.version);
            while let Some(m) = buf.pop_ready() {
                buf.mark_applied(m.version);
                out.push(m.version);
            }
        }
        r
    }

    #[test]
    fn every_permutation_of_five_applies_in_order() {
        let mut order = [1u64, 2, 3, 4, 5];
        permute(&mut order, 0, &mut |p| {
            let mut buf = ReorderBuffer::at(0);
            let mut out = Vec::new();
            for v in p {
                drive(&mut buf, msg(*v), &mut out);
            }
            assert_eq!(out, vec![1, 2, 3, 4, 5], "{p:?}");
            assert_eq!(buf.gap_since(), None);
        });
    }

    fn permute(a: &mut [u64], k: usize, f: &mut dyn FnMut(&[u64])) {
        if k == a.len() {
            f(a);
            return;
        }
        for i in k..a.len() {
            a.swap(k, i);
            permute(a, k + 1, f);
            a.swap(k, i);
        }
    }

    #[test]
    fn duplicates_and_overflow_are_refused() {
        let mut buf = ReorderBuffer::at(3);
        let mut out = Vec::new();
        assert_eq!(drive(&mut buf, msg(2), &mut out), Push::Duplicate);
        assert_eq!(drive(&mut buf, msg(6), &mut out), Push::Buffered);
        assert_eq!(drive(&mut buf, msg(6), &mut out), Push::Duplicate);
        for v in 7..10 {
            assert_eq!(drive(&mut buf, msg(v), &mut out), Push::Buffered);
        }
        assert_eq!(drive(&mut buf, msg(10), &mut out), Push::Full);
        assert!(buf.gap_since().is_some());
        assert!(buf.reset_to(7));
        assert_eq!(buf.buffered(), 2);
        assert_eq!(buf.pop_ready().map(|m| m.version), Some(8));
    }

    #[test]
    fn cache_reports_whether_it_reaches_back() {
        let mut c = SyncCache::default();
        for v in 1..=10 {
            c.push(msg(v), 4);
        }
        assert_eq!(c.len(), 4);
        assert!(c.since(5).is_none());
        let got: Vec<u64> = c.since(6).expect("reaches").map(|m| m.version).collect();
        assert_eq!(got, vec![7, 8, 9, 10]);
        assert_eq!(c.since(10).expect("reaches").count(), 0);
    }
}
