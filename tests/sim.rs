//! Deterministic simulation tests: many seeds, every scenario, determinism,
//! and proof that the checker fails when an invariant breaks.
//!
//! A failing seed prints its violations (with the entity's residency history
//! and the last trace events) and the command that replays it.
//!
//! More seeds: `SIM_SEEDS=200 cargo test --test sim` (default 32). The big
//! run (1,000 entities, 8 cells, 10,000 ticks) is ignored in the default
//! test run because it takes minutes at the test profile's opt-level; run it
//! with `cargo test --release --test sim -- --ignored big_random_walk` or
//! `cargo run --release --bin tessera -- sim --seed 1 --scenario random-walk
//! --entities 1000 --cells 8 --shards 4 --ticks 10000`.
//!
//! # Every violation kind, and the test that makes it fire
//!
//! Each `checker_catches_*` test injects one fault into a running world
//! (`World::inject`, `inject_proxy`, `inject_view_batch`, `cells_mut`, and
//! the hooks of `src/sim/world_faults.rs`) and asserts the kind it must
//! produce. Three kinds are guarded by the cell itself before any event
//! reaches the checker (the input sequence buffer and the sync reorder
//! buffer drop what is duplicated or early), so no fault outside the core
//! gets past them; their checks are shown to fire on hand-made events in
//! `src/sim/checker.rs`'s unit tests.
//!
//! | `ViolationKind` | fault injected | test |
//! |---|---|---|
//! | `TwoReals` | a second real created in another cell | `checker_catches_a_second_real` |
//! | `NoReal` | a real destroyed without a migration | `checker_catches_a_lost_real` |
//! | `InputOutOfOrder` | (guarded by the cell's `SeqBuffer`) | `checker::tests::inputs_in_order_pass_and_gaps_or_repeats_fail` |
//! | `InputDuplicated` | (guarded by the cell's `SeqBuffer`) | `checker::tests::inputs_in_order_pass_and_gaps_or_repeats_fail` |
//! | `VersionGap` | a Props event two versions ahead | `checker_catches_a_property_delta_that_skips_a_version` |
//! | `UpdateBeforeEnter` | a Props event for a handle never entered | `checker_catches_an_update_before_enter_and_after_leave` |
//! | `DoubleEnter` | a view batch delivered twice | `checker_catches_a_view_batch_delivered_twice` |
//! | `UpdateAfterLeave` | a Props event right after the handle's Leave | `checker_catches_an_update_before_enter_and_after_leave` |
//! | `MigratedWithoutGhost` | a forged `Onload` to a cell without a ghost | `checker_catches_a_migration_without_ghost` |
//! | `ForwardLost` | a call to a cell that never heard of the entity | `checker_catches_a_lost_call` |
//! | `ViewDiverged` | a client view emptied after the last step | `checker_catches_a_client_view_that_forgot_everything` (and `checker_catches_a_lost_view_batch_after_healing`) |
//! | `InputLost` | one numbered input lost between proxy and real (`World::lose_upstream`) | `checker_catches_a_lost_input` |
//! | `CallLost` | a call id the world never issued | `checker_catches_a_call_never_issued_and_a_call_run_twice` |
//! | `CallDuplicated` | a call that ran, delivered again | `checker_catches_a_call_never_issued_and_a_call_run_twice` |
//! | `GhostOutOfOrder` | (guarded by the ghost's `ReorderBuffer`) | `checker::tests::ghost_versions_must_follow_each_other` |
//! | `MigrationFlap` | a cell whose layout replica has it merged away hands over reals that crossed nothing (`LayoutFault::MergedInto`) | `checker_catches_a_migration_without_a_crossing` |
//! | `GhostDiverged` | a forged sync reaching one ghost | `checker_catches_a_diverged_ghost_after_healing` |
//! | `MissingGhost` | a cell whose layout replica hides a neighbour from ghost queries (`LayoutFault::HideFromGhosting`) | `checker_catches_a_real_without_its_ghost_after_healing` |
//! | `ProxyStale` | a `RealMoved` from the future to a proxy | `checker_catches_a_proxy_that_lost_its_real` |
//! | `NotQuiesced` | a message still in flight when the run ends | `checker_catches_a_world_that_did_not_quiesce` |
//! | `MergeNotDrained` | a merge that retires its cell with reals in it (`World::retire_undrained`) | `checker_catches_a_merge_that_did_not_drain` |
//! | `HarmfulDrop` | a `CreateGhost` whose snapshot is a movement (dropped as `BadPayload`) | `checker_catches_a_harmful_drop` |
//! | `DownstreamBroken` | a message lost on its way to a client (`World::lose_downstream`) | `checker_catches_a_lost_downstream_message` |
//! | `Panic` | a second `Onload` for a real still there: the cell asserts (`run_one_with`) | `checker_catches_a_panic_of_the_core` |
//!
//! `every_kind_has_a_row_in_the_table` keeps this table in step with
//! `ViolationKind::ALL`. The client library's kinds (`SessionRule`, and the
//! `ClientView`'s `Rule`) are listed in ARCHITECTURE.md ("Invariants and
//! where they are checked") with their tests in `tests/client_session.rs`
//! and `src/core/view/tests.rs`.

use std::sync::Arc;

