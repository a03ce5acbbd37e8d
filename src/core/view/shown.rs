//! [`ShownMap`]: the entities a [`super::ClientView`] shows, by handle.
//!
//! Every event of a checked client looks its handle up here, so the table
//! is dense: a vector indexed by handle for the handles below
//! [`DENSE_HANDLES`] (an observer numbers its handles from 0 and reuses
//! them after a leave, so they stay below the most entities it ever showed
//! at once), and an ordered map for any handle above (legal on the wire,
//! just not what tessera's observer sends). Iteration is in handle order,
//! as a `BTreeMap`'s, and has the same shape (`(&Handle, &Shown)`).

use super::client::Shown;
use super::event::Handle;
use std::collections::BTreeMap;

/// Handles below this live in the dense table; the table grows (on an
/// enter) to the largest handle shown so far, at most this many slots.
pub const DENSE_HANDLES: Handle = 1024;

/// The entities shown, by handle (see the module doc).
#[derive(Clone, Debug, Default)]
pub struct ShownMap {
    dense: Vec<Option<(Handle, Shown)>>,
    sparse: BTreeMap<Handle, Shown>,
    len: usize,
}

impl ShownMap {
    /// Entities shown.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if nothing is shown.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// True if `handle` is shown.
    pub fn contains_key(&self, handle: &Handle) -> bool {
        self.get(handle).is_some()
    }

    /// The entity shown under `handle`.
    pub fn get(&self, handle: &Handle) -> Option<&Shown> {
        if *handle < DENSE_HANDLES {
            let slot = self.dense.get(*handle as usize)?.as_ref();
            return slot.map(|(_, s)| s);
        }
        self.sparse.get(handle)
    }

    /// The entity shown under `handle`, to change.
    pub fn get_mut(&mut self, handle: &Handle) -> Option<&mut Shown> {
        if *handle < DENSE_HANDLES {
            let slot = self.dense.get_mut(*handle as usize)?.as_mut();
            return slot.map(|(_, s)| s);
        }
        self.sparse.get_mut(handle)
    }

    /// Shows `shown` under `handle`; returns what it replaced.
    pub fn insert(&mut self, handle: Handle, shown: Shown) -> Option<Shown> {
        let old = if handle < DENSE_HANDLES {
            let i = handle as usize;
            if i >= self.dense.len() {
                self.dense.resize_with(i + 1, || None);
            }
            self.dense[i].replace((handle, shown)).map(|(_, s)| s)
        } else {
            self.sparse.insert(handle, shown)
        };
        if old.is_none() {
            self.len += 1;
        }
        old
    }

    /// Stops showing `handle`; returns what it showed.
    pub fn remove(&mut self, handle: &Handle) -> Option<Shown> {
        let old = if *handle < DENSE_HANDLES {
            let slot = self.dense.get_mut(*handle as usize)?;
            slot.take().map(|(_, s)| s)
        } else {
            self.sparse.remove(handle)
        };
        if old.is_some() {
            self.len -= 1;
        }
        old
    }

    /// Every entity shown with its handle, in handle order.
    pub fn iter(&self) -> impl Iterator<Item = (&Handle, &Shown)> + '_ {
        let dense = self.dense.iter().flatten().map(|(h, s)| (h, s));
        dense.chain(self.sparse.iter())
    }

    /// Every entity shown, in handle order.
    pub fn values(&self) -> impl Iterator<Item = &Shown> + '_ {
        self.iter().map(|(_, s)| s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::entity::schema::AVATAR;
    use crate::core::entity::{Audience, Entity, TypeRegistry};
    use crate::core::ids::EntityId;

    fn shown(e: u64) -> Shown {
        let reg = TypeRegistry::with_builtins();
        let ty = reg.get(AVATAR).expect("a builtin type").clone();
        Shown {
            entity: EntityId(e),
            version: 1,
            replica: Entity::new_replica(EntityId(e), ty, Audience::OtherClients),
            q: [0; 3],
        }
    }

    #[test]
    fn dense_and_sparse_handles_behave_as_one_ordered_map() {
        let mut m = ShownMap::default();
        let handles = [5, 0, DENSE_HANDLES + 7, 3, DENSE_HANDLES, u32::MAX];
        for (k, h) in handles.into_iter().enumerate() {
            assert!(m.insert(h, shown(k as u64)).is_none());
        }
        assert_eq!(m.len(), handles.len());
        let order: Vec<Handle> = m.iter().map(|(&h, _)| h).collect();
        let mut sorted = handles.to_vec();
        sorted.sort_unstable();
        assert_eq!(order, sorted);
        assert_eq!(
            m.get(&(DENSE_HANDLES + 7)).map(|s| s.entity),
            Some(EntityId(2))
        );
        assert!(m.insert(3, shown(9)).is_some(), "a replace keeps the count");
        assert_eq!(m.len(), handles.len());
        assert!(m.get_mut(&u32::MAX).is_some());
        assert_eq!(m.remove(&5).map(|s| s.entity), Some(EntityId(0)));
        assert!(m.remove(&5).is_none() && m.remove(&999).is_none());
        assert!(!m.contains_key(&5) && m.contains_key(&0));
        assert_eq!(m.remove(&u32::MAX).map(|s| s.entity), Some(EntityId(5)));
        assert_eq!(m.len(), handles.len() - 2);
        assert_eq!(m.values().count(), m.len());
    }
}
