//! [`Cell`]: one leaf of the space tree as a sans-IO state machine.
//!
//! Feed it with [`Cell::handle`] (messages from cells and proxies),
//! [`Cell::tick`] (time passing, with the current [`Layout`]) and the local
//! calls game code makes on its reals (`create_real`, `move_real`, ...);
//! drain [`Cell::poll_output`] (messages to ship) and [`Cell::poll_event`]
//! (what game code must know). Runs on the shard that owns the cell; owns the
//! cell's reals, ghosts and forwarding entries and nothing else. The protocol
//! is split across sibling files by concern: `ghost.rs` (ghost side),
//! `ghosting.rs` (ghost upkeep), `offload.rs` (migration), `real.rs` (real
//! side, forwarding).

use std::collections::VecDeque;
use std::sync::Arc;

use crate::core::combat::Combat;
use crate::core::down::DownBody;
use crate::core::entity::{Entity, SyncCache, SyncEmitter, TypeRegistry};
use crate::core::geom::Vec3;
use crate::core::ids::{CellId, EntityId};
use crate::core::time::Time;

use super::counters::{CellEvent, Counters, DropReason};
use super::early::EarlyMsgs;
use super::forward::ForwardTable;
use super::layout::Layout;
use super::msg::{CellMsg, Haunt, Outgoing, Source};
use super::params::{CellParams, CellParamsError};
use super::residency::{transition, Residency};
use super::seq_buffer::SeqBuffer;
use super::table::{EntityTable, Entry, Part, RealPart};
use super::view_params::ViewParams;
use super::views::Views;

/// Why a local call on a cell was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CellError {
    /// The entity is not real in this cell.
    #[error("entity {0} is not real in this cell")]
    NotReal(EntityId),
    /// The entity already has a real or ghost here.
    #[error("entity {0} is already present in this cell")]
    AlreadyPresent(EntityId),
    /// The position is not finite or outside every cell.
    #[error("position is outside the world")]
    OutsideWorld,
    /// The position lies in another cell (create it there).
    #[error("position lies in cell {0}")]
    WrongCell(CellId),
    /// The teleport destination is being merged away.
    #[error("cell {0} is merging")]
    DestinationMerging(CellId),
    /// The entity has no client proxy.
    #[error("entity {0} has no proxy")]
    NoProxy(EntityId),
    /// The entity's type is not in the cell's registry.
    #[error("entity {0} has a type unknown to this cell")]
    UnknownType(EntityId),
}

/// A read-only view of one entity held by a cell.
#[derive(Clone, Copy, Debug)]
pub struct EntityView<'a> {
    /// Real or ghost.
    pub residency: Residency,
    /// Sync version of the state.
    pub version: u64,
    /// The state (all properties on a real, ghost-visible ones on a ghost).
    pub entity: &'a Entity,
}

impl EntityView<'_> {
    /// Position.
    pub fn pos(&self) -> Vec3 {
        self.entity.core().pos
    }
}

/// A catch-up owed to a haunt, run at the next tick (snapshots need a real
/// with no unflushed changes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct CatchUp {
    pub entity: EntityId,
    pub cell: CellId,
    pub have: u64,
    pub full: bool,
}

/// One cell's state machine. `Clone` lets tests fork a cell to replay
/// alternative message orders.
#[derive(Clone, Debug)]
pub struct Cell {
    pub(super) id: CellId,
    pub(super) params: CellParams,
    pub(super) types: Arc<TypeRegistry>,
    pub(super) catch_ups: Vec<CatchUp>,
    pub(super) entities: EntityTable,
    pub(super) forward: ForwardTable,
    pub(super) out: VecDeque<Outgoing>,
    pub(super) events: VecDeque<CellEvent>,
    pub(super) counters: Counters,
    pub(super) next_check: Time,
    /// Real-bound messages for entities not here yet (`early.rs`).
    pub(super) early: EarlyMsgs,
    /// The version of the layout of the last tick (stamped on `Onload`s).
    pub(super) layout_version: u64,
    pub(super) scratch_ids: Vec<EntityId>,
    pub(super) scratch_cells: Vec<CellId>,
    pub(super) scratch_keep: Vec<CellId>,
    pub(super) scratch_calls: Vec<(EntityId, Arc<[u8]>)>,
    /// The reals given an input or a call since the last `run_reals` (with
    /// repeats): the only ones it visits (see `real.rs`). Emptied every
    /// tick; one entry per input or call held meanwhile (or per real that
    /// migrated in), so bounded as those are (`input_buffer_max`,
    /// `pending_calls_max`).
    pub(super) busy_reals: Vec<EntityId>,
    /// The reals whose entity may have changed since the last
    /// `emit_syncs` (each once: [`Entry::listed_changed`]): the only ones
    /// it visits (see `real.rs`). Emptied every tick; at most one entry
    /// per real held, and one per real that left since (skipped).
    pub(super) changed_reals: Vec<EntityId>,
    /// The reals whose combat is not idle ([`Combat::is_idle`]: hits
    /// pending or remembered, outputs or events to take), each once
    /// ([`RealPart::combat_listed`]): the only ones `run_combat` visits.
    /// Rebuilt every tick; at most one entry per real held, and one per
    /// real that left since (skipped).
    pub(super) combat_reals: Vec<EntityId>,
    /// `run_reals`' slab indices of the busy reals.
    pub(super) scratch_at: Vec<usize>,
    pub(super) views: Views,
}

