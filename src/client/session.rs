//! [`ClientSession`]: one game client's protocol state, sans-IO.
//!
//! Owns the client end of one connection: the handshake, input sequence
//! numbers and their send times, pending calls, the outgoing byte buffer,
//! the streaming decode of what the server sends, the world as the client
//! sees it ([`ClientView`], which checks every view rule) and the checks of
//! the session's own rules (acks rise and never pass what was sent, call
//! results match pending calls, nothing before Welcome). It never touches a
//! socket or a clock: the driver (loadgen's TCP bots, tests) passes time in,
//! writes [`ClientSession::transmit`] out and feeds received bytes.
//!
//! # Driving it
//! ```text
//! session.connect(name, token)?;              // queues Hello + Login
//! loop {
//!     write(session.transmit()); session.advance_transmit(n);
//!     n = read(session.read_buf(64 << 10)); session.handle_read(now, n, &mut hooks);
//!     while let Some(ev) = session.poll_event() { ... }
//!     session.send_move(now, pos, yaw)?;        // when live
//! }
//! ```

use super::inflight::{CallTracker, InputTracker};
use super::report::{
    CallKind, SessionCounters, SessionEvent, SessionHooks, SessionRule, SessionViolation,
    UpdateSeen,
};
use crate::core::entity::TypeRegistry;
use crate::core::geom::Vec3;
use crate::core::time::Time;
use crate::core::view::{ClientEvent, ClientView, ClientViewParams, Handle};
use crate::wire::client::{
    ClientMsg, FrameDecoder, ServerMsg, Welcome, WireParams, HEADER_BYTES, NAME_BYTES_MAX,
    PROTOCOL_VERSION, TOKEN_BYTES_MAX,
};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// Bounds of a [`ClientSession`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientSessionParams {
    /// Largest frame body accepted from the server. Default
    /// [`WireParams::server_body_bytes_max`] (4 MiB).
    pub body_bytes_max: u32,
    /// Bounds of the client view.
    pub view: ClientViewParams,
    /// Most inputs sent and not acknowledged. Default 1024.
    pub inputs_in_flight_max: usize,
    /// Most calls waiting for their result. Default 64.
    pub calls_pending_max: usize,
    /// Most events queued for [`ClientSession::poll_event`] (more are
    /// counted and dropped). Default 256.
    pub events_max: usize,
    /// Most session violations kept with detail (all are counted).
    /// Default 256.
    pub violations_max: usize,
    /// Most bytes queued for sending. Default 256 KiB.
    pub transmit_bytes_max: usize,
    /// Apply and check every view event (default). `false`: every frame
    /// and view event is still decoded, acks, calls and the own stream are
    /// handled and checked as always, but other entities' events are only
    /// reported to the hooks (no entity, no position) and neither applied
    /// nor checked ([`ClientView::handle_batch_own_inspect`]): a load
    /// generator's cheap bots.
    pub view_checks: bool,
}

impl Default for ClientSessionParams {
    fn default() -> Self {
        ClientSessionParams {
            body_bytes_max: WireParams::default().server_body_bytes_max,
            view: ClientViewParams::default(),
            inputs_in_flight_max: 1024,
            calls_pending_max: 64,
            events_max: 256,
            violations_max: 256,
            transmit_bytes_max: 256 << 10,
            view_checks: true,
        }
    }
}

/// Where a session is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionState {
    /// Not connected yet.
    Idle,
    /// Hello and Login queued, waiting for Welcome.
    Handshake,
    /// Welcomed: inputs may be sent.
    Live,
    /// Ended (Bye, Kick, refused handshake, broken stream, closed socket).
    Closed,
}