use tessera::core::cell::{
    Call, CallKind, CellMsg, HauntState, Layout, Onload, ProxyMsg, Source, ToReal, ToRealBody,
};
use tessera::core::entity::schema::{TypeRegistry, AVATAR};
use tessera::core::entity::{Audience, Entity, SyncCache, SyncKind, SyncMsg};
use tessera::core::geom::{Rect, Vec3};
use tessera::core::ids::{CellId, EntityId};
use tessera::core::time::Time;
use tessera::core::view::{BatchReader, ClientEvent, Handle};
use tessera::sim::options::{Scenario, SimOptions};
use tessera::sim::report::{replay_command, ViolationKind};
use tessera::sim::world::{World, WorldParams};
use tessera::sim::world_faults::LayoutFault;
use tessera::sim::world_run::{run_one, run_one_with, RunOutcome};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Panics with the seed, every violation with its context, and the replay
/// command, unless the run passed.
fn assert_clean(out: &RunOutcome) {
    if out.passed() {
        return;
    }
    let mut msg = format!(
        "seed {} broke {} invariant(s):\n",
        out.options.seed, out.summary.violations
    );
    for v in &out.violations {
        msg.push_str(&format!("  {v}\n{}\n", v.context));
    }
    msg.push_str(&format!("replay: {}\n", replay_command(&out.options)));
    panic!("{msg}");
}

fn run(options: &SimOptions) -> RunOutcome {
    run_one(options, &WorldParams::default()).expect("valid options")
}

/// A swarm seed scaled down to test size.
fn small_swarm(seed: u64) -> SimOptions {
    let mut o = SimOptions::swarm(seed);
    o.entities = o.entities.min(48);
    o.ticks = o.ticks.min(240);
    o.heal_ticks = 200;
    o
}

#[test]
fn swarm_seeds_keep_every_invariant() {
    let seeds = env_u64("SIM_SEEDS", 32);
    let mut migrations = 0;
    for seed in 0..seeds {
        let out = run(&small_swarm(seed));
        assert_clean(&out);
        migrations += out.summary.migrations;
    }
    assert!(migrations > 0, "the swarm migrated nothing");
}

/// The swarm with the clients' views updated every other tick and each
/// area brought up to date at one flush in three (`view.client_update_hz
/// = 10`, `aoi.update_every_flushes = 3`, the server's config read as the
/// server reads it): interest sets up to five ticks old at a flush still
/// keep every invariant, healing included.
#[test]
fn swarm_seeds_keep_every_invariant_with_the_aoi_every_third_flush() {
    let config = tessera::config::Config::load(
        None,
        &[
            "view.client_update_hz=10.0".into(),
            "aoi.update_every_flushes=3".into(),
        ],
    )
    .expect("valid");
    let params = WorldParams::from_config(&config);
    assert_eq!(params.views.aoi_every_flushes, 3);
    assert_eq!(params.views.flush_every_ticks, 2);
    let mut batches = 0;
    for seed in 0..env_u64("SIM_SEEDS", 32).div_ceil(2) {
        let out = run_one(&small_swarm(seed), &params).expect("valid options");
        assert_clean(&out);
        batches += out.stats.view_batches;
    }
    assert!(batches > 0, "no view batch: the views were not exercised");
}

fn scenario_seeds(scenario: Scenario, seeds: u64, entities: u32) -> Vec<RunOutcome> {
    (0..seeds)
        .map(|seed| {
            let o = SimOptions {
                seed: 1_000 + seed,
                scenario,
                entities,
                cells: 6,
                shards: 3,
                ticks: 300,
                bot_speed_mps: 15.0,
                stall_probability: 0.005,
                ..SimOptions::test_min()
            };
            let out = run(&o);
            assert_clean(&out);
            out
        })
        .collect()
}

#[test]
fn random_walk_migrates_and_forwards() {
    let outs = scenario_seeds(Scenario::RandomWalk, 4, 40);
    let migrations: u64 = outs.iter().map(|o| o.summary.migrations).sum();
    let forwarded: u64 = outs.iter().map(|o| o.summary.forwarded).sum();
    assert!(migrations > 10, "migrations = {migrations}");
    assert!(forwarded > 0, "forwarded = {forwarded}");
}

#[test]
fn border_walkers_cross_without_flapping() {
    let outs = scenario_seeds(Scenario::BorderWalk, 4, 40);
    assert!(outs.iter().map(|o| o.summary.migrations).sum::<u64>() > 10);
}

#[test]
fn teleports_take_the_offload_path() {
    let outs = scenario_seeds(Scenario::Teleport, 4, 40);
    assert!(outs.iter().map(|o| o.stats.teleports).sum::<u64>() > 10);
    assert!(outs.iter().map(|o| o.summary.migrations).sum::<u64>() > 10);
}

#[test]
fn combat_storm_calls_reach_their_reals() {
    let outs = scenario_seeds(Scenario::CombatStorm, 4, 40);
    let calls: u64 = outs.iter().map(|o| o.stats.calls_issued).sum();
    assert!(calls > 500, "calls = {calls}");
    assert!(outs.iter().map(|o| o.summary.forwarded).sum::<u64>() > 100);
    let landed: u64 = outs.iter().map(|o| o.stats.hits_landed).sum();
    let tried: u64 = outs.iter().map(|o| o.stats.hits_tried).sum();
    assert!(landed > 50, "hits tried {tried}, landed {landed}");
    assert!(outs.iter().map(|o| o.stats.view_batches).sum::<u64>() > 1000);
}

