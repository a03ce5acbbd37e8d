//! [`Session`]: the server end of one client connection, sans-IO.
//!
//! Owns the handshake, the input rules with their refusals and strikes,
//! the acks (what the real processed plus what the gateway refused), the
//! map from a Hit's combat seq back to its client seq, and the frames to
//! write. The host feeds it frames split from the port's input
//! ([`Session::handle_frame`]), the proxy's downstream data
//! ([`Session::take_down`]) and the end of each tick
//! ([`Session::end_tick`]); it writes [`Session::output`] to the port.
//!
//! # A view batch framed in place
//! A view batch made in a pooled buffer (`core::down::DownPool`) has
//! [`FRAME_ROOM`] spare bytes before its kind byte, as many as the
//! ViewBatch header and the tick less that byte (checked at compile time).
//! When the session's output is empty (a tick's reply that is only an ack
//! writes nothing until the tick's end), the header is written over the
//! room and the buffer becomes the output; the old empty output goes back
//! to the pool. So the batch is not copied between the cell and the port's
//! send queue (`ClientPort::send_buf` takes the output in turn). Otherwise
//! (call results, or an InputAck held from the tick before for this update
//! when `send_every_ticks` > 1) it is copied after the frames already
//! written, as before; the host counts the batches framed in place. An
//! input acknowledgement riding the batch (`DownKind::ViewAcked`) is taken
//! off first and acks the forwarded inputs up to it; an empty batch that
//! only carried one writes no ViewBatch.
//!
//! # Rules (each refusal is one Error naming the rule, counted, a strike)
//! - handshake: Hello then Login, anything else is fatal (Error, close);
//! - `unknown-message`, `protocol-violation` (a body that does not decode,
//!   a Hello or Login after Welcome);
//! - `bad-sequence`: an input whose seq is not the next (dropped, the seq
//!   is not used up);
//! - `bad-value` (a non-finite or out-of-world position, a value that does
//!   not decode), `move-too-fast` ([`MoveLimiter`]), `prop-not-settable`,
//!   `rate-limited` (too many inputs unacknowledged);
//! - `not-visible`: a Hit on a handle the client does not see, answered
//!   at the real by CallResult `Refused(not-visible)` (a strike here when
//!   it passes back);
//! - more than `abuse_strikes_max` refusals: Kick (the last rule) + close;
//! - a frame over the size limit: Kick `frame-too-large` + close;
//! - no whole Login within `handshake_timeout` of the connect (partial
//!   frames do not count): Error `idle-timeout` + close; no whole frame
//!   within `idle_timeout` once live: Kick `idle-timeout` + close
//!   ([`Session::check_timeouts`], called every tick with `now`).
//!
//! # Takeover
//! A second login of the same account moves this session to the new
//! connection ([`Session::reattach`]): seqs, pending inputs and the speed
//! limit carry on; the new client gets a Welcome naming the next seq, and
//! view batches are dropped until the real's observer restarted
//! ([`Down::Resynced`]), so the new client's first batch is a full view.
//!
//! # Acks
//! An InputAck `n` promises every input `<= n` was processed. Inputs the
//! gateway refused are processed at once; forwarded ones when the real
//! acks them. So the session keeps the forwarded seqs not yet acked and
//! acknowledges, once per tick at most, everything below the oldest of
//! them (or everything received if none is pending).
//!
//! # Faults (config `testing.fault`, tests only)
//! `Silence` drops every view batch after Welcome; `DropAck` sends no
//! InputAck (the books are kept as usual). One enum compare per batch or
//! tick, read from [`GatewayParams::fault`].

use std::collections::VecDeque;
use std::sync::Arc;

