//! Sans-IO tests of [`Session`] against the client library's
//! [`ClientSession`]: the handshake, every refusal rule with its code,
//! strikes and kicks, acks covering refused inputs, hit results mapped back
//! to client seqs. The real is played by hand (downstream payloads).

use std::sync::Arc;

use super::*;
use crate::client::{ClientSession, ClientSessionParams, SessionEvent, SessionState};
use crate::core::down::{with_kind, DownKind};
use crate::core::entity::{TypeRegistry, AVATAR};
use crate::core::fault::Fault;
use crate::core::geom::{Rect, Vec3};
use crate::core::ids::EntityId;
use crate::core::time::Time;
use crate::game::relay::{
    hit_done, hit_started, reply_ack, reply_push_result, reply_set_ack, reply_start, space_down,
    tagged, GameInput,
};
use crate::wire::client::{CallOutcome, ClientMsg, ErrorCode, ServerMsg, PROTOCOL_VERSION};

const E: EntityId = EntityId(99);

/// A view body as the cell sends it: the kind byte, then the batch.
fn view(batch: &[u8]) -> crate::core::down::DownBody {
    with_kind(DownKind::View, batch)
}

struct Pair {
    server: Session,
    client: ClientSession,
    now: Time,
    inputs: Vec<u64>,
    entered: Vec<(u32, u32)>,
    closed: Option<Closing>,
}

fn registry() -> Arc<TypeRegistry> {
    Arc::new(TypeRegistry::with_builtins())
}

fn params() -> GatewayParams {
    GatewayParams {
        world: Rect::new(0.0, 0.0, 1000.0, 1000.0),
        abuse_strikes_max: 3,
        ..GatewayParams::default()
    }
}

impl Pair {
    fn new() -> Pair {
        Pair::with(params())
    }

    fn with(params: GatewayParams) -> Pair {
        let reg = registry();
        let avatar = reg.get(AVATAR).expect("avatar").clone();
        let mut p = Pair {
            server: Session::new(params, avatar, Time::from_millis(1000)),
            client: ClientSession::new(ClientSessionParams::default(), reg),
            now: Time::from_millis(1000),
            inputs: Vec::new(),
            entered: Vec::new(),
            closed: None,
        };
        p.client.connect("ann", None).expect("connect");
        p.pump();
        assert_eq!(p.client.state(), SessionState::Live);
        p
    }

    /// Client bytes to the server, server bytes to the client.
    fn pump(&mut self) {
        let bytes = self.client.transmit().to_vec();
        self.client.advance_transmit(bytes.len());
        self.feed(&bytes);
    }

    fn feed(&mut self, bytes: &[u8]) {
        let now = self.now;
        let mut login = false;
        let (inputs, closed, entered) = (&mut self.inputs, &mut self.closed, &mut self.entered);
        let used = self.server.handle_input(now, bytes, |_, step| match step {
            Step::Login { name, .. } => {
                assert_eq!(name, "ann");
                login = true;
            }
            Step::Input(i) => inputs.push(i.seq()),
            Step::Close(c) => *closed = Some(c),
            Step::EnterSpace { space, type_id } => entered.push((space, type_id)),
            Step::None => {}
        });
        if login {
            self.server.welcome(now, E, Vec3::ground(100.0, 100.0));
            self.feed(&bytes[used..]);
        }
        self.deliver();
    }

    fn deliver(&mut self) {
        let out = self.server.output().to_vec();
        self.server.clear_output();
        let now = self.now;
        self.client.handle_bytes(now, &out, &mut ());
    }

    fn end_tick(&mut self) {
        self.server.end_tick();
        self.deliver();
        self.now = self.now + std::time::Duration::from_millis(50);
    }

    /// The real acknowledges client seq `seq`.
    fn real_ack(&mut self, seq: u64) {
        assert!(self.server.handle_down(1, &reply_ack(seq)));
    }

    fn refusals(&mut self) -> Vec<(u64, ErrorCode)> {
        std::iter::from_fn(|| self.client.poll_event())
            .filter_map(|e| match e {
                SessionEvent::Refused { seq, code, .. } => Some((seq, code)),
                _ => None,
            })
            .collect()
    }
}

