//! Protocol tests of cells and proxies on a tiny deterministic network.
//!
//! The harness: a few cells on a grid layout, spread over a few shards; one
//! FIFO queue per ordered pair of nodes (shards, and one node for all
//! proxies) with random delays from a seeded RNG (so messages between two
//! shards keep their order, messages on different pairs do not); bots that
//! move their reals, proxies that send inputs, callers that aim calls at
//! stale cells. After every step it checks: exactly one real per entity or
//! one `Onload` in flight; a ghost exists at the destination when an
//! `Onload` arrives; every input is applied exactly once in order; every
//! ghost applies versions consecutively (or jumps forward by a snapshot);
//! every call reaches the real exactly once; downstream data reaches the
//! client in order. After a quiet phase it checks convergence: each real's
//! haunts hold ghosts at the real's version, and no ghost is an orphan.
//!
//! `CELL_PROTOCOL_SEEDS` sets how many seeds the random test runs (default 6).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use tessera::core::cell::{
    Call, CallKind, Cell, CellEvent, CellMsg, CellParams, Dest, DropReason, GridLayout, Layout,
    Msg, Outgoing, ProxyMsg, Residency, Source, ToReal, ToRealBody,
};
use tessera::core::entity::{Entity, TypeRegistry, Value, AVATAR};
use tessera::core::geom::Vec3;
use tessera::core::ids::{CellId, EntityId};
use tessera::core::proxy::{Proxy, ProxyParams};
use tessera::core::time::Time;

mod common;
use common::{Net, Packet, Rng};

/// A bot walking towards random waypoints.
struct Bot {
    pos: Vec3,
    goal: Vec3,
    speed_mps: f64,
}

#[derive(Default)]
struct Log {
    inputs_applied: BTreeMap<EntityId, u64>,
    ghost_version: BTreeMap<(CellId, EntityId), u64>,
    calls_sent: BTreeSet<(EntityId, u64)>,
    calls_run: BTreeMap<(EntityId, u64), u32>,
    /// Downstream messages game code sent (a subset of `downstream_out`).
    downstream_sent: BTreeMap<EntityId, u64>,
    /// Every downstream message the cells sent (game code's and the
    /// observers' view batches).
    downstream_out: BTreeMap<EntityId, u64>,
    downstream_got: BTreeMap<EntityId, u64>,
    migrations: BTreeMap<EntityId, u32>,
    onloads_checked: u64,
    harmful: Vec<(CellId, EntityId, DropReason)>,
}

fn types() -> Arc<TypeRegistry> {
    Arc::new(TypeRegistry::with_builtins())
}

fn avatar(types: &TypeRegistry, id: EntityId, pos: Vec3) -> Entity {
    Entity::new_real(id, types.get(AVATAR).expect("avatar").clone(), pos, 0.0)
}

/// Index of the `hp` property of the built-in avatar.
fn hp(types: &TypeRegistry) -> usize {
    types
        .get(AVATAR)
        .expect("avatar")
        .prop_index("hp")
        .expect("hp")
}

struct World {
    types: Arc<TypeRegistry>,
    now: Time,
    rng: Rng,
    layout: GridLayout,
    cells: BTreeMap<CellId, Cell>,
    proxies: BTreeMap<EntityId, Proxy>,
    bots: BTreeMap<EntityId, Bot>,
    net: Net,
    log: Log,
    next_call: u64,
    step_ms: u64,
}

fn test_params() -> CellParams {
    CellParams {
        ghost_radius_m: 30.0,
        ghost_keep_margin_m: 10.0,
        migrate_margin_m: 8.0,
        check_period_ms: 100,
        ghost_min_lifetime_ms: 500,
        new_real_keep_ghosts_ms: 500,
        ghost_create_timeout_ms: 2_000,
        resync_gap_timeout_ms: 400,
        forward_ttl_ms: 5_000,
        ..CellParams::default()
    }
}

impl World {
    fn new(seed: u64, nx: u32, nz: u32, shards: u32, params: CellParams) -> World {
        let layout = GridLayout::new(nx, nz, 200.0);
        let types = types();
        let cells = layout
            .cells()
            .map(|c| {
                (
                    c,
                    Cell::new(c, params.clone(), types.clone()).expect("params"),
                )
            })
            .collect();
        World {
            types,
            now: Time::ZERO,
            rng: Rng(seed),
            layout,
            cells,
            proxies: BTreeMap::new(),
            bots: BTreeMap::new(),
            net: Net {
                shards,
                queues: BTreeMap::new(),
                delay_us: (200, 40_000),
                spike: (0.01, 300_000),
            },
            log: Log::default(),
            next_call: 1,
            step_ms: 50,
        }
    }

