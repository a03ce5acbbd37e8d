//! The sans-IO client session against a scripted server: handshake, input
//! acks and their rules, calls, view batches through the checking view,
//! latency hooks, closing paths, and byte-by-byte delivery.

use std::sync::Arc;
use tessera::client::{
    CallKind, ClientSession, ClientSessionParams, SessionError, SessionEvent, SessionHooks,
    SessionRule, SessionState, UpdateKind, UpdateSeen,
};
use tessera::core::entity::{Audience, Entity, TypeRegistry, AVATAR};
use tessera::core::geom::{Rect, Vec3};
use tessera::core::ids::EntityId;
use tessera::core::time::Time;
use tessera::core::view::{encode_event, ClientEvent, Movement};
use tessera::wire::client::{
    split_frame, CallOutcome, ClientMsg, ErrorCode, RefuseReason, ServerMsg, Welcome,
    PROTOCOL_VERSION,
};

const ME: EntityId = EntityId(7);

#[derive(Default)]
struct Hooks {
    updates: Vec<UpdateSeen>,
    acked: Vec<(u64, Time, Time)>,
}

impl SessionHooks for Hooks {
    fn on_update(&mut self, seen: &UpdateSeen) {
        self.updates.push(*seen);
    }
    fn on_input_acked(&mut self, seq: u64, sent_at: Time, now: Time) {
        self.acked.push((seq, sent_at, now));
    }
}

fn registry() -> Arc<TypeRegistry> {
    Arc::new(TypeRegistry::with_builtins())
}

fn welcome() -> Welcome {
    Welcome {
        tick_ms: 50,
        entity: ME,
        own_handle: None,
        client_body_bytes_max: 4096,
        bounds: Rect {
            min_x: 0.0,
            min_z: 0.0,
            max_x: 1000.0,
            max_z: 1000.0,
        },
        server_time_us: 5,
        next_seq: 1,
        pos: tessera::core::geom::Vec3::ground(500.0, 500.0),
        space: 1,
        space_type: 1,
    }
}

