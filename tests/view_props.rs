//! Property tests of the observer against a ground-truth world.
//!
//! A world of Avatar reals changes at random (moves, hp, buffs, ghost-only
//! and own-only properties); every change set goes to two "cells", each
//! holding a ghost copy of every entity behind a reorder buffer, with its own
//! random latency, reordering and duplicates; copies resync from the real
//! when a gap outlives its timeout; caches are small and expire. One
//! observer (its real is the owner) lives in one cell at a time and migrates
//! between them at random (blob out, blob in, `handle_view`). Its batches
//! feed a [`ClientView`]:
//!
//! - after every tick the client view has **zero violations**;
//! - after the network settles, the client shows exactly the entities in
//!   range, each equal to the truth filtered to `OtherClients` (position,
//!   properties, version), and its own entity equals the truth filtered to
//!   `OwnClient`; handles never changed across migrations;
//! - levels of detail (`hp` reaches 30 m, `buffs` 15 m): a brute-force
//!   distance from the owner's real to each entity's decides which detail
//!   properties must equal the truth (within reach); beyond reach the
//!   client may hold an older value. Positions, moves and both properties
//!   change at random, so entities cross the reaches both ways.
//!
//! Half the cases feed the observer sloppily (reordered, duplicated and
//! dropped messages, as a buggy cell might): it must heal from the caches.
//!
//! A second group checks that a broken observer is caught: a skipped
//! version, and a migration that forgets the handle map.
//!
//! Case counts: `PROPTEST_CASES` (default 48).

use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use tessera::core::aoi::EventKind;
use tessera::core::entity::*;
use tessera::core::geom::Vec3;
use tessera::core::ids::EntityId;
use tessera::core::time::Time;
use tessera::core::view::*;

const OWNER: EntityId = EntityId(1);
const RADIUS_M: f64 = 30.0;
const TICK_MS: u64 = 50;
const SETTLE_TICKS: usize = 60;
/// How far inside a detail property's reach the client must hold its
/// current value (the observer measures from centimetre-rounded positions).
const DETAIL_MARGIN_M: f64 = 0.05;

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(48);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

#[derive(Clone, Debug)]
enum Change {
    Move(f64),
    Hp(i64),
    Faction(u64),
    BuffPush(u64, u64),
    BuffPop,
    Inventory(i64, u64),
}

#[derive(Clone, Debug)]
struct TickPlan {
    changes: Vec<(usize, Change)>,
    migrate: bool,
    refresh: bool,
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        3 => (-70.0f64..70.0).prop_map(Change::Move),
        2 => (-5i64..100).prop_map(Change::Hp),
        1 => (0u64..3).prop_map(Change::Faction),
        1 => (0u64..5, 0u64..1000).prop_map(|(i, e)| Change::BuffPush(i, e)),
        1 => Just(Change::BuffPop),
        1 => (0i64..4, 0u64..9).prop_map(|(k, v)| Change::Inventory(k, v)),
    ]
}

fn plan(entities: usize) -> impl Strategy<Value = TickPlan> {
    (
        prop::collection::vec((0..entities, change()), 0..4),
        prop::bool::weighted(0.08),
        prop::bool::weighted(0.2),
    )
        .prop_map(|(changes, migrate, refresh)| TickPlan {
            changes,
            migrate,
            refresh,
        })
}

/// A tiny deterministic generator for network randomness.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// One cell: a ghost copy (with reorder buffer) of every entity, and the
/// messages in flight to it.
struct Cell {
    copies: BTreeMap<EntityId, LocalCopy>,
    reorder: BTreeMap<EntityId, ReorderBuffer>,
    inflight: Vec<(Time, SyncMsg)>,
    lag_ticks_max: u64,
}

struct World {
    reg: Arc<TypeRegistry>,
    reals: BTreeMap<EntityId, (Entity, SyncEmitter)>,
    cells: [Cell; 2],
    now: Time,
    rng: Rng,
}