impl Cell {
    /// A new, empty cell with default [`ViewParams`]. `types` must be the
    /// same registry on every shard.
    ///
    /// # Errors
    /// [`CellParamsError`] if `params` do not validate.
    pub fn new(
        id: CellId,
        params: CellParams,
        types: Arc<TypeRegistry>,
    ) -> Result<Cell, CellParamsError> {
        Self::with_views(id, params, ViewParams::default(), types)
    }

    /// A new, empty cell hosting client views and combat with `views`.
    /// `types` must be the same registry on every shard.
    ///
    /// # Errors
    /// [`CellParamsError`] if `params` or `views` do not validate.
    pub fn with_views(
        id: CellId,
        params: CellParams,
        views: ViewParams,
        types: Arc<TypeRegistry>,
    ) -> Result<Cell, CellParamsError> {
        params.validate()?;
        let views = Views::new(views)?;
        Ok(Cell {
            id,
            params,
            types,
            catch_ups: Vec::new(),
            entities: EntityTable::default(),
            forward: ForwardTable::default(),
            out: VecDeque::new(),
            events: VecDeque::new(),
            counters: Counters::default(),
            next_check: Time::ZERO,
            early: EarlyMsgs::default(),
            layout_version: 0,
            scratch_ids: Vec::new(),
            scratch_cells: Vec::new(),
            scratch_keep: Vec::new(),
            scratch_calls: Vec::new(),
            busy_reals: Vec::new(),
            changed_reals: Vec::new(),
            combat_reals: Vec::new(),
            scratch_at: Vec::new(),
            views,
        })
    }

    /// This cell's id.
    pub fn id(&self) -> CellId {
        self.id
    }

    /// The parameters.
    pub fn params(&self) -> &CellParams {
        &self.params
    }

    /// The counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// When the next ghost/migration check is due.
    pub fn next_check(&self) -> Time {
        self.next_check
    }

    /// How this cell holds `entity` (real, ghost, gone), if at all.
    pub fn residency(&self, entity: EntityId) -> Option<Residency> {
        if let Some(e) = self.entities.get(entity) {
            return Some(e.residency());
        }
        self.forward.get(entity).map(|f| f.residency())
    }

