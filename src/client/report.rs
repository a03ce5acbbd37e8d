//! What a [`super::ClientSession`] reports: counters, events, broken rules
//! and the latency hooks.
//!
//! Owns the plain data types the session fills ([`SessionCounters`],
//! [`SessionEvent`], [`SessionViolation`], [`UpdateSeen`]) and the
//! [`SessionHooks`] trait a driver implements to time updates and input
//! acknowledgements without a queue. No logic beyond small accessors.

use crate::core::entity::SyncKind;
use crate::core::geom::Vec3;
use crate::core::ids::EntityId;
use crate::core::time::Time;
use crate::core::view::{ClientEvent, Handle};
use crate::wire::client::{CallOutcome, DecodeError, ErrorCode, Welcome};

/// Running totals of one session.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SessionCounters {
    /// Frames received (decoded or not).
    pub frames_in: u64,
    /// Bytes received.
    pub bytes_in: u64,
    /// Frames queued for sending.
    pub frames_out: u64,
    /// Bytes queued for sending.
    pub bytes_out: u64,
    /// ViewBatch frames.
    pub batches: u64,
    /// Bytes of view batches (without frame headers).
    pub batch_bytes: u64,
    /// Enter events.
    pub enters: u64,
    /// Leave events.
    pub leaves: u64,
    /// Move, Props and MoveProps events.
    pub updates: u64,
    /// Resync events.
    pub resyncs: u64,
    /// Detail events (level-of-detail catch-ups).
    pub details: u64,
    /// Own-stream events.
    pub own_updates: u64,
    /// `Degraded` notices (the server's budget cannot carry the view).
    pub degraded_notices: u64,
    /// Inputs sent (Move, Hit, SetProp).
    pub inputs_sent: u64,
    /// Inputs acknowledged.
    pub inputs_acked: u64,
    /// Calls sent (Hit, SetProp).
    pub calls_sent: u64,
    /// Calls ended (CallResult, or an Error naming the call).
    pub calls_done: u64,
    /// Error frames.
    pub errors: u64,
    /// Pong frames.
    pub pongs: u64,
    /// Events dropped because the event queue was full.
    pub events_dropped: u64,
    /// EnterSpace requests sent.
    pub space_requests: u64,
    /// SpaceChanged frames (space changes done).
    pub space_changes: u64,
    /// Session rules broken (see [`SessionRule`]); the view's own
    /// violations are counted by the view.
    pub violations: u64,
}

/// Which call an input was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallKind {
    /// A Hit.
    Hit,
    /// A SetProp.
    SetProp,
}

/// Something the driver may act on (drained by
/// [`super::ClientSession::poll_event`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SessionEvent {
    /// The server accepted the session.
    Welcomed(Welcome),
    /// A call ended.
    CallDone {
        /// Its input seq.
        seq: u64,
        /// Hit or SetProp.
        kind: CallKind,
        /// How it ended.
        outcome: CallOutcome,
        /// When it was sent.
        sent_at: Time,
        /// When the result arrived.
        at: Time,
    },
    /// The server refused a message (the text is
    /// [`super::ClientSession::last_text`]).
    Refused {
        /// The input it names, 0 if none.
        seq: u64,
        /// The rule.
        code: ErrorCode,
        /// When.
        at: Time,
    },
    /// The avatar is in another space (the answer to EnterSpace).
    SpaceChanged {
        /// The space.
        space: u32,
        /// Its type.
        type_id: u32,
        /// The avatar's position there.
        pos: Vec3,
        /// When.
        at: Time,
    },
    /// A Pong.
    Pong {
        /// The ping's nonce.
        nonce: u64,
        /// Round trip (now minus the ping's client time), µs.
        rtt_us: u64,
        /// The server's clock, µs.
        server_time_us: u64,
    },
    /// The session ended: kicked (`Some(code)`), refused during the
    /// handshake, closed by Bye, by the peer, or by a broken stream.
    Closed {
        /// The server's rule, if it named one.
        code: Option<ErrorCode>,
        /// When.
        at: Time,
    },
}

/// A rule of the session the server broke.
#[derive(Clone, Debug, PartialEq)]
pub enum SessionRule {
    /// A frame or message that did not decode.
    Decode(DecodeError),
    /// An InputAck for a seq never sent.
    AckUnsent {
        /// The last seq sent.
        sent: u64,
        /// The seq acknowledged.
        got: u64,
    },
    /// An InputAck not above the previous one.
    AckNotIncreasing {
        /// The previous ack.
        prev: u64,
        /// This ack.
        got: u64,
    },
    /// A CallResult for a seq that is no pending call.
    UnknownCall {
        /// The seq.
        seq: u64,
    },
    /// An Error naming a seq never sent.
    ErrorUnsent {
        /// The seq.
        seq: u64,
    },
    /// A message out of place (a ViewBatch before Welcome, a second
    /// Welcome, anything after a Kick).
    Unexpected {
        /// The message kind.
        kind: u16,
    },
    /// The connection closed in the middle of a frame.
    TruncatedStream {
        /// Bytes left buffered.
        buffered: usize,
    },
}