    fn spawn(&mut self, e: EntityId, pos: Vec3, speed_mps: f64) {
        let c = self.layout.cell_at(pos).expect("in world");
        let now = self.now;
        let cell = self.cells.get_mut(&c).expect("cell");
        cell.create_real(now, avatar(&self.types, e, pos), true, 0)
            .expect("spawn");
        let proxy = Proxy::new(e, c, 0, ProxyParams::default()).expect("proxy");
        self.proxies.insert(e, proxy);
        self.bots.insert(
            e,
            Bot {
                pos,
                goal: pos,
                speed_mps,
            },
        );
    }

    fn real_of(&self, e: EntityId) -> Option<CellId> {
        let mut found = None;
        for (id, c) in &self.cells {
            if matches!(c.residency(e), Some(Residency::Real { .. })) {
                assert!(found.is_none(), "{e} real in {found:?} and {id}");
                found = Some(*id);
            }
        }
        found
    }

    fn step(&mut self, active: bool) {
        self.now = self.now + Duration::from_millis(self.step_ms);
        for p in self.net.due(self.now) {
            self.deliver(p);
        }
        if active {
            self.play();
        }
        let now = self.now;
        for c in self.cells.values_mut() {
            c.tick(now, &self.layout);
        }
        self.drain();
        self.check_step();
    }

    fn deliver(&mut self, p: Packet) {
        match (p.to, p.msg) {
            (Dest::Cell(c), Msg::Cell(m)) => {
                let cell = self.cells.get_mut(&c).expect("cell");
                if let CellMsg::Onload(o) = &m {
                    let r = cell.residency(o.entity);
                    assert!(
                        matches!(r, Some(Residency::Ghost { .. })),
                        "onload of {} at {c} without a ghost: {r:?}; history {:?}",
                        o.entity,
                        cell.history(o.entity)
                    );
                    self.log.onloads_checked += 1;
                }
                let before = cell.counters().harmful_drops();
                let entity = m.entity();
                let shown = format!("{m:?}");
                cell.handle(self.now, p.from, m);
                if cell.counters().harmful_drops() > before {
                    let knew: Vec<_> = self
                        .cells
                        .iter()
                        .map(|(id, c)| (*id, c.history(entity)))
                        .collect();
                    panic!(
                        "{c} dropped {shown} from {:?} at {:?}; histories {knew:#?}",
                        p.from, self.now
                    );
                }
            }
            (Dest::Proxy(e), Msg::Proxy(m)) => {
                self.proxies
                    .get_mut(&e)
                    .expect("proxy")
                    .handle(self.now, m)
                    .expect("proxy msg");
            }
            (to, msg) => panic!("mismatched packet to {to:?}: {msg:?}"),
        }
    }

    /// Game code: bots move, clients send inputs, callers call, reals talk
    /// to their clients.
    fn play(&mut self) {
        let world = self.layout.world();
        let ids: Vec<EntityId> = self.bots.keys().copied().collect();
        for e in ids {
            let Some(c) = self.real_of(e) else { continue };
            let bot = self.bots.get_mut(&e).expect("bot");
            if bot.pos.dist_xz(bot.goal) < 1.0 {
                let x = world.min_x + 1.0 + self.rng.unit() * (world.width() - 2.0);
                let z = world.min_z + 1.0 + self.rng.unit() * (world.depth() - 2.0);
                bot.goal = Vec3::ground(x, z);
            }
            let step = bot.speed_mps * self.step_ms as f64 / 1000.0;
            let d = bot.pos.dist_xz(bot.goal).max(1e-9);
            let t = (step / d).min(1.0);
            bot.pos = Vec3::ground(
                bot.pos.x + (bot.goal.x - bot.pos.x) * t,
                bot.pos.z + (bot.goal.z - bot.pos.z) * t,
            );
            let cell = self.cells.get_mut(&c).expect("cell");
            cell.move_real(e, bot.pos).expect("real moves");
            if self.rng.chance(0.1) {
                let v = Value::Int(self.rng.below(1000) as i64);
                let real = cell.real_mut(e).expect("real");
                real.props_mut().set(hp(&self.types), v).expect("hp");
            }
            if self.rng.chance(0.2) {
                let n = self.log.downstream_sent.entry(e).or_default();
                *n += 1;
                cell.send_to_client(e, n.to_le_bytes().to_vec())
                    .expect("downstream");
            }
            if self.rng.chance(0.3) {
                let p = self.proxies.get_mut(&e).expect("proxy");
                p.send_input(self.now, (&[1u8][..]).into());
            }
            if self.rng.chance(0.05) {
                self.send_stale_call(e);
            }
        }
    }

