//! The client views a cell hosts: one AOI index over every entity it holds
//! and one [`Observer`] per real with a client, fed in the order the `view`
//! module documents.
//!
//! Owns [`Views`]: the [`GridAoi`] (every real and ghost is a pos entity;
//! each observer owns one area) and the observers by owner. Implements
//! [`ObserverHost`] for the cell's entity table. Must not touch the
//! protocol (ghost upkeep, migration decisions, forwarding): the protocol
//! files call the hooks here when a copy appears, moves or goes away.
//!
//! # Per tick (after the reals' change sets and the catch-ups)
//!
//! 1. Own change sets went to the owner's observer as they were built
//!    (`emit_syncs` calls [`Observer::handle_own`]).
//! 2. The AOI update of the areas due this step ([`AoiIndex::update_due`]):
//!    an area is processed on its observer's flush ticks only (plus the
//!    step after it arrived or restarted, when it needs a full view or has
//!    interest to force); its events between two processings are the net
//!    change, which is all a flush shows. Each event of an observer's area
//!    goes to `handle_aoi`.
//! 3. Observers that arrived by migration (or restarted) get `handle_view`
//!    with their area's interest set, current since their area was due.
//!    Only those can want it: the cell lists them as they come
//!    (`Views::fresh`), and neither step walks every watch.
//! 4. Every observer due this tick flushes: it first pulls each entity it
//!    shows up to the local copy, from the copy's cache (every copy caches
//!    what it applies: reals their `SyncCache`, ghosts a small one,
//!    `ViewParams::ghost_cache_max`; a copy replaced by an onload is healed
//!    the same way), then sends; a non-empty batch goes to its client
//!    through [`Cell::send_to_client`] (cell -> proxy -> client, in order),
//!    after its [`DownKind::View`] byte (`core::down`), as a [`DownBody`]
//!    made in the cell's [`DownPool`]: a recycled buffer when the host lent
//!    the cell its shard's pool for the tick ([`Cell::down_pool_mut`]), so
//!    a batch costs one copy (the observer's bytes into it) and no
//!    allocation.
//!
//! Which observers flush at a step is the [`PhaseTable`]'s to say (config
//! `view.client_phases`): with `flush_every_ticks` > 1 each at a phase of
//! its own, all in one step, or in the step its owner's inputs come in
//! (`flush_phase`); the table lists them once a step, ascending, for the
//! AOI's due areas and the flushes.
//!
//! With `aoi_every_flushes` = k > 1 (config `aoi.update_every_flushes`) an
//! area is processed at every k-th of its observer's flushes only, each at
//! its own phase ([`FlushPhases::aoi_due`]): the flushes between send
//! movements and property changes as usual, with the set of the last
//! processing; an entity waits up to k update periods to enter or leave.
//! The AOI is the view's largest cost after the flushes themselves; this
//! divides it by k (tuning/README.md).
//!
//! So an area's interest set may be up to `k * flush_every_ticks - 1` ticks
//! old between its flushes: an observer flushed off its phase (before a
//! notice, or at its migration) sends what its last processed set gave it;
//! its next processing (here, or at the new cell, which forces what the
//! client shows for one update) brings it up to date.
//!
//! Nothing is pushed per released message (see the observer's "Pull at the
//! flush"): an observer's work follows its own update rate, and the cell
//! keeps no reverse index entity -> observers. A paced flush may skip a
//! slot it cannot send (band-rate visits, the view's `visits` module), but
//! only after its copy's dense head says nothing but bare movements came
//! since the client's version: property changes never wait.
//!
//! On offload the observer is flushed (its last batch sent from the old
//! cell), encoded into `Onload::observer` and dropped with its area; on
//! onload it is decoded (a bad blob is counted and a fresh observer starts).

use rustc_hash::FxHashMap; // tidy: allow(HashMap): no random seed; lookups, order-free checks

