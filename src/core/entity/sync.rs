//! Versioned sync messages and the real-side emitter that builds them.
//!
//! Owns [`SyncKind`], [`SyncMsg`] (what a real sends to every ghost: one per
//! change set per tick, versions consecutive from 1) and [`SyncEmitter`]
//! (the version counter plus reused scratch buffers). Ordering on the ghost
//! side is `reorder`, the carried history is `cache`, per-observer delivery
//! is `tracker`.
//!
//! # Fan-out
//!
//! One change set is encoded once per audience, never once per recipient:
//!
//! 1. [`SyncEmitter::flush`] builds the ghost payload, the other-clients
//!    payload and the own-client payload from the dirty state, with one
//!    version for all three.
//! 2. The [`SyncMsg`] carries the ghost and other-clients payloads in one
//!    buffer (one allocation per change set); the cell serialises it once and
//!    sends the same bytes to every haunt, and hands
//!    [`SyncMsg::others_payload`] to the observers in its own cell.
//! 3. Each ghost applies [`SyncMsg::ghost_payload`] in version order and
//!    forwards the same `others_payload` slice to the observers in its cell.
//! 4. The own-client payload ([`ChangeSet::own`]) goes only to the owner's
//!    client, with the same version.
//!
//! Every version reaches every audience, even when its payload for that
//! audience is empty (a ghost-only change): observers need the version to
//! stay consecutive, the client layer may skip sending empty payloads.

use super::codec::Reader;
use super::flags::Audience;
use super::state::Entity;
use crate::core::geom::Vec3;
use crate::core::ids::EntityId;
use crate::core::time::Time;

/// Bytes of a movement block (`state`'s `Movement` layout).
pub const MOVEMENT_BYTES: usize = 28;

/// What a message's payloads contain (see `state` for the layouts).
#[derive(Clone, Copy, PartialEq, Eq, Debug, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug, PartialEq, Eq))]
pub enum SyncKind {
    /// Position and yaw only.
    Movement,
    /// Property delta only.
    Props,
    /// Movement block then property delta.
    MovementAndProps,
    /// Full state at `version`; receivers reset their expected version to
    /// `version + 1`. Not part of the consecutive stream (takes no version).
    Snapshot,
}

impl SyncKind {
    /// True if the payload starts with a movement block.
    pub const fn has_movement(self) -> bool {
        matches!(self, SyncKind::Movement | SyncKind::MovementAndProps)
    }
    /// True if the payload holds a property delta.
    pub const fn has_props(self) -> bool {
        matches!(self, SyncKind::Props | SyncKind::MovementAndProps)
    }
}

/// One change set of one entity, as sent from its real to its ghosts.
#[derive(Clone, PartialEq, Debug, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct SyncMsg {
    /// The entity.
    pub entity: EntityId,
    /// Consecutive from 1 for change sets; a snapshot carries the version it
    /// reflects (every change set up to and including it).
    pub version: u64,
    /// Payload contents.
    pub kind: SyncKind,
    /// When the real built it (drives cache expiry).
    pub timestamp: Time,
    /// Ghost payload then other-clients payload.
    payload: Vec<u8>,
    /// Where the other-clients payload starts.
    others_at: u32,
}

impl SyncMsg {
    /// A message from its two payloads (one allocation).
    ///
    /// # Panics
    /// If the ghost payload is 4 GiB or more.
    pub fn new(
        entity: EntityId,
        version: u64,
        kind: SyncKind,
        timestamp: Time,
        ghost: &[u8],
        others: &[u8],
    ) -> Self {
        let payload = Vec::with_capacity(ghost.len() + others.len());
        SyncMsg::new_in(payload, entity, version, kind, timestamp, ghost, others)
    }

    /// As [`SyncMsg::new`], its payload written in `payload` (cleared
    /// first; it grows only if it is too small).
    ///
    /// # Panics
    /// If the ghost payload is 4 GiB or more.
    pub fn new_in(
        mut payload: Vec<u8>,
        entity: EntityId,
        version: u64,
        kind: SyncKind,
        timestamp: Time,
        ghost: &[u8],
        others: &[u8],
    ) -> Self {
        payload.clear();
        payload.reserve_exact(ghost.len() + others.len());
        payload.extend_from_slice(ghost);
        payload.extend_from_slice(others);
        SyncMsg {
            entity,
            version,
            kind,
            timestamp,
            payload,
            others_at: u32::try_from(ghost.len()).expect("payload under 4 GiB"),
        }
    }

    /// The payload buffer (to build another message in, [`SyncMsg::new_in`]).
    pub fn into_payload(self) -> Vec<u8> {
        self.payload
    }

    /// What ghosts apply.
    pub fn ghost_payload(&self) -> &[u8] {
        &self.payload[..self.others_at as usize]
    }

