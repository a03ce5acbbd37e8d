//! The observer's slot table: one [`Slot`] per entity in a client's view,
//! kept dense for the two hot paths.
//!
//! Every released sync message of an entity is fed to each observer that
//! sees it (one lookup per observer per message), and every flush walks all
//! of an observer's slots (budget priorities, pending movements). With a
//! `BTreeMap` both chase pointers through scattered nodes: the clients
//! benchmark's profile put a third of the server's CPU in those two walks,
//! almost all of it cache misses. Here the slots live in one `Vec` (a flush
//! is a linear scan) and an [`IdMap`] maps an entity to its index (one
//! cache line per lookup: the index is cold whenever it is read). Removal
//! swaps the last slot into the hole, so the table stays dense; its order
//! is the order of arrival, deterministic for the same inputs (the
//! migration blob sorts what it writes).
//!
//! Each slot is kept in two parts at the same position of two arrays: the
//! hot part ([`Slot`]: what every pull and budget walk reads, 48 bytes
//! with the entity id) and the cold part ([`SlotCold`]: what a send,
//! snapshot or catch-up reads). A flush streams only the hot parts of its
//! whole view and the cold records of the slots that send: at 5,000
//! clients the pull waited on its look-ahead loads with the slots' second
//! lines queued before them, and half of the 38 MB of slot tables it
//! streamed was bytes only the few sends read.
//!
//! Both parts are packed: positions are kept in 32 bits an axis (all the
//! wire's quantised positions fit), so a hot part with its id is 48 bytes
//! and a cold part 32, 80 bytes a shown entity where they were 112 (at
//! 5,000 clients and about 60 in view, 24 MB of slot tables instead of
//! 34: below this machine's 32 MB last-level cache, shared with the
//! kernel's socket buffers).
//!
//! Owns only the table; knows nothing of versions, budgets or the wire.

use super::observer::{Slot, SlotCold};
use crate::core::aoi::IdMap;
use crate::core::ids::EntityId;

/// One slot's hot part with its entity: 48 bytes, four to three cache
/// lines (a walk streams the table; a line holds the entry or a part).
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub(super) struct Entry {
    id: EntityId,
    slot: Slot,
}

const _: () = assert!(
    std::mem::size_of::<Entry>() == 48,
    "a slot's hot part and its id are 48 bytes"
);
const _: () = assert!(
    std::mem::size_of::<SlotCold>() == 32,
    "a slot's cold part is half a line"
);

/// Both parts of one slot, mutable (see the module doc).
#[derive(Debug)]
pub(super) struct SlotMut<'a> {
    /// What every flush reads.
    pub(super) hot: &'a mut Slot,
    /// What a send, snapshot or catch-up reads.
    pub(super) cold: &'a mut SlotCold,
}

/// Dense slots with an index by entity (see the module doc).
#[derive(Clone, Debug, Default)]
pub(super) struct Slots {
    entries: Vec<Entry>,
    /// The cold parts, at the positions of their hot parts.
    cold: Vec<SlotCold>,
    index: IdMap,
}

impl Slots {
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(super) fn contains_key(&self, entity: &EntityId) -> bool {
        self.index.contains(*entity)
    }

    pub(super) fn get(&self, entity: &EntityId) -> Option<&Slot> {
        let i = self.index.get(*entity)?;
        Some(&self.entries[i as usize].slot)
    }

    pub(super) fn get_mut(&mut self, entity: &EntityId) -> Option<&mut Slot> {
        let i = self.index.get(*entity)?;
        Some(&mut self.entries[i as usize].slot)
    }

    /// The cold part of `entity`'s slot.
    pub(super) fn cold(&self, entity: &EntityId) -> Option<&SlotCold> {
        let i = self.index.get(*entity)?;
        Some(&self.cold[i as usize])
    }

    /// The cold part of the slot at table position `i` (`i < len()`).
    #[inline]
    pub(super) fn cold_at(&self, i: usize) -> &SlotCold {
        &self.cold[i]
    }

