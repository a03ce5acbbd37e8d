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
use crate::core::geom::Vec3;
use crate::core::time::Time;
use std::collections::VecDeque;
use std::time::Duration;

/// Expired payload buffers larger than this are not kept for the next
/// message ([`SyncCache::push_keep`]): a rare large change would otherwise
/// stay allocated per entity.
const SPARE_PAYLOAD_BYTES_MAX: usize = 256;

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

/// The run of bare movements (for other clients) that ends the stream:
/// every version in `(from, last_version]` is one, and the newest put the
/// entity at `pos`, `yaw`. Kept as each message is appended, so an observer
/// behind by movements only takes the newest without reading the messages
/// (see `core::view`'s "Pull at the flush").
#[derive(Clone, Copy, Debug, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
struct MoveRun {
    from: u64,
    pos: Vec3,
    yaw: f32,
}

/// The versions that bound a cache's closing run of bare movements: enough
/// to answer "is everything after `have` that run" without the cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunBounds {
    /// The newest version the cache knows.
    pub last_version: u64,
    /// The oldest `have` the closing run answers: the run's first version,
    /// or one below the oldest version held if that is later (the two
    /// bounds folded into one, so a cell's dense head with its entity id
    /// fits one cache line).
    covers_from: u64,
}

impl RunBounds {
    /// The bounds of a cache whose newest version is `last_version`, whose
    /// oldest held version is `front` (`last_version + 1` when empty) and
    /// whose closing run starts at version `run_from`.
    #[inline]
    pub fn new(last_version: u64, front: u64, run_from: u64) -> Self {
        RunBounds {
            last_version,
            // `have + 1 >= front` is `have >= front - 1` (always, for front 0).
            covers_from: run_from.max(front.saturating_sub(1)),
        }
    }

    /// True when everything after `have` is the closing run of bare
    /// movements (and the cache still holds `have + 1`).
    #[inline]
    pub fn covers_after(&self, have: u64) -> bool {
        have < self.last_version && have >= self.covers_from
    }
}

/// A copy of a [`SyncCache`]'s head: enough to answer
/// [`SyncCache::moves_after`] without the cache.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CacheHead {
    bounds: RunBounds,
    pos: Vec3,
    yaw: f32,
}

impl CacheHead {
    /// The newest version the cache knows.
    pub fn last_version(&self) -> u64 {
        self.bounds.last_version
    }

    /// The versions bounding the closing run.
    pub fn bounds(&self) -> RunBounds {
        self.bounds
    }

    /// As [`SyncCache::moves_after`].
    pub fn moves_after(&self, have: u64) -> Option<(Vec3, f32)> {
        self.bounds
            .covers_after(have)
            .then_some((self.pos, self.yaw))
    }

    /// The closing run's newest position and heading (meaningful only
    /// where [`RunBounds::covers_after`] holds).
    pub fn newest_move(&self) -> (Vec3, f32) {
        (self.pos, self.yaw)
    }
}

/// Recent messages of one entity, consecutive by version.
#[derive(Clone, Debug, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct SyncCache {
    params: SyncCacheParams,
    msgs: VecDeque<SyncMsg>,
    bytes: usize,
    /// Version of the newest message (or the version the cache was reset to).
    last_version: u64,
    /// Version of the oldest message held (`last_version + 1` when empty):
    /// kept beside the queue so the question "does it reach `have + 1`"
    /// needs no read of the messages.
    front: u64,
    /// The closing run of bare movements.
    moves: MoveRun,
}

impl SyncCache {
    /// An empty cache whose entity is at `version`.
    pub fn new(params: SyncCacheParams, version: u64) -> Self {
        SyncCache {
            params,
            msgs: VecDeque::new(),
            bytes: 0,
            last_version: version,
            front: version + 1,
            moves: MoveRun {
                from: version,
                pos: Vec3::default(),
                yaw: 0.0,
            },
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
        self.front = version + 1;
        self.moves.from = version;
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
        self.push_keep(now, msg, &mut Vec::new());
    }

    /// As [`SyncCache::push`]; if `spare` has no allocation, it gets the
    /// payload buffer of a message this push expired (a small one), for
    /// the next message ([`SyncEmitter`](super::SyncEmitter) builds in it):
    /// in steady state each push expires one, so no allocation per message.
    pub fn push_keep(&mut self, now: Time, msg: SyncMsg, spare: &mut Vec<u8>) {
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
        match msg.others_bare_movement() {
            Some((pos, yaw)) => {
                self.moves.pos = pos;
                self.moves.yaw = yaw;
            }
            None => self.moves.from = msg.version,
        }
        if self.msgs.is_empty() {
            self.front = msg.version;
        }
        self.msgs.push_back(msg);
        self.expire_keep(now, spare);
    }

    /// Drops messages past any bound.
    pub fn expire(&mut self, now: Time) {
        self.expire_keep(now, &mut Vec::new());
    }

    /// As [`SyncCache::expire`], keeping a payload buffer as
    /// [`SyncCache::push_keep`] does.
    fn expire_keep(&mut self, now: Time, spare: &mut Vec<u8>) {
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
            if let Some(m) = self.msgs.pop_front() {
                let p = m.into_payload();
                if spare.capacity() == 0 && p.capacity() <= SPARE_PAYLOAD_BYTES_MAX {
                    *spare = p;
                }
            }
            self.front += 1;
        }
        if self.msgs.len() == 1 && now.saturating_since(self.msgs[0].timestamp) > age {
            self.reset(self.last_version);
        }
    }