fn frames(msgs: &[ServerMsg<'_>]) -> Vec<u8> {
    let mut out = Vec::new();
    for m in msgs {
        m.encode(&mut out);
    }
    out
}

fn snapshot(id: u64, x: f64) -> Vec<u8> {
    let reg = TypeRegistry::with_builtins();
    let ty = Arc::clone(reg.get(AVATAR).expect("avatar"));
    let e = Entity::new_real(EntityId(id), ty, Vec3 { x, y: 0.0, z: 1.0 }, 0.5);
    let mut out = Vec::new();
    e.encode_snapshot(Audience::OtherClients, &mut out);
    out
}

/// Enter handle 1 (entity 100) at v3, move it to v4, leave.
fn enter_move_leave() -> Vec<u8> {
    let snap = snapshot(100, 3.0);
    let mut b = Vec::new();
    let evs = [
        ClientEvent::Enter {
            handle: 1,
            entity: EntityId(100),
            type_id: AVATAR,
            pos: Vec3 {
                x: 3.0,
                y: 0.0,
                z: 1.0,
            },
            yaw: 0.5,
            version: 3,
            snapshot: &snap,
        },
        ClientEvent::Move {
            handle: 1,
            version_low: 4,
            mv: Movement {
                absolute: false,
                d: [100, 0, 0],
                yaw: 20,
            },
        },
        ClientEvent::Leave { handle: 1 },
    ];
    for e in &evs {
        encode_event(&mut b, e);
    }
    b
}

fn live_session(hooks: &mut Hooks) -> ClientSession {
    live_session_with(ClientSessionParams::default(), hooks)
}

fn live_session_with(params: ClientSessionParams, hooks: &mut Hooks) -> ClientSession {
    let mut s = ClientSession::new(params, registry());
    s.connect("bob", Some(b"tok")).expect("connect");
    let sent = s.transmit().to_vec();
    s.advance_transmit(sent.len());
    let (f, n) = split_frame(&sent, 4096).expect("ok").expect("hello");
    assert_eq!(
        ClientMsg::decode(&f),
        Ok(ClientMsg::Hello {
            version: PROTOCOL_VERSION
        }),
        "first frame is Hello"
    );
    let (f, _) = split_frame(&sent[n..], 4096).expect("ok").expect("login");
    assert_eq!(
        ClientMsg::decode(&f),
        Ok(ClientMsg::Login {
            name: "bob",
            token: Some(b"tok")
        })
    );
    assert_eq!(
        s.send_move(Time(1), Vec3::default(), 0.0),
        Err(SessionError::NotLive(SessionState::Handshake))
    );
    s.handle_bytes(Time(10), &frames(&[ServerMsg::Welcome(welcome())]), hooks);
    assert_eq!(s.state(), SessionState::Live);
    assert_eq!(s.poll_event(), Some(SessionEvent::Welcomed(welcome())));
    s
}

#[test]
fn inputs_get_consecutive_seqs_and_acks_are_checked() {
    let mut hooks = Hooks::default();
    let mut s = live_session(&mut hooks);
    for i in 1..=3u64 {
        let seq = s
            .send_move(Time(100 * i), Vec3::default(), 0.0)
            .expect("move");
        assert_eq!(seq, i);
    }
    let sent = s.transmit().to_vec();
    let mut at = 0;
    let mut seqs = Vec::new();
    while let Some((f, n)) = split_frame(&sent[at..], 4096).expect("ok") {
        seqs.push(ClientMsg::decode(&f).expect("decodes").seq());
        at += n;
    }
    assert_eq!(seqs, vec![Some(1), Some(2), Some(3)]);
    let acks = frames(&[
        ServerMsg::InputAck { last_seq: 2 },
        ServerMsg::InputAck { last_seq: 2 },
        ServerMsg::InputAck { last_seq: 9 },
        ServerMsg::InputAck { last_seq: 3 },
    ]);
    s.handle_bytes(Time(1000), &acks, &mut hooks);
    assert_eq!(
        hooks.acked,
        vec![
            (1, Time(100), Time(1000)),
            (2, Time(200), Time(1000)),
            (3, Time(300), Time(1000))
        ]
    );
    let rules: Vec<_> = s.violations().iter().map(|v| v.rule.clone()).collect();
    assert_eq!(
        rules,
        vec![
            SessionRule::AckNotIncreasing { prev: 2, got: 2 },
            SessionRule::AckUnsent { sent: 3, got: 9 }
        ]
    );
    assert_eq!((s.last_acked(), s.inputs_in_flight()), (3, 0));
    assert_eq!(s.counters().inputs_acked, 3);
    assert_eq!(s.violation_count(), 2);
}

#[test]
fn view_batches_feed_the_checking_view_and_the_hooks() {
    let mut hooks = Hooks::default();
    let mut s = live_session(&mut hooks);
    let batch = enter_move_leave();
    let bytes = frames(&[ServerMsg::ViewBatch {
        tick: 8,
        batch: &batch,
    }]);
    s.handle_bytes(Time(500), &bytes, &mut hooks);
    let c = *s.counters();
    assert_eq!((c.batches, c.enters, c.updates, c.leaves), (1, 1, 1, 1));
    assert_eq!(
        s.violation_count(),
        0,
        "{:?}",
        s.view().map(|v| v.violations())
    );
    let kinds: Vec<_> = hooks.updates.iter().map(|u| (u.kind, u.entity)).collect();
    let e = Some(EntityId(100));
    assert_eq!(
        kinds,
        vec![
            (UpdateKind::Enter, e),
            (UpdateKind::Move, e),
            (UpdateKind::Leave, e)
        ]
    );
    assert_eq!(hooks.updates[1].pos.map(|p| p.x), Some(4.0));
    assert_eq!(hooks.updates[1].version_low, Some(4));
    assert_eq!(hooks.updates[1].received_at, Time(500));
    assert_eq!(s.last_tick(), Some(8));
    // The same batch again: a leave of a left handle, a move after leave...
    s.handle_bytes(Time(600), &bytes, &mut hooks);
    // ...the enter is legal again (handles are reused), so the batch is
    // clean; a move of a handle never entered is not.
    let mut bad = Vec::new();
    encode_event(
        &mut bad,
        &ClientEvent::Move {
            handle: 9,
            version_low: 1,
            mv: Movement {
                absolute: true,
                d: [0, 0, 0],
                yaw: 0,
            },
        },
    );
    let bytes = frames(&[ServerMsg::ViewBatch {
        tick: 9,
        batch: &bad,
    }]);
    s.handle_bytes(Time(700), &bytes, &mut hooks);
    assert_eq!(s.violation_count(), 1);
    assert_eq!(
        s.counters().violations,
        0,
        "a view rule, not a session rule"
    );
}

#[test]
fn without_view_checks_only_the_own_stream_is_applied_and_checked() {
    let params = ClientSessionParams {
        view_checks: false,
        ..ClientSessionParams::default()
    };
    let mut hooks = Hooks::default();
    let mut s = live_session_with(params, &mut hooks);
    let batch = enter_move_leave();
    let bytes = frames(&[ServerMsg::ViewBatch {
        tick: 8,
        batch: &batch,
    }]);
    s.handle_bytes(Time(500), &bytes, &mut hooks);
    // Every event decoded and counted, none applied: no entity, no position.
    let c = *s.counters();
    assert_eq!((c.batches, c.enters, c.updates, c.leaves), (1, 1, 1, 1));
    let kinds: Vec<_> = hooks
        .updates
        .iter()
        .map(|u| (u.kind, u.entity, u.pos))
        .collect();
    assert_eq!(
        kinds,
        vec![
            (UpdateKind::Enter, None, None),
            (UpdateKind::Move, None, None),
            (UpdateKind::Leave, None, None)
        ]
    );
    assert!(s.view().is_some_and(|v| v.shown().is_empty()));
    // A move of a handle never entered: not checked here (a checking
    // session counts it, see the test above)...
    let mut stray = Vec::new();
    encode_event(
        &mut stray,
        &ClientEvent::Move {
            handle: 9,
            version_low: 1,
            mv: Movement {
                absolute: true,
                d: [0, 0, 0],
                yaw: 0,
            },
        },
    );
    s.handle_bytes(
        Time(600),
        &frames(&[ServerMsg::ViewBatch {
            tick: 9,
            batch: &stray,
        }]),
        &mut hooks,
    );
    assert_eq!(s.violation_count(), 0);
    // ...but the own stream is: an own move before the own snapshot.
    let mut own = Vec::new();
    encode_event(
        &mut own,
        &ClientEvent::OwnMove {
            version_low: 2,
            mv: Movement {
                absolute: true,
                d: [0, 0, 0],
                yaw: 0,
            },
        },
    );
    s.handle_bytes(
        Time(700),
        &frames(&[ServerMsg::ViewBatch {
            tick: 10,
            batch: &own,
        }]),
        &mut hooks,
    );
    assert_eq!(
        s.violation_count(),
        1,
        "{:?}",
        s.view().map(|v| v.violations())
    );
    // And bytes that do not decode still count.
    s.handle_bytes(
        Time(800),
        &frames(&[ServerMsg::ViewBatch {
            tick: 11,
            batch: &[0xff, 0xff, 0xff],
        }]),
        &mut hooks,
    );
    assert!(
        s.violation_kinds().contains_key("Decode"),
        "{:?}",
        s.violation_kinds()
    );
}

#[test]
fn calls_end_once_with_their_outcome() {
    let mut hooks = Hooks::default();
    let mut s = live_session(&mut hooks);
    let hit = s.send_hit(Time(100), 1, 10).expect("hit");
    let set = s
        .send_set_prop(Time(110), 0, &[3, b'a', b'b', b'c'])
        .expect("set");
    let mv = s.send_move(Time(120), Vec3::default(), 0.0).expect("move");
    assert_eq!((hit, set, mv, s.calls_pending()), (1, 2, 3, 2));
    let landed = CallOutcome::HitLanded {
        dealt: 10,
        killed: true,
    };
    let bytes = frames(&[
        ServerMsg::CallResult {
            seq: hit,
            outcome: landed,
        },
        ServerMsg::CallResult {
            seq: hit,
            outcome: landed,
        },
        ServerMsg::Error {
            seq: set,
            code: ErrorCode::PropNotSettable,
            text: "name",
        },
        ServerMsg::CallResult {
            seq: mv,
            outcome: CallOutcome::Refused(RefuseReason::Dead),
        },
    ]);
    s.handle_bytes(Time(900), &bytes, &mut hooks);
    assert_eq!(
        s.poll_event(),
        Some(SessionEvent::CallDone {
            seq: 1,
            kind: CallKind::Hit,
            outcome: landed,
            sent_at: Time(100),
            at: Time(900)
        })
    );
    assert_eq!(
        s.poll_event(),
        Some(SessionEvent::Refused {
            seq: 2,
            code: ErrorCode::PropNotSettable,
            at: Time(900)
        })
    );
    assert_eq!(s.poll_event(), None);
    assert_eq!(s.last_text(), "name");
    assert_eq!(s.calls_pending(), 0);
    let rules: Vec<_> = s.violations().iter().map(|v| v.rule.clone()).collect();
    assert_eq!(
        rules,
        vec![
            SessionRule::UnknownCall { seq: 1 },
            SessionRule::UnknownCall { seq: 3 }
        ]
    );
}

#[test]
fn handshake_errors_kicks_and_broken_streams_close() {
    let mut hooks = Hooks::default();
    let mut s = ClientSession::new(ClientSessionParams::default(), registry());
    s.connect("bob", None).expect("connect");
    let refusal = frames(&[
        ServerMsg::Error {
            seq: 0,
            code: ErrorCode::VersionMismatch,
            text: "v2 only",
        },
        ServerMsg::Welcome(welcome()),
    ]);
    s.handle_bytes(Time(1), &refusal, &mut hooks);
    assert_eq!(s.state(), SessionState::Closed);
    assert_eq!(s.welcome(), None, "nothing is applied after the close");
    assert_eq!(
        s.violations()[0].rule,
        SessionRule::Unexpected {
            kind: ServerMsg::Welcome(welcome()).kind()
        },
        "a Welcome after the refusal breaks the rules"
    );
    let mut s = live_session(&mut hooks);
    let kick = frames(&[ServerMsg::Kick {
        code: ErrorCode::SlowReader,
        text: "",
    }]);
    s.handle_bytes(Time(2), &kick, &mut hooks);
    let last = std::iter::from_fn(|| s.poll_event()).last();
    assert_eq!(
        last,
        Some(SessionEvent::Closed {
            code: Some(ErrorCode::SlowReader),
            at: Time(2)
        })
    );
    let mut s = live_session(&mut hooks);
    s.handle_bytes(
        Time(3),
        &[0xff, 0xff, 0xff, 0x7f, 2, 0x80, 0, 0],
        &mut hooks,
    );
    assert_eq!(s.state(), SessionState::Closed);
    assert!(matches!(s.violations()[0].rule, SessionRule::Decode(_)));
    let mut s = live_session(&mut hooks);
    s.handle_bytes(Time(4), &[5, 0, 0], &mut hooks);
    s.handle_eof(Time(5));
    assert_eq!(
        s.violations()[0].rule,
        SessionRule::TruncatedStream { buffered: 3 }
    );
    assert_eq!(s.violation_count(), 1, "a truncated stream counts");
    assert_eq!(s.violation_kinds().get("TruncatedStream"), Some(&1));
}

fn rules(s: &ClientSession) -> Vec<SessionRule> {
    s.violations().iter().map(|v| v.rule.clone()).collect()
}

/// Messages out of place (before Welcome, a second Welcome, anything after
/// a Kick) are `Unexpected` and change nothing; an Error naming an input
/// never sent is `ErrorUnsent`.
#[test]
fn messages_out_of_place_and_errors_for_unsent_inputs_are_violations() {
    let mut hooks = Hooks::default();
    let batch = ServerMsg::ViewBatch {
        tick: 1,
        batch: &[],
    };
    let unexpected = |m: &ServerMsg<'_>| SessionRule::Unexpected { kind: m.kind() };
    // A ViewBatch during the handshake.
    let mut s = ClientSession::new(ClientSessionParams::default(), registry());
    s.connect("ann", None).expect("connect");
    s.handle_bytes(Time(1), &frames(&[batch]), &mut hooks);
    assert_eq!(rules(&s), [unexpected(&batch)]);
    assert_eq!(s.counters().batches, 0);
    // A second Welcome.
    let mut s = live_session(&mut hooks);
    let again = ServerMsg::Welcome(welcome());
    s.handle_bytes(Time(2), &frames(&[again]), &mut hooks);
    assert_eq!(rules(&s), [unexpected(&again)]);
    assert_eq!(s.state(), SessionState::Live);
    // Anything after a Kick, in the same read or a later one.
    let mut s = live_session(&mut hooks);
    let kick = ServerMsg::Kick {
        code: ErrorCode::SlowReader,
        text: "",
    };
    let pong = ServerMsg::Pong {
        nonce: 1,
        client_time_us: 0,
        server_time_us: 0,
    };
    s.handle_bytes(Time(3), &frames(&[kick, pong]), &mut hooks);
    assert_eq!(s.state(), SessionState::Closed);
    assert_eq!(rules(&s), [unexpected(&pong)]);
    s.handle_bytes(Time(4), &frames(&[batch]), &mut hooks);
    assert_eq!(rules(&s), [unexpected(&pong), unexpected(&batch)]);
    assert_eq!((s.counters().pongs, s.counters().batches), (0, 0));
    assert_eq!(s.violation_kinds().get("Unexpected"), Some(&2));
    // After the client's own Bye nothing more is read: no violation.
    let mut s = live_session(&mut hooks);
    s.send_bye(Time(5)).expect("bye");
    s.handle_bytes(Time(6), &frames(&[pong]), &mut hooks);
    assert_eq!(rules(&s), []);
    // An Error naming input 5 when none was sent.
    let mut s = live_session(&mut hooks);
    let error = ServerMsg::Error {
        seq: 5,
        code: ErrorCode::SlowReader,
        text: "",
    };
    s.handle_bytes(Time(7), &frames(&[error]), &mut hooks);
    assert_eq!(rules(&s), [SessionRule::ErrorUnsent { seq: 5 }]);
    assert_eq!(s.violation_count(), 1);
}

#[test]
fn bounds_refuse_to_send() {
    let params = ClientSessionParams {
        inputs_in_flight_max: 2,
        calls_pending_max: 1,
        ..ClientSessionParams::default()
    };
    let mut s = ClientSession::new(params, registry());
    assert_eq!(s.connect("", None), Err(SessionError::BadName));
    s.connect("x", None).expect("connect");
    assert_eq!(s.connect("x", None), Err(SessionError::AlreadyStarted));
    s.handle_bytes(Time(1), &frames(&[ServerMsg::Welcome(welcome())]), &mut ());
    s.send_hit(Time(2), 1, 1).expect("hit");
    assert_eq!(s.send_hit(Time(2), 1, 1), Err(SessionError::CallsPending));
    s.send_move(Time(3), Vec3::default(), 0.0).expect("move");
    assert_eq!(
        s.send_move(Time(3), Vec3::default(), 0.0),
        Err(SessionError::InputsInFlight)
    );
    assert_eq!(s.next_seq(), 3, "refused inputs take no seq");
    s.send_bye(Time(4)).expect("bye");
    assert_eq!(s.state(), SessionState::Closed);
    assert_eq!(
        s.send_ping(Time(5), 1),
        Err(SessionError::NotLive(SessionState::Closed))
    );
}

#[test]
fn byte_by_byte_delivery_equals_one_read() {
    let batch = enter_move_leave();
    let mut script = Vec::new();
    let msgs = [
        ServerMsg::Welcome(welcome()),
        ServerMsg::ViewBatch {
            tick: 1,
            batch: &batch,
        },
        ServerMsg::Pong {
            nonce: 4,
            client_time_us: 10,
            server_time_us: 12,
        },
        ServerMsg::ViewBatch {
            tick: 2,
            batch: &batch,
        },
    ];
    for m in &msgs {
        m.encode(&mut script);
    }
    let run = |chunk: usize| {
        let mut s = ClientSession::new(ClientSessionParams::default(), registry());
        s.connect("bob", None).expect("connect");
        s.send_ping(Time(0), 0).expect_err("not live yet");
        let mut hooks = Hooks::default();
        for piece in script.chunks(chunk) {
            let w = s.read_buf(piece.len());
            w.copy_from_slice(piece);
            s.handle_read(Time(20), piece.len(), &mut hooks);
        }
        let events: Vec<_> = std::iter::from_fn(|| s.poll_event()).collect();
        (*s.counters(), hooks.updates, events, s.violation_count())
    };
    let whole = run(script.len());
    assert_eq!(whole.0.enters, 2);
    assert_eq!(whole.3, 0);
    for chunk in [1, 2, 3, 7, 64] {
        assert_eq!(run(chunk), whole, "chunk {chunk}");
    }
}
