//! One entity's state: core fields, properties and the payloads built from them.
//!
//! Owns [`EntityCore`] (id, type, position, yaw), [`Entity`] (core plus a
//! [`PropertyStore`] plus the movement dirty bit) and the payload layout per
//! [`SyncKind`]. Versions, ordering and caching live in `sync`; this module
//! only turns state into bytes for one audience and bytes back into state.
//!
//! # Payload layout (per audience)
//!
//! - `Movement`: `f64 x, f64 y, f64 z, f32 yaw` (little-endian), 28 bytes.
//! - `Props`: a property delta (see `store`).
//! - `MovementAndProps`: the movement block then the property delta.
//! - `Snapshot`: `varint type id`, the movement block, a property snapshot.

use super::codec::{put_f32, put_f64, put_uvar, DecodeError, Reader};
use super::flags::Audience;
use super::schema::{EntityType, EntityTypeId};
use super::store::PropertyStore;
use super::sync::SyncKind;
use crate::core::geom::Vec3;
use crate::core::ids::EntityId;
use std::sync::Arc;

/// The fields every entity has, whatever its type.
#[derive(Clone, Copy, Debug, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct EntityCore {
    /// World-unique id.
    pub id: EntityId,
    /// Its type in the registry.
    pub type_id: EntityTypeId,
    /// Position (x, z on the ground plane, y height).
    pub pos: Vec3,
    /// Heading in radians.
    pub yaw: f32,
}

/// An entity: a real (source of truth) or a replica (ghost, client view).
#[derive(Clone, Debug)]
pub struct Entity {
    core: EntityCore,
    props: PropertyStore,
    moved: bool,
}

impl Entity {
    /// A real with default properties.
    pub fn new_real(id: EntityId, ty: Arc<EntityType>, pos: Vec3, yaw: f32) -> Self {
        let core = EntityCore {
            id,
            type_id: ty.id(),
            pos,
            yaw,
        };
        Entity {
            core,
            props: PropertyStore::new(ty),
            moved: false,
        }
    }

    /// A replica for `holds`, at the origin with defaults until a snapshot
    /// arrives. With `Audience::Real` this makes a real that a migration
    /// snapshot can then fill.
    pub fn new_replica(id: EntityId, ty: Arc<EntityType>, holds: Audience) -> Self {
        let mut e = Entity::new_real(id, ty.clone(), Vec3::default(), 0.0);
        e.props = PropertyStore::replica(ty, holds);
        e
    }

    /// The core fields.
    pub fn core(&self) -> &EntityCore {
        &self.core
    }

    /// The properties.
    pub fn props(&self) -> &PropertyStore {
        &self.props
    }

    /// The properties, for changes on a real.
    pub fn props_mut(&mut self) -> &mut PropertyStore {
        &mut self.props
    }

    /// Moves the entity (marks movement dirty if anything changed).
    pub fn set_movement(&mut self, pos: Vec3, yaw: f32) {
        if pos != self.core.pos || yaw.to_bits() != self.core.yaw.to_bits() {
            self.core.pos = pos;
            self.core.yaw = yaw;
            self.moved = true;
        }
    }

    /// The kind of change set pending, or `None` if nothing changed that
    /// leaves the real (a change to real-only properties alone is none: no
    /// version, no message, no client event for it; they travel with the
    /// real's own snapshot when it migrates).
    pub fn pending_kind(&self) -> Option<SyncKind> {
        match (self.moved, self.props.is_dirty_remote()) {
            (false, false) => None,
            (true, false) => Some(SyncKind::Movement),
            (false, true) => Some(SyncKind::Props),
            (true, true) => Some(SyncKind::MovementAndProps),
        }
    }

    /// Appends the pending change set (of `kind`, from
    /// [`Entity::pending_kind`]) as `aud` sees it.
    pub fn encode_change(&self, kind: SyncKind, aud: Audience, out: &mut Vec<u8>) {
        debug_assert_ne!(kind, SyncKind::Snapshot);
        if kind.has_movement() {
            self.encode_movement(out);
        }
        if kind.has_props() {
            self.props.encode_delta(aud, out);
        }
    }

    /// Forgets pending changes after every audience's payload was built.
    pub fn clear_dirty(&mut self) {
        self.moved = false;
        self.props.clear_dirty();
    }

    fn encode_movement(&self, out: &mut Vec<u8>) {
        put_f64(out, self.core.pos.x);
        put_f64(out, self.core.pos.y);
        put_f64(out, self.core.pos.z);
        put_f32(out, self.core.yaw);
    }

    /// Appends a full snapshot as `aud` sees it.
    ///
    /// # Panics
    /// If this entity cannot serve `aud` (see [`Audience::can_be_served_by`]).
    pub fn encode_snapshot(&self, aud: Audience, out: &mut Vec<u8>) {
        self.encode_snapshot_except(aud, 0, out);
    }

    /// As [`Entity::encode_snapshot`], the properties in `omit` at their
    /// defaults (see [`PropertyStore::encode_snapshot_except`]).
    ///
    /// # Panics
    /// If this entity cannot serve `aud`.
    pub fn encode_snapshot_except(&self, aud: Audience, omit: u64, out: &mut Vec<u8>) {
        put_uvar(out, u64::from(self.core.type_id.0));
        self.encode_movement(out);
        self.props.encode_snapshot_except(aud, omit, out);
    }

    /// Applies a payload of `kind` encoded for this replica's audience.
    ///
    /// # Errors
    /// Any [`DecodeError`]. A snapshot is all-or-nothing; after a failed
    /// delta the replica must be resynced.
    pub fn apply_payload(&mut self, kind: SyncKind, bytes: &[u8]) -> Result<(), DecodeError> {
        let mut r = Reader::new(bytes);
        if kind == SyncKind::Snapshot {
            let got = r.uvar()?;
            let want = u64::from(self.core.type_id.0);
            if got != want {
                return Err(DecodeError::WrongEntityType { got, want });
            }
            let (pos, yaw) = decode_movement(&mut r)?;
            self.props.apply_snapshot(&mut r)?;
            r.finish()?;
            self.core.pos = pos;
            self.core.yaw = yaw;
            return Ok(());
        }
        if kind.has_movement() {
            let (pos, yaw) = decode_movement(&mut r)?;
            self.core.pos = pos;
            self.core.yaw = yaw;
        }
        if kind.has_props() {
            self.props.apply_delta(&mut r)?;
        }
        r.finish()
    }
}

fn decode_movement(r: &mut Reader<'_>) -> Result<(Vec3, f32), DecodeError> {
    let pos = Vec3 {
        x: r.f64()?,
        y: r.f64()?,
        z: r.f64()?,
    };
    Ok((pos, r.f32()?))
}
