//! Property tests for entity properties and versioned sync.
//!
//! - Replicas per audience (ghost, own client, other clients), fed with the
//!   real's deltas and sometimes a fresh snapshot, equal the source filtered
//!   by audience after every tick; a ghost serves other-client snapshots
//!   byte-identical to the real's.
//! - The reorder buffer releases any permutation/duplication of a message
//!   sequence in version order exactly once, or reports a gap (exhaustively
//!   for n <= 6, randomly beyond).
//! - Cache + observer tracker: a client fed a scrambled, lossy subset of the
//!   messages never sees a non-consecutive version without a resync, and
//!   ends equal to the source.
//!
//! Case counts: `PROPTEST_CASES` (default 256 per property).

use proptest::prelude::*;
use std::collections::BTreeMap;
use std::sync::Arc;
use tessera::core::entity::schema::{avatar_type, npc_type};
use tessera::core::entity::*;
use tessera::core::geom::Vec3;
use tessera::core::ids::EntityId;
use tessera::core::time::Time;

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(256);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

/// One random change to an Avatar or Npc real.
#[derive(Clone, Debug)]
enum Op {
    Name(String),
    Level(u64),
    Hp(i64),
    Faction(u64),
    Private(u64),
    Buff(ArrayOp),
    Inv(MapOp),
    Move(f64, f64, f32),
}

fn buff() -> impl Strategy<Value = Value> {
    (0u64..5, -3i64..3, 0u64..10_000).prop_map(|(id, stacks, exp)| {
        Value::Record(vec![Value::UInt(id), Value::Int(stacks), Value::UInt(exp)])
    })
}

fn field_value() -> impl Strategy<Value = (usize, Value)> {
    prop_oneof![
        (0u64..5).prop_map(|v| (0, Value::UInt(v))),
        (-3i64..3).prop_map(|v| (1, Value::Int(v))),
        (0u64..10_000).prop_map(|v| (2, Value::UInt(v))),
        Just((3, Value::UInt(1))), // no such field: refused
    ]
}

fn array_op() -> impl Strategy<Value = ArrayOp> {
    prop_oneof![
        (0usize..6, buff()).prop_map(|(index, value)| ArrayOp::Update { index, value }),
        buff().prop_map(ArrayOp::Push),
        buff().prop_map(ArrayOp::Push),
        Just(ArrayOp::Pop),
        (0usize..6, buff()).prop_map(|(index, value)| ArrayOp::Insert { index, value }),
        (0usize..6).prop_map(ArrayOp::Erase),
        Just(ArrayOp::Clear),
        (0usize..6).prop_map(ArrayOp::Resize),
        prop::collection::vec(buff(), 0..4).prop_map(ArrayOp::Replace),
        (0usize..6, field_value()).prop_map(|(index, (field, value))| ArrayOp::SetField {
            index,
            field,
            value
        }),
        (0usize..6, field_value()).prop_map(|(index, (field, value))| ArrayOp::SetField {
            index,
            field,
            value
        }),
    ]
}

fn map_op() -> impl Strategy<Value = MapOp> {
    let key = (-3i64..5).prop_map(Key::Int);
    prop_oneof![
        (key.clone(), 0u64..100).prop_map(|(key, n)| MapOp::Set {
            key,
            value: Value::UInt(n)
        }),
        key.clone().prop_map(MapOp::Erase),
        Just(MapOp::Clear),
        prop::collection::btree_map(key.clone(), (0u64..100).prop_map(Value::UInt), 0..4)
            .prop_map(MapOp::Replace),
        key.prop_map(|key| MapOp::SetField {
            key,
            field: 0,
            value: Value::UInt(1)
        }), // scalar elements: refused
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        "[a-z]{0,6}".prop_map(Op::Name),
        any::<u64>().prop_map(Op::Level),
        any::<i64>().prop_map(Op::Hp),
        (0u64..4).prop_map(Op::Faction),
        any::<u64>().prop_map(Op::Private),
        array_op().prop_map(Op::Buff),
        array_op().prop_map(Op::Buff),
        map_op().prop_map(Op::Inv),
        (-1e3f64..1e3, -1e3f64..1e3, -3.2f32..3.2).prop_map(|(x, z, y)| Op::Move(x, z, y)),
    ]
}