/// Why the session refused to send something (nothing was queued).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    /// The session is not live (inputs need a Welcome first).
    #[error("session is {0:?}, not live")]
    NotLive(SessionState),
    /// `connect` on a session already started.
    #[error("session already started")]
    AlreadyStarted,
    /// A login name that is empty or too long.
    #[error("login name must be 1..={NAME_BYTES_MAX} bytes")]
    BadName,
    /// A login token that is too long.
    #[error("login token over {TOKEN_BYTES_MAX} bytes")]
    TokenTooLong,
    /// `inputs_in_flight_max` inputs wait for their ack.
    #[error("too many inputs in flight")]
    InputsInFlight,
    /// `calls_pending_max` calls wait for their result.
    #[error("too many calls pending")]
    CallsPending,
    /// `transmit_bytes_max` bytes wait to be written.
    #[error("transmit buffer full")]
    TransmitFull,
    /// A space change is under way (no Move, no second EnterSpace until
    /// SpaceChanged or its Error).
    #[error("a space change is under way")]
    SpaceChanging,
}

/// The client end of one connection (see the module doc).
#[derive(Debug)]
pub struct ClientSession {
    decoder: FrameDecoder,
    core: Core,
}

/// Everything but the decoder, so a frame borrowed from the decoder can be
/// handled with `&mut Core`.
#[derive(Debug)]
struct Core {
    params: ClientSessionParams,
    registry: Arc<TypeRegistry>,
    state: SessionState,
    welcome: Option<Welcome>,
    view: Option<ClientView>,
    inputs: InputTracker,
    calls: CallTracker,
    out: Vec<u8>,
    out_start: usize,
    events: VecDeque<SessionEvent>,
    violations: Vec<SessionViolation>,
    /// Every session violation, by [`SessionRule::name`].
    violation_kinds: BTreeMap<&'static str, u64>,
    counters: SessionCounters,
    last_text: String,
    last_tick: Option<u64>,
    /// `(space, type)` after the first SpaceChanged (before: the world).
    space: Option<(u32, u32)>,
    space_pending: bool,
    /// The server closed the session (a Kick, or an Error refusing the
    /// handshake): frames it still sends are decoded only to be reported
    /// as [`SessionRule::Unexpected`].
    closed_by_server: bool,
}

impl ClientSession {
    /// A session that will know entity types from `registry`.
    pub fn new(params: ClientSessionParams, registry: Arc<TypeRegistry>) -> Self {
        ClientSession {
            decoder: FrameDecoder::new(params.body_bytes_max),
            core: Core {
                params,
                registry,
                state: SessionState::Idle,
                closed_by_server: false,
                welcome: None,
                view: None,
                inputs: InputTracker::new(params.inputs_in_flight_max),
                calls: CallTracker::new(params.calls_pending_max),
                out: Vec::new(),
                out_start: 0,
                events: VecDeque::with_capacity(params.events_max),
                violations: Vec::new(),
                violation_kinds: BTreeMap::new(),
                counters: SessionCounters::default(),
                last_text: String::new(),
                last_tick: None,
                space: None,
                space_pending: false,
            },
        }
    }

    /// Queues Hello and Login.
    ///
    /// # Errors
    /// [`SessionError::AlreadyStarted`], [`SessionError::BadName`],
    /// [`SessionError::TokenTooLong`].
    pub fn connect(&mut self, name: &str, token: Option<&[u8]>) -> Result<(), SessionError> {
        let c = &mut self.core;
        if c.state != SessionState::Idle {
            return Err(SessionError::AlreadyStarted);
        }
        if name.is_empty() || name.len() > NAME_BYTES_MAX {
            return Err(SessionError::BadName);
        }
        if token.is_some_and(|t| t.len() > TOKEN_BYTES_MAX) {
            return Err(SessionError::TokenTooLong);
        }
        c.queue(&ClientMsg::Hello {
            version: PROTOCOL_VERSION,
        });
        c.queue(&ClientMsg::Login { name, token });
        c.state = SessionState::Handshake;
        Ok(())
    }

    /// Queues a Move; returns its input seq.
    ///
    /// # Errors
    /// [`SessionError::NotLive`], [`SessionError::InputsInFlight`],
    /// [`SessionError::TransmitFull`].
    pub fn send_move(&mut self, now: Time, pos: Vec3, yaw: f32) -> Result<u64, SessionError> {
        if self.core.space_pending {
            return Err(SessionError::SpaceChanging);
        }
        let seq = self.core.check_input(44, None)?;
        self.core.send_input(
            now,
            None,
            &ClientMsg::Move {
                seq,
                client_time_us: now.0,
                pos,
                yaw,
            },
        );
        Ok(seq)
    }

