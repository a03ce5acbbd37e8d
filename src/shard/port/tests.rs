//! Unit tests of the detached port: bounds, ids, events, consume/input.

use super::*;

fn peer(n: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 10_000 + n))
}

fn params() -> PortParams {
    PortParams {
        connections_max: 3,
        inbound_bytes_max: 16,
        send_queue_bytes_max: 32,
        read_batch_bytes: 8,
        linger_ms: 10,
        io_poll_ms: 5,
        io_events_max: 64,
        handoffs_max: 4,
    }
}

fn closed(port: &mut ClientPort) -> Vec<(ConnId, CloseReason)> {
    let mut out = Vec::new();
    while let Some(ev) = port.poll_event() {
        if let PortEvent::Closed { conn, reason } = ev {
            out.push((conn, reason));
        }
    }
    out
}

#[test]
fn open_input_consume_send_take_output() {
    let mut port = ClientPort::detached(params());
    let a = port.inject_open(peer(1));
    assert_eq!(
        port.poll_event(),
        Some(PortEvent::Opened {
            conn: a,
            peer: peer(1)
        })
    );
    assert_eq!(port.poll_event(), None);
    assert!(port.readable().next().is_none());
    port.inject_input(a, b"hello ");
    port.inject_input(a, b"world");
    assert_eq!(port.readable().collect::<Vec<_>>(), vec![a]);
    assert_eq!(port.input(a), b"hello world");
    port.consume(a, 6);
    assert_eq!(port.input(a), b"world");
    port.consume(a, 100);
    assert_eq!(port.input(a), b"");
    assert!(port.readable().next().is_none());
    port.send(a, b"abc").expect("room");
    port.send(a, b"def").expect("room");
    assert_eq!(port.queued(a), 6);
    assert_eq!(port.take_output(a), b"abcdef");
    assert_eq!(port.queued(a), 0);
    let c = port.counters();
    assert_eq!((c.opened, c.bytes_in, c.bytes_out), (1, 11, 6));
    port.verify();
}