#[test]
fn detail_levels_are_cut_and_caught_up_with_every_invariant() {
    // `hp` (reach 30 m) and `buffs` (15 m) carry levels of detail: far
    // clients are not sent hp changes, near ones converge (the healing
    // check compares every property within reach with the real's).
    let mut outs = scenario_seeds(Scenario::CombatStorm, 4, 40);
    outs.extend(scenario_seeds(Scenario::RandomWalk, 4, 40));
    let cut: u64 = outs.iter().map(|o| o.summary.view_detail_cut).sum();
    let caught_up: u64 = outs.iter().map(|o| o.summary.view_details).sum();
    assert!(cut > 0, "no detail change was cut");
    assert!(caught_up > 0, "no catch-up was sent");
}

#[test]
fn merge_drain_empties_the_merging_cell_then_splits() {
    let outs = scenario_seeds(Scenario::MergeDrain, 4, 40);
    for o in &outs {
        // merge, retire, split
        assert_eq!(o.stats.layout_changes, 3, "seed {}", o.options.seed);
    }
}

#[test]
fn hotspot_crowds_converge_and_disperse() {
    let outs = scenario_seeds(Scenario::Hotspot, 4, 40);
    assert!(outs.iter().map(|o| o.summary.migrations).sum::<u64>() > 10);
}

#[test]
fn thousand_entities_on_eight_cells() {
    let o = SimOptions {
        seed: 7,
        scenario: Scenario::RandomWalk,
        entities: 1_000,
        cells: 8,
        shards: 4,
        ticks: env_u64("SIM_BIG_TICKS", 300),
        heal_ticks: 200,
        world_side_m: 1_000.0,
        ..SimOptions::default()
    };
    let out = run(&o);
    assert_clean(&out);
    assert!(out.summary.migrations > 0);
}

#[test]
#[ignore = "minutes at the test profile; see the module doc"]
fn big_random_walk() {
    let o = SimOptions {
        seed: 1,
        scenario: Scenario::RandomWalk,
        entities: 1_000,
        cells: 8,
        shards: 4,
        ticks: 10_000,
        ..SimOptions::default()
    };
    let out = run(&o);
    assert_clean(&out);
}

#[test]
fn same_seed_same_trace_and_different_seeds_differ() {
    let a = run(&small_swarm(5));
    let b = run(&small_swarm(5));
    let c = run(&small_swarm(6));
    assert_eq!(a.summary.trace_hash, b.summary.trace_hash);
    assert_eq!(a.summary.messages_delivered, b.summary.messages_delivered);
    assert_ne!(a.summary.trace_hash, c.summary.trace_hash);
}

fn small_world(seed: u64) -> World {
    let o = SimOptions {
        seed,
        stall_probability: 0.0,
        ..SimOptions::test_min()
    };
    World::new(&o, &WorldParams::default()).expect("world")
}

fn other_cell(w: &World, c: CellId) -> CellId {
    CellId((c.0 + 1) % w.layout().cell_count())
}

fn kinds(w: &World) -> Vec<ViolationKind> {
    w.checker().violations().iter().map(|v| v.kind).collect()
}

/// The handle and shown version of an entity other than itself that `e`'s
/// client shows.
fn other_shown(w: &World, e: EntityId) -> (Handle, u64) {
    let (&handle, shown) = w
        .client_view(e)
        .shown()
        .iter()
        .find(|(_, s)| s.entity != e)
        .expect("the client sees another entity");
    (handle, shown.version)
}

/// Asserts that the checker caught something, and only `kind`.
fn assert_only(w: &World, kind: ViolationKind, context: &str) {
    let k = kinds(w);
    assert!(
        !k.is_empty() && k.iter().all(|&k| k == kind),
        "{context}: {k:?}"
    );
}

/// A small CombatStorm world: bots crowd, so views fill.
fn crowd_world(seed: u64) -> World {
    let o = SimOptions {
        seed,
        scenario: Scenario::CombatStorm,
        entities: 24,
        stall_probability: 0.0,
        ..SimOptions::test_min()
    };
    World::new(&o, &WorldParams::default()).expect("world")
}

/// Steps `w` until some client got a view batch with an enter; returns the
/// client and the batch.
fn batch_with_enter(w: &mut World) -> (EntityId, Vec<u8>) {
    for _ in 0..400 {
        w.step();
        assert_eq!(w.checker().total(), 0, "{:?}", w.checker().violations());
        for i in 0..u64::from(w.options().entities) {
            let e = EntityId(i);
            let Some(b) = w.last_view_batch(e) else {
                continue;
            };
            let enters = BatchReader::new(b).any(|ev| matches!(ev, Ok(ClientEvent::Enter { .. })));
            if enters {
                return (e, b.to_vec());
            }
        }
    }
    panic!("no client saw an enter");
}

#[test]
fn checker_catches_a_view_batch_delivered_twice() {
    let mut w = crowd_world(5);
    let (e, b) = batch_with_enter(&mut w);
    let before = w.stats().view_batches;
    assert!(before > 0);
    w.inject_view_batch(e, &b);
    assert!(
        kinds(&w).contains(&ViolationKind::DoubleEnter),
        "{:?}",
        kinds(&w)
    );
    assert_eq!(w.stats().view_batches, before + 1);
}