    /// Queues a Hit on the entity shown under `target`; returns its seq.
    ///
    /// # Errors
    /// As [`ClientSession::send_move`], plus [`SessionError::CallsPending`].
    pub fn send_hit(
        &mut self,
        now: Time,
        target: Handle,
        damage: i64,
    ) -> Result<u64, SessionError> {
        let seq = self.core.check_input(32, Some(CallKind::Hit))?;
        let msg = ClientMsg::Hit {
            seq,
            client_time_us: now.0,
            target,
            damage,
        };
        self.core.send_input(now, Some(CallKind::Hit), &msg);
        Ok(seq)
    }

    /// Queues a SetProp of property `prop` to `value` (the entity value
    /// encoding of its type); returns its seq.
    ///
    /// # Errors
    /// As [`ClientSession::send_hit`].
    pub fn send_set_prop(
        &mut self,
        now: Time,
        prop: u16,
        value: &[u8],
    ) -> Result<u64, SessionError> {
        let seq = self
            .core
            .check_input(20 + value.len(), Some(CallKind::SetProp))?;
        let msg = ClientMsg::SetProp {
            seq,
            client_time_us: now.0,
            prop,
            value,
        };
        self.core.send_input(now, Some(CallKind::SetProp), &msg);
        Ok(seq)
    }

    /// Queues an EnterSpace: by `space` id (`type_id` 0) or by `type_id`
    /// (`space` 0). Until the SpaceChanged (or its Error) arrives, moves
    /// are refused here ([`SessionError::SpaceChanging`]).
    ///
    /// # Errors
    /// [`SessionError::NotLive`], [`SessionError::TransmitFull`],
    /// [`SessionError::SpaceChanging`].
    pub fn send_enter_space(&mut self, space: u32, type_id: u32) -> Result<(), SessionError> {
        self.core.check_room(SessionState::Live, 8)?;
        if self.core.space_pending {
            return Err(SessionError::SpaceChanging);
        }
        self.core.queue(&ClientMsg::EnterSpace { space, type_id });
        self.core.space_pending = true;
        self.core.counters.space_requests += 1;
        Ok(())
    }

    /// The space and its type after the last SpaceChanged (`None`: the
    /// world the session started in).
    pub fn space(&self) -> Option<(u32, u32)> {
        self.core.space
    }

    /// True while a space change is under way.
    pub fn space_pending(&self) -> bool {
        self.core.space_pending
    }

    /// Queues a Ping (the Pong's round trip is reported as an event).
    ///
    /// # Errors
    /// [`SessionError::NotLive`], [`SessionError::TransmitFull`].
    pub fn send_ping(&mut self, now: Time, nonce: u64) -> Result<(), SessionError> {
        self.core.check_room(SessionState::Live, 16)?;
        self.core.queue(&ClientMsg::Ping {
            nonce,
            client_time_us: now.0,
        });
        Ok(())
    }

    /// Queues a Bye and closes the session (what is queued may still be
    /// written; nothing more is decoded).
    ///
    /// # Errors
    /// [`SessionError::NotLive`] unless live or in the handshake,
    /// [`SessionError::TransmitFull`].
    pub fn send_bye(&mut self, now: Time) -> Result<(), SessionError> {
        if self.core.state == SessionState::Handshake {
            self.core.check_room(SessionState::Handshake, 0)?;
        } else {
            self.core.check_room(SessionState::Live, 0)?;
        }
        self.core.queue(&ClientMsg::Bye);
        self.core.close(now, None);
        Ok(())
    }

    /// Bytes waiting to be written.
    pub fn transmit(&self) -> &[u8] {
        &self.core.out[self.core.out_start..]
    }

