//! A small open-addressing map from [`EntityId`] to a dense `u32` slot, with
//! a fixed hash (no random seed), so lookups on the hot path cost a few
//! nanoseconds and runs are reproducible.
//!
//! Linear probing over a power-of-two table kept at most half full; removal
//! shifts the following entries back (no tombstones). It is never iterated by
//! callers that need an order, so the hash order cannot leak into results.
//!
//! Key and value share one 16-byte bucket in one array, so a lookup reads
//! the key's home line and rarely the next one. Its users read it cold: the
//! AOI's id index (`GridAoi`) and every observer's slot index
//! (`core::view::slots`, looked up off the flush's walk: an enter, a leave,
//! a snapshot to send). Keys and values in two arrays cost two misses a
//! probe there, as a SwissTable's control group and bucket did (the
//! twenty-ninth round, `bench/README.md`: `Observer::leave` and
//! `flush_snapshots` at 5,000 clients were nearly all hash probes).

use crate::core::ids::EntityId;

const EMPTY: u32 = u32::MAX;

/// One bucket: a key and its value, or empty (`val == EMPTY`).
#[derive(Clone, Copy, Debug)]
#[repr(C, align(16))]
struct Bucket {
    key: u64,
    val: u32,
}

const VACANT: Bucket = Bucket { key: 0, val: EMPTY };

/// `EntityId -> u32` with a fixed hash.
#[derive(Clone, Debug)]
pub struct IdMap {
    buckets: Vec<Bucket>,
    len: usize,
    mask: usize,
}

#[inline]
fn hash(k: u64) -> u64 {
    // SplitMix64's finaliser: a fixed, well-mixed permutation of u64.
    let mut z = k.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Default for IdMap {
    fn default() -> Self {
        IdMap::with_capacity(8)
    }
}

impl IdMap {
    /// A map that holds `n` entries before it grows.
    pub fn with_capacity(n: usize) -> Self {
        let cap = (n.max(4) * 2).next_power_of_two();
        IdMap {
            buckets: vec![VACANT; cap],
            len: 0,
            mask: cap - 1,
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The slot of `id`.
    #[inline]
    pub fn get(&self, id: EntityId) -> Option<u32> {
        let i = self.find(id)?;
        Some(self.buckets[i].val)
    }

    /// True if `id` has a slot.
    #[inline]
    pub fn contains(&self, id: EntityId) -> bool {
        self.find(id).is_some()
    }

    /// The bucket of `id`, if held.
    #[inline]
    fn find(&self, id: EntityId) -> Option<usize> {
        let mut i = hash(id.0) as usize & self.mask;
        loop {
            let b = &self.buckets[i];
            if b.val == EMPTY {
                return None;
            }
            if b.key == id.0 {
                return Some(i);
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Inserts or replaces; returns the previous value.
    ///
    /// # Panics
    /// When `val == u32::MAX` (reserved for empty).
    pub fn insert(&mut self, id: EntityId, val: u32) -> Option<u32> {
        assert!(val != EMPTY, "u32::MAX is reserved");
        if (self.len + 1) * 2 > self.buckets.len() {
            self.grow();
        }
        let mut i = hash(id.0) as usize & self.mask;
        loop {
            let b = &mut self.buckets[i];
            if b.val == EMPTY {
                *b = Bucket { key: id.0, val };
                self.len += 1;
                return None;
            }
            if b.key == id.0 {
                return Some(std::mem::replace(&mut b.val, val));
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Removes `id`; returns its value.
    pub fn remove(&mut self, id: EntityId) -> Option<u32> {
        let i = self.find(id)?;
        let removed = self.buckets[i].val;
        // Backward-shift deletion: pull later entries of the probe run into
        // the hole when their home slot does not lie strictly after it.
        let mut hole = i;
        let mut j = (i + 1) & self.mask;
        while self.buckets[j].val != EMPTY {
            let home = hash(self.buckets[j].key) as usize & self.mask;
            let dist_j = j.wrapping_sub(home) & self.mask;
            let dist_hole = j.wrapping_sub(hole) & self.mask;
            if dist_j >= dist_hole {
                self.buckets[hole] = self.buckets[j];
                hole = j;
            }
            j = (j + 1) & self.mask;
        }
        self.buckets[hole] = VACANT;
        self.len -= 1;
        Some(removed)
    }

    fn grow(&mut self) {
        let cap = self.buckets.len() * 2;
        let old = std::mem::replace(&mut self.buckets, vec![VACANT; cap]);
        self.mask = cap - 1;
        self.len = 0;
        for b in old.into_iter().filter(|b| b.val != EMPTY) {
            self.insert(EntityId(b.key), b.val);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn behaves_like_a_btreemap() {
        let mut m = IdMap::with_capacity(2);
        let mut o = BTreeMap::new();
        let mut s = 7u64;
        for step in 0..20_000u32 {
            s = hash(s);
            let k = EntityId(s % 300);
            if s % 3 == 0 {
                assert_eq!(m.remove(k), o.remove(&k), "step {step}");
            } else {
                assert_eq!(m.insert(k, step), o.insert(k, step), "step {step}");
            }
            assert_eq!(m.len(), o.len());
        }
        for k in 0..300 {
            assert_eq!(m.get(EntityId(k)), o.get(&EntityId(k)).copied());
        }
    }

    #[test]
    fn a_bucket_is_sixteen_bytes_four_a_line() {
        assert_eq!(std::mem::size_of::<Bucket>(), 16);
        assert_eq!(std::mem::align_of::<Bucket>(), 16);
    }

    /// Keys crowded onto the last bucket wrap around the table's end;
    /// removing the first of the run keeps the others found (fails without
    /// the backward shift: a lookup stops at the hole).
    #[test]
    fn removal_inside_a_wrapped_run_keeps_the_rest_found() {
        let mut m = IdMap::with_capacity(4);
        assert_eq!(m.buckets.len(), 8);
        let last: Vec<EntityId> = (0u64..)
            .map(EntityId)
            .filter(|id| hash(id.0) as usize & 7 == 7)
            .take(3)
            .collect();
        for (v, &id) in (0u32..).zip(&last) {
            assert_eq!(m.insert(id, v), None);
        }
        assert_eq!(m.buckets.len(), 8, "no growth: the run wraps");
        assert_eq!(m.remove(last[0]), Some(0));
        assert_eq!(m.get(last[1]), Some(1));
        assert_eq!(m.get(last[2]), Some(2));
        assert_eq!(m.get(last[0]), None);
        assert!(m.contains(last[2]) && !m.contains(last[0]));
        assert_eq!(m.len(), 2);
    }
}
