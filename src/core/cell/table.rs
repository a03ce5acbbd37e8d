//! The entities a cell holds (reals and ghosts), stored contiguously.
//!
//! [`EntityTable`] is a slab (`Vec<Entry>`, swap-remove) with an id index, so
//! the per-check walks over reals touch one contiguous array. An [`Entry`]
//! has the [`Entity`] (every property on a real, the ghost-visible ones on a
//! ghost), its sync version, and either a boxed [`RealPart`] or a small
//! [`GhostPart`].
//! Entities that left are not here but in the forwarding table. Owns only
//! storage; the protocol lives in the `impl Cell` blocks of its siblings.

use rustc_hash::FxHashMap; // tidy: allow(HashMap): no random seed; lookups only, never iterated
use std::collections::VecDeque;

use crate::core::combat::Combat;
use crate::core::entity::{Entity, ReorderBuffer, SyncCache, SyncEmitter};
use crate::core::geom::Vec3;
use crate::core::ids::{CellId, EntityId};
use crate::core::time::Time;
use crate::core::view::RunHead;

use super::msg::{Call, Haunt, Input};
use super::residency::{History, Residency};
use super::seq_buffer::SeqBuffer;
use crate::core::payload::Payload;

/// The authoritative part of an entity, present only where it is real.
#[derive(Clone, Debug)]
pub struct RealPart {
    /// Migrations so far (the proxy's channel version).
    pub epoch: u64,
    /// Version counter and encoding buffers of the real's change sets.
    pub emitter: SyncEmitter,
    /// Recent sync messages (travels on migration).
    pub cache: SyncCache,
    /// Cells holding (or being sent) a ghost.
    pub haunts: Vec<Haunt>,
    /// Client inputs: next expected sequence and the early ones.
    pub inputs: SeqBuffer<Payload>,
    /// Calls waiting for the next tick.
    pub calls: VecDeque<Call>,
    /// Next downstream sequence number.
    pub next_downstream: u64,
    /// Whether a client proxy follows this entity.
    pub has_proxy: bool,
    /// Combat state (travels on migration).
    pub combat: Combat,
    /// When the real arrived in this cell.
    pub since: Time,
    /// The layout version its last migration was decided under: it
    /// migrates on only under a layout at least as new.
    pub layout_version_min: u64,
    /// Where its observer was last found (`Views::watch_mut_hinted`;
    /// `u32::MAX`: not looked up yet): the change sets of every tick reach
    /// the observer without a probe of the cell's index of observers.
    pub watch_hint: u32,
    /// Listed in the cell's `combat_reals` (so listed once).
    pub combat_listed: bool,
    /// The highest client input seq processed here whose acknowledgement
    /// has not left yet (0: none): it rides the client's next view batch
    /// (`Cell::owe_ack`; `acks.rs`).
    pub ack_due: u64,
}

impl RealPart {
    /// The haunt in `cell`, if any.
    pub fn haunt(&self, cell: CellId) -> Option<&Haunt> {
        self.haunts.iter().find(|h| h.cell == cell)
    }

    /// Mutable haunt in `cell`, if any.
    pub fn haunt_mut(&mut self, cell: CellId) -> Option<&mut Haunt> {
        self.haunts.iter_mut().find(|h| h.cell == cell)
    }
}

/// The read-only part of a ghost.
#[derive(Clone, Debug)]
pub struct GhostPart {
    /// Where the real is, as far as known.
    pub real_at: CellId,
    /// The real's epoch there.
    pub epoch: u64,
    /// In-order sync applier.
    pub reorder: ReorderBuffer,
    /// What the reorder buffer released recently (for observers' gaps);
    /// boxed to keep entries compact.
    pub cache: Box<SyncCache>,
    /// When this ghost was created here.
    pub since: Time,
}

/// Real or ghost.
#[derive(Clone, Debug)]
pub enum Part {
    /// Authoritative.
    Real(Box<RealPart>),
    /// Copy.
    Ghost(GhostPart),
}

