//! A small open-addressing map from [`EntityId`] to a dense `u32` slot, with
//! a fixed hash (no random seed), so lookups on the hot path cost a few
//! nanoseconds and runs are reproducible.
//!
//! Linear probing over a power-of-two table kept at most half full; removal
//! shifts the following entries back (no tombstones). It is never iterated by
//! callers that need an order, so the hash order cannot leak into results.

use crate::core::ids::EntityId;

const EMPTY: u32 = u32::MAX;

/// `EntityId -> u32` with a fixed hash.
#[derive(Clone, Debug)]
pub struct IdMap {
    keys: Vec<u64>,
    vals: Vec<u32>,
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
            keys: vec![0; cap],
            vals: vec![EMPTY; cap],
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
        let mut i = hash(id.0) as usize & self.mask;
        loop {
            let v = self.vals[i];
            if v == EMPTY {
                return None;
            }
            if self.keys[i] == id.0 {
                return Some(v);
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
        if (self.len + 1) * 2 > self.keys.len() {
            self.grow();
        }
        let mut i = hash(id.0) as usize & self.mask;
        loop {
            if self.vals[i] == EMPTY {
                self.keys[i] = id.0;
                self.vals[i] = val;
                self.len += 1;
                return None;
            }
            if self.keys[i] == id.0 {
                return Some(std::mem::replace(&mut self.vals[i], val));
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Removes `id`; returns its value.
    pub fn remove(&mut self, id: EntityId) -> Option<u32> {
        let mut i = hash(id.0) as usize & self.mask;
        loop {
            let v = self.vals[i];
            if v == EMPTY {
                return None;
            }
            if self.keys[i] == id.0 {
                break;
            }
            i = (i + 1) & self.mask;
        }
        let removed = self.vals[i];
        // Backward-shift deletion: pull later entries of the probe run into
        // the hole when their home slot does not lie strictly after it.
        let mut hole = i;
        let mut j = (i + 1) & self.mask;
        while self.vals[j] != EMPTY {
            let home = hash(self.keys[j]) as usize & self.mask;
            let dist_j = j.wrapping_sub(home) & self.mask;
            let dist_hole = j.wrapping_sub(hole) & self.mask;
            if dist_j >= dist_hole {
                self.keys[hole] = self.keys[j];
                self.vals[hole] = self.vals[j];
                hole = j;
            }
            j = (j + 1) & self.mask;
        }
        self.vals[hole] = EMPTY;
        self.len -= 1;
        Some(removed)
    }

    fn grow(&mut self) {
        let old_keys = std::mem::take(&mut self.keys);
        let old_vals = std::mem::take(&mut self.vals);
        let cap = old_keys.len() * 2;
        self.keys = vec![0; cap];
        self.vals = vec![EMPTY; cap];
        self.mask = cap - 1;
        self.len = 0;
        for (k, v) in old_keys.into_iter().zip(old_vals) {
            if v != EMPTY {
                self.insert(EntityId(k), v);
            }
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
}
