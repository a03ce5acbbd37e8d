//! Property tests of the client protocol codec (`wire::client`):
//! - every message round-trips (encode, decode, encode gives the same bytes);
//! - a stream split at every offset decodes to the same messages as whole;
//! - random and mutated bytes never panic: they are refused with a typed
//!   `DecodeError`, or they decode to a message that re-encodes to exactly
//!   those bytes (the format is canonical);
//! - oversized and truncated frames get their typed errors.
//!
//! `PROPTEST_CASES` raises the case count (default 128).

mod protocol_doc;

use proptest::prelude::*;
use tessera::core::geom::{Rect, Vec3};
use tessera::core::ids::EntityId;
use tessera::wire::client::{
    split_frame, CallOutcome, ClientMsg, DecodeError, ErrorCode, Frame, FrameDecoder, RefuseReason,
    ServerMsg, Welcome, HEADER_BYTES, PROTOCOL_VERSION as V,
};

const BODY_MAX: u32 = 1 << 16;

/// Owned mirror of [`ClientMsg`] for generation.
#[derive(Clone, Debug)]
enum C {
    Hello,
    Login(String, Option<Vec<u8>>),
    Move(u64, u64, [f64; 3], f32),
    Hit(u64, u64, u32, i64),
    SetProp(u64, u64, u16, Vec<u8>),
    Ping(u64, u64),
    Bye,
}

impl C {
    fn msg(&self) -> ClientMsg<'_> {
        match self {
            C::Hello => ClientMsg::Hello { version: V },
            C::Login(n, t) => ClientMsg::Login {
                name: n,
                token: t.as_deref(),
            },
            &C::Move(seq, t, [x, y, z], yaw) => ClientMsg::Move {
                seq,
                client_time_us: t,
                pos: Vec3 { x, y, z },
                yaw,
            },
            &C::Hit(seq, t, target, damage) => ClientMsg::Hit {
                seq,
                client_time_us: t,
                target,
                damage,
            },
            C::SetProp(seq, t, prop, v) => ClientMsg::SetProp {
                seq: *seq,
                client_time_us: *t,
                prop: *prop,
                value: v,
            },
            &C::Ping(nonce, t) => ClientMsg::Ping {
                nonce,
                client_time_us: t,
            },
            C::Bye => ClientMsg::Bye,
        }
    }
}

/// Owned mirror of [`ServerMsg`].
#[derive(Clone, Debug)]
enum S {
    Welcome(Welcome),
    Batch(u64, Vec<u8>),
    Ack(u64),
    Call(u64, CallOutcome),
    Error(u64, ErrorCode, String),
    Pong(u64, u64, u64),
    Kick(ErrorCode, String),
}

impl S {
    fn msg(&self) -> ServerMsg<'_> {
        match self {
            S::Welcome(w) => ServerMsg::Welcome(*w),
            S::Batch(tick, b) => ServerMsg::ViewBatch {
                tick: *tick,
                batch: b,
            },
            &S::Ack(last_seq) => ServerMsg::InputAck { last_seq },
            &S::Call(seq, outcome) => ServerMsg::CallResult { seq, outcome },
            S::Error(seq, code, text) => ServerMsg::Error {
                seq: *seq,
                code: *code,
                text,
            },
            &S::Pong(nonce, client_time_us, server_time_us) => ServerMsg::Pong {
                nonce,
                client_time_us,
                server_time_us,
            },
            S::Kick(code, text) => ServerMsg::Kick { code: *code, text },
        }
    }
}