    /// A call aimed at any cell that knows (or knew, with a forwarding
    /// entry that outlives the call's trip) the entity.
    fn send_stale_call(&mut self, e: EntityId) {
        let soon = self.now + Duration::from_secs(1);
        let knowing: Vec<CellId> = self
            .cells
            .iter()
            .filter(|(_, c)| match c.residency(e) {
                Some(Residency::Gone { until, .. }) => until > soon,
                other => other.is_some(),
            })
            .map(|(id, _)| *id)
            .collect();
        let to = knowing[self.rng.below(knowing.len() as u64) as usize];
        let id = self.next_call;
        self.next_call += 1;
        self.log.calls_sent.insert((e, id));
        let msg = CellMsg::ToReal(ToReal {
            entity: e,
            hops: 0,
            body: ToRealBody::Call(Call {
                kind: CallKind::Game,
                id,
                data: Arc::from(&[][..]),
            }),
        });
        self.net.send(
            &mut self.rng,
            self.now,
            Source::Local,
            Outgoing::cell(to, msg),
        );
    }

    fn drain(&mut self) {
        let now = self.now;
        let mut outs = Vec::new();
        for (id, c) in self.cells.iter_mut() {
            while let Some(ev) = c.poll_event() {
                Self::log_event(&mut self.log, *id, ev);
            }
            while let Some(o) = c.poll_output() {
                if let Msg::Proxy(ProxyMsg::Downstream { entity, .. }) = &o.msg {
                    *self.log.downstream_out.entry(*entity).or_default() += 1;
                }
                outs.push((Source::Cell(*id), o));
            }
        }
        for (e, p) in self.proxies.iter_mut() {
            while let Some(o) = p.poll_output() {
                outs.push((Source::Proxy(*e), o));
            }
            while let Some((seq, _)) = p.poll_client() {
                let got = self.log.downstream_got.entry(*e).or_default();
                assert_eq!(seq, *got + 1, "{e}: downstream out of order");
                *got = seq;
            }
        }
        for (from, o) in outs {
            self.net.send(&mut self.rng, now, from, o);
        }
    }

    fn log_event(log: &mut Log, c: CellId, ev: CellEvent) {
        match ev {
            CellEvent::InputApplied { entity, seq, .. } => {
                let last = log.inputs_applied.entry(entity).or_default();
                assert_eq!(seq, *last + 1, "{entity}: input {seq} after {last}");
                *last = seq;
            }
            CellEvent::CallRun { entity, id, .. } => {
                let n = log.calls_run.entry((entity, id)).or_default();
                *n += 1;
                assert_eq!(*n, 1, "{entity}: call {id} run twice");
            }
            CellEvent::GhostAdded { entity, version } => {
                log.ghost_version.insert((c, entity), version);
            }
            CellEvent::GhostSynced { entity, version } => {
                let last = log
                    .ghost_version
                    .get_mut(&(c, entity))
                    .expect("ghost known");
                assert_eq!(
                    version,
                    *last + 1,
                    "{entity} at {c}: version {version} after {last}"
                );
                *last = version;
            }
            CellEvent::GhostResynced { entity, version } => {
                let last = log
                    .ghost_version
                    .get_mut(&(c, entity))
                    .expect("ghost known");
                assert!(version > *last, "{entity} at {c}: resync back to {version}");
                *last = version;
            }
            CellEvent::GhostRemoved { entity } => {
                log.ghost_version.remove(&(c, entity));
            }
            CellEvent::BecameGhost { entity, .. } => {
                *log.migrations.entry(entity).or_default() += 1;
                log.ghost_version.insert((c, entity), u64::MAX);
            }
            CellEvent::BecameReal { entity, .. } => {
                log.ghost_version.remove(&(c, entity));
            }
            CellEvent::OwnChange { .. }
            | CellEvent::Combat { .. }
            | CellEvent::Destroyed { .. } => {}
            CellEvent::Dropped { entity, reason } => {
                if !reason.is_benign() {
                    log.harmful.push((c, entity, reason));
                }
            }
        }
    }

