//! Whole-host tests of the door on the sans-IO [`Harness`]: one session per
//! account (a second login takes the avatar over; a dropped one waits for
//! its account), signed tickets refused by reason, the idle timeout.

use crate::client::{SessionEvent, SessionState};
use crate::core::entity::Value;
use crate::core::geom::Vec3;
use crate::core::ids::EntityId;
use crate::wire::client::ErrorCode;

use super::gateway::{mint, Disconnect, LoginRefusal, TicketError, TicketKey};
use super::harness::{test_config, Harness, HARNESS_UNIX_AT_START_S};

fn entity(h: &Harness, c: usize) -> EntityId {
    h.clients[c].session.welcome().expect("welcomed").entity
}

fn closed_with(h: &mut Harness, c: usize) -> Option<Option<ErrorCode>> {
    std::iter::from_fn(|| h.clients[c].session.poll_event()).find_map(|e| match e {
        SessionEvent::Closed { code, .. } => Some(code),
        _ => None,
    })
}

fn own_status(h: &Harness, c: usize) -> Option<String> {
    let store = h.clients[c].session.view()?.own()?.replica.props();
    let idx = store.entity_type().prop_index("status")?;
    match store.get(idx) {
        Some(Value::Str(s)) => Some(s.to_string()),
        _ => None,
    }
}

#[test]
fn a_second_login_takes_the_avatar_over_and_the_first_is_replaced() {
    let mut h = Harness::new(&test_config(&[]));
    let ann = h.connect(0, "ann");
    let bob = h.connect(0, "bob");
    h.run(10);
    let (e, eb) = (entity(&h, ann), entity(&h, bob));
    let status = {
        let reg = crate::core::entity::TypeRegistry::with_builtins();
        let a = reg
            .get(crate::core::entity::AVATAR)
            .expect("avatar")
            .clone();
        a.prop_index("status").expect("status") as u16
    };
    let now = h.now;
    h.clients[ann]
        .session
        .send_move(now, Vec3::ground(121.0, 60.0), 0.0)
        .expect("move");
    h.clients[ann]
        .session
        .send_set_prop(now, status, b"\x04away")
        .expect("set");
    h.run(10);
    assert_eq!(own_status(&h, ann).as_deref(), Some("away"));
    let next = h.clients[ann].session.next_seq();
    assert_eq!(next, 3);

    let ann2 = h.connect(0, "ann");
    h.run(10);
    assert_eq!(closed_with(&mut h, ann), Some(Some(ErrorCode::Replaced)));
    assert_eq!(h.clients[ann].session.state(), SessionState::Closed);
    let w = *h.clients[ann2].session.welcome().expect("welcomed");
    assert_eq!(w.entity, e, "the same avatar");
    assert_eq!(
        w.next_seq, next,
        "inputs go on from the replaced connection's"
    );
    assert_eq!(w.pos, Vec3::ground(121.0, 60.0), "where it stood");
    assert_eq!(
        own_status(&h, ann2).as_deref(),
        Some("away"),
        "its state kept"
    );
    let view = h.clients[ann2].session.view().expect("view");
    assert!(view.find(eb).is_some(), "a full view: bob is shown");
    let now = h.now;
    let seq = h.clients[ann2]
        .session
        .send_move(now, Vec3::ground(122.0, 60.0), 0.0)
        .expect("move");
    assert_eq!(seq, next);
    h.run(10);
    assert_eq!(h.clients[ann2].session.last_acked(), next);
    assert_eq!(h.copies(e).0, 1, "one avatar");
    for c in [ann2, bob] {
        assert_eq!(h.clients[c].session.violation_count(), 0, "client {c}");
    }
    let k = h.hosts[0].clients.counters();
    assert_eq!(k.takeovers, 1);
    assert_eq!(k.disconnects[Disconnect::Replaced as usize], 1);
    assert_eq!(k.logins, 2, "no new avatar for the takeover");
}

