//! The byte layout of a client view batch: encoder and untrusted decoder.
//!
//! Owns the wire form of [`ClientEvent`]s. A *batch* is the concatenation
//! of events, with no header (the transport frames it); the decoder
//! ([`BatchReader`]) reads bytes from the network, so every rule the bytes
//! can break is a typed [`DecodeError`], never a panic, and nothing is
//! allocated. It knows nothing of observers or trackers; a movement delta is
//! resolved against the receiver's last position by the client
//! ([`super::ClientView`]), not here.
//!
//! # Layout (varints are LEB128, `ivar` zigzag LEB128, floats little-endian IEEE)
//!
//! The first byte of an event is its *tag byte*: the event type in the low 4
//! bits, flags in bits 4-5, bits 6 and 7 zero.
//!
//! | type | event      | fields after the tag byte                                  |
//! |------|------------|------------------------------------------------------------|
//! | 1    | Enter      | `handle, entity, version, len, snapshot[len]`              |
//! | 2    | Leave      | `handle`                                                   |
//! | 3    | Move       | `handle, u8 version_low, movement`                         |
//! | 4    | Props      | `handle, u8 version_low, len, delta[len]`                  |
//! | 5    | MoveProps  | `handle, u8 version_low, movement, len, delta[len]`        |
//! | 6    | Resync     | `handle, version, len, snapshot[len]`                      |
//! | 7    | Own        | `version, u8 kind (1 props, 2 both, 3 snapshot), len, payload` |
//! | 8    | OwnMove    | `u8 version_low, movement`                                 |
//! | 9    | Degraded   | `u8 on (0 or 1)`                                           |
//! | 10   | Detail     | `handle, u8 version_low, len, delta[len]`                  |
//!
//! Flags: `0x10` ABS: the movement is a key frame (absolute position);
//! `0x20` Y: the movement has a y component (absent: 0). Only Move,
//! MoveProps and OwnMove take them; any other flag is a
//! [`DecodeError::BadTag`]. `version_low` is the new version's low byte
//! ([`super::event::step_from`]).
//!
//! `movement` is `ivar x, [ivar y], ivar z, u8 yaw`: centimetres, absolute
//! (ABS) or the change from the last position the client was given for the
//! same entity; yaw in 256ths of a turn. An own payload of kind 2 keeps the
//! entity's own 28-byte movement block (`f64 x, f64 y, f64 z, f32 yaw`).
//!
//! A snapshot is [`crate::core::entity::Entity::encode_snapshot`]'s output:
//! `varint type id, f64 x, f64 y, f64 z, f32 yaw, properties`; the decoder
//! checks that header and exposes it on [`ClientEvent::Enter`], so type and
//! position are not sent twice. Typical sizes: a move within 63 cm per axis
//! is 6 bytes (tag, handle, version byte, x, z, yaw), a coalesced one 7-9.

pub use crate::core::entity::DecodeError;

use super::event::{ClientEvent, Handle, Movement};
use crate::core::entity::codec::{put_f32, put_f64, put_uvar, zigzag, Reader};
use crate::core::entity::{EntityTypeId, SyncKind};
use crate::core::geom::{round_i64, Vec3};
use crate::core::ids::EntityId;

/// Largest snapshot or delta one event may carry (16 MiB; a batch from a
/// well-behaved server is far smaller, this only bounds a lying length).
pub const EVENT_PAYLOAD_BYTES_MAX: usize = 16 << 20;

/// Bytes of an internal movement block (`x, y, z, yaw`: sync payloads and
/// snapshot headers, not the client wire).
pub use crate::core::entity::MOVEMENT_BYTES;

/// Position resolution on the client wire, metres (1 cm).
pub const POSITION_RESOLUTION_M: f64 = 0.01;

/// Quantised units per metre.
pub(super) const UNITS_PER_M: f64 = 100.0;

/// Heading steps per turn (one byte).
const YAW_STEPS: f64 = 256.0;