    fn check_step(&mut self) {
        // A real that became a ghost starts from its own last version.
        for ((c, e), v) in self.log.ghost_version.iter_mut() {
            if *v == u64::MAX {
                *v = self.cells[c].view(*e).expect("ghost").version;
            }
        }
        for e in self.bots.keys() {
            let reals = usize::from(self.real_of(*e).is_some());
            let flying = self.net.onloads_in_flight(*e);
            assert_eq!(
                reals + flying,
                1,
                "{e}: {reals} reals, {flying} in flight at {:?}",
                self.now
            );
        }
        for c in self.cells.values() {
            c.verify();
        }
        assert!(
            self.log.harmful.is_empty(),
            "harmful drops: {:?}",
            self.log.harmful
        );
    }

    /// After a quiet phase: everything delivered, ghosts converged.
    fn check_converged(&self) {
        assert!(self.net.is_empty(), "messages still in flight");
        for (e, p) in &self.proxies {
            let applied = self.log.inputs_applied.get(e).copied().unwrap_or(0);
            assert_eq!(applied, p.next_input() - 1, "{e}: inputs lost");
            let sent = self.log.downstream_sent.get(e).copied().unwrap_or(0);
            let out = self.log.downstream_out.get(e).copied().unwrap_or(0);
            let got = self.log.downstream_got.get(e).copied().unwrap_or(0);
            assert!(out >= sent, "{e}: game code's downstream not sent");
            assert_eq!(got, out, "{e}: downstream lost");
            let r = self.real_of(*e).expect("real");
            assert_eq!(p.real_at(), r, "{e}: proxy points at the wrong cell");
            assert_eq!(
                Some(Residency::Real { epoch: p.epoch() }),
                self.cells[&r].residency(*e)
            );
        }
        for k in &self.log.calls_sent {
            assert_eq!(self.log.calls_run.get(k), Some(&1), "call {k:?} lost");
        }
        for e in self.bots.keys() {
            let r = self.real_of(*e).expect("real");
            let real = &self.cells[&r];
            let version = real.view(*e).expect("real").version;
            let haunts: BTreeSet<CellId> = real
                .haunts(*e)
                .expect("real")
                .iter()
                .map(|h| h.cell)
                .collect();
            for (id, c) in &self.cells {
                if let Some(Residency::Ghost { real_at, .. }) = c.residency(*e) {
                    assert!(haunts.contains(id), "{e}: orphan ghost at {id}");
                    assert_eq!(real_at, r, "{e}: ghost at {id} points at {real_at}");
                    assert_eq!(
                        c.view(*e).expect("ghost").version,
                        version,
                        "{e}: ghost at {id} behind"
                    );
                } else {
                    assert!(!haunts.contains(id), "{e}: haunt {id} without a ghost");
                }
            }
        }
    }
}

