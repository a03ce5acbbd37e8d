//! Combat across cells: hits resolve once, hp syncs out, feedback follows a
//! migrating attacker, timeouts clean up both sides.
//!
//! A small harness stands in for the cells: each entity's real (entity,
//! emitter, combat state) lives in one of two cells; calls are routed to the
//! addressee's real wherever it is when they arrive (forwarding), after a
//! latency; a migration carries the real's state (`Combat::encode`).
//! A property test runs random fights with migrations and random latency
//! (case count: `PROPTEST_CASES`, default 64).

use proptest::prelude::*;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tessera::core::combat::*;
use tessera::core::entity::*;
use tessera::core::geom::Vec3;
use tessera::core::ids::EntityId;
use tessera::core::time::Time;

const TICK_MS: u64 = 50;

struct Real {
    entity: Entity,
    emitter: SyncEmitter,
    combat: Combat,
    cell: usize,
}

struct Arena {
    params: CombatParams,
    reals: BTreeMap<EntityId, Real>,
    /// A ghost of every entity (one shared "neighbour" view), fed by syncs.
    ghosts: BTreeMap<EntityId, Entity>,
    inflight: Vec<(Time, CombatOutput)>,
    now: Time,
    events: Vec<(EntityId, CombatEvent)>,
    latency_ms: u64,
    dropping: bool,
}

fn hp(e: &Entity) -> i64 {
    let i = e.props().entity_type().prop_index("hp").expect("hp");
    match e.props().get(i) {
        Some(Value::Int(v)) => *v,
        v => panic!("hp {v:?}"),
    }
}

impl Arena {
    fn new(params: CombatParams, specs: &[(u64, f64, u64, i64)]) -> Arena {
        let reg = TypeRegistry::with_builtins();
        let ty: Arc<EntityType> = reg.get(AVATAR).expect("avatar").clone();
        let mut reals = BTreeMap::new();
        let mut ghosts = BTreeMap::new();
        for (i, &(id, x, faction, hp0)) in specs.iter().enumerate() {
            let id = EntityId(id);
            let mut e = Entity::new_real(id, ty.clone(), Vec3 { x, y: 0.0, z: 0.0 }, 0.0);
            let f = ty.prop_index("faction").expect("faction");
            let h = ty.prop_index("hp").expect("hp");
            e.props_mut().set(f, Value::UInt(faction)).expect("set");
            e.props_mut().set(h, Value::Int(hp0)).expect("set");
            let mut em = SyncEmitter::new();
            let _ = em.flush(Time::ZERO, &mut e);
            let snap = em.ghost_snapshot(Time::ZERO, &e);
            let mut g = Entity::new_replica(id, ty.clone(), Audience::Ghost);
            g.apply_payload(snap.kind, snap.ghost_payload())
                .expect("snap");
            ghosts.insert(id, g);
            let combat = Combat::new(id, params);
            reals.insert(
                id,
                Real {
                    entity: e,
                    emitter: em,
                    combat,
                    cell: i % 2,
                },
            );
        }
        Arena {
            params,
            reals,
            ghosts,
            inflight: Vec::new(),
            now: Time::from_millis(1000),
            events: Vec::new(),
            latency_ms: TICK_MS,
            dropping: false,
        }
    }

    /// The attacker's real hits `target`, seen through its ghost.
    fn try_hit(
        &mut self,
        attacker: EntityId,
        target: EntityId,
        dmg: i64,
    ) -> Result<u64, HitRefused> {
        let now = self.now;
        let ghost = self.ghosts.get(&target);
        let r = self.reals.get_mut(&attacker).expect("attacker");
        r.combat.try_hit(now, &r.entity, ghost, true, dmg)
    }

    /// Moves `id`'s real to the other cell, carrying its combat state.
    fn migrate(&mut self, id: EntityId) {
        self.drain_one(id);
        let r = self.reals.get_mut(&id).expect("real");
        let mut state = Vec::new();
        r.combat.encode(&mut state);
        r.combat = Combat::decode(id, self.params, &state).expect("state");
        r.cell = 1 - r.cell;
    }