    /// What observers' clients receive (empty for snapshots: a ghost builds
    /// client snapshots from its own replica).
    pub fn others_payload(&self) -> &[u8] {
        &self.payload[self.others_at as usize..]
    }

    /// Total payload bytes (for cache accounting).
    pub fn payload_len(&self) -> usize {
        self.payload.len()
    }

    /// The position and yaw of a message that is, for other clients, only a
    /// movement (a `Movement`, or a `MovementAndProps` whose other-clients
    /// delta is empty): what an observer may coalesce in place.
    pub fn others_bare_movement(&self) -> Option<(Vec3, f32)> {
        let p = self.others_payload();
        let bare = match self.kind {
            SyncKind::Movement => p.len() == MOVEMENT_BYTES,
            SyncKind::MovementAndProps => p.get(MOVEMENT_BYTES..) == Some(&[0u8][..]),
            _ => false,
        };
        if !bare {
            return None;
        }
        let mut r = Reader::new(p);
        let pos = Vec3 {
            x: r.f64().ok()?,
            y: r.f64().ok()?,
            z: r.f64().ok()?,
        };
        Some((pos, r.f32().ok()?))
    }

    /// Checks the split offset (for messages decoded from the wire).
    pub fn is_well_formed(&self) -> bool {
        self.others_at as usize <= self.payload.len()
    }
}

/// A flushed change set: the message for ghosts and other clients, and the
/// own client's payload (borrowed from the emitter's scratch buffer).
#[derive(Debug)]
pub struct ChangeSet<'a> {
    /// The message (move it into the cache after sending).
    pub msg: SyncMsg,
    /// The own client's payload, same version and kind as `msg`.
    pub own: &'a [u8],
}

/// The real-side version counter and scratch buffers.
///
/// Travels with the real on migration as its version ([`SyncEmitter::version`],
/// [`SyncEmitter::resume`]); the buffers are scratch and are not carried.
#[derive(Clone, Debug, Default)]
pub struct SyncEmitter {
    version: u64,
    ghost: Vec<u8>,
    others: Vec<u8>,
    own: Vec<u8>,
    /// A payload buffer for the next message (handed back by the cache,
    /// [`SyncEmitter::spare`]); empty: a new one is allocated.
    spare: Vec<u8>,
}

impl SyncEmitter {
    /// A new real: no change sets yet (version 0).
    pub fn new() -> Self {
        SyncEmitter::default()
    }

    /// A real arriving by migration whose last change set was `version`.
    pub fn resume(version: u64) -> Self {
        SyncEmitter {
            version,
            ..SyncEmitter::default()
        }
    }