use crate::core::aoi::{AoiEvent, AoiIndex, AreaId, GridAoi};
use crate::core::down::{DownBody, DownKind, DownPool};
use crate::core::entity::{Audience, Entity, SyncCache};
use crate::core::geom::Vec3;
use crate::core::ids::EntityId;
use crate::core::view::{
    CopyHeadRef, CopyRef, FlushScratch, HeadRef, Observer, ObserverHost, ObserverStats, RunHead,
};

use super::flush_phase::PhaseTable;
use super::machine::Cell;
use super::params::CellParamsError;
use super::table::{EntityTable, Part};
use super::view_params::ViewParams;

/// One observer and its AOI area.
#[derive(Clone, Debug)]
pub(super) struct Watch {
    pub owner: EntityId,
    pub observer: Observer,
    pub area: AreaId,
    /// Entities forced into a migrated-in area for its first update (what
    /// the client already shows), unforced right after it.
    pub forced: Vec<EntityId>,
    /// The observer's stats as of its last flush here (its stats travel
    /// with it; the cell counts only what it did here).
    pub counted: ObserverStats,
}

/// The AOI index, the observers and their bookkeeping (see the module doc).
#[derive(Clone, Debug)]
pub(super) struct Views {
    pub params: ViewParams,
    pub aoi: GridAoi,
    /// The observers, in a slab (indices stay valid while they live).
    watches: Vec<Option<Watch>>,
    free: Vec<u32>,
    /// Owner -> slab index: looked up for every real each tick
    /// (`emit_syncs`) and for every AOI event, so hashed, not a tree (a
    /// `BTreeMap` of 5,000 owners was a walk of four nodes per lookup).
    by_owner: FxHashMap<EntityId, u32>, // tidy: allow(HashMap): no random seed; lookups, order-free checks
    events: Vec<AoiEvent>,
    /// The areas the AOI update processes this step, ascending.
    due: Vec<AreaId>,
    interest: Vec<EntityId>,
    /// A tick's view batches: the owner, where the entity table holds it
    /// (the observer's hint, just checked by its flush) and the batch.
    batches: Vec<(EntityId, u32, DownBody)>,
    /// Where the batches' buffers come from (empty, keeping nothing,
    /// unless the host lends its shard's pool).
    pool: DownPool,
    /// View steps run (the phase of the staggered flushes).
    steps: u64,
    /// The flush buffers lent to each observer for its flush (one warm set
    /// for all of them: `Observer::swap_scratch`).
    scratch: FlushScratch,
    /// Each watch slot's flush phase, and the slots that flush this step.
    pub(super) phases: PhaseTable,
    /// Slab indices of the watches inserted or restarted since the last
    /// view step: the only ones that can want a full view or have interest
    /// to force. The per-tick walks visit these and the observers that
    /// flush, not every watch (a watch is about a kilobyte: a walk over
    /// 5,000 of them each tick was a miss per watch, twice).
    fresh: Vec<u32>,
}

/// The AOI flag bit of an entity (one bit per type, modulo 64).
fn flags_of(e: &Entity) -> u64 {
    1u64 << (e.core().type_id.0 % 64)
}

impl Views {
    /// Empty views.
    ///
    /// # Errors
    /// [`CellParamsError`] if `params` do not validate.
    pub fn new(params: ViewParams) -> Result<Views, CellParamsError> {
        params.validate()?;
        let aoi = GridAoi::new(params.aoi).map_err(|_| CellParamsError::Invalid {
            key: "aoi.world",
            reason: "AOI grid parameters are unusable",
        })?;
        Ok(Views {
            params,
            aoi,
            watches: Vec::new(),
            free: Vec::new(),
            by_owner: Default::default(),
            events: Vec::new(),
            due: Vec::new(),
            interest: Vec::new(),
            batches: Vec::new(),
            pool: DownPool::default(),
            steps: 0,
            scratch: FlushScratch::default(),
            phases: PhaseTable::default(),
            fresh: Vec::new(),
        })
    }

    /// A copy of `e` is held here (new, or replaced): index it or move it.
    /// Returns false if the index refused it (full, or a bad position).
    pub fn put(&mut self, e: &Entity) -> bool {
        let id = e.core().id;
        let pos = e.core().pos;
        if self.aoi.position(id).is_some() {
            self.aoi.set_position(id, pos).is_ok()
        } else {
            self.aoi.add_entity(id, pos, flags_of(e)).is_ok()
        }
    }

