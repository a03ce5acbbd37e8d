//! Per-observer delivery tracking: which version of each entity a client has.
//!
//! Owns [`ObserverTracker`]: for one observer (one client), the last version
//! delivered of every entity in its view. A version is delivered only if it
//! is the next one since the last snapshot (enter or resync); anything else
//! is reported as stale (drop) or as a gap, and a gap is healed only from a
//! [`SyncCache`] or by a full resync, never by skipping. It travels with the
//! observer when the observer's real migrates (rkyv), which is exactly when
//! gaps appear: the new cell's copy of an entity may be ahead of or behind
//! what the client saw.

use super::cache::{Fill, SyncCache};
use crate::core::ids::EntityId;
use std::collections::BTreeMap;

/// Bounds of an [`ObserverTracker`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct TrackerParams {
    /// Most entities tracked per observer (the AOI's interest limit). Default 1024.
    pub tracked_entities_max: usize,
}

impl Default for TrackerParams {
    fn default() -> Self {
        TrackerParams {
            tracked_entities_max: 1024,
        }
    }
}

/// The tracker is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("observer already tracks {max} entities")]
pub struct TrackerFull {
    /// The limit.
    pub max: usize,
}

/// What to do with an offered version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// Send it to the client (the tracker now records it as delivered).
    Deliver,
    /// Already delivered (or older than the last snapshot): drop it.
    Stale,
    /// Versions `last + 1 .. got` are missing: heal with
    /// [`ObserverTracker::catch_up`] before anything else is delivered.
    Gap {
        /// Last version delivered.
        last: u64,
        /// Version offered.
        got: u64,
    },
    /// The entity is not in this observer's view (no snapshot sent yet): drop.
    NotTracked,
}

/// How to heal an observer's view of one entity.
#[derive(Debug)]
pub enum CatchUp<'a> {
    /// Nothing missing.
    UpToDate,
    /// Offer each of these through [`ObserverTracker::offer`] and send them.
    Fill(std::collections::vec_deque::Iter<'a, SyncMsg>),
    /// Send a full snapshot, then call [`ObserverTracker::resync`].
    Resync,
}

use super::sync::SyncMsg;

/// Last delivered version per entity, for one observer.
#[derive(Clone, Debug, Default, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct ObserverTracker {
    params: TrackerParams,
    last: BTreeMap<EntityId, u64>,
}

impl ObserverTracker {
    /// An empty tracker.
    pub fn new(params: TrackerParams) -> Self {
        ObserverTracker {
            params,
            last: BTreeMap::new(),
        }
    }

    /// Records that a snapshot at `version` was sent (the entity entered the view).
    ///
    /// # Errors
    /// [`TrackerFull`] if `tracked_entities_max` entities are tracked already.
    pub fn enter(&mut self, entity: EntityId, version: u64) -> Result<(), TrackerFull> {
        let max = self.params.tracked_entities_max;
        if !self.last.contains_key(&entity) && self.last.len() >= max {
            return Err(TrackerFull { max });
        }
        self.last.insert(entity, version);
        Ok(())
    }

    /// Records that a resync snapshot at `version` was sent. Returns false
    /// (and records nothing) if the entity is not tracked.
    pub fn resync(&mut self, entity: EntityId, version: u64) -> bool {
        match self.last.get_mut(&entity) {
            Some(v) => {
                *v = version;
                true
            }
            None => false,
        }
    }

    /// The entity left the view. Returns false if it was not tracked.
    pub fn leave(&mut self, entity: EntityId) -> bool {
        self.last.remove(&entity).is_some()
    }

    /// The last version delivered for `entity`.
    pub fn last_delivered(&self, entity: EntityId) -> Option<u64> {
        self.last.get(&entity).copied()
    }

    /// Entities tracked.
    pub fn len(&self) -> usize {
        self.last.len()
    }

    /// True if nothing is tracked.
    pub fn is_empty(&self) -> bool {
        self.last.is_empty()
    }

    /// Decides whether `version` of `entity` may go to the client now.
    ///
    /// # Ordering
    /// Returns [`Delivery::Deliver`] only for `last + 1`, then advances.
    pub fn offer(&mut self, entity: EntityId, version: u64) -> Delivery {
        let Some(last) = self.last.get_mut(&entity) else {
            return Delivery::NotTracked;
        };
        if version <= *last {
            Delivery::Stale
        } else if version == *last + 1 {
            *last = version;
            Delivery::Deliver
        } else {
            Delivery::Gap {
                last: *last,
                got: version,
            }
        }
    }

    /// How to bring `entity` up to `cache`'s newest version (after a gap, or
    /// after this observer migrated next to a new copy of the entity).
    /// Untracked entities are up to date by definition (they get a snapshot
    /// on enter).
    pub fn catch_up<'a>(&self, entity: EntityId, cache: &'a SyncCache) -> CatchUp<'a> {
        let Some(&last) = self.last.get(&entity) else {
            return CatchUp::UpToDate;
        };
        match cache.fill(last) {
            Fill::UpToDate => CatchUp::UpToDate,
            Fill::Msgs(it) => CatchUp::Fill(it),
            Fill::ResyncNeeded => CatchUp::Resync,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::entity::cache::SyncCacheParams;
    use crate::core::entity::sync::SyncKind;
    use crate::core::time::Time;

    const E: EntityId = EntityId(9);

    #[test]
    fn only_consecutive_versions_are_delivered() {
        let mut t = ObserverTracker::new(TrackerParams::default());
        assert_eq!(t.offer(E, 1), Delivery::NotTracked);
        t.enter(E, 3).expect("room");
        assert_eq!(t.offer(E, 3), Delivery::Stale);
        assert_eq!(t.offer(E, 5), Delivery::Gap { last: 3, got: 5 });
        assert_eq!(t.offer(E, 4), Delivery::Deliver);
        assert_eq!(t.offer(E, 5), Delivery::Deliver);
        assert_eq!(t.last_delivered(E), Some(5));
        assert!(t.resync(E, 9));
        assert_eq!(t.offer(E, 10), Delivery::Deliver);
        assert!(t.leave(E));
        assert_eq!(t.offer(E, 11), Delivery::NotTracked);
    }

    #[test]
    fn catch_up_fills_from_cache_or_asks_for_resync() {
        let mut cache = SyncCache::new(
            SyncCacheParams {
                cache_msgs_max: 3,
                ..Default::default()
            },
            0,
        );
        for v in 1..=6 {
            cache.push(
                Time::ZERO,
                SyncMsg::new(E, v, SyncKind::Props, Time::ZERO, &[], &[]),
            );
        }
        let mut t = ObserverTracker::new(TrackerParams::default());
        t.enter(E, 3).expect("room");
        let CatchUp::Fill(it) = t.catch_up(E, &cache) else {
            panic!("fill expected")
        };
        let vs: Vec<u64> = it.map(|m| m.version).collect();
        assert_eq!(vs, vec![4, 5, 6]);
        t.resync(E, 2);
        assert!(matches!(t.catch_up(E, &cache), CatchUp::Resync));
        t.resync(E, 6);
        assert!(matches!(t.catch_up(E, &cache), CatchUp::UpToDate));
    }

    #[test]
    fn bound_is_enforced() {
        let mut t = ObserverTracker::new(TrackerParams {
            tracked_entities_max: 1,
        });
        t.enter(E, 0).expect("room");
        t.enter(E, 1).expect("re-enter is not growth");
        assert_eq!(t.enter(EntityId(2), 0), Err(TrackerFull { max: 1 }));
    }
}