const TAG_ENTER: u8 = 1;
const TAG_LEAVE: u8 = 2;
const TAG_MOVE: u8 = 3;
const TAG_PROPS: u8 = 4;
const TAG_MOVE_PROPS: u8 = 5;
const TAG_RESYNC: u8 = 6;
const TAG_OWN: u8 = 7;
const TAG_OWN_MOVE: u8 = 8;
const TAG_DEGRADED: u8 = 9;
const TAG_DETAIL: u8 = 10;

/// Tag flag: a key frame (absolute position).
pub const FLAG_ABS: u8 = 0x10;
/// Tag flag: the movement has a y component.
pub const FLAG_Y: u8 = 0x20;
const TYPE_MASK: u8 = 0x0f;

/// The largest magnitude of a quantised coordinate: every position on the
/// wire is within the 32-bit signed range (about ±21,475 km), so the
/// observers keep their per-entity positions in 32 bits (PROTOCOL.md 6.2).
pub const Q_MAX: i64 = i32::MAX as i64;

/// A position on the wire grid (whole centimetres), each coordinate clamped
/// to `[i32::MIN, i32::MAX]` (PROTOCOL.md 6.2; NaN is 0, as `as` makes it).
pub fn quantise(pos: Vec3) -> [i64; 3] {
    [q_axis(pos.x), q_axis(pos.y), q_axis(pos.z)]
}

/// One coordinate of [`quantise`].
#[inline]
fn q_axis(m: f64) -> i64 {
    round_i64(m * UNITS_PER_M).clamp(-Q_MAX - 1, Q_MAX)
}

/// The position a quantised one stands for.
pub fn dequantise(q: [i64; 3]) -> Vec3 {
    Vec3 {
        x: q[0] as f64 / UNITS_PER_M,
        y: q[1] as f64 / UNITS_PER_M,
        z: q[2] as f64 / UNITS_PER_M,
    }
}

/// A heading (radians) as 256ths of a turn (nearest).
pub fn yaw_byte(yaw: f32) -> u8 {
    let turns = f64::from(yaw) / std::f64::consts::TAU;
    let x = turns * YAW_STEPS;
    if x.abs() < 1e15 {
        // The common case, without libm's round and fmod.
        return round_i64(x).rem_euclid(256) as u8;
    }
    let steps = x.round();
    (steps.rem_euclid(YAW_STEPS) as u32 % 256) as u8
}

/// The heading (radians, in `[-pi, pi)`) a heading byte stands for.
pub fn yaw_of(b: u8) -> f32 {
    let r = f64::from(b as i8) / YAW_STEPS * std::f64::consts::TAU;
    r as f32
}

fn kind_byte(kind: SyncKind) -> u8 {
    match kind {
        SyncKind::Movement => 0,
        SyncKind::Props => 1,
        SyncKind::MovementAndProps => 2,
        SyncKind::Snapshot => 3,
    }
}