    /// The copy of `id` moved.
    pub fn moved(&mut self, id: EntityId, pos: Vec3) -> bool {
        self.aoi.set_position(id, pos).is_ok()
    }

    /// The copy of `id` is gone from the cell.
    pub fn remove(&mut self, id: EntityId) {
        let _ = self.aoi.remove_entity(id);
    }

    /// The observer of `owner`.
    pub fn watch(&self, owner: EntityId) -> Option<&Watch> {
        let &i = self.by_owner.get(&owner)?;
        self.watches[i as usize].as_ref()
    }

    /// The observer of `owner`, mutable.
    pub fn watch_mut(&mut self, owner: EntityId) -> Option<&mut Watch> {
        let &i = self.by_owner.get(&owner)?;
        self.watches[i as usize].as_mut()
    }

    /// [`Views::watch_mut`], trying the slot `*hint` first and storing
    /// where the observer was found (a real keeps its hint).
    #[inline]
    pub fn watch_mut_hinted(&mut self, owner: EntityId, hint: &mut u32) -> Option<&mut Watch> {
        let h = *hint as usize;
        let at_hint = matches!(self.watches.get(h), Some(Some(w)) if w.owner == owner);
        let i = if at_hint {
            h
        } else {
            let &i = self.by_owner.get(&owner)?;
            *hint = i;
            i as usize
        };
        self.watches[i].as_mut()
    }

    /// `migrated`: the watch came with its old cell's blob (its phase
    /// follows its owner's first change here; `PhaseTable::insert`).
    fn insert(&mut self, w: Watch, migrated: bool) {
        let owner = w.owner;
        let i = match self.free.pop() {
            Some(i) => {
                self.watches[i as usize] = Some(w);
                i
            }
            None => {
                self.watches.push(Some(w));
                u32::try_from(self.watches.len() - 1).expect("observers fit u32")
            }
        };
        let prev = self.by_owner.insert(owner, i);
        debug_assert!(prev.is_none(), "{owner} observed twice");
        self.phases.insert(i, self.steps, migrated);
        self.fresh.push(i);
    }

    /// Steps between two flushes of one observer.
    fn every(&self) -> u64 {
        u64::from(self.params.flush_every_ticks.max(1))
    }

    /// The owner of watch slot `slot` changed this tick (its change set was
    /// built): under input-following phases, its flush moves towards it.
    #[inline]
    pub fn owner_changed(&mut self, slot: u32) {
        let (mode, every) = (self.params.flush_phases, self.every());
        self.phases.owner_changed(mode, slot, self.steps, every);
    }

    /// Restarts the observer of `owner` and lists it fresh (its next view
    /// step gives it a full view); false if it has none.
    fn restart(&mut self, owner: EntityId) -> bool {
        let Some(&slot) = self.by_owner.get(&owner) else {
            return false;
        };
        let Some(w) = self.watches[slot as usize].as_mut() else {
            return false;
        };
        w.observer.restart();
        self.fresh.push(slot);
        true
    }

    /// Lists in `due` the areas to bring up to date at `step`: those of
    /// the observers that flush then (`phases`, collected for `step`; at
    /// every `aoi_every_flushes`-th of their flushes), and of any that
    /// wants a full view or has interest to force (so both are seen by this
    /// update).
    fn collect_due(&mut self, step: u64, every: u64) {
        self.due.clear();
        let phases = self.params.flush_phases;
        let aoi_every = u64::from(self.params.aoi_every_flushes);
        for &slot in self.phases.flushing() {
            let slot = slot as usize;
            if !phases.aoi_due(step, slot, every, aoi_every) {
                continue;
            }
            if let Some(w) = &self.watches[slot] {
                self.due.push(w.area);
            }
        }
        for &slot in &self.fresh {
            if let Some(Some(w)) = self.watches.get(slot as usize) {
                if w.observer.needs_view() || !w.forced.is_empty() {
                    self.due.push(w.area);
                }
            }
        }
        // A fresh watch may flush too (and be listed twice).
        self.due.sort_unstable();
        self.due.dedup();
    }

