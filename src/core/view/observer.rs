//! One avatar's client view, sans-IO: what its client sees and in which order.
//!
//! Owns [`Observer`]: the handle map (entity id <-> client [`Handle`]), an
//! the last version delivered per entity (in the slot, with the handle, so
//! the hot path looks one map up; the rule is
//! [`ObserverTracker`](crate::core::entity::ObserverTracker)'s), the queue of
//! snapshots still to send, the own-entity stream and the batch buffer of
//! the current tick. It reads the cell only through [`ObserverHost`] and
//! must not touch the AOI index, the cell or the network; the cell feeds it
//! (see the `view` module doc for the exact calls per tick).
//!
//! # Rules it keeps (DESIGN.md invariants)
//!
//! - Enter before any update; no double enter; leave ends updates.
//! - Per entity, updates carry consecutive versions since the last snapshot
//!   (enter or resync): each version goes through the slot's offer rule;
//!   a stale one is dropped, a gap is filled from the local copy's
//!   [`SyncCache`](crate::core::entity::SyncCache) or healed by a resync,
//!   never skipped.
//! - Snapshots (enter, resync) are built at [`Observer::flush`], after every
//!   change of the tick was applied to the copies, so a snapshot and the
//!   stream agree; while one is pending the entity's updates are dropped
//!   (the snapshot will contain them).
//! - The observer's own migration needs no remap: handles and tracker travel
//!   in the blob (`carry`), and [`Observer::handle_view`] re-derives the view
//!   in the new cell. A copy *behind* what the client saw (a lagging ghost)
//!   is held: its versions stay stale until it passes the client's version.

use super::codec::{encode_event, read_movement, DecodeError};
use super::event::{ClientEvent, Handle};
use super::host::ObserverHost;
use crate::core::aoi::EventKind;
use crate::core::entity::codec::Reader;
use crate::core::entity::{Audience, Delivery, Fill, SyncKind, SyncMsg};
use crate::core::fault::Fault;
use crate::core::ids::EntityId;
use std::collections::{BTreeMap, VecDeque};

/// Bounds of an [`Observer`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObserverParams {
    /// Most entities in view (handles in use, tracker size, snapshot queue).
    /// Default 1024 (match the AOI area's `max_interest`).
    pub view_entities_max: usize,
    /// Soft size of one tick's batch: once it is reached, further enters and
    /// resyncs wait for the next tick (at least one snapshot is sent per
    /// tick so none starves); updates are never deferred. Default 64 KiB.
    pub batch_bytes_max: usize,
    /// A fault to inject on purpose (config `testing.fault`): `DropLeave`
    /// sends no Leave events, `StaleVersion` sends each update with the
    /// previous version; the others are not the observer's. Default none.
    pub fault: Fault,
}

impl Default for ObserverParams {
    fn default() -> Self {
        ObserverParams {
            view_entities_max: 1024,
            batch_bytes_max: 64 * 1024,
            fault: Fault::None,
        }
    }
}

/// Where one entity of the view stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum SlotState {
    /// In the AOI, no snapshot sent yet (no handle, not tracked).
    EnterPending,
    /// Shown; updates flow through the tracker.
    Live,
    /// Shown; a resync snapshot is due (updates are dropped until then).
    ResyncPending,
}

/// One entity of the view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Slot {
    pub(super) handle: Option<Handle>,
    pub(super) state: SlotState,
    /// The last version the client has (meaningful once it has a handle).
    pub(super) last: u64,
}

/// Counters of what the observer did (monotonic).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ObserverStats {
    /// Enter events sent.
    pub enters: u64,
    /// Leave events sent.
    pub leaves: u64,
    /// Versions delivered as updates.
    pub delivered: u64,
    /// Versions dropped as already delivered (duplicates, lagging copies).
    pub stale: u64,
    /// Versions delivered from a copy's cache to fill a gap.
    pub filled: u64,
    /// Resync snapshots sent.
    pub resyncs: u64,
    /// Times a lagging copy was held (behind the client after a migration).
    pub held: u64,
    /// Snapshots deferred to a later tick by `batch_bytes_max`.
    pub deferred: u64,
    /// Payloads from a copy that did not decode (healed by a resync).
    pub bad_payloads: u64,
    /// Enters refused because `view_entities_max` entities are in view.
    pub refused: u64,
}

