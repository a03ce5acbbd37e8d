//! The bytes the gateway (at the proxy) and the game logic (at the real)
//! exchange through the cell protocol: client inputs upstream, client data
//! downstream, and effects deferred past a migration.
//!
//! Owns these three small formats (all little-endian). Downstream values
//! are typed, not client frames: the gateway alone encodes client frames,
//! once (a view batch is the view codec's bytes, written after a frame
//! header without a copy of its own). Knows the client protocol only for
//! [`CallOutcome`]. Must not touch cells, sessions or sockets.
//!
//! # Upstream: an input (`Input::data`, stamped by the proxy)
//! `u8 kind, u64 client_seq`, then per kind:
//! - 1 Move: `f64 x, f64 y, f64 z, f32 yaw` (37 bytes in all)
//! - 2 Hit: `u32 target handle, i64 damage` (21 bytes)
//! - 3 SetProp: `u16 prop`, then the value bytes (rest)
//! - 4 Space (made by the gateway from shard 0's placement, client seq 0):
//!   `u32 space, u32 type, u32 cell, f64 x, f64 z` (37 bytes): move to
//!   `cell` of another space at `(x, z)` ([`Cell::transfer`](crate::core::cell::Cell::transfer))
//! - 5 Resync (made by the gateway when a login takes the avatar over,
//!   client seq 0; 9 bytes): restart the real's observer (a full view
//!   follows) and answer [`DOWN_RESYNCED`] before its first batch
//! - 6 Teleport (made by the simulator's bots; no client message asks for
//!   it today): `f64 x, f64 z` (25 bytes): jump there, possibly to
//!   another cell ([`Cell::teleport`](crate::core::cell::Cell::teleport))
//!
//! The client's own seq travels inside, so acks and call results name it
//! whatever the proxy's numbering.
//!
//! # Downstream (`ProxyMsg::Downstream::data`)
//! The first byte is a [`DownKind`] (`core::down`: explicit, so nothing
//! here knows the view codec's tag values); [`decode_down`] matches it and
//! an unknown one is a typed error ([`DownError`]):
//! - [`DownKind::View`]: a `core::view` batch as the cell built it (any
//!   first byte); the gateway writes the bytes after the kind as a
//!   ViewBatch frame (header + these bytes).
//! - [`DOWN_REPLY`]: the real's replies of one tick ([`Reply`]): `u64
//!   ack` (the highest client seq processed, 0 for none), then call results,
//!   each `u64 client_seq` and an outcome (12 bytes: `u8 status` (0
//!   Applied, 1 HitLanded, 2 HitExpired, 3 Refused), `u8 flags` (bit 0:
//!   killed), `u16 reason` (a `RefuseReason` code), `i64 value` (damage
//!   dealt)).
//! - [`DOWN_HIT_STARTED`]: `u64 client_seq, u64 combat_seq`: a Hit was
//!   accepted and its result will name the combat seq.
//! - [`DOWN_HIT_DONE`]: `u64 combat_seq` and an outcome: the Hit's result;
//!   the gateway answers it under the Hit's client seq.
//! - [`DOWN_SPACE`]: `u32 space, u32 type, f64 x, f64 z, f64 from_x, f64
//!   from_z`: the real left its space (sent after the old space's last
//!   batch); the gateway writes SpaceChanged and takes Moves again.
//! - [`DOWN_RESYNCED`]: nothing more: the observer restarted; the view
//!   batches before it were for the connection that was replaced.
//!
//! # Deferred effects (`Call::data` of a `CallKind::Game` call)
//! An input applied in the tick its real was offloaded is re-sent to the
//! real as a game call ([`DEFER_INPUT`] + the input), and client data the
//! real could not send any more as [`DEFER_DOWN`] + the downstream bytes.
//! A game call whose first byte is neither is not the game's (the
//! simulator's script calls start with 0).

use std::sync::Arc;

use crate::core::down::{self, DownKind, DownKindError};
use crate::core::geom::Vec3;
use crate::core::payload::{Payload, INLINE_MAX};
use crate::wire::client::{CallOutcome, RefuseReason};

