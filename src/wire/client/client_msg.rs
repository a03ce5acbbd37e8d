//! Client-to-server messages: [`ClientMsg`], its encoder and its untrusted
//! decoder (what the gateway runs on every frame a client sends).
//!
//! Owns the meaning of the client kinds; layouts are in `layout`, framing
//! in `frame`. Decoding borrows from the frame (names, tokens, values) and
//! allocates nothing; encoding appends one whole frame to a reused
//! `Vec<u8>`. Encoding then decoding gives the message back, and decoding
//! then encoding gives the bytes back (the format is canonical: reserved
//! fields must be 0, fixed bodies have exact sizes).

use super::error::DecodeError;
use super::frame::{self, exact, head, no_flags, reserved, text, Frame};
use super::layout::{
    kind, EnterSpaceBody, HelloBody, HitBody, LoginHead, MoveBody, PingBody, SetPropHead, MAGIC,
    PROTOCOL_VERSION,
};
use crate::core::geom::Vec3;
use zerocopy::IntoBytes;

/// Longest login name, in bytes (UTF-8, at least 1).
pub const NAME_BYTES_MAX: usize = 64;
/// Longest login token, in bytes.
pub const TOKEN_BYTES_MAX: usize = 1024;

/// One message from a client.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ClientMsg<'a> {
    /// Opens the session; must be the first frame.
    Hello {
        /// The protocol version the client speaks.
        version: u16,
    },
    /// Logs in; must follow Hello (may be in the same write).
    Login {
        /// Player name, 1..=[`NAME_BYTES_MAX`] bytes of UTF-8.
        name: &'a str,
        /// Opaque credential, at most [`TOKEN_BYTES_MAX`] bytes.
        token: Option<&'a [u8]>,
    },
    /// Movement input.
    Move {
        /// Input seq (consecutive from 1 over Move, Hit and SetProp).
        seq: u64,
        /// Client clock, µs.
        client_time_us: u64,
        /// New position.
        pos: Vec3,
        /// New heading.
        yaw: f32,
    },
    /// Hit an entity the client sees.
    Hit {
        /// Input seq.
        seq: u64,
        /// Client clock, µs.
        client_time_us: u64,
        /// The target's view handle.
        target: u32,
        /// Damage asked.
        damage: i64,
    },
    /// Set a property of the own entity.
    SetProp {
        /// Input seq.
        seq: u64,
        /// Client clock, µs.
        client_time_us: u64,
        /// Property index.
        prop: u16,
        /// The value in the entity value encoding of the property's type.
        value: &'a [u8],
    },
    /// Ping (answered by Pong).
    Ping {
        /// Echoed.
        nonce: u64,
        /// Client clock, µs (echoed).
        client_time_us: u64,
    },
    /// The client leaves; the server closes the connection.
    Bye,
    /// Go to another space: by id (`space != 0`, `type_id == 0`) or by
    /// type (`space == 0`; the least loaded instance, or a new one). The
    /// world's type goes back to the world. Answered by SpaceChanged or an
    /// Error; the client sends no Move until then (they are dropped).
    EnterSpace {
        /// Space id, or 0.
        space: u32,
        /// Type id, or 0.
        type_id: u32,
    },
}

