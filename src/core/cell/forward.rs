//! The forwarding table: where entities that left this cell went.
//!
//! When a ghost here is deleted the entity becomes `Gone`: its entry keeps
//! the last known cell of the real (`forward_to`), the epoch of the message
//! that removed it (a tombstone: older control messages are stale) and an
//! expiry time. Real-bound messages for a `Gone` entity are forwarded;
//! ghost-bound ones are dropped. Bounded by `forward_table_max`; the oldest
//! entry is evicted first. Owns only these entries.

use std::collections::{BTreeMap, VecDeque};

use crate::core::ids::{CellId, EntityId};
use crate::core::time::Time;

use super::residency::{transition, History, Residency};

/// One entity that left.
#[derive(Clone, Debug)]
pub struct ForwardEntry {
    /// Last known cell of the real.
    pub forward_to: CellId,
    /// Epoch of the message that removed the ghost (or of the newest news).
    pub epoch: u64,
    /// Expiry.
    pub until: Time,
    /// Transitions of this entity in this cell (debug and verify builds).
    pub history: History,
}

impl ForwardEntry {
    /// As a residency.
    pub fn residency(&self) -> Residency {
        Residency::Gone {
            forward_to: self.forward_to,
            epoch: self.epoch,
            until: self.until,
        }
    }
}

/// Entities that left, by id, with expiry order.
#[derive(Clone, Debug, Default)]
pub struct ForwardTable {
    map: BTreeMap<EntityId, ForwardEntry>,
    order: VecDeque<(Time, EntityId)>,
}

impl ForwardTable {
    /// The entry for `entity`.
    pub fn get(&self, entity: EntityId) -> Option<&ForwardEntry> {
        self.map.get(&entity)
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Adds (or replaces) `entity`'s entry; returns an evicted entity if the
    /// table was full.
    ///
    /// # Limits
    /// At most `max` entries; the one expiring first is evicted.
    pub fn insert(
        &mut self,
        entity: EntityId,
        entry: ForwardEntry,
        max: usize,
    ) -> Option<EntityId> {
        let until = entry.until;
        let replaced = self.map.insert(entity, entry).is_some();
        self.order.push_back((until, entity));
        let mut evicted = None;
        if !replaced && self.map.len() > max {
            evicted = self.pop_oldest();
        }
        debug_assert!(self.map.len() <= max);
        evicted
    }

    /// Removes `entity`'s entry (it came back as a ghost or real).
    pub fn remove(&mut self, entity: EntityId) -> Option<ForwardEntry> {
        self.map.remove(&entity)
    }

    /// Learns that the real moved on to `to` at `epoch` (newest wins).
    pub fn update(&mut self, entity: EntityId, to: CellId, epoch: u64) {
        if let Some(e) = self.map.get_mut(&entity) {
            if epoch > e.epoch {
                e.forward_to = to;
                e.epoch = epoch;
            }
        }
    }

    /// Drops entries that expired at or before `now`; returns how many.
    pub fn expire(&mut self, now: Time) -> usize {
        let mut n = 0;
        while let Some(&(until, entity)) = self.order.front() {
            if until > now {
                break;
            }
            self.order.pop_front();
            if self.map.get(&entity).is_some_and(|e| e.until == until) {
                let mut e = self.map.remove(&entity).expect("present");
                let from = e.residency();
                transition(&mut e.history, now, Some(from), None);
                n += 1;
            }
        }
        n
    }

    fn pop_oldest(&mut self) -> Option<EntityId> {
        while let Some((until, entity)) = self.order.pop_front() {
            if self.map.get(&entity).is_some_and(|e| e.until == until) {
                self.map.remove(&entity);
                return Some(entity);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(to: u32, epoch: u64, until_ms: u64) -> ForwardEntry {
        ForwardEntry {
            forward_to: CellId(to),
            epoch,
            until: Time::from_millis(until_ms),
            history: History::default(),
        }
    }

    #[test]
    fn expires_in_order_and_respects_replacement() {
        let mut t = ForwardTable::default();
        t.insert(EntityId(1), entry(5, 1, 10), 8);
        t.insert(EntityId(2), entry(5, 1, 20), 8);
        t.insert(EntityId(1), entry(6, 2, 30), 8);
        assert_eq!(t.expire(Time::from_millis(15)), 0);
        assert_eq!(t.expire(Time::from_millis(20)), 1);
        assert_eq!(t.get(EntityId(1)).map(|e| e.forward_to), Some(CellId(6)));
        assert_eq!(t.expire(Time::from_millis(30)), 1);
        assert_eq!(t.len(), 0);
    }

    #[test]
    fn evicts_oldest_beyond_bound() {
        let mut t = ForwardTable::default();
        for i in 0..3 {
            assert_eq!(t.insert(EntityId(i), entry(1, 0, 10 + i), 3), None);
        }
        assert_eq!(t.insert(EntityId(9), entry(1, 0, 50), 3), Some(EntityId(0)));
        assert_eq!(t.len(), 3);
    }

    #[test]
    fn update_only_moves_forward() {
        let mut t = ForwardTable::default();
        t.insert(EntityId(1), entry(5, 3, 10), 4);
        t.update(EntityId(1), CellId(7), 2);
        assert_eq!(t.get(EntityId(1)).map(|e| e.forward_to), Some(CellId(5)));
        t.update(EntityId(1), CellId(7), 4);
        assert_eq!(t.get(EntityId(1)).map(|e| e.forward_to), Some(CellId(7)));
    }
}
