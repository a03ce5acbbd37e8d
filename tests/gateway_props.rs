//! Property tests of the gateway's sans-IO `Session` against a brute-force
//! model: random streams of good and bad client messages (wrong seqs, fast
//! moves, bad properties, unknown kinds, garbage) interleaved with the
//! real's acks. Checked: it never panics; everything it writes decodes;
//! InputAck values rise and equal the model's "every seq up to n was
//! refused or acknowledged by the real"; forwarded inputs are exactly the
//! accepted ones, in order; the Kick comes with the refusal past the
//! strike limit and nothing follows it.
//!
//! `PROPTEST_CASES` sets the case count (default 64).

use std::sync::Arc;

use proptest::prelude::*;
use tessera::core::entity::{TypeRegistry, AVATAR};
use tessera::core::geom::{Rect, Vec3};
use tessera::core::ids::EntityId;
use tessera::core::time::Time;
use tessera::game::relay::reply_ack;
use tessera::server::gateway::{GatewayParams, Session, Step};
use tessera::wire::client::{split_frame, ClientMsg, ServerMsg, PROTOCOL_VERSION as V};

#[derive(Clone, Debug)]
enum Op {
    /// A move `dx` metres east, with the expected seq plus `skew`.
    Move { dx: f64, skew: i8 },
    /// A SetProp of `prop` with `value`.
    SetProp { prop: u16, value: Vec<u8> },
    /// A hit.
    Hit,
    /// A ping.
    Ping,
    /// Arbitrary bytes framed under `kind`.
    Raw { kind: u16, body: Vec<u8> },
    /// The real acknowledges everything forwarded so far (or half of it).
    RealAck { all: bool },
    /// A tick ends.
    Tick,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (-3.0f64..3.0, prop_oneof![8 => Just(0i8), 1 => -2i8..3]).prop_map(|(dx, skew)| Op::Move { dx, skew }),
        1 => (-50.0f64..50.0).prop_map(|dx| Op::Move { dx, skew: 0 }),
        2 => (0u16..10, proptest::collection::vec(any::<u8>(), 0..6))
            .prop_map(|(prop, value)| Op::SetProp { prop, value }),
        1 => Just(Op::Hit),
        1 => Just(Op::Ping),
        1 => (prop_oneof![Just(0x42u16), 1u16..8], proptest::collection::vec(any::<u8>(), 0..50))
            .prop_map(|(kind, body)| Op::Raw { kind, body }),
        3 => any::<bool>().prop_map(|all| Op::RealAck { all }),
        3 => Just(Op::Tick),
    ]
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64)
}

/// The model: client seqs refused by the gateway and forwarded to the real.
#[derive(Default)]
struct Model {
    next_seq: u64,
    refused: Vec<u64>,
    forwarded: Vec<u64>,
    real_acked: u64,
}

impl Model {
    /// Largest n with every seq <= n refused, or forwarded and acked.
    fn ack(&self) -> u64 {
        let mut n = 0;
        while n + 1 < self.next_seq {
            let s = n + 1;
            let done =
                self.refused.contains(&s) || (self.forwarded.contains(&s) && s <= self.real_acked);
            if !done {
                break;
            }
            n = s;
        }
        n
    }
}

/// The bytes of a client-message op and the input seq it carries;
/// `None` bytes for ops that are not client messages.
fn encode(o: &Op, next_seq: u64, x: f64) -> (Vec<u8>, Option<u64>) {
    let mut bytes = Vec::new();
    let return_seq;
    match o {
        Op::Move { dx, skew } => {
            let seq = (next_seq as i64 + i64::from(*skew)).max(1) as u64;
            return_seq = Some(seq);
            ClientMsg::Move {
                seq,
                client_time_us: 0,
                pos: Vec3::ground(x + dx, 500.0),
                yaw: 0.0,
            }
            .encode(&mut bytes);
        }
        Op::SetProp { prop, value } => {
            return_seq = Some(next_seq);
            ClientMsg::SetProp {
                seq: next_seq,
                client_time_us: 0,
                prop: *prop,
                value,
            }
            .encode(&mut bytes);
        }
        Op::Hit => {
            return_seq = Some(next_seq);
            ClientMsg::Hit {
                seq: next_seq,
                client_time_us: 0,
                target: 3,
                damage: 1,
            }
            .encode(&mut bytes);
        }
        Op::Ping => {
            return_seq = None;
            ClientMsg::Ping {
                nonce: 1,
                client_time_us: 0,
            }
            .encode(&mut bytes);
        }
        Op::Raw { kind, body } => {
            return_seq = None;
            bytes.extend_from_slice(&(body.len() as u32).to_le_bytes());
            bytes.extend_from_slice(&kind.to_le_bytes());
            bytes.extend_from_slice(&[0, 0]);
            bytes.extend_from_slice(body);
        }
        Op::RealAck { .. } | Op::Tick => return (bytes, None),
    }
    (bytes, return_seq)
}