#[test]
fn login_moves_and_acks() {
    let mut p = Pair::new();
    assert_eq!(p.client.welcome().map(|w| w.entity), Some(E));
    p.client
        .send_move(p.now, Vec3::ground(101.0, 100.0), 0.0)
        .expect("move");
    p.pump();
    assert_eq!(p.inputs, vec![1]);
    p.end_tick();
    assert_eq!(p.client.last_acked(), 0, "not processed yet");
    p.real_ack(1);
    p.end_tick();
    assert_eq!(p.client.last_acked(), 1);
    assert_eq!(p.client.violation_count(), 0);
}

#[test]
fn every_rule_refuses_with_its_code_and_the_session_lives() {
    let mut p = Pair::new();
    let reg = registry();
    let status = reg.get(AVATAR).expect("a").prop_index("status").expect("s") as u16;
    p.client
        .send_move(p.now, Vec3::ground(500.0, 100.0), 0.0)
        .expect("move");
    p.client
        .send_move(p.now, Vec3::ground(2000.0, 100.0), 0.0)
        .expect("move");
    p.client.send_set_prop(p.now, 0, b"\x02An").expect("set");
    p.client
        .send_set_prop(p.now, status, b"\x02ok")
        .expect("set");
    p.pump();
    assert_eq!(p.server.phase(), SessionPhase::Live);
    p.client.send_set_prop(p.now, status, b"\x09").expect("set");
    p.pump();
    assert_eq!(p.inputs, vec![4], "only the good SetProp is forwarded");
    assert_eq!(
        p.refusals(),
        vec![
            (1, ErrorCode::MoveTooFast),
            (2, ErrorCode::BadValue),
            (3, ErrorCode::PropNotSettable),
            (5, ErrorCode::BadValue)
        ],
        "the 4th refusal kicks (strikes max 3)"
    );
    assert_eq!(p.closed, Some(Closing::Kicked(ErrorCode::BadValue)));
    assert_eq!(p.client.state(), SessionState::Closed);
    assert_eq!(
        p.server.refused()[usize::from(ErrorCode::BadValue.code())],
        2
    );
}

#[test]
fn raw_rule_breaks_unknown_kind_bad_sequence_second_hello() {
    let mut p = Pair::new();
    let mut raw = Vec::new();
    raw.extend_from_slice(&[0, 0, 0, 0, 0x09, 0x00, 0, 0]); // kind 9: unknown
    ClientMsg::Hello {
        version: PROTOCOL_VERSION,
    }
    .encode(&mut raw);
    let mv = |seq| ClientMsg::Move {
        seq,
        client_time_us: 0,
        pos: Vec3::ground(100.0, 100.0),
        yaw: 0.0,
    };
    mv(5).encode(&mut raw);
    mv(1).encode(&mut raw);
    p.feed(&raw);
    assert_eq!(p.inputs, vec![1]);
    let seen: Vec<ErrorCode> = p
        .server
        .refused()
        .iter()
        .enumerate()
        .filter(|(_, &n)| n > 0)
        .filter_map(|(c, _)| ErrorCode::from_code(c as u16))
        .collect();
    assert_eq!(
        seen,
        vec![
            ErrorCode::UnknownMessage,
            ErrorCode::ProtocolViolation,
            ErrorCode::BadSequence
        ]
    );
    assert_eq!(p.closed, None, "3 strikes are tolerated");
    assert_eq!(p.server.phase(), SessionPhase::Live);
}

#[test]
fn oversized_frames_are_kicked() {
    let mut p = Pair::new();
    let header = [0x00, 0x10, 0x00, 0x00, 0x03, 0x00, 0, 0]; // body 4096 + ...
    let mut big = header.to_vec();
    big[0] = 1; // 4097 bytes
    p.feed(&big);
    assert_eq!(p.closed, Some(Closing::Kicked(ErrorCode::FrameTooLarge)));
    assert_eq!(p.client.state(), SessionState::Closed);
}

#[test]
fn acks_cover_refused_inputs_once_forwarded_ones_are_done() {
    let mut p = Pair::new();
    p.client
        .send_move(p.now, Vec3::ground(101.0, 100.0), 0.0)
        .expect("1");
    p.client
        .send_move(p.now, Vec3::ground(900.0, 100.0), 0.0)
        .expect("2 too fast");
    p.client
        .send_move(p.now, Vec3::ground(102.0, 100.0), 0.0)
        .expect("3");
    p.pump();
    assert_eq!(p.inputs, vec![1, 3]);
    p.real_ack(1);
    p.end_tick();
    assert_eq!(p.client.last_acked(), 2, "1 done, 2 refused, 3 pending");
    p.real_ack(3);
    p.end_tick();
    assert_eq!(p.client.last_acked(), 3);
    assert_eq!(p.client.violation_count(), 0);
}