fn client_msg() -> impl Strategy<Value = C> {
    prop_oneof![
        Just(C::Hello),
        (
            "[a-zA-Z0-9é_]{1,30}",
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..64))
        )
            .prop_map(|(n, t)| C::Login(n, t)),
        (any::<u64>(), any::<u64>(), any::<[f64; 3]>(), any::<f32>())
            .prop_map(|(s, t, p, y)| C::Move(s, t, p, y)),
        (any::<u64>(), any::<u64>(), any::<u32>(), any::<i64>())
            .prop_map(|(s, t, h, d)| C::Hit(s, t, h, d)),
        (
            any::<u64>(),
            any::<u64>(),
            any::<u16>(),
            proptest::collection::vec(any::<u8>(), 0..40)
        )
            .prop_map(|(s, t, p, v)| C::SetProp(s, t, p, v)),
        (any::<u64>(), any::<u64>()).prop_map(|(n, t)| C::Ping(n, t)),
        Just(C::Bye),
    ]
}

fn code() -> impl Strategy<Value = ErrorCode> {
    proptest::sample::select(ErrorCode::ALL)
}

fn outcome() -> impl Strategy<Value = CallOutcome> {
    prop_oneof![
        Just(CallOutcome::Applied),
        (any::<i64>(), any::<bool>())
            .prop_map(|(dealt, killed)| CallOutcome::HitLanded { dealt, killed }),
        Just(CallOutcome::HitExpired),
        proptest::sample::select(RefuseReason::ALL).prop_map(CallOutcome::Refused),
    ]
}

fn welcome() -> impl Strategy<Value = Welcome> {
    (
        any::<u32>(),
        any::<u64>(),
        proptest::option::of(0..u32::MAX),
        any::<u32>(),
        any::<[f64; 4]>(),
        any::<u64>(),
        (any::<u64>(), any::<[f64; 3]>(), any::<u32>(), any::<u32>()),
    )
        .prop_map(
            |(tick_ms, e, own_handle, max, [a, b, c, d], t, (n, [x, y, z], sp, st))| Welcome {
                tick_ms,
                entity: EntityId(e),
                own_handle,
                client_body_bytes_max: max,
                bounds: Rect {
                    min_x: a,
                    min_z: b,
                    max_x: c,
                    max_z: d,
                },
                server_time_us: t,
                next_seq: n,
                pos: tessera::core::geom::Vec3 { x, y, z },
                space: sp,
                space_type: st,
            },
        )
}

fn server_msg() -> impl Strategy<Value = S> {
    prop_oneof![
        welcome().prop_map(S::Welcome),
        (any::<u64>(), proptest::collection::vec(any::<u8>(), 0..200))
            .prop_map(|(t, b)| S::Batch(t, b)),
        any::<u64>().prop_map(S::Ack),
        (any::<u64>(), outcome()).prop_map(|(s, o)| S::Call(s, o)),
        (any::<u64>(), code(), ".{0,60}").prop_map(|(s, c, t)| S::Error(s, c, t)),
        (any::<u64>(), any::<u64>(), any::<u64>()).prop_map(|(a, b, c)| S::Pong(a, b, c)),
        (code(), ".{0,60}").prop_map(|(c, t)| S::Kick(c, t)),
    ]
}

