//! [`SlotIndex`]: an observer's map from entity to slot table position, one
//! cache line a lookup.
//!
//! An observer looks its index up only off its flush's walk: an enter, a
//! leave (twice: the removed entity, then the slot swapped into its hole),
//! a snapshot to send. By then the index is cold (thousands of observers
//! ran since), and the clients benchmark's profile put those probes at 3 %
//! of the server at 5,000 clients (`Observer::leave` and
//! `flush_snapshots` were nearly all hash probes). A SwissTable
//! (`hashbrown`) reads a control group and then, in another array, the
//! bucket: two dependent misses. Here key and position share a 16-byte
//! bucket in one array, probed linearly from the key's home at a load of
//! at most a half: a lookup reads the home line and rarely the next one.
//! Removal shifts the probe run back (no tombstones), so a lookup never
//! walks past dead buckets.
//!
//! Owns only the index; the positions mean nothing to it.

use crate::core::ids::EntityId;

/// One bucket: a key and its position, or empty (`pos == EMPTY`).
#[derive(Clone, Copy, Debug)]
#[repr(C, align(16))]
struct Bucket {
    id: EntityId,
    pos: u32,
}

/// The position of an empty bucket (no table holds 2^32 - 1 slots).
const EMPTY: u32 = u32::MAX;

const VACANT: Bucket = Bucket {
    id: EntityId(0),
    pos: EMPTY,
};

/// The fewest buckets a table with anything in it has.
const BUCKETS_MIN: usize = 8;

/// Entity -> position (see the module doc).
#[derive(Clone, Debug, Default)]
pub(super) struct SlotIndex {
    /// A power of two long (or empty), at most half full.
    buckets: Vec<Bucket>,
    len: usize,
}

impl SlotIndex {
    /// The position of `id`.
    #[inline]
    pub(super) fn get(&self, id: EntityId) -> Option<u32> {
        let i = self.find(id)?;
        Some(self.buckets[i].pos)
    }

    /// True if `id` has a position.
    #[inline]
    pub(super) fn contains(&self, id: EntityId) -> bool {
        self.find(id).is_some()
    }

    /// Gives `id` the position `pos` (a new key, or a new position for one
    /// held); returns the old position.
    pub(super) fn insert(&mut self, id: EntityId, pos: u32) -> Option<u32> {
        assert_ne!(pos, EMPTY, "a position below u32::MAX");
        if let Some(i) = self.find(id) {
            return Some(std::mem::replace(&mut self.buckets[i].pos, pos));
        }
        if 2 * (self.len + 1) > self.buckets.len() {
            self.grow();
        }
        let mask = self.buckets.len() - 1;
        let mut i = home(id, mask);
        while self.buckets[i].pos != EMPTY {
            i = (i + 1) & mask;
        }
        self.buckets[i] = Bucket { id, pos };
        self.len += 1;
        None
    }

    /// Sets the position of `id`, which is held.
    ///
    /// # Panics
    /// If `id` is not held.
    #[inline]
    pub(super) fn set(&mut self, id: EntityId, pos: u32) {
        assert_ne!(pos, EMPTY, "a position below u32::MAX");
        let i = self.find(id).expect("the key is indexed");
        self.buckets[i].pos = pos;
    }

    /// Removes `id`; returns its position.
    pub(super) fn remove(&mut self, id: EntityId) -> Option<u32> {
        let mut hole = self.find(id)?;
        let pos = self.buckets[hole].pos;
        self.len -= 1;
        // Shift the rest of the probe run back: a bucket moves into the
        // hole unless its home lies cyclically after the hole (then a
        // lookup from its home would never pass the hole).
        let mask = self.buckets.len() - 1;
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let b = self.buckets[j];
            if b.pos == EMPTY {
                break;
            }
            let h = home(b.id, mask);
            if (j.wrapping_sub(h) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.buckets[hole] = b;
                hole = j;
            }
        }
        self.buckets[hole] = VACANT;
        Some(pos)
    }

    /// Keys held.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The bucket of `id`, if held.
    #[inline]
    fn find(&self, id: EntityId) -> Option<usize> {
        if self.buckets.is_empty() {
            return None;
        }
        let mask = self.buckets.len() - 1;
        let mut i = home(id, mask);
        // At most half full: the run from any home ends at an empty bucket.
        loop {
            let b = &self.buckets[i];
            if b.pos == EMPTY {
                return None;
            }
            if b.id == id {
                return Some(i);
            }
            i = (i + 1) & mask;
        }
    }

    /// Doubles the buckets (or makes the first ones) and places every key
    /// again.
    fn grow(&mut self) {
        let n = (self.buckets.len() * 2).max(BUCKETS_MIN);
        let old = std::mem::replace(&mut self.buckets, vec![VACANT; n]);
        let mask = n - 1;
        for b in old.into_iter().filter(|b| b.pos != EMPTY) {
            let mut i = home(b.id, mask);
            while self.buckets[i].pos != EMPTY {
                i = (i + 1) & mask;
            }
            self.buckets[i] = b;
        }
    }
}