    /// Marks the first `n` bytes of [`ClientSession::transmit`] written.
    ///
    /// # Panics
    /// If `n` is more than is waiting.
    pub fn advance_transmit(&mut self, n: usize) {
        let c = &mut self.core;
        assert!(
            c.out_start + n <= c.out.len(),
            "advance past the transmit buffer"
        );
        c.out_start += n;
        if c.out_start == c.out.len() {
            c.out.clear();
            c.out_start = 0;
        }
    }

    /// Feeds received bytes (copied into the decoder).
    pub fn handle_bytes(&mut self, now: Time, bytes: &[u8], hooks: &mut impl SessionHooks) {
        self.decoder.push(bytes);
        self.drain(now, hooks);
    }

    /// A window to read up to `want` bytes into (no copy); follow with
    /// [`ClientSession::handle_read`].
    pub fn read_buf(&mut self, want: usize) -> &mut [u8] {
        self.decoder.read_buf(want)
    }

    /// Handles the `n` bytes read into the last [`ClientSession::read_buf`].
    ///
    /// # Panics
    /// If `n` is larger than that window.
    pub fn handle_read(&mut self, now: Time, n: usize, hooks: &mut impl SessionHooks) {
        self.decoder.commit(n);
        self.drain(now, hooks);
    }

    /// The connection closed (end of stream or socket error).
    pub fn handle_eof(&mut self, now: Time) {
        let buffered = self.decoder.buffered();
        if buffered > 0 && self.core.state != SessionState::Closed {
            self.core
                .violate(now, SessionRule::TruncatedStream { buffered });
        }
        if self.core.state != SessionState::Closed {
            self.core.close(now, None);
        }
    }

    /// Decodes and handles every whole frame received. After a close of
    /// the client's own (Bye, a broken stream) nothing more is decoded;
    /// after the server's (Kick, refused handshake) every further frame is
    /// a violation ([`SessionRule::Unexpected`]) and has no effect.
    fn drain(&mut self, now: Time, hooks: &mut impl SessionHooks) {
        let c = &mut self.core;
        while c.state != SessionState::Closed || c.closed_by_server {
            match self.decoder.next_frame() {
                Ok(None) => break,
                Ok(Some(f)) => {
                    c.counters.frames_in += 1;
                    match ServerMsg::decode(&f) {
                        Ok(msg) if c.state == SessionState::Closed => {
                            let kind = msg.kind();
                            c.violate(now, SessionRule::Unexpected { kind });
                        }
                        Ok(msg) => c.handle(now, msg, hooks),
                        Err(e) => c.violate(now, SessionRule::Decode(e)),
                    }
                }
                Err(e) => {
                    c.violate(now, SessionRule::Decode(e));
                    // Nothing after broken framing can be read.
                    c.closed_by_server = false;
                    if c.state != SessionState::Closed {
                        c.close(now, None);
                    }
                }
            }
        }
        c.counters.bytes_in = self.decoder.bytes();
    }

    /// The next event, in arrival order.
    pub fn poll_event(&mut self) -> Option<SessionEvent> {
        self.core.events.pop_front()
    }

    /// Where the session is.
    pub fn state(&self) -> SessionState {
        self.core.state
    }

    /// The Welcome, once received.
    pub fn welcome(&self) -> Option<&Welcome> {
        self.core.welcome.as_ref()
    }

    /// The client's world (after Welcome).
    pub fn view(&self) -> Option<&ClientView> {
        self.core.view.as_ref()
    }

    /// Running totals.
    pub fn counters(&self) -> &SessionCounters {
        &self.core.counters
    }

    /// Session violations kept (the view's are in [`ClientView::violations`]).
    pub fn violations(&self) -> &[SessionViolation] {
        &self.core.violations
    }

    /// Every violation: the session's and the view's.
    pub fn violation_count(&self) -> u64 {
        let view = self
            .core
            .view
            .as_ref()
            .map_or(0, ClientView::violation_count);
        self.core.counters.violations + view
    }