    fn take(&mut self, owner: EntityId) -> Option<(u32, Watch)> {
        let i = self.by_owner.remove(&owner)?;
        self.free.push(i);
        self.phases.remove(i);
        self.watches[i as usize].take().map(|w| (i, w))
    }
}

impl ObserverHost for EntityTable {
    fn copy_version(&self, entity: EntityId) -> Option<u64> {
        self.get(entity).map(|e| e.version)
    }

    fn copy_cache(&self, entity: EntityId) -> Option<&SyncCache> {
        self.get(entity).map(|e| match &e.part {
            Part::Real(r) => &r.cache,
            Part::Ghost(g) => &g.cache,
        })
    }

    fn copy_snapshot(
        &self,
        entity: EntityId,
        audience: Audience,
        out: &mut Vec<u8>,
    ) -> Option<u64> {
        let e = self.get(entity)?;
        e.entity.encode_snapshot(audience, out);
        Some(e.version)
    }

    fn copy_position(&self, entity: EntityId) -> Option<Vec3> {
        self.get(entity).map(|e| e.entity.core().pos)
    }

    #[inline]
    fn copy_position_hinted(&self, entity: EntityId, hint: &mut u32) -> Option<Vec3> {
        self.position_hinted(entity, hint)
    }

    fn copy_entity(&self, entity: EntityId) -> Option<(&Entity, u64)> {
        self.get(entity).map(|e| (&e.entity, e.version))
    }

    #[inline]
    fn copy_entity_hinted(&self, entity: EntityId, hint: &mut u32) -> Option<(&Entity, u64)> {
        (self.get_hinted(entity, hint)).map(|e| (&e.entity, e.version))
    }

    fn copy_head(&self, entity: EntityId) -> Option<CopyHeadRef> {
        self.head(entity).map(|h| CopyHeadRef {
            version: h.version,
            run: Some(h.run),
        })
    }

    #[inline]
    fn prefetch_head(&self, hint: u32) {
        self.prefetch_head(hint);
    }

    #[inline]
    fn heads_epoch(&self) -> Option<u32> {
        self.heads_epoch()
    }

    #[inline(always)]
    fn head_unchanged_since(&self, hint: u32, since: u32) -> bool {
        self.head_unchanged_since(hint, since)
    }

    // Always: the pull calls it for every slot it visits (left to the
    // optimiser, it was not inlined once the pull moved to its own file).
    #[inline(always)]
    fn copy_head_hinted<'a>(
        &'a self,
        entity: EntityId,
        hint: &mut u32,
        scratch: &'a mut RunHead,
    ) -> Option<HeadRef<'a>> {
        if self.heads_fresh() {
            let h = self.fresh_head_hinted(entity, hint)?;
            return Some(HeadRef {
                version: h.version,
                run: Some(&h.run),
            });
        }
        Some(HeadRef::kept_in(self.copy_head(entity)?, scratch))
    }

    fn copy_ref(&self, entity: EntityId) -> Option<CopyRef<'_>> {
        self.get(entity).map(|e| CopyRef {
            entity: &e.entity,
            version: e.version,
            cache: Some(match &e.part {
                Part::Real(r) => &r.cache,
                Part::Ghost(g) => &g.cache,
            }),
        })
    }
}

impl Cell {
    /// Gives real `id` an observer and an area: from its migration blob if
    /// given (a bad blob is counted and a fresh observer starts), else new.
    pub(super) fn attach_observer(&mut self, id: EntityId, blob: &[u8]) {
        let params = self.views.params.observer;
        let observer = if blob.is_empty() {
            Observer::new(id, params)
        } else {
            Observer::decode_blob(id, params, blob).unwrap_or_else(|_| {
                self.counters.observer_blob_errors += 1;
                Observer::new(id, params)
            })
        };
        let spec = self.views.params.area();
        let area = match self.views.aoi.add_area(id, spec) {
            Ok(area) => area,
            Err(_) => {
                self.counters.aoi_refused += 1;
                return;
            }
        };
        // Hysteresis survives the migration: what the client shows is in
        // the new area's first set, then stays only within the leave radius.
        let mut forced = Vec::new();
        for e in observer.entities() {
            if self.views.aoi.force(area, e).is_ok() {
                forced.push(e);
            }
        }
        let counted = *observer.stats();
        let watch = Watch {
            owner: id,
            observer,
            area,
            forced,
            counted,
        };
        self.views.insert(watch, !blob.is_empty());
    }