fn apply_change(e: &mut Entity, c: &Change) {
    let ty = Arc::clone(e.props().entity_type());
    let idx = |n: &str| ty.prop_index(n).expect("avatar prop");
    let p = e.props_mut();
    let r = match *c {
        Change::Move(x) => {
            let z = e.core().pos.z;
            e.set_movement(Vec3 { x, y: 0.0, z }, (x / 10.0) as f32);
            Ok(())
        }
        Change::Hp(v) => p.set(idx("hp"), Value::Int(v)),
        Change::Faction(v) => p.set(idx("faction"), Value::UInt(v)),
        Change::BuffPush(id, exp) => p.array_op(
            idx("buffs"),
            ArrayOp::Push(Value::Record(vec![
                Value::UInt(id),
                Value::Int(1),
                Value::UInt(exp),
            ])),
        ),
        Change::BuffPop => p.array_op(idx("buffs"), ArrayOp::Pop),
        Change::Inventory(k, v) => p.map_op(
            idx("inventory"),
            MapOp::Set {
                key: Key::Int(k),
                value: Value::UInt(v),
            },
        ),
    };
    let _ = r; // a refused op (pop of an empty array) changes nothing
}

impl World {
    fn new(n: usize, seed: u64, cache: SyncCacheParams, lags: [u64; 2]) -> World {
        let reg = Arc::new(TypeRegistry::with_builtins());
        let ty = reg.get(AVATAR).expect("avatar").clone();
        let mut reals = BTreeMap::new();
        for i in 0..=n as u64 {
            let id = EntityId(i + 1);
            let x = if id == OWNER {
                0.0
            } else {
                i as f64 * 9.0 - 20.0
            };
            let e = Entity::new_real(id, ty.clone(), Vec3 { x, y: 0.0, z: 1.0 }, 0.0);
            reals.insert(id, (e, SyncEmitter::new()));
        }
        let mk = |lag: u64| {
            let mut c = Cell {
                copies: BTreeMap::new(),
                reorder: BTreeMap::new(),
                inflight: Vec::new(),
                lag_ticks_max: lag,
            };
            for (&id, (e, em)) in &reals {
                if id == OWNER {
                    continue;
                }
                let mut g = Entity::new_replica(id, ty.clone(), Audience::Ghost);
                let mut snap = Vec::new();
                e.encode_snapshot(Audience::Ghost, &mut snap);
                g.apply_payload(SyncKind::Snapshot, &snap).expect("snap");
                c.copies.insert(id, LocalCopy::new(g, em.version(), cache));
                c.reorder
                    .insert(id, ReorderBuffer::new(ReorderParams::default(), 0));
            }
            c
        };
        World {
            reg,
            cells: [mk(lags[0]), mk(lags[1])],
            reals,
            now: Time::ZERO,
            rng: Rng(seed | 1),
        }
    }

    /// Flushes every real; sends each change set to both cells (random
    /// latency, sometimes twice). Returns the owner's own change.
    fn emit(&mut self) -> Option<(u64, SyncKind, Vec<u8>)> {
        let mut own = None;
        for (&id, (e, em)) in &mut self.reals {
            let Some(cs) = em.flush(self.now, e) else {
                continue;
            };
            if id == OWNER {
                own = Some((cs.msg.version, cs.msg.kind, cs.own.to_vec()));
                continue;
            }
            for c in &mut self.cells {
                let copies = 1 + usize::from(self.rng.below(8) == 0);
                for _ in 0..copies {
                    let lag = self.rng.below(c.lag_ticks_max + 1) * TICK_MS;
                    let at = self.now + Duration::from_millis(lag);
                    c.inflight.push((at, cs.msg.clone()));
                }
            }
        }
        own
    }
}

