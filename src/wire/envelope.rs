//! The shard message envelope: a small fixed header and an rkyv-archived body.
//!
//! # Model
//!
//! A message between shards is an [`Envelope`]: a [`Header`] (source shard,
//! destination shard, kind, body length, sequence number) and a [`Body`], the
//! rkyv archive of the payload. The body is serialised **once** and held in a
//! reference-counted, 16-byte-aligned buffer, so fanning one message out to
//! every shard that needs it costs one reference-count increment per
//! destination, not one serialisation or copy. The header is per destination
//! (its `dest` and `seq` differ), so it stays a plain value beside the body.
//!
//! On receipt the body is read in place ([`Envelope::access`]), never copied
//! or deserialised:
//! - bytes that came from outside the process (a TCP link between hosts,
//!   later) go through rkyv's validation: a broken archive is a typed
//!   [`DecodeError`], never a panic or undefined behaviour;
//! - bytes serialised in this process by [`Body::encode`] as the very type
//!   being read are accessed without validation (≈1 ns instead of ≈8 ns); the
//!   body remembers the Rust type it was made from, so the fast path cannot be
//!   taken on foreign bytes.
//!
//! # Byte layout on a link
//!
//! [`Header::encode`] / [`Frame::decode`] give the form the same envelope takes
//! on a byte stream: [`HEADER_LEN`] bytes of header, little-endian, then `len`
//! body bytes.
//!
//! ```text
//! offset size field
//!  0     2    source.node   u16
//!  2     2    source.index  u16
//!  4     2    dest.node     u16
//!  6     2    dest.index    u16
//!  8     2    kind          u16   (the application's message type tag)
//! 10     1    version       u8    (= WIRE_VERSION)
//! 11     1    flags         u8    (reserved, 0)
//! 12     4    len           u32   (body bytes that follow)
//! 16     8    seq           u64   (per ordered pair of shards, from 0)
//! ```
//!
//! Owns the envelope format only; it must not touch queues, sockets or clocks.

use crate::core::ids::{NodeId, ShardId};
use rkyv::api::high::{HighSerializer, HighValidator};
use rkyv::bytecheck::CheckBytes;
use rkyv::rancor;
use rkyv::ser::allocator::ArenaHandle;
use rkyv::util::AlignedVec;
use rkyv::{Archive, Portable, Serialize};
use std::any::TypeId;
use std::sync::Arc;

/// Bytes of an encoded [`Header`].
pub const HEADER_LEN: usize = 24;

/// The envelope format version this build writes and accepts.
pub const WIRE_VERSION: u8 = 1;

/// Why bytes could not be read as an envelope or as its body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Fewer bytes than the header or the declared body needs.
    #[error("truncated frame: need {needed} bytes, have {available}")]
    Truncated {
        /// Bytes needed.
        needed: usize,
        /// Bytes present.
        available: usize,
    },
    /// The header's version is not [`WIRE_VERSION`].
    #[error("unsupported envelope version {0} (this build speaks {WIRE_VERSION})")]
    UnsupportedVersion(u8),
    /// Reserved flag bits are set.
    #[error("reserved envelope flags {0:#04x} are set")]
    ReservedFlags(u8),
    /// The declared body is larger than the receiver accepts.
    #[error("body of {len} bytes exceeds the limit of {max}")]
    BodyTooLarge {
        /// Declared length.
        len: u32,
        /// The receiver's limit.
        max: u32,
    },
    /// The envelope's kind is not the one the reader expected.
    #[error("envelope kind {found}, expected {expected}")]
    WrongKind {
        /// Kind in the header.
        found: u16,
        /// Kind the reader asked for.
        expected: u16,
    },
    /// The body is not a valid archive of the requested type.
    #[error("invalid body: {0}")]
    InvalidBody(String),
}

/// The fixed header of an envelope.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// The shard that sent it.
    pub source: ShardId,
    /// The shard it is for.
    pub dest: ShardId,
    /// The application's message type tag.
    pub kind: u16,
    /// Body bytes.
    pub len: u32,
    /// Position in the stream of the ordered pair `(source, dest)`, from 0.
    pub seq: u64,
}

