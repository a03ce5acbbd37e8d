//! The bounded history of an entity's recent sync messages.
//!
//! Owns [`SyncCache`]: the last messages of one entity, consecutive by
//! version, bounded by count, bytes and age. The real appends what it emits;
//! a ghost appends what its reorder buffer releases, so wherever the real
//! goes, the cell holding it (or a ghost of it) can answer "messages after
//! version v" to heal an observer's gap after the observer's own migration.
//! When it cannot (expired or never seen), the answer is a full resync.
//! It is a plain value (rkyv) so it travels with the real when it migrates.
//!
//! # Expiry
//!
//! Seed 000 stamps messages with `seconds % 256` and must reason about
//! wraparound; here every message carries its [`Time`] (u64 microseconds),
//! so "older than `cache_age_max_ms`" is a plain comparison. Count and byte
//! bounds cap memory whatever the send rate.

use super::sync::{SyncKind, SyncMsg};
use crate::core::time::Time;
use std::collections::VecDeque;
use std::time::Duration;

/// Bounds of a [`SyncCache`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct SyncCacheParams {
    /// Most messages kept. Default 64 (two seconds at 30 Hz).
    pub cache_msgs_max: usize,
    /// Most payload bytes kept. Default 64 KiB.
    pub cache_bytes_max: usize,
    /// Messages older than this are dropped. Default 3000 ms (longer than a
    /// migration plus the observer's catch-up).
    pub cache_age_max_ms: u64,
}

impl Default for SyncCacheParams {
    fn default() -> Self {
        SyncCacheParams {
            cache_msgs_max: 64,
            cache_bytes_max: 64 * 1024,
            cache_age_max_ms: 3000,
        }
    }
}

/// The answer to "what comes after version `have`".
#[derive(Debug)]
pub enum Fill<'a> {
    /// Nothing newer than `have` is known here.
    UpToDate,
    /// Deliver these, in order (versions `have + 1 ..= last`).
    Msgs(std::collections::vec_deque::Iter<'a, SyncMsg>),
    /// Some needed version is no longer (or never was) here.
    ResyncNeeded,
}

/// Recent messages of one entity, consecutive by version.
#[derive(Clone, Debug, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct SyncCache {
    params: SyncCacheParams,
    msgs: VecDeque<SyncMsg>,
    bytes: usize,
    /// Version of the newest message (or the version the cache was reset to).
    last_version: u64,
}

impl SyncCache {
    /// An empty cache whose entity is at `version`.
    pub fn new(params: SyncCacheParams, version: u64) -> Self {
        SyncCache {
            params,
            msgs: VecDeque::new(),
            bytes: 0,
            last_version: version,
        }
    }

    /// The newest version known.
    pub fn last_version(&self) -> u64 {
        self.last_version
    }

    /// The oldest version still held, if any.
    pub fn first_version(&self) -> Option<u64> {
        self.msgs.front().map(|m| m.version)
    }

    /// Messages held.
    pub fn len(&self) -> usize {
        self.msgs.len()
    }

    /// True if no message is held.
    pub fn is_empty(&self) -> bool {
        self.msgs.is_empty()
    }

    /// Forgets everything: the entity was resynced to `version` by a snapshot.
    pub fn reset(&mut self, version: u64) {
        self.msgs.clear();
        self.bytes = 0;
        self.last_version = version;
    }

    /// Appends the next change set and expires old ones.
    ///
    /// A snapshot resets the cache to its version. A message that does not
    /// follow `last_version` also resets the cache (history must stay
    /// consecutive); older ones are ignored.
    ///
    /// # Limits
    /// `cache_msgs_max`, `cache_bytes_max`, `cache_age_max_ms` (the newest
    /// message is kept even if alone it is over the byte bound, until it ages out).
    pub fn push(&mut self, now: Time, msg: SyncMsg) {
        if msg.kind == SyncKind::Snapshot {
            self.reset(msg.version);
            return;
        }
        if msg.version <= self.last_version {
            return;
        }
        if msg.version != self.last_version + 1 {
            self.reset(msg.version - 1);
        }
        self.last_version = msg.version;
        self.bytes += msg.payload_len();
        self.msgs.push_back(msg);
        self.expire(now);
    }