    /// Where the newest message put the entity, when everything an
    /// observer that last saw `have` lacks is bare movements this cache
    /// still holds: the observer may take that one movement for them all.
    /// `None`: up to date, or something else is due (ask [`SyncCache::fill`]).
    pub fn moves_after(&self, have: u64) -> Option<(Vec3, f32)> {
        let run = self.head().moves_after(have);
        debug_assert!(run.is_none() || matches!(self.fill(have), Fill::Msgs(_)));
        run
    }

    /// The few words [`SyncCache::moves_after`] reads, as a plain value (a
    /// cell copies them into one dense table per tick for its observers).
    pub fn head(&self) -> CacheHead {
        CacheHead {
            bounds: RunBounds::new(self.last_version, self.front, self.moves.from),
            pos: self.moves.pos,
            yaw: self.moves.yaw,
        }
    }

    /// Where the fields [`SyncCache::head`] reads lie (for a prefetch: the
    /// first and the last of them, one or two cache lines).
    #[inline]
    pub fn head_lines(&self) -> [*const u8; 2] {
        [
            std::ptr::from_ref(&self.last_version).cast(),
            std::ptr::from_ref(&self.moves.yaw).cast(),
        ]
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
        assert_eq!(
            self.front,
            self.msgs
                .front()
                .map_or(self.last_version + 1, |m| m.version)
        );
        assert!(self.moves.from <= self.last_version);
        for m in self.msgs.iter().filter(|m| m.version > self.moves.from) {
            assert!(
                m.others_bare_movement().is_some(),
                "the run holds bare movements"
            );
        }
        if let Some(last) = self.msgs.back().filter(|m| m.version > self.moves.from) {
            assert_eq!(
                last.others_bare_movement(),
                Some((self.moves.pos, self.moves.yaw))
            );
        }
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

    fn movement(v: u64, ms: u64, x: f64, props: bool) -> SyncMsg {
        let mut block = Vec::new();
        super::super::codec::put_f64(&mut block, x);
        super::super::codec::put_f64(&mut block, 0.0);
        super::super::codec::put_f64(&mut block, 2.0);
        super::super::codec::put_f32(&mut block, 0.5);
        let kind = if props {
            SyncKind::MovementAndProps
        } else {
            SyncKind::Movement
        };
        if props {
            block.push(0); // an empty delta for other clients
        }
        SyncMsg::new(EntityId(1), v, kind, Time::from_millis(ms), &block, &block)
    }

    #[test]
    fn folded_run_bounds_answer_as_the_three_bounds_did() {
        // Every small case, against the check before the fold: `have` below
        // the newest, at or after the run's start, `have + 1` still held.
        for last in 0..8u64 {
            for front in 0..=last + 1 {
                for run_from in 0..=last + 1 {
                    let b = super::RunBounds::new(last, front, run_from);
                    for have in 0..10u64 {
                        let old = have < last && have >= run_from && have + 1 >= front;
                        assert_eq!(
                            b.covers_after(have),
                            old,
                            "last {last} front {front} run_from {run_from} have {have}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn moves_after_gives_the_newest_position_only_over_a_run_of_bare_movements() {
        let mut c = SyncCache::new(SyncCacheParams::default(), 0);
        c.push(Time::from_millis(1), msg(1, 1));
        assert_eq!(c.moves_after(0), None, "a property change is due");
        c.push(Time::from_millis(2), movement(2, 2, 5.0, false));
        c.push(Time::from_millis(3), movement(3, 3, 6.0, true));
        c.verify();
        let newest = Some((Vec3::new(6.0, 0.0, 2.0), 0.5));
        assert_eq!(c.moves_after(1), newest);
        assert_eq!(c.moves_after(2), newest);
        assert_eq!(c.moves_after(0), None, "version 1 is not a movement");
        assert_eq!(c.moves_after(3), None, "up to date");
        // Expired past `have + 1`: the observer must resync as before.
        let mut short = SyncCache::new(
            SyncCacheParams {
                cache_msgs_max: 1,
                ..SyncCacheParams::default()
            },
            0,
        );
        for v in 1..=3 {
            short.push(Time::from_millis(v), movement(v, v, v as f64, false));
        }
        short.verify();
        assert_eq!(short.moves_after(1), None);
        assert!(matches!(short.fill(1), Fill::ResyncNeeded));
        assert_eq!(short.moves_after(2), Some((Vec3::new(3.0, 0.0, 2.0), 0.5)));
        // A reset ends the run.
        c.reset(9);
        assert_eq!(c.moves_after(8), None);
        c.push(Time::from_millis(4), movement(10, 4, 1.0, false));
        assert_eq!(c.moves_after(9), Some((Vec3::new(1.0, 0.0, 2.0), 0.5)));
        c.verify();
    }
}
