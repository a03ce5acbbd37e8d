//! The fixed byte layouts of the client protocol, as zerocopy structs.
//!
//! Owns the frame header, the message kinds and the fixed part of every
//! message body. Every multi-byte field is little-endian and unaligned
//! (`zerocopy::byteorder::little_endian` types), so a struct maps onto any
//! byte offset of a read buffer; the `const` asserts pin every size, and
//! PROTOCOL.md gives the same offsets in prose. Variable parts (names,
//! texts, the view batch, a property value) follow the fixed part and run
//! to the end of the body unless a length says otherwise. Nothing here
//! knows about sessions or decoding rules.

use zerocopy::byteorder::little_endian::{F32, F64, I64, U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// The first 4 bytes of a Hello body.
pub const MAGIC: [u8; 4] = *b"TSRA";
/// The protocol version this code speaks (2: spaces, EnterSpace and
/// SpaceChanged; 3: compact view movements with version steps, OwnMove and
/// Degraded; 5: the Detail event of property levels of detail).
pub const PROTOCOL_VERSION: u16 = 5;
/// Bytes of a frame header.
pub const HEADER_BYTES: usize = 8;
/// `own_handle` value of a Welcome when the own entity has no view handle.
pub const NO_HANDLE: u32 = u32::MAX;

/// Message kinds: client-to-server kinds have the high bit clear,
/// server-to-client kinds have it set.
pub mod kind {
    /// Client: open the session (magic, version).
    pub const HELLO: u16 = 0x0001;
    /// Client: log in (name, optional token).
    pub const LOGIN: u16 = 0x0002;
    /// Client: movement input.
    pub const MOVE: u16 = 0x0003;
    /// Client: hit a visible entity.
    pub const HIT: u16 = 0x0004;
    /// Client: set one of its own properties.
    pub const SET_PROP: u16 = 0x0005;
    /// Client: ping.
    pub const PING: u16 = 0x0006;
    /// Client: leave.
    pub const BYE: u16 = 0x0007;
    /// Client: go to another space (by id or by type).
    pub const ENTER_SPACE: u16 = 0x0008;
    /// Server: session accepted.
    pub const WELCOME: u16 = 0x8001;
    /// Server: one tick of view events.
    pub const VIEW_BATCH: u16 = 0x8002;
    /// Server: inputs processed up to a seq.
    pub const INPUT_ACK: u16 = 0x8003;
    /// Server: outcome of a call.
    pub const CALL_RESULT: u16 = 0x8004;
    /// Server: a message was refused.
    pub const ERROR: u16 = 0x8005;
    /// Server: answer to a ping.
    pub const PONG: u16 = 0x8006;
    /// Server: the connection is closed after this frame.
    pub const KICK: u16 = 0x8007;
    /// Server: the client's avatar is now in another space.
    pub const SPACE_CHANGED: u16 = 0x8008;
}

/// The 8-byte header in front of every frame.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct FrameHeader {
    /// Bytes of the body that follows (the header excluded).
    pub len: U32,
    /// The message kind ([`kind`]).
    pub kind: U16,
    /// Reserved flags, 0 in version 1.
    pub flags: U16,
}

/// Hello body (8 bytes).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct HelloBody {
    /// [`MAGIC`].
    pub magic: [u8; 4],
    /// [`PROTOCOL_VERSION`].
    pub version: U16,
    /// 0.
    pub reserved: U16,
}

/// Login fixed part (4 bytes), then `name[name_len]`, `token[token_len]`.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct LoginHead {
    /// Bit 0: a token follows the name; other bits 0.
    pub flags: u8,
    /// Bytes of the UTF-8 name (1..=[`super::NAME_BYTES_MAX`]).
    pub name_len: u8,
    /// Bytes of the token (0 when bit 0 of `flags` is clear).
    pub token_len: U16,
}

/// Move body (44 bytes).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct MoveBody {
    /// Input sequence number (consecutive from 1 across every input).
    pub seq: U64,
    /// The client's clock when the input was made, in µs.
    pub client_time_us: U64,
    /// Position x (m).
    pub x: F64,
    /// Position y (height, m).
    pub y: F64,
    /// Position z (m).
    pub z: F64,
    /// Heading (radians).
    pub yaw: F32,
}

/// Hit body (32 bytes).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct HitBody {
    /// Input sequence number.
    pub seq: U64,
    /// The client's clock, µs.
    pub client_time_us: U64,
    /// The target's handle in the client's view.
    pub target: U32,
    /// 0.
    pub reserved: U32,
    /// Damage asked (the server bounds it).
    pub damage: I64,
}