    /// Every violation, the session's and the view's, counted by rule name
    /// ([`SessionRule::name`], [`crate::core::view::Rule::name`]; the two
    /// share `Decode`).
    pub fn violation_kinds(&self) -> BTreeMap<&'static str, u64> {
        let mut kinds = self.core.violation_kinds.clone();
        if let Some(view) = &self.core.view {
            for (k, n) in view.violation_kinds() {
                *kinds.entry(k).or_default() += n;
            }
        }
        kinds
    }

    /// The input seq the next input gets.
    pub fn next_seq(&self) -> u64 {
        self.core.inputs.next_seq()
    }

    /// The last input seq acknowledged (0 before any).
    pub fn last_acked(&self) -> u64 {
        self.core.inputs.last_acked()
    }

    /// Inputs sent and not acknowledged.
    pub fn inputs_in_flight(&self) -> usize {
        self.core.inputs.in_flight()
    }

    /// Calls waiting for their result.
    pub fn calls_pending(&self) -> usize {
        self.core.calls.pending().len()
    }

    /// The tick of the last ViewBatch.
    pub fn last_tick(&self) -> Option<u64> {
        self.core.last_tick
    }

    /// The text of the last Error or Kick.
    pub fn last_text(&self) -> &str {
        &self.core.last_text
    }
}

impl Core {
    fn queue(&mut self, msg: &ClientMsg<'_>) {
        if self.out_start > 0 && self.out_start * 2 >= self.out.len() {
            self.out.drain(..self.out_start);
            self.out_start = 0;
        }
        let before = self.out.len();
        msg.encode(&mut self.out);
        self.counters.frames_out += 1;
        self.counters.bytes_out += (self.out.len() - before) as u64;
    }

    fn check_room(&self, state: SessionState, body: usize) -> Result<(), SessionError> {
        if self.state != state {
            return Err(SessionError::NotLive(self.state));
        }
        if self.out.len() - self.out_start + HEADER_BYTES + body > self.params.transmit_bytes_max {
            return Err(SessionError::TransmitFull);
        }
        Ok(())
    }

    /// Checks an input of `body` bytes may be queued; returns its seq.
    fn check_input(&self, body: usize, call: Option<CallKind>) -> Result<u64, SessionError> {
        self.check_room(SessionState::Live, body)?;
        if !self.inputs.can_send() {
            return Err(SessionError::InputsInFlight);
        }
        if call.is_some() && !self.calls.can_send() {
            return Err(SessionError::CallsPending);
        }
        Ok(self.inputs.next_seq())
    }

    fn send_input(&mut self, now: Time, call: Option<CallKind>, msg: &ClientMsg<'_>) {
        let seq = self.inputs.record(now);
        debug_assert_eq!(msg.seq(), Some(seq));
        if let Some(kind) = call {
            self.calls.record(seq, kind, now);
            self.counters.calls_sent += 1;
        }
        self.counters.inputs_sent += 1;
        self.queue(msg);
    }

    fn event(&mut self, ev: SessionEvent) {
        if self.events.len() < self.params.events_max {
            self.events.push_back(ev);
        } else {
            self.counters.events_dropped += 1;
        }
    }

    fn violate(&mut self, at: Time, rule: SessionRule) {
        self.counters.violations += 1;
        *self.violation_kinds.entry(rule.name()).or_default() += 1;
        if self.violations.len() < self.params.violations_max {
            self.violations.push(SessionViolation { at, rule });
        }
    }

    fn close(&mut self, at: Time, code: Option<crate::wire::client::ErrorCode>) {
        self.state = SessionState::Closed;
        self.event(SessionEvent::Closed { code, at });
    }