impl Header {
    /// The header as [`HEADER_LEN`] little-endian bytes (see the module doc).
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..2].copy_from_slice(&self.source.node.0.to_le_bytes());
        b[2..4].copy_from_slice(&self.source.index.to_le_bytes());
        b[4..6].copy_from_slice(&self.dest.node.0.to_le_bytes());
        b[6..8].copy_from_slice(&self.dest.index.to_le_bytes());
        b[8..10].copy_from_slice(&self.kind.to_le_bytes());
        b[10] = WIRE_VERSION;
        b[11] = 0;
        b[12..16].copy_from_slice(&self.len.to_le_bytes());
        b[16..24].copy_from_slice(&self.seq.to_le_bytes());
        b
    }

    /// Reads a header from the first [`HEADER_LEN`] bytes of `bytes`.
    ///
    /// # Errors
    /// [`DecodeError::Truncated`], [`DecodeError::UnsupportedVersion`] or
    /// [`DecodeError::ReservedFlags`].
    pub fn decode(bytes: &[u8]) -> Result<Header, DecodeError> {
        let b: &[u8; HEADER_LEN] = bytes
            .get(..HEADER_LEN)
            .and_then(|s| s.try_into().ok())
            .ok_or(DecodeError::Truncated {
                needed: HEADER_LEN,
                available: bytes.len(),
            })?;
        if b[10] != WIRE_VERSION {
            return Err(DecodeError::UnsupportedVersion(b[10]));
        }
        if b[11] != 0 {
            return Err(DecodeError::ReservedFlags(b[11]));
        }
        let u16_at = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        let mut seq = [0u8; 8];
        seq.copy_from_slice(&b[16..24]);
        Ok(Header {
            source: ShardId {
                node: NodeId(u16_at(0)),
                index: u16_at(2),
            },
            dest: ShardId {
                node: NodeId(u16_at(4)),
                index: u16_at(6),
            },
            kind: u16_at(8),
            len: u32::from_le_bytes([b[12], b[13], b[14], b[15]]),
            seq: u64::from_le_bytes(seq),
        })
    }
}

/// One frame split off a byte stream: a header and its (unaligned) body bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame<'a> {
    /// The decoded header.
    pub header: Header,
    /// The body bytes, exactly `header.len` of them.
    pub body: &'a [u8],
}

impl<'a> Frame<'a> {
    /// Splits the first frame off `bytes`; returns it and the bytes it used.
    ///
    /// # Errors
    /// Header errors as [`Header::decode`]; [`DecodeError::BodyTooLarge`] if
    /// the declared length exceeds `body_bytes_max`; [`DecodeError::Truncated`]
    /// if the body is not all there yet.
    pub fn decode(bytes: &'a [u8], body_bytes_max: u32) -> Result<(Frame<'a>, usize), DecodeError> {
        let header = Header::decode(bytes)?;
        if header.len > body_bytes_max {
            return Err(DecodeError::BodyTooLarge {
                len: header.len,
                max: body_bytes_max,
            });
        }
        let end = HEADER_LEN + header.len as usize;
        let body = bytes.get(HEADER_LEN..end).ok_or(DecodeError::Truncated {
            needed: end,
            available: bytes.len(),
        })?;
        Ok((Frame { header, body }, end))
    }

    /// Copies the body into an aligned, shareable [`Body`] marked as foreign
    /// (it will be validated when read).
    pub fn to_body(&self) -> Body {
        let mut v = AlignedVec::with_capacity(self.body.len());
        v.extend_from_slice(self.body);
        Body::from_foreign(v)
    }
}

struct BodyInner {
    bytes: AlignedVec,
    /// The Rust type whose archive these bytes are, when they were serialised
    /// in this process by [`Body::encode`]; `None` for bytes from elsewhere.
    origin: Option<TypeId>,
}

/// An archived message body: immutable, aligned, shared by every envelope
/// that carries it (cloning is a reference-count increment).
#[derive(Clone)]
pub struct Body(Arc<BodyInner>);

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Body")
            .field("len", &self.len())
            .field("local", &self.0.origin.is_some())
            .finish()
    }
}

impl Body {
    /// Serialises `value` once into a new shared body.
    ///
    /// # Errors
    /// rkyv's serialisation error, as text (rare: e.g. a failing custom
    /// serialiser).
    pub fn encode<T>(value: &T) -> Result<Body, DecodeError>
    where
        T: 'static + for<'a> Serialize<HighSerializer<AlignedVec, ArenaHandle<'a>, rancor::Error>>,
    {
        let bytes = rkyv::to_bytes::<rancor::Error>(value)
            .map_err(|e| DecodeError::InvalidBody(e.to_string()))?;
        Ok(Body(Arc::new(BodyInner {
            bytes,
            origin: Some(TypeId::of::<T>()),
        })))
    }