impl World {
    /// Delivers what is due to cell `ci`'s copies (in arrival order through
    /// each copy's reorder buffer), answers due resync requests with a fresh
    /// snapshot, and feeds every released message to `obs` if it lives here.
    fn deliver(&mut self, ci: usize, obs: Option<&mut Observer>, chaos: bool) {
        let now = self.now;
        let cell = &mut self.cells[ci];
        let (due, later): (Vec<_>, Vec<_>) =
            cell.inflight.drain(..).partition(|(at, _)| *at <= now);
        cell.inflight = later;
        let mut feed = Vec::new();
        for (_, m) in due {
            let id = m.entity;
            cell.reorder.get_mut(&id).expect("rb").handle_msg(now, m);
            release(cell, id, now, &mut feed);
        }
        let ids: Vec<EntityId> = cell.reorder.keys().copied().collect();
        for id in ids {
            if cell.reorder[&id].has_gap() {
                if let Some(_req) = cell.reorder.get_mut(&id).expect("rb").poll_resync(now) {
                    let (e, em) = self.reals.get_mut(&id).expect("real");
                    let snap = em.ghost_snapshot(now, e);
                    cell.reorder.get_mut(&id).expect("rb").handle_msg(now, snap);
                    release(cell, id, now, &mut feed);
                }
            }
            cell.copies.get_mut(&id).expect("copy").cache.expire(now);
        }
        let Some(o) = obs else {
            return;
        };
        if chaos {
            scramble(&mut self.rng, &mut feed);
        }
        for m in &feed {
            if o.sees(m.entity) {
                o.handle_sync(
                    &cell.copies,
                    m.entity,
                    m.version,
                    m.kind,
                    m.others_payload(),
                );
            }
        }
    }

    fn owner_copy(&self) -> LocalCopy {
        let (e, em) = &self.reals[&OWNER];
        LocalCopy::new(e.clone(), em.version(), SyncCacheParams::default())
    }

    /// The interest set of the observer in cell `ci` (from its copies).
    fn interest(&self, ci: usize) -> Vec<EntityId> {
        let o = self.reals[&OWNER].0.core().pos;
        self.cells[ci]
            .copies
            .iter()
            .filter(|(&id, c)| id != OWNER && in_range(o, c.entity.core().pos))
            .map(|(&id, _)| id)
            .collect()
    }
}

fn in_range(o: Vec3, p: Vec3) -> bool {
    tessera::core::aoi::dist2(o, p) <= RADIUS_M * RADIUS_M
}

/// Applies what `id`'s reorder buffer releases to the copy and its cache;
/// the released messages are appended to `feed` (for the observer).
fn release(cell: &mut Cell, id: EntityId, now: Time, feed: &mut Vec<SyncMsg>) {
    while let Some(m) = cell.reorder.get_mut(&id).expect("rb").poll_ready() {
        let c = cell.copies.get_mut(&id).expect("copy");
        c.entity
            .apply_payload(m.kind, m.ghost_payload())
            .expect("ghost applies");
        c.version = m.version;
        c.cache.push(now, m.clone());
        feed.push(m);
    }
}

/// A sloppy cell: the observer's feed is reordered, some messages are fed
/// twice and some not at all (the observer must heal from the caches).
fn scramble(rng: &mut Rng, feed: &mut Vec<SyncMsg>) {
    for i in 1..feed.len() {
        if rng.below(3) == 0 {
            feed.swap(i - 1, i);
        }
    }
    let mut out = Vec::with_capacity(feed.len());
    for m in feed.drain(..) {
        match rng.below(12) {
            0 => {}
            1 => {
                out.push(m.clone());
                out.push(m);
            }
            _ => out.push(m),
        }
    }
    *feed = out;
}

/// The observer, where it lives, and its client.
struct Session {
    obs: Observer,
    host: usize,
    prev: Vec<EntityId>,
    cv: ClientView,
    handles: BTreeMap<EntityId, Handle>,
    /// Feed the observer sloppily (see [`scramble`]).
    chaos: bool,
}

impl Session {
    fn new(w: &World) -> Session {
        Session {
            obs: Observer::new(OWNER, ObserverParams::default()),
            host: 0,
            prev: Vec::new(),
            cv: ClientView::new(OWNER, w.reg.clone(), ClientViewParams::default()),
            handles: BTreeMap::new(),
            chaos: false,
        }
    }

