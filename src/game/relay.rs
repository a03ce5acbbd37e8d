//! The bytes the gateway (at the proxy) and the game logic (at the real)
//! exchange through the cell protocol: client inputs upstream, client data
//! downstream, and effects deferred past a migration.
//!
//! Owns these three small formats (all little-endian); knows the client
//! protocol only to pre-encode its frames (and to find the InputAck in
//! them, [`frames_ack`]). Must not touch cells, sessions or sockets.
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
//! The first byte tells what it is:
//! - `0x01..=0x7f` (a view event's tag byte: bit 7 clear): a `core::view`
//!   batch as the cell built it;
//!   the gateway writes it as a ViewBatch frame (header + these bytes).
//! - [`DOWN_FRAMES`]: the rest is whole server frames (InputAck,
//!   CallResult) encoded once at the real.
//! - [`DOWN_HIT_STARTED`]: `u64 client_seq, u64 combat_seq`: a Hit was
//!   accepted and its result will name the combat seq.
//! - [`DOWN_HIT_DONE`]: one CallResult frame whose seq is the combat seq;
//!   the gateway puts the client seq in its place.
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

use crate::core::geom::Vec3;
use crate::wire::client::{split_frame, CallOutcome, ServerMsg};

/// Downstream: whole server frames.
pub const DOWN_FRAMES: u8 = 0xF0;
/// Downstream: a Hit's combat seq.
pub const DOWN_HIT_STARTED: u8 = 0xF1;
/// Downstream: a Hit's result under its combat seq.
pub const DOWN_HIT_DONE: u8 = 0xF2;
/// Downstream: the real moved to another space.
pub const DOWN_SPACE: u8 = 0xF3;
/// Downstream: the observer restarted (takeover).
pub const DOWN_RESYNCED: u8 = 0xF4;
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

    /// The encoding as a shared buffer (one allocation).
    pub fn to_arc(&self) -> Arc<[u8]> {
        let mut v = Vec::with_capacity(40);
        self.encode(&mut v);
        Arc::from(v)
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
    /// A view batch (write as a ViewBatch frame).
    ViewBatch(&'a [u8]),
    /// Whole server frames.
    Frames(&'a [u8]),
    /// A Hit's combat seq.
    HitStarted {
        /// Client seq of the Hit.
        client_seq: u64,
        /// Combat seq its result will carry.
        combat_seq: u64,
    },
    /// A CallResult frame under a combat seq.
    HitDone(&'a [u8]),
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

/// Classifies a downstream payload; `None` for an empty or unknown one.
pub fn decode_down(b: &[u8]) -> Option<Down<'_>> {
    match *b.first()? {
        1..=0x7f => Some(Down::ViewBatch(b)),
        DOWN_FRAMES => Some(Down::Frames(&b[1..])),
        DOWN_HIT_STARTED if b.len() == 17 => Some(Down::HitStarted {
            client_seq: u64_at(b, 1)?,
            combat_seq: u64_at(b, 9)?,
        }),
        DOWN_HIT_DONE => Some(Down::HitDone(&b[1..])),
        DOWN_RESYNCED if b.len() == 1 => Some(Down::Resynced),
        DOWN_SPACE if b.len() == 41 => Some(Down::Space {
            space: u32_at(b, 1)?,
            type_id: u32_at(b, 5)?,
            pos: Vec3::ground(f64_at(b, 9)?, f64_at(b, 17)?),
            from: Vec3::ground(f64_at(b, 25)?, f64_at(b, 33)?),
        }),
        _ => None,
    }
}

/// The InputAck among whole server frames (a [`Down::Frames`] body), if
/// there is one; `None` too if the frames do not split.
pub fn frames_ack(mut frames: &[u8]) -> Option<u64> {
    let mut ack = None;
    while let Ok(Some((f, n))) = split_frame(frames, u32::MAX) {
        if let Ok(ServerMsg::InputAck { last_seq }) = ServerMsg::decode(&f) {
            ack = Some(last_seq);
        }
        frames = &frames[n..];
    }
    ack
}

/// Appends a CallResult frame to `out`.
pub fn push_call_result(out: &mut Vec<u8>, seq: u64, outcome: CallOutcome) {
    ServerMsg::CallResult { seq, outcome }.encode(out);
}

/// A [`DOWN_HIT_STARTED`] payload.
pub fn hit_started(client_seq: u64, combat_seq: u64) -> Arc<[u8]> {
    let mut b = [0u8; 17];
    b[0] = DOWN_HIT_STARTED;
    b[1..9].copy_from_slice(&client_seq.to_le_bytes());
    b[9..17].copy_from_slice(&combat_seq.to_le_bytes());
    Arc::from(&b[..])
}

/// A [`DOWN_HIT_DONE`] payload.
pub fn hit_done(combat_seq: u64, outcome: CallOutcome) -> Arc<[u8]> {
    let mut b = Vec::with_capacity(1 + 32);
    b.push(DOWN_HIT_DONE);
    push_call_result(&mut b, combat_seq, outcome);
    Arc::from(b)
}

/// A [`DOWN_SPACE`] payload.
pub fn space_down(space: u32, type_id: u32, pos: Vec3, from: Vec3) -> Arc<[u8]> {
    let mut b = Vec::with_capacity(41);
    b.push(DOWN_SPACE);
    b.extend_from_slice(&space.to_le_bytes());
    b.extend_from_slice(&type_id.to_le_bytes());
    for v in [pos.x, pos.z, from.x, from.z] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    Arc::from(b)
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
            let b = i.to_arc();
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
        assert_eq!(decode_down(&[DOWN_RESYNCED]), Some(Down::Resynced));
        assert_eq!(decode_down(&[DOWN_RESYNCED, 0]), None, "fixed size");
    }

    #[test]
    fn downstream_kinds_are_told_apart() {
        assert_eq!(decode_down(&[2, 0]), Some(Down::ViewBatch(&[2, 0])));
        assert_eq!(
            decode_down(&hit_started(7, 1)),
            Some(Down::HitStarted {
                client_seq: 7,
                combat_seq: 1
            })
        );
        let done = hit_done(1, CallOutcome::Refused(RefuseReason::Dead));
        let Some(Down::HitDone(frame)) = decode_down(&done) else {
            panic!("not a hit result");
        };
        assert_eq!(frame.len(), 32);
        assert_eq!(
            decode_down(&tagged(DOWN_FRAMES, b"ab")),
            Some(Down::Frames(b"ab"))
        );
        let mut frames = Vec::new();
        push_call_result(&mut frames, 3, CallOutcome::Applied);
        assert_eq!(frames_ack(&frames), None);
        ServerMsg::InputAck { last_seq: 9 }.encode(&mut frames);
        assert_eq!(frames_ack(&frames), Some(9));
        let (p, f) = (Vec3::ground(1.0, 2.0), Vec3::ground(3.0, 4.0));
        assert_eq!(
            decode_down(&space_down(100, 2, p, f)),
            Some(Down::Space {
                space: 100,
                type_id: 2,
                pos: p,
                from: f
            })
        );
        assert_eq!(decode_down(&[0xC2]), None);
        assert_eq!(
            decode_down(&[0x53, 0]),
            Some(Down::ViewBatch(&[0x53, 0])),
            "a view event's tag byte with flags"
        );
        assert_eq!(decode_down(&[]), None);
    }
}
