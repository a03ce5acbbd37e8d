//! The client side of the view: decode batches, keep the world as the client
//! sees it, and count every broken rule.
//!
//! Owns [`ClientView`]: handles -> [`Shown`] entities (an `OtherClients`
//! replica at a version), the own entity (an `OwnClient` replica), and the
//! [`Violation`]s found. Used as the checker of the simulator now and as the
//! state of the client library later. It trusts nothing: a malformed batch
//! is a violation, not a panic. It knows nothing of cells or observers.
//!
//! # Rules checked
//! - an update (move, props) or resync before the handle's enter;
//! - an enter of a handle that is live (double enter), or of an entity that
//!   is already shown under another handle;
//! - a property delta that skips a version (only coalesced movements may
//!   skip versions: a move's version may jump, a Props event's must be the
//!   next one);
//! - an update, resync or leave of a handle after its leave;
//! - movement (or any update, or a resync) older than what was shown;
//! - a level-of-detail catch-up (Detail) not at the version shown (it
//!   brings values up to that version, never a new one);
//! - own stream versions not consecutive since the last own snapshot (the
//!   own entity is never coalesced);
//! - an own update before the own snapshot, or an own snapshot that goes
//!   backwards (an own stream older than what was shown);
//! - bytes that do not decode, payloads the replica rejects.

use super::codec::{dequantise, quantise, yaw_of, BatchReader, DecodeError, MOVEMENT_BYTES};
use super::event::{step_from, ClientEvent, Handle, Movement};
use super::shown::ShownMap;
use crate::core::entity::{Audience, Entity, SyncKind, TypeRegistry};
use crate::core::geom::Vec3;
use crate::core::ids::EntityId;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Bounds of a [`ClientView`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientViewParams {
    /// Most violations kept with detail (all are counted). Default 256.
    pub violations_max: usize,
    /// Most left handles remembered to tell "after leave" from "before
    /// enter". Default 4096.
    pub left_handles_max: usize,
    /// Most entities shown at once. Default 4096.
    pub shown_max: usize,
}

impl Default for ClientViewParams {
    fn default() -> Self {
        ClientViewParams {
            violations_max: 256,
            left_handles_max: 4096,
            shown_max: 4096,
        }
    }
}

/// Which rule an event broke.
#[derive(Clone, Debug, PartialEq)]
pub enum Rule {
    /// An update or resync for a handle never entered.
    UpdateBeforeEnter,
    /// An enter of a live handle.
    DoubleEnter,
    /// An enter of an entity already shown under `other`.
    EntityTwice {
        /// The handle it is already shown under.
        other: Handle,
    },
    /// A version that is not the next one.
    VersionGap {
        /// The version expected.
        expected: u64,
        /// The version received.
        got: u64,
    },
    /// An update, resync or leave after the handle's leave.
    AfterLeave,
    /// An update or resync older than (or equal to) what was shown.
    Stale {
        /// The version shown.
        shown: u64,
        /// The version received.
        got: u64,
    },
    /// A leave of a handle never entered.
    LeaveUnknown,
    /// More entities than `shown_max`.
    TooMany,
    /// The batch did not decode.
    Decode(DecodeError),
    /// A payload the replica could not apply, or an unknown entity type.
    BadPayload(DecodeError),
}

impl Rule {
    /// The rule's name, as its variant is spelled (`DoubleEnter`): what
    /// reports group violations by.
    pub fn name(&self) -> &'static str {
        match self {
            Rule::UpdateBeforeEnter => "UpdateBeforeEnter",
            Rule::DoubleEnter => "DoubleEnter",
            Rule::EntityTwice { .. } => "EntityTwice",
            Rule::VersionGap { .. } => "VersionGap",
            Rule::AfterLeave => "AfterLeave",
            Rule::Stale { .. } => "Stale",
            Rule::LeaveUnknown => "LeaveUnknown",
            Rule::TooMany => "TooMany",
            Rule::Decode(_) => "Decode",
            Rule::BadPayload(_) => "BadPayload",
        }
    }
}