    /// Drops messages past any bound.
    pub fn expire(&mut self, now: Time) {
        let age = Duration::from_millis(self.params.cache_age_max_ms);
        while self.msgs.len() > 1 {
            let front = &self.msgs[0];
            let over = self.msgs.len() > self.params.cache_msgs_max
                || self.bytes > self.params.cache_bytes_max
                || now.saturating_since(front.timestamp) > age;
            if !over {
                break;
            }
            self.bytes -= front.payload_len();
            self.msgs.pop_front();
        }
        if self.msgs.len() == 1 && now.saturating_since(self.msgs[0].timestamp) > age {
            self.reset(self.last_version);
        }
    }

    /// What an observer that last saw `have` needs to catch up.
    pub fn fill(&self, have: u64) -> Fill<'_> {
        if have >= self.last_version {
            return Fill::UpToDate;
        }
        match self.msgs.front() {
            Some(first) if first.version <= have + 1 => {
                let skip = usize::try_from(have + 1 - first.version).expect("bounded by len");
                Fill::Msgs(self.msgs.range(skip..))
            }
            _ => Fill::ResyncNeeded,
        }
    }

    /// Checks the cache invariants.
    ///
    /// # Panics
    /// If versions are not consecutive, end elsewhere than `last_version`, or
    /// the byte count is wrong.
    pub fn verify(&self) {
        for w in self.msgs.iter().zip(self.msgs.iter().skip(1)) {
            assert_eq!(w.0.version + 1, w.1.version);
        }
        if let Some(last) = self.msgs.back() {
            assert_eq!(last.version, self.last_version);
        }
        assert_eq!(
            self.bytes,
            self.msgs.iter().map(SyncMsg::payload_len).sum::<usize>()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::ids::EntityId;

    fn msg(v: u64, ms: u64) -> SyncMsg {
        SyncMsg::new(
            EntityId(1),
            v,
            SyncKind::Props,
            Time::from_millis(ms),
            &[1, 2],
            &[3],
        )
    }

    fn versions(f: Fill<'_>) -> Option<Vec<u64>> {
        match f {
            Fill::Msgs(it) => Some(it.map(|m| m.version).collect()),
            Fill::UpToDate => Some(vec![]),
            Fill::ResyncNeeded => None,
        }
    }

    #[test]
    fn fills_from_any_held_version() {
        let mut c = SyncCache::new(SyncCacheParams::default(), 0);
        for v in 1..=5 {
            c.push(Time::from_millis(v), msg(v, v));
        }
        c.verify();
        assert_eq!(versions(c.fill(0)), Some(vec![1, 2, 3, 4, 5]));
        assert_eq!(versions(c.fill(3)), Some(vec![4, 5]));
        assert_eq!(versions(c.fill(5)), Some(vec![]));
        assert_eq!(versions(c.fill(9)), Some(vec![]));
    }

    #[test]
    fn bounds_expire_old_messages() {
        let p = SyncCacheParams {
            cache_msgs_max: 3,
            cache_bytes_max: 1000,
            cache_age_max_ms: 50,
        };
        let mut c = SyncCache::new(p, 0);
        for v in 1..=5 {
            c.push(Time::from_millis(v), msg(v, v));
        }
        assert_eq!(c.first_version(), Some(3));
        assert_eq!(versions(c.fill(1)), None);
        assert_eq!(versions(c.fill(2)), Some(vec![3, 4, 5]));
        c.expire(Time::from_millis(54));
        assert_eq!(c.first_version(), Some(4));
        c.expire(Time::from_millis(1000));
        assert!(c.is_empty());
        assert_eq!(c.last_version(), 5);
        assert_eq!(versions(c.fill(4)), None);
        c.verify();
    }

    #[test]
    fn discontinuity_resets_and_cache_round_trips_rkyv() {
        let mut c = SyncCache::new(SyncCacheParams::default(), 0);
        c.push(Time::ZERO, msg(1, 0));
        c.push(Time::ZERO, msg(4, 0));
        assert_eq!(c.first_version(), Some(4));
        assert_eq!(versions(c.fill(1)), None);
        let bytes = rkyv::to_bytes::<rkyv::rancor::Error>(&c).expect("serialise");
        let back = rkyv::from_bytes::<SyncCache, rkyv::rancor::Error>(&bytes).expect("deserialise");
        assert_eq!(back, c);
    }
}