/// Downstream: the real's replies of one tick (results, ack).
pub const DOWN_REPLY: u8 = DownKind::Reply.byte();
/// Downstream: a Hit's combat seq.
pub const DOWN_HIT_STARTED: u8 = DownKind::HitStarted.byte();
/// Downstream: a Hit's result under its combat seq.
pub const DOWN_HIT_DONE: u8 = DownKind::HitDone.byte();
/// Downstream: the real moved to another space.
pub const DOWN_SPACE: u8 = DownKind::Space.byte();
/// Downstream: the observer restarted (takeover).
pub const DOWN_RESYNCED: u8 = DownKind::Resynced.byte();
/// Game call: an input to apply at the real.
pub const DEFER_INPUT: u8 = 0xD1;
/// Game call: downstream bytes to send from the real.
pub const DEFER_DOWN: u8 = 0xD2;

const KIND_MOVE: u8 = 1;
const KIND_HIT: u8 = 2;
const KIND_SET_PROP: u8 = 3;
const KIND_SPACE: u8 = 4;
const KIND_RESYNC: u8 = 5;
const KIND_TELEPORT: u8 = 6;

/// A client input as the real applies it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum GameInput<'a> {
    /// Walk to `pos` facing `yaw`.
    Move {
        /// Client seq.
        seq: u64,
        /// New position.
        pos: Vec3,
        /// New heading.
        yaw: f32,
    },
    /// Hit the entity the client shows under `target`.
    Hit {
        /// Client seq.
        seq: u64,
        /// View handle.
        target: u32,
        /// Damage asked.
        damage: i64,
    },
    /// Set own property `prop` to `value` (entity value encoding).
    SetProp {
        /// Client seq.
        seq: u64,
        /// Property index.
        prop: u16,
        /// Encoded value.
        value: &'a [u8],
    },
    /// Move to `cell` of space `space` at `pos` (made by the gateway).
    Space {
        /// 0 (not a client input).
        seq: u64,
        /// The space.
        space: u32,
        /// Its type.
        type_id: u32,
        /// The destination cell.
        cell: u32,
        /// Where (ground x, z).
        pos: Vec3,
    },
    /// Restart the observer: a new connection took the avatar over (made
    /// by the gateway).
    Resync {
        /// 0 (not a client input).
        seq: u64,
    },
    /// Jump to `pos` (ground x, z), possibly into another cell.
    Teleport {
        /// Client seq.
        seq: u64,
        /// Where.
        pos: Vec3,
    },
}

impl GameInput<'_> {
    /// The client seq.
    pub fn seq(&self) -> u64 {
        match *self {
            GameInput::Move { seq, .. }
            | GameInput::Hit { seq, .. }
            | GameInput::SetProp { seq, .. }
            | GameInput::Space { seq, .. }
            | GameInput::Resync { seq }
            | GameInput::Teleport { seq, .. } => seq,
        }
    }

    /// Appends the encoding to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match *self {
            GameInput::Move { seq, pos, yaw } => {
                out.push(KIND_MOVE);
                out.extend_from_slice(&seq.to_le_bytes());
                for v in [pos.x, pos.y, pos.z] {
                    out.extend_from_slice(&v.to_le_bytes());
                }
                out.extend_from_slice(&yaw.to_le_bytes());
            }
            GameInput::Hit {
                seq,
                target,
                damage,
            } => {
                out.push(KIND_HIT);
                out.extend_from_slice(&seq.to_le_bytes());
                out.extend_from_slice(&target.to_le_bytes());
                out.extend_from_slice(&damage.to_le_bytes());
            }
            GameInput::SetProp { seq, prop, value } => {
                out.push(KIND_SET_PROP);
                out.extend_from_slice(&seq.to_le_bytes());
                out.extend_from_slice(&prop.to_le_bytes());
                out.extend_from_slice(value);
            }
            GameInput::Space {
                seq,
                space,
                type_id,
                cell,
                pos,
            } => {
                out.push(KIND_SPACE);
                out.extend_from_slice(&seq.to_le_bytes());
                for v in [space, type_id, cell] {
                    out.extend_from_slice(&v.to_le_bytes());
                }
                out.extend_from_slice(&pos.x.to_le_bytes());
                out.extend_from_slice(&pos.z.to_le_bytes());
            }
            GameInput::Resync { seq } => {
                out.push(KIND_RESYNC);
                out.extend_from_slice(&seq.to_le_bytes());
            }
            GameInput::Teleport { seq, pos } => {
                out.push(KIND_TELEPORT);
                out.extend_from_slice(&seq.to_le_bytes());
                out.extend_from_slice(&pos.x.to_le_bytes());
                out.extend_from_slice(&pos.z.to_le_bytes());
            }
        }
    }

    /// The encoding as a payload (see [`GameInput::to_payload_in`]).
    pub fn to_payload(&self) -> Payload {
        self.to_payload_in(&mut Vec::with_capacity(INLINE_MAX))
    }

    /// The encoding as a payload, encoded in `scratch` first (cleared; kept
    /// for the next input): no allocation for an input that fits inline
    /// (every kind but a property set with a long value).
    pub fn to_payload_in(&self, scratch: &mut Vec<u8>) -> Payload {
        scratch.clear();
        self.encode(scratch);
        Payload::new(scratch)
    }
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