    /// Takes real `id`'s observer away (it migrates): flushes it (the last
    /// batch leaves from here), removes its area and returns its blob
    /// (empty if it had none).
    pub(super) fn detach_observer(&mut self, id: EntityId) -> Vec<u8> {
        let Some((_, mut w)) = self.views.take(id) else {
            return Vec::new();
        };
        let (pool, scratch) = (&mut self.views.pool, &mut self.views.scratch);
        let batch = flush_counted(
            false,
            &mut w,
            &self.entities,
            &mut self.counters,
            pool,
            scratch,
        );
        if let Some(data) = batch {
            self.send_batch(id, w.observer.owner_hint(), data);
        }
        let mut blob = Vec::new();
        w.observer.encode_blob(&mut blob);
        let _ = self.views.aoi.remove_area(w.area);
        blob
    }

    /// Sends what real `id`'s observer has so far (before a notice that
    /// must follow it), keeping the observer.
    pub(super) fn flush_observer(&mut self, id: EntityId) {
        let Some(&slot) = self.views.by_owner.get(&id) else {
            return;
        };
        let Some(w) = self.views.watches[slot as usize].as_mut() else {
            return;
        };
        let (pool, scratch) = (&mut self.views.pool, &mut self.views.scratch);
        let batch = flush_counted(false, w, &self.entities, &mut self.counters, pool, scratch);
        let hint = w.observer.owner_hint();
        if let Some(data) = batch {
            self.send_batch(id, hint, data);
        }
    }

    /// Sends `owner`'s view batch (`hint`: where the entity table holds it,
    /// tried before a probe of its index).
    fn send_batch(&mut self, owner: EntityId, hint: u32, data: DownBody) {
        self.counters.view_batches += 1;
        // The kind byte is the relay's, not the client's.
        self.counters.view_bytes += (data.len() - 1) as u64;
        let sent = self.send_to_client_hinted(owner, hint, data);
        debug_assert!(sent.is_ok(), "observer of {owner} without a proxied real");
    }

    /// The view step of a tick (see the module doc).
    pub(super) fn run_views(&mut self) {
        // Nothing changes the copies from here to the end of the flushes.
        self.entities.refresh_heads();
        // Each observer flushes every `flush_every_ticks` steps at its phase
        // (`PhaseTable`: its slot's, or where its client's inputs come).
        let every = self.views.every();
        let step = self.views.steps;
        self.views.steps += 1;
        let (mode, len) = (self.views.params.flush_phases, self.views.watches.len());
        self.views.phases.collect(mode, step, every, len);
        self.apply_aoi(step, every);
        let mut interest = std::mem::take(&mut self.views.interest);
        let mut fresh = std::mem::take(&mut self.views.fresh);
        // Only fresh watches can want a view or force interest (see
        // `Views::fresh`); one that still wants a view stays listed.
        fresh.retain(|&slot| {
            let Some(Some(w)) = self.views.watches.get_mut(slot as usize) else {
                return false;
            };
            // Both only for areas this update processed (`collect_due`):
            // the set is current, the forced entities were seen.
            if w.observer.needs_view() && self.views.aoi.interest(w.area, &mut interest).is_ok() {
                w.observer.handle_view(&self.entities, &interest);
            }
            for e in w.forced.drain(..) {
                let _ = self.views.aoi.unforce(w.area, e);
            }
            w.observer.needs_view()
        });
        self.views.fresh = fresh;
        self.views.interest = interest;
        let mut batches = std::mem::take(&mut self.views.batches);
        let pool = &mut self.views.pool;
        // The slots that flush at `step` (listed before the AOI update).
        let phases = std::mem::take(&mut self.views.phases);
        let order = phases.flushing();
        for (k, &slot) in order.iter().enumerate() {
            let slot = slot as usize;
            // The observers flushed next: two on, the watch itself; one on,
            // its first slots (read through the watch fetched a flush ago).
            // Each flush walks memory of its own; asked for early, the
            // misses overlap this flush's work. (A third stage, the first
            // slots' heads, measured no better: `bench/README.md`.)
            if let Some(&after) = order.get(k + 2) {
                prefetch_watch(&self.views.watches, after as usize);
            }
            let next = order
                .get(k + 1)
                .and_then(|&n| self.views.watches.get(n as usize));
            if let Some(Some(next)) = next {
                next.observer.prefetch_flush();
                // Its owner's position, read first by its flush.
                self.entities.prefetch_position(next.observer.owner_hint());
            }
            let Some(w) = self.views.watches[slot].as_mut() else {
                continue;
            };
            let scratch = &mut self.views.scratch;
            if let Some(b) =
                flush_counted(true, w, &self.entities, &mut self.counters, pool, scratch)
            {
                batches.push((w.owner, w.observer.owner_hint(), b));
            }
        }
        self.views.phases = phases;
        for (owner, hint, data) in batches.drain(..) {
            self.send_batch(owner, hint, data);
        }
        self.views.batches = batches;
    }

