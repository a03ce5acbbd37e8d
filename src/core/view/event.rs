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

/// A movement on the wire, in the units of [`super::codec`]: positions in
/// whole centimetres ([`super::codec::POSITION_RESOLUTION_M`]), the heading
/// in 256ths of a turn.
///
/// `absolute`: `d` is the position itself (a key frame); otherwise `d` is
/// the change from the last position this client was given for the same
/// entity (its enter or resync snapshot's, quantised, or the last movement
/// applied). Integer arithmetic on both sides: no drift over any chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Movement {
    /// A key frame (`d` is the position), else a delta.
    pub absolute: bool,
    /// x, y, z in centimetres (position or change).
    pub d: [i64; 3],
    /// Heading, 256ths of a turn (0 = +x, counter-clockwise).
    pub yaw: u8,
}

impl Movement {
    /// The quantised position after this movement, from `last`.
    pub fn resolve(&self, last: [i64; 3]) -> [i64; 3] {
        if self.absolute {
            self.d
        } else {
            [
                last[0].wrapping_add(self.d[0]),
                last[1].wrapping_add(self.d[1]),
                last[2].wrapping_add(self.d[2]),
            ]
        }
    }
}

/// One view event; byte slices borrow from the batch (decode) or from the
/// producer (encode).
///
/// Updates carry the low byte of the entity's new version
/// (`version_low`), read in serial-number arithmetic against the version the
/// client shows ([`step_from`]): 1 to 127 ahead is the new version, 0 or
/// 128 to 255 ahead is an update older than (or equal to) what is shown. A
/// step over 1 skips only movement-only versions (coalesced: the newest
/// position replaces older ones); property deltas are never skipped (a
/// [`ClientEvent::Props`] has step 1, a coalesced movement before a delta is
/// merged into one [`ClientEvent::MoveProps`]). A lost property event, or a
/// server that skipped one, is thus a step over 1 on a Props: caught.
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
    /// Movement only: the newest position.
    Move {
        /// The handle.
        handle: Handle,
        /// The new version's low byte (over one step: only movement-only
        /// versions were skipped).
        version_low: u8,
        /// The new position and heading.
        mv: Movement,
    },
    /// Property delta only (may be an empty delta when the change was
    /// invisible to other clients: the version still counts).
    Props {
        /// The handle.
        handle: Handle,
        /// The new version's low byte (one step from a correct server).
        version_low: u8,
        /// An `OtherClients` property delta.
        delta: &'a [u8],
    },
    /// Movement and property delta of one version (or a coalesced movement
    /// merged with the delta that followed it).
    MoveProps {
        /// The handle.
        handle: Handle,
        /// The new version's low byte.
        version_low: u8,
        /// The new position and heading.
        mv: Movement,
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
    /// `kind` for audience `OwnClient` (a snapshot resets the stream), at an
    /// absolute version.
    Own {
        /// The version (consecutive after the last own snapshot).
        version: u64,
        /// Payload layout.
        kind: SyncKind,
        /// The payload.
        payload: &'a [u8],
    },
    /// The own entity moved (a movement-only version, never coalesced),
    /// position relative to the last own position.
    OwnMove {
        /// The new version's low byte (one step from a correct server).
        version_low: u8,
        /// The new position and heading.
        mv: Movement,
    },
    /// A level-of-detail catch-up: the entity came within reach of
    /// properties whose changes this client was not sent; `delta` sets them
    /// to their value at the version the client shows (no new version:
    /// `version_low` must be the shown version's low byte).
    Detail {
        /// The handle.
        handle: Handle,
        /// The shown version's low byte.
        version_low: u8,
        /// An `OtherClients` property delta of whole values.
        delta: &'a [u8],
    },
    /// The client's downstream budget cannot carry its view: entities are
    /// updated less often than their band's minimum (nearest first) until a
    /// `Degraded { on: false }` (enters, leaves, own updates, property
    /// changes and acknowledgements are still never dropped).
    Degraded {
        /// True from now on degraded, false recovered.
        on: bool,
    },
}

impl ClientEvent<'_> {
    /// The handle the event is about (`None` for the own stream and
    /// [`ClientEvent::Degraded`]).
    pub fn handle(&self) -> Option<Handle> {
        match *self {
            ClientEvent::Enter { handle, .. }
            | ClientEvent::Leave { handle }
            | ClientEvent::Move { handle, .. }
            | ClientEvent::Props { handle, .. }
            | ClientEvent::MoveProps { handle, .. }
            | ClientEvent::Detail { handle, .. }
            | ClientEvent::Resync { handle, .. } => Some(handle),
            ClientEvent::Own { .. }
            | ClientEvent::OwnMove { .. }
            | ClientEvent::Degraded { .. } => None,
        }
    }

    /// The absolute version the event carries (enters, resyncs and the own
    /// stream's absolute events).
    pub fn version(&self) -> Option<u64> {
        match *self {
            ClientEvent::Enter { version, .. }
            | ClientEvent::Resync { version, .. }
            | ClientEvent::Own { version, .. } => Some(version),
            _ => None,
        }
    }

    /// The version low byte of an update or a catch-up (`None` for
    /// absolute events).
    pub fn version_low(&self) -> Option<u8> {
        match *self {
            ClientEvent::Move { version_low, .. }
            | ClientEvent::Props { version_low, .. }
            | ClientEvent::MoveProps { version_low, .. }
            | ClientEvent::Detail { version_low, .. }
            | ClientEvent::OwnMove { version_low, .. } => Some(version_low),
            _ => None,
        }
    }
}

/// The version an update with low byte `low` brings to a stream that shows
/// `shown`: `Ok` for 1 to [`STEP_MAX`] versions ahead, `Err(version)` for an
/// update older than or equal to `shown` (its low byte 0 or 128 to 255
/// ahead: the version it stands for).
pub fn step_from(shown: u64, low: u8) -> Result<u64, u64> {
    let d = low.wrapping_sub(shown as u8);
    if d == 0 || u64::from(d) > STEP_MAX {
        Err(shown.saturating_sub(u64::from(d.wrapping_neg())))
    } else {
        Ok(shown + u64::from(d))
    }
}

/// Most versions one update may advance (the observer sends a coalesced
/// movement well before it would reach this).
pub const STEP_MAX: u64 = 127;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_bytes_read_as_serial_numbers() {
        assert_eq!(step_from(10, 11), Ok(11));
        assert_eq!(step_from(250, 5), Ok(261), "wraps the byte");
        assert_eq!(step_from(10, 10 + 127), Ok(137));
        assert_eq!(step_from(10, 10), Err(10), "equal is stale");
        assert_eq!(step_from(10, 9), Err(9), "one back");
        assert_eq!(step_from(300, 300u64.wrapping_add(128) as u8), Err(172));
        assert_eq!(step_from(3, 250), Err(0), "older than the stream's start");
    }
}
