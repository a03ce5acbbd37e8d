//! The detached `ClientPort` against a brute-force model: random sequences of
//! opens, input, consumes, sends, closes (app and peer), event polls and
//! output takes, on live and dead ids. After every step the port must agree
//! with the model on events, input, queued output, open connections, the
//! readable list (in ConnId order), slots in use, and ids never reused while
//! alive.
//!
//! `PROPTEST_CASES` raises the case count (default 128).

use proptest::prelude::*;
use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use tessera::shard::{ClientPort, CloseReason, ConnId, PortError, PortEvent, PortParams};

const MAX_CONNS: usize = 4;
const INBOUND_MAX: usize = 24;
const QUEUE_MAX: usize = 40;

#[derive(Clone, Debug)]
enum Op {
    Open,
    Input(usize, usize),
    Consume(usize, usize),
    Send(usize, usize),
    Close(usize),
    PeerClose(usize, bool),
    Poll,
    Take(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => Just(Op::Open),
        3 => (any::<usize>(), 0..30_usize).prop_map(|(k, n)| Op::Input(k, n)),
        2 => (any::<usize>(), 0..30_usize).prop_map(|(k, n)| Op::Consume(k, n)),
        3 => (any::<usize>(), 0..30_usize).prop_map(|(k, n)| Op::Send(k, n)),
        1 => any::<usize>().prop_map(Op::Close),
        1 => (any::<usize>(), any::<bool>()).prop_map(|(k, e)| Op::PeerClose(k, e)),
        3 => Just(Op::Poll),
        2 => any::<usize>().prop_map(Op::Take),
    ]
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum St {
    Open,
    /// Closed for the app, output still to be taken.
    Lingering,
    Dead,
}

#[derive(Debug)]
struct Conn {
    st: St,
    input: Vec<u8>,
    output: Vec<u8>,
    /// Its Closed event was polled.
    polled: bool,
}

impl Conn {
    fn holds_slot(&self) -> bool {
        !(self.st == St::Dead && self.polled)
    }
}

#[derive(Debug, Default)]
struct Model {
    conns: BTreeMap<ConnId, Conn>,
    /// Every id ever handed out, in order.
    ids: Vec<ConnId>,
    events: VecDeque<PortEvent>,
    next_byte: u8,
}

impl Model {
    fn pick(&self, k: usize) -> Option<ConnId> {
        (!self.ids.is_empty()).then(|| self.ids[k % self.ids.len()])
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n)
            .map(|_| {
                self.next_byte = self.next_byte.wrapping_add(1);
                self.next_byte
            })
            .collect()
    }

    fn close(&mut self, id: ConnId, reason: CloseReason) {
        let c = self.conns.get_mut(&id).expect("known");
        if !matches!(reason, CloseReason::PeerClosed | CloseReason::IoError) {
            c.input.clear();
        }
        let lingers = reason == CloseReason::ClosedByApp && !c.output.is_empty();
        if !lingers {
            c.output.clear();
        }
        c.st = if lingers { St::Lingering } else { St::Dead };
        self.events
            .push_back(PortEvent::Closed { conn: id, reason });
    }

    fn in_use(&self) -> usize {
        self.conns.values().filter(|c| c.holds_slot()).count()
    }
}

fn peer(n: usize) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, 1], 1000 + n as u16))
}