    fn drain_one(&mut self, id: EntityId) {
        let at = self.now + Duration::from_millis(self.latency_ms);
        let r = self.reals.get_mut(&id).expect("real");
        while let Some(o) = r.combat.poll_output() {
            if !self.dropping {
                self.inflight.push((at, o));
            }
        }
        while let Some(e) = r.combat.poll_event() {
            self.events.push((id, e));
        }
    }

    /// One tick: deliver due calls to the addressee's real (wherever it is
    /// now), run combat timers, flush changes to the ghosts.
    fn tick(&mut self) {
        self.now = self.now + Duration::from_millis(TICK_MS);
        let now = self.now;
        let (due, later): (Vec<_>, Vec<_>) =
            self.inflight.drain(..).partition(|(at, _)| *at <= now);
        self.inflight = later;
        for (_, o) in due {
            let r = self.reals.get_mut(&o.to).expect("addressee");
            r.combat
                .handle_call(now, &mut r.entity, &o.call)
                .expect("valid call");
        }
        let ids: Vec<EntityId> = self.reals.keys().copied().collect();
        for id in ids {
            let r = self.reals.get_mut(&id).expect("real");
            r.combat.tick(now);
            if let Some(cs) = r.emitter.flush(now, &mut r.entity) {
                let g = self.ghosts.get_mut(&id).expect("ghost");
                g.apply_payload(cs.msg.kind, cs.msg.ghost_payload())
                    .expect("ghost applies");
            }
            self.drain_one(id);
        }
    }

    fn run_ms(&mut self, ms: u64) {
        for _ in 0..ms / TICK_MS {
            self.tick();
        }
    }

    fn events_of(&self, id: EntityId) -> Vec<CombatEvent> {
        self.events
            .iter()
            .filter(|(e, _)| *e == id)
            .map(|(_, ev)| *ev)
            .collect()
    }
}

const A: EntityId = EntityId(1);
const T: EntityId = EntityId(2);

fn duel() -> Arena {
    Arena::new(
        CombatParams::default(),
        &[(1, 0.0, 1, 100), (2, 4.0, 2, 100)],
    )
}

#[test]
fn a_hit_resolves_once_and_hp_syncs_to_the_ghosts() {
    let mut a = duel();
    let seq = a.try_hit(A, T, 30).expect("hit");
    a.run_ms(400);
    assert_eq!(hp(&a.reals[&T].entity), 100, "not before hit_delay_ms");
    // Deliver the do_hit twice (a duplicated call): applied once.
    a.run_ms(100);
    let dup = a
        .inflight
        .iter()
        .find(|(_, o)| o.to == T)
        .cloned()
        .expect("in flight");
    a.inflight.push(dup);
    a.run_ms(200);
    assert_eq!(hp(&a.reals[&T].entity), 70);
    assert_eq!(hp(&a.ghosts[&T]), 70, "hp synced out to the ghost");
    let t_events = a.events_of(T);
    assert_eq!(
        t_events,
        vec![
            CombatEvent::Damaged {
                attacker: A,
                seq,
                dealt: 30,
                killed: false
            },
            CombatEvent::DuplicateHit { attacker: A, seq },
        ]
    );
    assert_eq!(
        a.events_of(A),
        vec![CombatEvent::HitLanded {
            seq,
            target: T,
            dealt: 30,
            killed: false
        }]
    );
    assert_eq!(a.reals[&A].combat.pending(), 0);
}

#[test]
fn feedback_reaches_the_attacker_after_it_migrated() {
    let mut a = duel();
    a.latency_ms = 300;
    let seq = a.try_hit(A, T, 100).expect("hit");
    a.run_ms(600); // do_hit sent, not yet answered
    assert_eq!(a.reals[&A].combat.pending(), 1);
    let before = a.reals[&A].cell;
    a.migrate(A);
    assert_ne!(a.reals[&A].cell, before);
    a.run_ms(1000);
    assert_eq!(
        a.events_of(A),
        vec![CombatEvent::HitLanded {
            seq,
            target: T,
            dealt: 100,
            killed: true
        }]
    );
    assert_eq!(hp(&a.ghosts[&T]), 0);
    // A dead target cannot be hit (checked on its ghost).
    assert_eq!(a.try_hit(A, T, 1), Err(HitRefused::Dead));
}