#[test]
fn checker_catches_a_lost_view_batch_after_healing() {
    let mut w = crowd_world(6);
    let (e, _) = batch_with_enter(&mut w);
    // The client forgets everything it saw: a view that lost its batches.
    let empty = tessera::core::view::ClientView::new(
        e,
        Arc::new(TypeRegistry::with_builtins()),
        Default::default(),
    );
    w.replace_client_view(e, empty);
    let total = w.options().ticks + w.options().heal_ticks;
    while w.tick() < total {
        w.step();
    }
    w.finish();
    let k = kinds(&w);
    assert!(
        k.iter().any(|k| matches!(
            k,
            ViolationKind::ViewDiverged
                | ViolationKind::UpdateBeforeEnter
                | ViolationKind::UpdateAfterLeave
        )),
        "{k:?}"
    );
}

#[test]
fn checker_catches_a_second_real() {
    let mut w = small_world(1);
    for _ in 0..10 {
        w.step();
    }
    assert!(kinds(&w).is_empty());
    let e = EntityId(0);
    let home = w.real_cell(e).expect("landed");
    let there = other_cell(&w, home);
    let types = TypeRegistry::with_builtins();
    let avatar = types.get(AVATAR).expect("avatar").clone();
    let twin = Entity::new_real(e, avatar, Vec3::ground(1.0, 1.0), 0.0);
    let now = w.now();
    w.cells_mut()[there.0 as usize]
        .create_real(now, twin, false, 0)
        .expect("absent there");
    w.step();
    assert!(
        kinds(&w).contains(&ViolationKind::TwoReals),
        "{:?}",
        kinds(&w)
    );
    let s = w.finish();
    assert_eq!((s.failed_seeds.clone(), s.violations > 0), (vec![1], true));
    let v = &w.checker().violations()[0];
    assert_eq!(v.entity, Some(e));
    assert!(
        v.context.contains("residency history of e0"),
        "{}",
        v.context
    );
}

/// An `Onload` of `e` at `epoch` that no migration sent: a fresh avatar at
/// the origin, with no haunts, inputs or calls.
fn forged_onload(e: EntityId, epoch: u64) -> CellMsg {
    let types = TypeRegistry::with_builtins();
    let avatar = types.get(AVATAR).expect("avatar").clone();
    let mut state = Vec::new();
    Entity::new_real(e, avatar, Vec3::ground(0.0, 0.0), 0.0)
        .encode_snapshot(Audience::Real, &mut state);
    CellMsg::Onload(Box::new(Onload {
        entity: e,
        epoch,
        type_id: AVATAR,
        state,
        version: 0,
        sync_cache: SyncCache::new(Default::default(), 0),
        haunts: Vec::new(),
        next_input: 1,
        early_inputs: Vec::new(),
        pending_calls: Vec::new(),
        next_downstream: 1,
        has_proxy: false,
        observer: Vec::new(),
        combat: Vec::new(),
        layout_version: 0,
        source_ghost: true,
    }))
}

#[test]
fn checker_catches_a_migration_without_ghost() {
    let mut w = small_world(2);
    for _ in 0..5 {
        w.step();
    }
    let e = EntityId(3);
    let home = w.real_cell(e).expect("landed");
    // A cell not within the ghost radius holds no ghost: pick one that holds
    // nothing of e.
    let target = (0..w.layout().cell_count())
        .map(CellId)
        .find(|&c| c != home && w.cells()[c.0 as usize].residency(e).is_none())
        .expect("some cell without a ghost");
    w.inject(Source::Cell(home), target, forged_onload(e, 99));
    for _ in 0..5 {
        w.step();
    }
    let k = kinds(&w);
    assert!(k.contains(&ViolationKind::MigratedWithoutGhost), "{k:?}");
    assert!(k.contains(&ViolationKind::TwoReals), "{k:?}");
}

/// A game call with no data for `e`'s real.
fn empty_call(e: EntityId) -> CellMsg {
    CellMsg::ToReal(ToReal {
        entity: e,
        hops: 0,
        body: ToRealBody::Call(Call {
            kind: CallKind::Game,
            id: 0,
            data: Arc::from(&[][..]),
        }),
    })
}

#[test]
fn checker_catches_a_lost_call() {
    // A seed whose e0 never reaches the target cell while the call waits
    // there (in one that does, the call is delivered, not lost): the first
    // such seed is taken, and the test fails if there is none.
    for seed in 3..35 {
        let mut w = small_world(seed);
        for _ in 0..3 {
            w.step();
        }
        let e = EntityId(0);
        let target = (0..w.layout().cell_count())
            .map(CellId)
            .find(|&c| w.cells()[c.0 as usize].residency(e).is_none())
            .expect("a cell that never heard of e0");
        w.inject(Source::Local, target, empty_call(e));
        // The cell holds it in case e0's ghost is on its way (`early.rs`),
        // and drops it once the ghost creation timeout passes.
        let tick_ms = w.options().tick_ms;
        let steps = w.cell_params().ghost_create_timeout_ms / tick_ms + 5;
        let mut came = false;
        for _ in 0..steps {
            w.step();
            came |= w.cells()[target.0 as usize].residency(e).is_some();
            if came || !kinds(&w).is_empty() {
                break;
            }
        }
        if came {
            continue;
        }
        assert_eq!(kinds(&w), vec![ViolationKind::ForwardLost], "seed {seed}");
        return;
    }
    panic!("e0 reached the call's cell in every seed");
}

