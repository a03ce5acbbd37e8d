//! The byte layout of a client view batch: encoder and untrusted decoder.
//!
//! Owns the wire form of [`ClientEvent`]s. A *batch* is the concatenation
//! of events, with no header (the transport frames it); the decoder
//! ([`BatchReader`]) reads bytes from the network, so every rule the bytes
//! can break is a typed [`DecodeError`], never a panic, and nothing is
//! allocated. It knows nothing of observers or trackers.
//!
//! # Layout (varints are LEB128, floats little-endian IEEE)
//!
//! | tag | event      | fields                                                        |
//! |-----|------------|---------------------------------------------------------------|
//! | 1   | Enter      | `handle, entity, version, len, snapshot[len]`                 |
//! | 2   | Leave      | `handle`                                                      |
//! | 3   | Move       | `handle, version, f64 x, f64 y, f64 z, f32 yaw`               |
//! | 4   | Props      | `handle, version, len, delta[len]`                            |
//! | 5   | MoveProps  | `handle, version, f64 x, f64 y, f64 z, f32 yaw, len, delta`   |
//! | 6   | Resync     | `handle, version, len, snapshot[len]`                         |
//! | 7   | Own        | `version, u8 kind (0 move, 1 props, 2 both, 3 snapshot), len, payload` |
//!
//! A snapshot is [`crate::core::entity::Entity::encode_snapshot`]'s output:
//! `varint type id, f64 x, f64 y, f64 z, f32 yaw, properties`; the decoder
//! checks that header and exposes it on [`ClientEvent::Enter`], so type and
//! position are not sent twice. Typical sizes: a move is 32-35 bytes, an
//! empty-delta version 5-8 bytes.

pub use crate::core::entity::DecodeError;

use super::event::{ClientEvent, Handle};
use crate::core::entity::codec::{put_f32, put_f64, put_uvar, Reader};
use crate::core::entity::{EntityTypeId, SyncKind};
use crate::core::geom::Vec3;
use crate::core::ids::EntityId;

/// Largest snapshot or delta one event may carry (16 MiB; a batch from a
/// well-behaved server is far smaller, this only bounds a lying length).
pub const EVENT_PAYLOAD_BYTES_MAX: usize = 16 << 20;

/// Bytes of a movement block (`x, y, z, yaw`).
pub const MOVEMENT_BYTES: usize = 28;

const TAG_ENTER: u8 = 1;
const TAG_LEAVE: u8 = 2;
const TAG_MOVE: u8 = 3;
const TAG_PROPS: u8 = 4;
const TAG_MOVE_PROPS: u8 = 5;
const TAG_RESYNC: u8 = 6;
const TAG_OWN: u8 = 7;

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

fn put_movement(out: &mut Vec<u8>, pos: Vec3, yaw: f32) {
    put_f64(out, pos.x);
    put_f64(out, pos.y);
    put_f64(out, pos.z);
    put_f32(out, yaw);
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
            version,
            pos,
            yaw,
        } => {
            out.push(TAG_MOVE);
            put_uvar(out, u64::from(handle));
            put_uvar(out, version);
            put_movement(out, pos, yaw);
        }
        ClientEvent::Props {
            handle,
            version,
            delta,
        } => {
            out.push(TAG_PROPS);
            put_uvar(out, u64::from(handle));
            put_uvar(out, version);
            put_bytes(out, delta);
        }
        ClientEvent::MoveProps {
            handle,
            version,
            pos,
            yaw,
            delta,
        } => {
            out.push(TAG_MOVE_PROPS);
            put_uvar(out, u64::from(handle));
            put_uvar(out, version);
            put_movement(out, pos, yaw);
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
            out.push(TAG_OWN);
            put_uvar(out, version);
            out.push(kind_byte(kind));
            put_bytes(out, payload);
        }
    }
}

/// Reads a movement block.
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

/// Reads one event.
///
/// # Errors
/// Any [`DecodeError`] the bytes cause (unknown tag, truncation, a bad
/// snapshot header, oversized lengths or handles).
pub fn decode_event<'a>(r: &mut Reader<'a>) -> Result<ClientEvent<'a>, DecodeError> {
    let tag = r.u8()?;
    Ok(match tag {
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
            let (handle, version) = (handle(r)?, r.uvar()?);
            let (pos, yaw) = read_movement(r)?;
            ClientEvent::Move {
                handle,
                version,
                pos,
                yaw,
            }
        }
        TAG_PROPS => ClientEvent::Props {
            handle: handle(r)?,
            version: r.uvar()?,
            delta: bytes(r)?,
        },
        TAG_MOVE_PROPS => {
            let (handle, version) = (handle(r)?, r.uvar()?);
            let (pos, yaw) = read_movement(r)?;
            ClientEvent::MoveProps {
                handle,
                version,
                pos,
                yaw,
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
        TAG_OWN => ClientEvent::Own {
            version: r.uvar()?,
            kind: kind_of(r.u8()?)?,
            payload: bytes(r)?,
        },
        t => return Err(DecodeError::BadTag(t)),
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

    fn snap(ty: u16, x: f64) -> Vec<u8> {
        let mut s = Vec::new();
        put_uvar(&mut s, u64::from(ty));
        put_movement(&mut s, Vec3 { x, y: 1.0, z: 2.0 }, 0.5);
        s.extend_from_slice(&[0]);
        s
    }

    #[test]
    fn every_event_round_trips() {
        let s = snap(1, 3.0);
        let p = Vec3 {
            x: 1.0,
            y: 2.0,
            z: 3.0,
        };
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
                version: 3,
                pos: p,
                yaw: -1.0,
            },
            ClientEvent::Props {
                handle: 2,
                version: 4,
                delta: &[0],
            },
            ClientEvent::MoveProps {
                handle: u32::MAX,
                version: u64::MAX,
                pos: p,
                yaw: 2.0,
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
        assert_eq!(back[6].version(), Some(8));
        assert_eq!(back[1].version(), None);
    }

    #[test]
    fn bad_bytes_are_typed_errors() {
        fn one(b: &[u8]) -> Result<ClientEvent<'_>, DecodeError> {
            BatchReader::new(b).next().expect("one item")
        }
        assert_eq!(one(&[0]), Err(DecodeError::BadTag(0)));
        assert_eq!(one(&[9]), Err(DecodeError::BadTag(9)));
        assert_eq!(one(&[TAG_MOVE, 1, 1, 0]), Err(DecodeError::Truncated));
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