impl ClientMsg<'_> {
    /// The message kind.
    pub fn kind(&self) -> u16 {
        match self {
            ClientMsg::Hello { .. } => kind::HELLO,
            ClientMsg::Login { .. } => kind::LOGIN,
            ClientMsg::Move { .. } => kind::MOVE,
            ClientMsg::Hit { .. } => kind::HIT,
            ClientMsg::SetProp { .. } => kind::SET_PROP,
            ClientMsg::Ping { .. } => kind::PING,
            ClientMsg::Bye => kind::BYE,
            ClientMsg::EnterSpace { .. } => kind::ENTER_SPACE,
        }
    }

    /// The input seq of an input message (Move, Hit, SetProp).
    pub fn seq(&self) -> Option<u64> {
        match *self {
            ClientMsg::Move { seq, .. }
            | ClientMsg::Hit { seq, .. }
            | ClientMsg::SetProp { seq, .. } => Some(seq),
            _ => None,
        }
    }

    /// Appends the whole frame (header and body) to `out`.
    ///
    /// # Panics
    /// If a name or token is over its limit (a bug of the caller, which
    /// must check what it was given).
    pub fn encode(&self, out: &mut Vec<u8>) {
        let at = frame::begin(out, self.kind());
        match *self {
            ClientMsg::Hello { version } => out.extend_from_slice(
                HelloBody {
                    magic: MAGIC,
                    version: version.into(),
                    reserved: 0.into(),
                }
                .as_bytes(),
            ),
            ClientMsg::Login { name, token } => encode_login(out, name, token),
            ClientMsg::Move {
                seq,
                client_time_us,
                pos,
                yaw,
            } => out.extend_from_slice(
                MoveBody {
                    seq: seq.into(),
                    client_time_us: client_time_us.into(),
                    x: pos.x.into(),
                    y: pos.y.into(),
                    z: pos.z.into(),
                    yaw: yaw.into(),
                }
                .as_bytes(),
            ),
            ClientMsg::Hit {
                seq,
                client_time_us,
                target,
                damage,
            } => out.extend_from_slice(
                HitBody {
                    seq: seq.into(),
                    client_time_us: client_time_us.into(),
                    target: target.into(),
                    reserved: 0.into(),
                    damage: damage.into(),
                }
                .as_bytes(),
            ),
            ClientMsg::SetProp {
                seq,
                client_time_us,
                prop,
                value,
            } => {
                let h = SetPropHead {
                    seq: seq.into(),
                    client_time_us: client_time_us.into(),
                    prop: prop.into(),
                    reserved: 0.into(),
                };
                out.extend_from_slice(h.as_bytes());
                out.extend_from_slice(value);
            }
            ClientMsg::Ping {
                nonce,
                client_time_us,
            } => out.extend_from_slice(
                PingBody {
                    nonce: nonce.into(),
                    client_time_us: client_time_us.into(),
                }
                .as_bytes(),
            ),
            ClientMsg::Bye => {}
            ClientMsg::EnterSpace { space, type_id } => out.extend_from_slice(
                EnterSpaceBody {
                    space: space.into(),
                    type_id: type_id.into(),
                }
                .as_bytes(),
            ),
        }
        frame::end(out, at);
    }
}

fn encode_login(out: &mut Vec<u8>, name: &str, token: Option<&[u8]>) {
    assert!(
        (1..=NAME_BYTES_MAX).contains(&name.len()),
        "login name length"
    );
    let t = token.unwrap_or(&[]);
    assert!(t.len() <= TOKEN_BYTES_MAX, "login token length");
    let h = LoginHead {
        flags: u8::from(token.is_some()),
        name_len: name.len() as u8,
        token_len: (t.len() as u16).into(),
    };
    out.extend_from_slice(h.as_bytes());
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(t);
}

impl<'a> ClientMsg<'a> {
    /// Decodes one frame sent by a client.
    ///
    /// # Errors
    /// Any [`DecodeError`]: unknown kind, flags, magic, version, sizes,
    /// reserved fields, bad UTF-8 or lengths.
    pub fn decode(f: &Frame<'a>) -> Result<ClientMsg<'a>, DecodeError> {
        no_flags(f)?;
        let k = f.kind;
        Ok(match k {
            kind::HELLO => decode_hello(f.body)?,
            kind::LOGIN => decode_login(f.body)?,
            kind::MOVE => {
                let b: MoveBody = exact(k, f.body)?;
                ClientMsg::Move {
                    seq: b.seq.get(),
                    client_time_us: b.client_time_us.get(),
                    pos: Vec3 {
                        x: b.x.get(),
                        y: b.y.get(),
                        z: b.z.get(),
                    },
                    yaw: b.yaw.get(),
                }
            }
            kind::HIT => {
                let b: HitBody = exact(k, f.body)?;
                reserved(k, b.reserved.get() == 0)?;
                ClientMsg::Hit {
                    seq: b.seq.get(),
                    client_time_us: b.client_time_us.get(),
                    target: b.target.get(),
                    damage: b.damage.get(),
                }
            }
            kind::SET_PROP => {
                let (h, value): (SetPropHead, _) = head(k, f.body)?;
                reserved(k, h.reserved.get() == 0)?;
                ClientMsg::SetProp {
                    seq: h.seq.get(),
                    client_time_us: h.client_time_us.get(),
                    prop: h.prop.get(),
                    value,
                }
            }
            kind::PING => {
                let b: PingBody = exact(k, f.body)?;
                ClientMsg::Ping {
                    nonce: b.nonce.get(),
                    client_time_us: b.client_time_us.get(),
                }
            }
            kind::BYE => {
                if !f.body.is_empty() {
                    let extra = f.body.len();
                    return Err(DecodeError::Trailing { kind: k, extra });
                }
                ClientMsg::Bye
            }
            kind::ENTER_SPACE => {
                let b: EnterSpaceBody = exact(k, f.body)?;
                let (space, type_id) = (b.space.get(), b.type_id.get());
                reserved(k, (space == 0) != (type_id == 0))?;
                ClientMsg::EnterSpace { space, type_id }
            }
            other => return Err(DecodeError::UnknownKind(other)),
        })
    }
}

/// Magic first, then version, then size: a Hello of a later version with a
/// longer body is refused as a version mismatch, not as trailing bytes.
fn decode_hello(body: &[u8]) -> Result<ClientMsg<'_>, DecodeError> {
    let k = kind::HELLO;
    let mut magic = [0u8; 4];
    let n = body.len().min(4);
    magic[..n].copy_from_slice(&body[..n]);
    if n < 4 || magic != MAGIC {
        return Err(DecodeError::BadMagic(magic));
    }
    let (h, _): (HelloBody, _) = head(k, body)?;
    let version = h.version.get();
    if version != PROTOCOL_VERSION {
        return Err(DecodeError::VersionMismatch {
            got: version,
            want: PROTOCOL_VERSION,
        });
    }
    let h: HelloBody = exact(k, body)?;
    reserved(k, h.reserved.get() == 0)?;
    Ok(ClientMsg::Hello { version })
}