fn f64_at(b: &[u8], at: usize) -> Option<f64> {
    u64_at(b, at).map(f64::from_bits)
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// Decodes an input; `None` if the bytes are not one.
pub fn decode_input(b: &[u8]) -> Option<GameInput<'_>> {
    let seq = u64_at(b, 1)?;
    match *b.first()? {
        KIND_MOVE if b.len() == 37 => {
            let yaw = f32::from_le_bytes(b[33..37].try_into().ok()?);
            let pos = Vec3 {
                x: f64_at(b, 9)?,
                y: f64_at(b, 17)?,
                z: f64_at(b, 25)?,
            };
            Some(GameInput::Move { seq, pos, yaw })
        }
        KIND_HIT if b.len() == 21 => Some(GameInput::Hit {
            seq,
            target: u32::from_le_bytes(b[9..13].try_into().ok()?),
            damage: i64::from_le_bytes(b[13..21].try_into().ok()?),
        }),
        KIND_SET_PROP if b.len() >= 11 => Some(GameInput::SetProp {
            seq,
            prop: u16::from_le_bytes(b[9..11].try_into().ok()?),
            value: &b[11..],
        }),
        KIND_SPACE if b.len() == 37 => Some(GameInput::Space {
            seq,
            space: u32_at(b, 9)?,
            type_id: u32_at(b, 13)?,
            cell: u32_at(b, 17)?,
            pos: Vec3::ground(f64_at(b, 21)?, f64_at(b, 29)?),
        }),
        KIND_RESYNC if b.len() == 9 => Some(GameInput::Resync { seq }),
        KIND_TELEPORT if b.len() == 25 => Some(GameInput::Teleport {
            seq,
            pos: Vec3::ground(f64_at(b, 9)?, f64_at(b, 17)?),
        }),
        _ => None,
    }
}

/// What a downstream payload holds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Down<'a> {
    /// A view batch: the view codec's bytes after the kind byte (write
    /// them as a ViewBatch frame).
    ViewBatch(&'a [u8]),
    /// A view batch (possibly empty: then there is no ViewBatch frame to
    /// write) and the real's input acknowledgement riding it
    /// (`DownKind::ViewAcked`): every client seq up to `ack` was processed.
    ViewAcked {
        /// The view codec's bytes.
        batch: &'a [u8],
        /// The highest client seq processed at the real.
        ack: u64,
    },
    /// The real's replies of one tick.
    Reply(Reply<'a>),
    /// A Hit's combat seq.
    HitStarted {
        /// Client seq of the Hit.
        client_seq: u64,
        /// Combat seq its result will carry.
        combat_seq: u64,
    },
    /// A Hit's result under its combat seq.
    HitDone {
        /// The combat seq ([`Down::HitStarted`] named it).
        combat_seq: u64,
        /// How the hit ended.
        outcome: CallOutcome,
    },
    /// The real moved to another space.
    Space {
        /// The space.
        space: u32,
        /// Its type.
        type_id: u32,
        /// Where, there.
        pos: Vec3,
        /// Where it was in the old space.
        from: Vec3,
    },
    /// The observer restarted: batches from here on are a full view.
    Resynced,
}

/// Why a downstream body was not understood.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DownError {
    /// No kind: empty, or an unknown kind byte.
    #[error(transparent)]
    Kind(#[from] DownKindError),
    /// The kind's payload is cut, too long or out of range.
    #[error("malformed {0:?} downstream body")]
    Malformed(DownKind),
}

/// Classifies a downstream body by its [`DownKind`] byte.
///
/// # Errors
/// [`DownError`] if it has no known kind or its payload is malformed.
pub fn decode_down(b: &[u8]) -> Result<Down<'_>, DownError> {
    let (kind, payload) = down::split(b)?;
    decode_kind(kind, b, payload).ok_or(DownError::Malformed(kind))
}