/// The first bucket `id` is looked for in: the top bits of a multiplicative
/// (Fibonacci) hash, so ids that differ in any bits spread.
#[inline]
fn home(id: EntityId, mask: usize) -> usize {
    let h = id.0.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let bits = mask.count_ones();
    // `mask + 1` buckets, a power of two: the top `bits` bits of the hash.
    (h.checked_shr(64 - bits).unwrap_or(0)) as usize & mask
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[test]
    fn a_bucket_is_sixteen_bytes_four_a_line() {
        assert_eq!(std::mem::size_of::<Bucket>(), 16);
        assert_eq!(std::mem::align_of::<Bucket>(), 16);
    }

    /// A full run: keys crowded onto one home wrap around the end of the
    /// table; removing from the middle of the run keeps every other key
    /// found (fails without the backward shift: a lookup stops at the
    /// hole).
    #[test]
    fn removal_inside_a_wrapped_run_keeps_the_rest_found() {
        let mut ix = SlotIndex::default();
        // Three ids whose home is the last bucket of an 8-bucket table.
        let last: Vec<EntityId> = (0u64..)
            .map(EntityId)
            .filter(|&id| home(id, 7) == 7)
            .take(3)
            .collect();
        for (p, &id) in last.iter().enumerate() {
            assert_eq!(ix.insert(id, p as u32), None);
        }
        assert_eq!(ix.buckets.len(), 8);
        assert_eq!(ix.remove(last[0]), Some(0));
        assert_eq!(ix.get(last[1]), Some(1));
        assert_eq!(ix.get(last[2]), Some(2));
        assert_eq!(ix.get(last[0]), None);
        assert_eq!(ix.len(), 2);
    }

    #[test]
    fn set_moves_a_held_key_and_insert_replaces() {
        let mut ix = SlotIndex::default();
        assert!(!ix.contains(EntityId(5)));
        assert_eq!(ix.get(EntityId(5)), None);
        assert_eq!(ix.remove(EntityId(5)), None, "empty table");
        ix.insert(EntityId(5), 0);
        ix.set(EntityId(5), 9);
        assert_eq!(ix.get(EntityId(5)), Some(9));
        assert_eq!(ix.insert(EntityId(5), 2), Some(9));
        assert_eq!(ix.len(), 1);
    }

    #[test]
    #[should_panic(expected = "the key is indexed")]
    fn set_of_a_missing_key_panics() {
        SlotIndex::default().set(EntityId(1), 0);
    }

    proptest! {
        /// Against a `BTreeMap`, with ids drawn from a small range (long
        /// probe runs, many removals inside them) and from anywhere.
        #[test]
        fn behaves_as_a_map(
            ops in proptest::collection::vec((0u8..4, 0u64..64, 0u32..1000, any::<u64>()), 0..400)
        ) {
            let mut ix = SlotIndex::default();
            let mut model: BTreeMap<EntityId, u32> = BTreeMap::new();
            for (op, small, pos, wide) in ops {
                let id = EntityId(if op == 3 { wide } else { small });
                match op {
                    0 | 3 => prop_assert_eq!(ix.insert(id, pos), model.insert(id, pos)),
                    1 => prop_assert_eq!(ix.remove(id), model.remove(&id)),
                    _ => {
                        if model.contains_key(&id) {
                            ix.set(id, pos);
                            model.insert(id, pos);
                        }
                    }
                }
                prop_assert_eq!(ix.len(), model.len());
                prop_assert!(2 * ix.len() <= ix.buckets.len().max(1));
                for k in 0..64u64 {
                    let k = EntityId(k);
                    prop_assert_eq!(ix.get(k), model.get(&k).copied());
                }
                for (k, v) in &model {
                    prop_assert_eq!(ix.get(*k), Some(*v));
                }
            }
        }
    }
}