fn run(ops: &[Op], strikes_max: u32) -> Result<(), TestCaseError> {
    let reg = Arc::new(TypeRegistry::with_builtins());
    let avatar = reg.get(AVATAR).expect("avatar").clone();
    let params = GatewayParams {
        world: Rect::new(0.0, 0.0, 1000.0, 1000.0),
        abuse_strikes_max: strikes_max,
        ..GatewayParams::default()
    };
    let mut s = Session::new(params, avatar, Time::ZERO);
    let mut now = Time::from_millis(1000);
    let mut input = Vec::new();
    ClientMsg::Hello { version: V }.encode(&mut input);
    ClientMsg::Login {
        name: "p",
        token: None,
    }
    .encode(&mut input);
    let mut login = false;
    s.handle_input(now, &input, |_, st| {
        login |= matches!(st, Step::Login { .. })
    });
    prop_assert!(login);
    s.welcome(now, EntityId(1), Vec3::ground(500.0, 500.0));
    let mut m = Model {
        next_seq: 1,
        ..Model::default()
    };
    let (mut x, mut out, mut closed) = (500.0, Vec::new(), false);
    let (mut errors, mut kicks, mut acks) = (0u32, 0u32, Vec::new());
    for o in ops {
        let (mut bytes, mut seq_sent) = encode(o, m.next_seq, x);
        match o {
            Op::RealAck { all } => {
                let upto = if *all {
                    m.forwarded.len()
                } else {
                    m.forwarded.len() / 2
                };
                if let Some(&last) = m.forwarded[..upto].last() {
                    m.real_acked = m.real_acked.max(last);
                    s.handle_down(1, &reply_ack(last));
                }
                continue;
            }
            Op::Tick => {
                s.end_tick();
                now = now + std::time::Duration::from_millis(50);
                (bytes, seq_sent) = (Vec::new(), None);
            }
            _ => {}
        }
        let mut forwarded = Vec::new();
        if !bytes.is_empty() {
            s.handle_input(now, &bytes, |_, st| match st {
                Step::Input(i) => forwarded.push(i.seq()),
                Step::Close(_) => closed = true,
                _ => {}
            });
        }
        let before = errors;
        // Decode what was written.
        let written = s.output().to_vec();
        s.clear_output();
        let mut rest = &written[..];
        while let Some((f, n)) =
            split_frame(rest, u32::MAX).map_err(|e| TestCaseError::fail(e.to_string()))?
        {
            prop_assert!(kicks == 0, "output after a Kick");
            match ServerMsg::decode(&f) {
                Ok(ServerMsg::Error { .. }) => errors += 1,
                Ok(ServerMsg::Kick { .. }) => kicks += 1,
                Ok(ServerMsg::InputAck { last_seq }) => acks.push(last_seq),
                Ok(_) => {}
                Err(e) => return Err(TestCaseError::fail(format!("bad frame: {e}"))),
            }
            rest = &rest[n..];
        }
        prop_assert!(rest.is_empty());
        out.extend_from_slice(&written);
        if let Some(seq) = seq_sent {
            if kicks > 0 || closed {
                break;
            }
            if seq == m.next_seq {
                // Accepted or refused (an Error): either way it is used up.
                if forwarded == [seq] {
                    m.forwarded.push(seq);
                    if let Op::Move { dx, .. } = o {
                        x += dx;
                    }
                } else {
                    prop_assert!(forwarded.is_empty());
                    prop_assert_eq!(errors, before + 1, "refused {:?} without one Error", o);
                    m.refused.push(seq);
                }
                m.next_seq += 1;
            } else {
                prop_assert!(forwarded.is_empty(), "bad seq forwarded");
                prop_assert_eq!(errors, before + 1);
            }
        } else {
            prop_assert!(forwarded.is_empty());
        }
        if matches!(o, Op::Tick) {
            prop_assert_eq!(
                acks.last().copied().unwrap_or(0),
                m.ack(),
                "ack after a tick"
            );
        }
        if closed || kicks > 0 {
            break;
        }
    }
    prop_assert!(acks.windows(2).all(|w| w[0] < w[1]), "acks rise: {acks:?}");
    prop_assert!(errors <= strikes_max + 1);
    prop_assert_eq!(kicks > 0, errors > strikes_max, "kick iff past the limit");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn the_session_keeps_its_rules(ops in proptest::collection::vec(op(), 1..120), strikes in 2u32..12) {
        run(&ops, strikes)?;
    }
}
