//! Mono spaces over loopback TCP (ephemeral port, 2 shards): clients enter
//! a town by type (the same instance: they see each other, not the world),
//! a dungeon (a private new instance), go back to the world (where they
//! left it), and the emptied dungeon is reclaimed; a property survives the
//! moves; a full town gets a second instance by heavy load; bad requests
//! get clear errors. Every client ends with zero view violations.

mod gateway_support;

use std::time::Duration;

use gateway_support::{config, now, pump_until, Client};
use tessera::client::SessionEvent;
use tessera::core::entity::{TypeRegistry, Value, AVATAR};
use tessera::core::ids::EntityId;
use tessera::server::EmbeddedServer;
use tessera::wire::client::ErrorCode;

const WORLD: u32 = 1;
const TOWN: u32 = 2;
const DUNGEON: u32 = 3;

fn live_all(cs: &mut [&mut Client]) {
    assert!(
        pump_until(cs, Duration::from_secs(5), |cs| cs.iter().all(|c| c.live())),
        "every client is welcomed"
    );
}

/// Sends EnterSpace and waits for SpaceChanged; returns `(space, type)`.
fn enter(c: &mut Client, others: &mut [&mut Client], space: u32, type_id: u32) -> (u32, u32) {
    c.session.send_enter_space(space, type_id).expect("enter");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        c.pump();
        for o in others.iter_mut() {
            o.pump();
        }
        while let Some(ev) = c.session.poll_event() {
            if let SessionEvent::SpaceChanged { space, type_id, .. } = ev {
                return (space, type_id);
            }
            if let SessionEvent::Refused { code, .. } = ev {
                panic!("refused: {code}");
            }
        }
        assert!(std::time::Instant::now() < deadline, "no SpaceChanged");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Sends EnterSpace and waits for its Error.
fn refused(c: &mut Client, space: u32, type_id: u32) -> ErrorCode {
    c.session.send_enter_space(space, type_id).expect("enter");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        c.pump();
        while let Some(ev) = c.session.poll_event() {
            match ev {
                SessionEvent::Refused { code, .. } => return code,
                SessionEvent::SpaceChanged { .. } => panic!("not refused"),
                _ => {}
            }
        }
        assert!(std::time::Instant::now() < deadline, "no Error");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn sees(c: &Client, e: EntityId) -> bool {
    c.shown(e).is_some()
}

fn status_of(c: &Client) -> Option<Value> {
    let reg = TypeRegistry::with_builtins();
    let idx = reg.get(AVATAR)?.prop_index("status")?;
    c.session.view()?.own()?.replica.props().get(idx).cloned()
}

fn no_violations(cs: &[&Client]) {
    for (i, c) in cs.iter().enumerate() {
        assert_eq!(
            c.session.violation_count(),
            0,
            "client {i}: {:?} {:?}",
            c.session.violations(),
            c.session.view().map(|v| v.violations())
        );
    }
}

#[test]
fn towns_dungeons_and_the_way_back() {
    let cfg = config(&["spaces.reclaim_empty_after_ms=300", "spaces.round_ms=100"]);
    let server = EmbeddedServer::start(&cfg).expect("server starts");
    let addr = server.client_addr();
    let mut w = Client::connect(addr, "world");
    let mut a = Client::connect(addr, "ann");
    let mut b = Client::connect(addr, "bob");
    let mut d = Client::connect(addr, "dan");
    live_all(&mut [&mut w, &mut a, &mut b, &mut d]);
    let (ea, eb, ew) = (
        a.entity().unwrap(),
        b.entity().unwrap(),
        w.entity().unwrap(),
    );
    assert!(
        pump_until(
            &mut [&mut w, &mut a, &mut b, &mut d],
            Duration::from_secs(5),
            |cs| { sees(cs[0], ea) && sees(cs[0], eb) }
        ),
        "all spawn at the centre and see each other"
    );
    // A property set in the world survives the moves.
    a.session
        .send_set_prop(now(), status_index(), &[2, b'h', b'i'])
        .expect("set");
    assert!(
        pump_until(&mut [&mut a], Duration::from_secs(5), |cs| {
            status_of(cs[0]) == Some(Value::Str("hi".into()))
        }),
        "status set"
    );
    let (town_a, t) = enter(&mut a, &mut [&mut w, &mut b, &mut d], 0, TOWN);
    assert_eq!(t, TOWN);
    let (town_b, _) = enter(&mut b, &mut [&mut w, &mut a, &mut d], 0, TOWN);
    assert_eq!(town_a, town_b, "by type: the same (least loaded) instance");
    assert!(town_a >= 1000);
    assert!(
        pump_until(
            &mut [&mut w, &mut a, &mut b, &mut d],
            Duration::from_secs(5),
            |cs| { sees(cs[1], eb) && sees(cs[2], ea) && !sees(cs[1], ew) && !sees(cs[0], ea) }
        ),
        "town clients see each other, not the world, and the world not them"
    );
    assert_eq!(status_of(&a), Some(Value::Str("hi".into())), "status kept");
    let (dun, t) = enter(&mut d, &mut [&mut w, &mut a, &mut b], 0, DUNGEON);
    assert_eq!(t, DUNGEON);
    assert_ne!(dun, town_a, "a dungeon is a new private instance");
    assert_eq!(
        refused(&mut a, dun, 0),
        ErrorCode::SpaceFull,
        "private: full"
    );
    assert_eq!(refused(&mut a, 0, 99), ErrorCode::UnknownSpaceType);
    assert_eq!(refused(&mut a, 77_777, 0), ErrorCode::UnknownSpace);
    assert_eq!(refused(&mut a, town_a, 0), ErrorCode::SpaceNotAllowed);
    // Back to the world, where the avatars left it.
    let (back, t) = enter(&mut a, &mut [&mut w, &mut b, &mut d], 0, WORLD);
    assert_eq!((back, t), (1, WORLD));
    let (back, _) = enter(&mut d, &mut [&mut w, &mut a, &mut b], 1, 0);
    assert_eq!(back, 1, "by the world's space id too");
    assert!(
        pump_until(
            &mut [&mut w, &mut a, &mut b, &mut d],
            Duration::from_secs(5),
            |cs| { sees(cs[0], ea) && sees(cs[1], ew) && !sees(cs[1], eb) && !sees(cs[2], ea) }
        ),
        "back in the world: seen by the world, not by the town"
    );
    assert_eq!(status_of(&a), Some(Value::Str("hi".into())), "status kept");
    assert!(
        pump_until(
            &mut [&mut w, &mut a, &mut b, &mut d],
            Duration::from_secs(5),
            |_| {
                // Each shard publishes its counters every 20 ticks, at its
                // own tick offset: wait for all of them, not just the first.
                let c = server.counters();
                c.instances_reclaimed >= 1 && c.space_transfers >= 5 && c.space_enters >= 5
            }
        ),
        "the empty dungeon is reclaimed: {:?}",
        server.counters()
    );
    let c = server.counters();
    assert_eq!(c.instances_live, 1, "the town stays (b is in it): {c:?}");
    assert_eq!(c.instances_created, 2);
    assert_eq!(c.space_enters, 5);
    assert_eq!(c.space_refused, 4);
    assert_eq!(c.space_transfers, 5);
    no_violations(&[&w, &a, &b, &d]);
    // The hosting shard drops the reclaimed cell once the event arrives.
    std::thread::sleep(Duration::from_millis(300));
    let (_, hosts) = server.stop_with_hosts().expect("clean stop");
    let cells: Vec<u32> = hosts
        .iter()
        .flat_map(|h| h.cells().map(|c| c.id().0))
        .collect();
    assert_eq!(cells.len(), 3, "two world cells and the town's: {cells:?}");
}

fn status_index() -> u16 {
    let reg = TypeRegistry::with_builtins();
    reg.get(AVATAR).unwrap().prop_index("status").unwrap() as u16
}

#[test]
fn a_full_town_gets_a_second_instance() {
    let mut cfg = config(&["spaces.round_ms=100"]);
    let town = cfg
        .spaces
        .types
        .iter_mut()
        .find(|t| t.type_id == TOWN)
        .expect("a town type");
    town.max_player_load = 2;
    let server = EmbeddedServer::start(&cfg).expect("server starts");
    let addr = server.client_addr();
    let mut cs: Vec<Client> = (0..3)
        .map(|i| Client::connect(addr, &format!("p{i}")))
        .collect();
    {
        let mut all: Vec<&mut Client> = cs.iter_mut().collect();
        live_all(&mut all);
    }
    let (c0, rest) = cs.split_first_mut().unwrap();
    let (first, _) = enter(c0, &mut [], 0, TOWN);
    let (c1, rest) = rest.split_first_mut().unwrap();
    assert_eq!(enter(c1, &mut [], 0, TOWN).0, first);
    // 2 players > 0.8 x 2: the next round creates a second town.
    assert!(
        pump_until(&mut [], Duration::from_secs(5), |_| {
            server.counters().instances_created >= 2
        }),
        "heavy load creates an instance"
    );
    let second = enter(&mut rest[0], &mut [], 0, TOWN).0;
    assert_ne!(second, first, "the least loaded town is the new one");
    no_violations(&cs.iter().collect::<Vec<_>>());
    server.stop().expect("clean stop");
}