    /// Wraps bytes that did not come from [`Body::encode`] in this process
    /// (e.g. read from a socket): every read of them is validated.
    pub fn from_foreign(bytes: AlignedVec) -> Body {
        Body(Arc::new(BodyInner {
            bytes,
            origin: None,
        }))
    }

    /// The archive bytes.
    pub fn as_bytes(&self) -> &[u8] {
        self.0.bytes.as_slice()
    }

    /// Body length in bytes.
    pub fn len(&self) -> usize {
        self.0.bytes.len()
    }

    /// Whether the body is empty.
    pub fn is_empty(&self) -> bool {
        self.0.bytes.is_empty()
    }

    /// Whether these bytes were serialised in this process (so reads of the
    /// same type skip validation).
    pub fn is_local(&self) -> bool {
        self.0.origin.is_some()
    }

    /// How many envelopes (and other holders) share this body right now.
    pub fn share_count(&self) -> usize {
        Arc::strong_count(&self.0)
    }

    /// Reads the body in place as an archived `T`.
    ///
    /// Validated unless the body was produced by [`Body::encode::<T>`] in this
    /// process, in which case the (≈8x cheaper) unchecked access is used.
    ///
    /// # Errors
    /// [`DecodeError::InvalidBody`] if validation fails.
    pub fn access<T>(&self) -> Result<&T::Archived, DecodeError>
    where
        T: Archive + 'static,
        T::Archived: Portable + for<'a> CheckBytes<HighValidator<'a, rancor::Error>>,
    {
        let bytes = self.0.bytes.as_slice();
        if self.0.origin == Some(TypeId::of::<T>()) {
            // SAFETY: `origin` is only set by `Body::encode::<T>`, which wrote
            // these bytes with `rkyv::to_bytes` from a value of this very type
            // `T`, in this process (same layout, same rkyv build). The bytes
            // live in an `AlignedVec` (16-byte aligned) behind an `Arc` and are
            // never mutated afterwards. So a valid `T::Archived` sits at the
            // root position, which is what `access_unchecked` requires.
            Ok(unsafe { rkyv::access_unchecked::<T::Archived>(bytes) })
        } else {
            rkyv::access::<T::Archived, rancor::Error>(bytes)
                .map_err(|e| DecodeError::InvalidBody(e.to_string()))
        }
    }
}

/// One message between shards: a per-destination header and a shared body.
#[derive(Clone, Debug)]
pub struct Envelope {
    header: Header,
    body: Body,
}

impl Envelope {
    /// An envelope of `body` from `source` to `dest`.
    ///
    /// # Panics
    /// If the body is larger than `u32::MAX` bytes (a bug: bodies are bounded
    /// far below that).
    pub fn new(source: ShardId, dest: ShardId, kind: u16, seq: u64, body: Body) -> Envelope {
        let len = u32::try_from(body.len()).expect("body under 4 GiB");
        Envelope {
            header: Header {
                source,
                dest,
                kind,
                len,
                seq,
            },
            body,
        }
    }

    /// Rebuilds an envelope from a frame read off a link (body copied once
    /// into aligned memory, validated on access).
    pub fn from_frame(frame: &Frame<'_>) -> Envelope {
        Envelope {
            header: frame.header,
            body: frame.to_body(),
        }
    }

    /// The header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The shared body.
    pub fn body(&self) -> &Body {
        &self.body
    }

    /// The sending shard.
    pub fn source(&self) -> ShardId {
        self.header.source
    }

    /// The message type tag.
    pub fn kind(&self) -> u16 {
        self.header.kind
    }

    /// The sequence number in the `(source, dest)` stream.
    pub fn seq(&self) -> u64 {
        self.header.seq
    }

    /// Reads the body in place as an archived `T`, after checking the kind.
    ///
    /// # Errors
    /// [`DecodeError::WrongKind`] if the header's kind is not `kind`;
    /// [`DecodeError::InvalidBody`] as [`Body::access`].
    pub fn access<T>(&self, kind: u16) -> Result<&T::Archived, DecodeError>
    where
        T: Archive + 'static,
        T::Archived: Portable + for<'a> CheckBytes<HighValidator<'a, rancor::Error>>,
    {
        if self.header.kind != kind {
            return Err(DecodeError::WrongKind {
                found: self.header.kind,
                expected: kind,
            });
        }
        self.body.access::<T>()
    }