#[test]
fn hit_results_get_the_client_seq_back() {
    let mut p = Pair::new();
    let seq = p.client.send_hit(p.now, 4, 10).expect("hit");
    p.pump();
    assert_eq!(p.inputs, vec![seq]);
    assert!(p.server.handle_down(1, &hit_started(seq, 77)));
    let landed = CallOutcome::HitLanded {
        dealt: 10,
        killed: false,
    };
    assert!(p.server.handle_down(1, &hit_done(77, landed)));
    assert!(!p.server.handle_down(1, &hit_done(78, landed)), "unknown");
    p.real_ack(seq);
    p.end_tick();
    let done: Vec<(u64, CallOutcome)> = std::iter::from_fn(|| p.client.poll_event())
        .filter_map(|e| match e {
            SessionEvent::CallDone { seq, outcome, .. } => Some((seq, outcome)),
            _ => None,
        })
        .collect();
    assert_eq!(done, vec![(seq, landed)]);
    assert_eq!(p.client.calls_pending(), 0);
    assert_eq!(p.client.violation_count(), 0);
    let _ = (
        GameInput::Hit {
            seq,
            target: 4,
            damage: 10,
        },
        tagged(crate::game::relay::DEFER_DOWN, b""),
    );
}

#[test]
fn the_real_s_typed_reply_is_encoded_by_the_gateway() {
    let mut p = Pair::new();
    let reg = crate::core::entity::TypeRegistry::with_builtins();
    let avatar = reg.get(crate::core::entity::AVATAR).expect("avatar");
    let status = avatar.prop_index("status").expect("status") as u16;
    let seq = p
        .client
        .send_set_prop(p.now, status, b"\x02ok")
        .expect("set");
    p.pump();
    assert_eq!(p.inputs, vec![seq]);
    let mut reply = Vec::new();
    reply_start(&mut reply);
    reply_push_result(&mut reply, seq, CallOutcome::Applied);
    reply_set_ack(&mut reply, seq);
    assert!(p.server.handle_down(1, &reply));
    assert!(!p.server.handle_down(1, &reply[..reply.len() - 1]), "cut");
    p.end_tick();
    let done: Vec<(u64, CallOutcome)> = std::iter::from_fn(|| p.client.poll_event())
        .filter_map(|e| match e {
            SessionEvent::CallDone { seq, outcome, .. } => Some((seq, outcome)),
            _ => None,
        })
        .collect();
    assert_eq!(done, vec![(seq, CallOutcome::Applied)]);
    assert_eq!(p.client.last_acked(), seq);
    assert_eq!(p.client.violation_count(), 0);
}

#[test]
fn a_space_change_holds_moves_and_restarts_the_limiter_there() {
    let mut p = Pair::new();
    p.client.send_enter_space(0, 2).expect("enter");
    p.pump();
    assert_eq!(p.entered, vec![(0, 2)]);
    assert_eq!(
        p.client.send_move(p.now, Vec3::ground(101.0, 100.0), 0.0),
        Err(crate::client::SessionError::SpaceChanging),
        "the client holds its moves"
    );
    assert!(p.server.travel().pending);
    // The real arrived 400 m away: SpaceChanged, and moves from there pass.
    let (to, from) = (Vec3::ground(500.0, 500.0), Vec3::ground(100.0, 100.0));
    assert!(p.server.handle_down(1, &space_down(1000, 2, to, from)));
    p.deliver();
    let changed = std::iter::from_fn(|| p.client.poll_event()).find_map(|e| match e {
        SessionEvent::SpaceChanged {
            space,
            type_id,
            pos,
            ..
        } => Some((space, type_id, pos)),
        _ => None,
    });
    assert_eq!(changed, Some((1000, 2, to)));
    assert_eq!(p.client.space(), Some((1000, 2)));
    assert_eq!(p.server.travel().world_exit, Some(from), "the way back");
    p.client
        .send_move(p.now, Vec3::ground(501.0, 500.0), 0.0)
        .expect("move");
    p.pump();
    assert_eq!(
        p.inputs,
        vec![1],
        "not move-too-fast: the limiter restarted"
    );
    assert!(p.refusals().is_empty());
    // A refusal by the directory ends the change with an Error.
    p.client.send_enter_space(0, 9).expect("enter");
    p.pump();
    p.server
        .space_refused(ErrorCode::UnknownSpaceType, "unknown-space-type");
    p.deliver();
    assert_eq!(p.refusals(), vec![(0, ErrorCode::UnknownSpaceType)]);
    assert!(!p.client.space_pending() && !p.server.travel().pending);
    assert_eq!(p.client.violation_count(), 0);
}