/// One broken rule, with where.
#[derive(Clone, Debug, PartialEq)]
pub struct Violation {
    /// Index of the batch (from 0).
    pub batch: u64,
    /// The handle (`None` for the own stream or undecodable bytes).
    pub handle: Option<Handle>,
    /// The rule.
    pub rule: Rule,
}

/// One entity as the client shows it.
#[derive(Clone, Debug)]
pub struct Shown {
    /// The entity.
    pub entity: EntityId,
    /// The version shown.
    pub version: u64,
    /// The replica (`OtherClients` view, or `OwnClient` for the own entity).
    pub replica: Entity,
    /// The last position given, quantised (the base of movement deltas).
    pub q: [i64; 3],
}

/// The client's world (see the module doc).
#[derive(Clone, Debug)]
pub struct ClientView {
    params: ClientViewParams,
    registry: Arc<TypeRegistry>,
    shown: ShownMap,
    by_entity: BTreeMap<EntityId, Handle>,
    left: BTreeSet<Handle>,
    own: Option<Shown>,
    owner: EntityId,
    violations: Vec<Violation>,
    violation_count: u64,
    /// Every violation seen, by [`Rule::name`].
    violation_kinds: BTreeMap<&'static str, u64>,
    batches: u64,
    degraded: bool,
    degraded_notices: u64,
}

impl ClientView {
    /// An empty view of the client of `owner`; entity types come from
    /// `registry`.
    pub fn new(owner: EntityId, registry: Arc<TypeRegistry>, params: ClientViewParams) -> Self {
        ClientView {
            params,
            registry,
            shown: ShownMap::default(),
            by_entity: BTreeMap::new(),
            left: BTreeSet::new(),
            own: None,
            owner,
            violations: Vec::new(),
            violation_count: 0,
            violation_kinds: BTreeMap::new(),
            batches: 0,
            degraded: false,
            degraded_notices: 0,
        }
    }

    /// Violations kept (at most `violations_max`).
    pub fn violations(&self) -> &[Violation] {
        &self.violations
    }

    /// Every violation seen.
    pub fn violation_count(&self) -> u64 {
        self.violation_count
    }

