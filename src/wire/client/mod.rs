//! The client protocol: frames between a game client and the gateway.
//!
//! Owns the byte format of everything a client and the server say to each
//! other over TCP (documented byte by byte in `PROTOCOL.md` at the
//! repository root, which a test checks against this code). It owns no
//! connection, session or game state: the gateway (runtime) and the client
//! library (`crate::client`) drive it.
//!
//! - [`layout`]: the zerocopy header and the fixed part of every body.
//! - [`frame`]: the streaming [`FrameDecoder`] and shared helpers.
//! - [`client_msg`]: [`ClientMsg`] (Hello, Login, Move, Hit, SetProp, Ping,
//!   Bye).
//! - [`server_msg`]: [`ServerMsg`] (Welcome, ViewBatch, InputAck,
//!   CallResult, Error, Pong, Kick).
//! - [`error`]: [`DecodeError`], [`ErrorCode`], [`RefuseReason`].
//!
//! # Model
//!
//! A frame is an 8-byte header (`u32 body length, u16 kind, u16 flags`,
//! little-endian) and a body. The client sends Hello then Login (in one
//! write if it likes); the server answers Welcome, or Error and closes.
//! Then inputs (Move, Hit, SetProp) carry consecutive sequence numbers
//! from 1; the server acknowledges them with InputAck, answers calls with
//! CallResult, refuses a message with Error naming the rule, and sends one
//! ViewBatch per tick holding a `core::view` batch as it is. Kick ends the
//! connection.

pub mod client_msg;
pub mod error;
pub mod frame;
pub mod layout;
pub mod server_msg;

pub use client_msg::{ClientMsg, NAME_BYTES_MAX, TOKEN_BYTES_MAX};
pub use error::{DecodeError, ErrorCode, RefuseReason};
pub use frame::{header_bytes, split_frame, Frame, FrameDecoder};
pub use layout::{kind, HEADER_BYTES, MAGIC, NO_HANDLE, PROTOCOL_VERSION};
pub use server_msg::{view_batch_header, CallOutcome, ServerMsg, Welcome, TEXT_BYTES_MAX};

/// Frame size limits of one side (what it accepts from the other).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WireParams {
    /// Largest frame body the server accepts from a client. Default 4096
    /// bytes (the largest client message is a Login: 1092 bytes).
    pub client_body_bytes_max: u32,
    /// Largest frame body a client accepts from the server (a view batch
    /// is the largest). Default 4 MiB.
    pub server_body_bytes_max: u32,
}

impl Default for WireParams {
    fn default() -> Self {
        WireParams {
            client_body_bytes_max: 4096,
            server_body_bytes_max: 4 << 20,
        }
    }
}
