//! Property tests of compact movements on the client wire (protocol v3):
//! positions quantised to centimetres, sent as deltas from the last
//! position the client was given, with key frames; headings in one byte.
//!
//! One real moves through random positions (small steps, long jumps past
//! the delta range, y changes, headings all round); its changes reach a
//! ghost copy and an [`Observer`], flushed each tick paced (a tight budget,
//! so movements coalesce) or in full; a [`ClientView`] decodes the batches.
//! After every full flush the client's position of the entity is within
//! half the resolution of the truth on each axis (no drift over any chain,
//! key frames or not), its heading within half a heading step, its version
//! the truth's, and no rule is broken.
//!
//! Case counts: `PROPTEST_CASES` (default 48).

use proptest::prelude::*;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tessera::core::aoi::EventKind;
use tessera::core::entity::*;
use tessera::core::geom::Vec3;
use tessera::core::ids::EntityId;
use tessera::core::time::Time;
use tessera::core::view::*;

const OWNER: EntityId = EntityId(1);
const MOVER: EntityId = EntityId(2);

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
enum Step {
    /// A small walk step (metres on x, y, z) and a heading.
    Walk(f64, f64, f64, f32),
    /// A jump to anywhere (past the delta range of 2^24 cm sometimes).
    Jump(f64, f64, f32),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        8 => (-3.0f64..3.0, -0.5f64..0.5, -3.0f64..3.0, -7.0f32..7.0)
            .prop_map(|(x, y, z, w)| Step::Walk(x, y, z, w)),
        1 => (-400_000.0f64..400_000.0, -400_000.0f64..400_000.0, -4.0f32..4.0)
            .prop_map(|(x, z, w)| Step::Jump(x, z, w)),
    ]
}

struct Rig {
    real: Entity,
    em: SyncEmitter,
    host: BTreeMap<EntityId, LocalCopy>,
    observer: Observer,
    client: ClientView,
    now: Time,
}

impl Rig {
    fn new(params: ObserverParams) -> Rig {
        let reg = Arc::new(TypeRegistry::with_builtins());
        let ty = reg.get(AVATAR).expect("avatar").clone();
        let owner = Entity::new_real(OWNER, ty.clone(), Vec3::default(), 0.0);
        let real = Entity::new_real(MOVER, ty.clone(), Vec3::ground(1.0, 1.0), 0.0);
        let mut em = SyncEmitter::new();
        let now = Time(1_000);
        let snap = em.ghost_snapshot(now, &real);
        let mut ghost = Entity::new_replica(MOVER, ty.clone(), Audience::Ghost);
        ghost
            .apply_payload(snap.kind, snap.ghost_payload())
            .expect("snapshot");
        let cache = SyncCacheParams::default();
        let mut host = BTreeMap::new();
        host.insert(OWNER, LocalCopy::new(owner, 0, cache));
        host.insert(MOVER, LocalCopy::new(ghost, snap.version, cache));
        let mut observer = Observer::new(OWNER, params);
        let mut client = ClientView::new(OWNER, reg, ClientViewParams::default());
        observer.handle_aoi(&host, MOVER, EventKind::Enter);
        client.handle_batch(observer.flush(&host));
        Rig {
            real,
            em,
            host,
            observer,
            client,
            now,
        }
    }

    fn apply(&mut self, s: &Step) {
        let c = self.real.core();
        let (pos, yaw) = match *s {
            Step::Walk(dx, dy, dz, yaw) => (
                Vec3 {
                    x: c.pos.x + dx,
                    y: c.pos.y + dy,
                    z: c.pos.z + dz,
                },
                yaw,
            ),
            Step::Jump(x, z, yaw) => (Vec3::ground(x, z), yaw),
        };
        self.now = self.now + Duration::from_millis(50);
        self.real.set_movement(pos, yaw);
        let Some(cs) = self.em.flush(self.now, &mut self.real) else {
            return;
        };
        let m = cs.msg;
        let copy = self.host.get_mut(&MOVER).expect("copy");
        copy.entity
            .apply_payload(m.kind, m.ghost_payload())
            .expect("apply");
        copy.version = m.version;
        copy.cache.push(self.now, m.clone());
        self.observer
            .handle_sync(&self.host, MOVER, m.version, m.kind, m.others_payload());
    }