/// One entity held by the cell.
#[derive(Clone, Debug)]
pub struct Entry {
    /// The entity's id (same as `entity.core().id`).
    pub id: EntityId,
    /// The state: all properties on a real, a ghost replica on a ghost.
    pub entity: Entity,
    /// Sync version of `entity` (the last change set applied or emitted).
    pub version: u64,
    /// Real or ghost.
    pub part: Part,
    /// Transitions (debug and verify builds).
    pub history: History,
    /// Listed in the cell's `changed_reals` since its last `emit_syncs`
    /// (so listed once; false on a ghost).
    pub listed_changed: bool,
}

impl Entry {
    /// The entry's residency.
    pub fn residency(&self) -> Residency {
        match &self.part {
            Part::Real(r) => Residency::Real { epoch: r.epoch },
            Part::Ghost(g) => Residency::Ghost {
                real_at: g.real_at,
                epoch: g.epoch,
            },
        }
    }

    /// The real part, if real.
    pub fn real(&self) -> Option<&RealPart> {
        match &self.part {
            Part::Real(r) => Some(r),
            Part::Ghost(_) => None,
        }
    }

    /// The mutable real part, if real.
    pub fn real_mut(&mut self) -> Option<&mut RealPart> {
        match &mut self.part {
            Part::Real(r) => Some(r),
            Part::Ghost(_) => None,
        }
    }

    /// The mutable ghost part, if a ghost.
    pub fn ghost_mut(&mut self) -> Option<&mut GhostPart> {
        match &mut self.part {
            Part::Ghost(g) => Some(g),
            Part::Real(_) => None,
        }
    }
}

/// How many entries ahead [`EntityTable::refresh_heads`] asks for a cache.
const HEADS_PREFETCH_AHEAD: usize = 8;

/// Entries by id, contiguous.
#[derive(Clone, Debug, Default)]
pub struct EntityTable {
    entries: Vec<Entry>,
    /// Id -> slab index (hashed: looked up for every shown entity at every
    /// observer's flush, so it must cost one probe, not a tree walk).
    index: FxHashMap<EntityId, usize>, // tidy: allow(HashMap): no random seed; lookups only, never iterated
    /// Per slab index, what an observer's pull reads of the entry (its id,
    /// which a hinted lookup checks its guess against without a hash probe,
    /// its version and cache head; one line): dense, so the pulls of a tick
    /// (every observer, every shown entity) read a few cache lines instead
    /// of the scattered entries and caches. Valid only while `heads_fresh`.
    heads: Vec<CopyHead>,
    /// The heads match the entries: set by [`EntityTable::refresh_heads`],
    /// cleared by every `&mut` access.
    heads_fresh: bool,
    /// The slab indices given out `&mut` (or filled by an insert or a
    /// removal's move) since the last refresh: the only heads it rewrites
    /// (with repeats; pushed only while shorter than the table, beyond
    /// which `all_stale` is set instead).
    stale: Vec<u32>,
    /// Every head is to be rewritten at the next refresh.
    all_stale: bool,
    /// Refreshes so far: the heads' epoch ([`EntityTable::heads_epoch`]).
    epoch: u32,
    /// Per slab index, the epoch of the refresh that last changed the head
    /// there (its content, id included): an observer that pulled at epoch
    /// `E` knows a head with `changed <= E` is the one it read then
    /// ([`EntityTable::head_unchanged_since`]).
    changed: Vec<u32>,
}

/// The words of an entry an observer's pull reads first (see
/// [`EntityTable::head`]): one cache line, aligned (the pull prefetches it
/// whole).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C, align(64))]
pub struct CopyHead {
    /// The entry's id (what a hint is checked against: the same line).
    pub id: EntityId,
    /// The entry's version.
    pub version: u64,
    /// Its cache's head, its newest movement quantised.
    pub run: RunHead,
}

const _: () = assert!(
    std::mem::size_of::<CopyHead>() == 64,
    "a dense head, id included, is one cache line"
);

