//! The server-to-client view events one observer produces per tick.
//!
//! Owns [`ClientEvent`] (borrowed form, what the encoder takes and the
//! decoder yields) and [`Handle`]. The byte layout is in `codec`; who
//! produces the events and in which order is `observer`; who checks them is
//! `client`. Nothing here knows about cells, AOI or trackers.
//!
//! # Model
//!
//! The client knows the entities it sees by a small per-observer *handle*
//! (a `u32`, reused after a leave). For each handle the client has a state at
//! some *version* of the entity's sync stream: an [`ClientEvent::Enter`] or
//! [`ClientEvent::Resync`] sets it from a snapshot; every update
//! ([`ClientEvent::Move`], [`ClientEvent::Props`], [`ClientEvent::MoveProps`])
//! carries the next version exactly; [`ClientEvent::Leave`] ends the handle.
//! The observer's own entity is not in that map: its `OWN_CLIENT` view is
//! the separate [`ClientEvent::Own`] stream (same version numbering as the
//! entity's sync stream).

use crate::core::entity::{EntityTypeId, SyncKind};
use crate::core::geom::Vec3;
use crate::core::ids::EntityId;

/// A per-observer client id for an entity in view.
pub type Handle = u32;

/// One view event; byte slices borrow from the batch (decode) or from the
/// producer (encode).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ClientEvent<'a> {
    /// The entity entered the view: create it from `snapshot` (its
    /// `OtherClients` snapshot at `version`, as [`crate::core::entity::Entity::encode_snapshot`]
    /// writes it). `type_id`, `pos` and `yaw` are read from the snapshot's
    /// header, they are not repeated on the wire.
    Enter {
        /// The client id from now on.
        handle: Handle,
        /// The entity.
        entity: EntityId,
        /// Its type (snapshot header).
        type_id: EntityTypeId,
        /// Its position (snapshot header).
        pos: Vec3,
        /// Its heading (snapshot header).
        yaw: f32,
        /// The version the snapshot reflects.
        version: u64,
        /// The whole snapshot, header included.
        snapshot: &'a [u8],
    },
    /// The entity left the view; the handle is free.
    Leave {
        /// The handle.
        handle: Handle,
    },
    /// Movement only (version `version`).
    Move {
        /// The handle.
        handle: Handle,
        /// Exactly the shown version + 1.
        version: u64,
        /// New position.
        pos: Vec3,
        /// New heading.
        yaw: f32,
    },
    /// Property delta only (version `version`; may be an empty delta when
    /// the change was invisible to other clients: the version still counts).
    Props {
        /// The handle.
        handle: Handle,
        /// Exactly the shown version + 1.
        version: u64,
        /// An `OtherClients` property delta.
        delta: &'a [u8],
    },
    /// Movement and property delta of one version.
    MoveProps {
        /// The handle.
        handle: Handle,
        /// Exactly the shown version + 1.
        version: u64,
        /// New position.
        pos: Vec3,
        /// New heading.
        yaw: f32,
        /// An `OtherClients` property delta.
        delta: &'a [u8],
    },
    /// Replace the entity's state with `snapshot` at `version` (a gap the
    /// observer could not fill from a cache).
    Resync {
        /// The handle.
        handle: Handle,
        /// The version the snapshot reflects.
        version: u64,
        /// An `OtherClients` snapshot, header included.
        snapshot: &'a [u8],
    },
    /// The observer's own entity as its own client sees it: a payload of
    /// `kind` for audience `OwnClient` (a snapshot resets the stream).
    Own {
        /// The version (consecutive after the last own snapshot).
        version: u64,
        /// Payload layout.
        kind: SyncKind,
        /// The payload.
        payload: &'a [u8],
    },
}

impl ClientEvent<'_> {
    /// The handle the event is about (`None` for [`ClientEvent::Own`]).
    pub fn handle(&self) -> Option<Handle> {
        match *self {
            ClientEvent::Enter { handle, .. }
            | ClientEvent::Leave { handle }
            | ClientEvent::Move { handle, .. }
            | ClientEvent::Props { handle, .. }
            | ClientEvent::MoveProps { handle, .. }
            | ClientEvent::Resync { handle, .. } => Some(handle),
            ClientEvent::Own { .. } => None,
        }
    }

    /// The version the event carries (`None` for a leave).
    pub fn version(&self) -> Option<u64> {
        match *self {
            ClientEvent::Enter { version, .. }
            | ClientEvent::Move { version, .. }
            | ClientEvent::Props { version, .. }
            | ClientEvent::MoveProps { version, .. }
            | ClientEvent::Resync { version, .. }
            | ClientEvent::Own { version, .. } => Some(version),
            ClientEvent::Leave { .. } => None,
        }
    }
}