/// Decodes every whole frame of `bytes` with `dec`, as Debug strings
/// (NaN-proof equality), plus the error that stopped it.
fn decode_all(
    bytes: &[u8],
    split: usize,
    dec: impl Fn(&Frame<'_>) -> Result<String, DecodeError>,
) -> (Vec<Result<String, DecodeError>>, Option<DecodeError>) {
    let mut d = FrameDecoder::new(BODY_MAX);
    let mut out = Vec::new();
    for piece in [&bytes[..split], &bytes[split..]] {
        d.push(piece);
        loop {
            match d.next_frame() {
                Ok(Some(f)) => out.push(dec(&f)),
                Ok(None) => break,
                Err(e) => return (out, Some(e)),
            }
        }
    }
    (out, None)
}

fn dec_client(f: &Frame<'_>) -> Result<String, DecodeError> {
    ClientMsg::decode(f).map(|m| format!("{m:?}"))
}

fn dec_server(f: &Frame<'_>) -> Result<String, DecodeError> {
    ServerMsg::decode(f).map(|m| format!("{m:?}"))
}

/// Every frame of `bytes` either is refused with a typed error or decodes
/// to a message that re-encodes to exactly its bytes.
fn canonical_or_refused(bytes: &[u8]) -> Result<(), TestCaseError> {
    let mut at = 0;
    while let Ok(Some((f, n))) = split_frame(&bytes[at..], BODY_MAX) {
        let mut out = Vec::new();
        if let Ok(m) = ClientMsg::decode(&f) {
            m.encode(&mut out);
            prop_assert_eq!(&out[..], &bytes[at..at + n]);
        }
        out.clear();
        if let Ok(m) = ServerMsg::decode(&f) {
            m.encode(&mut out);
            prop_assert_eq!(&out[..], &bytes[at..at + n]);
        }
        at += n;
    }
    Ok(())
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(128)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn client_messages_round_trip_at_every_split(msgs in proptest::collection::vec(client_msg(), 1..6)) {
        let mut bytes = Vec::new();
        for m in &msgs {
            m.msg().encode(&mut bytes);
        }
        let want: Vec<_> = msgs.iter().map(|m| Ok(format!("{:?}", m.msg()))).collect();
        let (whole, err) = decode_all(&bytes, bytes.len(), dec_client);
        prop_assert_eq!(&whole, &want);
        prop_assert_eq!(err, None);
        for split in 0..=bytes.len() {
            prop_assert_eq!(&decode_all(&bytes, split, dec_client).0, &whole, "split {}", split);
        }
        canonical_or_refused(&bytes)?;
    }

    #[test]
    fn server_messages_round_trip_at_every_split(msgs in proptest::collection::vec(server_msg(), 1..6)) {
        let mut bytes = Vec::new();
        for m in &msgs {
            m.msg().encode(&mut bytes);
        }
        let want: Vec<_> = msgs.iter().map(|m| Ok(format!("{:?}", m.msg()))).collect();
        let (whole, err) = decode_all(&bytes, bytes.len(), dec_server);
        prop_assert_eq!(&whole, &want);
        prop_assert_eq!(err, None);
        for split in 0..=bytes.len() {
            prop_assert_eq!(&decode_all(&bytes, split, dec_server).0, &whole, "split {}", split);
        }
        canonical_or_refused(&bytes)?;
    }

    #[test]
    fn random_bytes_are_refused_or_canonical(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = decode_all(&bytes, bytes.len() / 2, dec_client);
        let _ = decode_all(&bytes, bytes.len() / 3, dec_server);
        canonical_or_refused(&bytes)?;
    }

    #[test]
    fn mutated_streams_are_refused_or_canonical(
        c in proptest::collection::vec(client_msg(), 1..4),
        s in proptest::collection::vec(server_msg(), 1..4),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
    ) {
        let mut bytes = Vec::new();
        for m in &c {
            m.msg().encode(&mut bytes);
        }
        for m in &s {
            m.msg().encode(&mut bytes);
        }
        for (i, b) in &flips {
            let i = i.index(bytes.len());
            bytes[i] = *b;
        }
        let (c_all, c_err) = decode_all(&bytes, bytes.len(), dec_client);
        let (s_all, _) = decode_all(&bytes, bytes.len(), dec_server);
        prop_assert_eq!(c_all.len(), s_all.len());
        if let Some(e) = c_err {
            let is_too_large = matches!(e, DecodeError::FrameTooLarge { .. });
            prop_assert!(is_too_large);
        }
        canonical_or_refused(&bytes)?;
    }

    #[test]
    fn oversized_frames_are_refused_from_the_header(len in (BODY_MAX + 1)..=u32::MAX, kind in any::<u16>()) {
        let mut h = Vec::new();
        h.extend_from_slice(&len.to_le_bytes());
        h.extend_from_slice(&kind.to_le_bytes());
        h.extend_from_slice(&[0, 0]);
        let mut d = FrameDecoder::new(BODY_MAX);
        d.push(&h);
        prop_assert_eq!(d.next_frame(), Err(DecodeError::FrameTooLarge { len, max: BODY_MAX }));
    }

    #[test]
    fn prefixes_wait_and_short_bodies_are_truncated(m in server_msg(), cut in any::<prop::sample::Index>()) {
        let mut bytes = Vec::new();
        m.msg().encode(&mut bytes);
        let cut = cut.index(bytes.len());
        prop_assert_eq!(split_frame(&bytes[..cut], BODY_MAX), Ok(None));
        // Re-frame a shortened body: refused (never a panic, never a message).
        let body_len = bytes.len() - HEADER_BYTES;
        let short = cut.min(body_len.saturating_sub(1));
        if body_len > 0 {
            let mut b = bytes[..HEADER_BYTES + short].to_vec();
            b[..4].copy_from_slice(&(short as u32).to_le_bytes());
            let (f, _) = split_frame(&b, BODY_MAX).expect("fits").expect("whole");
            let r = ServerMsg::decode(&f);
            let variable = matches!(m, S::Batch(..) | S::Error(..) | S::Kick(..));
            if !variable {
                let is_truncated = matches!(r, Err(DecodeError::Truncated { .. }));
                prop_assert!(is_truncated, "{:?}", r);
            }
        }
    }
}

// ---------------------------------------------------------------------------
// PROTOCOL.md: the hex examples there must be what the encoder writes.

mod doc_examples {
    use std::sync::Arc;
    use tessera::core::entity::{ArrayOp, Audience, Entity, SyncKind, TypeRegistry, Value, AVATAR};
    use tessera::core::geom::{Rect, Vec3};
    use tessera::core::ids::EntityId;
    use tessera::core::view::{encode_event, ClientEvent, Movement};
    use tessera::wire::client::{
        CallOutcome, ClientMsg, ErrorCode, ServerMsg, Welcome, PROTOCOL_VERSION as V,
    };

    /// The view batch of the example session: entity 43 (an Avatar named
    /// "Bo" with 100 hp) enters as handle 0 at version 1, moves (v2), loses
    /// 10 hp (v3), gains a buff (v4), moves twice (v5 coalesced, a key frame
    /// at v6), leaves.
    fn batch() -> Vec<u8> {
        let reg = TypeRegistry::with_builtins();
        let ty = Arc::clone(reg.get(AVATAR).expect("avatar"));
        let idx = |n: &str| ty.prop_index(n).expect("prop");
        let pos = Vec3 {
            x: 12.0,
            y: 0.0,
            z: 20.0,
        };
        let mut e = Entity::new_real(EntityId(43), Arc::clone(&ty), pos, 0.0);
        let p = e.props_mut();
        p.set(idx("name"), Value::Str("Bo".into())).expect("name");
        p.set(idx("level"), Value::UInt(3)).expect("level");
        p.set(idx("hp"), Value::Int(100)).expect("hp");
        p.set(idx("max_hp"), Value::Int(100)).expect("max_hp");
        e.clear_dirty();
        let mut snap = Vec::new();
        e.encode_snapshot(Audience::OtherClients, &mut snap);
        let mut b = Vec::new();
        encode_event(
            &mut b,
            &ClientEvent::Enter {
                handle: 0,
                entity: EntityId(43),
                type_id: AVATAR,
                pos,
                yaw: 0.0,
                version: 1,
                snapshot: &snap,
            },
        );
        // Moved 1 m east, facing 0.5 rad: a delta of +100 cm on x, heading
        // byte round(0.5 / 2 pi * 256) = 20.
        encode_event(
            &mut b,
            &ClientEvent::Move {
                handle: 0,
                version_low: 2,
                mv: Movement {
                    absolute: false,
                    d: [100, 0, 0],
                    yaw: 20,
                },
            },
        );
        e.props_mut().set(idx("hp"), Value::Int(90)).expect("hp");
        let mut delta = Vec::new();
        e.encode_change(SyncKind::Props, Audience::OtherClients, &mut delta);
        e.clear_dirty();
        encode_event(
            &mut b,
            &ClientEvent::Props {
                handle: 0,
                version_low: 3,
                delta: &delta,
            },
        );
        let buff = Value::Record(vec![Value::UInt(4), Value::Int(1), Value::UInt(5000)]);
        e.props_mut()
            .array_op(idx("buffs"), ArrayOp::Push(buff))
            .expect("push");
        delta.clear();
        e.encode_change(SyncKind::Props, Audience::OtherClients, &mut delta);
        e.clear_dirty();
        encode_event(
            &mut b,
            &ClientEvent::Props {
                handle: 0,
                version_low: 4,
                delta: &delta,
            },
        );
        // Two movements later (v5 coalesced away), a key frame at
        // (14.5, 0, 21) facing 0: version 4 + 2 = 6.
        encode_event(
            &mut b,
            &ClientEvent::Move {
                handle: 0,
                version_low: 6,
                mv: Movement {
                    absolute: true,
                    d: [1450, 0, 2100],
                    yaw: 0,
                },
            },
        );
        encode_event(&mut b, &ClientEvent::Leave { handle: 0 });
        b
    }

    /// The second view batch of the example session: entity 44 (an Avatar
    /// named "Cy", level 2, 80 of 100 hp) enters 41.5 m away as handle 1 at
    /// version 1, its hp left out (beyond the 30 m reach of `hp`'s level
    /// of detail: the default, 0); it loses hp (v2: cut, an empty delta);
    /// it comes 20 m nearer (v3, 21.5 m away); its hp is caught up at v3.
    fn batch_far() -> Vec<u8> {
        let reg = TypeRegistry::with_builtins();
        let ty = Arc::clone(reg.get(AVATAR).expect("avatar"));
        let idx = |n: &str| ty.prop_index(n).expect("prop");
        let pos = Vec3 {
            x: 52.0,
            y: 0.0,
            z: 20.0,
        };
        let mut e = Entity::new_real(EntityId(44), Arc::clone(&ty), pos, 0.0);
        let p = e.props_mut();
        p.set(idx("name"), Value::Str("Cy".into())).expect("name");
        p.set(idx("level"), Value::UInt(2)).expect("level");
        p.set(idx("hp"), Value::Int(100)).expect("hp");
        p.set(idx("max_hp"), Value::Int(100)).expect("max_hp");
        e.clear_dirty();
        let hp = 1u64 << idx("hp");
        let mut snap = Vec::new();
        e.encode_snapshot_except(Audience::OtherClients, hp, &mut snap);
        let mut b = Vec::new();
        encode_event(
            &mut b,
            &ClientEvent::Enter {
                handle: 1,
                entity: EntityId(44),
                type_id: AVATAR,
                pos,
                yaw: 0.0,
                version: 1,
                snapshot: &snap,
            },
        );
        e.props_mut().set(idx("hp"), Value::Int(80)).expect("hp");
        encode_event(
            &mut b,
            &ClientEvent::Props {
                handle: 1,
                version_low: 2,
                delta: &[0],
            },
        );
        encode_event(
            &mut b,
            &ClientEvent::Move {
                handle: 1,
                version_low: 3,
                mv: Movement {
                    absolute: false,
                    d: [-2000, 0, 0],
                    yaw: 0,
                },
            },
        );
        let mut whole = Vec::new();
        e.props()
            .encode_whole(Audience::OtherClients, hp, &mut whole);
        encode_event(
            &mut b,
            &ClientEvent::Detail {
                handle: 1,
                version_low: 3,
                delta: &whole,
            },
        );
        b
    }

    fn c(m: ClientMsg<'_>) -> Vec<u8> {
        let mut out = Vec::new();
        m.encode(&mut out);
        out
    }

    fn s(m: ServerMsg<'_>) -> Vec<u8> {
        let mut out = Vec::new();
        m.encode(&mut out);
        out
    }

    /// The Welcome of the example session.
    fn welcome() -> Welcome {
        Welcome {
            tick_ms: 50,
            entity: EntityId(42),
            own_handle: None,
            client_body_bytes_max: 4096,
            bounds: Rect {
                min_x: 0.0,
                min_z: 0.0,
                max_x: 1024.0,
                max_z: 1024.0,
            },
            server_time_us: 1_000_000,
            next_seq: 1,
            pos: tessera::core::geom::Vec3::ground(512.0, 512.0),
            space: 1,
            space_type: 1,
        }
    }

    /// Every example of PROTOCOL.md by name, as the encoder writes it.
    pub fn all() -> Vec<(&'static str, Vec<u8>)> {
        let welcome = welcome();
        let batch = batch();
        let far = batch_far();
        vec![
            ("hello", c(ClientMsg::Hello { version: V })),
            (
                "login",
                c(ClientMsg::Login {
                    name: "ann",
                    token: Some(&[0xab, 0xcd]),
                }),
            ),
            ("welcome", s(ServerMsg::Welcome(welcome))),
            (
                "move",
                c(ClientMsg::Move {
                    seq: 1,
                    client_time_us: 2_000_000,
                    pos: Vec3 {
                        x: 10.5,
                        y: 0.0,
                        z: 20.25,
                    },
                    yaw: 1.5,
                }),
            ),
            ("input_ack", s(ServerMsg::InputAck { last_seq: 1 })),
            (
                "view_batch",
                s(ServerMsg::ViewBatch {
                    tick: 7,
                    batch: &batch,
                }),
            ),
            (
                "view_batch_detail",
                s(ServerMsg::ViewBatch {
                    tick: 8,
                    batch: &far,
                }),
            ),
            (
                "hit",
                c(ClientMsg::Hit {
                    seq: 2,
                    client_time_us: 2_050_000,
                    target: 0,
                    damage: 10,
                }),
            ),
            (
                "call_result",
                s(ServerMsg::CallResult {
                    seq: 2,
                    outcome: CallOutcome::HitLanded {
                        dealt: 10,
                        killed: false,
                    },
                }),
            ),
            (
                "set_prop",
                c(ClientMsg::SetProp {
                    seq: 3,
                    client_time_us: 2_100_000,
                    prop: 0,
                    value: &[2, b'A', b'n'],
                }),
            ),
            (
                "error",
                s(ServerMsg::Error {
                    seq: 3,
                    code: ErrorCode::PropNotSettable,
                    text: "name",
                }),
            ),
            (
                "ping",
                c(ClientMsg::Ping {
                    nonce: 9,
                    client_time_us: 2_200_000,
                }),
            ),
            (
                "pong",
                s(ServerMsg::Pong {
                    nonce: 9,
                    client_time_us: 2_200_000,
                    server_time_us: 1_150_000,
                }),
            ),
            ("spaces", Vec::new()),
            ("bye", c(ClientMsg::Bye)),
            (
                "kick",
                s(ServerMsg::Kick {
                    code: ErrorCode::Shutdown,
                    text: "bye",
                }),
            ),
        ]
        .into_iter()
        .flat_map(|(n, b)| {
            if n == "spaces" {
                space_examples()
            } else {
                vec![(n, b)]
            }
        })
        .collect()
    }

    /// The examples of version 2's space messages.
    fn space_examples() -> Vec<(&'static str, Vec<u8>)> {
        vec![
            (
                "enter_space",
                c(ClientMsg::EnterSpace {
                    space: 0,
                    type_id: 2,
                }),
            ),
            (
                "space_changed",
                s(ServerMsg::SpaceChanged {
                    space: 1000,
                    type_id: 2,
                    pos: tessera::core::geom::Vec3::ground(512.0, 512.0),
                }),
            ),
            (
                "enter_space_by_id",
                c(ClientMsg::EnterSpace {
                    space: 1001,
                    type_id: 0,
                }),
            ),
            (
                "space_error",
                s(ServerMsg::Error {
                    seq: 0,
                    code: ErrorCode::SpaceFull,
                    text: "space-full",
                }),
            ),
        ]
    }

    /// The ```` ```hex NAME ```` blocks of PROTOCOL.md.
    pub fn parse(doc: &str) -> Vec<(String, Vec<u8>)> {
        super::protocol_doc::parse(doc)
    }
}

#[test]
fn protocol_md_examples_match_the_encoder() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/PROTOCOL.md"))
        .expect("PROTOCOL.md at the repository root");
    let documented = doc_examples::parse(&doc);
    let built = doc_examples::all();
    if std::env::var_os("TESSERA_DUMP_EXAMPLES").is_some() {
        for (name, bytes) in &built {
            let hex: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
            eprintln!("{name}: {}", hex.join(" "));
        }
    }
    let names: Vec<&str> = documented.iter().map(|(n, _)| n.as_str()).collect();
    let want: Vec<&str> = built.iter().map(|(n, _)| *n).collect();
    assert_eq!(names, want, "PROTOCOL.md examples, in order");
    for ((name, doc_bytes), (_, bytes)) in documented.iter().zip(&built) {
        assert_eq!(doc_bytes, bytes, "example `{name}`");
    }
    // A client session driven through the example session sends exactly the
    // documented client bytes and accepts the server's without a violation.
    let ex = |name: &str| -> &[u8] { &built.iter().find(|(n, _)| *n == name).expect("example").1 };
    let reg = std::sync::Arc::new(tessera::core::entity::TypeRegistry::with_builtins());
    let mut s = tessera::client::ClientSession::new(Default::default(), reg);
    let t = tessera::core::time::Time;
    s.connect("ann", Some(&[0xab, 0xcd])).expect("connect");
    s.handle_bytes(t(1_990_000), ex("welcome"), &mut ());
    let pos = tessera::core::geom::Vec3 {
        x: 10.5,
        y: 0.0,
        z: 20.25,
    };
    s.send_move(t(2_000_000), pos, 1.5).expect("move");
    s.handle_bytes(t(2_040_000), ex("input_ack"), &mut ());
    s.handle_bytes(t(2_045_000), ex("view_batch"), &mut ());
    s.handle_bytes(t(2_046_000), ex("view_batch_detail"), &mut ());
    s.send_hit(t(2_050_000), 0, 10).expect("hit");
    s.handle_bytes(t(2_090_000), ex("call_result"), &mut ());
    s.send_set_prop(t(2_100_000), 0, &[2, b'A', b'n'])
        .expect("set");
    s.handle_bytes(t(2_150_000), ex("error"), &mut ());
    s.send_ping(t(2_200_000), 9).expect("ping");
    s.handle_bytes(t(2_210_000), ex("pong"), &mut ());
    s.send_enter_space(0, 2).expect("enter");
    s.handle_bytes(t(2_250_000), ex("space_changed"), &mut ());
    assert_eq!(s.space(), Some((1000, 2)));
    s.send_enter_space(1001, 0).expect("enter");
    s.handle_bytes(t(2_260_000), ex("space_error"), &mut ());
    assert!(!s.space_pending(), "the Error ends the change");
    s.send_bye(t(2_300_000)).expect("bye");
    let sent: Vec<u8> = [
        "hello",
        "login",
        "move",
        "hit",
        "set_prop",
        "ping",
        "enter_space",
        "enter_space_by_id",
        "bye",
    ]
    .iter()
    .flat_map(|n| ex(n).to_vec())
    .collect();
    assert_eq!(s.transmit(), &sent[..]);
    assert_eq!(s.violation_count(), 0, "{:?}", s.violations());
    let c = *s.counters();
    assert_eq!(
        (c.enters, c.updates, c.leaves, c.calls_done, c.inputs_acked),
        (2, 6, 1, 2, 1)
    );
    assert_eq!(c.details, 1, "one level-of-detail catch-up");
}