impl Entry {
    /// Starts fetching the lines of the entry's cache that [`Entry::head`]
    /// reads.
    #[inline]
    fn prefetch_cache(&self) {
        let cache: &SyncCache = match &self.part {
            Part::Real(r) => &r.cache,
            Part::Ghost(g) => &g.cache,
        };
        for p in cache.head_lines() {
            crate::core::prefetch::line(p);
        }
    }

    fn head(&self) -> CopyHead {
        CopyHead {
            id: self.id,
            version: self.version,
            run: RunHead::of(&match &self.part {
                Part::Real(r) => r.cache.head(),
                Part::Ghost(g) => g.cache.head(),
            }),
        }
    }
}

impl EntityTable {
    /// Entries held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entry of `id`.
    pub fn get(&self, id: EntityId) -> Option<&Entry> {
        self.index.get(&id).map(|&i| &self.entries[i])
    }

    /// The entry of `id`, trying the slab index `*hint` first and storing
    /// where the entry was found (an observer slot's hint, as
    /// [`EntityTable::fresh_head_hinted`] keeps it): the entry is read
    /// anyway, so a right guess costs no probe of the index.
    #[inline]
    pub fn get_hinted(&self, id: EntityId, hint: &mut u32) -> Option<&Entry> {
        let h = *hint as usize;
        if let Some(e) = self.entries.get(h).filter(|e| e.id == id) {
            return Some(e);
        }
        let &i = self.index.get(&id)?;
        *hint = u32::try_from(i).unwrap_or(u32::MAX);
        Some(&self.entries[i])
    }

    /// The position of `id`'s entity, trying the slab index `*hint` first
    /// and storing where it was found (an observer's hint for its own
    /// entity, read at every flush): while the dense heads are fresh the
    /// guess is checked against the head's id (a dense line, likely
    /// cached), so only the position's line of the entry is read.
    #[inline]
    pub fn position_hinted(&self, id: EntityId, hint: &mut u32) -> Option<Vec3> {
        let h = *hint as usize;
        let right = if self.heads_fresh {
            self.heads.get(h).is_some_and(|x| x.id == id)
        } else {
            self.entries.get(h).is_some_and(|e| e.id == id)
        };
        let i = if right {
            h
        } else {
            let &i = self.index.get(&id)?;
            *hint = u32::try_from(i).unwrap_or(u32::MAX);
            i
        };
        debug_assert_eq!(self.entries[i].id, id, "a hint found another entry");
        Some(self.entries[i].entity.core().pos)
    }

    /// Starts fetching the line of the entry at slab index `hint` that
    /// [`EntityTable::position_hinted`] reads, and its dense head (a no-op
    /// off x86-64, or out of range).
    #[inline]
    pub fn prefetch_position(&self, hint: u32) {
        if let Some(e) = self.entries.get(hint as usize) {
            crate::core::prefetch::line(std::ptr::from_ref(&e.entity.core().pos));
        }
        self.prefetch_head(hint);
    }

    /// The mutable entry of `id`, trying the slab index `hint` first (as
    /// [`EntityTable::get_hinted`], checked against the entry's id; the
    /// caller's hint is not updated: a wrong one costs the probe it
    /// saves).
    pub fn get_mut_hinted(&mut self, id: EntityId, hint: u32) -> Option<&mut Entry> {
        let h = hint as usize;
        let i = if self.entries.get(h).is_some_and(|e| e.id == id) {
            h
        } else {
            *self.index.get(&id)?
        };
        self.mark_stale(i);
        Some(&mut self.entries[i])
    }

    /// The head at slab index `i` may no longer match its entry.
    #[inline]
    fn mark_stale(&mut self, i: usize) {
        self.heads_fresh = false;
        if self.stale.len() < self.entries.len() {
            self.stale.push(i as u32);
        } else {
            self.all_stale = true;
        }
    }

    /// The slab index of `id`'s entry (where [`EntityTable::iter`] meets
    /// it; valid until an entry is removed).
    pub fn position(&self, id: EntityId) -> Option<usize> {
        self.index.get(&id).copied()
    }