/// Applies `op` to the real; a refused op must leave the real unchanged.
fn apply(real: &mut Entity, op: &Op) {
    let ty = Arc::clone(real.props().entity_type());
    let idx = |n: &str| ty.prop_index(n);
    let before = real.props().values().to_vec();
    let props = real.props_mut();
    let result = match op.clone() {
        Op::Name(s) => props.set(idx("name").unwrap(), Value::Str(s)),
        Op::Level(v) => props.set(idx("level").unwrap(), Value::UInt(v)),
        Op::Hp(v) => props.set(idx("hp").unwrap(), Value::Int(v)),
        Op::Faction(v) => props.set(idx("faction").unwrap(), Value::UInt(v)),
        Op::Private(v) => {
            let i = idx("last_input_seq").or(idx("wander_seed")).unwrap();
            props.set(i, Value::UInt(v))
        }
        Op::Buff(a) => props.array_op(idx("buffs").unwrap(), a),
        Op::Inv(m) => match idx("inventory") {
            Some(i) => props.map_op(i, m),
            None => Ok(()),
        },
        Op::Move(x, z, yaw) => {
            real.set_movement(Vec3 { x, y: 0.0, z }, yaw);
            return;
        }
    };
    if result.is_err() {
        assert_eq!(
            real.props().values(),
            &before[..],
            "refused {op:?} changed the real"
        );
    }
    real.props().verify();
}

fn registry(small_logs: bool) -> TypeRegistry {
    let limits = PropLimits {
        op_log_bytes_max: if small_logs { 12 } else { 1024 },
        ..PropLimits::default()
    };
    let mut reg = TypeRegistry::new();
    reg.register(avatar_type().limits(limits)).unwrap();
    reg.register(npc_type().limits(limits)).unwrap();
    reg
}

fn check_replica(real: &Entity, replica: &Entity, aud: Audience) {
    assert_eq!(
        replica.props().values(),
        &real.props().filtered(aud)[..],
        "{aud:?}"
    );
    assert_eq!(replica.core().pos, real.core().pos, "{aud:?}");
    assert_eq!(
        replica.core().yaw.to_bits(),
        real.core().yaw.to_bits(),
        "{aud:?}"
    );
}

fn snapshot_into(real: &Entity, replica: &mut Entity, aud: Audience) {
    let mut buf = Vec::new();
    real.encode_snapshot(aud, &mut buf);
    replica.apply_payload(SyncKind::Snapshot, &buf).unwrap();
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn replicas_equal_source_filtered_by_audience(
        npc in any::<bool>(),
        small_logs in any::<bool>(),
        ticks in prop::collection::vec((prop::collection::vec(op(), 0..8), 0u8..10), 1..20),
    ) {
        let reg = registry(small_logs);
        let ty = Arc::clone(reg.get(if npc { NPC } else { AVATAR }).unwrap());
        let id = EntityId(7);
        let mut real = Entity::new_real(id, Arc::clone(&ty), Vec3::default(), 0.0);
        let auds = [Audience::Ghost, Audience::OwnClient, Audience::OtherClients];
        let mut replicas: Vec<Entity> = auds.iter().map(|&a| Entity::new_replica(id, Arc::clone(&ty), a)).collect();
        let mut emitter = SyncEmitter::new();
        let mut flushes = 0;
        for (i, (ops, resync)) in ticks.iter().enumerate() {
            for op in ops {
                apply(&mut real, op);
            }
            let now = Time::from_millis(i as u64 * 33);
            if let Some(cs) = emitter.flush(now, &mut real) {
                flushes += 1;
                prop_assert_eq!(cs.msg.version, flushes);
                replicas[0].apply_payload(cs.msg.kind, cs.msg.ghost_payload()).unwrap();
                replicas[1].apply_payload(cs.msg.kind, cs.own).unwrap();
                replicas[2].apply_payload(cs.msg.kind, cs.msg.others_payload()).unwrap();
            }
            prop_assert!(real.pending_kind().is_none());
            if *resync < 3 {
                // A resync of one audience from a snapshot.
                let k = usize::from(*resync);
                snapshot_into(&real, &mut replicas[k], auds[k]);
            }
            for (replica, &aud) in replicas.iter().zip(&auds) {
                check_replica(&real, replica, aud);
            }
            // The ghost serves other clients exactly as the real would.
            let (mut from_real, mut from_ghost) = (Vec::new(), Vec::new());
            real.encode_snapshot(Audience::OtherClients, &mut from_real);
            replicas[0].encode_snapshot(Audience::OtherClients, &mut from_ghost);
            prop_assert_eq!(from_real, from_ghost);
        }
        // A real carried across a migration as a Real snapshot is the same real.
        let mut moved = Entity::new_replica(id, Arc::clone(&ty), Audience::Real);
        snapshot_into(&real, &mut moved, Audience::Real);
        prop_assert_eq!(moved.props().values(), real.props().values());
    }
}