    /// Step 2: the AOI update of the areas due at `step` and their events
    /// to the observers.
    fn apply_aoi(&mut self, step: u64, every: u64) {
        let mut events = std::mem::take(&mut self.views.events);
        if every == 1 && self.views.params.aoi_every_flushes == 1 {
            self.views.aoi.update(&mut events);
            self.counters.aoi_areas_updated += self.views.by_owner.len() as u64;
        } else {
            self.views.collect_due(step, every);
            self.views.aoi.update_due(&mut events, &self.views.due);
            self.counters.aoi_areas_updated += self.views.due.len() as u64;
        }
        for ev in &events {
            let Some(&slot) = self.views.by_owner.get(&ev.owner) else {
                continue;
            };
            let Some(w) = self.views.watches[slot as usize].as_mut() else {
                continue;
            };
            if w.area != ev.area {
                continue;
            }
            w.observer.handle_aoi(&self.entities, ev.entity, ev.kind);
        }
        self.views.events = events;
    }

    /// The observer of real `entity`, if it has a client here.
    pub fn observer(&self, entity: EntityId) -> Option<&Observer> {
        self.views.watch(entity).map(|w| &w.observer)
    }

    /// Restarts the observer of real `entity` (a new client took it over):
    /// its next batch is a full view and the own snapshot. False if it has
    /// no observer here.
    pub fn restart_view(&mut self, entity: EntityId) -> bool {
        self.views.restart(entity)
    }

    /// The pool the view batches' buffers come from: a host swaps its
    /// shard's pool in for the cell's tick and back out after it (the
    /// cell's own keeps nothing: see `core::down::DownPool`).
    pub fn down_pool_mut(&mut self) -> &mut DownPool {
        &mut self.views.pool
    }

    /// The cell's AOI index (every real and ghost; one area per observer).
    pub fn aoi(&self) -> &GridAoi {
        &self.views.aoi
    }

    /// The view parameters.
    pub fn view_params(&self) -> &ViewParams {
        &self.views.params
    }