fn step(port: &mut ClientPort, m: &mut Model, op: &Op) {
    match *op {
        Op::Open => {
            if m.in_use() >= MAX_CONNS {
                return;
            }
            let id = port.inject_open(peer(m.ids.len()));
            let live = m.conns.get(&id).is_some_and(Conn::holds_slot);
            assert!(!live, "{id:?} reused while alive");
            m.ids.push(id);
            let conn = Conn {
                st: St::Open,
                input: Vec::new(),
                output: Vec::new(),
                polled: false,
            };
            m.conns.insert(id, conn);
            m.events.push_back(PortEvent::Opened {
                conn: id,
                peer: peer(m.ids.len() - 1),
            });
        }
        Op::Input(k, n) => {
            let Some(id) = m.pick(k) else { return };
            let open = m.conns[&id].st == St::Open;
            let room = if open {
                INBOUND_MAX - m.conns[&id].input.len()
            } else {
                0
            };
            assert_eq!(port.inbound_room(id), room);
            let bytes = m.bytes(n.min(room));
            port.inject_input(id, &bytes);
            if open {
                m.conns.get_mut(&id).expect("known").input.extend(bytes);
            }
        }
        Op::Consume(k, n) => {
            let Some(id) = m.pick(k) else { return };
            port.consume(id, n);
            let c = m.conns.get_mut(&id).expect("known");
            if c.holds_slot() {
                c.input.drain(..n.min(c.input.len()));
            }
        }
        Op::Send(k, n) => {
            let Some(id) = m.pick(k) else { return };
            let bytes = m.bytes(n);
            let got = port.send(id, &bytes);
            let c = m.conns.get_mut(&id).expect("known");
            if c.st != St::Open {
                assert_eq!(got, Err(PortError::Unknown(id)));
            } else if c.output.len() + n > QUEUE_MAX {
                let queued = c.output.len();
                assert_eq!(got, Err(PortError::SendQueueFull { conn: id, queued }));
                m.close(id, CloseReason::SlowReader);
            } else {
                assert_eq!(got, Ok(()));
                c.output.extend(bytes);
            }
        }
        Op::Close(k) => {
            let Some(id) = m.pick(k) else { return };
            port.close(id);
            if m.conns[&id].st == St::Open {
                m.close(id, CloseReason::ClosedByApp);
            }
        }
        Op::PeerClose(k, error) => {
            let Some(id) = m.pick(k) else { return };
            let reason = if error {
                CloseReason::IoError
            } else {
                CloseReason::PeerClosed
            };
            port.inject_close(id, reason);
            if m.conns[&id].st == St::Open {
                m.close(id, reason);
            }
        }
        Op::Poll => {
            let got = port.poll_event();
            let want = m.events.pop_front();
            assert_eq!(got, want);
            if let Some(PortEvent::Closed { conn, .. }) = want {
                let c = m.conns.get_mut(&conn).expect("known");
                c.polled = true;
                c.input.clear();
            }
        }
        Op::Take(k) => {
            let Some(id) = m.pick(k) else { return };
            let got = port.take_output(id);
            let c = m.conns.get_mut(&id).expect("known");
            if c.holds_slot() {
                assert_eq!(got, std::mem::take(&mut c.output));
                if c.st == St::Lingering {
                    c.st = St::Dead;
                }
            } else {
                assert!(got.is_empty());
            }
        }
    }
}

fn check(port: &ClientPort, m: &Model) {
    for (&id, c) in &m.conns {
        let (input, output): (&[u8], usize) = if c.holds_slot() {
            (&c.input, c.output.len())
        } else {
            (&[], 0)
        };
        assert_eq!(port.input(id), input, "input of {id:?}");
        assert_eq!(port.queued(id), output, "queued of {id:?}");
        assert_eq!(port.is_open(id), c.st == St::Open);
    }
    let open = m.conns.values().filter(|c| c.st == St::Open).count();
    assert_eq!(port.open_connections(), open);
    assert_eq!(port.slots_in_use(), m.in_use());
    let readable: Vec<ConnId> = port.readable().collect();
    let want: Vec<ConnId> = m
        .conns
        .iter()
        .filter(|(_, c)| c.holds_slot() && !c.input.is_empty())
        .map(|(&id, _)| id)
        .collect();
    assert_eq!(readable, want, "readable, in ConnId order");
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
    fn the_port_agrees_with_the_model(ops in proptest::collection::vec(op(), 1..200)) {
        let mut port = ClientPort::detached(PortParams {
            connections_max: MAX_CONNS,
            inbound_bytes_max: INBOUND_MAX,
            send_queue_bytes_max: QUEUE_MAX,
            read_batch_bytes: 8,
            linger_ms: 10,
            io_poll_ms: 5,
            io_events_max: 64,
            handoffs_max: 4,
        });
        let mut model = Model::default();
        for op in &ops {
            step(&mut port, &mut model, op);
            check(&port, &model);
        }
        // Drain: every event the model expects, nothing more.
        while let Some(want) = model.events.pop_front() {
            prop_assert_eq!(port.poll_event(), Some(want));
        }
        prop_assert_eq!(port.poll_event(), None);
    }
}