/// One avatar's client view (see the module doc).
#[derive(Clone, Debug)]
pub struct Observer {
    pub(super) owner: EntityId,
    pub(super) params: ObserverParams,
    pub(super) slots: BTreeMap<EntityId, Slot>,
    /// Entities whose snapshot (enter or resync) is due, oldest first.
    pub(super) queue: VecDeque<EntityId>,
    pub(super) next_handle: Handle,
    pub(super) free: Vec<Handle>,
    /// Last own version sent to the client (`None`: own snapshot due).
    pub(super) own_version: Option<u64>,
    /// True from a migration until [`Observer::handle_view`].
    pub(super) needs_view: bool,
    pub(super) stats: ObserverStats,
    batch: Vec<u8>,
    flushed: bool,
    snap: Vec<u8>,
}

impl Observer {
    /// A new observer for `owner` with an empty view (its own snapshot is
    /// sent at the first flush).
    pub fn new(owner: EntityId, params: ObserverParams) -> Self {
        Self::from_parts(owner, params)
    }

    pub(super) fn from_parts(owner: EntityId, params: ObserverParams) -> Self {
        Observer {
            owner,
            params,
            slots: BTreeMap::new(),
            queue: VecDeque::new(),
            next_handle: 0,
            free: Vec::new(),
            own_version: None,
            needs_view: false,
            stats: ObserverStats::default(),
            batch: Vec::new(),
            flushed: false,
            snap: Vec::new(),
        }
    }

    /// The observing entity.
    pub fn owner(&self) -> EntityId {
        self.owner
    }

    /// The counters.
    pub fn stats(&self) -> &ObserverStats {
        &self.stats
    }

    /// True after a migration until [`Observer::handle_view`] was called.
    pub fn needs_view(&self) -> bool {
        self.needs_view
    }

    /// The client handle of `entity`, if the client has it.
    pub fn handle_of(&self, entity: EntityId) -> Option<Handle> {
        self.slots.get(&entity).and_then(|s| s.handle)
    }

    /// True if `entity` is in the view (shown or about to be).
    pub fn sees(&self, entity: EntityId) -> bool {
        self.slots.contains_key(&entity)
    }

    /// The last version of `entity` the client has.
    pub fn client_version(&self, entity: EntityId) -> Option<u64> {
        self.slots
            .get(&entity)
            .and_then(|s| s.handle.map(|_| s.last))
    }

    /// Per-entity delivery rule: only `last + 1` is delivered (and
    /// advances); older is stale; newer is a gap.
    fn offer(&mut self, entity: EntityId, version: u64) -> Delivery {
        let Some(slot) = self.slots.get_mut(&entity).filter(|s| s.handle.is_some()) else {
            return Delivery::NotTracked;
        };
        if version <= slot.last {
            Delivery::Stale
        } else if version == slot.last + 1 {
            slot.last = version;
            Delivery::Deliver
        } else {
            Delivery::Gap {
                last: slot.last,
                got: version,
            }
        }
    }