use super::rules::{check_pos, check_set_prop, MoveLimiter};
use super::travel::Travel;
use super::{GatewayParams, RULES};
use crate::core::down::{DownBody, DownKind, FRAME_ROOM};
use crate::core::entity::EntityType;
use crate::core::fault::Fault;
use crate::core::geom::Vec3;
use crate::core::ids::EntityId;
use crate::core::time::Time;
use crate::game::relay::{decode_down, Down, GameInput};
use crate::wire::client::{
    split_frame, view_batch_header, CallOutcome, ClientMsg, DecodeError, ErrorCode, Frame,
    RefuseReason, ServerMsg, Welcome, HEADER_BYTES, TEXT_BYTES_MAX,
};

// The room of a pooled body and its kind byte hold a ViewBatch's header
// and tick exactly (see the module doc).
const _: () = assert!(FRAME_ROOM + 1 == HEADER_BYTES + 8);

/// What [`Session::take_down`] did with a body.
#[derive(Debug)]
pub struct TakenDown {
    /// What [`Session::handle_down`] returns: false if not understood.
    pub understood: bool,
    /// The body became the output (a view batch framed in place).
    pub in_place: bool,
    /// The buffer the session is done with (the body's, or its former
    /// empty output), for the pool.
    pub spare: Vec<u8>,
}

/// Where a session is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionPhase {
    /// Waiting for Hello.
    Hello,
    /// Waiting for Login.
    Login,
    /// Login taken; the host is spawning the avatar.
    Spawning,
    /// Welcomed.
    Live,
    /// Ended; nothing more is read.
    Closed,
}

/// How a session ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Closing {
    /// The client said Bye.
    Bye,
    /// The server sent Kick (or a fatal handshake Error) with this rule.
    Kicked(ErrorCode),
    /// No Login within the handshake timeout.
    HandshakeTimeout,
    /// Nothing received within the idle timeout.
    IdleTimeout,
    /// The account logged in on another connection.
    Replaced,
}

/// What the host must do after a frame.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Step<'a> {
    /// Nothing (answered or refused in the output).
    None,
    /// Check the login, then spawn an avatar for `name` and
    /// [`Session::welcome`] (or [`Session::refuse_login`]).
    Login {
        /// The player name.
        name: &'a str,
        /// The credential (a ticket with `auth = "hmac"`).
        token: Option<&'a [u8]>,
    },
    /// Forward this input to the real through the proxy.
    Input(GameInput<'a>),
    /// Ask the space directory to place the avatar (by id, or by type).
    EnterSpace {
        /// Space id, or 0.
        space: u32,
        /// Type id, or 0.
        type_id: u32,
    },
    /// Close the connection after the output is written.
    Close(Closing),
}

/// The server end of one connection (see the module doc).
#[derive(Debug)]
pub struct Session {
    params: GatewayParams,
    avatar: Arc<EntityType>,
    phase: SessionPhase,
    entity: Option<EntityId>,
    next_seq: u64,
    limiter: Option<MoveLimiter>,
    strikes: u32,
    forwarded: VecDeque<u64>,
    acked: u64,
    hits: VecDeque<(u64, u64)>,
    out: Vec<u8>,
    /// `out[..acks_end]` holds only InputAcks (when it is all of `out`, the
    /// output may wait for the next view batch).
    acks_end: usize,
    /// Ticks the output has waited (see [`Session::output_due`]).
    held_ticks: u16,
    refused: [u64; RULES],
    text: String,
    travel: Travel,
    opened_at: Time,
    heard_at: Time,
    closing: Option<Closing>,
    /// View batches are dropped until the observer restarted (takeover).
    awaiting_resync: bool,
}

impl Session {
    /// A new connection's session, opened at `now`; its avatar will be of
    /// type `avatar`.
    pub fn new(params: GatewayParams, avatar: Arc<EntityType>, now: Time) -> Session {
        Session {
            params,
            avatar,
            phase: SessionPhase::Hello,
            entity: None,
            next_seq: 1,
            limiter: None,
            strikes: 0,
            forwarded: VecDeque::new(),
            acked: 0,
            hits: VecDeque::new(),
            out: Vec::new(),
            acks_end: 0,
            held_ticks: 0,
            refused: [0; RULES],
            text: String::new(),
            travel: Travel::new(crate::server::balance::WORLD_SPACE, 1),
            opened_at: now,
            heard_at: now,
            closing: None,
            awaiting_resync: false,
        }
    }