    /// One tick of the cell hosting the observer, in the documented order.
    /// `fresh_after_migrate` simulates a broken observer that forgets its
    /// handle map when it migrates.
    fn tick(&mut self, w: &mut World, p: &TickPlan, fresh_after_migrate: bool) -> Vec<u8> {
        w.now = w.now + Duration::from_millis(TICK_MS);
        for (i, c) in &p.changes {
            let id = EntityId(*i as u64 + 1);
            apply_change(&mut w.reals.get_mut(&id).expect("real").0, c);
        }
        let own = w.emit();
        let oc = w.owner_copy();
        w.cells[self.host].copies.insert(OWNER, oc);
        if let Some((v, kind, payload)) = own {
            self.obs.handle_own(v, kind, &payload);
        }
        for ci in 0..2 {
            let here = (ci == self.host).then_some(&mut self.obs);
            w.deliver(ci, here, self.chaos);
        }
        if p.migrate {
            self.migrate(w, fresh_after_migrate);
        } else {
            let now = w.interest(self.host);
            let host = &w.cells[self.host].copies;
            for e in self.prev.iter().filter(|e| now.binary_search(e).is_err()) {
                self.obs.handle_aoi(host, *e, EventKind::Leave);
            }
            for e in now.iter().filter(|e| self.prev.binary_search(e).is_err()) {
                self.obs.handle_aoi(host, *e, EventKind::Enter);
            }
            self.prev = now;
        }
        let host = &w.cells[self.host].copies;
        if p.refresh {
            self.obs.refresh(host);
        }
        let batch = self.obs.flush(host).to_vec();
        self.cv.handle_batch(&batch);
        batch
    }

    fn migrate(&mut self, w: &mut World, fresh: bool) {
        // The last batch at the old cell goes out before the blob is taken.
        let last = self.obs.flush(&w.cells[self.host].copies).to_vec();
        self.cv.handle_batch(&last);
        let mut blob = Vec::new();
        self.obs.encode_blob(&mut blob);
        w.cells[self.host].copies.remove(&OWNER);
        self.host = 1 - self.host;
        let oc = w.owner_copy();
        w.cells[self.host].copies.insert(OWNER, oc);
        self.obs = if fresh {
            Observer::new(OWNER, ObserverParams::default())
        } else {
            Observer::decode_blob(OWNER, ObserverParams::default(), &blob).expect("blob")
        };
        let interest = w.interest(self.host);
        self.obs.handle_view(&w.cells[self.host].copies, &interest);
        self.prev = interest;
    }

    /// Handles never change while an entity stays shown.
    fn check_handles(&mut self) {
        let shown: BTreeMap<EntityId, Handle> = self
            .cv
            .shown()
            .iter()
            .map(|(&h, s)| (s.entity, h))
            .collect();
        for (e, h) in &shown {
            if let Some(old) = self.handles.get(e) {
                assert_eq!(old, h, "{e} changed handle while shown");
            }
            assert_eq!(self.obs.handle_of(*e), Some(*h), "server and client agree");
        }
        self.handles = shown;
    }

    /// After the network settled: the client equals the truth.
    fn check_converged(&self, w: &World) {
        let (owner, owner_em) = &w.reals[&OWNER];
        let o = owner.core().pos;
        let mut expected = BTreeSet::new();
        for (&id, (e, em)) in &w.reals {
            if id == OWNER || !in_range(o, e.core().pos) {
                continue;
            }
            expected.insert(id);
            let s = self.cv.find(id).unwrap_or_else(|| panic!("{id} not shown"));
            assert_eq!(s.version, em.version(), "{id} version");
            // The wire carries centimetres and 256ths of a turn.
            let (p, q) = (s.replica.core().pos, e.core().pos);
            let half = POSITION_RESOLUTION_M / 2.0 + 1e-9;
            assert!(
                (p.x - q.x).abs() <= half && (p.y - q.y).abs() <= half && (p.z - q.z).abs() <= half,
                "{id} pos {p:?} vs {q:?}"
            );
            let turn = std::f32::consts::TAU;
            let d = (s.replica.core().yaw - e.core().yaw).rem_euclid(turn);
            assert!(d.min(turn - d) <= turn / 512.0 + 1e-4, "{id} yaw");
            let dist = o.dist_xz(e.core().pos);
            let budget = BudgetParams::default();
            let truth = e.props().filtered(Audience::OtherClients);
            for ((p, got), want) in (e.props().entity_type().props().iter())
                .zip(s.replica.props().values())
                .zip(&truth)
            {
                let within = p
                    .detail
                    .is_none_or(|d| dist <= budget.reach_m(d) - DETAIL_MARGIN_M);
                if within {
                    assert_eq!(got, want, "{id} {} at {dist:.2} m", p.name);
                }
            }
        }
        let shown: BTreeSet<EntityId> = self.cv.shown().values().map(|s| s.entity).collect();
        assert_eq!(shown, expected, "shown set");
        let own = self.cv.own().expect("own entity");
        assert_eq!(own.version, owner_em.version());
        assert_eq!(
            own.replica.props().values(),
            &owner.props().filtered(Audience::OwnClient)[..]
        );
    }
}

