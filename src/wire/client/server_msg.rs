//! Server-to-client messages: [`ServerMsg`], its encoder and its untrusted
//! decoder (what the client library runs on every frame).
//!
//! Owns the meaning of the server kinds and [`CallOutcome`]. A ViewBatch
//! carries the bytes of one `core::view` batch as they are (encoded once by
//! `core::view::codec`, never re-encoded here); the gateway can write the
//! frame as [`view_batch_header`] + the shared batch bytes. Decoding
//! borrows from the frame and allocates nothing; the format is canonical
//! (see `client_msg`).

use super::error::{DecodeError, ErrorCode, RefuseReason};
use super::frame::{self, exact, head, no_flags, reserved, text, Frame};
use super::layout::{
    kind, CallResultBody, ErrorHead, InputAckBody, KickHead, PongBody, SpaceChangedBody,
    ViewBatchHead, WelcomeBody, HEADER_BYTES, NO_HANDLE, PROTOCOL_VERSION,
};
use crate::core::geom::{Rect, Vec3};
use crate::core::ids::EntityId;
use zerocopy::IntoBytes;

/// Longest Error or Kick text, in bytes of UTF-8.
pub const TEXT_BYTES_MAX: usize = 256;

/// What a Welcome tells the client.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Welcome {
    /// The server's tick period, ms.
    pub tick_ms: u32,
    /// The client's own entity.
    pub entity: EntityId,
    /// The own entity's view handle, if it has one.
    pub own_handle: Option<u32>,
    /// The largest frame body the server accepts from this client.
    pub client_body_bytes_max: u32,
    /// The world's bounds.
    pub bounds: Rect,
    /// The server's clock, µs.
    pub server_time_us: u64,
    /// The seq the next input must carry: 1 for a new avatar; after a
    /// takeover, the next one of the connection replaced.
    pub next_seq: u64,
    /// Where the avatar stands (its spawn point, or after a takeover its
    /// last accepted position).
    pub pos: Vec3,
    /// The space it is in.
    pub space: u32,
    /// That space's type.
    pub space_type: u32,
}

/// How a call (Hit, SetProp) ended where it ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallOutcome {
    /// Done (a SetProp applied).
    Applied,
    /// A hit resolved at its target.
    HitLanded {
        /// Damage dealt.
        dealt: i64,
        /// The target died.
        killed: bool,
    },
    /// A hit got no answer from its target in time.
    HitExpired,
    /// Refused.
    Refused(RefuseReason),
}

/// One message from the server.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ServerMsg<'a> {
    /// The session is open.
    Welcome(Welcome),
    /// One tick of view events.
    ViewBatch {
        /// The server tick.
        tick: u64,
        /// A `core::view::codec` batch.
        batch: &'a [u8],
    },
    /// Every input with `seq <= last_seq` was processed.
    InputAck {
        /// The last input processed.
        last_seq: u64,
    },
    /// A call ended.
    CallResult {
        /// The call's input seq.
        seq: u64,
        /// How.
        outcome: CallOutcome,
    },
    /// A message was refused (fatal during the handshake).
    Error {
        /// The refused input's seq, 0 if none.
        seq: u64,
        /// The rule.
        code: ErrorCode,
        /// Detail for humans, at most [`TEXT_BYTES_MAX`] bytes.
        text: &'a str,
    },
    /// Answer to a ping.
    Pong {
        /// The ping's nonce.
        nonce: u64,
        /// The ping's client time, µs.
        client_time_us: u64,
        /// The server's clock, µs.
        server_time_us: u64,
    },
    /// The server closes the connection after this frame.
    Kick {
        /// The rule.
        code: ErrorCode,
        /// Detail for humans.
        text: &'a str,
    },
    /// The avatar is in another space now (the answer to EnterSpace). It
    /// comes after the last view batch of the old space; the next batch
    /// has leaves for everything of the old space and enters of the new.
    SpaceChanged {
        /// The space.
        space: u32,
        /// Its type.
        type_id: u32,
        /// The avatar's position there.
        pos: Vec3,
    },
}

