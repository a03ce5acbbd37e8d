//! [`ConnTable`]: a shard's connections, indexed by their port slot.
//!
//! A [`ConnId`] is a port slot (high half) and that slot's generation (low
//! half), and the port frees a slot only after the application saw its
//! `Closed` event (or handed it off, or closed it itself, forgetting it
//! first): so at most one connection the application knows lives in each
//! slot, and a dense vector indexed by slot finds it without a search (a
//! lookup per message on the input and output paths). Each entry keeps its
//! full id, so a stale id (an older generation) finds nothing.
//!
//! Iterates in slot order, which is [`ConnId`] order (one id per slot), as
//! the ordered map it replaces did. Bounded by the port's slots
//! (`gateway.connections_max` and the ones being handed over).
//!
//! Owns only the index; knows nothing of sessions.

use crate::shard::ConnId;

/// Connections by port slot (see the module doc).
#[derive(Debug)]
pub(super) struct ConnTable<T> {
    slots: Vec<Option<(ConnId, T)>>,
    len: usize,
}

impl<T> Default for ConnTable<T> {
    fn default() -> Self {
        ConnTable {
            slots: Vec::new(),
            len: 0,
        }
    }
}

impl<T> ConnTable<T> {
    /// Connections held.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// True with none.
    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Connection `id`, if held (not an older or newer one in its slot).
    pub(super) fn get(&self, id: &ConnId) -> Option<&T> {
        match self.slots.get(id.slot() as usize) {
            Some(Some((held, c))) if held == id => Some(c),
            _ => None,
        }
    }

    /// Connection `id`, mutable.
    pub(super) fn get_mut(&mut self, id: &ConnId) -> Option<&mut T> {
        match self.slots.get_mut(id.slot() as usize) {
            Some(Some((held, c))) if held == id => Some(c),
            _ => None,
        }
    }

    /// Holds `c` as connection `id`; returns what its slot held (none: the
    /// port gives a slot to one connection at a time).
    pub(super) fn insert(&mut self, id: ConnId, c: T) -> Option<T> {
        let i = id.slot() as usize;
        if self.slots.len() <= i {
            self.slots.resize_with(i + 1, || None);
        }
        let old = self.slots[i].replace((id, c));
        debug_assert!(
            old.as_ref().is_none_or(|(held, _)| *held == id),
            "slot {i} reused while the application still held {old_id:?}",
            old_id = old.as_ref().map(|(h, _)| *h)
        );
        if old.is_none() {
            self.len += 1;
        }
        old.map(|(_, c)| c)
    }

    /// Forgets connection `id`; returns it if it was held.
    pub(super) fn remove(&mut self, id: &ConnId) -> Option<T> {
        let slot = self.slots.get_mut(id.slot() as usize)?;
        if slot.as_ref().is_none_or(|(held, _)| held != id) {
            return None;
        }
        self.len -= 1;
        slot.take().map(|(_, c)| c)
    }

    /// The connections, in id order.
    pub(super) fn values(&self) -> impl Iterator<Item = &T> {
        self.slots.iter().flatten().map(|(_, c)| c)
    }

    /// The connections with their ids, in id order.
    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = (ConnId, &mut T)> {
        self.slots.iter_mut().flatten().map(|(id, c)| (*id, c))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(slot: u32, generation: u32) -> ConnId {
        ConnId((u64::from(slot) << 32) | u64::from(generation))
    }

    #[test]
    fn finds_only_the_held_generation_and_iterates_in_id_order() {
        let mut t = ConnTable::default();
        assert!(t.insert(id(3, 1), "c").is_none());
        assert!(t.insert(id(0, 7), "a").is_none());
        assert!(t.insert(id(1, 0), "b").is_none());
        assert_eq!(t.len(), 3);
        assert_eq!(t.get(&id(3, 1)), Some(&"c"));
        assert_eq!(t.get(&id(3, 2)), None, "a newer generation");
        assert_eq!(t.get(&id(9, 0)), None, "past the end");
        assert_eq!(t.remove(&id(0, 6)), None, "an older generation");
        assert_eq!(t.values().copied().collect::<Vec<_>>(), ["a", "b", "c"]);
        let ids: Vec<ConnId> = t.iter_mut().map(|(i, _)| i).collect();
        assert_eq!(ids, [id(0, 7), id(1, 0), id(3, 1)]);
        assert_eq!(t.remove(&id(1, 0)), Some("b"));
        assert_eq!(t.remove(&id(1, 0)), None);
        *t.get_mut(&id(3, 1)).expect("held") = "d";
        assert_eq!(t.insert(id(3, 1), "e"), Some("d"), "same id replaces");
        assert_eq!(t.len(), 2);
        assert!(t.insert(id(1, 1), "f").is_none(), "a freed slot is reused");
        assert_eq!(t.len(), 3);
        assert!(!t.is_empty());
    }
}