#[test]
fn the_drop_ack_fault_sends_no_acks() {
    for (fault, acked) in [(Fault::None, 1), (Fault::DropAck, 0)] {
        let mut p = Pair::with(GatewayParams { fault, ..params() });
        p.client
            .send_move(p.now, Vec3::ground(101.0, 100.0), 0.0)
            .expect("move");
        p.pump();
        p.real_ack(1);
        p.end_tick();
        assert_eq!(p.client.last_acked(), acked, "{fault}");
    }
}

#[test]
fn the_silence_fault_sends_no_view_batches() {
    for (fault, sent) in [(Fault::None, true), (Fault::Silence, false)] {
        let mut p = Pair::with(GatewayParams { fault, ..params() });
        // A view batch from the observer (its kind byte marks it).
        assert!(p.server.handle_down(7, &view(&[2, 0, 0])));
        assert_eq!(!p.server.output().is_empty(), sent, "{fault}");
    }
}

/// At a client update rate of every other tick, acknowledgements alone wait
/// one tick for the next view batch; anything else goes at once.
#[test]
fn acks_alone_wait_for_the_next_update_but_not_longer() {
    let mut p = Pair::with(GatewayParams {
        send_every_ticks: 2,
        ..params()
    });
    assert!(!p.server.output_due(), "nothing queued");
    p.client
        .send_move(p.now, Vec3::ground(101.0, 100.0), 0.0)
        .expect("move");
    p.pump();
    p.real_ack(1);
    p.server.end_tick();
    assert!(!p.server.output_due(), "an ack alone waits a tick");
    p.real_ack(1);
    p.server.end_tick();
    assert!(p.server.output_due(), "but no longer than one");
    p.deliver();
    assert_eq!(p.client.last_acked(), 1);
    // An ack followed by a view batch in the same tick goes at once.
    p.client
        .send_move(p.now, Vec3::ground(102.0, 100.0), 0.0)
        .expect("move");
    p.pump();
    p.real_ack(2);
    p.server.end_tick();
    // A view batch from the cell (its kind byte marks it; the bytes are
    // not delivered here).
    assert!(p.server.handle_down(1, &view(&[0x01, 0x00])));
    assert!(p.server.output_due(), "more than acks: at once");
    // Every tick, as by default: an ack alone goes at once.
    let mut q = Pair::new();
    q.client
        .send_move(q.now, Vec3::ground(101.0, 100.0), 0.0)
        .expect("move");
    q.pump();
    q.real_ack(1);
    q.server.end_tick();
    assert!(q.server.output_due());
}

fn fresh_session(now: Time) -> Session {
    Session::new(params(), registry().get(AVATAR).expect("a").clone(), now)
}

fn kinds_and_codes(out: &[u8]) -> Vec<(u16, Option<ErrorCode>)> {
    let mut v = Vec::new();
    let mut rest = out;
    while let Ok(Some((f, n))) = crate::wire::client::split_frame(rest, u32::MAX) {
        let code = match ServerMsg::decode(&f) {
            Ok(ServerMsg::Error { code, .. }) | Ok(ServerMsg::Kick { code, .. }) => Some(code),
            _ => None,
        };
        v.push((f.kind, code));
        rest = &rest[n..];
    }
    v
}

#[test]
fn no_login_within_the_handshake_timeout_closes_even_mid_frame() {
    let t0 = Time::from_millis(1000);
    let limit = params().handshake_timeout;
    // Nothing sent, and a Hello then half a Login: both closed at the limit.
    for partial in [false, true] {
        let mut s = fresh_session(t0);
        if partial {
            let mut raw = Vec::new();
            ClientMsg::Hello {
                version: PROTOCOL_VERSION,
            }
            .encode(&mut raw);
            let mut login = Vec::new();
            ClientMsg::Login {
                name: "ann",
                token: None,
            }
            .encode(&mut login);
            raw.extend_from_slice(&login[..login.len() / 2]);
            let later = t0 + limit / 2;
            s.handle_input(later, &raw, |_, _| {});
            assert_eq!(s.phase(), SessionPhase::Login, "the Hello was read");
        }
        assert_eq!(
            s.check_timeouts(t0 + limit - std::time::Duration::from_millis(1)),
            None
        );
        assert_eq!(
            s.check_timeouts(t0 + limit),
            Some(Closing::HandshakeTimeout)
        );
        assert_eq!(s.phase(), SessionPhase::Closed);
        assert_eq!(
            kinds_and_codes(s.output()),
            vec![(
                crate::wire::client::kind::ERROR,
                Some(ErrorCode::IdleTimeout)
            )]
        );
    }
}

