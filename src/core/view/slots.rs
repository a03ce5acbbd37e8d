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

/// One slot with its entity, aligned to a cache line: the id and the slot's
/// hot fields share the first line (see [`Slot`]'s layout).
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
pub(super) struct Entry {
    id: EntityId,
    slot: Slot,
}

const _: () = assert!(
    std::mem::size_of::<Entry>() == 128,
    "a slot entry is two lines"
);

/// Dense slots with an index by entity (see the module doc).
#[derive(Clone, Debug, Default)]
pub(super) struct Slots {
    entries: Vec<Entry>,
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
        Some(&self.entries[i as usize].slot)
    }

    pub(super) fn get_mut(&mut self, entity: &EntityId) -> Option<&mut Slot> {
        let &i = self.index.get(entity)?;
        Some(&mut self.entries[i as usize].slot)
    }

    /// The table position of `entity`'s slot.
    pub(super) fn position(&self, entity: &EntityId) -> Option<usize> {
        self.index.get(entity).map(|&i| i as usize)
    }

    /// The slot at table position `i` (`i < len()`).
    pub(super) fn at(&self, i: usize) -> (EntityId, &Slot) {
        let en = &self.entries[i];
        (en.id, &en.slot)
    }

    /// The host hint of the slot at table position `i`, if there is one.
    #[inline]
    pub(super) fn hint_at(&self, i: usize) -> Option<u32> {
        self.entries.get(i).map(|en| en.slot.hint)
    }

    /// Starts fetching the hot line of the slot at table position `i` (the
    /// id and what every flush reads) into the cache (a no-op off x86-64,
    /// or out of range): a walk over the table asks for a slot some way
    /// ahead, as the slots are larger than the hardware's stride prefetcher
    /// follows well.
    #[inline]
    pub(super) fn prefetch(&self, i: usize) {
        self.prefetch_at(i, 0);
    }

    /// Starts fetching the cold line of the slot at `i` (what a send
    /// reads): the budget loop asks for those it will send before it sends
    /// them, so their misses overlap.
    #[inline]
    pub(super) fn prefetch_cold(&self, i: usize) {
        self.prefetch_at(i, 64);
    }

    /// Starts fetching both lines of the slot at `i`: the pull's look-ahead.
    /// Nearly half the slots a flush pulls also send (their cold line), and
    /// the budget loop's own request for it comes too late to hide the
    /// miss; asked for with the hot line, a pull ahead, it is there when the
    /// send reads it (the cost probe at 5,000 clients: a median of -4.5 %
    /// over 19 alternated pairs, a noisy figure; `bench/README.md`).
    #[inline]
    pub(super) fn prefetch_whole(&self, i: usize) {
        self.prefetch_at(i, 0);
        self.prefetch_at(i, 64);
    }

    #[inline]
    fn prefetch_at(&self, i: usize, offset: usize) {
        debug_assert!(offset < std::mem::size_of::<Entry>());
        // No bounds check: a walk asks for slots past the table's end near
        // its end, and a prefetch of any address is harmless. The address is
        // worked out with wrapping arithmetic (never an out-of-bounds `add`),
        // and only handed to the prefetch.
        let p = self
            .entries
            .as_ptr()
            .cast::<u8>()
            .wrapping_add(i.wrapping_mul(std::mem::size_of::<Entry>()))
            .wrapping_add(offset);
        crate::core::prefetch::line(p);
    }

    /// The entity and slot at table position `i` (`i < len()`), the slot
    /// mutable: one bounds check for a walk that reads and writes it.
    #[inline]
    pub(super) fn entry_mut(&mut self, i: usize) -> (EntityId, &mut Slot) {
        let en = &mut self.entries[i];
        (en.id, &mut en.slot)
    }

    /// The slot at table position `i` (`i < len()`), mutable. Positions
    /// stay put until a slot is removed.
    pub(super) fn at_mut(&mut self, i: usize) -> &mut Slot {
        &mut self.entries[i].slot
    }

    /// The entity of the slot last in the table (the one last inserted if
    /// nothing was removed since: how the blob decoder checks its order).
    pub(super) fn last_key(&self) -> Option<EntityId> {
        self.entries.last().map(|en| en.id)
    }

    /// Adds or replaces the slot of `entity`.
    pub(super) fn insert(&mut self, entity: EntityId, slot: Slot) {
        if let Some(s) = self.get_mut(&entity) {
            *s = slot;
            return;
        }
        let i = u32::try_from(self.entries.len()).expect("views hold far fewer than 2^32 entities");
        self.entries.push(Entry { id: entity, slot });
        self.index.insert(entity, i);
    }

    /// Removes the slot of `entity`; the last slot takes its place.
    pub(super) fn remove(&mut self, entity: &EntityId) -> Option<Slot> {
        let i = self.index.remove(entity)? as usize;
        let Entry { id, slot } = self.entries.swap_remove(i);
        debug_assert_eq!(id, *entity);
        if let Some(moved) = self.entries.get(i) {
            *self
                .index
                .get_mut(&moved.id)
                .expect("every entry is indexed") = i as u32;
        }
        Some(slot)
    }

    /// The slots in table order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&EntityId, &Slot)> + Clone + '_ {
        self.entries.iter().map(|en| (&en.id, &en.slot))
    }

    /// The slots in table order, mutable.
    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = (&EntityId, &mut Slot)> + '_ {
        self.entries.iter_mut().map(|en| (&en.id, &mut en.slot))
    }

    /// The entities in table order.
    pub(super) fn keys(&self) -> impl Iterator<Item = &EntityId> + Clone + '_ {
        self.entries.iter().map(|en| &en.id)
    }

    /// The slots in table order.
    pub(super) fn values(&self) -> impl Iterator<Item = &Slot> + '_ {
        self.entries.iter().map(|en| &en.slot)
    }

    /// Checks that the index and the entries agree.
    ///
    /// # Panics
    /// If an entry is not indexed at its position, or the index has extra
    /// keys.
    pub(super) fn verify(&self) {
        assert_eq!(self.index.len(), self.entries.len(), "slot index size");
        for (i, en) in self.entries.iter().enumerate() {
            let e = en.id;
            assert_eq!(self.index.get(&e), Some(&(i as u32)), "{e} indexed");
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
    type IntoIter =
        std::iter::Map<std::slice::Iter<'a, Entry>, fn(&'a Entry) -> (&'a EntityId, &'a Slot)>;
    fn into_iter(self) -> Self::IntoIter {
        self.entries.iter().map(|en| (&en.id, &en.slot))
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

    /// The entry is two lines, 64-byte aligned, and the slot's hot part
    /// shares the first line with the id; prefetching any slot (in range or
    /// not) changes nothing.
    #[test]
    fn entries_are_line_aligned_and_prefetch_is_harmless() {
        assert_eq!(std::mem::align_of::<Entry>(), 64);
        assert_eq!(std::mem::offset_of!(Entry, slot), 8);
        let mut slots = Slots::default();
        for e in 0..20 {
            slots.insert(EntityId(e), slot(e));
        }
        for (i, _) in slots.iter().enumerate() {
            let p = std::ptr::from_ref(&slots.entries[i]) as usize;
            assert_eq!(p % 64, 0, "entry {i} aligned");
        }
        for i in (0..40).chain([usize::MAX / 2, usize::MAX]) {
            slots.prefetch(i);
            slots.prefetch_cold(i);
            slots.prefetch_whole(i);
        }
        let empty = Slots::default();
        empty.prefetch(0);
        empty.prefetch_cold(3);
        empty.prefetch_whole(5);
        slots.verify();
        assert_eq!(slots.get(&EntityId(7)).map(|s| s.last), Some(7));
    }

    /// The setters keep the hot copies true: the newest position is the
    /// client's once nothing is pending, and new stale bits forget the reach
    /// worked out for the old ones.
    #[test]
    fn slot_setters_keep_the_hot_fields_true() {
        use crate::core::view::observer::Pending;
        let mut s = slot(1);
        s.set_q([1, 2, 3]);
        assert_eq!(s.pending(), None);
        assert!(s
            .replace_pending(Pending {
                q: [4, 5, 6],
                yaw: 7
            })
            .is_none());
        s.set_q([8, 9, 10]);
        assert_eq!(
            s.pending(),
            Some(Pending {
                q: [4, 5, 6],
                yaw: 7
            }),
            "set_q keeps the pending"
        );
        assert_eq!(
            s.take_pending(),
            Some(Pending {
                q: [4, 5, 6],
                yaw: 7
            })
        );
        assert!(!s.has_pending());
        assert_eq!(s.q(), [8, 9, 10]);
        s.set_stale(0b101);
        assert_eq!(s.stale(), 0b101);
        s.set_stale(0);
        assert_eq!(s.stale(), 0);
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