#[test]
fn checker_catches_a_diverged_ghost_after_healing() {
    // A forged sync (one version ahead, other props) reaches one ghost only,
    // once the world is quiet: the ghost stays ahead of and different from
    // its real through healing.
    let mut o = SimOptions {
        seed: 4,
        stall_probability: 0.0,
        ticks: 30,
        heal_ticks: 100,
        ..SimOptions::test_min()
    };
    o.latency.burst_probability = 0.0;
    let mut w = World::new(&o, &WorldParams::default()).expect("world");
    let mut forged = false;
    while w.tick() < o.ticks + o.heal_ticks {
        w.step();
        if forged || w.tick() < o.ticks + 50 {
            continue;
        }
        for i in 0..o.entities {
            let e = EntityId(u64::from(i));
            let Some(rc) = w.real_cell(e) else { continue };
            let real = w.cells()[rc.0 as usize].view(e).expect("real");
            let Some(h) = w.cells()[rc.0 as usize]
                .haunts(e)
                .and_then(|h| h.first().copied())
            else {
                continue;
            };
            // A movement block: x, y, z (f64) and yaw (f32), 1 m off.
            let p = real.pos();
            let mut block = Vec::new();
            for v in [p.x + 1.0, p.y, p.z] {
                block.extend_from_slice(&v.to_le_bytes());
            }
            block.extend_from_slice(&0f32.to_le_bytes());
            let sync = SyncMsg::new(
                e,
                real.version + 1,
                SyncKind::Movement,
                Time::ZERO,
                &block,
                &block,
            );
            let epoch = real.residency.epoch();
            let msg = CellMsg::Sync {
                epoch,
                msg: Arc::new(sync),
            };
            w.inject(Source::Cell(rc), h.cell, msg);
            forged = true;
            break;
        }
    }
    assert!(forged, "no real had a ghost to forge for");
    w.finish();
    let k = kinds(&w);
    assert!(k.contains(&ViolationKind::GhostDiverged), "{k:?}");
}

#[test]
fn cli_prints_a_summary_and_one_json_line() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["sim", "--seeds", "3", "--entities", "12", "--ticks", "60"])
        .args(["--heal-ticks", "100", "--scenario", "border-walk"])
        .output()
        .expect("tessera runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.starts_with("OK: 3 seeds"), "{stdout}");
    let last = stdout.lines().last().expect("a JSON line");
    let v: serde_json::Value = serde_json::from_str(last).expect("JSON");
    assert_eq!(v["seeds"], 3);
    assert_eq!(v["violations"], 0);
    for key in [
        "ticks",
        "migrations",
        "forwarded",
        "sim_ticks_per_s",
        "max_reorder_buffer",
        "max_cache_len",
    ] {
        assert!(v.get(key).is_some(), "{key} missing: {last}");
    }
}

/// Runs `w` to the end of healing, then lets `bend` change client views,
/// then finishes (the convergence checks).
fn heal_bend_finish(w: &mut World, bend: impl FnOnce(&mut World)) {
    let total = w.options().ticks + w.options().heal_ticks;
    while w.tick() < total {
        w.step();
    }
    assert_eq!(w.checker().total(), 0, "{:?}", w.checker().violations());
    bend(w);
    w.finish();
}

/// A viewer and the handle of an entity it shows `lo..hi` m away (after
/// healing), with the version shown.
fn pair_at(w: &World, lo: f64, hi: f64) -> Option<(EntityId, u32, u64)> {
    (0..u64::from(w.options().entities)).find_map(|i| {
        let v = w.client_view(EntityId(i));
        let me = v.own()?.replica.core().pos;
        v.shown().iter().find_map(|(&h, s)| {
            let d = me.dist_xz(s.replica.core().pos);
            (lo..hi).contains(&d).then_some((EntityId(i), h, s.version))
        })
    })
}

/// A Detail event setting hp to `hp` at the shown version.
fn wrong_hp(handle: u32, version: u64, hp: i64) -> Vec<u8> {
    let hp_index = TypeRegistry::with_builtins()
        .get(AVATAR)
        .expect("avatar")
        .prop_index("hp");
    let mut delta = vec![1, hp_index.expect("hp") as u8, 0];
    tessera::core::entity::codec::put_ivar(&mut delta, hp);
    let mut batch = Vec::new();
    tessera::core::view::encode_event(
        &mut batch,
        &ClientEvent::Detail {
            handle,
            version_low: version as u8,
            delta: &delta,
        },
    );
    batch
}

#[test]
fn healing_checks_detail_properties_within_reach_only() {
    // Within reach (hp: 30 m) a wrong value is a divergence; beyond it, a
    // client may hold any earlier value.
    let mut w = World::new(
        &SimOptions {
            seed: 3,
            scenario: Scenario::RandomWalk,
            entities: 40,
            stall_probability: 0.0,
            ..SimOptions::test_min()
        },
        &WorldParams::default(),
    )
    .expect("world");
    heal_bend_finish(&mut w, |w| {
        let (near_viewer, h, v) = pair_at(w, 0.0, 25.0).expect("a pair within 25 m");
        w.inject_view_batch(near_viewer, &wrong_hp(h, v, -777));
        let (far_viewer, h, v) = pair_at(w, 35.0, 45.0).expect("a pair 35-45 m apart");
        w.inject_view_batch(far_viewer, &wrong_hp(h, v, -888));
    });
    let found: Vec<_> = (w.checker().violations().iter())
        .map(|v| (v.kind, v.detail.contains("-777"), v.detail.contains("-888")))
        .collect();
    assert_eq!(
        found,
        [(ViolationKind::ViewDiverged, true, false)],
        "{found:?}"
    );
}

