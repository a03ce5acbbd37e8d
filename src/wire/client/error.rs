//! Typed failures of the client protocol: decoding errors and the codes
//! the server sends back.
//!
//! Owns [`DecodeError`] (why bytes from the other end were refused: every
//! rule untrusted bytes can break has a variant, none is a panic),
//! [`ErrorCode`] (the gateway's refusal rules, carried by `Error` and
//! `Kick` frames, each with a stable rule name) and [`RefuseReason`] (why a
//! call was refused at the real, carried by `CallResult`). It knows nothing
//! of frames or sessions.

use crate::core::combat::HitRefused;
use thiserror::Error;

/// Why bytes could not be decoded as protocol frames or messages.
///
/// A framing error ([`DecodeError::FrameTooLarge`]) poisons the stream (the
/// next frame boundary is unknown); the others concern one frame, whose
/// boundaries are still known, so a tolerant peer may skip it.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// A frame header announced a body longer than the configured limit.
    #[error("frame body of {len} bytes exceeds the limit of {max}")]
    FrameTooLarge {
        /// The body length announced.
        len: u32,
        /// The limit.
        max: u32,
    },
    /// A message kind this side does not accept.
    #[error("unknown message kind {0:#06x}")]
    UnknownKind(u16),
    /// Frame header flags other than 0 (reserved in version 1).
    #[error("frame flags {flags:#06x} on kind {kind:#06x} are reserved")]
    BadFlags {
        /// The message kind.
        kind: u16,
        /// The flags read.
        flags: u16,
    },
    /// A Hello that does not start with [`super::MAGIC`].
    #[error("bad magic {0:02x?}")]
    BadMagic([u8; 4]),
    /// A Hello (or Welcome) for another protocol version.
    #[error("protocol version {got} (this side speaks {want})")]
    VersionMismatch {
        /// The version received.
        got: u16,
        /// The version this side speaks.
        want: u16,
    },
    /// A body shorter than its fixed part.
    #[error("kind {kind:#06x}: body of {len} bytes, at least {need} needed")]
    Truncated {
        /// The message kind.
        kind: u16,
        /// The body length.
        len: usize,
        /// The length needed.
        need: usize,
    },
    /// A fixed-size body with bytes left over.
    #[error("kind {kind:#06x}: {extra} trailing bytes")]
    Trailing {
        /// The message kind.
        kind: u16,
        /// Bytes after the message.
        extra: usize,
    },
    /// A name or text that is not UTF-8.
    #[error("kind {kind:#06x}: text is not UTF-8")]
    BadUtf8 {
        /// The message kind.
        kind: u16,
    },
    /// A reserved field or bit that is not 0.
    #[error("kind {kind:#06x}: reserved field not zero")]
    Reserved {
        /// The message kind.
        kind: u16,
    },
    /// An enumerated field (error code, call status, refuse reason) with an
    /// unknown value.
    #[error("kind {kind:#06x}: unknown {field} value {value}")]
    BadCode {
        /// The message kind.
        kind: u16,
        /// Which field.
        field: &'static str,
        /// The value read.
        value: u16,
    },
    /// A name, token or text longer than the protocol allows (or empty
    /// where it must not be).
    #[error("{what} of {len} bytes outside 1..={max}")]
    BadLength {
        /// Which field.
        what: &'static str,
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
}

macro_rules! codes {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $v:ident = $n:literal, $rule:literal;)* }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[repr(u16)]
        pub enum $name {
            $($(#[$vm])* $v = $n,)*
        }

        impl $name {
            /// Every value, in code order.
            pub const ALL: &'static [$name] = &[$($name::$v),*];

            /// The wire value.
            pub const fn code(self) -> u16 {
                self as u16
            }

            /// The value of a wire code, `None` if unknown.
            pub const fn from_code(code: u16) -> Option<$name> {
                match code {
                    $($n => Some($name::$v),)*
                    _ => None,
                }
            }

            /// The stable rule name (kebab-case, what logs and counters use).
            pub const fn rule(self) -> &'static str {
                match self {
                    $($name::$v => $rule,)*
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.rule())
            }
        }
    };
}