#[test]
fn a_pinging_client_stays_and_a_silent_one_is_kicked_idle() {
    let mut p = Pair::new();
    let idle = params().idle_timeout;
    let step = idle / 2;
    for nonce in 0..4 {
        p.now = p.now + step;
        assert_eq!(
            p.server.check_timeouts(p.now),
            None,
            "heard within the limit"
        );
        let mut raw = Vec::new();
        ClientMsg::Ping {
            nonce,
            client_time_us: 0,
        }
        .encode(&mut raw);
        p.feed(&raw);
    }
    p.now = p.now + idle;
    assert_eq!(p.server.check_timeouts(p.now), Some(Closing::IdleTimeout));
    assert_eq!(
        kinds_and_codes(p.server.output()),
        vec![(
            crate::wire::client::kind::KICK,
            Some(ErrorCode::IdleTimeout)
        )]
    );
    assert_eq!(
        p.server.refused()[usize::from(ErrorCode::IdleTimeout.code())],
        1
    );
}

#[test]
fn a_reattached_session_welcomes_with_the_next_seq_and_drops_old_batches() {
    let mut p = Pair::new();
    for x in [101.0, 102.0] {
        p.client
            .send_move(p.now, Vec3::ground(x, 100.0), 0.0)
            .expect("move");
    }
    p.pump();
    p.real_ack(1);
    let old_batch: &[u8] = &view(&[0x02, 0x00]); // a Leave of handle 0: the old client's view
    p.server.reattach(p.now);
    let out = p.server.output().to_vec();
    let (f, _) = crate::wire::client::split_frame(&out, u32::MAX)
        .expect("ok")
        .expect("frame");
    let Ok(ServerMsg::Welcome(w)) = ServerMsg::decode(&f) else {
        panic!("a Welcome first");
    };
    assert_eq!((w.entity, w.next_seq), (E, 3));
    assert_eq!(
        w.pos,
        Vec3::ground(102.0, 100.0),
        "the last accepted position"
    );
    assert_eq!((w.space, w.space_type), (1, 1));
    p.server.clear_output();
    assert!(p.server.awaiting_resync());
    assert!(p.server.handle_down(5, old_batch));
    assert!(
        p.server.output().is_empty(),
        "the replaced client's batch is dropped"
    );
    assert!(p
        .server
        .handle_down(5, &[crate::game::relay::DOWN_RESYNCED]));
    assert!(!p.server.awaiting_resync());
    assert!(p.server.handle_down(6, old_batch));
    assert_eq!(
        kinds_and_codes(p.server.output()),
        vec![(crate::wire::client::kind::VIEW_BATCH, None)]
    );
}

/// The gateway matches the kind byte and writes the bytes after it, as
/// they are, as a ViewBatch frame: whatever the batch's first byte (even
/// one that is a kind's), and an unknown kind is refused, not written.
#[test]
fn a_view_body_becomes_a_view_batch_frame_unchanged() {
    let mut p = Pair::new();
    for first in [0x00, 0x01, 0x7f, 0x80, 0xF0, 0xF4, 0xF5, 0xff] {
        p.server.clear_output();
        let batch = [first, 0x80, 0x01];
        assert!(p.server.handle_down(9, &view(&batch)));
        let mut want = crate::wire::client::view_batch_header(9, batch.len()).to_vec();
        want.extend_from_slice(&batch);
        assert_eq!(p.server.output(), &want[..], "first byte {first:#04x}");
    }
    p.server.clear_output();
    for unknown in [&[0x02, 0x00][..], &[0x7f][..], &[0xC2, 1, 2][..], &[][..]] {
        assert!(!p.server.handle_down(9, unknown), "{unknown:?}");
    }
    assert!(p.server.output().is_empty(), "nothing written");
}