// ---------------------------------------------------------------------------
// Reorder buffer

fn msg(v: u64) -> SyncMsg {
    SyncMsg::new(
        EntityId(1),
        v,
        SyncKind::Props,
        Time::ZERO,
        &v.to_le_bytes(),
        &[],
    )
}

/// Feeds `arrivals` (versions, any order, duplicates allowed) into a buffer
/// that starts at 0 and checks the release contract. Returns the released
/// versions.
fn run_reorder(arrivals: &[u64], n: u64, max: usize) -> Vec<u64> {
    let p = ReorderParams {
        reorder_buffer_max: max,
        ..ReorderParams::default()
    };
    let mut rb = ReorderBuffer::new(p, 0);
    let mut released = Vec::new();
    for (t, &v) in arrivals.iter().enumerate() {
        rb.handle_msg(Time::from_millis(t as u64), msg(v));
        while let Some(m) = rb.poll_ready() {
            assert_eq!(m.ghost_payload(), &m.version.to_le_bytes()[..]);
            released.push(m.version);
        }
        assert!(rb.pending() <= max);
    }
    let expect: Vec<u64> = (1..=released.len() as u64).collect();
    assert_eq!(
        released, expect,
        "released out of order or twice: {arrivals:?}"
    );
    if released.len() as u64 == n {
        assert!(!rb.has_gap());
        assert_eq!(rb.poll_resync(Time::from_millis(1 << 40)), None);
    } else {
        // Every version arrived at least once, so the only way to stall is a
        // full buffer: the gap is reported and a resync requested.
        assert!(rb.has_gap(), "stalled silently: {arrivals:?} max {max}");
        assert!(rb.poll_resync(Time::from_millis(1 << 40)).is_some());
        // The resync heals: a snapshot at n, then n + 1 flows.
        let snap = SyncMsg::new(EntityId(1), n, SyncKind::Snapshot, Time::ZERO, &[], &[]);
        rb.handle_msg(Time::ZERO, snap);
        rb.handle_msg(Time::ZERO, msg(n + 1));
        let rest: Vec<u64> = std::iter::from_fn(|| rb.poll_ready())
            .map(|m| m.version)
            .collect();
        assert_eq!(rest, vec![n, n + 1]);
        assert!(!rb.has_gap());
    }
    released
}

fn permutations(items: &mut Vec<u64>, k: usize, out: &mut dyn FnMut(&[u64])) {
    if k == items.len() {
        out(items);
        return;
    }
    for i in k..items.len() {
        items.swap(k, i);
        permutations(items, k + 1, out);
        items.swap(k, i);
    }
}