    /// Checks the views against the entity table.
    ///
    /// # Panics
    /// If the AOI index and the table disagree, an observer belongs to no
    /// proxied real, or an observer's area is missing.
    pub(super) fn verify_views(&self) {
        assert_eq!(self.views.aoi.entity_count(), self.entities.len());
        for e in self.entities.iter() {
            assert_eq!(self.views.aoi.position(e.id), Some(e.entity.core().pos));
            let proxied = e.real().is_some_and(|r| r.has_proxy);
            assert_eq!(self.views.watch(e.id).is_some(), proxied, "{}", e.id);
        }
        let mut interest = Vec::new();
        for (owner, &slot) in &self.views.by_owner {
            let w = self.views.watches[slot as usize].as_ref().expect("live");
            assert_eq!(w.owner, *owner);
            self.views
                .aoi
                .interest(w.area, &mut interest)
                .expect("area");
        }
        for (slot, w) in self.views.watches.iter().enumerate() {
            let Some(w) = w else { continue };
            if w.observer.needs_view() || !w.forced.is_empty() {
                assert!(
                    self.views.fresh.contains(&(slot as u32)),
                    "{}: wants a view but is not listed fresh",
                    w.owner
                );
            }
        }
        let live = self.views.watches.iter().flatten().count();
        assert_eq!(live, self.views.by_owner.len());
        assert_eq!(live + self.views.free.len(), self.views.watches.len());
    }
}

/// Starts fetching the watch at slab index `i` (its lines up to the
/// observer's hot fields; nothing if out of range).
#[inline]
fn prefetch_watch(watches: &[Option<Watch>], i: usize) {
    if let Some(w) = watches.get(i) {
        let start = std::ptr::from_ref(w).cast::<u8>();
        let size = std::mem::size_of::<Option<Watch>>().min(WATCH_PREFETCH_BYTES_MAX);
        for off in (0..size).step_by(64) {
            crate::core::prefetch::line(start.wrapping_add(off));
        }
    }
}

/// At most this much of a watch is prefetched ahead of its flush.
const WATCH_PREFETCH_BYTES_MAX: usize = 1024;

/// Flushes `w`'s observer: its batch of the tick (`None` if it has no
/// news), with what it sent since its last flush here added to `counters`.
fn flush_counted(
    paced: bool,
    w: &mut Watch,
    entities: &EntityTable,
    counters: &mut super::counters::Counters,
    pool: &mut DownPool,
    scratch: &mut FlushScratch,
) -> Option<DownBody> {
    w.observer.swap_scratch(scratch);
    let batch = if paced {
        w.observer.flush_paced(entities)
    } else {
        w.observer.flush(entities)
    };
    let data = if !batch.is_empty() {
        Some(pool.body(DownKind::View, batch))
    } else if super::acks::owes_ack(entities, w.owner, w.observer.owner_hint()) {
        // Nothing else to send, but an acknowledgement rides this flush
        // (`acks.rs`): an empty batch carries it.
        Some(pool.body(DownKind::View, &[]))
    } else {
        None
    };
    w.observer.swap_scratch(scratch);
    let (now, was) = (*w.observer.stats(), w.counted);
    w.counted = now;
    // Saturating: a fresh observer (a blob that did not decode) starts its
    // stats again from zero.
    counters.view_enters += now.enters.saturating_sub(was.enters);
    counters.view_leaves += now.leaves.saturating_sub(was.leaves);
    counters.view_updates += now.delivered.saturating_sub(was.delivered);
    counters.view_resyncs += now.resyncs.saturating_sub(was.resyncs);
    counters.view_detail_cut += now.detail_cut.saturating_sub(was.detail_cut);
    counters.view_details += now.details.saturating_sub(was.details);
    counters.view_visits += now.visits.saturating_sub(was.visits);
    counters.view_skips += now.skips.saturating_sub(was.skips);
    counters.view_quiet += now.quiet.saturating_sub(was.quiet);
    data
}

#[cfg(test)]
mod tests {
    use super::super::tests::{avatar, types};
    use super::super::Cell;
    use crate::core::ids::{CellId, EntityId};
    use crate::core::time::Time;

    fn cell_with_client() -> Cell {
        let mut cell =
            Cell::new(CellId(0), super::super::tests::params(), types()).expect("params");
        cell.create_real(Time::ZERO, avatar(EntityId(1), 10.0, 10.0), true, 1)
            .expect("created");
        cell
    }