fn kind_of(b: u8) -> Result<SyncKind, DecodeError> {
    Ok(match b {
        0 => SyncKind::Movement,
        1 => SyncKind::Props,
        2 => SyncKind::MovementAndProps,
        3 => SyncKind::Snapshot,
        b => return Err(DecodeError::BadTag(b)),
    })
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_uvar(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// Pushes an update's tag byte (with its movement's flags), handle and
/// version byte, then its movement.
fn put_update(out: &mut Vec<u8>, ty: u8, mv: Option<&Movement>, handle: Option<Handle>, low: u8) {
    // Built on the stack and appended once: a flush writes thousands of
    // these, and a push per byte pays a capacity check each.
    let mut buf = StackBuf::default();
    let mut tag = ty;
    if let Some(mv) = mv {
        if mv.absolute {
            tag |= FLAG_ABS;
        }
        if mv.d[1] != 0 {
            tag |= FLAG_Y;
        }
    }
    buf.push(tag);
    if let Some(h) = handle {
        buf.uvar(u64::from(h));
    }
    buf.push(low);
    if let Some(mv) = mv {
        buf.ivar(mv.d[0]);
        if mv.d[1] != 0 {
            buf.ivar(mv.d[1]);
        }
        buf.ivar(mv.d[2]);
        buf.push(mv.yaw);
    }
    // The whole array, then cut back: a copy of a constant size, which the
    // compiler inlines (a slice of the used length calls `memcpy`, as
    // costly here as the encoding itself).
    let at = out.len();
    out.extend_from_slice(&buf.bytes);
    out.truncate(at + buf.len);
}

/// The longest update head [`put_update`] writes: tag, handle (a `u32`
/// varint, 5 bytes), version byte, three zigzag varints (10 bytes each) and
/// the heading byte.
const UPDATE_HEAD_MAX: usize = 1 + 5 + 1 + 3 * 10 + 1;

/// A few bytes built on the stack (see [`put_update`]).
struct StackBuf {
    bytes: [u8; UPDATE_HEAD_MAX],
    len: usize,
}

impl Default for StackBuf {
    fn default() -> Self {
        StackBuf {
            bytes: [0; UPDATE_HEAD_MAX],
            len: 0,
        }
    }
}

impl StackBuf {
    #[inline]
    fn push(&mut self, b: u8) {
        self.bytes[self.len] = b;
        self.len += 1;
    }

    /// As `put_uvar`.
    #[inline]
    fn uvar(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.push(v as u8);
    }

    /// As `put_ivar`.
    #[inline]
    fn ivar(&mut self, v: i64) {
        self.uvar(zigzag(v));
    }
}

/// Appends an internal 28-byte movement block.
pub fn put_movement(out: &mut Vec<u8>, pos: Vec3, yaw: f32) {
    put_f64(out, pos.x);
    put_f64(out, pos.y);
    put_f64(out, pos.z);
    put_f32(out, yaw);
}

/// Appends a `Move` event: what [`encode_event`] writes for
/// `ClientEvent::Move`, without building the event and matching on it (the
/// paced flush writes one per movement sent, the commonest event).
///
/// The common movement (a handle and deltas of at most two varint bytes
/// each: steps under 81.92 m) is written without a loop per byte: each
/// field shifted into place in one `u128`, appended as two 8-byte words
/// and cut back to its length. A flush sends one of
/// these per moving entity in view, so this is the view's hottest encoder.
#[inline]
pub fn encode_move(out: &mut Vec<u8>, handle: Handle, version_low: u8, mv: &Movement) {
    let [zx, zy, zz] = mv.d.map(zigzag);
    if (u64::from(handle) | zx | zy | zz) >= SHORT_VAR_END {
        return put_update(out, TAG_MOVE, Some(mv), Some(handle), version_low);
    }
    let mut tag = TAG_MOVE;
    if mv.absolute {
        tag |= FLAG_ABS;
    }
    if mv.d[1] != 0 {
        tag |= FLAG_Y;
    }
    // Built in two registers, byte `i` at bits `8 i..`, each appended as
    // one 8-byte store and cut back to its length: no loop per byte, no
    // 128-bit shifts (bytes written one by one into a stack array and then
    // copied out as one wide load stall on store forwarding, the flush's
    // hottest line). The first word: tag, handle, version byte, x delta (at
    // most 6 bytes); the second: y and z deltas, heading (at most 5).
    let (mut lo, mut lo_at) = (u64::from(tag), 1);
    put_short(&mut lo, &mut lo_at, u64::from(handle));
    lo |= u64::from(version_low) << (8 * lo_at);
    lo_at += 1;
    put_short(&mut lo, &mut lo_at, zx);
    let (mut hi, mut hi_at) = (0, 0);
    if mv.d[1] != 0 {
        put_short(&mut hi, &mut hi_at, zy);
    }
    put_short(&mut hi, &mut hi_at, zz);
    hi |= u64::from(mv.yaw) << (8 * hi_at);
    hi_at += 1;
    debug_assert!(
        lo_at <= SHORT_LO_MAX && hi_at <= SHORT_HI_MAX && SHORT_LO_MAX.max(SHORT_HI_MAX) <= 8,
        "a short move fits its registers"
    );
    // The two joined (the second word after the first one's `lo_at`
    // bytes: at least 3 of them, tag, handle and version byte, so both
    // shifts stay within a word) and appended as one 16-byte store, cut
    // back to the event's length.
    debug_assert!((3..=SHORT_LO_MAX).contains(&lo_at));
    let w0 = lo | (hi << (8 * lo_at));
    let w1 = hi >> (64 - 8 * lo_at);
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&w0.to_le_bytes());
    bytes[8..].copy_from_slice(&w1.to_le_bytes());
    let start = out.len();
    out.extend_from_slice(&bytes);
    out.truncate(start + lo_at + hi_at);
}

/// Varint values below this take at most two bytes ([`encode_move`]'s
/// short form).
const SHORT_VAR_END: u64 = 1 << 14;

/// The most bytes of a short move's first word (tag, handle, version byte,
/// x delta) and of its second (y and z deltas, heading): each fits the
/// 8-byte word it is built in.
const SHORT_LO_MAX: usize = 1 + 2 + 1 + 2;
const SHORT_HI_MAX: usize = 2 + 2 + 1;

/// Shifts `v` (`< SHORT_VAR_END`) into `acc` at byte `*at` as a varint of
/// one or two bytes and moves `*at` past it. Branch-free.
#[inline(always)]
fn put_short(acc: &mut u64, at: &mut usize, v: u64) {
    debug_assert!(v < SHORT_VAR_END && *at <= SHORT_LO_MAX);
    let two = u64::from(v >= 0x80);
    // The second byte is `v >> 7` with no select: below 0x80 it is 0, so
    // nothing lands in the byte the next field starts at.
    *acc |= ((v & 0x7f) | (two << 7) | ((v >> 7) << 8)) << (8 * *at);
    *at += 1 + two as usize;
}

/// Appends one event to a batch.
pub fn encode_event(out: &mut Vec<u8>, ev: &ClientEvent<'_>) {
    match *ev {
        ClientEvent::Enter {
            handle,
            entity,
            version,
            snapshot,
            ..
        } => {
            debug_assert!(snapshot_header(snapshot).is_ok(), "enter without header");
            out.push(TAG_ENTER);
            put_uvar(out, u64::from(handle));
            put_uvar(out, entity.0);
            put_uvar(out, version);
            put_bytes(out, snapshot);
        }
        ClientEvent::Leave { handle } => {
            out.push(TAG_LEAVE);
            put_uvar(out, u64::from(handle));
        }
        ClientEvent::Move {
            handle,
            version_low,
            mv,
        } => {
            put_update(out, TAG_MOVE, Some(&mv), Some(handle), version_low);
        }
        ClientEvent::Props {
            handle,
            version_low,
            delta,
        } => {
            put_update(out, TAG_PROPS, None, Some(handle), version_low);
            put_bytes(out, delta);
        }
        ClientEvent::MoveProps {
            handle,
            version_low,
            mv,
            delta,
        } => {
            put_update(out, TAG_MOVE_PROPS, Some(&mv), Some(handle), version_low);
            put_bytes(out, delta);
        }
        ClientEvent::Resync {
            handle,
            version,
            snapshot,
        } => {
            out.push(TAG_RESYNC);
            put_uvar(out, u64::from(handle));
            put_uvar(out, version);
            put_bytes(out, snapshot);
        }
        ClientEvent::Own {
            version,
            kind,
            payload,
        } => {
            debug_assert!(kind != SyncKind::Movement, "own movement is OwnMove");
            out.push(TAG_OWN);
            put_uvar(out, version);
            out.push(kind_byte(kind));
            put_bytes(out, payload);
        }
        ClientEvent::OwnMove { version_low, mv } => {
            put_update(out, TAG_OWN_MOVE, Some(&mv), None, version_low);
        }
        ClientEvent::Degraded { on } => {
            out.push(TAG_DEGRADED);
            out.push(u8::from(on));
        }
        ClientEvent::Detail {
            handle,
            version_low,
            delta,
        } => {
            put_update(out, TAG_DETAIL, None, Some(handle), version_low);
            put_bytes(out, delta);
        }
    }
}

/// Reads an internal movement block.
///
/// # Errors
/// [`DecodeError::Truncated`].
pub fn read_movement(r: &mut Reader<'_>) -> Result<(Vec3, f32), DecodeError> {
    let pos = Vec3 {
        x: r.f64()?,
        y: r.f64()?,
        z: r.f64()?,
    };
    Ok((pos, r.f32()?))
}

/// The header of a snapshot: type, position, heading.
///
/// # Errors
/// [`DecodeError::Truncated`], [`DecodeError::VarintOverflow`], or
/// [`DecodeError::TooLong`] for a type id over `u16`.
pub fn snapshot_header(snapshot: &[u8]) -> Result<(EntityTypeId, Vec3, f32), DecodeError> {
    let mut r = Reader::new(snapshot);
    let ty = r.len(usize::from(u16::MAX))?;
    let (pos, yaw) = read_movement(&mut r)?;
    Ok((EntityTypeId(ty as u16), pos, yaw))
}

fn handle(r: &mut Reader<'_>) -> Result<Handle, DecodeError> {
    Ok(r.len(Handle::MAX as usize)? as Handle)
}

fn bytes<'a>(r: &mut Reader<'a>) -> Result<&'a [u8], DecodeError> {
    let n = r.len(EVENT_PAYLOAD_BYTES_MAX)?;
    r.take(n)
}