    /// Appends the link form (header then body) to `out`.
    pub fn write_frame(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.header.encode());
        out.extend_from_slice(self.body.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Archive, Serialize, rkyv::Deserialize, Debug, PartialEq)]
    #[rkyv(derive(Debug))]
    struct Ping {
        n: u64,
        who: String,
    }

    #[derive(Archive, Serialize, rkyv::Deserialize, Debug, PartialEq)]
    struct Other {
        a: u32,
    }

    fn ping(n: u64) -> Body {
        Body::encode(&Ping {
            n,
            who: "shard".into(),
        })
        .expect("encode")
    }

    #[test]
    fn header_round_trips_and_rejects_bad_bytes() {
        let h = Header {
            source: ShardId::local(3),
            dest: ShardId {
                node: NodeId(2),
                index: 7,
            },
            kind: 42,
            len: 9,
            seq: u64::MAX - 1,
        };
        let b = h.encode();
        assert_eq!(Header::decode(&b), Ok(h));
        assert!(matches!(
            Header::decode(&b[..10]),
            Err(DecodeError::Truncated { needed: 24, .. })
        ));
        let mut bad = b;
        bad[10] = 9;
        assert_eq!(
            Header::decode(&bad),
            Err(DecodeError::UnsupportedVersion(9))
        );
        let mut bad = b;
        bad[11] = 1;
        assert_eq!(Header::decode(&bad), Err(DecodeError::ReservedFlags(1)));
    }

    #[test]
    fn local_body_is_shared_and_read_in_place() {
        let body = ping(5);
        let a = Envelope::new(ShardId::local(0), ShardId::local(1), 1, 0, body.clone());
        let b = Envelope::new(ShardId::local(0), ShardId::local(2), 1, 0, body.clone());
        assert_eq!(body.share_count(), 3);
        assert!(body.is_local());
        // Both envelopes point at the same bytes: serialised once.
        assert_eq!(a.body().as_bytes().as_ptr(), b.body().as_bytes().as_ptr());
        let p = a.access::<Ping>(1).expect("valid");
        assert_eq!(p.n, 5);
        assert_eq!(p.who.as_str(), "shard");
        assert_eq!(
            a.access::<Ping>(2).unwrap_err(),
            DecodeError::WrongKind {
                found: 1,
                expected: 2
            }
        );
    }

    #[test]
    fn unchecked_path_is_taken_only_for_the_encoded_type() {
        // Reading a local body as another type must go through validation
        // (and may fail), never through the unchecked path.
        let body = Body::encode(&Other { a: 7 }).expect("encode");
        assert_eq!(body.access::<Other>().expect("same type").a, 7);
        assert!(body.access::<Ping>().is_err(), "4 bytes are not a Ping");
    }

    #[test]
    fn frames_round_trip_and_foreign_bodies_are_validated() {
        let env = Envelope::new(ShardId::local(1), ShardId::local(0), 3, 17, ping(99));
        let mut stream = Vec::new();
        env.write_frame(&mut stream);
        env.write_frame(&mut stream);
        let (frame, used) = Frame::decode(&stream, 1 << 20).expect("frame");
        assert_eq!(used, stream.len() / 2);
        assert_eq!(frame.header, *env.header());
        let back = Envelope::from_frame(&frame);
        assert!(!back.body().is_local());
        assert_eq!(back.access::<Ping>(3).expect("valid").n, 99);
        // Limits and truncation are typed errors.
        assert!(matches!(
            Frame::decode(&stream, 4),
            Err(DecodeError::BodyTooLarge { max: 4, .. })
        ));
        assert!(matches!(
            Frame::decode(&stream[..used - 1], 1 << 20),
            Err(DecodeError::Truncated { .. })
        ));
    }

    #[test]
    fn corrupt_foreign_bodies_are_errors_not_panics() {
        let good = ping(1);
        let bytes = good.as_bytes().to_vec();
        for i in 0..bytes.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut v = AlignedVec::<16>::new();
                v.extend_from_slice(&bytes);
                v[i] ^= flip;
                // Must return (Ok or Err), never crash.
                let _ = Body::from_foreign(v).access::<Ping>();
            }
        }
        let mut v = AlignedVec::<16>::new();
        v.extend_from_slice(&[0xff; 3]);
        assert!(Body::from_foreign(v).access::<Ping>().is_err());
    }
}