/// A tick without changes; the pull (`refresh`) heals what a sloppy feed
/// dropped last.
fn quiet() -> TickPlan {
    TickPlan {
        changes: Vec::new(),
        migrate: false,
        refresh: true,
    }
}

/// One generated scenario.
#[derive(Clone, Debug)]
struct Case {
    n: usize,
    seed: u64,
    cache: SyncCacheParams,
    lags: [u64; 2],
    chaos: bool,
    plans: Vec<TickPlan>,
}

fn case() -> impl Strategy<Value = Case> {
    (
        2usize..7,
        any::<u64>(),
        (1usize..10, 50u64..2000),
        (0u64..3, 0u64..14),
        any::<bool>(),
        prop::collection::vec(plan(7), 10..120),
    )
        .prop_map(|(n, seed, (msgs, age), lags, chaos, plans)| Case {
            n,
            seed,
            cache: SyncCacheParams {
                cache_msgs_max: msgs,
                cache_age_max_ms: age,
                ..Default::default()
            },
            lags: [lags.0, lags.1],
            chaos,
            plans,
        })
}

/// Runs one scenario, checking the client after every tick; returns the
/// observer's counters summed over its migrations.
fn run(c: &Case) -> Result<[u64; 7], TestCaseError> {
    let mut w = World::new(c.n, c.seed, c.cache, c.lags);
    let mut s = Session::new(&w);
    s.chaos = c.chaos;
    let mut total = [0u64; 7];
    let mut add = |st: &ObserverStats, migrated: bool| {
        total[0] += st.filled;
        total[1] += st.resyncs;
        total[2] += st.held;
        total[3] += st.stale;
        total[4] += u64::from(migrated);
        total[5] += st.detail_cut;
        total[6] += st.details;
    };
    for p in &c.plans {
        let mut p = p.clone();
        p.changes.retain(|(i, _)| *i <= c.n);
        if p.migrate {
            add(s.obs.stats(), true);
        }
        s.tick(&mut w, &p, false);
        prop_assert_eq!(s.cv.violations(), &[][..]);
        s.obs.verify();
        s.check_handles();
    }
    for _ in 0..SETTLE_TICKS {
        s.tick(&mut w, &quiet(), false);
        prop_assert_eq!(s.cv.violations(), &[][..]);
        s.check_handles();
    }
    s.check_converged(&w);
    add(s.obs.stats(), false);
    Ok(total)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn the_client_sees_a_consistent_world_and_converges_to_the_truth(c in case()) {
        run(&c)?;
    }
}

/// The scenarios above do exercise every healing path (so the property is
/// not vacuous): over a fixed set of generated cases, gaps are filled from
/// caches, resyncs happen, lagging copies are held and observers migrate.
#[test]
fn the_scenarios_cover_fill_resync_hold_and_migration() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let mut total = [0u64; 7];
    for _ in 0..24 {
        let c = case().new_tree(&mut runner).expect("case").current();
        let t = run(&c).expect("clean run");
        for (a, b) in total.iter_mut().zip(t) {
            *a += b;
        }
    }
    eprintln!(
        "coverage [filled, resyncs, held, stale, migrations, detail cut, catch-ups] = {total:?}"
    );
    let [filled, resyncs, held, stale, migrations, cut, caught_up] = total;
    assert!(
        filled > 0 && resyncs > 0 && held > 0 && stale > 0 && migrations > 0,
        "{total:?}"
    );
    assert!(cut > 0 && caught_up > 0, "levels of detail: {total:?}");
}

/// A setup where entity 2 is in range and moves every tick.
fn mover() -> (World, Session) {
    let cache = SyncCacheParams::default();
    let w = World::new(2, 7, cache, [0, 0]);
    let s = Session::new(&w);
    (w, s)
}

