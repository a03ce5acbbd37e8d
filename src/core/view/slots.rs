//! The observer's slot table: one [`Slot`] per entity in a client's view,
//! kept dense for the two hot paths.
//!
//! Every released sync message of an entity is fed to each observer that
//! sees it (one lookup per observer per message), and every flush walks all
//! of an observer's slots (budget priorities, pending movements). With a
//! `BTreeMap` both chase pointers through scattered nodes: the clients
//! benchmark's profile put a third of the server's CPU in those two walks,
//! almost all of it cache misses. Here the slots live in one `Vec` (a flush
//! is a linear scan) and an `FxHashMap` maps an entity to its index (one
//! probe per lookup). Removal swaps the last slot into the hole, so the
//! table stays dense; its order is the order of arrival, deterministic for
//! the same inputs (the migration blob sorts what it writes).
//!
//! Owns only the table; knows nothing of versions, budgets or the wire.

use rustc_hash::FxHashMap; // tidy: allow(HashMap): no random seed; lookups only, never iterated

use super::observer::Slot;
use crate::core::ids::EntityId;

/// Dense slots with an index by entity (see the module doc).
#[derive(Clone, Debug, Default)]
pub(super) struct Slots {
    entries: Vec<(EntityId, Slot)>,
    index: FxHashMap<EntityId, u32>, // tidy: allow(HashMap): no random seed; lookups only, never iterated
}

impl Slots {
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(super) fn contains_key(&self, entity: &EntityId) -> bool {
        self.index.contains_key(entity)
    }

    pub(super) fn get(&self, entity: &EntityId) -> Option<&Slot> {
        let &i = self.index.get(entity)?;
        Some(&self.entries[i as usize].1)
    }

    pub(super) fn get_mut(&mut self, entity: &EntityId) -> Option<&mut Slot> {
        let &i = self.index.get(entity)?;
        Some(&mut self.entries[i as usize].1)
    }

    /// The table position of `entity`'s slot.
    pub(super) fn position(&self, entity: &EntityId) -> Option<usize> {
        self.index.get(entity).map(|&i| i as usize)
    }

    /// The slot at table position `i` (`i < len()`).
    pub(super) fn at(&self, i: usize) -> (EntityId, &Slot) {
        let (e, s) = &self.entries[i];
        (*e, s)
    }

    /// The host hint of the slot at table position `i`, if there is one.
    #[inline]
    pub(super) fn hint_at(&self, i: usize) -> Option<u32> {
        self.entries.get(i).map(|(_, s)| s.hint)
    }

    /// The slot at table position `i` (`i < len()`), mutable. Positions
    /// stay put until a slot is removed.
    pub(super) fn at_mut(&mut self, i: usize) -> &mut Slot {
        &mut self.entries[i].1
    }

    /// The entity of the slot last in the table (the one last inserted if
    /// nothing was removed since: how the blob decoder checks its order).
    pub(super) fn last_key(&self) -> Option<EntityId> {
        self.entries.last().map(|&(e, _)| e)
    }

    /// Adds or replaces the slot of `entity`.
    pub(super) fn insert(&mut self, entity: EntityId, slot: Slot) {
        if let Some(s) = self.get_mut(&entity) {
            *s = slot;
            return;
        }
        let i = u32::try_from(self.entries.len()).expect("views hold far fewer than 2^32 entities");
        self.entries.push((entity, slot));
        self.index.insert(entity, i);
    }

    /// Removes the slot of `entity`; the last slot takes its place.
    pub(super) fn remove(&mut self, entity: &EntityId) -> Option<Slot> {
        let i = self.index.remove(entity)? as usize;
        let (e, slot) = self.entries.swap_remove(i);
        debug_assert_eq!(e, *entity);
        if let Some(&(moved, _)) = self.entries.get(i) {
            *self.index.get_mut(&moved).expect("every entry is indexed") = i as u32;
        }
        Some(slot)
    }

    /// The slots in table order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&EntityId, &Slot)> + Clone + '_ {
        self.entries.iter().map(|(e, s)| (e, s))
    }

    /// The slots in table order, mutable.
    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = (&EntityId, &mut Slot)> + '_ {
        self.entries.iter_mut().map(|(e, s)| (&*e, s))
    }

    /// The entities in table order.
    pub(super) fn keys(&self) -> impl Iterator<Item = &EntityId> + Clone + '_ {
        self.entries.iter().map(|(e, _)| e)
    }

    /// The slots in table order.
    pub(super) fn values(&self) -> impl Iterator<Item = &Slot> + '_ {
        self.entries.iter().map(|(_, s)| s)
    }

    /// Checks that the index and the entries agree.
    ///
    /// # Panics
    /// If an entry is not indexed at its position, or the index has extra
    /// keys.
    pub(super) fn verify(&self) {
        assert_eq!(self.index.len(), self.entries.len(), "slot index size");
        for (i, (e, _)) in self.entries.iter().enumerate() {
            assert_eq!(self.index.get(e), Some(&(i as u32)), "{e} indexed");
        }
    }
}

impl std::ops::Index<&EntityId> for Slots {
    type Output = Slot;

    /// The slot of `entity`.
    ///
    /// # Panics
    /// If `entity` has no slot.
    fn index(&self, entity: &EntityId) -> &Slot {
        self.get(entity).expect("the entity has a slot")
    }
}

impl<'a> IntoIterator for &'a Slots {
    type Item = (&'a EntityId, &'a Slot);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (EntityId, Slot)>,
        fn(&'a (EntityId, Slot)) -> (&'a EntityId, &'a Slot),
    >;
    fn into_iter(self) -> Self::IntoIter {
        self.entries.iter().map(|(e, s)| (e, s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::view::observer::SlotState;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn slot(last: u64) -> Slot {
        Slot::new(Some(0), SlotState::Live, last)
    }

    proptest! {
        /// Against a `BTreeMap`: the same contents after any sequence of
        /// inserts and removes, and the index always agrees.
        #[test]
        fn behaves_as_a_map(ops in proptest::collection::vec((any::<bool>(), 0u64..24, any::<u64>()), 0..200)) {
            let mut slots = Slots::default();
            let mut model = BTreeMap::new();
            for (insert, e, v) in ops {
                let e = EntityId(e);
                if insert {
                    slots.insert(e, slot(v));
                    model.insert(e, v);
                } else {
                    prop_assert_eq!(slots.remove(&e).map(|s| s.last), model.remove(&e));
                }
                slots.verify();
                prop_assert_eq!(slots.len(), model.len());
                for (k, v) in &model {
                    prop_assert_eq!(slots.get(k).map(|s| s.last), Some(*v));
                }
                let mut seen: Vec<(EntityId, u64)> = slots.iter().map(|(e, s)| (*e, s.last)).collect();
                seen.sort_unstable();
                prop_assert_eq!(seen, model.iter().map(|(e, v)| (*e, *v)).collect::<Vec<_>>());
            }
        }
    }
}