    /// How the session ended, once it did.
    pub fn closing(&self) -> Option<Closing> {
        self.closing
    }

    /// True while view batches wait for the observer's restart.
    pub fn awaiting_resync(&self) -> bool {
        self.awaiting_resync
    }

    /// Closes the session if a timeout passed at `now`: no Login within
    /// the handshake timeout, or nothing heard within the idle timeout
    /// once live. Returns the closing, if it closed.
    pub fn check_timeouts(&mut self, now: Time) -> Option<Closing> {
        let p = &self.params;
        match self.phase {
            SessionPhase::Hello | SessionPhase::Login
                if now.saturating_since(self.opened_at) >= p.handshake_timeout =>
            {
                let text = format!("no login within {} ms", p.handshake_timeout.as_millis());
                let _ = self.fatal(ErrorCode::IdleTimeout, &text);
                self.closing = Some(Closing::HandshakeTimeout);
            }
            SessionPhase::Live if now.saturating_since(self.heard_at) >= p.idle_timeout => {
                let text = format!("nothing received for {} ms", p.idle_timeout.as_millis());
                self.count(ErrorCode::IdleTimeout);
                self.kick(ErrorCode::IdleTimeout, &text);
                self.closing = Some(Closing::IdleTimeout);
            }
            _ => return None,
        }
        self.closing
    }

    /// This session moves to a new connection of the same account at
    /// `now` (see the module doc): unsent output is dropped, the new client
    /// is welcomed with the next seq, and view batches wait for the real's
    /// restarted observer. The host sends the restart through the proxy.
    pub fn reattach(&mut self, now: Time) {
        debug_assert!(self.entity.is_some(), "a welcomed session");
        self.out.clear();
        self.phase = SessionPhase::Live;
        self.closing = None;
        self.heard_at = now;
        self.awaiting_resync = true;
        self.write_welcome(now);
    }