    /// Into `out` (emptied first), the slab indices of the listed `ids`
    /// still held, ascending and each once: the order a walk over every
    /// entry would meet them in (the cell's lists of busy, changed and
    /// fighting reals are visited so).
    pub fn positions_in_order(&self, ids: impl Iterator<Item = EntityId>, out: &mut Vec<usize>) {
        out.clear();
        out.extend(ids.filter_map(|id| self.position(id)));
        out.sort_unstable();
        out.dedup();
    }

    /// The mutable entry at slab index `i` (`i < len()`).
    pub fn at_mut(&mut self, i: usize) -> &mut Entry {
        self.mark_stale(i);
        &mut self.entries[i]
    }

    /// The mutable entry of `id`.
    pub fn get_mut(&mut self, id: EntityId) -> Option<&mut Entry> {
        let i = *self.index.get(&id)?;
        self.mark_stale(i);
        Some(&mut self.entries[i])
    }

    /// Brings the dense table up to date with the entries (once per tick,
    /// after the last change and before the observers' pulls): only the
    /// heads of the entries given out `&mut` since the last refresh are
    /// looked at (an entry no one could change has the head it had), all
    /// of them after a run of changes longer than the table. A head that
    /// differs is rewritten and stamped with this refresh's epoch
    /// ([`EntityTable::head_unchanged_since`]).
    pub fn refresh_heads(&mut self) {
        let n = self.entries.len();
        self.epoch = self.epoch.wrapping_add(1);
        if self.all_stale {
            // Every entry is looked at; a head that matches is still the one
            // the observers read (the table gave out many `&mut`, most of
            // them changing nothing a pull reads).
            self.stale.clear();
            self.stale.extend(0..n as u32);
        }
        self.all_stale = false;
        self.heads.resize(n, CopyHead::default());
        // A slab index new to the table has no head an observer read.
        self.changed.resize(n, self.epoch);
        // Each head is read from the entry's boxed cache, somewhere else in
        // memory for every entry: the caches a few entries on are fetched
        // while this one is read, so the misses overlap.
        for k in 0..self.stale.len() {
            let ahead = self.stale.get(k + HEADS_PREFETCH_AHEAD);
            if let Some(e) = ahead.and_then(|&i| self.entries.get(i as usize)) {
                e.prefetch_cache();
            }
            let i = self.stale[k] as usize;
            if let Some(e) = self.entries.get(i) {
                // Given out `&mut` is not changed: only a head that differs
                // (id included) is new to the observers.
                let head = e.head();
                if self.heads[i] != head {
                    self.heads[i] = head;
                    self.changed[i] = self.epoch;
                }
            }
        }
        self.stale.clear();
        self.heads_fresh = true;
    }

    /// The epoch of the fresh heads (the refreshes so far), `None` while
    /// they are not fresh: what an observer's pull remembers, to ask
    /// [`EntityTable::head_unchanged_since`] at its next pull.
    #[inline]
    pub fn heads_epoch(&self) -> Option<u32> {
        self.heads_fresh.then_some(self.epoch)
    }

    /// True if the head at slab index `hint` is the one that was there at
    /// epoch `since` (no refresh since changed it; false out of range or
    /// while the heads are not fresh).
    #[inline(always)]
    pub fn head_unchanged_since(&self, hint: u32, since: u32) -> bool {
        self.heads_fresh
            && self
                .changed
                .get(hint as usize)
                .is_some_and(|&c| since.wrapping_sub(c) < u32::MAX / 2)
    }

    /// Starts fetching the head at slab index `hint` into the cache (a
    /// no-op off x86-64, or out of range).
    #[inline]
    pub fn prefetch_head(&self, hint: u32) {
        if let Some(h) = self.heads.get(hint as usize) {
            crate::core::prefetch::line(std::ptr::from_ref(h));
        }
    }

    /// [`EntityTable::head`] from the dense table, in place, trying the slab
    /// index `*hint` first and storing where the entry was found. `None`
    /// also while the heads are not fresh (read [`EntityTable::head`] then).
    #[inline(always)]
    pub fn fresh_head_hinted(&self, id: EntityId, hint: &mut u32) -> Option<&CopyHead> {
        if !self.heads_fresh {
            return None;
        }
        let h = *hint as usize;
        let i = if self.heads.get(h).is_some_and(|x| x.id == id) {
            h
        } else {
            let &i = self.index.get(&id)?;
            *hint = u32::try_from(i).unwrap_or(u32::MAX);
            i
        };
        debug_assert_eq!(self.heads[i], self.entries[i].head(), "fresh heads");
        Some(&self.heads[i])
    }