    fn handle(&mut self, now: Time, msg: ServerMsg<'_>, hooks: &mut impl SessionHooks) {
        let live = self.state == SessionState::Live;
        match msg {
            ServerMsg::Welcome(w) if self.state == SessionState::Handshake => {
                self.state = SessionState::Live;
                self.welcome = Some(w);
                self.inputs.resume_at(w.next_seq);
                let reg = Arc::clone(&self.registry);
                self.view = Some(ClientView::new(w.entity, reg, self.params.view));
                self.event(SessionEvent::Welcomed(w));
            }
            ServerMsg::ViewBatch { tick, batch } if live => self.batch(now, tick, batch, hooks),
            ServerMsg::InputAck { last_seq } if live => {
                let r = self
                    .inputs
                    .ack(last_seq, |seq, at| hooks.on_input_acked(seq, at, now));
                match r {
                    Ok(n) => self.counters.inputs_acked += n,
                    Err(rule) => self.violate(now, rule),
                }
            }
            ServerMsg::CallResult { seq, outcome } if live => match self.calls.finish(seq) {
                Some(c) => {
                    self.counters.calls_done += 1;
                    self.event(SessionEvent::CallDone {
                        seq,
                        kind: c.kind,
                        outcome,
                        sent_at: c.sent_at,
                        at: now,
                    });
                }
                None => self.violate(now, SessionRule::UnknownCall { seq }),
            },
            ServerMsg::Error { seq, code, text } => self.error(now, seq, code, text),
            ServerMsg::Pong {
                nonce,
                client_time_us,
                server_time_us,
            } if live => {
                self.counters.pongs += 1;
                self.event(SessionEvent::Pong {
                    nonce,
                    rtt_us: now.0.saturating_sub(client_time_us),
                    server_time_us,
                });
            }
            ServerMsg::Kick { code, text } => {
                self.set_text(text);
                self.close(now, Some(code));
                self.closed_by_server = true;
            }
            ServerMsg::SpaceChanged {
                space,
                type_id,
                pos,
            } if live && self.space_pending => {
                self.space_pending = false;
                self.space = Some((space, type_id));
                self.counters.space_changes += 1;
                self.event(SessionEvent::SpaceChanged {
                    space,
                    type_id,
                    pos,
                    at: now,
                });
            }
            other => {
                let kind = other.kind();
                self.violate(now, SessionRule::Unexpected { kind });
            }
        }
    }

    fn set_text(&mut self, text: &str) {
        self.last_text.clear();
        self.last_text.push_str(text);
    }

    fn error(&mut self, now: Time, seq: u64, code: crate::wire::client::ErrorCode, text: &str) {
        use crate::wire::client::ErrorCode as C;
        self.counters.errors += 1;
        if matches!(
            code,
            C::UnknownSpaceType | C::UnknownSpace | C::SpaceFull | C::SpaceNotAllowed
        ) {
            self.space_pending = false;
        }
        self.set_text(text);
        if seq > self.inputs.last_sent() {
            self.violate(now, SessionRule::ErrorUnsent { seq });
        } else if seq != 0 && self.calls.finish(seq).is_some() {
            self.counters.calls_done += 1;
        }
        self.event(SessionEvent::Refused { seq, code, at: now });
        if self.state == SessionState::Handshake {
            self.close(now, Some(code));
            self.closed_by_server = true;
        }
    }

    fn batch(&mut self, now: Time, tick: u64, batch: &[u8], hooks: &mut impl SessionHooks) {
        self.counters.batches += 1;
        self.counters.batch_bytes += batch.len() as u64;
        self.last_tick = Some(tick);
        let counters = &mut self.counters;
        let view = self.view.as_mut().expect("live sessions have a view");
        let seen = |ev: &ClientEvent<'_>, entity, pos| {
            match ev {
                ClientEvent::Enter { .. } => counters.enters += 1,
                ClientEvent::Leave { .. } => counters.leaves += 1,
                ClientEvent::Move { .. }
                | ClientEvent::Props { .. }
                | ClientEvent::MoveProps { .. } => counters.updates += 1,
                ClientEvent::Resync { .. } => counters.resyncs += 1,
                ClientEvent::Detail { .. } => counters.details += 1,
                ClientEvent::Own { .. } | ClientEvent::OwnMove { .. } => counters.own_updates += 1,
                ClientEvent::Degraded { .. } => counters.degraded_notices += 1,
            }
            hooks.on_update(&UpdateSeen::of(tick, now, ev, entity, pos));
        };
        if self.params.view_checks {
            view.handle_batch_inspect(batch, seen);
        } else {
            view.handle_batch_own_inspect(batch, seen);
        }
    }
}