impl SessionRule {
    /// The rule's name, as its variant is spelled (`TruncatedStream`): what
    /// reports group violations by.
    pub fn name(&self) -> &'static str {
        match self {
            SessionRule::Decode(_) => "Decode",
            SessionRule::AckUnsent { .. } => "AckUnsent",
            SessionRule::AckNotIncreasing { .. } => "AckNotIncreasing",
            SessionRule::UnknownCall { .. } => "UnknownCall",
            SessionRule::ErrorUnsent { .. } => "ErrorUnsent",
            SessionRule::Unexpected { .. } => "Unexpected",
            SessionRule::TruncatedStream { .. } => "TruncatedStream",
        }
    }
}

/// One broken rule, with when.
#[derive(Clone, Debug, PartialEq)]
pub struct SessionViolation {
    /// When it was seen.
    pub at: Time,
    /// The rule.
    pub rule: SessionRule,
}

/// What one view event was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpdateKind {
    /// Enter.
    Enter,
    /// Leave.
    Leave,
    /// Move.
    Move,
    /// Props.
    Props,
    /// MoveProps.
    MoveProps,
    /// Resync.
    Resync,
    /// The own stream, with its payload kind.
    Own(SyncKind),
    /// The server's budget notice (degraded or recovered).
    Degraded,
    /// A level-of-detail catch-up.
    Detail,
}

/// One view event as received, for latency measurement.
///
/// The view protocol carries no mover timestamp, so the time is the
/// receipt time; a load generator that knows when each bot sent each
/// position measures end-to-end latency by matching `entity` and `pos`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UpdateSeen {
    /// The server tick of the batch.
    pub tick: u64,
    /// When the batch's bytes were handed to the session.
    pub received_at: Time,
    /// What.
    pub kind: UpdateKind,
    /// The handle (`None` for the own stream).
    pub handle: Option<Handle>,
    /// The entity, if the event or the view names it.
    pub entity: Option<EntityId>,
    /// The absolute version carried (enters, resyncs, own events).
    pub version: Option<u64>,
    /// The low byte of an update's new version (moves, props, own moves).
    pub version_low: Option<u8>,
    /// Where the event put the entity (enter, resync, the moves), as the
    /// client resolved it.
    pub pos: Option<Vec3>,
}

impl UpdateSeen {
    /// The record of `ev` received at `at` in the batch of `tick`, which put
    /// its entity at `pos`.
    pub fn of(
        tick: u64,
        at: Time,
        ev: &ClientEvent<'_>,
        entity: Option<EntityId>,
        pos: Option<Vec3>,
    ) -> Self {
        let kind = match *ev {
            ClientEvent::Enter { .. } => UpdateKind::Enter,
            ClientEvent::Leave { .. } => UpdateKind::Leave,
            ClientEvent::Move { .. } => UpdateKind::Move,
            ClientEvent::Props { .. } => UpdateKind::Props,
            ClientEvent::MoveProps { .. } => UpdateKind::MoveProps,
            ClientEvent::Resync { .. } => UpdateKind::Resync,
            ClientEvent::Own { kind, .. } => UpdateKind::Own(kind),
            ClientEvent::OwnMove { .. } => UpdateKind::Own(SyncKind::Movement),
            ClientEvent::Degraded { .. } => UpdateKind::Degraded,
            ClientEvent::Detail { .. } => UpdateKind::Detail,
        };
        UpdateSeen {
            tick,
            received_at: at,
            kind,
            handle: ev.handle(),
            entity,
            version: ev.version(),
            version_low: ev.version_low(),
            pos,
        }
    }
}

/// Callbacks for per-event measurement (no queue, no allocation). Every
/// method has an empty default; `()` implements it.
pub trait SessionHooks {
    /// One view event, before the view applies it.
    fn on_update(&mut self, _seen: &UpdateSeen) {}
    /// Input `seq`, sent at `sent_at`, was acknowledged at `now`.
    fn on_input_acked(&mut self, _seq: u64, _sent_at: Time, _now: Time) {}
}

impl SessionHooks for () {}