codes! {
    /// The gateway's refusal rules, carried by `Error` (one message refused,
    /// the connection stays, except during the handshake) and `Kick` (the
    /// server closes the connection after this frame).
    ErrorCode {
        /// A message kind the server does not accept (or a client-bound kind).
        UnknownMessage = 1, "unknown-message";
        /// A frame body over the server's limit (fatal: sent in a Kick).
        FrameTooLarge = 2, "frame-too-large";
        /// A move farther than the speed limit allows since the last one.
        MoveTooFast = 3, "move-too-fast";
        /// A call (hit) on a handle the client does not see.
        NotVisible = 4, "not-visible";
        /// A SetProp of a property clients may not set.
        PropNotSettable = 5, "prop-not-settable";
        /// Bytes that break the protocol: a malformed body, a message out of
        /// place (input before Welcome, second Hello), reserved bits set.
        ProtocolViolation = 6, "protocol-violation";
        /// The client does not read its socket fast enough (fatal).
        SlowReader = 7, "slow-reader";
        /// A Hello without the magic (fatal).
        BadMagic = 8, "bad-magic";
        /// A Hello for a version the server does not speak (fatal).
        VersionMismatch = 9, "version-mismatch";
        /// Login refused: bad name or token (fatal).
        LoginRefused = 10, "login-refused";
        /// An input whose seq is not the next one (it is dropped).
        BadSequence = 11, "bad-sequence";
        /// A SetProp value that does not decode as the property's type.
        BadValue = 12, "bad-value";
        /// Too many messages per second.
        RateLimited = 13, "rate-limited";
        /// The server is full (fatal, during the handshake).
        ServerFull = 14, "server-full";
        /// The server shuts down (Kick).
        Shutdown = 15, "shutdown";
        /// No message for too long (Kick).
        IdleTimeout = 16, "idle-timeout";
        /// The same account logged in on another connection (Kick).
        Replaced = 17, "replaced";
        /// EnterSpace named a space type the server does not have.
        UnknownSpaceType = 18, "unknown-space-type";
        /// EnterSpace named a space that does not exist (or was reclaimed).
        UnknownSpace = 19, "unknown-space";
        /// The space (or the instance table) is full.
        SpaceFull = 20, "space-full";
        /// Not allowed now: already in that space, or a space change is
        /// under way.
        SpaceNotAllowed = 21, "space-not-allowed";
    }
}

codes! {
    /// Why a call was refused where it was executed (the entity's real).
    RefuseReason {
        /// The target is not in the caller's view or AOI.
        NotVisible = 1, "not-visible";
        /// An entity cannot hit itself.
        SelfTarget = 2, "self-target";
        /// Too soon after the previous hit.
        Cooldown = 3, "cooldown";
        /// The target is dead.
        Dead = 4, "dead";
        /// Same faction.
        SameFaction = 5, "same-faction";
        /// Beyond hit range.
        OutOfRange = 6, "out-of-range";
        /// The entity types lack `hp` or `faction`.
        NotCombatant = 7, "not-combatant";
        /// Too many hits pending.
        TooManyPending = 8, "too-many-pending";
        /// Negative or oversized damage.
        BadDamage = 9, "bad-damage";
        /// The property may not be set by clients.
        PropNotSettable = 10, "prop-not-settable";
        /// The value does not fit the property.
        BadValue = 11, "bad-value";
    }
}

impl From<&HitRefused> for RefuseReason {
    fn from(r: &HitRefused) -> RefuseReason {
        match r {
            HitRefused::NotVisible => RefuseReason::NotVisible,
            HitRefused::SelfTarget => RefuseReason::SelfTarget,
            HitRefused::Cooldown { .. } => RefuseReason::Cooldown,
            HitRefused::Dead => RefuseReason::Dead,
            HitRefused::SameFaction => RefuseReason::SameFaction,
            HitRefused::OutOfRange => RefuseReason::OutOfRange,
            HitRefused::NotCombatant => RefuseReason::NotCombatant,
            HitRefused::TooManyPending => RefuseReason::TooManyPending,
            HitRefused::BadDamage(_) => RefuseReason::BadDamage,
        }
    }
}

impl From<&DecodeError> for ErrorCode {
    /// The code a server sends when a client's bytes fail to decode.
    fn from(e: &DecodeError) -> ErrorCode {
        match e {
            DecodeError::FrameTooLarge { .. } => ErrorCode::FrameTooLarge,
            DecodeError::UnknownKind(_) => ErrorCode::UnknownMessage,
            DecodeError::BadMagic(_) => ErrorCode::BadMagic,
            DecodeError::VersionMismatch { .. } => ErrorCode::VersionMismatch,
            _ => ErrorCode::ProtocolViolation,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_names_are_unique() {
        let mut names: Vec<&str> = ErrorCode::ALL.iter().map(|c| c.rule()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ErrorCode::ALL.len());
        for &c in ErrorCode::ALL {
            assert_eq!(ErrorCode::from_code(c.code()), Some(c));
        }
        for &c in RefuseReason::ALL {
            assert_eq!(RefuseReason::from_code(c.code()), Some(c));
        }
        assert_eq!(ErrorCode::from_code(0), None);
        assert_eq!(ErrorCode::from_code(999), None);
        assert_eq!(ErrorCode::MoveTooFast.to_string(), "move-too-fast");
    }

    #[test]
    fn decode_errors_name_a_rule() {
        let e = DecodeError::FrameTooLarge { len: 9, max: 8 };
        assert_eq!(ErrorCode::from(&e), ErrorCode::FrameTooLarge);
        assert_eq!(
            ErrorCode::from(&DecodeError::Reserved { kind: 3 }),
            ErrorCode::ProtocolViolation
        );
        assert_eq!(
            RefuseReason::from(&HitRefused::BadDamage(-1)),
            RefuseReason::BadDamage
        );
    }
}
