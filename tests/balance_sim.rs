//! Balancing in the deterministic simulator: the `crowd` and `swing`
//! scenarios run the cells on a replicated space tree driven by the
//! `SpaceService` (load measured by the nested-depth recorder on a work
//! clock), with every invariant of the checker on, and faults (latency,
//! bursts, stalls) as the seed draws them.
//!
//! - a hot cell must split (onto the least loaded shard);
//! - a crowd that moves away leaves cells that merge;
//! - a crowd swinging between two spots makes boundaries follow it, but each
//!   boundary reverses at most once per swing of the load (damping and the
//!   no-worse rule keep a fixed load from making it oscillate);
//! - the same seed replays the same run;
//! - with long stalls and slow links, shards apply tree changes up to a
//!   second apart and still no invariant breaks;
//! - the balancer runs with the config's `[balance]`, taken as the server
//!   takes it: a policy threshold and `enabled` change the runs.
//!
//! More seeds: `BALANCE_SEEDS=8 cargo test --test balance_sim` (default 1).
//! One run by hand: `cargo run --release --bin tessera -- sim --seed 1
//! --scenario crowd --shards 4 --cells 4 --entities 300 --ticks 1200
//! --world-side-m 2000 --bot-speed-mps 40`.

use tessera::config::Config;
use tessera::sim::options::{Scenario, SimOptions};
use tessera::sim::report::replay_command;
use tessera::sim::world::WorldParams;
use tessera::sim::world_run::{run_one, RunOutcome};

fn seeds() -> u64 {
    std::env::var("BALANCE_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
}

fn options(seed: u64, scenario: Scenario, cells: u32) -> SimOptions {
    SimOptions {
        seed,
        shards: cells.min(4) as u16,
        cells,
        entities: 240,
        ticks: 1_000,
        heal_ticks: 200,
        tick_ms: 50,
        world_side_m: 2_000.0,
        bot_speed_mps: 40.0,
        scenario,
        ..SimOptions::default()
    }
}

fn run(o: &SimOptions) -> RunOutcome {
    let out = run_one(o, &WorldParams::default()).expect("valid options");
    if !out.passed() {
        let mut msg = format!("seed {} broke invariants:\n", o.seed);
        for v in &out.violations {
            msg.push_str(&format!("  {v}\n{}\n", v.context));
        }
        msg.push_str(&format!("replay: {}\n", replay_command(o)));
        panic!("{msg}");
    }
    out
}

#[test]
fn a_hot_cell_splits() {
    for seed in 0..seeds() {
        // 2 cores of work: more than 2 shards hold under the split
        // threshold, so moving the one boundary cannot do.
        let mut o = options(seed, Scenario::Crowd, 2);
        o.entities = 400;
        o.ticks = 400;
        let out = run(&o);
        let s = &out.summary;
        assert!(s.splits >= 1, "seed {seed}: no split: {s}");
        assert_eq!(s.violations, 0);
    }
}

#[test]
fn a_crowd_that_leaves_lets_cells_merge() {
    let (mut splits, mut merges) = (0, 0);
    for seed in 0..seeds() {
        let out = run(&options(seed, Scenario::Crowd, 4));
        let s = &out.summary;
        splits += s.splits;
        merges += s.merges;
        // One move of the load (the crowd crosses the middle boundaries on
        // its way): a boundary turns back at most 3 times in the run.
        assert!(s.boundary_reversals_max <= 3, "seed {seed}: {s}");
    }
    // Splits under the crowd are `a_hot_cell_splits`' business; here the
    // cells it leaves behind must merge.
    assert!(
        merges >= 1,
        "no merge in {} seeds ({splits} splits)",
        seeds()
    );
}

#[test]
fn swinging_load_reverses_each_boundary_at_most_once_per_swing() {
    for seed in 0..seeds() {
        let o = options(seed, Scenario::Swing, 4);
        let out = run(&o);
        let s = &out.summary;
        // The crowd changes direction 5 times in phase one (every ticks / 6).
        let swings = 5;
        assert!(
            s.boundary_reversals_max <= swings,
            "seed {seed}: a boundary reversed more often than the load: {s}"
        );
        assert!(s.rebalances > 0, "seed {seed}: nothing followed the load");
        let minutes = (o.ticks * o.tick_ms) as f64 / 60_000.0;
        let per_minute = s.boundary_reversals_max as f64 / minutes;
        assert!(per_minute <= 6.0, "seed {seed}: {per_minute} reversals/min");
    }
}

#[test]
fn balanced_runs_replay_exactly() {
    let mut o = options(7, Scenario::Swing, 2);
    o.ticks = 300;
    o.heal_ticks = 100;
    let a = run(&o);
    let b = run(&o);
    assert_eq!(a.summary.trace_hash, b.summary.trace_hash);
    assert_eq!(a.summary.rebalances, b.summary.rebalances);
}

#[test]
fn tree_changes_reach_shards_late_and_nothing_breaks() {
    // Every shard applies the service's changes when they reach it: with
    // long stalls and slow links, cells disagree about borders for up to a
    // second (parked messages, held migrations, stragglers).
    for seed in 0..seeds() {
        let mut o = options(seed, Scenario::Swing, 4);
        o.stall_probability = 0.01;
        o.stall_ms_max = 1_000;
        o.latency.max_us = 300_000;
        let out = run(&o);
        let s = &out.summary;
        assert!(
            s.replica_changes > 0,
            "seed {seed}: no change travelled: {s}"
        );
        assert!(s.replica_lag_us_max > 0, "seed {seed}: {s}");
        assert_eq!(s.violations, 0);
    }
}

/// The world's params under `--set key=value` overrides.
fn params_with(sets: &[&str]) -> WorldParams {
    let sets: Vec<String> = sets.iter().map(|s| (*s).to_owned()).collect();
    WorldParams::from_config(&Config::load(None, &sets).expect("valid overrides"))
}

#[test]
fn balance_keys_reach_the_simulated_balancer() {
    let mut o = options(3, Scenario::Crowd, 2);
    o.entities = 400;
    o.ticks = 400;
    let runs = |sets: &[&str]| {
        let out = run_one(&o, &params_with(sets)).expect("valid options");
        assert!(out.passed(), "{sets:?}: {:?}", out.violations);
        out.summary
    };
    // A low split threshold splits the crowd's cell; one above anything
    // the crowd loads a cell with never does.
    let low = runs(&["balance.split_cell_load_min=0.3"]);
    let high = runs(&["balance.split_cell_load_min=5.0"]);
    assert!(low.splits >= 1, "{low}");
    assert_eq!(high.splits, 0, "{high}");
    assert_ne!(low.trace_hash, high.trace_hash);
    // `enabled = false` keeps the start-up tree, as on a server.
    let off = runs(&["balance.enabled=false"]);
    assert_eq!((off.splits, off.merges, off.rebalances), (0, 0, 0), "{off}");
    // The NPC crowd keys steer the server's NPCs only: the simulator's
    // params are the same whatever they say.
    assert_eq!(
        params_with(&["balance.npc_crowd_radius_m=50"]),
        params_with(&[])
    );
}