    /// Entities in the view, ascending.
    pub fn entities(&self) -> impl Iterator<Item = EntityId> + '_ {
        self.slots.keys().copied()
    }

    /// True if events were produced since the last [`Observer::flush`].
    pub fn has_unflushed(&self) -> bool {
        !self.flushed && !self.batch.is_empty()
    }

    fn start(&mut self) {
        if self.flushed {
            self.batch.clear();
            self.flushed = false;
        }
    }

    /// An AOI change of the observer's area.
    ///
    /// An enter of an entity already in view keeps its handle and heals it
    /// from the copy (idempotent); a leave of an unknown entity is ignored.
    pub fn handle_aoi<H: ObserverHost + ?Sized>(
        &mut self,
        host: &H,
        entity: EntityId,
        kind: EventKind,
    ) {
        self.start();
        match kind {
            EventKind::Enter => self.enter(host, entity),
            EventKind::Leave => self.leave(entity),
        }
    }

    /// The whole current interest set of the observer's area (ascending):
    /// everything not in it leaves, everything in it is entered or healed.
    /// Mandatory after a migration (see [`Observer::needs_view`]); harmless
    /// at any other time.
    pub fn handle_view<H: ObserverHost + ?Sized>(&mut self, host: &H, interest: &[EntityId]) {
        self.start();
        debug_assert!(interest.windows(2).all(|w| w[0] < w[1]), "ascending");
        let gone: Vec<EntityId> = self
            .slots
            .keys()
            .filter(|e| interest.binary_search(e).is_err())
            .copied()
            .collect();
        for e in gone {
            self.leave(e);
        }
        for &e in interest {
            self.enter(host, e);
        }
        self.needs_view = false;
    }

    fn enter<H: ObserverHost + ?Sized>(&mut self, host: &H, entity: EntityId) {
        if entity == self.owner {
            return;
        }
        if self.slots.contains_key(&entity) {
            self.heal(host, entity);
            return;
        }
        if self.slots.len() >= self.params.view_entities_max {
            self.stats.refused += 1;
            return;
        }
        let slot = Slot {
            handle: None,
            state: SlotState::EnterPending,
            last: 0,
        };
        self.slots.insert(entity, slot);
        self.queue.push_back(entity);
    }

    fn leave(&mut self, entity: EntityId) {
        let Some(slot) = self.slots.remove(&entity) else {
            return;
        };
        if slot.state != SlotState::Live {
            self.queue.retain(|&e| e != entity);
        }
        if let Some(handle) = slot.handle {
            if self.params.fault != Fault::DropLeave {
                encode_event(&mut self.batch, &ClientEvent::Leave { handle });
            }
            self.free.push(handle);
            self.stats.leaves += 1;
        }
    }

    /// Brings a shown entity up to its local copy: fill from the cache or
    /// resync if the copy is ahead; hold if it is behind.
    fn heal<H: ObserverHost + ?Sized>(&mut self, host: &H, entity: EntityId) {
        let live = self.slots.get(&entity).map(|s| s.state) == Some(SlotState::Live);
        let (Some(last), Some(copy)) = (self.client_version(entity), host.copy_version(entity))
        else {
            return;
        };
        if !live {
            return;
        }
        if copy < last {
            self.stats.held += 1;
        } else if copy > last {
            self.fill(host, entity);
        }
    }

    /// Delivers what the copy's cache has after the client's version, or
    /// schedules a resync.
    fn fill<H: ObserverHost + ?Sized>(&mut self, host: &H, entity: EntityId) {
        let Some(last) = self.client_version(entity) else {
            return;
        };
        let Some(cache) = host.copy_cache(entity) else {
            self.want_resync(entity);
            return;
        };
        match cache.fill(last) {
            Fill::UpToDate => {}
            Fill::ResyncNeeded => self.want_resync(entity),
            Fill::Msgs(msgs) => {
                for m in msgs {
                    if !self.deliver_msg(entity, m) {
                        return;
                    }
                    self.stats.filled += 1;
                }
            }
        }
    }

    /// Offers one cached message; false if the entity needs a resync now.
    fn deliver_msg(&mut self, entity: EntityId, m: &SyncMsg) -> bool {
        if m.kind == SyncKind::Snapshot {
            self.want_resync(entity);
            return false;
        }
        match self.offer(entity, m.version) {
            Delivery::Deliver => self.emit_update(entity, m.version, m.kind, m.others_payload()),
            Delivery::Stale => {
                self.stats.stale += 1;
                true
            }
            Delivery::Gap { .. } | Delivery::NotTracked => {
                self.want_resync(entity);
                false
            }
        }
    }

    fn want_resync(&mut self, entity: EntityId) {
        if let Some(slot) = self.slots.get_mut(&entity) {
            if slot.state == SlotState::Live {
                slot.state = SlotState::ResyncPending;
                self.queue.push_back(entity);
            }
        }
    }

    /// One released sync message of an entity, from the local copy (a real's
    /// change set, or a message a ghost's reorder buffer released), with its
    /// `OtherClients` payload. Feed it after the copy applied it.
    pub fn handle_sync<H: ObserverHost + ?Sized>(
        &mut self,
        host: &H,
        entity: EntityId,
        version: u64,
        kind: SyncKind,
        others: &[u8],
    ) {
        self.start();
        // One lookup on the hot path: the slot holds handle and version.
        let slot = match self.slots.get_mut(&entity) {
            Some(s) if s.state == SlotState::Live => s,
            _ => return,
        };
        let handle = slot.handle.expect("live slots have handles");
        let last = slot.last;
        if kind == SyncKind::Snapshot {
            if version > last {
                self.want_resync(entity);
            } else {
                self.stats.stale += 1;
            }
            return;
        }
        if version == last + 1 {
            slot.last = version;
            self.emit_with(handle, entity, version, kind, others);
        } else if version <= last {
            self.stats.stale += 1;
        } else {
            // A gap: fill it from the copy's cache, then deliver this one.
            self.fill(host, entity);
            if self.slots.get(&entity).map(|s| s.state) == Some(SlotState::Live) {
                match self.offer(entity, version) {
                    Delivery::Deliver => {
                        self.emit_update(entity, version, kind, others);
                    }
                    Delivery::Stale => {}
                    _ => self.want_resync(entity),
                }
            }
        }
    }

    /// Encodes one delivered version; on a bad payload, schedules a resync
    /// and returns false.
    fn emit_update(&mut self, entity: EntityId, version: u64, kind: SyncKind, p: &[u8]) -> bool {
        let handle = self.slots[&entity].handle.expect("live slots have handles");
        self.emit_with(handle, entity, version, kind, p)
    }

    /// [`Observer::emit_update`] with the handle already looked up.
    fn emit_with(
        &mut self,
        handle: Handle,
        entity: EntityId,
        version: u64,
        kind: SyncKind,
        p: &[u8],
    ) -> bool {
        let sent = match self.params.fault {
            Fault::StaleVersion => version.saturating_sub(1),
            _ => version,
        };
        match update_event(handle, sent, kind, p) {
            Ok(ev) => {
                encode_event(&mut self.batch, &ev);
                self.stats.delivered += 1;
                true
            }
            Err(_) => {
                self.stats.bad_payloads += 1;
                self.want_resync(entity);
                false
            }
        }
    }

    /// One own change set (the owner's [`crate::core::entity::ChangeSet::own`]
    /// payload and version). Out of order or after a gap, an own snapshot is
    /// sent at the next flush instead.
    pub fn handle_own(&mut self, version: u64, kind: SyncKind, payload: &[u8]) {
        self.start();
        match self.own_version {
            Some(v) if version == v + 1 && kind != SyncKind::Snapshot => {
                let ev = ClientEvent::Own {
                    version,
                    kind,
                    payload,
                };
                encode_event(&mut self.batch, &ev);
                self.own_version = Some(version);
            }
            Some(v) if version <= v => self.stats.stale += 1,
            _ => self.own_version = None,
        }
    }

    /// Pulls every shown entity up to its local copy (cache fill or resync).
    /// Optional each tick: a safety net for a message the cell did not feed.
    pub fn refresh<H: ObserverHost + ?Sized>(&mut self, host: &H) {
        self.start();
        let shown: Vec<EntityId> = self.slots.keys().copied().collect();
        for e in shown {
            self.heal(host, e);
        }
    }

    /// Ends the tick: sends the own snapshot if due, then due enters and
    /// resyncs (oldest first, within `batch_bytes_max`), and returns the
    /// batch for the client (empty if nothing happened). The next `handle_*`
    /// starts a new batch (the buffer is reused).
    pub fn flush<H: ObserverHost + ?Sized>(&mut self, host: &H) -> &[u8] {
        self.start();
        if self.own_version.is_none() {
            self.snap.clear();
            if let Some(v) = host.copy_snapshot(self.owner, Audience::OwnClient, &mut self.snap) {
                let ev = ClientEvent::Own {
                    version: v,
                    kind: SyncKind::Snapshot,
                    payload: &self.snap,
                };
                encode_event(&mut self.batch, &ev);
                self.own_version = Some(v);
            }
        }
        let mut sent = 0usize;
        for _ in 0..self.queue.len() {
            if sent > 0 && self.batch.len() >= self.params.batch_bytes_max {
                self.stats.deferred += self.queue.len() as u64;
                break;
            }
            let Some(e) = self.queue.pop_front() else {
                break;
            };
            sent += usize::from(self.send_snapshot(host, e));
        }
        self.flushed = true;
        #[cfg(any(test, feature = "verify"))]
        self.verify();
        &self.batch
    }

    /// Sends the due snapshot of `entity`; true if one was sent.
    fn send_snapshot<H: ObserverHost + ?Sized>(&mut self, host: &H, entity: EntityId) -> bool {
        let Some(slot) = self.slots.get(&entity).copied() else {
            return false;
        };
        let last = self.client_version(entity);
        if slot.state == SlotState::ResyncPending
            && host.copy_version(entity).is_some_and(|v| Some(v) < last)
        {
            // The copy is behind what the client saw: wait for it.
            self.stats.held += 1;
            self.queue.push_back(entity);
            return false;
        }
        self.snap.clear();
        let Some(version) = host.copy_snapshot(entity, Audience::OtherClients, &mut self.snap)
        else {
            // No copy here although the AOI has it: not shown.
            self.leave(entity);
            return false;
        };
        match slot.state {
            SlotState::EnterPending => self.send_enter(entity, version),
            SlotState::ResyncPending => {
                let handle = slot.handle.expect("shown");
                let ev = ClientEvent::Resync {
                    handle,
                    version,
                    snapshot: &self.snap,
                };
                encode_event(&mut self.batch, &ev);
                self.slots.get_mut(&entity).expect("present").last = version;
                self.stats.resyncs += 1;
            }
            SlotState::Live => return false,
        }
        self.slots.get_mut(&entity).expect("present").state = SlotState::Live;
        true
    }

    fn send_enter(&mut self, entity: EntityId, version: u64) {
        let Ok((type_id, pos, yaw)) = super::codec::snapshot_header(&self.snap) else {
            unreachable!("encode_snapshot writes a header");
        };
        let handle = self.free.pop().unwrap_or_else(|| {
            self.next_handle += 1;
            self.next_handle - 1
        });
        let slot = self.slots.get_mut(&entity).expect("present");
        slot.handle = Some(handle);
        slot.last = version;
        let ev = ClientEvent::Enter {
            handle,
            entity,
            type_id,
            pos,
            yaw,
            version,
            snapshot: &self.snap,
        };
        encode_event(&mut self.batch, &ev);
        self.stats.enters += 1;
    }

    /// Checks the observer's invariants.
    ///
    /// # Panics
    /// If handles are not unique, or the queue and the pending states
    /// disagree.
    pub fn verify(&self) {
        let mut handles: Vec<Handle> = self.slots.values().filter_map(|s| s.handle).collect();
        let shown = handles.len();
        handles.extend_from_slice(&self.free);
        handles.sort_unstable();
        handles.dedup();
        assert_eq!(handles.len(), shown + self.free.len(), "handles unique");
        assert!(handles.iter().all(|&h| h < self.next_handle));
        for (e, s) in &self.slots {
            assert_eq!(s.handle.is_some(), s.state != SlotState::EnterPending);
            let queued = self.queue.iter().filter(|&&q| q == *e).count();
            assert_eq!(queued, usize::from(s.state != SlotState::Live), "{e} queue");
        }
        assert_eq!(
            self.queue.len(),
            self.slots
                .values()
                .filter(|s| s.state != SlotState::Live)
                .count()
        );
        assert!(self.slots.len() <= self.params.view_entities_max);
    }
}

/// The client event for one delivered version.
///
/// # Errors
/// [`DecodeError`] if a movement block is missing.
fn update_event(
    handle: Handle,
    version: u64,
    kind: SyncKind,
    p: &[u8],
) -> Result<ClientEvent<'_>, DecodeError> {
    let mut r = Reader::new(p);
    Ok(match kind {
        SyncKind::Movement => {
            let (pos, yaw) = read_movement(&mut r)?;
            r.finish()?;
            ClientEvent::Move {
                handle,
                version,
                pos,
                yaw,
            }
        }
        SyncKind::Props => ClientEvent::Props {
            handle,
            version,
            delta: p,
        },
        SyncKind::MovementAndProps => {
            let (pos, yaw) = read_movement(&mut r)?;
            ClientEvent::MoveProps {
                handle,
                version,
                pos,
                yaw,
                delta: &p[super::codec::MOVEMENT_BYTES..],
            }
        }
        SyncKind::Snapshot => unreachable!("snapshots are resyncs"),
    })
}