    /// Takes the unsent output (for the old connection at a takeover).
    pub fn take_output(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.out)
    }

    /// Where the avatar is among the spaces.
    pub fn travel(&self) -> &Travel {
        &self.travel
    }

    /// Sets the world's type (the session starts in the world).
    pub fn set_world_type(&mut self, world_type: u32) {
        self.travel = Travel::new(self.travel.world(), world_type);
    }

    /// The directory placed the player in `space` (it counts it there now);
    /// the move follows through the real.
    pub fn space_placed(&mut self, space: crate::core::ids::SpaceId) {
        self.travel.counted = space;
    }

    /// The directory refused the space change: an Error naming the rule
    /// (counted, not a strike: the client may not know the directory).
    pub fn space_refused(&mut self, code: ErrorCode, text: &str) {
        self.travel.pending = false;
        self.count(code);
        ServerMsg::Error {
            seq: 0,
            code,
            text: clip(text),
        }
        .encode(&mut self.out);
    }

    /// Where the session is.
    pub fn phase(&self) -> SessionPhase {
        self.phase
    }

    /// The client's avatar, once welcomed.
    pub fn entity(&self) -> Option<EntityId> {
        self.entity
    }

    /// Refusals so far, by [`ErrorCode::code`].
    pub fn refused(&self) -> &[u64; RULES] {
        &self.refused
    }

    /// Bytes to write to the client.
    pub fn output(&self) -> &[u8] {
        &self.out
    }

    /// Hands the output buffer to `write` (which may take its bytes, or
    /// swap in another empty buffer: `ClientPort::send_buf`), then marks
    /// the output written (whatever `write` left is dropped).
    pub fn write_output<R>(&mut self, write: impl FnOnce(&mut Vec<u8>) -> R) -> R {
        let r = write(&mut self.out);
        self.clear_output();
        r
    }

    /// Marks the output written.
    pub fn clear_output(&mut self) {
        self.out.clear();
        self.acks_end = 0;
        self.held_ticks = 0;
    }

    /// Whether the output is to be written this tick (call once per tick,
    /// after [`Session::end_tick`]): anything but input acknowledgements
    /// goes at once; acknowledgements alone wait up to
    /// `send_every_ticks - 1` ticks for the next view batch to share its
    /// write.
    pub fn output_due(&mut self) -> bool {
        if self.out.is_empty() {
            return false;
        }
        if self.out.len() > self.acks_end {
            return true;
        }
        let due = self.held_ticks + 1 >= self.params.send_every_ticks;
        self.held_ticks = self.held_ticks.saturating_add(1);
        due
    }

    /// Splits and handles every whole frame of `input`; returns the bytes
    /// used and calls `step` for each host action. Stops at a close and
    /// after a Login (the rest is read once [`Session::welcome`] ran).
    pub fn handle_input(
        &mut self,
        now: Time,
        input: &[u8],
        mut step: impl FnMut(&mut Session, Step<'_>),
    ) -> usize {
        let mut used = 0;
        // Stops at a close, and after a Login until the host welcomes.
        while matches!(
            self.phase,
            SessionPhase::Hello | SessionPhase::Login | SessionPhase::Live
        ) {
            match split_frame(&input[used..], self.params.client_body_bytes_max) {
                Ok(Some((f, n))) => {
                    used += n;
                    self.heard_at = now;
                    let s = self.handle_frame(now, &f);
                    step(self, s);
                }
                Ok(None) => break,
                Err(e) => {
                    let s = self.framing_error(&e);
                    step(self, s);
                    used = input.len();
                }
            }
        }
        used
    }

    /// Handles one frame from the client.
    pub fn handle_frame<'a>(&mut self, now: Time, f: &Frame<'a>) -> Step<'a> {
        let msg = match ClientMsg::decode(f) {
            Ok(m) => m,
            Err(e) => return self.decode_error(&e),
        };
        match (self.phase, msg) {
            (SessionPhase::Hello, ClientMsg::Hello { .. }) => {
                self.phase = SessionPhase::Login;
                Step::None
            }
            (SessionPhase::Login, ClientMsg::Login { name, token }) => {
                // The name and the ticket are checked by the host
                // (`CellHost::login`, counted by reason).
                self.phase = SessionPhase::Spawning;
                Step::Login { name, token }
            }
            (SessionPhase::Hello | SessionPhase::Login, _) => {
                self.fatal(ErrorCode::ProtocolViolation, "expected Hello then Login")
            }
            (SessionPhase::Spawning | SessionPhase::Closed, _) => Step::None,
            (SessionPhase::Live, m) => self.live(now, m),
        }
    }

    /// The stream broke (a frame over the limit): Kick and close.
    pub fn framing_error(&mut self, e: &DecodeError) -> Step<'static> {
        let code = ErrorCode::from(e);
        self.count(code);
        self.kick(code, &e.to_string());
        Step::Close(Closing::Kicked(code))
    }

    fn decode_error<'a>(&mut self, e: &DecodeError) -> Step<'a> {
        let code = ErrorCode::from(e);
        if self.phase != SessionPhase::Live {
            return self.fatal(code, &e.to_string());
        }
        self.refuse(0, code, &e.to_string())
    }

    /// The avatar exists (or is on its way): sends Welcome.
    pub fn welcome(&mut self, now: Time, entity: EntityId, spawn: Vec3) {
        debug_assert_eq!(self.phase, SessionPhase::Spawning);
        self.phase = SessionPhase::Live;
        self.entity = Some(entity);
        self.heard_at = now;
        let p = &self.params;
        self.limiter = Some(MoveLimiter::new(
            p.move_speed_max_mps,
            p.move_slack_m,
            spawn,
            now,
        ));
        self.write_welcome(now);
    }

    fn write_welcome(&mut self, now: Time) {
        let p = &self.params;
        let entity = self.entity.expect("welcomed");
        let last = self.limiter.as_ref().expect("welcomed").last_pos();
        let pos = self.travel.restart_at.unwrap_or(last);
        ServerMsg::Welcome(Welcome {
            tick_ms: p.tick_ms,
            entity,
            own_handle: None,
            client_body_bytes_max: p.client_body_bytes_max,
            bounds: p.world,
            server_time_us: now.0,
            next_seq: self.next_seq,
            pos,
            space: self.travel.space.0,
            space_type: self.travel.type_id,
        })
        .encode(&mut self.out);
    }

    /// The Login was read by another shard's gateway, which handed the
    /// connection here (`server::clients`): the session waits for
    /// [`Session::welcome`] as after its own Login.
    pub fn login_taken(&mut self) {
        debug_assert_eq!(self.phase, SessionPhase::Hello);
        self.phase = SessionPhase::Spawning;
    }

    /// The login cannot be served: Error and close.
    pub fn refuse_login(&mut self, code: ErrorCode, text: &str) -> Step<'static> {
        self.fatal(code, text)
    }

    fn live<'a>(&mut self, now: Time, m: ClientMsg<'a>) -> Step<'a> {
        match m {
            ClientMsg::Ping {
                nonce,
                client_time_us,
            } => {
                ServerMsg::Pong {
                    nonce,
                    client_time_us,
                    server_time_us: now.0,
                }
                .encode(&mut self.out);
                Step::None
            }
            ClientMsg::Bye => {
                self.phase = SessionPhase::Closed;
                self.closing = Some(Closing::Bye);
                Step::Close(Closing::Bye)
            }
            ClientMsg::Hello { .. } | ClientMsg::Login { .. } => {
                self.refuse(0, ErrorCode::ProtocolViolation, "already logged in")
            }
            ClientMsg::Move { .. } | ClientMsg::Hit { .. } | ClientMsg::SetProp { .. } => {
                self.input(now, m)
            }
            ClientMsg::EnterSpace { space, type_id } => {
                if self.travel.pending {
                    self.space_refused(ErrorCode::SpaceNotAllowed, "a space change is under way");
                    return Step::None;
                }
                self.travel.pending = true;
                Step::EnterSpace { space, type_id }
            }
        }
    }

    fn input<'a>(&mut self, now: Time, m: ClientMsg<'a>) -> Step<'a> {
        let seq = m.seq().expect("an input");
        if seq != self.next_seq {
            let text = format!("expected seq {}", self.next_seq);
            return self.refuse(seq, ErrorCode::BadSequence, &text);
        }
        self.next_seq += 1;
        if self.forwarded.len() >= self.params.inputs_in_flight_max {
            return self.refuse(seq, ErrorCode::RateLimited, "too many inputs in flight");
        }
        let input = match m {
            ClientMsg::Move {
                pos,
                yaw,
                client_time_us,
                ..
            } => {
                if !check_pos(&self.params.world, pos) || !yaw.is_finite() {
                    return self.refuse(seq, ErrorCode::BadValue, "position outside the world");
                }
                if self.travel.pending {
                    // Old-space coordinates: processed (acked), not applied.
                    self.travel.moves_dropped += 1;
                    return Step::None;
                }
                if let Some(at) = self.travel.restart_at.take() {
                    let p = &self.params;
                    self.limiter = Some(MoveLimiter::new(
                        p.move_speed_max_mps,
                        p.move_slack_m,
                        at,
                        now,
                    ));
                }
                let limiter = self.limiter.as_mut().expect("live");
                if let Err((d, budget)) = limiter.check(now, client_time_us, pos) {
                    let text = format!("moved {d:.1} m, {budget:.1} m allowed");
                    return self.refuse(seq, ErrorCode::MoveTooFast, &text);
                }
                GameInput::Move { seq, pos, yaw }
            }
            ClientMsg::Hit { target, damage, .. } => GameInput::Hit {
                seq,
                target,
                damage,
            },
            ClientMsg::SetProp { prop, value, .. } => {
                if let Err(code) = check_set_prop(&self.avatar, prop, value) {
                    let avatar = Arc::clone(&self.avatar);
                    let name = avatar
                        .prop(usize::from(prop))
                        .map_or("unknown", |d| &d.name);
                    return self.refuse(seq, code, name);
                }
                GameInput::SetProp { seq, prop, value }
            }
            _ => unreachable!("inputs only"),
        };
        self.forwarded.push_back(seq);
        Step::Input(input)
    }

    /// One refusal: Error, counted, a strike; Kick past the strike limit.
    fn refuse<'a>(&mut self, seq: u64, code: ErrorCode, text: &str) -> Step<'a> {
        let text = clip(text);
        ServerMsg::Error { seq, code, text }.encode(&mut self.out);
        self.strike(code)
    }

    /// Counts a refusal of `code` and a strike; Kick past the limit.
    fn strike<'a>(&mut self, code: ErrorCode) -> Step<'a> {
        self.count(code);
        self.strikes += 1;
        if self.strikes > self.params.abuse_strikes_max {
            self.text = format!("{} refused messages, the last {code}", self.strikes);
            let text = std::mem::take(&mut self.text);
            self.kick(code, &text);
            return Step::Close(Closing::Kicked(code));
        }
        Step::None
    }

    fn count(&mut self, code: ErrorCode) {
        self.refused[usize::from(code.code()).min(RULES - 1)] += 1;
    }

    /// A fatal refusal (handshake): Error, close.
    fn fatal<'a>(&mut self, code: ErrorCode, text: &str) -> Step<'a> {
        self.count(code);
        ServerMsg::Error {
            seq: 0,
            code,
            text: clip(text),
        }
        .encode(&mut self.out);
        self.phase = SessionPhase::Closed;
        self.closing = Some(Closing::Kicked(code));
        Step::Close(Closing::Kicked(code))
    }

    /// Writes Kick and ends the session (the host closes the connection).
    pub fn kick(&mut self, code: ErrorCode, text: &str) {
        ServerMsg::Kick {
            code,
            text: clip(text),
        }
        .encode(&mut self.out);
        self.phase = SessionPhase::Closed;
        self.closing.get_or_insert(Closing::Kicked(code));
    }

    /// [`Session::handle_down`] on an owned body, framed in place when it
    /// can be (see the module doc).
    pub fn take_down(&mut self, tick: u64, mut body: DownBody) -> TakenDown {
        // An acknowledgement riding a view batch (`DownKind::ViewAcked`):
        // taken off, then the batch goes on as any other.
        if let Some(ack) = body.take_ack() {
            if self.phase == SessionPhase::Live {
                self.real_acked(ack);
            }
            if body.len() == 1 {
                // The acknowledgement alone: no ViewBatch to write.
                return TakenDown {
                    understood: true,
                    in_place: false,
                    spare: body.into_buffer(),
                };
            }
        }
        match self.frame_in_place(tick, body) {
            Ok(spare) => TakenDown {
                understood: true,
                in_place: true,
                spare,
            },
            Err(body) => TakenDown {
                understood: self.handle_down(tick, &body),
                in_place: false,
                spare: body.into_buffer(),
            },
        }
    }

    /// A view batch with room, to a live session with an empty output and
    /// batches to send: written over its room and taken as the output.
    fn frame_in_place(&mut self, tick: u64, body: DownBody) -> Result<Vec<u8>, DownBody> {
        let sends = self.phase == SessionPhase::Live
            && self.params.fault != Fault::Silence
            && !self.awaiting_resync;
        if !sends || !self.out.is_empty() || body.first() != Some(&DownKind::View.byte()) {
            return Err(body);
        }
        let head = view_batch_header(tick, body.len() - 1);
        let mut frame = body.into_frame(&head)?;
        std::mem::swap(&mut self.out, &mut frame);
        self.acks_end = 0;
        Ok(frame)
    }

    /// Downstream data from the real (through the proxy, in order),
    /// matched by its `core::down::DownKind` byte: a view batch's bytes
    /// after that byte become a ViewBatch frame. Returns false if it was
    /// not understood (`relay::DownError`, or an unknown combat seq;
    /// counted by the host).
    pub fn handle_down(&mut self, tick: u64, data: &[u8]) -> bool {
        if self.phase != SessionPhase::Live {
            return true;
        }
        match decode_down(data) {
            Ok(Down::ViewBatch(_)) if self.params.fault == Fault::Silence => {}
            // Built for the connection this session left (takeover).
            Ok(Down::ViewBatch(_)) if self.awaiting_resync => {}
            Ok(Down::Resynced) => self.awaiting_resync = false,
            Ok(Down::ViewAcked { batch, ack }) => {
                self.real_acked(ack);
                let sends = self.params.fault != Fault::Silence && !self.awaiting_resync;
                if sends && !batch.is_empty() {
                    self.out
                        .extend_from_slice(&view_batch_header(tick, batch.len()));
                    self.out.extend_from_slice(batch);
                }
            }
            Ok(Down::ViewBatch(b)) => {
                self.out
                    .extend_from_slice(&view_batch_header(tick, b.len()));
                self.out.extend_from_slice(b);
            }
            Ok(Down::Reply(reply)) => {
                for (seq, outcome) in reply.results() {
                    ServerMsg::CallResult { seq, outcome }.encode(&mut self.out);
                    if outcome == CallOutcome::Refused(RefuseReason::NotVisible) {
                        // A hit on a handle the client does not see is
                        // answered by the real; it is a strike here.
                        let _ = self.strike(ErrorCode::NotVisible);
                        if self.phase != SessionPhase::Live {
                            return true;
                        }
                    }
                }
                if let Some(last) = reply.ack() {
                    self.real_acked(last);
                }
            }
            Ok(Down::HitStarted {
                client_seq,
                combat_seq,
            }) => {
                if self.hits.len() >= self.params.hits_pending_max {
                    self.hits.pop_front();
                }
                self.hits.push_back((combat_seq, client_seq));
            }
            Ok(Down::Space {
                space,
                type_id,
                pos,
                from,
            }) => {
                let id = crate::core::ids::SpaceId(space);
                self.travel.arrived(id, type_id, pos, from);
                ServerMsg::SpaceChanged {
                    space,
                    type_id,
                    pos,
                }
                .encode(&mut self.out);
            }
            Ok(Down::HitDone {
                combat_seq,
                outcome,
            }) => {
                let Some(i) = self.hits.iter().position(|h| h.0 == combat_seq) else {
                    return false;
                };
                let (_, seq) = self.hits.remove(i).expect("found");
                ServerMsg::CallResult { seq, outcome }.encode(&mut self.out);
            }
            Err(_) => return false,
        }
        true
    }

    fn real_acked(&mut self, last: u64) {
        while self.forwarded.front().is_some_and(|&s| s <= last) {
            self.forwarded.pop_front();
        }
    }

    /// End of the tick: one InputAck if the processed seq rose.
    pub fn end_tick(&mut self) {
        if self.phase != SessionPhase::Live {
            return;
        }
        let done = match self.forwarded.front() {
            Some(&s) => s - 1,
            None => self.next_seq - 1,
        };
        if done > self.acked {
            self.acked = done;
            if self.params.fault != Fault::DropAck {
                let only_acks = self.out.len() == self.acks_end;
                ServerMsg::InputAck { last_seq: done }.encode(&mut self.out);
                if only_acks {
                    self.acks_end = self.out.len();
                }
            }
        }
    }
}

/// `text` cut to the protocol's limit at a character boundary.
fn clip(text: &str) -> &str {
    if text.len() <= TEXT_BYTES_MAX {
        return text;
    }
    let mut end = TEXT_BYTES_MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}