#[test]
fn readable_is_in_conn_id_order_and_inputs_are_separate() {
    let mut port = ClientPort::detached(params());
    let ids: Vec<ConnId> = (0..3).map(|i| port.inject_open(peer(i))).collect();
    port.inject_input(ids[2], b"c");
    port.inject_input(ids[0], b"a");
    let r: Vec<ConnId> = port.readable().collect();
    assert_eq!(r, vec![ids[0], ids[2]]);
    assert!(r.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(port.input(ids[0]), b"a");
    assert_eq!(port.input(ids[1]), b"");
    assert_eq!(port.input(ids[2]), b"c");
    port.verify();
}

#[test]
fn send_queue_full_closes_as_slow_reader() {
    let mut port = ClientPort::detached(params());
    let a = port.inject_open(peer(1));
    let b = port.inject_open(peer(2));
    port.send(a, &[1; 30]).expect("fits");
    port.inject_input(a, b"x");
    assert_eq!(
        port.send(a, &[2; 3]),
        Err(PortError::SendQueueFull {
            conn: a,
            queued: 30
        })
    );
    // Closed at once: nothing more queued, nothing readable, sends refused.
    assert_eq!(port.queued(a), 0);
    assert_eq!(port.input(a), b"");
    assert_eq!(port.send(a, b"y"), Err(PortError::Unknown(a)));
    assert!(port.take_output(a).is_empty());
    assert_eq!(port.open_connections(), 1);
    // The other connection is unaffected.
    port.send(b, &[3; 32]).expect("exactly the bound fits");
    assert_eq!(closed(&mut port), vec![(a, CloseReason::SlowReader)]);
    assert_eq!(port.counters().closed[CloseReason::SlowReader.index()], 1);
    port.verify();
}

#[test]
fn send_buf_swaps_into_an_empty_queue_and_appends_to_a_busy_one() {
    let mut port = ClientPort::detached(params());
    let a = port.inject_open(peer(1));
    let mut buf = b"abc".to_vec();
    port.send_buf(a, &mut buf).expect("room");
    assert!(buf.is_empty(), "taken");
    buf.extend_from_slice(b"de");
    port.send_buf(a, &mut buf).expect("room");
    assert!(buf.is_empty());
    port.send(a, b"f").expect("room");
    assert_eq!(port.queued(a), 6);
    assert_eq!(port.take_output(a), b"abcdef");
    buf.extend_from_slice(b"gh");
    port.send_buf(a, &mut buf).expect("room");
    assert_eq!(port.take_output(a), b"gh");
    port.verify();
    buf.extend_from_slice(&[1; 33]);
    assert!(matches!(
        port.send_buf(a, &mut buf),
        Err(PortError::SendQueueFull { queued: 0, .. })
    ));
    assert_eq!(buf.len(), 33, "left as it was");
    assert_eq!(port.send_buf(a, &mut buf), Err(PortError::Unknown(a)));
    port.verify();
}

#[test]
fn oversized_single_send_is_refused_too() {
    let mut port = ClientPort::detached(params());
    let a = port.inject_open(peer(1));
    assert!(matches!(
        port.send(a, &[0; 33]),
        Err(PortError::SendQueueFull { queued: 0, .. })
    ));
    assert!(!port.is_open(a));
}

#[test]
fn inbound_room_is_bounded() {
    let mut port = ClientPort::detached(params());
    let a = port.inject_open(peer(1));
    assert_eq!(port.inbound_room(a), 16);
    port.inject_input(a, &[7; 16]);
    assert_eq!(port.inbound_room(a), 0);
    assert_eq!(port.io_read_room(a.slot()), 0);
    port.consume(a, 5);
    assert_eq!(port.inbound_room(a), 5);
    // The socket side reads at most read_batch_bytes at a time.
    port.consume(a, 11);
    assert_eq!(port.io_read_room(a.slot()), 8);
    port.verify();
}

#[test]
#[should_panic(expected = "exceed the inbound room")]
fn injecting_past_the_inbound_bound_panics() {
    let mut port = ClientPort::detached(params());
    let a = port.inject_open(peer(1));
    port.inject_input(a, &[0; 17]);
}

#[test]
fn ids_are_not_reused_while_alive() {
    let mut port = ClientPort::detached(params());
    let a = port.inject_open(peer(1));
    port.close(a);
    // Closed but its event not polled: the slot is still taken.
    assert_eq!(port.slots_in_use(), 1);
    let b = port.inject_open(peer(2));
    assert_ne!(a.slot(), b.slot());
    assert_eq!(closed(&mut port), vec![(a, CloseReason::ClosedByApp)]);
    // Now the slot is reused with a new generation: a different id.
    let c = port.inject_open(peer(3));
    assert_eq!(c.slot(), a.slot());
    assert_ne!(c, a);
    assert_eq!(port.send(a, b"x"), Err(PortError::Unknown(a)));
    port.send(c, b"x").expect("c is open");
    assert_eq!(port.input(a), b"");
    port.verify();
}

#[test]
fn many_open_close_cycles_keep_ids_unique_among_live() {
    let mut port = ClientPort::detached(params());
    let mut live: Vec<ConnId> = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for round in 0..200_u16 {
        if live.len() < 3 && port.slots_in_use() < 3 {
            let id = port.inject_open(peer(round));
            assert!(seen.insert(id), "id {id:?} reused");
            live.push(id);
        }
        if round % 3 == 0 && !live.is_empty() {
            let id = live.remove(usize::from(round) % live.len());
            port.inject_close(id, CloseReason::PeerClosed);
        }
        while port.poll_event().is_some() {}
        port.verify();
    }
}

#[test]
fn app_close_lingers_until_output_is_taken() {
    let mut port = ClientPort::detached(params());
    let a = port.inject_open(peer(1));
    port.send(a, b"bye").expect("room");
    port.close(a);
    assert_eq!(closed(&mut port), vec![(a, CloseReason::ClosedByApp)]);
    assert_eq!(port.slots_in_use(), 1, "still flushing");
    assert_eq!(port.queued(a), 3);
    assert_eq!(port.send(a, b"more"), Err(PortError::Unknown(a)));
    assert_eq!(port.take_output(a), b"bye");
    assert_eq!(port.slots_in_use(), 0);
    port.verify();
}

#[test]
fn peer_close_drops_output_but_input_stays_until_the_event() {
    let mut port = ClientPort::detached(params());
    let a = port.inject_open(peer(1));
    let _ = port.poll_event();
    port.inject_input(a, b"last words");
    port.send(a, b"unsent").expect("room");
    port.inject_close(a, CloseReason::PeerClosed);
    assert_eq!(port.queued(a), 0);
    assert_eq!(port.send(a, b"x"), Err(PortError::Unknown(a)));
    assert_eq!(port.input(a), b"last words");
    assert_eq!(port.readable().collect::<Vec<_>>(), vec![a]);
    assert_eq!(
        port.poll_event(),
        Some(PortEvent::Closed {
            conn: a,
            reason: CloseReason::PeerClosed
        })
    );
    assert_eq!(port.input(a), b"");
    assert!(port.readable().next().is_none());
    assert_eq!(port.slots_in_use(), 0);
    // A second close of a dead id is a no-op.
    port.inject_close(a, CloseReason::IoError);
    port.close(a);
    assert_eq!(port.poll_event(), None);
    port.verify();
}

#[test]
fn connections_max_refuses_on_the_socket_side() {
    let mut port = ClientPort::attached(params());
    for i in 0..3 {
        assert!(port.io_open(peer(i)).is_some());
    }
    assert_eq!(port.io_open(peer(9)), None);
    assert_eq!(
        port.counters().closed[CloseReason::TooManyConnections.index()],
        1
    );
    assert_eq!(port.open_connections(), 3);
}

#[test]
fn shutdown_closes_every_connection() {
    let mut port = ClientPort::detached(params());
    let a = port.inject_open(peer(1));
    let b = port.inject_open(peer(2));
    port.send(b, b"kick").expect("room");
    port.shutdown_all();
    let mut c = closed(&mut port);
    c.sort_by_key(|(conn, _)| *conn);
    assert_eq!(
        c,
        vec![(a, CloseReason::Shutdown), (b, CloseReason::Shutdown)]
    );
    assert_eq!(port.take_output(b), b"kick");
    assert_eq!(port.slots_in_use(), 0);
    port.verify();
}

#[test]
fn io_side_is_told_of_send_consume_and_close() {
    let mut due = Vec::new();
    let mut port = ClientPort::attached(params());
    let a = port.io_open(peer(1)).expect("room");
    let b = port.io_open(peer(2)).expect("room");
    let s = a.slot();
    port.send(a, b"x").expect("room");
    port.send(b, b"z").expect("room");
    port.send(a, b"y").expect("room");
    port.verify();
    port.io_take_due(&mut due);
    assert_eq!(
        due,
        vec![s, b.slot()],
        "first byte queued makes the slot due, once, in order"
    );
    port.send(a, b"w").expect("room");
    port.io_take_due(&mut due);
    assert!(due.is_empty(), "queue already non-empty: not due again");
    assert_eq!(port.io_pending_output(s), b"xyw");
    port.io_wrote(s, 3);
    port.io_received(s, &[0; 16]);
    assert_eq!(port.io_read_room(s), 0);
    port.consume(a, 1);
    port.io_take_due(&mut due);
    assert_eq!(due, vec![s], "room again makes the paused reader due");
    port.close(a);
    port.verify();
    port.io_take_due(&mut due);
    assert_eq!(due, vec![s], "a close makes the slot due");
    assert_eq!(
        port.io_state(s),
        SlotState::Lingering,
        "graceful close lingers"
    );
    port.io_release(s);
    assert_eq!(port.slots_in_use(), 2, "Closed not polled yet");
    assert_eq!(closed(&mut port), vec![(a, CloseReason::ClosedByApp)]);
    assert_eq!(port.slots_in_use(), 1);
    port.verify();
}

#[test]
fn a_handed_off_connection_is_over_here_without_a_closed_event() {
    let mut port = ClientPort::detached(params());
    let a = port.inject_open(peer(1));
    let b = port.inject_open(peer(2));
    while port.poll_event().is_some() {}
    port.inject_input(a, b"rest");
    port.send(a, b"out").expect("room");
    port.hand_off(a, 1, vec![9]).expect("open");
    assert!(!port.is_open(a));
    assert_eq!(port.poll_event(), None, "the app forgot it already");
    assert_eq!(port.readable().collect::<Vec<_>>(), Vec::<ConnId>::new());
    assert_eq!((port.inbound_held(), port.outbound_held()), (0, 0));
    // A detached port has no socket to move: the slot is free again.
    assert_eq!(port.slots_in_use(), 1);
    assert_eq!(port.counters().handoffs_failed, 1);
    assert_eq!(port.hand_off(a, 1, Vec::new()), Err(PortError::Unknown(a)));
    assert!(port.is_open(b));
    port.verify();
}