#[test]
fn checker_catches_a_property_delta_that_skips_a_version() {
    let mut w = crowd_world(7);
    let (e, _) = batch_with_enter(&mut w);
    let (handle, shown_version) = other_shown(&w, e);
    // A Props event two versions ahead: the version in between (a property
    // change) was lost on the way.
    let version_low = shown_version.wrapping_add(2) as u8;
    let mut batch = Vec::new();
    tessera::core::view::encode_event(
        &mut batch,
        &ClientEvent::Props {
            handle,
            version_low,
            delta: &[0],
        },
    );
    w.inject_view_batch(e, &batch);
    assert!(
        kinds(&w).contains(&ViolationKind::VersionGap),
        "{:?}",
        kinds(&w)
    );
}

#[test]
fn checker_catches_a_world_that_did_not_quiesce() {
    let mut w = small_world(8);
    let total = w.options().ticks + w.options().heal_ticks;
    while w.tick() < total {
        w.step();
    }
    assert!(kinds(&w).is_empty(), "{:?}", kinds(&w));
    // A message still on its way when the run ends.
    let e = EntityId(0);
    let home = w.real_cell(e).expect("landed");
    w.inject(Source::Local, home, empty_call(e));
    w.finish();
    assert!(
        kinds(&w).contains(&ViolationKind::NotQuiesced),
        "{:?}",
        kinds(&w)
    );
}

#[test]
fn checker_catches_a_lost_downstream_message() {
    let mut w = crowd_world(9);
    let (e, _) = batch_with_enter(&mut w);
    // The transport to e's client loses one message (a view batch or an
    // ack): the next one arrives with a gap in the proxy's numbering.
    w.lose_downstream(e, 1);
    for _ in 0..40 {
        w.step();
        if !kinds(&w).is_empty() {
            break;
        }
    }
    assert!(
        kinds(&w).contains(&ViolationKind::DownstreamBroken),
        "{:?}",
        kinds(&w)
    );
}

#[test]
fn checker_catches_a_proxy_that_lost_its_real() {
    let mut w = small_world(10);
    for _ in 0..10 {
        w.step();
    }
    assert!(kinds(&w).is_empty(), "{:?}", kinds(&w));
    let e = EntityId(0);
    let home = w.real_cell(e).expect("landed");
    // A RealMoved from the future: the proxy believes the real is in
    // another cell, at an epoch no real migration will reach.
    w.inject_proxy(
        home,
        ProxyMsg::RealMoved {
            entity: e,
            cell: other_cell(&w, home),
            epoch: u64::MAX / 2,
        },
    );
    let total = w.options().ticks + w.options().heal_ticks;
    while w.tick() < total && !kinds(&w).contains(&ViolationKind::ProxyStale) {
        w.step();
    }
    w.finish();
    assert!(
        kinds(&w).contains(&ViolationKind::ProxyStale),
        "{:?}",
        kinds(&w)
    );
}

#[test]
fn checker_catches_a_real_without_its_ghost_after_healing() {
    // One entity: no other client observes it, so a missing ghost shows as
    // itself only (with observers across the border, their views would
    // diverge too). The seed must leave the real within the ghost radius of
    // another cell: the first such seed is taken.
    for seed in 0..32 {
        let o = SimOptions {
            seed,
            entities: 1,
            stall_probability: 0.0,
            ticks: 60,
            heal_ticks: 240,
            ..SimOptions::test_min()
        };
        let mut w = World::new(&o, &WorldParams::default()).expect("world");
        // Phase one, then quiet ticks: the inputs in flight land, the real
        // stops for good.
        while w.tick() < o.ticks + 20 {
            w.step();
        }
        assert!(kinds(&w).is_empty(), "{:?}", kinds(&w));
        let e = EntityId(0);
        let home = w.real_cell(e).expect("landed");
        let pos = w.cells()[home.0 as usize].view(e).expect("real").pos();
        let mut required = Vec::new();
        let radius = w.cell_params().ghost_radius_m;
        w.layout()
            .cells_meeting(&Rect::around(pos.x, pos.z, radius), &mut required);
        let haunts = w.cells()[home.0 as usize].haunts(e).expect("real");
        let Some(ghost) = haunts
            .iter()
            .find(|h| h.state == HauntState::Created && required.contains(&h.cell))
            .map(|h| h.cell)
        else {
            continue; // not near a border: the next seed
        };
        // The real's cell loses `ghost` from its ghost queries (a corrupt
        // replica of the layout): it deletes its ghost there and never
        // creates another.
        w.corrupt_layout(home, LayoutFault::HideFromGhosting(ghost));
        while w.tick() < o.ticks + o.heal_ticks {
            w.step();
        }
        w.finish();
        assert_only(&w, ViolationKind::MissingGhost, &format!("seed {seed}"));
        assert_eq!(w.checker().violations()[0].entity, Some(e));
        return;
    }
    panic!("no seed left its one real near a border");
}