#[test]
fn unanswered_hits_time_out_and_tables_empty() {
    let params = CombatParams {
        attack_gap_ms: 0,
        pending_hits_max: 3,
        ..Default::default()
    };
    let mut a = Arena::new(params, &[(1, 0.0, 1, 100), (2, 4.0, 2, 100)]);
    a.dropping = true; // every call is lost
    for _ in 0..3 {
        a.try_hit(A, T, 1).expect("room");
    }
    assert_eq!(a.try_hit(A, T, 1), Err(HitRefused::TooManyPending));
    a.run_ms(params.hit_timeout_ms + TICK_MS);
    assert_eq!(a.reals[&A].combat.pending(), 0);
    let expired = a
        .events_of(A)
        .iter()
        .filter(|e| matches!(e, CombatEvent::HitExpired { target: T, .. }))
        .count();
    assert_eq!(expired, 3);
    assert_eq!(hp(&a.reals[&T].entity), 100);
    // The target side forgets resolved hits after the timeout too.
    a.dropping = false;
    a.try_hit(A, T, 1).expect("room again");
    a.run_ms(1000);
    assert_eq!(a.reals[&T].combat.resolved(), 1);
    a.run_ms(params.hit_timeout_ms);
    assert_eq!(a.reals[&T].combat.resolved(), 0);
    assert_eq!(a.reals[&T].combat.poll_timeout(), None);
}

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(64);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

#[derive(Clone, Debug)]
enum Step {
    Hit(u64, u64, i64),
    Migrate(u64),
    Wait,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (1u64..5, 1u64..5, 0i64..40).prop_map(|(a, t, d)| Step::Hit(a, t, d)),
        1 => (1u64..5).prop_map(Step::Migrate),
        2 => Just(Step::Wait),
    ]
}

proptest! {
    #![proptest_config(config())]

    /// Every accepted hit ends exactly once at its attacker (landed or
    /// expired), is applied at most once at its target, and the hp lost by
    /// each target is the damage its Damaged events report.
    #[test]
    fn every_hit_ends_once_and_hp_adds_up(
        steps in prop::collection::vec(step(), 1..80),
        latency_ticks in 1u64..30,
    ) {
        let specs = [(1, 0.0, 1, 200), (2, 3.0, 2, 200), (3, -3.0, 1, 200), (4, 1.0, 2, 200)];
        let mut a = Arena::new(CombatParams::default(), &specs);
        a.latency_ms = latency_ticks * TICK_MS;
        let mut accepted = Vec::new();
        for s in &steps {
            match *s {
                Step::Hit(x, y, d) => {
                    if let Ok(seq) = a.try_hit(EntityId(x), EntityId(y), d) {
                        accepted.push((EntityId(x), seq));
                    }
                }
                Step::Migrate(x) => a.migrate(EntityId(x)),
                Step::Wait => {}
            }
            a.tick();
        }
        a.run_ms(CombatParams::default().hit_timeout_ms + 2000);
        for &(att, seq) in &accepted {
            let ends = a.events_of(att).iter().filter(|e| matches!(e,
                CombatEvent::HitLanded { seq: s, .. } | CombatEvent::HitExpired { seq: s, .. } if *s == seq)).count();
            prop_assert_eq!(ends, 1, "hit {:?}/{} ended {} times", att, seq, ends);
        }
        for (&id, r) in &a.reals {
            prop_assert_eq!(r.combat.pending(), 0);
            let dealt: i64 = a.events_of(id).iter().map(|e| match e {
                CombatEvent::Damaged { dealt, .. } => *dealt,
                _ => 0,
            }).sum();
            prop_assert_eq!(hp(&r.entity), 200 - dealt);
            prop_assert_eq!(hp(&a.ghosts[&id]), hp(&r.entity));
        }
    }
}
