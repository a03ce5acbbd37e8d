//! Bad input over loopback TCP: every rule answers with its Error code and
//! the connection lives; repeated abuse gets a Kick; an oversized frame
//! gets Kick `frame-too-large`; a slow reader is cut off with its reason
//! while the other clients carry on; the server counts it all.

mod gateway_support;

use std::time::Duration;

use gateway_support::{config, now, pump_until, Client, RawClient, Seen};
use tessera::core::entity::{TypeRegistry, AVATAR};
use tessera::core::geom::Vec3;
use tessera::server::EmbeddedServer;
use tessera::wire::client::{ClientMsg, ErrorCode, RefuseReason, PROTOCOL_VERSION};

fn mv(seq: u64, x: f64) -> ClientMsg<'static> {
    ClientMsg::Move {
        seq,
        client_time_us: 0,
        pos: Vec3::ground(x, 60.0),
        yaw: 0.0,
    }
}

/// Sends `m` and returns the Error it gets, checking the connection lives
/// (a Ping is still answered).
fn refused(c: &mut RawClient, m: &ClientMsg<'_>, nonce: u64) -> (u64, ErrorCode) {
    c.send(m);
    c.send(&ClientMsg::Ping {
        nonce,
        client_time_us: 0,
    });
    let seen = c.until(Duration::from_secs(3), |s| *s == Seen::Pong(nonce));
    assert_eq!(
        seen.last(),
        Some(&Seen::Pong(nonce)),
        "alive after {m:?}: {seen:?}"
    );
    seen.iter()
        .find_map(|s| match s {
            Seen::Error(seq, code) => Some((*seq, *code)),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no Error for {m:?}: {seen:?}"))
}

#[test]
fn each_rule_refuses_with_its_code_then_abuse_is_kicked() {
    let server = EmbeddedServer::start(&config(&["gateway.abuse_strikes_max=7"])).expect("start");
    let mut c = RawClient::connect(server.client_addr());
    c.login("rules");
    let reg = TypeRegistry::with_builtins();
    let ty = reg.get(AVATAR).expect("avatar");
    let status = ty.prop_index("status").expect("status") as u16;
    let name = ty.prop_index("name").expect("name") as u16;
    // Good inputs first: seq 1 and 2 pass.
    c.send(&mv(1, 121.0));
    let set = |seq, prop, value| ClientMsg::SetProp {
        seq,
        client_time_us: 0,
        prop,
        value,
    };
    c.send(&set(2, status, b"\x02ok"));
    let acked = c.until(Duration::from_secs(3), |s| *s == Seen::Ack(2));
    assert_eq!(acked.last(), Some(&Seen::Ack(2)), "{acked:?}");
    assert_eq!(
        refused(&mut c, &mv(3, 200.0), 1),
        (3, ErrorCode::MoveTooFast)
    );
    assert_eq!(refused(&mut c, &mv(4, 9000.0), 2), (4, ErrorCode::BadValue));
    assert_eq!(
        refused(&mut c, &set(5, name, b"\x02An"), 3),
        (5, ErrorCode::PropNotSettable)
    );
    assert_eq!(
        refused(&mut c, &set(6, status, b"\x07"), 4),
        (6, ErrorCode::BadValue)
    );
    assert_eq!(
        refused(&mut c, &mv(9, 121.0), 5),
        (9, ErrorCode::BadSequence)
    );
    // An unknown kind (0x0042, empty body).
    c.send_bytes(&[0, 0, 0, 0, 0x42, 0, 0, 0]);
    c.send(&ClientMsg::Ping {
        nonce: 6,
        client_time_us: 0,
    });
    let seen = c.until(Duration::from_secs(3), |s| *s == Seen::Pong(6));
    assert!(
        seen.contains(&Seen::Error(0, ErrorCode::UnknownMessage)),
        "{seen:?}"
    );
    // A hit on a handle the client does not see: the real refuses it.
    c.send(&ClientMsg::Hit {
        seq: 7,
        client_time_us: 0,
        target: 4242,
        damage: 1,
    });
    let refused = Seen::Refused(7, RefuseReason::NotVisible);
    let seen = c.until(Duration::from_secs(3), |s| *s == refused);
    assert_eq!(seen.last(), Some(&refused), "CallResult: {seen:?}");
    // Refused inputs count as processed: the ack covers them.
    c.send(&mv(8, 121.5));
    let seen = c.until(Duration::from_secs(3), |s| *s == Seen::Ack(8));
    assert_eq!(seen.last(), Some(&Seen::Ack(8)), "{seen:?}");
    // The 8th refusal (strikes max 7) kicks.
    c.send(&ClientMsg::Hello {
        version: PROTOCOL_VERSION,
    });
    let seen = c.until(Duration::from_secs(3), |s| matches!(s, Seen::Kick(_)));
    assert_eq!(
        seen.last(),
        Some(&Seen::Kick(ErrorCode::ProtocolViolation)),
        "{seen:?}"
    );
    c.until(Duration::from_secs(3), |_| false);
    assert!(c.eof, "the server closed the connection");
    let end = server.stop().expect("stop");
    for (rule, n) in [
        ("move-too-fast", 1),
        ("bad-value", 2),
        ("prop-not-settable", 1),
        ("bad-sequence", 1),
        ("unknown-message", 1),
        ("not-visible", 1),
        ("protocol-violation", 1),
    ] {
        assert_eq!(end.refused.get(rule), Some(&n), "{rule}: {:?}", end.refused);
    }
    assert_eq!(
        end.disconnects.get("kicked"),
        Some(&1),
        "{:?}",
        end.disconnects
    );
}

#[test]
fn oversized_frames_and_bad_handshakes_are_closed() {
    let server = EmbeddedServer::start(&config(&[])).expect("start");
    let mut big = RawClient::connect(server.client_addr());
    big.login("big");
    big.send_bytes(&[0x01, 0x20, 0, 0, 0x03, 0, 0, 0]); // body of 8193 bytes
    let seen = big.until(Duration::from_secs(3), |s| matches!(s, Seen::Kick(_)));
    assert_eq!(seen.last(), Some(&Seen::Kick(ErrorCode::FrameTooLarge)));
    let mut magic = RawClient::connect(server.client_addr());
    magic.send_bytes(&[8, 0, 0, 0, 1, 0, 0, 0, b'X', b'S', b'R', b'A', 1, 0, 0, 0]);
    let seen = magic.until(Duration::from_secs(3), |s| matches!(s, Seen::Error(..)));
    assert_eq!(seen.last(), Some(&Seen::Error(0, ErrorCode::BadMagic)));
    for c in [&mut big, &mut magic] {
        c.until(Duration::from_secs(3), |_| false);
        assert!(c.eof, "closed");
    }
    // The server carries on: a new client logs in.
    let mut ok = RawClient::connect(server.client_addr());
    ok.login("fine");
    let end = server.stop().expect("stop");
    assert_eq!(end.refused.get("frame-too-large"), Some(&1));
    assert_eq!(end.refused.get("bad-magic"), Some(&1));
}

#[test]
fn a_slow_reader_is_cut_off_while_the_others_carry_on() {
    let cfg = config(&[
        "gateway.send_queue_bytes_max=65536",
        "gateway.reconnect_window_ms=0",
    ]);
    let server = EmbeddedServer::start(&cfg).expect("start");
    let addr = server.client_addr();
    let mut slow = RawClient::connect(addr);
    let slow_entity = slow.login("slow");
    let mut a = Client::connect(addr, "a");
    let mut b = Client::connect(addr, "b");
    assert!(pump_until(
        &mut [&mut a, &mut b],
        Duration::from_secs(5),
        |cs| cs
            .iter()
            .all(|c| c.live() && c.shown(slow_entity).is_some())
    ));
    // The slow client asks for a flood of Pongs and never reads them.
    let mut w = slow.stream.try_clone().expect("clone");
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        let mut pings = Vec::new();
        for nonce in 0..4096u64 {
            ClientMsg::Ping {
                nonce,
                client_time_us: 0,
            }
            .encode(&mut pings);
        }
        for _ in 0..400 {
            if w.write_all(&pings).is_err() {
                return;
            }
        }
    });
    let mut x = 120.0;
    let mut i = 0u64;
    let cut = pump_until(&mut [&mut a, &mut b], Duration::from_secs(30), |cs| {
        i += 1;
        if i % 5 == 0 && cs[0].live() {
            x = if (i / 5) % 20 < 10 { x + 0.3 } else { x - 0.3 };
            let _ = cs[0].session.send_move(now(), Vec3::ground(x, 60.0), 0.0);
        }
        server
            .counters()
            .disconnects
            .get("slow-reader")
            .is_some_and(|&n| n >= 1)
    });
    assert!(
        cut,
        "the slow reader was disconnected: {:?}",
        server.counters()
    );
    assert!(
        pump_until(&mut [&mut a, &mut b], Duration::from_secs(5), |cs| cs
            .iter()
            .all(|c| c.shown(slow_entity).is_none())),
        "the slow reader's avatar left the views"
    );
    assert!(a.live() && b.live(), "the others carry on");
    assert_eq!(a.session.violation_count() + b.session.violation_count(), 0);
    drop(slow);
    let _ = writer.join();
    let end = server.stop().expect("stop");
    assert_eq!(end.disconnects.get("slow-reader"), Some(&1));
}