    /// A restarted observer is listed fresh, so the next view step gives
    /// it its full view; the check fires when it is not listed.
    #[test]
    fn a_restarted_observer_is_listed_fresh_and_the_check_fires_without() {
        let mut cell = cell_with_client();
        cell.run_views();
        assert!(cell.views.fresh.is_empty(), "a view step empties the list");
        assert!(cell.restart_view(EntityId(1)));
        assert_eq!(cell.views.fresh.len(), 1);
        cell.verify_views();
        cell.run_views();
        assert!(!cell.observer(EntityId(1)).expect("observed").needs_view());
        assert!(cell.views.fresh.is_empty());

        assert!(cell.restart_view(EntityId(1)));
        cell.views.fresh.clear();
        let fired = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| cell.verify_views()));
        assert!(
            fired.is_err(),
            "an unlisted observer that wants a view is caught"
        );
    }

    /// Input-following phases: a client whose inputs (its real's moves)
    /// come at the odd steps has its batches made at the odd steps after
    /// a few of them, the move answering its input at once (one gap
    /// shorter than the period, none longer); under spread it keeps its
    /// slot's phase, a period apart.
    #[test]
    fn an_observer_flushes_in_the_tick_its_owner_moves() {
        use super::super::FlushPhases;
        use crate::core::geom::Vec3;
        for mode in [FlushPhases::Input, FlushPhases::Spread] {
            let mut cell = cell_with_client();
            cell.views.params.flush_every_ticks = 2;
            cell.views.params.flush_phases = mode;
            let mut flushed = Vec::new();
            for step in 0..24u64 {
                if step % 2 == 1 {
                    let pos = Vec3::ground(10.0 + step as f64 * 0.1, 10.0);
                    cell.move_real(EntityId(1), pos).expect("real");
                }
                cell.emit_syncs(Time::from_millis(50 * step));
                cell.run_views();
                if cell.views.phases.flushing().contains(&0) {
                    flushed.push(step);
                }
            }
            let gaps: Vec<u64> = flushed.windows(2).map(|w| w[1] - w[0]).collect();
            let short = gaps.iter().filter(|&&g| g == 1).count();
            assert!(gaps.iter().all(|&g| g <= 2), "{mode:?} {flushed:?}");
            match mode {
                FlushPhases::Input => assert_eq!(short, 1, "the move's: {flushed:?}"),
                _ => assert_eq!(short, 0, "{flushed:?}"),
            }
            let late: Vec<_> = flushed.iter().filter(|&&s| s >= 10).collect();
            let odd = late.iter().filter(|&&&s| s % 2 == 1).count();
            match mode {
                FlushPhases::Input => assert_eq!(odd, late.len(), "{flushed:?}"),
                _ => assert_eq!(odd, 0, "{flushed:?}"),
            }
            assert_eq!(late.len(), 7, "{mode:?} {flushed:?}");
        }
    }

    /// The due areas are those that flush at the step plus the fresh ones,
    /// each once, ascending: as a walk over every watch lists them.
    #[test]
    fn due_areas_match_a_walk_over_every_watch() {
        let mut cell = cell_with_client();
        for id in 2..40u64 {
            let x = 5.0 + (id as f64) * 3.0;
            cell.create_real(Time::ZERO, avatar(EntityId(id), x, 20.0), true, 1)
                .expect("created");
        }
        cell.run_views();
        assert!(cell.restart_view(EntityId(7)));
        use super::super::FlushPhases;
        for phases in [
            FlushPhases::Spread,
            FlushPhases::Aligned,
            FlushPhases::Input,
        ] {
            cell.views.params.flush_phases = phases;
            for every in 1..5u64 {
                for step in 0..9u64 {
                    let v = &mut cell.views;
                    v.phases.collect(phases, step, every, v.watches.len());
                    v.collect_due(step, every);
                    let mut want: Vec<_> = (v.watches.iter().enumerate())
                        .filter_map(|(slot, w)| {
                            let w = w.as_ref()?;
                            let at = match phases {
                                FlushPhases::Aligned => 0,
                                _ => slot as u64,
                            };
                            let due = (step + at) % every == 0
                                || w.observer.needs_view()
                                || !w.forced.is_empty();
                            due.then_some(w.area)
                        })
                        .collect();
                    want.sort_unstable();
                    assert_eq!(v.due, want, "{phases:?} step {step} every {every}");
                }
            }
        }
    }
}