#[test]
fn a_dropped_connection_is_taken_over_within_the_reconnect_window() {
    let mut h = Harness::new(&test_config(&["gateway.reconnect_window_ms=2000"]));
    let cat = h.connect(1, "cat");
    h.run(10);
    let e = entity(&h, cat);
    let conn = h.clients[cat].conn;
    h.ports[1].inject_close(conn, crate::shard::CloseReason::PeerClosed);
    h.clients[cat].closed = true;
    h.run(10);
    assert_eq!(h.hosts[1].clients.detached(), 1);
    let again = h.connect(1, "cat");
    h.run(10);
    assert_eq!(entity(&h, again), e);
    assert!(h.clients[again]
        .session
        .view()
        .and_then(|v| v.own())
        .is_some());
    assert_eq!(h.hosts[1].clients.detached(), 0);
    assert_eq!(h.clients[again].session.violation_count(), 0);
}

#[test]
fn a_silent_client_is_closed_idle_and_its_avatar_waits() {
    let mut h = Harness::new(&test_config(&[
        "gateway.idle_timeout_ms=500",
        "gateway.reconnect_window_ms=300",
    ]));
    let quiet = h.connect(0, "quiet");
    let pinger = h.connect(0, "pinger");
    for n in 0..30 {
        if n % 5 == 4 {
            let now = h.now;
            h.clients[pinger].session.send_ping(now, n).expect("ping");
        }
        h.step();
    }
    assert_eq!(
        closed_with(&mut h, quiet),
        Some(Some(ErrorCode::IdleTimeout))
    );
    assert_eq!(h.clients[pinger].session.state(), SessionState::Live);
    let k = h.hosts[0].clients.counters();
    assert_eq!(k.disconnects[Disconnect::IdleTimeout as usize], 1);
    assert_eq!(k.reconnect_expired, 1, "then removed after the window");
}

fn hmac_harness() -> (Harness, TicketKey, tempfile_path::Guard) {
    let key = TicketKey::from_hex(&"5a".repeat(32)).expect("key");
    let guard = tempfile_path::Guard::new(&key.to_hex());
    let file = format!("gateway.key_file=\"{}\"", guard.path);
    let h = Harness::new(&test_config(&["gateway.auth=\"hmac\"", &file]));
    (h, key, guard)
}

/// A key file removed at the end of the test.
mod tempfile_path {
    pub struct Guard {
        pub path: String,
    }

    impl Guard {
        pub fn new(text: &str) -> Guard {
            use std::sync::atomic::{AtomicU32, Ordering};
            static N: AtomicU32 = AtomicU32::new(0);
            let n = N.fetch_add(1, Ordering::Relaxed);
            let path = std::env::temp_dir()
                .join(format!("tessera-test-key-{}-{n}.hex", std::process::id()));
            std::fs::write(&path, text).expect("write key"); // tidy: allow(std::fs)
            Guard {
                path: path.display().to_string(),
            }
        }
    }

    impl Drop for Guard {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.path); // tidy: allow(std::fs)
        }
    }
}

#[test]
fn tickets_forged_expired_replayed_or_missing_are_refused_by_reason() {
    let (mut h, key, _guard) = hmac_harness();
    let start = HARNESS_UNIX_AT_START_S + h.now.as_micros() / 1_000_000;
    let other = TicketKey::from_hex(&"a5".repeat(32)).expect("key");
    let good = mint(&key, "acct-1", start + 60, 1);
    let cases: Vec<(Option<String>, Option<TicketError>)> = vec![
        (
            Some(mint(&other, "acct-1", start + 60, 2)),
            Some(TicketError::Forged),
        ),
        (
            Some(mint(&key, "acct-1", start - 1, 3)),
            Some(TicketError::Expired),
        ),
        (None, Some(TicketError::Malformed)),
        (Some(good.clone()), None),
        (Some(good), Some(TicketError::Replayed)),
    ];
    for (i, (ticket, want)) in cases.into_iter().enumerate() {
        let c = h.connect_with(0, "player", ticket.as_deref().map(str::as_bytes));
        h.run(4);
        match want {
            Some(why) => {
                assert_eq!(
                    closed_with(&mut h, c),
                    Some(Some(ErrorCode::LoginRefused)),
                    "case {i}"
                );
                let n = h.hosts[0].clients.counters().login_refused;
                assert_eq!(n[LoginRefusal::Ticket(why).index()], 1, "case {i}: {why}");
            }
            None => assert_eq!(h.clients[c].session.state(), SessionState::Live, "case {i}"),
        }
    }
}