fn decode_login(body: &[u8]) -> Result<ClientMsg<'_>, DecodeError> {
    let k = kind::LOGIN;
    let (h, rest): (LoginHead, _) = head(k, body)?;
    reserved(k, h.flags & !1 == 0)?;
    let has_token = h.flags & 1 != 0;
    let (name_len, token_len) = (usize::from(h.name_len), usize::from(h.token_len.get()));
    reserved(k, has_token || token_len == 0)?;
    let need = name_len + token_len;
    if rest.len() < need {
        return Err(DecodeError::Truncated {
            kind: k,
            len: body.len(),
            need: body.len() - rest.len() + need,
        });
    }
    if rest.len() > need {
        return Err(DecodeError::Trailing {
            kind: k,
            extra: rest.len() - need,
        });
    }
    let name = text(k, "name", &rest[..name_len], (1, NAME_BYTES_MAX))?;
    let token = &rest[name_len..];
    if token.len() > TOKEN_BYTES_MAX {
        return Err(DecodeError::BadLength {
            what: "token",
            len: token.len(),
            max: TOKEN_BYTES_MAX,
        });
    }
    Ok(ClientMsg::Login {
        name,
        token: has_token.then_some(token),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::client::frame::split_frame;

    fn one(bytes: &[u8]) -> Result<ClientMsg<'_>, DecodeError> {
        let (f, used) = split_frame(bytes, 1 << 16)?.expect("a whole frame");
        assert_eq!(used, bytes.len());
        ClientMsg::decode(&f)
    }

    #[test]
    fn hello_checks_magic_then_version() {
        let mut b = Vec::new();
        ClientMsg::Hello {
            version: PROTOCOL_VERSION,
        }
        .encode(&mut b);
        assert_eq!(
            one(&b),
            Ok(ClientMsg::Hello {
                version: PROTOCOL_VERSION
            })
        );
        let mut v4 = b.clone();
        v4[12] = PROTOCOL_VERSION as u8 + 1;
        v4.extend_from_slice(&[0; 4]);
        v4[0] = 12;
        assert_eq!(
            one(&v4),
            Err(DecodeError::VersionMismatch {
                got: PROTOCOL_VERSION + 1,
                want: PROTOCOL_VERSION
            })
        );
        let mut bad = b.clone();
        bad[8] = b'X';
        assert_eq!(one(&bad), Err(DecodeError::BadMagic(*b"XSRA")));
        let mut flags = b;
        flags[6] = 1;
        assert!(matches!(one(&flags), Err(DecodeError::BadFlags { .. })));
    }

    #[test]
    fn login_lengths_are_checked() {
        let mut b = Vec::new();
        let token: &[u8] = &[1, 2, 3];
        ClientMsg::Login {
            name: "bob",
            token: Some(token),
        }
        .encode(&mut b);
        assert_eq!(
            one(&b),
            Ok(ClientMsg::Login {
                name: "bob",
                token: Some(token)
            })
        );
        let mut empty = Vec::new();
        ClientMsg::Login {
            name: "x",
            token: None,
        }
        .encode(&mut empty);
        empty[9] = 0; // name_len 0, one trailing byte
        assert!(matches!(one(&empty), Err(DecodeError::Trailing { .. })));
        let mut bad = b.clone();
        bad[12] = 0xff;
        assert_eq!(one(&bad), Err(DecodeError::BadUtf8 { kind: kind::LOGIN }));
    }
}