/// SetProp fixed part (20 bytes), then the value to the end of the body.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct SetPropHead {
    /// Input sequence number.
    pub seq: U64,
    /// The client's clock, µs.
    pub client_time_us: U64,
    /// The property index in the own entity's type.
    pub prop: U16,
    /// 0.
    pub reserved: U16,
}

/// Ping body (16 bytes).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct PingBody {
    /// Echoed in the Pong.
    pub nonce: U64,
    /// The client's clock, µs (echoed).
    pub client_time_us: U64,
}

/// Welcome body (104 bytes).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct WelcomeBody {
    /// The protocol version the server speaks (= the client's).
    pub version: U16,
    /// 0.
    pub reserved: U16,
    /// The server's tick period, ms.
    pub tick_ms: U32,
    /// The client's own entity.
    pub entity: U64,
    /// The own entity's view handle, [`NO_HANDLE`] if none.
    pub own_handle: U32,
    /// The largest frame body the server accepts from this client.
    pub client_body_bytes_max: U32,
    /// World bounds: min x (m).
    pub min_x: F64,
    /// Min z (m).
    pub min_z: F64,
    /// Max x (m).
    pub max_x: F64,
    /// Max z (m).
    pub max_z: F64,
    /// The server's clock when it sent this, µs.
    pub server_time_us: U64,
    /// The seq the client's next input must carry (1 for a new avatar).
    pub next_seq: U64,
    /// The avatar's position: x (m).
    pub x: F64,
    /// y (m).
    pub y: F64,
    /// z (m).
    pub z: F64,
    /// The space the avatar is in.
    pub space: U32,
    /// That space's type.
    pub space_type: U32,
}

/// ViewBatch fixed part (8 bytes), then the batch to the end of the body.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct ViewBatchHead {
    /// The server tick that built the batch.
    pub tick: U64,
}

/// InputAck body (8 bytes).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct InputAckBody {
    /// Every input with `seq <= last_seq` was processed.
    pub last_seq: U64,
}

/// CallResult body (24 bytes).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct CallResultBody {
    /// The input seq of the call.
    pub seq: U64,
    /// 0 applied, 1 hit landed, 2 hit expired, 3 refused.
    pub status: u8,
    /// Bit 0: the hit killed the target (status 1 only).
    pub flags: u8,
    /// The [`super::RefuseReason`] code (status 3), else 0.
    pub reason: U16,
    /// 0.
    pub reserved: U32,
    /// Damage dealt (status 1), else 0.
    pub value: I64,
}

/// Error fixed part (12 bytes), then the UTF-8 text to the end of the body.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct ErrorHead {
    /// The refused input's seq, 0 if the error is not about an input.
    pub seq: U64,
    /// The [`super::ErrorCode`].
    pub code: U16,
    /// 0.
    pub reserved: U16,
}

/// Pong body (24 bytes).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct PongBody {
    /// The ping's nonce.
    pub nonce: U64,
    /// The ping's client time, µs.
    pub client_time_us: U64,
    /// The server's clock when it answered, µs.
    pub server_time_us: U64,
}

/// Kick fixed part (4 bytes), then the UTF-8 text to the end of the body.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct KickHead {
    /// The [`super::ErrorCode`].
    pub code: U16,
    /// 0.
    pub reserved: U16,
}

/// EnterSpace body (8 bytes): exactly one of the two is non-zero.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct EnterSpaceBody {
    /// The space to enter by id, 0 to enter by type.
    pub space: U32,
    /// The space type to enter (its least loaded instance), 0 with an id.
    pub type_id: U32,
}

/// SpaceChanged body (32 bytes).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct SpaceChangedBody {
    /// The space the avatar is in now.
    pub space: U32,
    /// Its type.
    pub type_id: U32,
    /// The avatar's position there, x (m).
    pub x: F64,
    /// y (m).
    pub y: F64,
    /// z (m).
    pub z: F64,
}

const _: () = {
    use core::mem::size_of;
    assert!(size_of::<FrameHeader>() == HEADER_BYTES);
    assert!(size_of::<HelloBody>() == 8);
    assert!(size_of::<LoginHead>() == 4);
    assert!(size_of::<MoveBody>() == 44);
    assert!(size_of::<HitBody>() == 32);
    assert!(size_of::<SetPropHead>() == 20);
    assert!(size_of::<PingBody>() == 16);
    assert!(size_of::<WelcomeBody>() == 104);
    assert!(size_of::<ViewBatchHead>() == 8);
    assert!(size_of::<InputAckBody>() == 8);
    assert!(size_of::<CallResultBody>() == 24);
    assert!(size_of::<ErrorHead>() == 12);
    assert!(size_of::<PongBody>() == 24);
    assert!(size_of::<KickHead>() == 4);
    assert!(size_of::<EnterSpaceBody>() == 8);
    assert!(size_of::<SpaceChangedBody>() == 32);
};