/// The 16 bytes in front of a view batch of `batch_len` bytes (frame
/// header + tick), for a vectored write that shares the batch.
///
/// # Panics
/// If `batch_len + 8` overflows `u32`.
pub fn view_batch_header(tick: u64, batch_len: usize) -> [u8; HEADER_BYTES + 8] {
    let len = u32::try_from(batch_len + 8).expect("batch fits a frame");
    let mut out = [0; HEADER_BYTES + 8];
    out[..HEADER_BYTES].copy_from_slice(&frame::header_bytes(kind::VIEW_BATCH, len));
    out[HEADER_BYTES..].copy_from_slice(&tick.to_le_bytes());
    out
}

impl ServerMsg<'_> {
    /// The message kind.
    pub fn kind(&self) -> u16 {
        match self {
            ServerMsg::Welcome(_) => kind::WELCOME,
            ServerMsg::ViewBatch { .. } => kind::VIEW_BATCH,
            ServerMsg::InputAck { .. } => kind::INPUT_ACK,
            ServerMsg::CallResult { .. } => kind::CALL_RESULT,
            ServerMsg::Error { .. } => kind::ERROR,
            ServerMsg::Pong { .. } => kind::PONG,
            ServerMsg::Kick { .. } => kind::KICK,
            ServerMsg::SpaceChanged { .. } => kind::SPACE_CHANGED,
        }
    }

    /// Appends the whole frame to `out`.
    ///
    /// # Panics
    /// If a text is over [`TEXT_BYTES_MAX`] (the caller's bug).
    pub fn encode(&self, out: &mut Vec<u8>) {
        let at = frame::begin(out, self.kind());
        match *self {
            ServerMsg::Welcome(w) => out.extend_from_slice(welcome_body(&w).as_bytes()),
            ServerMsg::ViewBatch { tick, batch } => {
                out.extend_from_slice(ViewBatchHead { tick: tick.into() }.as_bytes());
                out.extend_from_slice(batch);
            }
            ServerMsg::InputAck { last_seq } => out.extend_from_slice(
                InputAckBody {
                    last_seq: last_seq.into(),
                }
                .as_bytes(),
            ),
            ServerMsg::CallResult { seq, outcome } => {
                out.extend_from_slice(call_body(seq, outcome).as_bytes());
            }
            ServerMsg::Error { seq, code, text } => {
                assert!(text.len() <= TEXT_BYTES_MAX, "error text length");
                let h = ErrorHead {
                    seq: seq.into(),
                    code: code.code().into(),
                    reserved: 0.into(),
                };
                out.extend_from_slice(h.as_bytes());
                out.extend_from_slice(text.as_bytes());
            }
            ServerMsg::Pong {
                nonce,
                client_time_us,
                server_time_us,
            } => out.extend_from_slice(
                PongBody {
                    nonce: nonce.into(),
                    client_time_us: client_time_us.into(),
                    server_time_us: server_time_us.into(),
                }
                .as_bytes(),
            ),
            ServerMsg::Kick { code, text } => {
                assert!(text.len() <= TEXT_BYTES_MAX, "kick text length");
                let h = KickHead {
                    code: code.code().into(),
                    reserved: 0.into(),
                };
                out.extend_from_slice(h.as_bytes());
                out.extend_from_slice(text.as_bytes());
            }
            ServerMsg::SpaceChanged {
                space,
                type_id,
                pos,
            } => out.extend_from_slice(
                SpaceChangedBody {
                    space: space.into(),
                    type_id: type_id.into(),
                    x: pos.x.into(),
                    y: pos.y.into(),
                    z: pos.z.into(),
                }
                .as_bytes(),
            ),
        }
        frame::end(out, at);
    }
}

fn welcome_body(w: &Welcome) -> WelcomeBody {
    WelcomeBody {
        version: PROTOCOL_VERSION.into(),
        reserved: 0.into(),
        tick_ms: w.tick_ms.into(),
        entity: w.entity.0.into(),
        own_handle: w.own_handle.unwrap_or(NO_HANDLE).into(),
        client_body_bytes_max: w.client_body_bytes_max.into(),
        min_x: w.bounds.min_x.into(),
        min_z: w.bounds.min_z.into(),
        max_x: w.bounds.max_x.into(),
        max_z: w.bounds.max_z.into(),
        server_time_us: w.server_time_us.into(),
        next_seq: w.next_seq.into(),
        x: w.pos.x.into(),
        y: w.pos.y.into(),
        z: w.pos.z.into(),
        space: w.space.into(),
        space_type: w.space_type.into(),
    }
}