fn seeds() -> u64 {
    std::env::var("CELL_PROTOCOL_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(6)
}

/// How rough a random run is.
struct Storm {
    entities: u64,
    speed_max_mps: f64,
    spike: (f64, u64),
    params: CellParams,
}

fn run_random(name: &str, storm: &Storm) {
    for seed in 0..seeds() {
        let mut w = World::new(
            0xC0FFEE + seed,
            3,
            3,
            2 + (seed % 3) as u32,
            storm.params.clone(),
        );
        w.net.spike = storm.spike;
        for i in 0..storm.entities {
            let x = 20.0 + w.rng.unit() * 560.0;
            let z = 20.0 + w.rng.unit() * 560.0;
            let speed = 5.0 + w.rng.unit() * (storm.speed_max_mps - 5.0);
            w.spawn(EntityId(i), Vec3::ground(x, z), speed);
        }
        let run = std::panic::AssertUnwindSafe(|| {
            for _ in 0..400 {
                w.step(true);
            }
            for _ in 0..300 {
                w.step(false);
            }
            w.check_converged();
        });
        if let Err(e) = std::panic::catch_unwind(run) {
            eprintln!("{name}: failing seed {seed}");
            std::panic::resume_unwind(e);
        }
        let migrations: u32 = w.log.migrations.values().sum();
        let mut totals = tessera::core::cell::Counters::default();
        for c in w.cells.values() {
            let k = c.counters();
            totals.forwards += k.forwards;
            totals.resync_requests += k.resync_requests;
            totals.resyncs_sent += k.resyncs_sent;
            totals.ghosts_created += k.ghosts_created;
            totals.ghosts_deleted += k.ghosts_deleted;
            totals.ghost_create_timeouts += k.ghost_create_timeouts;
            totals.inputs_applied += k.inputs_applied;
            for r in DropReason::ALL {
                totals.drops[r.index()] += k.dropped(r);
            }
        }
        eprintln!(
            "{name} seed {seed}: {migrations} migrations, {} calls, forwards {}, ghosts +{} -{} (timeouts {}), resync asks {} sent {}, drops {:?}",
            w.log.calls_sent.len(),
            totals.forwards,
            totals.ghosts_created,
            totals.ghosts_deleted,
            totals.ghost_create_timeouts,
            totals.resync_requests,
            totals.resyncs_sent,
            totals.drops
        );
        assert!(migrations > 10, "seed {seed}: only {migrations} migrations");
        assert_eq!(w.log.onloads_checked, u64::from(migrations));
    }
}

#[test]
fn random_walkers_keep_every_invariant() {
    let storm = Storm {
        entities: 12,
        speed_max_mps: 30.0,
        spike: (0.01, 300_000),
        params: test_params(),
    };
    run_random("calm", &storm);
}

/// Fast walkers, frequent long stalls (creation timeouts, big reorders).
#[test]
fn stormy_network_keeps_every_invariant() {
    let storm = Storm {
        entities: 24,
        speed_max_mps: 80.0,
        spike: (0.05, 900_000),
        params: CellParams {
            ghost_create_timeout_ms: 700,
            reorder_buffer_max: 4,
            sync_cache_max: 8,
            ..test_params()
        },
    };
    run_random("stormy", &storm);
}

impl World {
    /// Moves `e`'s real to `pos` (the test drives it, no bot).
    fn put(&mut self, e: EntityId, pos: Vec3) {
        if let Some(c) = self.real_of(e) {
            self.cells
                .get_mut(&c)
                .expect("cell")
                .move_real(e, pos)
                .expect("real");
        }
    }
}

/// An entity pacing across a border migrates once per real crossing, never
/// while it oscillates within the migrate margin.
#[test]
fn border_walker_migrates_once_per_crossing() {
    let mut w = World::new(7, 2, 1, 2, test_params());
    let e = EntityId(1);
    w.spawn(e, Vec3::ground(150.0, 100.0), 10.0);
    let walk = |w: &mut World, from: f64, to: f64, secs: f64| {
        let steps = (secs * 1000.0 / w.step_ms as f64) as usize;
        for i in 0..=steps {
            let x = from + (to - from) * i as f64 / steps as f64;
            w.put(e, Vec3::ground(x, 100.0));
            w.step(false);
        }
    };
    let migrations = |w: &World| w.log.migrations.get(&e).copied().unwrap_or(0);
    walk(&mut w, 150.0, 205.0, 3.0);
    for _ in 0..10 {
        walk(&mut w, 205.0, 193.0, 1.0);
        walk(&mut w, 193.0, 205.0, 1.0);
    }
    assert_eq!(migrations(&w), 0, "within the margin on either side");
    walk(&mut w, 205.0, 215.0, 1.0);
    assert_eq!(migrations(&w), 1, "crossed into cell 1");
    for _ in 0..10 {
        walk(&mut w, 215.0, 193.0, 1.0);
        walk(&mut w, 193.0, 215.0, 1.0);
    }
    assert_eq!(migrations(&w), 1, "oscillating around the border");
    walk(&mut w, 215.0, 185.0, 1.0);
    for _ in 0..10 {
        walk(&mut w, 185.0, 207.0, 1.0);
        walk(&mut w, 207.0, 185.0, 1.0);
    }
    assert_eq!(migrations(&w), 2, "crossed back once");
    for _ in 0..40 {
        w.step(false);
    }
    w.check_converged();
}

fn permutations<T: Clone>(items: &[T]) -> Vec<Vec<T>> {
    if items.len() <= 1 {
        return vec![items.to_vec()];
    }
    let mut out = Vec::new();
    for i in 0..items.len() {
        let mut rest = items.to_vec();
        let first = rest.remove(i);
        for mut p in permutations(&rest) {
            p.insert(0, first.clone());
            out.push(p);
        }
    }
    out
}

/// The small ghost chain across a migration: the real at A emits v1 and v2,
/// migrates to B, B emits v3; the ghost in C gets A's `Sync v1`, `Sync v2`,
/// `SetNextReal` and B's `Sync v3` in every possible order (24, including
/// orders FIFO would forbid) and must apply 1, 2, 3 in order and end up
/// pointing at B, without asking for a resync.
#[test]
fn ghost_chain_across_migration_in_every_arrival_order() {
    let params = CellParams {
        ghost_min_lifetime_ms: 0,
        new_real_keep_ghosts_ms: 0,
        ..test_params()
    };
    let layout = GridLayout::new(2, 2, 200.0);
    let types = types();
    let mut cells: Vec<Cell> = layout
        .cells()
        .map(|c| Cell::new(c, params.clone(), types.clone()).expect("params"))
        .collect();
    let (a, b, c) = (CellId(0), CellId(1), CellId(2));
    let e = EntityId(1);
    let mut held: Vec<(CellId, CellMsg)> = Vec::new();
    let mut hold = false;
    let run = |cells: &mut Vec<Cell>, now: Time, held: &mut Vec<(CellId, CellMsg)>, hold: bool| {
        for cell in cells.iter_mut() {
            cell.tick(now, &layout);
        }
        loop {
            let mut batch = Vec::new();
            for cell in cells.iter_mut() {
                while let Some(o) = cell.poll_output() {
                    batch.push((cell.id(), o));
                }
                while cell.poll_event().is_some() {}
            }
            if batch.is_empty() {
                break;
            }
            for (from, o) in batch {
                let (Dest::Cell(to), Msg::Cell(m)) = (o.to, o.msg) else {
                    continue;
                };
                if hold && to == c {
                    held.push((from, m));
                } else {
                    cells[to.0 as usize].handle(now, Source::Cell(from), m);
                }
            }
        }
    };
    let t = Time::from_millis;
    let hp = hp(&types);
    let set_hp = |cell: &mut Cell, v: i64| {
        let real = cell.real_mut(e).expect("real");
        real.props_mut().set(hp, Value::Int(v)).expect("hp");
    };
    let spawn = avatar(&types, e, Vec3::ground(190.0, 190.0));
    cells[0].create_real(t(0), spawn, false, 0).expect("spawn");
    run(&mut cells, t(100), &mut held, hold);
    assert!(
        matches!(cells[2].residency(e), Some(Residency::Ghost { real_at, .. }) if real_at == a)
    );
    hold = true;
    set_hp(&mut cells[0], 1);
    run(&mut cells, t(110), &mut held, hold);
    set_hp(&mut cells[0], 2);
    cells[0]
        .move_real(e, Vec3::ground(215.0, 190.0))
        .expect("real");
    run(&mut cells, t(200), &mut held, hold);
    assert!(matches!(
        cells[1].residency(e),
        Some(Residency::Real { epoch: 1 })
    ));
    set_hp(&mut cells[1], 3);
    run(&mut cells, t(210), &mut held, hold);
    let kinds: Vec<String> = held
        .iter()
        .map(|(from, m)| match m {
            CellMsg::Sync { msg, .. } => format!("{from}:v{}", msg.version),
            CellMsg::SetNextReal { .. } => format!("{from}:next"),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(kinds, ["c0:v1", "c0:v2", "c0:next", "c1:v3"]);
    let orders = permutations(&held);
    assert_eq!(orders.len(), 24);
    for order in orders {
        let mut ghost = cells[2].clone();
        let now = t(220);
        for (from, m) in order.clone() {
            ghost.handle(now, Source::Cell(from), m);
        }
        let mut applied = Vec::new();
        while let Some(ev) = ghost.poll_event() {
            match ev {
                CellEvent::GhostSynced { version, .. } => applied.push(version),
                CellEvent::Dropped { reason, .. } => assert!(reason.is_benign(), "{reason:?}"),
                other => panic!("unexpected {other:?}"),
            }
        }
        let shown: Vec<String> = order.iter().map(|(f, m)| format!("{f}:{m:?}")).collect();
        assert_eq!(applied, vec![1, 2, 3], "order {shown:?}");
        let view = ghost.view(e).expect("ghost");
        assert_eq!(view.version, 3);
        assert_eq!(view.entity.props().get(hp), Some(&Value::Int(3)));
        assert_eq!(view.pos(), Vec3::ground(215.0, 190.0));
        assert_eq!(
            view.residency,
            Residency::Ghost {
                real_at: b,
                epoch: 1
            },
            "order {shown:?}"
        );
        ghost.tick(t(2_000), &layout);
        assert_eq!(ghost.counters().resync_requests, 0);
    }
}

/// A client hammering inputs while its entity circles the corner of four
/// cells (a migration every few hundred ms) on a stormy network: every input
/// is applied exactly once, in order, and every downstream message reaches
/// the client in order.
#[test]
fn inputs_survive_many_migrations_exactly_once_in_order() {
    for seed in 0..seeds() {
        let mut w = World::new(0xBEEF + seed, 2, 2, 4, test_params());
        w.net.spike = (0.05, 400_000);
        let e = EntityId(1);
        let center = Vec3::ground(200.0, 200.0);
        w.spawn(e, Vec3::ground(230.0, 200.0), 0.0);
        for i in 0..600u32 {
            let angle = f64::from(i) * 0.05;
            let pos = Vec3::ground(center.x + 30.0 * angle.cos(), center.z + 30.0 * angle.sin());
            w.put(e, pos);
            let p = w.proxies.get_mut(&e).expect("proxy");
            p.send_input(w.now, (&[0u8][..]).into());
            if let Some(c) = w.real_of(e) {
                let cell = w.cells.get_mut(&c).expect("cell");
                let n = w.log.downstream_sent.entry(e).or_default();
                *n += 1;
                cell.send_to_client(e, vec![1u8]).expect("downstream");
            }
            w.step(false);
        }
        for _ in 0..200 {
            w.step(false);
        }
        w.check_converged();
        let migrations = w.log.migrations.get(&e).copied().unwrap_or(0);
        assert!(
            migrations >= 15,
            "seed {seed}: only {migrations} migrations"
        );
        assert_eq!(w.log.inputs_applied.get(&e), Some(&600));
    }
}

/// Rough cost of one cell's tick with many moving reals (run with
/// `cargo test --release --test cell_protocol tick_cost -- --ignored --nocapture`).
#[test]
#[ignore = "measurement, not a check"]
fn tick_cost() {
    let types = types();
    let layout = GridLayout::new(3, 3, 200.0);
    let mut cell = Cell::new(CellId(4), test_params(), types.clone()).expect("cell");
    let mut rng = Rng(1);
    let n = 2_000u64;
    let pos = |rng: &mut Rng| Vec3::ground(200.0 + rng.unit() * 200.0, 200.0 + rng.unit() * 200.0);
    for i in 0..n {
        let p = pos(&mut rng);
        cell.create_real(Time::ZERO, avatar(&types, EntityId(i), p), false, 0)
            .expect("spawn");
    }
    let (mut ticks, mut checks) = (Duration::ZERO, Duration::ZERO);
    let (mut out, mut nt, mut nc) = (0usize, 0u32, 0u32);
    for step in 1..=200u64 {
        let now = Time::from_millis(step * 50);
        for i in 0..n {
            let e = EntityId(i);
            if let Ok(real) = cell.real_mut(e) {
                let p = real.core().pos;
                let q = Vec3::ground(p.x + rng.unit() - 0.5, p.z + rng.unit() - 0.5);
                real.set_movement(q, 0.0);
            }
        }
        let check = now >= cell.next_check();
        let t = std::time::Instant::now();
        cell.tick(now, &layout);
        let dt = t.elapsed();
        if check {
            checks += dt;
            nc += 1;
        } else {
            ticks += dt;
            nt += 1;
        }
        while cell.poll_output().is_some() {
            out += 1;
        }
        while cell.poll_event().is_some() {}
    }
    eprintln!(
        "{n} moving reals: tick {:?}, tick with check {:?}, {} messages out per tick",
        ticks / nt,
        checks / nc,
        out / 200
    );
}
