//! Balancing on the real runtime (2 shards, no gateway): NPCs crowd on one
//! spot of a cell, shard 0's space service splits it (the new cell on the
//! other shard) and moves boundaries, every shard applies the same changes
//! in order, and no entity is lost or real twice.

use std::time::Duration;
use tessera::config::Config;
use tessera::core::cell::Residency;
use tessera::runtime::Runtime;
use tessera::server::balance::SnapshotSink;
use tessera::server::CellHost;

fn config(npcs: u32, enabled: bool) -> Config {
    let sets = [
        "world.max_x_m=1200.0".to_owned(),
        "world.max_z_m=1200.0".to_owned(),
        "server.initial_cells=2".to_owned(),
        format!("server.npcs={npcs}"),
        "server.npc_speed_mps=60.0".to_owned(),
        "runtime.shards=2".to_owned(),
        "runtime.pin=false".to_owned(),
        "runtime.tick_ms=20".to_owned(),
        "runtime.tick_budget_ms=20".to_owned(),
        "admin.enabled=false".to_owned(),
        // No clients here; the two tests run at once.
        "gateway.enabled=false".to_owned(),
        format!("balance.enabled={enabled}"),
        "balance.gather_period_ms=200".to_owned(),
        // The crowd sits in cell 0 (x < 600); thresholds low enough that a
        // test machine's load splits it.
        "balance.npc_crowd_radius_m=150.0".to_owned(),
        "balance.npc_crowd_x_m=300.0".to_owned(),
        "balance.npc_crowd_z_m=600.0".to_owned(),
        "balance.split_cell_load_min=0.001".to_owned(),
        "balance.split_shard_load_min=0.001".to_owned(),
        "balance.split_reports_min=1".to_owned(),
        // Loads here are thousandths of a core: any split that shares the
        // crowd's load pays (the default asks for 0.05 cores).
        "balance.split_gain_min=0.0".to_owned(),
        "balance.rebalance_reports_min=1".to_owned(),
        "balance.merge_cell_load_max=0.0".to_owned(),
    ];
    Config::load(None, &sets).expect("valid test config")
}

fn metric(text: &str, name: &str) -> u64 {
    text.lines()
        .filter(|l| !l.starts_with('#') && l.contains(name))
        .filter_map(|l| l.split_whitespace().last()?.parse::<f64>().ok())
        .map(|v| v as u64)
        .sum()
}

fn run(npcs: u32, enabled: bool) -> (Vec<CellHost>, String, SnapshotSink) {
    let c = config(npcs, enabled);
    let shared = std::sync::Arc::new(c.clone());
    let sink = SnapshotSink::default();
    let s2 = sink.clone();
    let handle = Runtime::start(&c, move |ctx| {
        let mut h = CellHost::new(&shared, ctx).expect("host");
        h.set_snapshot_sink(s2.clone());
        h
    })
    .expect("runtime starts");
    std::thread::sleep(Duration::from_millis(4_000));
    let text = handle.metrics_text();
    handle.shutdown();
    (handle.join().expect("clean join"), text, sink)
}

fn reals(apps: &[CellHost]) -> Vec<u64> {
    let mut r: Vec<u64> = apps
        .iter()
        .flat_map(|a| a.cells())
        .flat_map(|cell| {
            cell.entities()
                .filter(|(e, _)| matches!(cell.residency(*e), Some(Residency::Real { .. })))
                .map(|(e, _)| e.0)
                .collect::<Vec<_>>()
        })
        .collect();
    r.sort_unstable();
    r
}

#[test]
fn a_crowd_splits_its_cell_and_every_shard_agrees() {
    let npcs = 200;
    let (apps, text, sink) = run(npcs, true);
    let log = sink.lock().expect("no poisoned lock");
    assert!(log.entries.len() >= 10, "{} snapshots", log.entries.len());
    let first = &log.entries.front().expect("one").1;
    let last = &log.entries.back().expect("one").1;
    assert!(last.version > first.version && last.leaves.len() > first.leaves.len());
    assert_eq!(apps.len(), 2);
    assert!(metric(&text, "host_splits") >= 1, "no split:\n{text}");
    for name in ["host_merges", "host_rebalances"] {
        assert!(text.contains(name), "{name} missing");
    }
    let t0 = apps[0].tree();
    assert!(t0.cell_count() > 2, "{t0:?}");
    assert!(t0.version() > 0);
    assert_eq!(apps[1].tree(), t0, "shards disagree on the tree");
    // Every cell of the tree is hosted by its shard.
    for leaf in t0.leaves() {
        let host = &apps[usize::from(leaf.shard.index)];
        assert!(
            host.cells().any(|c| c.id() == leaf.cell),
            "{leaf:?} missing"
        );
    }
    let snap = apps[0].tree_snapshot();
    assert_eq!(snap.leaves.len(), t0.cell_count());
    assert!(snap.leaves.iter().any(|l| l.load > 0.0), "{snap:?}");
    let r = reals(&apps);
    let mut d = r.clone();
    d.dedup();
    assert_eq!(d.len(), r.len(), "an entity is real twice");
    // Reals in flight at shutdown (an Onload not yet delivered) are allowed.
    assert!(
        r.len() <= npcs as usize && r.len() + 8 >= npcs as usize,
        "{} reals of {npcs}",
        r.len()
    );
    let parked_dropped: u64 = apps
        .iter()
        .map(|a| a.balance().counters().parked_dropped)
        .sum();
    assert_eq!(parked_dropped, 0);
    let refused: u64 = apps.iter().map(|a| a.balance().counters().refused).sum();
    assert_eq!(refused, 0, "a change was refused by a replica");
}

#[test]
fn balancing_off_keeps_the_start_tree() {
    let (apps, text, _) = run(50, false);
    assert_eq!(metric(&text, "host_splits"), 0);
    for a in &apps {
        assert_eq!(a.tree().version(), apps[0].tree().version());
        assert_eq!(a.tree().cell_count(), 2);
    }
}