fn moving(x: f64) -> TickPlan {
    TickPlan {
        changes: vec![(1, Change::Move(x))],
        migrate: false,
        refresh: false,
    }
}

fn hp(v: i64) -> TickPlan {
    TickPlan {
        changes: vec![(1, Change::Hp(v))],
        migrate: false,
        refresh: false,
    }
}

#[test]
fn a_skipped_version_is_caught_by_the_client_view() {
    let (mut w, mut s) = mover();
    for i in 0..3 {
        s.tick(&mut w, &moving(f64::from(i)), false);
    }
    assert_eq!(s.cv.violation_count(), 0);
    // A broken observer: this tick's property change of entity 2 is lost.
    let mut cv = s.cv.clone();
    let batch = s.tick(&mut w, &hp(50), false);
    let mut kept = Vec::new();
    for ev in BatchReader::new(&batch) {
        let ev = ev.expect("decodes");
        if !matches!(
            ev,
            ClientEvent::Props { .. } | ClientEvent::MoveProps { .. }
        ) {
            encode_event(&mut kept, &ev);
        }
    }
    assert_ne!(
        kept.len(),
        batch.len(),
        "there was a property change to drop"
    );
    let next = s.tick(&mut w, &hp(40), false);
    assert_eq!(s.cv.violation_count(), 0, "the real observer is fine");
    // Replay: the client before the tampered tick, fed the tampered batch.
    let mut replay = cv.clone();
    replay.handle_batch(&kept);
    replay.handle_batch(&next);
    assert!(matches!(
        replay.violations().first().map(|v| &v.rule),
        Some(Rule::VersionGap { .. })
    ));
    cv.handle_batch(&batch);
    cv.handle_batch(&next);
    assert_eq!(cv.violation_count(), 0);
}

#[test]
fn a_migration_that_forgets_the_handle_map_is_caught() {
    let (mut w, mut s) = mover();
    for i in 0..3 {
        s.tick(&mut w, &moving(f64::from(i)), false);
    }
    let mut p = moving(4.0);
    p.migrate = true;
    s.tick(&mut w, &p, true);
    assert!(s.cv.violation_count() > 0, "re-entered under a new handle");
    let rule = &s.cv.violations()[0].rule;
    assert!(
        matches!(rule, Rule::EntityTwice { .. } | Rule::DoubleEnter),
        "{rule:?}"
    );
}

#[test]
fn the_same_migration_with_the_blob_is_clean() {
    let (mut w, mut s) = mover();
    for i in 0..3 {
        s.tick(&mut w, &moving(f64::from(i)), false);
    }
    let mut p = moving(4.0);
    p.migrate = true;
    s.tick(&mut w, &p, false);
    for _ in 0..SETTLE_TICKS {
        s.tick(&mut w, &quiet(), false);
    }
    assert_eq!(s.cv.violations(), &[]);
    s.check_converged(&w);
}

/// A lost movement breaks no client rule (coalesced movements may skip
/// versions) but is caught against the truth: the client's position is off
/// by the lost delta.
#[test]
fn a_lost_movement_is_caught_against_the_truth() {
    let (mut w, mut s) = mover();
    for i in 0..3 {
        s.tick(&mut w, &moving(f64::from(i)), false);
    }
    let mut cv = s.cv.clone();
    let batch = s.tick(&mut w, &moving(5.0), false);
    let mut kept = Vec::new();
    for ev in BatchReader::new(&batch) {
        let ev = ev.expect("decodes");
        if !matches!(ev, ClientEvent::Move { .. }) {
            encode_event(&mut kept, &ev);
        }
    }
    assert_ne!(kept.len(), batch.len(), "there was a move to drop");
    let next = s.tick(&mut w, &moving(6.0), false);
    cv.handle_batch(&kept);
    cv.handle_batch(&next);
    assert_eq!(cv.violation_count(), 0, "no rule can see it");
    let (real, _) = &w.reals[&EntityId(2)];
    let shown = cv.find(EntityId(2)).expect("shown").replica.core().pos;
    assert!(
        shown.dist_xz(real.core().pos) > 1.0,
        "the client is off by the lost 3 m: {shown:?}"
    );
}