    /// The client matches the truth within the wire's resolution.
    fn check(&self) -> Result<(), TestCaseError> {
        prop_assert_eq!(self.client.violations(), &[]);
        let shown = self.client.find(MOVER).expect("shown");
        let truth = self.real.core();
        prop_assert_eq!(shown.version, self.host[&MOVER].version);
        let p = shown.replica.core().pos;
        let half = POSITION_RESOLUTION_M / 2.0 + 1e-9;
        prop_assert!(
            (p.x - truth.pos.x).abs() <= half,
            "x {} vs {}",
            p.x,
            truth.pos.x
        );
        prop_assert!(
            (p.y - truth.pos.y).abs() <= half,
            "y {} vs {}",
            p.y,
            truth.pos.y
        );
        prop_assert!(
            (p.z - truth.pos.z).abs() <= half,
            "z {} vs {}",
            p.z,
            truth.pos.z
        );
        let turn = std::f32::consts::TAU;
        let d = (shown.replica.core().yaw - truth.yaw).rem_euclid(turn);
        let d = d.min(turn - d);
        prop_assert!(
            d <= turn / 512.0 + 1e-4,
            "yaw {} vs {}",
            shown.replica.core().yaw,
            truth.yaw
        );
        Ok(())
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn decoded_movements_stay_within_the_resolution(
        steps in prop::collection::vec((step(), any::<bool>()), 1..400),
        keyframe_every in prop_oneof![Just(u16::MAX), 1u16..40],
    ) {
        let mut params = ObserverParams::default();
        // A budget far too small for every movement: most coalesce.
        params.budget.bytes_per_s = 200;
        params.budget.burst_bytes = 50;
        params.budget.keyframe_every = keyframe_every;
        // Every band paced (the nearest never waits).
        params.budget.bands[0].to_m = 0.001;
        let mut rig = Rig::new(params);
        for (s, full) in &steps {
            rig.apply(s);
            if *full {
                let b = rig.observer.flush(&rig.host).to_vec();
                rig.client.handle_batch(&b);
                rig.check()?;
            } else {
                let b = rig.observer.flush_paced(&rig.host).to_vec();
                rig.client.handle_batch(&b);
                prop_assert_eq!(rig.client.violations(), &[]);
            }
        }
        let b = rig.observer.flush(&rig.host).to_vec();
        rig.client.handle_batch(&b);
        rig.check()?;
    }
}

/// A lost movement delta is not silent: the client's position is then off
/// the truth, and a lost property delta breaks the step rule.
#[test]
fn a_lost_delta_is_caught() {
    let mut rig = Rig::new(ObserverParams::default());
    rig.apply(&Step::Walk(2.0, 0.0, 0.0, 0.0));
    let _lost = rig.observer.flush(&rig.host).to_vec();
    rig.apply(&Step::Walk(2.0, 0.0, 0.0, 0.0));
    let b = rig.observer.flush(&rig.host).to_vec();
    rig.client.handle_batch(&b);
    let shown = rig.client.find(MOVER).expect("shown").replica.core().pos;
    assert!(
        (shown.x - rig.real.core().pos.x).abs() > 1.0,
        "a dropped delta leaves the client 2 m off"
    );
    // A Props event that skips a version.
    let mut bad = Vec::new();
    encode_event(
        &mut bad,
        &ClientEvent::Props {
            handle: 0,
            version_low: (rig.client.find(MOVER).expect("shown").version + 2) as u8,
            delta: &[0],
        },
    );
    rig.client.handle_batch(&bad);
    assert!(matches!(
        rig.client.violations().last().map(|v| &v.rule),
        Some(Rule::VersionGap { .. })
    ));
}
