//! The server's cell host on a real runtime (2 shards, loopback only):
//! NPCs wander across a border between cells on different shards, their
//! reals migrate, every entity stays real exactly once, nothing is misrouted,
//! and `RuntimeHandle::shutdown` joins cleanly.
//!
//! The TCP gateway part (clients, Welcome, Error frames) is not built yet.

use std::time::Duration;
use tessera::config::Config;
use tessera::core::cell::Residency;
use tessera::runtime::Runtime;
use tessera::server::host::initial_tree;
use tessera::server::CellHost;

fn config(npcs: u32) -> Config {
    let sets = [
        "world.max_x_m=480.0",
        "world.max_z_m=240.0",
        "server.initial_cells=2",
        &format!("server.npcs={npcs}"),
        "server.npc_speed_mps=80.0",
        "runtime.shards=2",
        "runtime.pin=false",
        "runtime.tick_ms=20",
        "runtime.tick_budget_ms=20",
        "admin.enabled=false",
        "gateway.listen_addr=127.0.0.1:0",
    ];
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    Config::load(None, &sets).expect("valid test config")
}

#[test]
fn initial_tree_puts_cells_round_robin_on_shards() {
    let c = config(0);
    let tree = initial_tree(&c, 4, 2).expect_err("4 cells of 240 m do not fit 480x240");
    let _ = tree;
    let tree = initial_tree(&c, 2, 2).expect("two cells");
    let shards: Vec<u16> = tree.leaves().map(|l| l.shard.index).collect();
    assert_eq!(tree.cell_count(), 2);
    assert!(shards.contains(&0) && shards.contains(&1), "{shards:?}");
}

/// `server.initial_cells = 0` (the default) is one cell per shard, as many
/// as the world has room for: never refused for want of room.
#[test]
fn the_default_cut_is_one_cell_per_shard_as_room_allows() {
    let c = config(0);
    for (shards, cells) in [(1, 1), (2, 2), (3, 2), (8, 2)] {
        let tree = initial_tree(&c, 0, shards).expect("always fits");
        assert_eq!(tree.cell_count(), cells, "{shards} shards in 480 x 240 m");
        let mut on: Vec<u16> = tree.leaves().map(|l| l.shard.index).collect();
        on.sort_unstable();
        on.dedup();
        assert_eq!(on.len(), cells, "one cell per shard: {on:?}");
    }
    let big = Config::load(
        None,
        &[
            "world.max_x_m=2000.0".to_owned(),
            "world.max_z_m=2000.0".to_owned(),
        ],
    )
    .expect("valid");
    assert_eq!(initial_tree(&big, 0, 3).expect("fits").cell_count(), 3);
    assert_eq!(big.server.initial_cells, 0, "the embedded default");
}

#[test]
fn npcs_migrate_across_shards_and_shutdown_joins() {
    let npcs = 24;
    let c = config(npcs);
    let shared = std::sync::Arc::new(c.clone());
    let handle = Runtime::start(&c, move |ctx| CellHost::new(&shared, ctx).expect("host"))
        .expect("runtime starts");
    std::thread::sleep(Duration::from_millis(2_500));
    let text = handle.metrics_text();
    for name in [
        "host_migrations",
        "host_forwards",
        "host_reals",
        "host_ghosts",
    ] {
        assert!(text.contains(name), "{name} missing from /metrics:\n{text}");
    }
    handle.shutdown();
    let apps = handle.join().expect("clean join");
    assert_eq!(apps.len(), 2);
    // Exactly one real per NPC over all shards.
    let mut reals: Vec<u64> = apps
        .iter()
        .flat_map(|a| a.cells())
        .flat_map(|cell| {
            cell.entities()
                .filter(|(e, _)| matches!(cell.residency(*e), Some(Residency::Real { .. })))
                .map(|(e, _)| e.0)
                .collect::<Vec<_>>()
        })
        .collect();
    reals.sort_unstable();
    let before = reals.len();
    reals.dedup();
    assert_eq!(before, reals.len(), "an entity is real twice");
    // Reals in flight at shutdown (an Onload not yet delivered) are allowed.
    assert!(
        reals.len() <= npcs as usize && reals.len() + 4 >= npcs as usize,
        "{}",
        reals.len()
    );
    let migrations: u64 = apps.iter().map(CellHost::migrations).sum();
    assert!(migrations > 0, "no migration in 2.5 s");
    let remote: u64 = apps.iter().map(|a| a.counters().remote).sum();
    assert!(remote > 0, "nothing crossed shards");
    for a in &apps {
        assert_eq!(a.counters().misrouted, 0);
        assert_eq!(a.counters().bad_envelopes, 0);
        assert_eq!(a.counters().outbox_refused, 0);
    }
    let ghosts: usize = apps.iter().map(CellHost::ghosts).sum();
    assert!(ghosts > 0, "no ghost near the border");
}