/// The body `b` (kind byte first; `payload` after it) of kind `kind`.
fn decode_kind<'a>(kind: DownKind, b: &'a [u8], payload: &'a [u8]) -> Option<Down<'a>> {
    match kind {
        DownKind::View => Some(Down::ViewBatch(payload)),
        DownKind::ViewAcked => {
            down::split_ack(payload).map(|(batch, ack)| Down::ViewAcked { batch, ack })
        }
        DownKind::Reply => Reply::decode(b).map(Down::Reply),
        DownKind::HitStarted if b.len() == 17 => Some(Down::HitStarted {
            client_seq: u64_at(b, 1)?,
            combat_seq: u64_at(b, 9)?,
        }),
        DownKind::HitDone if b.len() == 9 + OUTCOME_BYTES => Some(Down::HitDone {
            combat_seq: u64_at(b, 1)?,
            outcome: decode_outcome(&b[9..])?,
        }),
        DownKind::Resynced if b.len() == 1 => Some(Down::Resynced),
        DownKind::Space if b.len() == 41 => Some(Down::Space {
            space: u32_at(b, 1)?,
            type_id: u32_at(b, 5)?,
            pos: Vec3::ground(f64_at(b, 9)?, f64_at(b, 17)?),
            from: Vec3::ground(f64_at(b, 25)?, f64_at(b, 33)?),
        }),
        DownKind::HitStarted | DownKind::HitDone | DownKind::Resynced | DownKind::Space => None,
    }
}

/// Bytes of an encoded [`CallOutcome`].
const OUTCOME_BYTES: usize = 12;
/// Bytes of one call result in a reply: client seq and outcome.
const RESULT_BYTES: usize = 8 + OUTCOME_BYTES;

/// The real's replies of one tick, read in place ([`DOWN_REPLY`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Reply<'a> {
    ack: u64,
    results: &'a [u8],
}

impl<'a> Reply<'a> {
    /// A whole reply payload (tag first); `None` if it is not one (every
    /// result is checked, so [`Reply::results`] yields them all).
    fn decode(b: &'a [u8]) -> Option<Reply<'a>> {
        let ack = u64_at(b, 1)?;
        let results = b.get(9..)?;
        let whole = results.len() % RESULT_BYTES == 0;
        let valid =
            || (results.chunks_exact(RESULT_BYTES)).all(|r| decode_outcome(&r[8..]).is_some());
        (whole && valid()).then_some(Reply { ack, results })
    }

    /// The highest client seq the real processed, if it acknowledged any.
    pub fn ack(&self) -> Option<u64> {
        (self.ack > 0).then_some(self.ack)
    }

    /// The call results, in order: client seq and outcome.
    pub fn results(&self) -> impl Iterator<Item = (u64, CallOutcome)> + 'a {
        (self.results.chunks_exact(RESULT_BYTES)).filter_map(|r| {
            let seq = u64_at(r, 0)?;
            Some((seq, decode_outcome(&r[8..])?))
        })
    }
}

/// Starts a [`DOWN_REPLY`] payload in `out` (cleared): no ack, no result.
pub fn reply_start(out: &mut Vec<u8>) {
    out.clear();
    out.push(DOWN_REPLY);
    out.extend_from_slice(&0u64.to_le_bytes());
}

/// Appends a call result to a reply begun with [`reply_start`].
pub fn reply_push_result(out: &mut Vec<u8>, seq: u64, outcome: CallOutcome) {
    out.extend_from_slice(&seq.to_le_bytes());
    encode_outcome(out, outcome);
}

/// Sets the ack of a reply begun with [`reply_start`].
///
/// # Panics
/// If `out` is shorter than a reply's head (not begun).
pub fn reply_set_ack(out: &mut [u8], ack: u64) {
    out[1..9].copy_from_slice(&ack.to_le_bytes());
}

/// Whether a reply begun with [`reply_start`] says nothing yet.
pub fn reply_is_empty(out: &[u8]) -> bool {
    out.len() <= 9 && u64_at(out, 1).unwrap_or(0) == 0
}