#[test]
fn checker_catches_a_merge_that_did_not_drain() {
    let mut w = small_world(11);
    for _ in 0..10 {
        w.step();
    }
    assert!(kinds(&w).is_empty(), "{:?}", kinds(&w));
    let m = w.real_cell(EntityId(0)).expect("landed");
    assert!(!w.cells()[m.0 as usize].reals().is_empty());
    let grid = w.layout().grid().expect("a grid world");
    let into = grid.side_neighbours(m)[0];
    // The merge retires `m` with its reals still in it.
    w.retire_undrained(m, into).expect("side neighbours merge");
    w.step();
    assert_eq!(kinds(&w), vec![ViolationKind::MergeNotDrained]);
}

#[test]
fn checker_catches_a_panic_of_the_core() {
    let o = SimOptions {
        seed: 12,
        stall_probability: 0.0,
        ..SimOptions::test_min()
    };
    let mut injected_at = None;
    let out = run_one_with(&o, &WorldParams::default(), |w| {
        let e = EntityId(0);
        let Some(home) = w.real_cell(e).filter(|_| w.tick() >= 10) else {
            return;
        };
        if injected_at.is_none() {
            // A second Onload for a real still there, handed straight to
            // the cell (as a runtime that lost its routing would; through
            // the network the checker would see two reals first): the cell
            // asserts, two reals would exist.
            injected_at = Some(w.tick());
            let (from, now) = (other_cell(w, home), w.now());
            let CellMsg::Onload(o) = forged_onload(e, u64::MAX / 2) else {
                unreachable!("an onload")
            };
            w.cells_mut()[home.0 as usize].handle(now, Source::Cell(from), CellMsg::Onload(o));
        }
    })
    .expect("valid options");
    assert!(injected_at.is_some());
    let k: Vec<ViolationKind> = out.violations.iter().map(|v| v.kind).collect();
    assert_eq!(k, vec![ViolationKind::Panic], "{:?}", out.violations);
    let v = &out.violations[0];
    assert!(v.detail.contains("onload of e0"), "{}", v.detail);
    assert_eq!(
        (out.summary.failed_seeds.clone(), out.passed()),
        (vec![12], false)
    );
}

#[test]
fn checker_catches_a_lost_real() {
    let mut w = small_world(13);
    for _ in 0..10 {
        w.step();
    }
    assert!(kinds(&w).is_empty(), "{:?}", kinds(&w));
    let e = EntityId(0);
    let home = w.real_cell(e).expect("landed");
    let now = w.now();
    w.cells_mut()[home.0 as usize]
        .destroy_real(now, e)
        .expect("real there");
    w.step();
    assert_eq!(kinds(&w), vec![ViolationKind::NoReal]);
}

#[test]
fn checker_catches_a_call_never_issued_and_a_call_run_twice() {
    let mut w = crowd_world(14);
    for _ in 0..20 {
        w.step();
    }
    assert!(kinds(&w).is_empty(), "{:?}", kinds(&w));
    assert!(w.stats().calls_issued > 0);
    let e = EntityId(0);
    let home = w.real_cell(e).expect("landed");
    // A call id the world never issued (a script call, as the world's).
    let call = |id| {
        CellMsg::ToReal(ToReal {
            entity: e,
            hops: 0,
            body: ToRealBody::Call(Call {
                kind: CallKind::Game,
                id,
                data: Arc::from(&[tessera::sim::world_logic::SCRIPT_CALL][..]),
            }),
        })
    };
    w.inject(Source::Local, home, call(u64::MAX / 2));
    for _ in 0..5 {
        w.step();
    }
    assert_eq!(kinds(&w), vec![ViolationKind::CallLost]);
    // Call 0 (issued, and run by now) run again.
    let mut w = crowd_world(14);
    for _ in 0..20 {
        w.step();
    }
    let (id, target) = (0..w.stats().calls_issued)
        .find_map(|id| match w.checker().call_runs(id) {
            Some((target, 1)) => Some((id, target)),
            _ => None,
        })
        .expect("a call that ran");
    let home = w.real_cell(target).expect("landed");
    let again = CellMsg::ToReal(ToReal {
        entity: target,
        hops: 0,
        body: ToRealBody::Call(Call {
            kind: CallKind::Game,
            id,
            data: Arc::from(&[tessera::sim::world_logic::SCRIPT_CALL][..]),
        }),
    });
    w.inject(Source::Local, home, again);
    for _ in 0..5 {
        w.step();
    }
    assert_eq!(kinds(&w), vec![ViolationKind::CallDuplicated]);
}

#[test]
fn checker_catches_an_update_before_enter_and_after_leave() {
    let mut w = crowd_world(15);
    let (e, _) = batch_with_enter(&mut w);
    let (handle, shown_version) = other_shown(&w, e);
    let version_low = shown_version.wrapping_add(1) as u8;
    let unused = (0..u16::MAX)
        .map(|h| h as _)
        .find(|h| !w.client_view(e).shown().contains_key(h))
        .expect("a free handle");
    let props = |handle| ClientEvent::Props {
        handle,
        version_low,
        delta: &[0],
    };
    let mut batch = Vec::new();
    tessera::core::view::encode_event(&mut batch, &props(unused));
    w.inject_view_batch(e, &batch);
    assert_eq!(kinds(&w), vec![ViolationKind::UpdateBeforeEnter]);
    let mut batch = Vec::new();
    tessera::core::view::encode_event(&mut batch, &ClientEvent::Leave { handle });
    tessera::core::view::encode_event(&mut batch, &props(handle));
    w.inject_view_batch(e, &batch);
    assert_eq!(
        kinds(&w),
        vec![
            ViolationKind::UpdateBeforeEnter,
            ViolationKind::UpdateAfterLeave
        ]
    );
}