    /// The version of the last change set (0 before the first).
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Builds this tick's change set, or `None` if nothing changed. Clears the
    /// entity's dirty state.
    pub fn flush(&mut self, now: Time, entity: &mut Entity) -> Option<ChangeSet<'_>> {
        let kind = entity.pending_kind()?;
        self.ghost.clear();
        self.others.clear();
        self.own.clear();
        entity.encode_change(kind, Audience::Ghost, &mut self.ghost);
        entity.encode_change(kind, Audience::OtherClients, &mut self.others);
        entity.encode_change(kind, Audience::OwnClient, &mut self.own);
        entity.clear_dirty();
        self.version += 1;
        let spare = std::mem::take(&mut self.spare);
        let msg = SyncMsg::new_in(
            spare,
            entity.core().id,
            self.version,
            kind,
            now,
            &self.ghost,
            &self.others,
        );
        Some(ChangeSet {
            msg,
            own: &self.own,
        })
    }

    /// Where the cache leaves a spent payload buffer for the next message
    /// ([`SyncCache::push_keep`](super::SyncCache::push_keep)).
    pub fn spare(&mut self) -> &mut Vec<u8> {
        &mut self.spare
    }

    /// A ghost snapshot at the current version (ghost creation or resync).
    /// Flush first so the snapshot and the stream agree.
    ///
    /// # Panics
    /// If the entity has unflushed changes (they would be in the snapshot but
    /// also sent again later under a newer version) or is not a real.
    pub fn ghost_snapshot(&mut self, now: Time, entity: &Entity) -> SyncMsg {
        assert!(entity.pending_kind().is_none(), "flush before a snapshot");
        self.ghost.clear();
        entity.encode_snapshot(Audience::Ghost, &mut self.ghost);
        SyncMsg::new(
            entity.core().id,
            self.version,
            SyncKind::Snapshot,
            now,
            &self.ghost,
            &[],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::entity::schema::{TypeRegistry, AVATAR};
    use crate::core::entity::value::Value;
    use crate::core::geom::Vec3;

    #[test]
    fn one_version_per_change_set_and_kinds_follow_the_changes() {
        let reg = TypeRegistry::with_builtins();
        let ty = reg.get(AVATAR).expect("avatar").clone();
        let mut real = Entity::new_real(EntityId(1), ty.clone(), Vec3::default(), 0.0);
        let mut em = SyncEmitter::new();
        assert!(em.flush(Time::ZERO, &mut real).is_none());
        real.set_movement(
            Vec3 {
                x: 1.0,
                y: 0.0,
                z: 2.0,
            },
            0.5,
        );
        let cs = em.flush(Time::from_millis(1), &mut real).expect("moved");
        assert_eq!((cs.msg.version, cs.msg.kind), (1, SyncKind::Movement));
        assert_eq!(cs.msg.ghost_payload().len(), 28);
        assert_eq!(cs.own.len(), 28);
        let inv = ty.prop_index("inventory").expect("inventory");
        let private = ty.prop_index("last_input_seq").expect("private");
        real.props_mut().set(private, Value::UInt(3)).expect("set");
        real.props_mut()
            .set(inv, Value::Map(Default::default()))
            .expect("set");
        let cs = em.flush(Time::from_millis(2), &mut real).expect("changed");
        assert_eq!((cs.msg.version, cs.msg.kind), (2, SyncKind::Props));
        assert_eq!(
            cs.msg.ghost_payload(),
            &[0],
            "nothing for ghosts, version still counts"
        );
        assert_eq!(cs.msg.others_payload(), &[0]);
        assert_eq!(cs.own[0], 1, "the inventory goes to the owner only");
        assert!(cs.msg.is_well_formed());
        let snap = em.ghost_snapshot(Time::from_millis(3), &real);
        assert_eq!((snap.version, snap.kind), (2, SyncKind::Snapshot));
        let mut ghost = Entity::new_replica(EntityId(1), ty, Audience::Ghost);
        ghost
            .apply_payload(snap.kind, snap.ghost_payload())
            .expect("snapshot");
        assert_eq!(ghost.core().pos, real.core().pos);
        let resumed = SyncEmitter::resume(em.version());
        assert_eq!(resumed.version(), 2);
    }

    #[test]
    fn a_change_to_real_only_properties_alone_makes_no_change_set() {
        let reg = TypeRegistry::with_builtins();
        let ty = reg.get(AVATAR).expect("avatar").clone();
        let mut real = Entity::new_real(EntityId(1), ty.clone(), Vec3::default(), 0.0);
        let mut em = SyncEmitter::new();
        let private = ty.prop_index("last_input_seq").expect("private");
        assert_eq!(ty.remote_mask() >> private & 1, 0, "real only");
        // What the game does for every client input: the last seq applied.
        real.props_mut().set(private, Value::UInt(1)).expect("set");
        assert!(real.props().is_dirty(), "the real's own store changed");
        assert!(em.flush(Time::ZERO, &mut real).is_none(), "nothing leaves");
        assert_eq!(em.version(), 0, "no version for it");
        // With a movement, a bare movement (not movement and props).
        real.props_mut().set(private, Value::UInt(2)).expect("set");
        real.set_movement(
            Vec3 {
                x: 1.0,
                y: 0.0,
                z: 2.0,
            },
            0.5,
        );
        let cs = em.flush(Time::from_millis(1), &mut real).expect("moved");
        assert_eq!((cs.msg.version, cs.msg.kind), (1, SyncKind::Movement));
        assert_eq!((cs.msg.ghost_payload().len(), cs.own.len()), (28, 28));
        assert!(!real.props().is_dirty(), "the flush forgot it");
        // The value is the real's all the same: it travels in its snapshot.
        assert_eq!(real.props().get(private), Some(&Value::UInt(2)));
        // A visible change with it is one change set, as before.
        let name = ty.prop_index("level").expect("level");
        real.props_mut().set(private, Value::UInt(3)).expect("set");
        real.props_mut().set(name, Value::UInt(7)).expect("set");
        let cs = em.flush(Time::from_millis(2), &mut real).expect("changed");
        assert_eq!((cs.msg.version, cs.msg.kind), (2, SyncKind::Props));
        assert!(cs.msg.is_well_formed());
    }

    #[test]
    fn snapshot_of_another_type_is_rejected() {
        let reg = TypeRegistry::with_builtins();
        let avatar = reg.get(AVATAR).expect("avatar").clone();
        let npc = reg
            .get(crate::core::entity::schema::NPC)
            .expect("npc")
            .clone();
        let real = Entity::new_real(EntityId(1), npc, Vec3::default(), 0.0);
        let mut buf = Vec::new();
        real.encode_snapshot(Audience::Ghost, &mut buf);
        let mut ghost = Entity::new_replica(EntityId(1), avatar, Audience::Ghost);
        assert!(matches!(
            ghost.apply_payload(SyncKind::Snapshot, &buf),
            Err(crate::core::entity::DecodeError::WrongEntityType { .. })
        ));
    }
}