/// A reply that only acknowledges client seq `ack`.
pub fn reply_ack(ack: u64) -> Vec<u8> {
    let mut b = Vec::with_capacity(9);
    reply_start(&mut b);
    reply_set_ack(&mut b, ack);
    b
}

fn encode_outcome(out: &mut Vec<u8>, outcome: CallOutcome) {
    let (status, flags, reason, value) = match outcome {
        CallOutcome::Applied => (0u8, 0u8, 0u16, 0i64),
        CallOutcome::HitLanded { dealt, killed } => (1, u8::from(killed), 0, dealt),
        CallOutcome::HitExpired => (2, 0, 0, 0),
        CallOutcome::Refused(r) => (3, 0, r.code(), 0),
    };
    out.push(status);
    out.push(flags);
    out.extend_from_slice(&reason.to_le_bytes());
    out.extend_from_slice(&value.to_le_bytes());
}

fn decode_outcome(b: &[u8]) -> Option<CallOutcome> {
    let b: &[u8; OUTCOME_BYTES] = b.try_into().ok()?;
    let reason = u16::from_le_bytes([b[2], b[3]]);
    let value = i64::from_le_bytes(b[4..12].try_into().ok()?);
    match b[0] {
        0 => Some(CallOutcome::Applied),
        1 => Some(CallOutcome::HitLanded {
            dealt: value,
            killed: b[1] & 1 != 0,
        }),
        2 => Some(CallOutcome::HitExpired),
        3 => RefuseReason::from_code(reason).map(CallOutcome::Refused),
        _ => None,
    }
}

/// A [`DOWN_HIT_STARTED`] payload.
pub fn hit_started(client_seq: u64, combat_seq: u64) -> Vec<u8> {
    let mut b = vec![0u8; 17];
    b[0] = DOWN_HIT_STARTED;
    b[1..9].copy_from_slice(&client_seq.to_le_bytes());
    b[9..17].copy_from_slice(&combat_seq.to_le_bytes());
    b
}

/// A [`DOWN_HIT_DONE`] payload.
pub fn hit_done(combat_seq: u64, outcome: CallOutcome) -> Vec<u8> {
    let mut b = Vec::with_capacity(9 + OUTCOME_BYTES);
    b.push(DOWN_HIT_DONE);
    b.extend_from_slice(&combat_seq.to_le_bytes());
    encode_outcome(&mut b, outcome);
    b
}

/// A [`DOWN_SPACE`] payload.
pub fn space_down(space: u32, type_id: u32, pos: Vec3, from: Vec3) -> Vec<u8> {
    let mut b = Vec::with_capacity(41);
    b.push(DOWN_SPACE);
    b.extend_from_slice(&space.to_le_bytes());
    b.extend_from_slice(&type_id.to_le_bytes());
    for v in [pos.x, pos.z, from.x, from.z] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b
}