    /// True while the dense heads match the entries (see
    /// [`EntityTable::refresh_heads`]).
    #[inline]
    pub fn heads_fresh(&self) -> bool {
        self.heads_fresh
    }

    /// The head of `id`'s entry: from the dense table while it is fresh,
    /// else from the entry itself.
    pub fn head(&self, id: EntityId) -> Option<CopyHead> {
        let &i = self.index.get(&id)?;
        if self.heads_fresh {
            debug_assert_eq!(self.heads[i], self.entries[i].head(), "fresh heads");
            Some(self.heads[i])
        } else {
            Some(self.entries[i].head())
        }
    }

    /// Adds `entry`.
    ///
    /// # Panics
    /// If the id is already present.
    pub fn insert(&mut self, entry: Entry) {
        let i = self.entries.len();
        let prev = self.index.insert(entry.id, i);
        assert!(prev.is_none(), "entity {} inserted twice", entry.id);
        self.entries.push(entry);
        self.mark_stale(i);
    }

    /// Removes and returns the entry of `id`.
    pub fn remove(&mut self, id: EntityId) -> Option<Entry> {
        let i = self.index.remove(&id)?;
        let e = self.entries.swap_remove(i);
        if let Some(moved) = self.entries.get(i) {
            self.index.insert(moved.id, i);
        }
        // The last entry moved into the hole (the head there is now
        // another's); the table's end shrank (heads past it are cut at the
        // refresh).
        self.mark_stale(i);
        Some(e)
    }

    /// All entries, in slab order.
    pub fn iter(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter()
    }

    /// Ids of the reals, sorted (a deterministic walk order).
    pub fn real_ids(&self, out: &mut Vec<EntityId>) {
        out.clear();
        out.extend(
            self.entries
                .iter()
                .filter(|e| matches!(e.part, Part::Real(_)))
                .map(|e| e.id),
        );
        out.sort_unstable();
    }

    /// Checks the index against the slab.
    ///
    /// # Panics
    /// If they disagree.
    pub fn verify(&self) {
        assert_eq!(self.entries.len(), self.index.len());
        for (i, e) in self.entries.iter().enumerate() {
            assert_eq!(self.index.get(&e.id), Some(&i), "index of {}", e.id);
        }
        if self.heads_fresh {
            assert_eq!(self.heads.len(), self.entries.len(), "fresh heads' count");
            assert_eq!(
                self.changed.len(),
                self.entries.len(),
                "change epochs' count"
            );
            for (i, &c) in self.changed.iter().enumerate() {
                assert!(
                    self.epoch.wrapping_sub(c) < u32::MAX / 2,
                    "the head at {i} changed at epoch {c}, after the table's {}",
                    self.epoch
                );
            }
            for (h, e) in self.heads.iter().zip(&self.entries) {
                assert_eq!(*h, e.head(), "the fresh head of {}", e.id);
            }
        }
    }
}