    /// Both parts of `entity`'s slot, mutable.
    pub(super) fn both_mut(&mut self, entity: &EntityId) -> Option<SlotMut<'_>> {
        let i = self.index.get(*entity)?;
        Some(self.both_at(i as usize))
    }

    /// Both parts of the slot at table position `i` (`i < len()`), mutable.
    #[inline]
    pub(super) fn both_at(&mut self, i: usize) -> SlotMut<'_> {
        SlotMut {
            hot: &mut self.entries[i].slot,
            cold: &mut self.cold[i],
        }
    }

    /// The table position of `entity`'s slot.
    pub(super) fn position(&self, entity: &EntityId) -> Option<usize> {
        self.index.get(*entity).map(|i| i as usize)
    }

    /// The table position of `entity`'s slot, tried at `i` first (where a
    /// walk over the table found it; a removal since may have moved it).
    #[inline]
    pub(super) fn find_at(&self, entity: EntityId, i: usize) -> Option<usize> {
        match self.entries.get(i) {
            Some(en) if en.id == entity => Some(i),
            _ => self.position(&entity),
        }
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

    /// Starts fetching the hot part of the slot at table position `i` (the
    /// id and what every flush reads) into the cache (a no-op off x86-64,
    /// or out of range): both lines an entry may straddle.
    #[inline]
    pub(super) fn prefetch(&self, i: usize) {
        crate::core::prefetch::line(nth_addr(&self.entries, i));
        self.prefetch_tail(i);
    }

    /// Starts fetching the line that holds the end of the hot part at `i`:
    /// all a walk in table order needs (an entry starts in the line its
    /// predecessor ends in, or in its own last line). The walk asks for a
    /// slot some way ahead, as the slots are larger than the hardware's
    /// stride prefetcher follows well.
    #[inline]
    fn prefetch_tail(&self, i: usize) {
        let end = nth_addr(&self.entries, i).wrapping_add(std::mem::size_of::<Entry>() - 1);
        crate::core::prefetch::line(end);
    }

    /// Starts fetching the cold part of the slot at `i` (what a send
    /// reads): the budget loop asks for those it will send before it sends
    /// them, so their misses overlap.
    #[inline]
    pub(super) fn prefetch_cold(&self, i: usize) {
        self.cold_prefetcher().line(i);
    }

    /// What prefetches the cold parts while the hot ones are borrowed (a
    /// walk over [`Slots::entry_mut`]); aimed at the cold parts as they lie
    /// now (after the table grows it fetches stale lines, harmlessly).
    #[inline]
    pub(super) fn cold_prefetcher(&self) -> ColdPrefetch {
        ColdPrefetch {
            base: self.cold.as_ptr().cast(),
        }
    }

    /// Starts fetching both parts of the slot at `i`: the pull's look-ahead.
    /// Nearly half the slots a flush pulls also send (their cold part), and
    /// the budget loop's own request for it comes too late to hide the
    /// miss; asked for with the hot part, a pull ahead, it is there when the
    /// send reads it (the cost probe at 5,000 clients: a median of -4.5 %
    /// over 19 alternated pairs, a noisy figure; `bench/README.md`). The
    /// cold parts are dense: one request brings a line of them. For a
    /// walk in table order (the hot part's tail line only: the lines before
    /// it were asked for with the slots before).
    #[inline]
    pub(super) fn prefetch_whole(&self, i: usize) {
        self.prefetch_tail(i);
        self.prefetch_cold(i);
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
    pub(super) fn insert(&mut self, entity: EntityId, slot: Slot, cold: SlotCold) {
        if let Some(s) = self.both_mut(&entity) {
            *s.hot = slot;
            *s.cold = cold;
            return;
        }
        let i = u32::try_from(self.entries.len()).expect("views hold far fewer than 2^32 entities");
        self.entries.push(Entry { id: entity, slot });
        self.cold.push(cold);
        self.index.insert(entity, i);
    }

    /// Removes the slot of `entity`; the last slot takes its place.
    pub(super) fn remove(&mut self, entity: &EntityId) -> Option<(Slot, SlotCold)> {
        let i = self.index.remove(*entity)? as usize;
        let Entry { id, slot } = self.entries.swap_remove(i);
        let cold = self.cold.swap_remove(i);
        debug_assert_eq!(id, *entity);
        if let Some(moved) = self.entries.get(i) {
            let was = self.index.insert(moved.id, i as u32);
            debug_assert!(was.is_some(), "every entry is indexed");
        }
        Some((slot, cold))
    }

    /// The slots in table order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&EntityId, &Slot)> + Clone + '_ {
        self.entries.iter().map(|en| (&en.id, &en.slot))
    }

    /// Both parts of every slot, in table order.
    pub(super) fn iter_both(&self) -> impl Iterator<Item = (&EntityId, &Slot, &SlotCold)> + '_ {
        self.entries
            .iter()
            .zip(&self.cold)
            .map(|(en, c)| (&en.id, &en.slot, c))
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
        assert_eq!(self.cold.len(), self.entries.len(), "a cold part per slot");
        for (i, en) in self.entries.iter().enumerate() {
            let e = en.id;
            assert_eq!(self.index.get(e), Some(i as u32), "{e} indexed");
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

/// Prefetches cold parts by position ([`Slots::cold_prefetcher`]): holds
/// only an address, never read through.
#[derive(Clone, Copy, Debug)]
pub(super) struct ColdPrefetch {
    base: *const u8,
}

impl ColdPrefetch {
    /// Starts fetching the cold part at table position `i`.
    #[inline]
    pub(super) fn line(self, i: usize) {
        crate::core::prefetch::line(offset_addr::<SlotCold>(self.base, i));
    }
}

/// The address of `v[i]`, in range or not: only ever handed to a
/// prefetch. No bounds check: a walk asks for slots past the table's end
/// near its end, and a prefetch of any address is harmless; the address is
/// worked out with wrapping arithmetic (never an out-of-bounds `add`).
#[inline]
fn nth_addr<T>(v: &[T], i: usize) -> *const u8 {
    offset_addr::<T>(v.as_ptr().cast(), i)
}

/// The address of the `i`-th `T` from `base` (see [`nth_addr`]).
#[inline]
fn offset_addr<T>(base: *const u8, i: usize) -> *const u8 {
    base.wrapping_add(i.wrapping_mul(std::mem::size_of::<T>()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::view::observer::SlotState;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn slot(last: u64) -> Slot {
        Slot::new(SlotState::Live, last)
    }

    fn cold() -> SlotCold {
        SlotCold::new(Some(0))
    }

    /// The entries (id and hot part) are packed at 48 bytes, the cold
    /// parts at 32; prefetching any slot, either part (in range or not),
    /// changes nothing.
    #[test]
    fn entries_are_packed_and_prefetch_is_harmless() {
        assert_eq!(std::mem::offset_of!(Entry, slot), 8);
        let mut slots = Slots::default();
        for e in 0..20 {
            slots.insert(EntityId(e), slot(e), cold());
        }
        for i in 1..slots.len() {
            let gap = std::ptr::from_ref(&slots.entries[i]) as usize
                - std::ptr::from_ref(&slots.entries[i - 1]) as usize;
            assert_eq!(gap, 48, "entry {i} follows the last one");
            let gap = std::ptr::from_ref(&slots.cold[i]) as usize
                - std::ptr::from_ref(&slots.cold[i - 1]) as usize;
            assert_eq!(gap, 32, "cold part {i} follows the last one");
        }
        for i in (0..40).chain([usize::MAX / 2, usize::MAX]) {
            slots.prefetch(i);
            slots.prefetch_cold(i);
            slots.prefetch_whole(i);
        }
        let prefetch = slots.cold_prefetcher();
        for i in [0, 7, 19, 20, 1000, usize::MAX] {
            prefetch.line(i);
        }
        let empty = Slots::default();
        empty.prefetch(0);
        empty.prefetch_cold(3);
        empty.prefetch_whole(5);
        empty.cold_prefetcher().line(2);
        slots.verify();
        assert_eq!(slots.get(&EntityId(7)).map(|s| s.last), Some(7));
    }

    /// The setters keep the hot copies true: the newest position is the
    /// client's once nothing is pending, and new stale bits forget the reach
    /// worked out for the old ones.
    #[test]
    fn slot_setters_keep_the_hot_fields_true() {
        use crate::core::view::observer::Pending;
        let (mut hot, mut c) = (slot(1), cold());
        let mut s = SlotMut {
            hot: &mut hot,
            cold: &mut c,
        };
        s.set_q([1, 2, 3]);
        assert_eq!(s.hot.pending(), None);
        let p = Pending {
            q: [4, 5, 6],
            yaw: 7,
        };
        assert!(s.hot.replace_pending(p).is_none());
        s.set_q([8, 9, 10]);
        assert_eq!(s.hot.pending(), Some(p), "set_q keeps the pending");
        assert_eq!(s.take_pending(), Some(p));
        assert!(!s.hot.has_pending());
        assert_eq!(s.cold.q(), [8, 9, 10]);
        s.set_stale(0b101);
        assert_eq!(s.cold.stale(), 0b101);
        s.set_stale(0);
        assert_eq!(s.cold.stale(), 0);
    }

    /// Both parts move together: after removals (the last slot swapped into
    /// the hole) each entity still finds its own cold part.
    #[test]
    fn the_cold_parts_follow_their_slots_through_removals() {
        let mut slots = Slots::default();
        for e in 0..10u32 {
            slots.insert(
                EntityId(u64::from(e)),
                slot(u64::from(e)),
                SlotCold::new(Some(e)),
            );
        }
        for e in [0u64, 4, 9, 5] {
            let (hot, c) = slots.remove(&EntityId(e)).expect("present");
            assert_eq!((hot.last, c.handle), (e, Some(e as u32)));
        }
        for (e, hot, c) in slots.iter_both() {
            assert_eq!(hot.last, e.0);
            assert_eq!(c.handle, Some(e.0 as u32), "{e}'s cold part");
        }
        slots.verify();
    }

    /// A position found by a walk is used while it still holds the entity;
    /// once a removal moved the slot, the index finds it (fails if
    /// `find_at` trusts a stale position).
    #[test]
    fn find_at_checks_the_position_and_falls_back_to_the_index() {
        let mut slots = Slots::default();
        for e in 0..4u64 {
            slots.insert(EntityId(e), slot(e), cold());
        }
        assert_eq!(slots.find_at(EntityId(3), 3), Some(3));
        // Removing 1 moves 3 (the last) into position 1.
        slots.remove(&EntityId(1));
        assert_eq!(slots.find_at(EntityId(3), 3), Some(1));
        assert_eq!(slots.find_at(EntityId(3), 0), Some(1));
        assert_eq!(slots.find_at(EntityId(1), 1), None, "gone");
        assert_eq!(slots.find_at(EntityId(2), 99), Some(2), "out of range");
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
                    slots.insert(e, slot(v), cold());
                    model.insert(e, v);
                } else {
                    prop_assert_eq!(slots.remove(&e).map(|(s, _)| s.last), model.remove(&e));
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