/// `tag` followed by `body`, as a shared buffer.
pub fn tagged(tag: u8, body: &[u8]) -> Arc<[u8]> {
    let mut b = Vec::with_capacity(1 + body.len());
    b.push(tag);
    b.extend_from_slice(body);
    Arc::from(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::client::RefuseReason;

    #[test]
    fn inputs_round_trip() {
        let inputs = [
            GameInput::Move {
                seq: 3,
                pos: Vec3 {
                    x: 1.5,
                    y: 0.0,
                    z: -2.0,
                },
                yaw: 0.25,
            },
            GameInput::Hit {
                seq: 4,
                target: 9,
                damage: 10,
            },
            GameInput::SetProp {
                seq: 5,
                prop: 8,
                value: b"\x02hi",
            },
            GameInput::Space {
                seq: 0,
                space: 100,
                type_id: 2,
                cell: 1 << 24,
                pos: Vec3::ground(5.0, -6.0),
            },
            GameInput::Resync { seq: 0 },
            GameInput::Teleport {
                seq: 6,
                pos: Vec3::ground(-7.5, 8.25),
            },
        ];
        for i in inputs {
            let b = i.to_payload();
            assert_eq!(decode_input(&b), Some(i));
            if !matches!(i, GameInput::SetProp { .. }) {
                assert_eq!(decode_input(&b[..b.len() - 1]), None, "fixed size");
            }
        }
        assert_eq!(decode_input(&[9; 20]), None);
        assert_eq!(decode_input(&[3; 10]), None, "SetProp without its prop");
    }

    #[test]
    fn the_resync_notice_is_told_apart() {
        assert_eq!(decode_down(&[DOWN_RESYNCED]), Ok(Down::Resynced));
        assert_eq!(
            decode_down(&[DOWN_RESYNCED, 0]),
            Err(DownError::Malformed(DownKind::Resynced)),
            "fixed size"
        );
    }

    #[test]
    fn downstream_kinds_are_told_apart() {
        let view = down::with_kind(DownKind::View, &[2, 0]);
        assert_eq!(decode_down(&view), Ok(Down::ViewBatch(&[2, 0])));
        assert_eq!(
            decode_down(&hit_started(7, 1)),
            Ok(Down::HitStarted {
                client_seq: 7,
                combat_seq: 1
            })
        );
        let dead = CallOutcome::Refused(RefuseReason::Dead);
        assert_eq!(
            decode_down(&hit_done(1, dead)),
            Ok(Down::HitDone {
                combat_seq: 1,
                outcome: dead
            })
        );
        assert!(decode_down(&hit_done(1, dead)[..20]).is_err(), "fixed size");
        assert!(decode_down(&tagged(DOWN_REPLY, b"ab")).is_err(), "no ack");
        let landed = CallOutcome::HitLanded {
            dealt: -3,
            killed: true,
        };
        let mut reply = Vec::new();
        reply_start(&mut reply);
        assert!(reply_is_empty(&reply));
        reply_push_result(&mut reply, 3, CallOutcome::Applied);
        reply_push_result(&mut reply, 4, landed);
        reply_push_result(&mut reply, 5, dead);
        reply_push_result(&mut reply, 6, CallOutcome::HitExpired);
        assert!(!reply_is_empty(&reply));
        let Ok(Down::Reply(r)) = decode_down(&reply) else {
            panic!("not a reply");
        };
        assert_eq!(r.ack(), None);
        let results: Vec<_> = r.results().collect();
        let outcomes = [CallOutcome::Applied, landed, dead, CallOutcome::HitExpired];
        assert_eq!(results, (3..7).zip(outcomes).collect::<Vec<_>>());
        reply_set_ack(&mut reply, 9);
        let Ok(Down::Reply(r)) = decode_down(&reply) else {
            panic!("not a reply");
        };
        assert_eq!((r.ack(), r.results().count()), (Some(9), 4));
        assert!(decode_down(&reply[..reply.len() - 1]).is_err(), "cut");
        reply[9 + 8] = 7; // a status no outcome has
        assert_eq!(
            decode_down(&reply),
            Err(DownError::Malformed(DownKind::Reply)),
            "bad outcome"
        );
        let only_ack = reply_ack(5);
        let Ok(Down::Reply(r)) = decode_down(&only_ack) else {
            panic!("not a reply");
        };
        assert_eq!((r.ack(), r.results().count()), (Some(5), 0));
        let (p, f) = (Vec3::ground(1.0, 2.0), Vec3::ground(3.0, 4.0));
        assert_eq!(
            decode_down(&space_down(100, 2, p, f)),
            Ok(Down::Space {
                space: 100,
                type_id: 2,
                pos: p,
                from: f
            })
        );
        assert_eq!(
            decode_down(&[0xC2]),
            Err(DownError::Kind(DownKindError::Unknown(0xC2)))
        );
        assert_eq!(decode_down(&[]), Err(DownError::Kind(DownKindError::Empty)));
    }

    #[test]
    fn an_unknown_kind_byte_is_a_typed_error() {
        for b in (0..=u8::MAX).filter(|&b| DownKind::from_byte(b).is_err()) {
            // Old view batches started with an event tag (1..=0x7f): no
            // more a kind of their own.
            assert_eq!(
                decode_down(&[b, 0, 0]),
                Err(DownError::Kind(DownKindError::Unknown(b)))
            );
        }
    }

    #[test]
    fn a_view_body_passes_through_whatever_its_first_byte() {
        for b in 0..=u8::MAX {
            let batch = [b, 0x53, 0xff, 0];
            let body = down::with_kind(DownKind::View, &batch);
            assert_eq!(decode_down(&body), Ok(Down::ViewBatch(&batch[..])));
            // Even one that looks like a reply or a notice.
            let one = down::with_kind(DownKind::View, &batch[..1]);
            assert_eq!(decode_down(&one), Ok(Down::ViewBatch(&batch[..1])));
        }
    }
}
