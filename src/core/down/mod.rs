//! The kind of a downstream body (real -> proxy -> gateway): its first
//! byte, explicit and typed.
//!
//! Every body a real sends its client ([`Cell::send_to_client`]) starts
//! with a [`DownKind`] byte; the rest is that kind's payload. The cell
//! writes [`DownKind::View`] before each view batch (the `core::view`
//! codec's bytes, passed on to the client unchanged whatever they start
//! with); the game logic (`crate::game::relay`) owns the other kinds'
//! payloads. The gateway matches the kind as an enum, so neither it nor the
//! relay knows the view codec's tag values.
//!
//! A body travels as a [`DownBody`], an owned buffer (one reader: no
//! `Arc`), made in a bounded [`DownPool`]'s recycled buffers with room in
//! front for the client frame's header (`body.rs`).
//!
//! A real's input acknowledgement rides its client's next view batch
//! ([`DownKind::ViewAcked`]: the batch, then the acknowledged seq), so a
//! moving client costs one downstream message a tick, not two
//! ([`DownBody::carry_ack`] at the cell, [`DownBody::take_ack`] at the
//! gateway).
//!
//! Owns only the kind byte, the body's buffer and the pool, and the
//! acknowledgement's place in a `ViewAcked` body. Must not know any other
//! payload's layout.
//!
//! [`Cell::send_to_client`]: crate::core::cell::Cell::send_to_client

mod body;

pub use body::{DownBody, DownPool, DownPoolCounters, FRAME_ROOM, TAIL_ROOM};

/// What a downstream body holds (its first byte).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum DownKind {
    /// A `core::view` batch (the gateway writes it as a ViewBatch frame).
    View = 0xF5,
    /// The real's replies of one tick (acks, call results).
    Reply = 0xF0,
    /// A Hit's combat seq.
    HitStarted = 0xF1,
    /// A Hit's result under its combat seq.
    HitDone = 0xF2,
    /// The real moved to another space.
    Space = 0xF3,
    /// The observer restarted (takeover).
    Resynced = 0xF4,
    /// A view batch carrying an input acknowledgement: the batch, then the
    /// highest client seq processed at the real (`u64`, little-endian, the
    /// last [`ACK_BYTES`] bytes). The real's acknowledgement rides its
    /// client's next view batch instead of a body of its own
    /// ([`DownBody::carry_ack`]); the batch may be empty when there was
    /// only the acknowledgement to send.
    ViewAcked = 0xF6,
}

/// Bytes of the acknowledgement at the end of a [`DownKind::ViewAcked`]
/// body.
pub const ACK_BYTES: usize = 8;

/// The batch and the acknowledgement of a [`DownKind::ViewAcked`] payload;
/// `None` if it is too short to hold one.
pub fn split_ack(payload: &[u8]) -> Option<(&[u8], u64)> {
    let at = payload.len().checked_sub(ACK_BYTES)?;
    let (batch, ack) = payload.split_at(at);
    Some((batch, u64::from_le_bytes(ack.try_into().ok()?)))
}

/// Why a downstream body has no kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DownKindError {
    /// The body is empty.
    #[error("empty downstream body")]
    Empty,
    /// The first byte names no kind.
    #[error("unknown downstream kind {0:#04x}")]
    Unknown(u8),
}

impl DownKind {
    /// Every kind.
    pub const ALL: [DownKind; 7] = [
        DownKind::View,
        DownKind::ViewAcked,
        DownKind::Reply,
        DownKind::HitStarted,
        DownKind::HitDone,
        DownKind::Space,
        DownKind::Resynced,
    ];

    /// The kind's byte.
    pub const fn byte(self) -> u8 {
        self as u8
    }

    /// The kind a byte names.
    ///
    /// # Errors
    /// [`DownKindError::Unknown`] if it names none.
    pub const fn from_byte(b: u8) -> Result<DownKind, DownKindError> {
        Ok(match b {
            0xF5 => DownKind::View,
            0xF0 => DownKind::Reply,
            0xF1 => DownKind::HitStarted,
            0xF2 => DownKind::HitDone,
            0xF3 => DownKind::Space,
            0xF4 => DownKind::Resynced,
            0xF6 => DownKind::ViewAcked,
            _ => return Err(DownKindError::Unknown(b)),
        })
    }
}

/// A downstream body's kind and the payload after it.
///
/// # Errors
/// [`DownKindError`] if the body is empty or its first byte names no kind.
pub fn split(body: &[u8]) -> Result<(DownKind, &[u8]), DownKindError> {
    let (&first, rest) = body.split_first().ok_or(DownKindError::Empty)?;
    Ok((DownKind::from_byte(first)?, rest))
}

/// `kind`'s byte followed by `payload`, as a body of its own: one
/// allocation, no room (the cell makes its view batches in a
/// [`DownPool`] instead).
pub fn with_kind(kind: DownKind, payload: &[u8]) -> DownBody {
    DownBody::with_kind(kind, payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_round_trips_through_its_byte() {
        for k in DownKind::ALL {
            assert_eq!(DownKind::from_byte(k.byte()), Ok(k));
            assert_eq!(split(&with_kind(k, b"xy")), Ok((k, &b"xy"[..])));
        }
        let known = (0..=u8::MAX)
            .filter(|&b| DownKind::from_byte(b).is_ok())
            .count();
        assert_eq!(known, DownKind::ALL.len(), "one byte per kind");
    }

    #[test]
    fn an_unknown_or_missing_kind_is_a_typed_error() {
        for b in (0..=u8::MAX).filter(|&b| !DownKind::ALL.iter().any(|k| k.byte() == b)) {
            assert_eq!(DownKind::from_byte(b), Err(DownKindError::Unknown(b)));
            assert_eq!(split(&[b, 1, 2]), Err(DownKindError::Unknown(b)));
        }
        assert_eq!(split(&[]), Err(DownKindError::Empty));
    }

    #[test]
    fn a_view_payload_passes_through_whatever_it_starts_with() {
        for b in 0..=u8::MAX {
            let payload = [b, 0x80, 0];
            let body = with_kind(DownKind::View, &payload);
            assert_eq!(body.len(), 1 + payload.len());
            assert_eq!(split(&body), Ok((DownKind::View, &payload[..])));
        }
        assert_eq!(
            split(&with_kind(DownKind::View, &[])),
            Ok((DownKind::View, &[][..]))
        );
    }
}