    /// Every violation seen, counted by [`Rule::name`].
    pub fn violation_kinds(&self) -> &BTreeMap<&'static str, u64> {
        &self.violation_kinds
    }

    /// The entities shown, by handle.
    pub fn shown(&self) -> &ShownMap {
        &self.shown
    }

    /// The shown entity `entity`, if any.
    pub fn find(&self, entity: EntityId) -> Option<&Shown> {
        self.by_entity.get(&entity).and_then(|h| self.shown.get(h))
    }

    /// True while the server says this client's budget cannot carry its
    /// view (a `Degraded` event).
    pub fn degraded(&self) -> bool {
        self.degraded
    }

    /// `Degraded` events received (both directions).
    pub fn degraded_notices(&self) -> u64 {
        self.degraded_notices
    }

    /// The own entity, once its snapshot arrived.
    pub fn own(&self) -> Option<&Shown> {
        self.own.as_ref()
    }

    fn violate(&mut self, handle: Option<Handle>, rule: Rule) {
        self.violation_count += 1;
        *self.violation_kinds.entry(rule.name()).or_default() += 1;
        if self.violations.len() < self.params.violations_max {
            self.violations.push(Violation {
                batch: self.batches,
                handle,
                rule,
            });
        }
    }

    /// Applies one batch from the server. Never panics; every broken rule is
    /// recorded and the rest of the batch is still applied when it decodes.
    pub fn handle_batch(&mut self, batch: &[u8]) {
        self.handle_batch_inspect(batch, |_, _, _| {});
    }

    /// As [`ClientView::handle_batch`], calling `seen(event, entity, pos)`
    /// right after each decoded event is applied; `entity` is the entering
    /// entity for an enter, else the entity the handle named before the
    /// event (`None` for the own stream or a handle not shown); `pos` is
    /// where the event put the entity (enter, resync, the moves; resolved
    /// from the delta). One decode pass: the client library counts and times
    /// events here.
    pub fn handle_batch_inspect(
        &mut self,
        batch: &[u8],
        mut seen: impl FnMut(&ClientEvent<'_>, Option<EntityId>, Option<Vec3>),
    ) {
        for ev in BatchReader::new(batch) {
            match ev {
                Ok(ev) => {
                    let entity = match ev {
                        ClientEvent::Enter { entity, .. } => Some(entity),
                        _ => ev
                            .handle()
                            .and_then(|h| self.shown.get(&h))
                            .map(|s| s.entity),
                    };
                    let pos = self.apply(&ev);
                    seen(&ev, entity, pos);
                }
                Err(e) => self.violate(None, Rule::Decode(e)),
            }
        }
        self.batches += 1;
    }

    /// As [`ClientView::handle_batch_inspect`], but only the own stream and
    /// `Degraded` notices are applied and checked: every other event is
    /// decoded (a malformed batch is still a violation) and passed to
    /// `seen` with no entity and no position, and the view keeps showing
    /// nothing else. The sampled mode of a load generator: the own stream
    /// (spawn point, refusals, own gaps) stays exact at a fraction of the
    /// cost.
    pub fn handle_batch_own_inspect(
        &mut self,
        batch: &[u8],
        mut seen: impl FnMut(&ClientEvent<'_>, Option<EntityId>, Option<Vec3>),
    ) {
        for ev in BatchReader::new(batch) {
            match ev {
                Ok(
                    ev @ (ClientEvent::Own { .. }
                    | ClientEvent::OwnMove { .. }
                    | ClientEvent::Degraded { .. }),
                ) => {
                    let pos = self.apply(&ev);
                    seen(&ev, None, pos);
                }
                Ok(ev) => seen(&ev, None, None),
                Err(e) => self.violate(None, Rule::Decode(e)),
            }
        }
        self.batches += 1;
    }

    /// Applies one event; the position it gave its entity, if any.
    fn apply(&mut self, ev: &ClientEvent<'_>) -> Option<Vec3> {
        match *ev {
            ClientEvent::Enter {
                handle,
                entity,
                type_id,
                version,
                snapshot,
                pos,
                ..
            } => {
                self.enter(handle, entity, type_id, version, snapshot);
                Some(pos)
            }
            ClientEvent::Leave { handle } => {
                self.leave(handle);
                None
            }
            ClientEvent::Move {
                handle,
                version_low,
                mv,
            } => self.update(handle, version_low, Some(mv), None),
            ClientEvent::Props {
                handle,
                version_low,
                delta,
            } => self.update(handle, version_low, None, Some(delta)),
            ClientEvent::MoveProps {
                handle,
                version_low,
                mv,
                delta,
            } => self.update(handle, version_low, Some(mv), Some(delta)),
            ClientEvent::Resync {
                handle,
                version,
                snapshot,
            } => self.resync(handle, version, snapshot),
            ClientEvent::Own {
                version,
                kind,
                payload,
            } => {
                self.own_event(version, kind, payload);
                None
            }
            ClientEvent::OwnMove { version_low, mv } => self.own_move(version_low, mv),
            ClientEvent::Degraded { on } => {
                self.degraded = on;
                self.degraded_notices += 1;
                None
            }
            ClientEvent::Detail {
                handle,
                version_low,
                delta,
            } => {
                self.detail(handle, version_low, delta);
                None
            }
        }
    }

    /// A level-of-detail catch-up: whole values at the version shown.
    fn detail(&mut self, handle: Handle, low: u8, delta: &[u8]) {
        let Some(s) = self.live(handle) else {
            return;
        };
        let shown = s.version;
        let rule = match step_from(shown, low) {
            Err(v) if v == shown => None,
            Err(got) => Some(Rule::Stale { shown, got }),
            Ok(got) => Some(Rule::VersionGap {
                expected: shown,
                got,
            }),
        };
        if let Some(rule) = rule {
            return self.violate(Some(handle), rule);
        }
        if let Err(e) = s.replica.apply_payload(SyncKind::Props, delta) {
            self.violate(Some(handle), Rule::BadPayload(e));
        }
    }

    fn replica(&self, entity: EntityId, ty: u16, aud: Audience) -> Result<Entity, Rule> {
        let t = self
            .registry
            .get(crate::core::entity::EntityTypeId(ty))
            .ok_or(Rule::BadPayload(DecodeError::BadTag(0)))?;
        Ok(Entity::new_replica(entity, t.clone(), aud))
    }

    fn enter(
        &mut self,
        handle: Handle,
        entity: EntityId,
        ty: crate::core::entity::EntityTypeId,
        version: u64,
        snapshot: &[u8],
    ) {
        if self.shown.contains_key(&handle) {
            self.violate(Some(handle), Rule::DoubleEnter);
            return;
        }
        if let Some(&other) = self.by_entity.get(&entity) {
            self.violate(Some(handle), Rule::EntityTwice { other });
            return;
        }
        if self.shown.len() >= self.params.shown_max {
            self.violate(Some(handle), Rule::TooMany);
            return;
        }
        let mut replica = match self.replica(entity, ty.0, Audience::OtherClients) {
            Ok(r) => r,
            Err(rule) => return self.violate(Some(handle), rule),
        };
        if let Err(e) = replica.apply_payload(SyncKind::Snapshot, snapshot) {
            self.violate(Some(handle), Rule::BadPayload(e));
            return;
        }
        self.left.remove(&handle);
        self.by_entity.insert(entity, handle);
        let q = quantise(replica.core().pos);
        let shown = Shown {
            entity,
            version,
            replica,
            q,
        };
        self.shown.insert(handle, shown);
    }

    fn leave(&mut self, handle: Handle) {
        let Some(s) = self.shown.remove(&handle) else {
            let rule = if self.left.contains(&handle) {
                Rule::AfterLeave
            } else {
                Rule::LeaveUnknown
            };
            return self.violate(Some(handle), rule);
        };
        self.by_entity.remove(&s.entity);
        if self.left.len() < self.params.left_handles_max {
            self.left.insert(handle);
        }
    }

    /// The shown entity of `handle`, or the violation of using it.
    fn live(&mut self, handle: Handle) -> Option<&mut Shown> {
        if !self.shown.contains_key(&handle) {
            let rule = if self.left.contains(&handle) {
                Rule::AfterLeave
            } else {
                Rule::UpdateBeforeEnter
            };
            self.violate(Some(handle), rule);
            return None;
        }
        self.shown.get_mut(&handle)
    }

    /// A movement and/or a property delta at the version ending in `low`.
    /// Only a movement may skip versions (the server coalesced older
    /// movements); a delta-only event must be the next version.
    fn update(
        &mut self,
        handle: Handle,
        low: u8,
        mv: Option<Movement>,
        delta: Option<&[u8]>,
    ) -> Option<Vec3> {
        let s = self.live(handle)?;
        let shown = s.version;
        let version = match step_from(shown, low) {
            Ok(v) => v,
            Err(got) => {
                self.violate(Some(handle), Rule::Stale { shown, got });
                return None;
            }
        };
        if mv.is_none() && version != shown + 1 {
            self.violate(
                Some(handle),
                Rule::VersionGap {
                    expected: shown + 1,
                    got: version,
                },
            );
            return None;
        }
        s.version = version;
        let mut pos = None;
        let mut r = Ok(());
        if let Some(mv) = mv {
            s.q = mv.resolve(s.q);
            let p = dequantise(s.q);
            pos = Some(p);
            r = apply_movement(&mut s.replica, p, yaw_of(mv.yaw));
        }
        if let (Ok(()), Some(d)) = (&r, delta) {
            r = s.replica.apply_payload(SyncKind::Props, d);
        }
        if let Err(e) = r {
            self.violate(Some(handle), Rule::BadPayload(e));
        }
        pos
    }

    fn resync(&mut self, handle: Handle, version: u64, snapshot: &[u8]) -> Option<Vec3> {
        let s = self.live(handle)?;
        let shown = s.version;
        if version < shown {
            self.violate(
                Some(handle),
                Rule::Stale {
                    shown,
                    got: version,
                },
            );
            return None;
        }
        s.version = version;
        if let Err(e) = s.replica.apply_payload(SyncKind::Snapshot, snapshot) {
            self.violate(Some(handle), Rule::BadPayload(e));
            return None;
        }
        let pos = s.replica.core().pos;
        s.q = quantise(pos);
        Some(pos)
    }

    fn own_move(&mut self, low: u8, mv: Movement) -> Option<Vec3> {
        let Some(own) = self.own.as_mut() else {
            self.violate(None, Rule::UpdateBeforeEnter);
            return None;
        };
        let shown = own.version;
        let version = match step_from(shown, low) {
            Ok(v) => v,
            Err(got) => {
                self.violate(None, Rule::Stale { shown, got });
                return None;
            }
        };
        if version != shown + 1 {
            let expected = own.version + 1;
            self.violate(
                None,
                Rule::VersionGap {
                    expected,
                    got: version,
                },
            );
            return None;
        }
        own.version = version;
        own.q = mv.resolve(own.q);
        let p = dequantise(own.q);
        let r = apply_movement(&mut own.replica, p, yaw_of(mv.yaw));
        if let Err(e) = r {
            self.violate(None, Rule::BadPayload(e));
        }
        Some(p)
    }

    fn own_event(&mut self, version: u64, kind: SyncKind, payload: &[u8]) {
        if kind == SyncKind::Snapshot {
            let ty = match super::codec::snapshot_header(payload) {
                Ok((ty, ..)) => ty,
                Err(e) => return self.violate(None, Rule::BadPayload(e)),
            };
            let mut replica = match self.replica(self.owner, ty.0, Audience::OwnClient) {
                Ok(r) => r,
                Err(rule) => return self.violate(None, rule),
            };
            if let Err(e) = replica.apply_payload(kind, payload) {
                return self.violate(None, Rule::BadPayload(e));
            }
            if let Some(shown) = self
                .own
                .as_ref()
                .map(|o| o.version)
                .filter(|&v| version < v)
            {
                // A snapshot resets the stream, never backwards (a stream
                // that went back after a migration is a lost update).
                return self.violate(
                    None,
                    Rule::Stale {
                        shown,
                        got: version,
                    },
                );
            }
            let q = quantise(replica.core().pos);
            self.own = Some(Shown {
                entity: self.owner,
                version,
                replica,
                q,
            });
            return;
        }
        let Some(own) = self.own.as_mut() else {
            return self.violate(None, Rule::UpdateBeforeEnter);
        };
        if version != own.version + 1 {
            let expected = own.version + 1;
            return self.violate(
                None,
                Rule::VersionGap {
                    expected,
                    got: version,
                },
            );
        }
        own.version = version;
        let r = own.replica.apply_payload(kind, payload);
        own.q = quantise(own.replica.core().pos);
        if let Err(e) = r {
            self.violate(None, Rule::BadPayload(e));
        }
    }
}

/// Sets a replica's position and heading through its movement payload.
fn apply_movement(replica: &mut Entity, pos: Vec3, yaw: f32) -> Result<(), DecodeError> {
    let mut buf = [0u8; MOVEMENT_BYTES];
    buf[0..8].copy_from_slice(&pos.x.to_le_bytes());
    buf[8..16].copy_from_slice(&pos.y.to_le_bytes());
    buf[16..24].copy_from_slice(&pos.z.to_le_bytes());
    buf[24..28].copy_from_slice(&yaw.to_le_bytes());
    replica.apply_payload(SyncKind::Movement, &buf)
}