/// Inputs as carried in an `Onload`.
pub fn inputs_to_wire(buf: &mut SeqBuffer<Payload>) -> Vec<Input> {
    buf.drain_early()
        .map(|(seq, data)| Input { seq, data })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::entity::{Audience, ReorderParams, TypeRegistry, AVATAR};

    fn ghost(id: u64) -> Entry {
        let types = TypeRegistry::with_builtins();
        let ty = types.get(AVATAR).expect("avatar").clone();
        Entry {
            id: EntityId(id),
            entity: Entity::new_replica(EntityId(id), ty, Audience::Ghost),
            version: 0,
            part: Part::Ghost(GhostPart {
                real_at: CellId(0),
                epoch: 0,
                reorder: ReorderBuffer::new(ReorderParams::default(), 0),
                cache: Box::new(SyncCache::new(Default::default(), 0)),
                since: Time::ZERO,
            }),
            history: History::default(),
            listed_changed: false,
        }
    }

    /// A refresh rewrites only the heads of the entries given out `&mut`,
    /// inserted or moved by a removal since the last one, and the table
    /// still matches every entry after a random run of those (and after
    /// more changes than the table holds, when all are rewritten); an
    /// entry changed behind the table's back keeps its old head, which the
    /// check catches.
    #[test]
    fn a_refresh_rewrites_the_changed_heads_and_the_check_fires_without() {
        let mut t = EntityTable::default();
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut ids = 0;
        for _ in 0..20 {
            ids += 1;
            t.insert(ghost(ids));
        }
        for round in 0..200 {
            for _ in 0..(next() % 12) {
                match next() % 5 {
                    0 => {
                        ids += 1;
                        t.insert(ghost(ids));
                    }
                    1 if !t.is_empty() => {
                        let i = (next() % t.len() as u64) as usize;
                        let id = t.entries[i].id;
                        t.remove(id).expect("held");
                    }
                    2 if !t.is_empty() => {
                        let i = (next() % t.len() as u64) as usize;
                        t.at_mut(i).version += 1;
                    }
                    3 if !t.is_empty() => {
                        let i = (next() % t.len() as u64) as usize;
                        let id = t.entries[i].id;
                        t.get_mut_hinted(id, u32::MAX).expect("held").version += 2;
                    }
                    _ if !t.is_empty() => {
                        let i = (next() % t.len() as u64) as usize;
                        let id = t.entries[i].id;
                        t.get_mut(id).expect("held").version += 3;
                    }
                    _ => {}
                }
            }
            if round % 50 == 49 {
                // More changes than entries: every head is rewritten.
                for _ in 0..3 * t.len() {
                    let i = (next() % t.len() as u64) as usize;
                    t.at_mut(i).version += 1;
                }
                assert!(t.all_stale);
            }
            let (since, seen) = (t.epoch, t.heads.clone());
            t.refresh_heads();
            t.verify();
            // A head said to have held still is the one read before.
            for i in 0..t.len() {
                if t.head_unchanged_since(i as u32, since) {
                    assert_eq!(Some(&t.heads[i]), seen.get(i), "round {round}: head {i}");
                }
            }
        }
        assert!(!t.is_empty());
        t.entries[0].version += 1;
        t.refresh_heads();
        let fired = std::panic::catch_unwind(|| t.verify());
        assert!(
            fired.is_err(),
            "a head changed behind the table's back is caught"
        );
    }

    /// Entries given out `&mut` but not changed keep their heads' epochs,
    /// one at a time or after more accesses than the table holds (every
    /// head looked at); a changed one takes the refresh's epoch; the check
    /// fires on an epoch ahead of the table's.
    #[test]
    fn only_a_changed_head_is_new_and_the_check_fires_without() {
        let mut t = EntityTable::default();
        for id in 1..=10 {
            t.insert(ghost(id));
        }
        t.refresh_heads();
        let since = t.heads_epoch().expect("fresh");
        let _ = t.get_mut(EntityId(3)).expect("held");
        t.refresh_heads();
        assert!((0..10).all(|i| t.head_unchanged_since(i, since)));
        for i in 0..30 {
            let _ = t.at_mut(i % 10);
        }
        assert!(t.all_stale);
        t.get_mut(EntityId(5)).expect("held").version += 1;
        assert_eq!(t.heads_epoch(), None, "not fresh after a `&mut`");
        assert!(!t.head_unchanged_since(0, since), "not fresh: cannot tell");
        t.refresh_heads();
        let five = t.position(EntityId(5)).expect("held") as u32;
        for i in 0..10 {
            assert_eq!(t.head_unchanged_since(i, since), i != five, "head {i}");
        }
        assert!(!t.head_unchanged_since(10, since), "out of range");
        // A removal moves the last entry into the hole: that head is new.
        t.remove(EntityId(2)).expect("held");
        t.refresh_heads();
        let moved = t.position(EntityId(10)).expect("held") as u32;
        assert!(!t.head_unchanged_since(moved, since));
        t.verify();
        t.changed[0] = t.epoch + 1;
        let fired = std::panic::catch_unwind(|| t.verify());
        assert!(fired.is_err(), "an epoch ahead of the table's is caught");
    }

    /// A right hint finds the entry; a wrong or stale one falls back to the
    /// index and is corrected (fails if a wrong hint's entry is returned).
    #[test]
    fn a_hinted_get_checks_its_guess_and_corrects_it() {
        let mut t = EntityTable::default();
        for id in 1..=3 {
            t.insert(ghost(id));
        }
        let mut hint = u32::MAX;
        assert_eq!(
            t.get_hinted(EntityId(2), &mut hint).map(|e| e.id),
            Some(EntityId(2))
        );
        let found = hint;
        assert_eq!(
            t.get_hinted(EntityId(2), &mut hint).map(|e| e.id),
            Some(EntityId(2))
        );
        assert_eq!(hint, found, "a right hint is kept");
        let mut wrong = found ^ 1;
        assert_eq!(
            t.get_hinted(EntityId(2), &mut wrong).map(|e| e.id),
            Some(EntityId(2))
        );
        assert_eq!(wrong, found, "a wrong hint is corrected");
        assert!(t.get_hinted(EntityId(9), &mut hint).is_none());
    }

    /// The hinted position checks its guess against the dense heads while
    /// they are fresh, against the entries otherwise; a wrong or stale hint
    /// falls back to the index and is corrected (fails if another entry's
    /// position is returned, as it would be were the guess not checked).
    #[test]
    fn a_hinted_position_checks_its_guess_and_corrects_it() {
        let mut t = EntityTable::default();
        for id in 1..=3 {
            let mut e = ghost(id);
            e.entity
                .set_movement(Vec3::ground(id as f64 * 10.0, 0.0), 0.0);
            t.insert(e);
        }
        for fresh in [false, true] {
            if fresh {
                t.refresh_heads();
            }
            let mut hint = u32::MAX;
            assert_eq!(
                t.position_hinted(EntityId(2), &mut hint).map(|p| p.x),
                Some(20.0)
            );
            let found = hint;
            assert_eq!(t.entries[found as usize].id, EntityId(2), "fresh {fresh}");
            let mut wrong = found ^ 1;
            assert_eq!(
                t.position_hinted(EntityId(2), &mut wrong).map(|p| p.x),
                Some(20.0)
            );
            assert_eq!(wrong, found, "a wrong hint is corrected (fresh {fresh})");
            assert!(t.position_hinted(EntityId(9), &mut hint).is_none());
            t.prefetch_position(found);
            t.prefetch_position(u32::MAX);
        }
        // After a removal moves an entry, its old hint is stale.
        let mut hint = 2;
        assert!(t.remove(EntityId(1)).is_some());
        assert_eq!(
            t.position_hinted(EntityId(3), &mut hint).map(|p| p.x),
            Some(30.0)
        );
        assert_eq!(hint, 0, "the moved entry's place");
        // The mutable get checks its guess too (and does not store it).
        assert_eq!(
            t.get_mut_hinted(EntityId(3), 1).map(|e| e.id),
            Some(EntityId(3))
        );
        assert_eq!(
            t.get_mut_hinted(EntityId(2), 1).map(|e| e.id),
            Some(EntityId(2))
        );
        assert!(t.get_mut_hinted(EntityId(1), 0).is_none(), "removed");
        assert!(!t.heads_fresh(), "a mutable get makes the heads stale");
    }

    #[test]
    fn swap_remove_keeps_index() {
        let mut t = EntityTable::default();
        for i in 0..5 {
            t.insert(ghost(i));
        }
        assert!(t.remove(EntityId(1)).is_some());
        assert!(t.remove(EntityId(4)).is_some());
        assert!(t.remove(EntityId(4)).is_none());
        t.verify();
        assert_eq!(t.len(), 3);
        assert!(t.get(EntityId(3)).is_some());
    }
}