fn call_body(seq: u64, outcome: CallOutcome) -> CallResultBody {
    let (status, flags, reason, value) = match outcome {
        CallOutcome::Applied => (0, 0, 0, 0),
        CallOutcome::HitLanded { dealt, killed } => (1, u8::from(killed), 0, dealt),
        CallOutcome::HitExpired => (2, 0, 0, 0),
        CallOutcome::Refused(r) => (3, 0, r.code(), 0),
    };
    CallResultBody {
        seq: seq.into(),
        status,
        flags,
        reason: reason.into(),
        reserved: 0.into(),
        value: value.into(),
    }
}

fn decode_outcome(b: &CallResultBody) -> Result<CallOutcome, DecodeError> {
    let k = kind::CALL_RESULT;
    let (flags, reason, value) = (b.flags, b.reason.get(), b.value.get());
    reserved(k, b.reserved.get() == 0)?;
    let outcome = match b.status {
        0 => CallOutcome::Applied,
        1 => CallOutcome::HitLanded {
            dealt: value,
            killed: flags & 1 != 0,
        },
        2 => CallOutcome::HitExpired,
        3 => CallOutcome::Refused(RefuseReason::from_code(reason).ok_or(DecodeError::BadCode {
            kind: k,
            field: "reason",
            value: reason,
        })?),
        s => {
            return Err(DecodeError::BadCode {
                kind: k,
                field: "status",
                value: u16::from(s),
            })
        }
    };
    // Canonical: fields the status does not use are 0.
    let canonical = call_body(b.seq.get(), outcome);
    reserved(
        k,
        canonical.flags == flags && canonical.reason.get() == reason && canonical.value == b.value,
    )?;
    Ok(outcome)
}

fn code_of(k: u16, code: u16) -> Result<ErrorCode, DecodeError> {
    ErrorCode::from_code(code).ok_or(DecodeError::BadCode {
        kind: k,
        field: "code",
        value: code,
    })
}

fn decode_welcome(body: &[u8]) -> Result<Welcome, DecodeError> {
    let k = kind::WELCOME;
    let (b, _): (WelcomeBody, _) = head(k, body)?;
    if b.version.get() != PROTOCOL_VERSION {
        return Err(DecodeError::VersionMismatch {
            got: b.version.get(),
            want: PROTOCOL_VERSION,
        });
    }
    let b: WelcomeBody = exact(k, body)?;
    reserved(k, b.reserved.get() == 0)?;
    let h = b.own_handle.get();
    Ok(Welcome {
        tick_ms: b.tick_ms.get(),
        entity: EntityId(b.entity.get()),
        own_handle: (h != NO_HANDLE).then_some(h),
        client_body_bytes_max: b.client_body_bytes_max.get(),
        bounds: Rect {
            min_x: b.min_x.get(),
            min_z: b.min_z.get(),
            max_x: b.max_x.get(),
            max_z: b.max_z.get(),
        },
        server_time_us: b.server_time_us.get(),
        next_seq: b.next_seq.get(),
        pos: Vec3 {
            x: b.x.get(),
            y: b.y.get(),
            z: b.z.get(),
        },
        space: b.space.get(),
        space_type: b.space_type.get(),
    })
}