    /// The entity's state here, if real or ghost.
    pub fn view(&self, entity: EntityId) -> Option<EntityView<'_>> {
        self.entities.get(entity).map(|e| EntityView {
            residency: e.residency(),
            version: e.version,
            entity: &e.entity,
        })
    }

    /// Every real and ghost here, with its state (for AOI and observers).
    pub fn entities(&self) -> impl Iterator<Item = (EntityId, EntityView<'_>)> + '_ {
        self.entities.iter().map(|e| {
            let view = EntityView {
                residency: e.residency(),
                version: e.version,
                entity: &e.entity,
            };
            (e.id, view)
        })
    }

    /// The recorded transitions of `entity` here (debug and verify builds).
    pub fn history(&self, entity: EntityId) -> Vec<(Time, Option<Residency>)> {
        if let Some(e) = self.entities.get(entity) {
            return e.history.steps();
        }
        self.forward
            .get(entity)
            .map(|f| f.history.steps())
            .unwrap_or_default()
    }

    /// Reals and ghosts held.
    pub fn entity_count(&self) -> usize {
        self.entities.len()
    }

    /// True when the cell holds no real and no ghost.
    pub fn is_empty(&self) -> bool {
        self.entities.is_empty()
    }

    /// Forwarding entries (and tombstones) held.
    pub fn forwarding_entries(&self) -> usize {
        self.forward.len()
    }

    /// The reals here, in id order.
    pub fn reals(&self) -> Vec<EntityId> {
        let mut v = Vec::new();
        self.entities.real_ids(&mut v);
        v
    }

    /// The ghosts here, in slab order.
    pub fn ghosts(&self) -> impl Iterator<Item = EntityId> + '_ {
        self.entities
            .iter()
            .filter(|e| matches!(e.part, Part::Ghost(_)))
            .map(|e| e.id)
    }

    /// A real's haunts.
    pub fn haunts(&self, entity: EntityId) -> Option<&[Haunt]> {
        self.entities
            .get(entity)
            .and_then(|e| e.real())
            .map(|r| r.haunts.as_slice())
    }

    /// A real's next expected client input sequence.
    pub fn next_input(&self, entity: EntityId) -> Option<u64> {
        self.entities
            .get(entity)
            .and_then(|e| e.real())
            .map(|r| r.inputs.next())
    }

    /// The next message to ship, in the order the cell produced them.
    ///
    /// # Ordering
    /// Messages to one destination leave in protocol order (a `CreateGhost`
    /// before the `Onload` that relies on it); the transport must keep FIFO
    /// per ordered pair of cells.
    pub fn poll_output(&mut self) -> Option<Outgoing> {
        self.out.pop_front()
    }

    /// The next event for game code.
    pub fn poll_event(&mut self) -> Option<CellEvent> {
        self.events.pop_front()
    }

    /// Creates a new real here from `entity` (a spawn, or a restore).
    /// `epoch` is its starting channel version (0 for a new entity). With
    /// `has_proxy` (a client follows it: an avatar) it gets an observer and
    /// an AOI area, and its client gets one view batch per tick with news
    /// through its proxy ([`ProxyMsg::Downstream`](super::ProxyMsg)).
    ///
    /// # Errors
    /// `AlreadyPresent` if the entity has a real or ghost here; `OutsideWorld`
    /// for a non-finite position; `UnknownType` if its type is not in the
    /// cell's registry.
    pub fn create_real(
        &mut self,
        now: Time,
        mut entity: Entity,
        has_proxy: bool,
        epoch: u64,
    ) -> Result<(), CellError> {
        let id = entity.core().id;
        if self.entities.get(id).is_some() {
            return Err(CellError::AlreadyPresent(id));
        }
        if !entity.core().pos.is_finite() {
            return Err(CellError::OutsideWorld);
        }
        if self.types.get(entity.core().type_id).is_none() {
            return Err(CellError::UnknownType(id));
        }
        // A new real's initial state is its version 0: nothing pending.
        entity.clear_dirty();
        let mut history = self
            .forward
            .remove(id)
            .map(|f| f.history)
            .unwrap_or_default();
        let real = RealPart {
            epoch,
            emitter: SyncEmitter::new(),
            cache: SyncCache::new(self.params.sync_cache(), 0),
            haunts: Vec::new(),
            inputs: SeqBuffer::new(1),
            calls: VecDeque::new(),
            next_downstream: 1,
            has_proxy,
            combat: Combat::new(id, self.views.params.combat),
            since: now,
            layout_version_min: 0,
            watch_hint: u32::MAX,
            combat_listed: false,
            ack_due: 0,
        };
        if !self.views.put(&entity) {
            self.counters.aoi_refused += 1;
        }
        let to = Residency::Real { epoch };
        transition(&mut history, now, None, Some(to));
        self.entities.insert(Entry {
            id,
            entity,
            version: 0,
            part: Part::Real(Box::new(real)),
            history,
            listed_changed: true,
        });
        self.changed_reals.push(id);
        if has_proxy {
            self.attach_observer(id, &[]);
        }
        self.events.push_back(CellEvent::BecameReal {
            entity: id,
            from: None,
        });
        self.notify_proxy(id);
        Ok(())
    }

    /// Moves a real (yaw unchanged); the change is synced at the next tick.
    ///
    /// # Errors
    /// `NotReal` if the entity is not real here; `OutsideWorld` for a
    /// non-finite position.
    pub fn move_real(&mut self, entity: EntityId, pos: Vec3) -> Result<(), CellError> {
        if !pos.is_finite() {
            return Err(CellError::OutsideWorld);
        }
        let e = &mut self.real_entry(entity)?.entity;
        let yaw = e.core().yaw;
        e.set_movement(pos, yaw);
        Ok(())
    }

    /// A real's state, for game code to change (movement, properties). The
    /// changes are synced at the next tick.
    ///
    /// # Errors
    /// `NotReal` if the entity is not real here.
    pub fn real_mut(&mut self, entity: EntityId) -> Result<&mut Entity, CellError> {
        Ok(&mut self.real_entry(entity)?.entity)
    }

    /// Sends `data` to the entity's client through its proxy, numbered so the
    /// proxy delivers it in order across migrations.
    ///
    /// # Errors
    /// `NotReal` if not real here; `NoProxy` if it has no client.
    pub fn send_to_client(
        &mut self,
        entity: EntityId,
        data: impl Into<DownBody>,
    ) -> Result<(), CellError> {
        self.send_to_client_hinted(entity, u32::MAX, data)
    }

    /// [`Cell::send_to_client`], trying the entity table's slab index
    /// `hint` before a probe of its index (a view batch's owner: where its
    /// observer's flush found it).
    ///
    /// # Errors
    /// As [`Cell::send_to_client`].
    pub(super) fn send_to_client_hinted(
        &mut self,
        entity: EntityId,
        hint: u32,
        data: impl Into<DownBody>,
    ) -> Result<(), CellError> {
        self.send_or_hand_back(entity, hint, data.into())
            .map_err(|(e, _)| e)
    }

    /// [`Cell::send_to_client`] that hands `data` back with the error, so a
    /// caller can forward what a real elsewhere must send (one lookup of
    /// the entity, not a residency check and then the send's own).
    ///
    /// # Errors
    /// As [`Cell::send_to_client`], with `data`.
    pub fn send_to_client_or_back(
        &mut self,
        entity: EntityId,
        data: DownBody,
    ) -> Result<(), (CellError, DownBody)> {
        self.send_or_hand_back(entity, u32::MAX, data)
    }

    fn send_or_hand_back(
        &mut self,
        entity: EntityId,
        hint: u32,
        mut data: DownBody,
    ) -> Result<(), (CellError, DownBody)> {
        let cell = self.id;
        let r = match self.entities.get_mut_hinted(entity, hint) {
            Some(e) if e.real().is_some() => e.real_mut().expect("real"),
            _ => return Err((CellError::NotReal(entity), data)),
        };
        if !r.has_proxy {
            return Err((CellError::NoProxy(entity), data));
        }
        // An acknowledgement owed to the client rides a view batch
        // (`acks.rs`).
        if r.ack_due > 0 && data.carry_ack(r.ack_due) {
            r.ack_due = 0;
            self.counters.acks_carried += 1;
        }
        let seq = r.next_downstream;
        r.next_downstream += 1;
        let msg = super::msg::ProxyMsg::Downstream {
            entity,
            cell,
            epoch: r.epoch,
            seq,
            data,
        };
        self.out.push_back(Outgoing::proxy(entity, msg));
        Ok(())
    }

    /// Feeds one message from `from`.
    ///
    /// Never panics on a message that breaks a rule of the protocol as seen
    /// from here (stale, duplicate, unknown): it is dropped, counted by
    /// [`DropReason`] and reported as [`CellEvent::Dropped`]. It does panic
    /// if the message proves two reals of one entity exist (a protocol bug).
    pub fn handle(&mut self, now: Time, from: Source, msg: CellMsg) {
        let entity = msg.entity();
        if let CellMsg::ToReal(t) = msg {
            self.on_to_real(now, from, t);
            return;
        }
        let Source::Cell(from) = from else {
            self.drop_msg(entity, DropReason::BadSource);
            return;
        };
        match msg {
            CellMsg::CreateGhost {
                entity,
                epoch,
                type_id,
                snapshot,
            } => {
                self.on_create_ghost(now, from, entity, epoch, type_id, snapshot);
                self.release_early(now, entity);
            }
            CellMsg::DeleteGhost { entity, epoch } => {
                self.on_delete_ghost(now, from, entity, epoch)
            }
            CellMsg::Sync { epoch, msg } => self.on_sync(now, from, epoch, msg),
            CellMsg::SetNextReal {
                entity,
                epoch,
                next,
            } => self.on_set_next_real(now, entity, epoch, next),
            CellMsg::Onload(onload) => {
                self.on_onload(now, from, *onload);
                self.release_early(now, entity);
            }
            CellMsg::ToReal(_) => unreachable!("handled above"),
        }
    }

    /// Time passes: [`Cell::run_inputs`], then [`Cell::publish`]. A host
    /// whose entity logic reacts to the events of the first half (applied
    /// inputs, combat) calls the two halves itself with that logic between
    /// them, so what it changes goes out in this tick's syncs and views.
    pub fn tick<L: Layout + ?Sized>(&mut self, now: Time, layout: &L) {
        self.run_inputs(now);
        self.publish(now, layout);
    }

    /// The first half of a tick: expire forwarding entries and early
    /// messages, run queued inputs and calls of the reals (events
    /// `InputApplied`, `CallRun`), tick combat and route its calls.
    /// Nothing is sent to ghosts or clients yet, and no real leaves.
    pub fn run_inputs(&mut self, now: Time) {
        self.forward.expire(now);
        self.expire_early(now);
        self.run_reals(now);
        self.run_combat(now);
    }

    /// The second half of a tick: emit one sync message per changed real,
    /// run owed catch-ups, feed the observers and send each client its
    /// batch, and every `check_period_ms` run gap checks, ghost upkeep and
    /// migrations against `layout`.
    pub fn publish<L: Layout + ?Sized>(&mut self, now: Time, layout: &L) {
        self.layout_version = layout.version();
        self.emit_syncs(now);
        self.run_catch_ups(now);
        self.run_views();
        if now >= self.next_check {
            self.check(now, layout);
            self.next_check = now + self.params.check_period();
        }
        #[cfg(feature = "verify")]
        self.verify();
    }

    /// Checks every internal invariant of the cell.
    ///
    /// # Panics
    /// On the first broken invariant.
    pub fn verify(&self) {
        self.entities.verify();
        self.verify_busy_reals();
        self.verify_changed_reals();
        self.verify_combat_reals();
        self.verify_acks();
        assert!(self.early.len() <= self.params.early_msgs_max);
        self.verify_views();
        for e in self.entities.iter() {
            assert!(
                self.forward.get(e.id).is_none(),
                "{} both present and gone",
                e.id
            );
            match &e.part {
                Part::Real(r) => {
                    assert!(
                        r.haunts.iter().all(|h| h.cell != self.id),
                        "{} haunts itself",
                        e.id
                    );
                    for (i, h) in r.haunts.iter().enumerate() {
                        assert!(
                            r.haunts[..i].iter().all(|o| o.cell != h.cell),
                            "{} haunts {} twice",
                            e.id,
                            h.cell
                        );
                    }
                    assert!(r.inputs.len() <= 2 * self.params.input_buffer_max + 1);
                    assert!(r.calls.len() <= self.params.pending_calls_max);
                    assert!(r.cache.len() <= self.params.sync_cache_max);
                    assert_eq!(r.emitter.version(), e.version, "{} version", e.id);
                    r.cache.verify();
                }
                Part::Ghost(g) => {
                    assert_ne!(g.real_at, self.id, "{} ghost points at itself", e.id);
                    assert_eq!(g.reorder.applied(), e.version, "{} version", e.id);
                    assert_eq!(g.cache.last_version(), e.version, "{} cache", e.id);
                    assert!(g.reorder.pending() <= self.params.reorder_buffer_max);
                }
            }
        }
        assert!(self.forward.len() <= self.params.forward_table_max);
        assert!(self.catch_ups.len() <= self.params.catch_up_queue_max);
    }

    /// A real's entry, to change: listed in `changed_reals` (whoever asks
    /// for it may change its entity; `emit_syncs` visits no other real).
    pub(super) fn real_entry(&mut self, entity: EntityId) -> Result<&mut Entry, CellError> {
        match self.entities.get_mut(entity) {
            Some(e) if e.real().is_some() => {
                list_changed(&mut self.changed_reals, e);
                Ok(e)
            }
            _ => Err(CellError::NotReal(entity)),
        }
    }

    pub(super) fn drop_msg(&mut self, entity: EntityId, reason: DropReason) {
        self.counters.drops[reason.index()] += 1;
        self.events.push_back(CellEvent::Dropped { entity, reason });
    }

    pub(super) fn notify_proxy(&mut self, entity: EntityId) {
        let Some(r) = self.entities.get(entity).and_then(|e| e.real()) else {
            return;
        };
        if r.has_proxy {
            let msg = super::msg::ProxyMsg::RealMoved {
                entity,
                cell: self.id,
                epoch: r.epoch,
            };
            self.out.push_back(Outgoing::proxy(entity, msg));
        }
    }

    pub(super) fn send(&mut self, to: CellId, msg: CellMsg) {
        debug_assert_ne!(to, self.id, "cell sends to itself");
        self.out.push_back(Outgoing::cell(to, msg));
    }

    fn check<L: Layout + ?Sized>(&mut self, now: Time, layout: &L) {
        self.check_gaps(now);
        self.check_reals(now, layout);
    }
}

/// Lists `e` (a real about to be changed) in `changed` unless it is
/// listed already.
#[inline]
pub(super) fn list_changed(changed: &mut Vec<EntityId>, e: &mut Entry) {
    if !e.listed_changed {
        e.listed_changed = true;
        changed.push(e.id);
    }
}