#[test]
fn checker_catches_a_lost_input() {
    let o = SimOptions {
        seed: 16,
        stall_probability: 0.0,
        ticks: 200,
        heal_ticks: 100,
        ..SimOptions::test_min()
    };
    let mut w = World::new(&o, &WorldParams::default()).expect("world");
    for _ in 0..10 {
        w.step();
    }
    assert!(kinds(&w).is_empty(), "{:?}", kinds(&w));
    // One numbered input of e0 never reaches its real: the later ones wait
    // for it until the input buffer overflows and the real skips the gap.
    w.lose_upstream(EntityId(0), 1);
    while w.tick() < o.ticks + o.heal_ticks && kinds(&w).is_empty() {
        w.step();
    }
    if kinds(&w).is_empty() {
        w.finish();
    }
    assert_only(&w, ViolationKind::InputLost, "InputLost");
}

#[test]
fn checker_catches_a_harmful_drop() {
    let mut w = small_world(17);
    for _ in 0..5 {
        w.step();
    }
    assert!(kinds(&w).is_empty(), "{:?}", kinds(&w));
    let e = EntityId(0);
    let home = w.real_cell(e).expect("landed");
    let target = other_cell(&w, home);
    // A CreateGhost (of an epoch newer than any) whose "snapshot" is a
    // movement: the cell cannot build the ghost from it and drops the
    // message (BadPayload).
    let not_a_snapshot = SyncMsg::new(e, 1, SyncKind::Movement, Time::ZERO, &[], &[]);
    let msg = CellMsg::CreateGhost {
        entity: e,
        epoch: u64::MAX / 2,
        type_id: AVATAR,
        snapshot: not_a_snapshot,
    };
    w.inject(Source::Cell(home), target, msg);
    for _ in 0..5 {
        w.step();
    }
    assert_eq!(kinds(&w), vec![ViolationKind::HarmfulDrop]);
}

#[test]
fn checker_catches_a_client_view_that_forgot_everything() {
    let mut w = crowd_world(18);
    let total = w.options().ticks + w.options().heal_ticks;
    while w.tick() < total {
        w.step();
    }
    assert!(kinds(&w).is_empty(), "{:?}", kinds(&w));
    // After the last step no batch comes: a client that forgets what it
    // saw is caught only by the comparison with the truth.
    let e = (0..u64::from(w.options().entities))
        .map(EntityId)
        .find(|&e| !w.client_view(e).shown().is_empty())
        .expect("some client sees others");
    let empty = tessera::core::view::ClientView::new(
        e,
        Arc::new(TypeRegistry::with_builtins()),
        Default::default(),
    );
    w.replace_client_view(e, empty);
    w.finish();
    assert_only(&w, ViolationKind::ViewDiverged, "ViewDiverged");
}

#[test]
fn checker_catches_a_migration_without_a_crossing() {
    let mut w = small_world(19);
    for _ in 0..10 {
        w.step();
    }
    assert!(kinds(&w).is_empty(), "{:?}", kinds(&w));
    let home = w.real_cell(EntityId(0)).expect("landed");
    let into = other_cell(&w, home);
    // The cell's replica of the layout has it merged into another: it
    // hands its reals over though none of them crossed a border.
    w.corrupt_layout(home, LayoutFault::MergedInto(into));
    for _ in 0..40 {
        w.step();
        if !kinds(&w).is_empty() {
            break;
        }
    }
    assert!(!kinds(&w).is_empty(), "no violation");
    assert_eq!(
        kinds(&w)[0],
        ViolationKind::MigrationFlap,
        "{:?}",
        kinds(&w)
    );
    assert!(
        kinds(&w).iter().all(|&k| k == ViolationKind::MigrationFlap),
        "{:?}",
        kinds(&w)
    );
}

/// The table in the module doc names every kind of `ViolationKind::ALL`,
/// and every test it names exists in this file or in `checker.rs`.
#[test]
fn every_kind_has_a_row_in_the_table() {
    let me = include_str!("sim.rs");
    let checker = include_str!("../src/sim/checker.rs");
    let rows: Vec<&str> = me
        .lines()
        .filter(|l| l.starts_with("//! | `") && !l.starts_with("//! | `ViolationKind`"))
        .collect();
    for kind in ViolationKind::ALL {
        let name = format!("//! | `{kind}` |");
        let row = rows
            .iter()
            .find(|r| r.starts_with(&name))
            .unwrap_or_else(|| panic!("no row for {kind}"));
        let test = row.rsplit('|').nth(1).expect("a test column").trim();
        let first = test.split('`').nth(1).expect("a test name");
        let (file, name) = match first.strip_prefix("checker::tests::") {
            Some(n) => (checker, n),
            None => (me, first),
        };
        assert!(
            file.contains(&format!("fn {name}(")),
            "{kind}: no test {first}"
        );
    }
    assert_eq!(rows.len(), ViolationKind::ALL.len(), "one row per kind");
}