fn movement(r: &mut Reader<'_>, tag: u8) -> Result<Movement, DecodeError> {
    let x = r.ivar()?;
    let y = if tag & FLAG_Y != 0 { r.ivar()? } else { 0 };
    let z = r.ivar()?;
    Ok(Movement {
        absolute: tag & FLAG_ABS != 0,
        d: [x, y, z],
        yaw: r.u8()?,
    })
}

/// Reads one event.
///
/// # Errors
/// Any [`DecodeError`] the bytes cause (unknown tag or flag, truncation, a
/// bad snapshot header, oversized lengths or handles).
pub fn decode_event<'a>(r: &mut Reader<'a>) -> Result<ClientEvent<'a>, DecodeError> {
    let tag = r.u8()?;
    let ty = tag & TYPE_MASK;
    let flags = tag & !TYPE_MASK;
    let allowed = match ty {
        TAG_MOVE | TAG_MOVE_PROPS | TAG_OWN_MOVE => FLAG_ABS | FLAG_Y,
        _ => 0,
    };
    if flags & !allowed != 0 {
        return Err(DecodeError::BadTag(tag));
    }
    Ok(match ty {
        TAG_ENTER => {
            let handle = handle(r)?;
            let entity = EntityId(r.uvar()?);
            let version = r.uvar()?;
            let snapshot = bytes(r)?;
            let (type_id, pos, yaw) = snapshot_header(snapshot)?;
            ClientEvent::Enter {
                handle,
                entity,
                type_id,
                pos,
                yaw,
                version,
                snapshot,
            }
        }
        TAG_LEAVE => ClientEvent::Leave { handle: handle(r)? },
        TAG_MOVE => {
            let (handle, version_low) = (handle(r)?, r.u8()?);
            ClientEvent::Move {
                handle,
                version_low,
                mv: movement(r, tag)?,
            }
        }
        TAG_PROPS => ClientEvent::Props {
            handle: handle(r)?,
            version_low: r.u8()?,
            delta: bytes(r)?,
        },
        TAG_MOVE_PROPS => {
            let (handle, version_low) = (handle(r)?, r.u8()?);
            let mv = movement(r, tag)?;
            ClientEvent::MoveProps {
                handle,
                version_low,
                mv,
                delta: bytes(r)?,
            }
        }
        TAG_RESYNC => {
            let (handle, version) = (handle(r)?, r.uvar()?);
            let snapshot = bytes(r)?;
            snapshot_header(snapshot)?;
            ClientEvent::Resync {
                handle,
                version,
                snapshot,
            }
        }
        TAG_OWN => {
            let version = r.uvar()?;
            let kind = match kind_of(r.u8()?)? {
                SyncKind::Movement => return Err(DecodeError::BadTag(0)),
                k => k,
            };
            ClientEvent::Own {
                version,
                kind,
                payload: bytes(r)?,
            }
        }
        TAG_OWN_MOVE => {
            let version_low = r.u8()?;
            ClientEvent::OwnMove {
                version_low,
                mv: movement(r, tag)?,
            }
        }
        TAG_DEGRADED => ClientEvent::Degraded { on: r.bool()? },
        TAG_DETAIL => ClientEvent::Detail {
            handle: handle(r)?,
            version_low: r.u8()?,
            delta: bytes(r)?,
        },
        _ => return Err(DecodeError::BadTag(tag)),
    })
}