impl<'a> ServerMsg<'a> {
    /// Decodes one frame sent by the server.
    ///
    /// # Errors
    /// Any [`DecodeError`]: unknown kind, flags, version, sizes, reserved
    /// fields, unknown codes, bad UTF-8 or lengths.
    pub fn decode(f: &Frame<'a>) -> Result<ServerMsg<'a>, DecodeError> {
        no_flags(f)?;
        let k = f.kind;
        Ok(match k {
            kind::WELCOME => ServerMsg::Welcome(decode_welcome(f.body)?),
            kind::VIEW_BATCH => {
                let (h, batch): (ViewBatchHead, _) = head(k, f.body)?;
                ServerMsg::ViewBatch {
                    tick: h.tick.get(),
                    batch,
                }
            }
            kind::INPUT_ACK => {
                let b: InputAckBody = exact(k, f.body)?;
                ServerMsg::InputAck {
                    last_seq: b.last_seq.get(),
                }
            }
            kind::CALL_RESULT => {
                let b: CallResultBody = exact(k, f.body)?;
                ServerMsg::CallResult {
                    seq: b.seq.get(),
                    outcome: decode_outcome(&b)?,
                }
            }
            kind::ERROR => {
                let (h, t): (ErrorHead, _) = head(k, f.body)?;
                reserved(k, h.reserved.get() == 0)?;
                ServerMsg::Error {
                    seq: h.seq.get(),
                    code: code_of(k, h.code.get())?,
                    text: text(k, "text", t, (0, TEXT_BYTES_MAX))?,
                }
            }
            kind::PONG => {
                let b: PongBody = exact(k, f.body)?;
                ServerMsg::Pong {
                    nonce: b.nonce.get(),
                    client_time_us: b.client_time_us.get(),
                    server_time_us: b.server_time_us.get(),
                }
            }
            kind::KICK => {
                let (h, t): (KickHead, _) = head(k, f.body)?;
                reserved(k, h.reserved.get() == 0)?;
                ServerMsg::Kick {
                    code: code_of(k, h.code.get())?,
                    text: text(k, "text", t, (0, TEXT_BYTES_MAX))?,
                }
            }
            kind::SPACE_CHANGED => {
                let b: SpaceChangedBody = exact(k, f.body)?;
                ServerMsg::SpaceChanged {
                    space: b.space.get(),
                    type_id: b.type_id.get(),
                    pos: Vec3 {
                        x: b.x.get(),
                        y: b.y.get(),
                        z: b.z.get(),
                    },
                }
            }
            other => return Err(DecodeError::UnknownKind(other)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::client::frame::split_frame;

    fn one(bytes: &[u8]) -> Result<ServerMsg<'_>, DecodeError> {
        let (f, used) = split_frame(bytes, 1 << 20)?.expect("a whole frame");
        assert_eq!(used, bytes.len());
        ServerMsg::decode(&f)
    }

    #[test]
    fn view_batch_header_matches_the_encoder() {
        let batch = [2u8, 7, 2, 9];
        let mut b = Vec::new();
        ServerMsg::ViewBatch {
            tick: 42,
            batch: &batch,
        }
        .encode(&mut b);
        assert_eq!(view_batch_header(42, batch.len())[..], b[..16]);
        assert_eq!(
            one(&b),
            Ok(ServerMsg::ViewBatch {
                tick: 42,
                batch: &batch
            })
        );
    }

    #[test]
    fn call_results_are_canonical() {
        let mut b = Vec::new();
        ServerMsg::CallResult {
            seq: 3,
            outcome: CallOutcome::Applied,
        }
        .encode(&mut b);
        assert!(one(&b).is_ok());
        let mut dirty = b.clone();
        dirty[8 + 16] = 1; // value byte on an Applied
        assert_eq!(
            one(&dirty),
            Err(DecodeError::Reserved {
                kind: kind::CALL_RESULT
            })
        );
        let mut status = b.clone();
        status[8 + 8] = 9;
        assert!(matches!(
            one(&status),
            Err(DecodeError::BadCode {
                field: "status",
                ..
            })
        ));
        let mut refused = b;
        refused[8 + 8] = 3;
        refused[8 + 10] = 99;
        assert!(matches!(
            one(&refused),
            Err(DecodeError::BadCode {
                field: "reason",
                ..
            })
        ));
    }

    #[test]
    fn unknown_kinds_and_codes_are_refused() {
        let mut b = Vec::new();
        ServerMsg::Kick {
            code: ErrorCode::Shutdown,
            text: "bye",
        }
        .encode(&mut b);
        let mut other = b.clone();
        other[4] = 0x01; // kind 0x0001: a client kind
        other[5] = 0x00;
        assert_eq!(one(&other), Err(DecodeError::UnknownKind(0x0001)));
        let mut code = b;
        code[8] = 200;
        assert!(matches!(
            one(&code),
            Err(DecodeError::BadCode { field: "code", .. })
        ));
    }
}