#[test]
fn reorder_all_permutations_up_to_six() {
    for n in 1..=6u64 {
        for max in [1, 2, n as usize] {
            let mut count = 0;
            let mut items: Vec<u64> = (1..=n).collect();
            permutations(&mut items, 0, &mut |perm| {
                count += 1;
                let released = run_reorder(perm, n, max);
                if max >= n as usize {
                    assert_eq!(released.len() as u64, n, "{perm:?}");
                }
                // With a duplicate of the first arrival appended and one in the middle.
                let mut dup = perm.to_vec();
                dup.insert(perm.len() / 2, perm[0]);
                dup.push(perm[perm.len() - 1]);
                let released = run_reorder(&dup, n, max);
                if max >= n as usize {
                    assert_eq!(released.len() as u64, n, "{dup:?}");
                }
            });
            assert_eq!(count, (1..=n).product::<u64>());
        }
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn reorder_random_arrivals(
        n in 1u64..40,
        max in 1usize..12,
        keys in prop::collection::vec(any::<u32>(), 40),
        dups in prop::collection::vec((0u64..40, 0usize..80), 0..10),
    ) {
        let mut arrivals: Vec<u64> = (1..=n).collect();
        arrivals.sort_by_key(|&v| keys[v as usize - 1]);
        for (v, at) in dups {
            let v = v % n + 1;
            arrivals.insert(at.min(arrivals.len()), v);
        }
        let released = run_reorder(&arrivals, n, max);
        if max as u64 >= n {
            prop_assert_eq!(released.len() as u64, n);
        }
    }
}

// ---------------------------------------------------------------------------
// Cache + observer tracker

/// What a client saw, checked as it happens.
struct Client {
    view: Entity,
    last: Option<u64>,
}

impl Client {
    fn snapshot(&mut self, real: &Entity, version: u64) {
        snapshot_into(real, &mut self.view, Audience::OtherClients);
        self.last = Some(version);
    }
    fn delta(&mut self, m: &SyncMsg) {
        let last = self.last.expect("no delta before the first snapshot");
        assert_eq!(
            m.version,
            last + 1,
            "client saw a non-consecutive version without a resync"
        );
        self.view.apply_payload(m.kind, m.others_payload()).unwrap();
        self.last = Some(m.version);
    }
}

fn heal(
    tracker: &mut ObserverTracker,
    cache: &SyncCache,
    client: &mut Client,
    real: &Entity,
    version: u64,
) -> bool {
    let id = real.core().id;
    match tracker.catch_up(id, cache) {
        CatchUp::UpToDate => false,
        CatchUp::Fill(msgs) => {
            for m in msgs {
                assert_eq!(tracker.offer(id, m.version), Delivery::Deliver);
                client.delta(m);
            }
            false
        }
        CatchUp::Resync => {
            client.snapshot(real, version);
            assert!(tracker.resync(id, version));
            true
        }
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn observer_never_sees_a_gap_without_resync(
        ticks in prop::collection::vec(
            (prop::collection::vec(op(), 0..4), prop::collection::vec((any::<u16>(), 0u8..4), 0..4), any::<bool>()),
            1..40,
        ),
        cache_msgs_max in 1usize..8,
    ) {
        let reg = registry(false);
        let ty = Arc::clone(reg.get(AVATAR).unwrap());
        let id = EntityId(3);
        let mut real = Entity::new_real(id, Arc::clone(&ty), Vec3::default(), 0.0);
        let mut emitter = SyncEmitter::new();
        let params = SyncCacheParams { cache_msgs_max, cache_bytes_max: 1 << 20, cache_age_max_ms: 200 };
        let mut cache = SyncCache::new(params, 0);
        let mut tracker = ObserverTracker::new(TrackerParams::default());
        let mut client = Client { view: Entity::new_replica(id, Arc::clone(&ty), Audience::OtherClients), last: None };
        client.snapshot(&real, 0);
        tracker.enter(id, 0).unwrap();
        // Messages in flight to the observer: (delay key, message).
        let mut in_flight: BTreeMap<(u16, u64), SyncMsg> = BTreeMap::new();
        let mut resyncs = 0;
        for (i, (ops, deliveries, migrate)) in ticks.iter().enumerate() {
            let now = Time::from_millis(i as u64 * 33);
            for op in ops {
                apply(&mut real, op);
            }
            if let Some(cs) = emitter.flush(now, &mut real) {
                let m = cs.msg;
                in_flight.insert((i as u16 ^ 0x5a5a, m.version), m.clone());
                cache.push(now, m);
                cache.verify();
            }
            // Deliver some in-flight messages in scrambled order; some copies
            // are lost (kind 0), some duplicated (kind 1).
            for &(key, kind) in deliveries {
                let Some((&k, _)) = in_flight.range((key, 0)..).next().or_else(|| in_flight.iter().next()) else { break };
                let m = in_flight.remove(&k).unwrap();
                if kind == 0 {
                    continue;
                }
                for _ in 0..if kind == 1 { 2 } else { 1 } {
                    match tracker.offer(id, m.version) {
                        Delivery::Deliver => client.delta(&m),
                        Delivery::Stale => {}
                        Delivery::Gap { last, got } => {
                            prop_assert!(got > last + 1);
                            resyncs += usize::from(heal(&mut tracker, &cache, &mut client, &real, emitter.version()));
                        }
                        Delivery::NotTracked => prop_assert!(false, "tracked entity"),
                    }
                }
            }
            if *migrate {
                // The observer migrated next to the entity's copy: catch up
                // from the carried cache; messages still in flight are lost.
                in_flight.clear();
                resyncs += usize::from(heal(&mut tracker, &cache, &mut client, &real, emitter.version()));
                prop_assert_eq!(tracker.last_delivered(id), Some(emitter.version()));
            }
        }
        in_flight.clear();
        resyncs += usize::from(heal(&mut tracker, &cache, &mut client, &real, emitter.version()));
        prop_assert_eq!(client.last, Some(emitter.version()));
        check_replica(&real, &client.view, Audience::OtherClients);
        prop_assert!(resyncs <= ticks.len() + 1);
    }
}

// ---------------------------------------------------------------------------
// Decoding untrusted bytes never panics

proptest! {
    #![proptest_config(config())]

    #[test]
    fn decoder_never_panics_on_garbage(
        bytes in prop::collection::vec(any::<u8>(), 0..200),
        kind in 0usize..4,
        aud in 0usize..4,
    ) {
        let reg = TypeRegistry::with_builtins();
        let ty = Arc::clone(reg.get(AVATAR).unwrap());
        let auds = [Audience::Real, Audience::Ghost, Audience::OwnClient, Audience::OtherClients];
        let kinds = [SyncKind::Movement, SyncKind::Props, SyncKind::MovementAndProps, SyncKind::Snapshot];
        let mut e = Entity::new_replica(EntityId(1), ty, auds[aud]);
        let _ = e.apply_payload(kinds[kind], &bytes);
        e.props().verify();
    }

    #[test]
    fn decoder_never_panics_on_corrupted_payloads(
        ops in prop::collection::vec(op(), 1..10),
        flips in prop::collection::vec((any::<usize>(), any::<u8>()), 1..4),
        cut in any::<usize>(),
    ) {
        let reg = TypeRegistry::with_builtins();
        let ty = Arc::clone(reg.get(AVATAR).unwrap());
        let mut real = Entity::new_real(EntityId(1), Arc::clone(&ty), Vec3::default(), 0.0);
        for op in &ops {
            apply(&mut real, op);
        }
        let mut emitter = SyncEmitter::new();
        let Some(cs) = emitter.flush(Time::ZERO, &mut real) else { return Ok(()) };
        let mut bytes = cs.msg.ghost_payload().to_vec();
        for (at, x) in flips {
            let n = bytes.len();
            bytes[at % n] ^= x;
        }
        bytes.truncate(cut % (bytes.len() + 1));
        let mut ghost = Entity::new_replica(EntityId(1), ty, Audience::Ghost);
        let _ = ghost.apply_payload(cs.msg.kind, &bytes);
        ghost.props().verify();
    }
}

proptest! {
    #![proptest_config(config())]

    /// A ghost fed the real's messages out of order (and some twice) through
    /// its reorder buffer ends equal to the source, and its own cache lets an
    /// observer catch up from any version it still holds.
    #[test]
    fn ghost_behind_reorder_buffer_converges(
        ticks in prop::collection::vec(prop::collection::vec(op(), 0..5), 1..25),
        keys in prop::collection::vec(any::<u32>(), 25),
        dup_every in 2usize..5,
    ) {
        let reg = registry(false);
        let ty = Arc::clone(reg.get(AVATAR).unwrap());
        let id = EntityId(5);
        let mut real = Entity::new_real(id, Arc::clone(&ty), Vec3::default(), 0.0);
        let mut emitter = SyncEmitter::new();
        let mut ghost = Entity::new_replica(id, Arc::clone(&ty), Audience::Ghost);
        let snap = emitter.ghost_snapshot(Time::ZERO, &real);
        ghost.apply_payload(snap.kind, snap.ghost_payload()).unwrap();
        let mut msgs = Vec::new();
        for (i, ops) in ticks.iter().enumerate() {
            for op in ops {
                apply(&mut real, op);
            }
            if let Some(cs) = emitter.flush(Time::from_millis(i as u64), &mut real) {
                msgs.push(cs.msg);
            }
        }
        let mut arrivals: Vec<SyncMsg> = msgs.clone();
        arrivals.sort_by_key(|m| keys[m.version as usize - 1]);
        for i in (0..arrivals.len()).step_by(dup_every) {
            arrivals.push(arrivals[i].clone());
        }
        let p = ReorderParams { reorder_buffer_max: 64, ..ReorderParams::default() };
        let mut rb = ReorderBuffer::new(p, snap.version);
        let mut cache = SyncCache::new(SyncCacheParams::default(), snap.version);
        for m in arrivals {
            rb.handle_msg(Time::ZERO, m);
            while let Some(m) = rb.poll_ready() {
                ghost.apply_payload(m.kind, m.ghost_payload()).unwrap();
                cache.push(Time::ZERO, m);
            }
        }
        prop_assert_eq!(rb.applied(), emitter.version());
        prop_assert!(!rb.has_gap());
        check_replica(&real, &ghost, Audience::Ghost);
        cache.verify();
        if let Fill::Msgs(it) = cache.fill(0) {
            prop_assert!(it.map(|m| m.version).eq(1..=emitter.version()));
        } else {
            prop_assert!(emitter.version() == 0);
        }
    }
}