/// Iterates over the events of a batch; stops after the first error.
#[derive(Debug, Clone)]
pub struct BatchReader<'a> {
    r: Reader<'a>,
    failed: bool,
}

impl<'a> BatchReader<'a> {
    /// A reader over one batch (untrusted bytes).
    pub fn new(batch: &'a [u8]) -> Self {
        BatchReader {
            r: Reader::new(batch),
            failed: false,
        }
    }
}

impl<'a> Iterator for BatchReader<'a> {
    type Item = Result<ClientEvent<'a>, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.r.is_empty() {
            return None;
        }
        let ev = decode_event(&mut self.r);
        self.failed = ev.is_err();
        Some(ev)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::entity::codec::put_ivar;

    #[test]
    fn yaw_byte_is_the_nearest_256th_of_a_turn() {
        let old = |yaw: f32| {
            let steps = (f64::from(yaw) / std::f64::consts::TAU * YAW_STEPS).round();
            (steps.rem_euclid(YAW_STEPS) as u32 % 256) as u8
        };
        let mut yaws = vec![
            0.0f32,
            -0.0,
            f32::NAN,
            f32::INFINITY,
            1e30,
            -1e30,
            std::f32::consts::PI,
        ];
        for k in -3000..3000 {
            yaws.push(k as f32 * 0.012_345);
            // Exact halves of a step, where the rounding direction matters.
            yaws.push(((f64::from(k) + 0.5) / YAW_STEPS * std::f64::consts::TAU) as f32);
        }
        for y in yaws {
            assert_eq!(yaw_byte(y), old(y), "{y}");
        }
    }

    fn snap(ty: u16, x: f64) -> Vec<u8> {
        let mut s = Vec::new();
        put_uvar(&mut s, u64::from(ty));
        put_movement(&mut s, Vec3 { x, y: 1.0, z: 2.0 }, 0.5);
        s.extend_from_slice(&[0]);
        s
    }

    fn mv(absolute: bool, d: [i64; 3], yaw: u8) -> Movement {
        Movement { absolute, d, yaw }
    }

    #[test]
    fn every_event_round_trips() {
        let s = snap(1, 3.0);
        let evs = [
            ClientEvent::Enter {
                handle: 7,
                entity: EntityId(99),
                type_id: EntityTypeId(1),
                pos: Vec3 {
                    x: 3.0,
                    y: 1.0,
                    z: 2.0,
                },
                yaw: 0.5,
                version: 12,
                snapshot: &s,
            },
            ClientEvent::Leave { handle: 7 },
            ClientEvent::Move {
                handle: 1,
                version_low: 1,
                mv: mv(false, [3, 0, -4], 200),
            },
            ClientEvent::Move {
                handle: 1,
                version_low: 4,
                mv: mv(true, [400_000, -5, 7], 0),
            },
            ClientEvent::Props {
                handle: 2,
                version_low: 255,
                delta: &[0],
            },
            ClientEvent::MoveProps {
                handle: u32::MAX,
                version_low: 0,
                mv: mv(false, [i64::MIN, i64::MAX, 0], 255),
                delta: &[1, 2, 3],
            },
            ClientEvent::Resync {
                handle: 3,
                version: 5,
                snapshot: &s,
            },
            ClientEvent::Own {
                version: 8,
                kind: SyncKind::MovementAndProps,
                payload: &[9; 30],
            },
            ClientEvent::OwnMove {
                version_low: 9,
                mv: mv(false, [1, 1, 1], 64),
            },
            ClientEvent::Degraded { on: true },
            ClientEvent::Detail {
                handle: 9,
                version_low: 200,
                delta: &[1, 2, 0, 4],
            },
        ];
        let mut buf = Vec::new();
        for e in &evs {
            encode_event(&mut buf, e);
        }
        let back: Vec<_> = BatchReader::new(&buf)
            .collect::<Result<_, _>>()
            .expect("decodes");
        assert_eq!(back, evs);
        assert_eq!(back[0].handle(), Some(7));
        assert_eq!(back[7].version(), Some(8));
        assert_eq!(back[3].version_low(), Some(4));
        assert_eq!(back[1].version(), None);
    }

    proptest::proptest! {
        /// The stack-built update head is byte for byte what appending each
        /// field to the batch writes, from the smallest to the longest.
        #[test]
        fn update_heads_match_the_field_by_field_encoding(
            handle in proptest::prelude::any::<u32>(),
            low in proptest::prelude::any::<u8>(),
            d in proptest::prelude::any::<[i64; 3]>(),
            absolute in proptest::prelude::any::<bool>(),
            yaw in proptest::prelude::any::<u8>(),
            edge in 0usize..5,
        ) {
            let d = match edge {
                0 => d,
                1 => [i64::MIN, i64::MAX, i64::MIN],
                2 => [0, 0, 0],
                3 => [d[0] % 200, 0, d[2] % 200],
                // Around the short form's edges (one and two varint bytes).
                _ => [d[0] % 8200, d[1] % 3, d[2] % 8200],
            };
            let handle = if edge >= 3 { handle % 17_000 } else { handle };
            let mv = Movement { absolute, d, yaw };
            let mut got = vec![9u8];
            encode_event(&mut got, &ClientEvent::Move { handle, version_low: low, mv });
            let mut direct = vec![9u8];
            encode_move(&mut direct, handle, low, &mv);
            proptest::prop_assert_eq!(&direct, &got, "encode_move is encode_event's Move");
            let mut want = vec![9u8];
            let mut tag = TAG_MOVE;
            if absolute {
                tag |= FLAG_ABS;
            }
            if d[1] != 0 {
                tag |= FLAG_Y;
            }
            want.push(tag);
            put_uvar(&mut want, u64::from(handle));
            want.push(low);
            put_ivar(&mut want, d[0]);
            if d[1] != 0 {
                put_ivar(&mut want, d[1]);
            }
            put_ivar(&mut want, d[2]);
            want.push(yaw);
            proptest::prop_assert_eq!(&direct, &want, "encode_move writes the fields");
            proptest::prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn a_small_move_is_six_bytes() {
        let mut buf = Vec::new();
        let ev = ClientEvent::Move {
            handle: 5,
            version_low: 7,
            mv: mv(false, [50, 0, -63], 17),
        };
        encode_event(&mut buf, &ev);
        assert_eq!(buf, [TAG_MOVE, 5, 7, 100, 125, 17]);
    }

    #[test]
    fn quantising_and_headings_round_trip_within_resolution() {
        let p = Vec3 {
            x: 1_234.567_89,
            y: -0.004,
            z: 0.005,
        };
        let back = dequantise(quantise(p));
        assert!((back.x - p.x).abs() <= POSITION_RESOLUTION_M / 2.0 + 1e-9);
        assert!((back.y - p.y).abs() <= POSITION_RESOLUTION_M / 2.0 + 1e-9);
        assert!((back.z - p.z).abs() <= POSITION_RESOLUTION_M / 2.0 + 1e-9);
        assert_eq!(quantise(dequantise([7, -3, 123_456])), [7, -3, 123_456]);
        // Beyond the 32-bit range a coordinate clamps (PROTOCOL.md 6.2).
        let far = Vec3 {
            x: 3.0e7,
            y: -3.0e7,
            z: f64::NAN,
        };
        assert_eq!(quantise(far), [Q_MAX, -Q_MAX - 1, 0]);
        let edge = dequantise([Q_MAX, -Q_MAX - 1, Q_MAX]);
        assert_eq!(quantise(edge), [Q_MAX, -Q_MAX - 1, Q_MAX]);
        for b in 0..=255u8 {
            assert_eq!(yaw_byte(yaw_of(b)), b, "heading byte {b}");
        }
        let step = std::f32::consts::TAU / 256.0;
        for k in -700..700 {
            let yaw = k as f32 * 0.01;
            let back = yaw_of(yaw_byte(yaw));
            let diff = (back - yaw).rem_euclid(std::f32::consts::TAU);
            let diff = diff.min(std::f32::consts::TAU - diff);
            assert!(diff <= step / 2.0 + 1e-4, "{yaw} -> {back}");
        }
    }

    #[test]
    fn bad_bytes_are_typed_errors() {
        fn one(b: &[u8]) -> Result<ClientEvent<'_>, DecodeError> {
            BatchReader::new(b).next().expect("one item")
        }
        assert_eq!(one(&[0]), Err(DecodeError::BadTag(0)));
        assert_eq!(one(&[11]), Err(DecodeError::BadTag(11)));
        assert_eq!(one(&[TAG_DETAIL, 1, 0]), Err(DecodeError::Truncated));
        assert_eq!(one(&[TAG_MOVE, 1, 1, 1]), Err(DecodeError::Truncated));
        assert_eq!(
            one(&[TAG_LEAVE | FLAG_Y, 1]),
            Err(DecodeError::BadTag(TAG_LEAVE | FLAG_Y)),
            "a flag the type does not take"
        );
        assert_eq!(
            one(&[TAG_PROPS | FLAG_ABS, 1, 0]),
            Err(DecodeError::BadTag(TAG_PROPS | FLAG_ABS))
        );
        assert_eq!(
            one(&[0x80 | TAG_MOVE, 1, 0, 0, 0]),
            Err(DecodeError::BadTag(0x80 | TAG_MOVE))
        );
        assert_eq!(one(&[TAG_DEGRADED, 2]), Err(DecodeError::BadBool(2)));
        assert_eq!(
            one(&[TAG_LEAVE, 0xff, 0xff, 0xff, 0xff, 0x7f]),
            Err(DecodeError::TooLong {
                len: 0x7_ffff_ffff,
                max: u64::from(u32::MAX)
            })
        );
        // An enter whose snapshot has no movement header.
        assert_eq!(
            one(&[TAG_ENTER, 0, 1, 1, 2, 1, 0]),
            Err(DecodeError::Truncated)
        );
        assert_eq!(
            one(&[TAG_OWN, 1, 4, 0]),
            Err(DecodeError::BadTag(4)),
            "unknown sync kind"
        );
        assert_eq!(
            one(&[TAG_OWN, 1, 0, 0]),
            Err(DecodeError::BadTag(0)),
            "own movement goes as OwnMove"
        );
        let mut it = BatchReader::new(&[TAG_LEAVE, 1, 0, TAG_LEAVE, 2]);
        assert_eq!(it.next(), Some(Ok(ClientEvent::Leave { handle: 1 })));
        assert!(matches!(it.next(), Some(Err(_))));
        assert_eq!(it.next(), None, "stops after an error");
    }

    #[test]
    fn random_bytes_never_panic() {
        // A small deterministic generator (xorshift) instead of a fuzzer run.
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        let mut buf = Vec::new();
        for _ in 0..2000 {
            buf.clear();
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let n = (x % 64) as usize;
            for i in 0..n {
                buf.push((x >> (i % 8 * 8)) as u8 ^ i as u8);
            }
            for ev in BatchReader::new(&buf) {
                let _ = ev;
            }
        }
    }
}