/// A pooled view body reaching an empty output becomes the output in
/// place (no copy of the batch; the old output goes back to the pool), and
/// writes the same bytes as `handle_down`; after other frames, or without
/// room, it is copied.
#[test]
fn a_pooled_view_batch_is_framed_in_place() {
    use crate::core::down::DownPool;
    let batch = [2u8, 0, 0];
    let mut copied = Pair::new();
    assert!(copied.server.handle_down(7, &view(&batch)));
    let expected = copied.server.output().to_vec();

    let mut p = Pair::new();
    let mut pool = DownPool::new(1 << 16);
    let body = pool.body(DownKind::View, &batch);
    let at = body.as_ptr();
    assert!(p.server.output().is_empty());
    let t = p.server.take_down(7, body);
    assert!(t.understood && t.in_place);
    let spare = t.spare;
    assert_eq!(p.server.output(), &expected[..], "the same frame");
    assert_eq!(
        p.server.output()[expected.len() - batch.len()..].as_ptr(),
        at.wrapping_add(1),
        "the body's buffer, the batch unmoved"
    );
    assert!(spare.is_empty(), "the old output, for the pool");
    pool.give(spare);
    // Not empty now: the next batch is copied after the first.
    let body = pool.body(DownKind::View, &batch);
    let t = p.server.take_down(7, body);
    assert!(t.understood && !t.in_place);
    let spare = t.spare;
    assert_eq!(
        p.server.output(),
        &[&expected[..], &expected[..]].concat()[..]
    );
    assert_eq!(spare.len(), crate::core::down::FRAME_ROOM + 1 + batch.len());
    // No room (a body from elsewhere): copied, same bytes.
    let mut q = Pair::new();
    let t = q.server.take_down(7, view(&batch));
    assert!(t.understood && !t.in_place);
    assert_eq!(q.server.output(), &expected[..]);
    // The silence fault still drops it.
    let mut s = Pair::with(GatewayParams {
        fault: Fault::Silence,
        ..params()
    });
    let t = s.server.take_down(7, pool.body(DownKind::View, &batch));
    assert!(t.understood && !t.in_place);
    assert!(s.server.output().is_empty());
}

/// An acknowledgement riding a view batch (`DownKind::ViewAcked`) acks the
/// inputs and the batch is framed in place as a plain one; alone (an
/// empty batch) it writes no ViewBatch, only the tick's InputAck; copied
/// (`handle_down`), the same. Without the rider the input stays unacked.
#[test]
fn an_ack_riding_a_view_batch_acks_and_frames_the_batch() {
    use crate::core::down::DownPool;
    let batch = [2u8, 0, 0];
    let mut plain = Pair::new();
    assert!(plain.server.handle_down(7, &view(&batch)));
    let view_frame = plain.server.output().to_vec();
    let mut pool = DownPool::new(1 << 16);
    let moved = |p: &mut Pair| {
        p.client
            .send_move(p.now, Vec3::ground(101.0, 100.0), 0.0)
            .expect("move");
        p.pump();
    };

    // In place, with the batch.
    let mut p = Pair::new();
    moved(&mut p);
    let mut body = pool.body(DownKind::View, &batch);
    assert!(body.carry_ack(1));
    let t = p.server.take_down(7, body);
    assert!(t.understood && t.in_place);
    assert_eq!(
        p.server.output(),
        &view_frame[..],
        "the batch as a plain one"
    );
    p.end_tick();
    assert_eq!(p.client.last_acked(), 1);

    // Alone: no ViewBatch, the InputAck only.
    let mut a = Pair::new();
    moved(&mut a);
    let mut body = pool.body(DownKind::View, &[]);
    assert!(body.carry_ack(1));
    let t = a.server.take_down(7, body);
    assert!(t.understood && !t.in_place);
    assert!(a.server.output().is_empty(), "no empty ViewBatch");
    a.server.end_tick();
    assert_eq!(kinds_and_codes(a.server.output()), [(0x8003, None)]);
    a.deliver();
    assert_eq!(a.client.last_acked(), 1);

    // Copied after other output: the same frames.
    let mut c = Pair::new();
    moved(&mut c);
    let mut body = crate::core::down::with_kind(DownKind::View, &batch);
    assert!(body.carry_ack(1));
    assert!(c.server.handle_down(7, &body));
    assert_eq!(c.server.output(), &view_frame[..]);
    c.end_tick();
    assert_eq!(c.client.last_acked(), 1);

    // No rider: the move is not acknowledged.
    let mut n = Pair::new();
    moved(&mut n);
    let t = n.server.take_down(7, pool.body(DownKind::View, &batch));
    assert!(t.understood);
    n.end_tick();
    assert_eq!(n.client.last_acked(), 0, "nothing acknowledged it");
}
