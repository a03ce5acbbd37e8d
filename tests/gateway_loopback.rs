//! The whole server over loopback TCP (ephemeral port, 2 shards, a border
//! between cells on different shards): several clients log in; one walks
//! across the border and back while the others keep receiving its updates
//! with no gap (zero client-view violations, a bounded gap in ticks
//! between its updates at each watcher); its Bye removes the avatar from
//! every cell on every shard, ghosts included.

mod gateway_support;

use std::time::Duration;

use gateway_support::{config, now, pump_until, Client};
use tessera::core::cell::Residency;
use tessera::core::geom::Vec3;
use tessera::core::ids::EntityId;
use tessera::server::EmbeddedServer;

/// Per watcher: the last shown version of the walker and the batch tick it
/// changed at; the longest gap seen, in ticks.
struct Watch {
    version: Option<u64>,
    since_tick: u64,
    gap_ticks: u64,
}

fn observe(w: &mut Watch, c: &Client, e: EntityId) {
    let v = c.shown(e);
    let tick = c.session.last_tick().unwrap_or(0);
    if v != w.version {
        if w.version.is_some() {
            w.gap_ticks = w.gap_ticks.max(tick.saturating_sub(w.since_tick));
        }
        w.version = v;
        w.since_tick = tick;
    }
}

/// Walks `walker` from `from_x` to `to_x` (z = 60) at 0.5 m per 50 ms.
fn walk(walker: &mut Client, watchers: &mut [Client], watch: &mut [Watch], from_x: f64, to_x: f64) {
    let e = walker.entity().expect("welcomed");
    let mut x = from_x;
    while (x - to_x).abs() > 0.01 {
        x += (to_x - x).clamp(-0.5, 0.5);
        walker
            .session
            .send_move(now(), Vec3::ground(x, 60.0), 0.0)
            .expect("move");
        walker.pump();
        std::thread::sleep(Duration::from_millis(50));
        walker.pump();
        for (c, w) in watchers.iter_mut().zip(watch.iter_mut()) {
            c.pump();
            observe(w, c, e);
        }
    }
}

#[test]
fn clients_watch_a_walker_cross_between_shards_and_leave() {
    watch_a_walker("epoll");
}

/// The same game over the io_uring socket loop.
#[test]
fn clients_watch_a_walker_cross_between_shards_and_leave_on_io_uring() {
    watch_a_walker("io_uring");
}

fn watch_a_walker(backend: &str) {
    let backend = format!("gateway.io_backend=\"{backend}\"");
    let server = EmbeddedServer::start(&config(&[&backend])).expect("server starts");
    let addr = server.client_addr();
    let mut walker = Client::connect(addr, "walker");
    let mut watchers: Vec<Client> = (0..3)
        .map(|i| Client::connect(addr, &format!("watcher-{i}")))
        .collect();
    {
        let mut all: Vec<&mut Client> = std::iter::once(&mut walker)
            .chain(watchers.iter_mut())
            .collect();
        assert!(
            pump_until(&mut all, Duration::from_secs(5), |cs| cs
                .iter()
                .all(|c| c.live())),
            "every client is welcomed"
        );
    }
    let e = walker.entity().expect("welcomed");
    {
        let mut ws: Vec<&mut Client> = watchers.iter_mut().collect();
        assert!(
            pump_until(&mut ws, Duration::from_secs(5), |cs| cs
                .iter()
                .all(|c| c.shown(e).is_some())),
            "every watcher sees the walker"
        );
    }
    let mut watch: Vec<Watch> = watchers
        .iter()
        .map(|c| Watch {
            version: c.shown(e),
            since_tick: c.session.last_tick().unwrap_or(0),
            gap_ticks: 0,
        })
        .collect();
    // Spawned at x = 120 (cell 1, shard 1): to cell 0 (shard 0) and back,
    // past the migration margin both ways.
    walk(&mut walker, &mut watchers, &mut watch, 120.0, 106.0);
    walk(&mut walker, &mut watchers, &mut watch, 106.0, 134.0);
    {
        let mut all: Vec<&mut Client> = std::iter::once(&mut walker)
            .chain(watchers.iter_mut())
            .collect();
        pump_until(&mut all, Duration::from_secs(3), |cs| {
            cs[0].session.inputs_in_flight() == 0
        });
    }
    let counters = server.counters();
    for (i, c) in std::iter::once(&walker).chain(&watchers).enumerate() {
        assert_eq!(
            c.session.violation_count(),
            0,
            "client {i}: {:?} {:?}",
            c.session.violations(),
            c.session.view().map(|v| v.violations())
        );
    }
    let gaps: Vec<u64> = watch.iter().map(|w| w.gap_ticks).collect();
    eprintln!("longest gap between walker updates per watcher (ticks): {gaps:?}; {counters:?}");
    for w in &watch {
        assert!(w.gap_ticks <= 12, "a watcher waited {} ticks", w.gap_ticks);
    }
    assert_eq!(
        walker.session.inputs_in_flight(),
        0,
        "every move acknowledged"
    );
    walker.session.send_bye(now()).expect("bye");
    walker.pump();
    {
        let mut ws: Vec<&mut Client> = watchers.iter_mut().collect();
        assert!(
            pump_until(&mut ws, Duration::from_secs(5), |cs| cs
                .iter()
                .all(|c| c.shown(e).is_none())),
            "the walker left every view"
        );
    }
    std::thread::sleep(Duration::from_millis(300));
    let (end, hosts) = server.stop_with_hosts().expect("clean stop");
    let mut copies = 0;
    for h in &hosts {
        for cell in h.cells() {
            if matches!(
                cell.residency(e),
                Some(Residency::Real { .. } | Residency::Ghost { .. })
            ) {
                copies += 1;
            }
        }
    }
    assert_eq!(copies, 0, "no real or ghost of the walker is left");
    assert!(end.migrations >= 2 || counters.migrations >= 2, "{end:?}");
    assert_eq!(end.reals, 3, "the watchers' avatars only");
    assert_eq!(end.disconnects.get("bye"), Some(&1));
    for c in &watchers {
        assert_eq!(c.session.violation_count(), 0);
    }
}
