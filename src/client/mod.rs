//! The client library core, sans-IO: one game client's end of the
//! protocol, used by loadgen's bots and by tests.
//!
//! Owns the client side of a session (handshake, input sequencing, call
//! tracking, decoding what the server sends, the client's view of the world
//! and every rule check on it). It knows the wire format
//! ([`crate::wire::client`]) and the view model ([`crate::core::view`]); it
//! never touches sockets, threads or clocks (the TCP driver comes with
//! loadgen and passes time in).
//!
//! - [`session`]: [`ClientSession`], the state machine.
//! - [`inflight`]: input seqs with send times, pending calls.
//! - [`report`]: counters, events, violations, latency hooks.

pub mod inflight;
pub mod report;
pub mod session;

pub use inflight::{CallTracker, InputTracker, PendingCall};
pub use report::{
    CallKind, SessionCounters, SessionEvent, SessionHooks, SessionRule, SessionViolation,
    UpdateKind, UpdateSeen,
};
pub use session::{ClientSession, ClientSessionParams, SessionError, SessionState};
