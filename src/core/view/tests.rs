//! Unit tests of the observer, its blob and the client view together.

use super::*;
use crate::core::aoi::EventKind;
use crate::core::entity::{
    Audience, Entity, SyncCacheParams, SyncEmitter, SyncMsg, TypeRegistry, Value, AVATAR,
};
use crate::core::fault::Fault;
use crate::core::geom::Vec3;
use crate::core::ids::EntityId;
use crate::core::time::Time;
use std::collections::BTreeMap;
use std::sync::Arc;

pub(super) const OWNER: EntityId = EntityId(1);
pub(super) const A: EntityId = EntityId(10);
pub(super) const B: EntityId = EntityId(11);

pub(super) struct World {
    reg: Arc<TypeRegistry>,
    reals: BTreeMap<EntityId, (Entity, SyncEmitter)>,
    pub(super) now: Time,
}

impl World {
    pub(super) fn new(ids: &[EntityId]) -> Self {
        let reg = Arc::new(TypeRegistry::with_builtins());
        let ty = reg.get(AVATAR).expect("avatar").clone();
        let reals = ids
            .iter()
            .map(|&id| {
                let e = Entity::new_real(id, ty.clone(), Vec3::default(), 0.0);
                (id, (e, SyncEmitter::new()))
            })
            .collect();
        World {
            reg,
            reals,
            now: Time::ZERO,
        }
    }

    pub(super) fn step(&mut self, id: EntityId, x: f64, hp: Option<i64>) -> (SyncMsg, Vec<u8>) {
        self.now = self.now + std::time::Duration::from_millis(10);
        let (e, em) = self.reals.get_mut(&id).expect("real");
        e.set_movement(Vec3 { x, y: 0.0, z: 0.0 }, 0.0);
        if let Some(hp) = hp {
            let i = e.props().entity_type().prop_index("hp").expect("hp");
            e.props_mut().set(i, Value::Int(hp)).expect("set");
        }
        let cs = em.flush(self.now, e).expect("changed");
        (cs.msg, cs.own.to_vec())
    }

    pub(super) fn ghost(&mut self, id: EntityId, cache: SyncCacheParams) -> LocalCopy {
        let (e, em) = self.reals.get_mut(&id).expect("real");
        let snap = em.ghost_snapshot(self.now, e);
        let mut g = Entity::new_replica(id, e.props().entity_type().clone(), Audience::Ghost);
        g.apply_payload(snap.kind, snap.ghost_payload())
            .expect("snapshot");
        LocalCopy::new(g, snap.version, cache)
    }

    pub(super) fn owner_copy(&self) -> LocalCopy {
        let (e, em) = &self.reals[&OWNER];
        LocalCopy::new(e.clone(), em.version(), SyncCacheParams::default())
    }
}

pub(super) fn apply(copies: &mut BTreeMap<EntityId, LocalCopy>, now: Time, m: &SyncMsg) {
    let c = copies.get_mut(&m.entity).expect("copy");
    assert_eq!(m.version, c.version + 1, "copies apply in order");
    c.entity
        .apply_payload(m.kind, m.ghost_payload())
        .expect("apply");
    c.version = m.version;
    c.cache.push(now, m.clone());
}

pub(super) fn client(w: &World) -> ClientView {
    ClientView::new(OWNER, w.reg.clone(), ClientViewParams::default())
}

fn shown_x(cv: &ClientView, e: EntityId) -> Option<(u64, f64)> {
    cv.find(e).map(|s| (s.version, s.replica.core().pos.x))
}

#[test]
fn enter_updates_leave_reach_a_clean_client() {
    let mut w = World::new(&[OWNER, A]);
    let mut host = BTreeMap::new();
    host.insert(OWNER, w.owner_copy());
    host.insert(A, w.ghost(A, SyncCacheParams::default()));
    let mut o = Observer::new(OWNER, ObserverParams::default());
    let mut cv = client(&w);
    o.handle_aoi(&host, A, EventKind::Enter);
    cv.handle_batch(o.flush(&host));
    assert_eq!(shown_x(&cv, A), Some((0, 0.0)));
    assert!(cv.own().is_some(), "own snapshot first");
    for (i, x) in [1.0, 2.0, 3.0].into_iter().enumerate() {
        let (m, _) = w.step(A, x, (i == 1).then_some(50));
        apply(&mut host, w.now, &m);
        o.handle_sync(&host, A, m.version, m.kind, m.others_payload());
        o.handle_sync(&host, A, m.version, m.kind, m.others_payload());
        cv.handle_batch(o.flush(&host));
    }
    assert_eq!(shown_x(&cv, A), Some((3, 3.0)));
    assert_eq!(o.stats().stale, 3, "duplicates dropped");
    let (m, own) = w.step(OWNER, 5.0, Some(7));
    o.handle_own(m.version, m.kind, &own);
    o.handle_aoi(&host, A, EventKind::Leave);
    cv.handle_batch(o.flush(&host));
    assert!(cv.find(A).is_none());
    assert_eq!(cv.own().map(|s| s.version), Some(1));
    assert_eq!(cv.violations(), &[]);
    assert!(o.flush(&host).is_empty(), "nothing new");
}

/// A queued snapshot keeps where its slot was; a leave that moves the slot
/// (the last one swapped into the hole) leaves that guess stale, and the
/// flush still finds the slot (fails if it trusts the queued position).
#[test]
fn a_queued_snapshot_finds_its_slot_after_a_leave_moved_it() {
    const C: EntityId = EntityId(12);
    let mut w = World::new(&[OWNER, A, B, C]);
    let mut host = BTreeMap::new();
    host.insert(OWNER, w.owner_copy());
    for e in [A, B, C] {
        host.insert(e, w.ghost(e, SyncCacheParams::default()));
    }
    let mut o = Observer::new(OWNER, ObserverParams::default());
    let mut cv = client(&w);
    for e in [A, B, C] {
        o.handle_aoi(&host, e, EventKind::Enter);
    }
    assert_eq!(Vec::from(o.queue.clone()), [(A, 0), (B, 1), (C, 2)]);
    o.handle_aoi(&host, A, EventKind::Leave);
    assert_eq!(Vec::from(o.queue.clone()), [(B, 1), (C, 2)]);
    assert_eq!(o.slots.position(&C), Some(0), "C moved into A's place");
    cv.handle_batch(o.flush(&host));
    assert!(cv.find(A).is_none());
    assert_eq!(shown_x(&cv, B), Some((0, 0.0)));
    assert_eq!(shown_x(&cv, C), Some((0, 0.0)));
    assert_eq!(cv.violations(), &[]);
    assert!(o.queue.is_empty());
}

#[test]
fn gaps_are_filled_from_the_cache_or_resynced() {
    let mut w = World::new(&[OWNER, A]);
    let small = SyncCacheParams {
        cache_msgs_max: 3,
        ..Default::default()
    };
    let mut host = BTreeMap::new();
    host.insert(OWNER, w.owner_copy());
    host.insert(A, w.ghost(A, small));
    let mut o = Observer::new(OWNER, ObserverParams::default());
    let mut cv = client(&w);
    o.handle_aoi(&host, A, EventKind::Enter);
    cv.handle_batch(o.flush(&host));
    // Versions 1 and 2 reach the copy but not the observer; 3 does.
    let mut last = None;
    for x in [1.0, 2.0, 3.0] {
        let (m, _) = w.step(A, x, None);
        apply(&mut host, w.now, &m);
        last = Some(m);
    }
    let m = last.take().expect("sent");
    o.handle_sync(&host, A, m.version, m.kind, m.others_payload());
    cv.handle_batch(o.flush(&host));
    assert_eq!(shown_x(&cv, A), Some((3, 3.0)));
    assert_eq!(o.stats().filled, 3, "1, 2 and 3 itself, from the cache");
    // Now five versions go missing and the cache only holds three: resync.
    for x in 4..=8 {
        let (m, _) = w.step(A, f64::from(x), Some(x.into()));
        apply(&mut host, w.now, &m);
        last = Some(m);
    }
    let m = last.expect("sent");
    o.handle_sync(&host, A, m.version, m.kind, m.others_payload());
    cv.handle_batch(o.flush(&host));
    assert_eq!(shown_x(&cv, A), Some((8, 8.0)));
    assert_eq!(o.stats().resyncs, 1);
    assert_eq!(cv.violations(), &[]);
}

#[test]
fn migration_keeps_handles_fills_holds_and_rederives() {
    let mut w = World::new(&[OWNER, A, B, EntityId(12)]);
    let c = EntityId(12);
    let mut old = BTreeMap::new();
    old.insert(OWNER, w.owner_copy());
    for e in [A, B] {
        old.insert(e, w.ghost(e, SyncCacheParams::default()));
    }
    // The new cell's copy of A starts now (it will lag behind `old`).
    let mut new = BTreeMap::new();
    new.insert(A, w.ghost(A, SyncCacheParams::default()));
    new.insert(c, w.ghost(c, SyncCacheParams::default()));
    let mut o = Observer::new(OWNER, ObserverParams::default());
    let mut cv = client(&w);
    o.handle_aoi(&old, A, EventKind::Enter);
    o.handle_aoi(&old, B, EventKind::Enter);
    cv.handle_batch(o.flush(&old));
    let ha = o.handle_of(A).expect("shown");
    let mut lagging = Vec::new();
    for x in 1..=3 {
        let (m, _) = w.step(A, f64::from(x), None);
        apply(&mut old, w.now, &m);
        o.handle_sync(&old, A, m.version, m.kind, m.others_payload());
        lagging.push(m);
    }
    cv.handle_batch(o.flush(&old));
    assert_eq!(shown_x(&cv, A), Some((3, 3.0)));
    // Migrate: the blob goes to the new cell, where A's copy is at 0.
    let mut blob = Vec::new();
    o.encode_blob(&mut blob);
    let mut o = Observer::decode_blob(OWNER, ObserverParams::default(), &blob).expect("blob");
    assert!(o.needs_view());
    new.insert(OWNER, w.owner_copy());
    o.handle_view(&new, &[A, c]);
    cv.handle_batch(o.flush(&new));
    assert_eq!(o.handle_of(A), Some(ha), "no remap");
    assert!(cv.find(B).is_none(), "B is not in the new view");
    assert!(cv.find(c).is_some(), "C entered");
    assert_eq!(o.stats().held, 1, "A's copy lags");
    // The lagging copy catches up: 1..=3 are stale, 4 is delivered.
    let (m4, _) = w.step(A, 4.0, None);
    lagging.push(m4);
    for m in &lagging {
        apply(&mut new, w.now, m);
        o.handle_sync(&new, A, m.version, m.kind, m.others_payload());
    }
    cv.handle_batch(o.flush(&new));
    assert_eq!(shown_x(&cv, A), Some((4, 4.0)));
    assert_eq!(cv.violations(), &[]);
}

#[test]
fn migration_to_a_copy_ahead_fills_from_its_cache() {
    let mut w = World::new(&[OWNER, A]);
    let mut old = BTreeMap::new();
    old.insert(OWNER, w.owner_copy());
    old.insert(A, w.ghost(A, SyncCacheParams::default()));
    let mut new = BTreeMap::new();
    new.insert(A, w.ghost(A, SyncCacheParams::default()));
    let mut o = Observer::new(OWNER, ObserverParams::default());
    let mut cv = client(&w);
    o.handle_aoi(&old, A, EventKind::Enter);
    cv.handle_batch(o.flush(&old));
    for x in 1..=3 {
        let (m, _) = w.step(A, f64::from(x), None);
        apply(&mut new, w.now, &m);
    }
    let mut blob = Vec::new();
    o.encode_blob(&mut blob);
    let mut o = Observer::decode_blob(OWNER, ObserverParams::default(), &blob).expect("blob");
    new.insert(OWNER, w.owner_copy());
    o.handle_view(&new, &[A]);
    cv.handle_batch(o.flush(&new));
    assert_eq!(shown_x(&cv, A), Some((3, 3.0)));
    assert_eq!(o.stats().filled, 3);
    assert_eq!(cv.violations(), &[]);
}

#[test]
fn snapshots_over_the_batch_budget_wait_for_the_next_tick() {
    let ids: Vec<EntityId> = (10..20).map(EntityId).collect();
    let mut all = ids.clone();
    all.push(OWNER);
    let mut w = World::new(&all);
    let mut host = BTreeMap::new();
    host.insert(OWNER, w.owner_copy());
    for &e in &ids {
        host.insert(e, w.ghost(e, SyncCacheParams::default()));
    }
    let params = ObserverParams {
        batch_bytes_max: 1,
        ..Default::default()
    };
    let mut o = Observer::new(OWNER, params);
    let mut cv = client(&w);
    o.handle_view(&host, &ids);
    for tick in 0..ids.len() {
        cv.handle_batch(o.flush(&host));
        assert_eq!(cv.shown().len(), tick + 1, "one snapshot per tick");
    }
    assert!(o.stats().deferred > 0);
    assert_eq!(cv.violations(), &[]);
}

#[test]
fn bad_blobs_are_typed_errors() {
    let p = ObserverParams::default();
    assert!(matches!(
        Observer::decode_blob(OWNER, p, &[]),
        Err(BlobError::Decode(_))
    ));
    assert_eq!(
        Observer::decode_blob(OWNER, p, &[9]).err(),
        Some(BlobError::Format(9))
    );
    assert!(matches!(
        Observer::decode_blob(OWNER, p, &[3, 2, 0, 0, 0]),
        Err(BlobError::Owner { .. })
    ));
    // Two entities sharing handle 0.
    let dup = [
        3, 1, 0, 1, 2, 5, 1, 0, 0, 0, 0, 0, 0, 6, 1, 0, 0, 0, 0, 0, 0,
    ];
    assert_eq!(
        Observer::decode_blob(OWNER, p, &dup).err(),
        Some(BlobError::Handle(0))
    );
    let unordered = [
        3, 1, 0, 2, 2, 6, 1, 0, 0, 0, 0, 0, 0, 5, 1, 1, 0, 0, 0, 0, 0,
    ];
    assert_eq!(
        Observer::decode_blob(OWNER, p, &unordered).err(),
        Some(BlobError::Order(EntityId(5)))
    );
    // A coordinate of 2^31 cm (zigzag 2^32), one past the 32 bits every
    // quantised position fits: in a slot, and as the own position.
    let far = [
        3, 1, 0, 2, 1, 5, 1, 1, 3, 0x80, 0x80, 0x80, 0x80, 0x10, 0, 0, 4,
    ];
    assert_eq!(
        Observer::decode_blob(OWNER, p, &far).err(),
        Some(BlobError::Position(1 << 31))
    );
    let far_own = [3, 1, 1, 0, 0x80, 0x80, 0x80, 0x80, 0x10, 0, 0, 0];
    assert_eq!(
        Observer::decode_blob(OWNER, p, &far_own).err(),
        Some(BlobError::Position(1 << 31))
    );
    let ok = [
        3, 1, 0, 2, 2, 5, 1, 1, 3, 0, 0, 0, 4, 6, 2, 0, 0, 0, 0, 0, 0,
    ];
    let o = Observer::decode_blob(OWNER, p, &ok).expect("valid");
    assert_eq!(o.handle_of(EntityId(5)), Some(1));
    assert_eq!(o.client_version(EntityId(5)), Some(3));
    assert_eq!(
        o.slots.cold(&EntityId(5)).map(|c| c.stale()),
        Some(4),
        "stale detail travels"
    );
    let mut back = Vec::new();
    o.encode_blob(&mut back);
    assert_eq!(back, ok, "round trip");
}

#[test]
fn the_client_view_names_every_broken_rule() {
    let w = World::new(&[A]);
    let (e, _) = &w.reals[&A];
    let mut snap = Vec::new();
    e.encode_snapshot(Audience::OtherClients, &mut snap);
    let enter = |h, v| ClientEvent::Enter {
        handle: h,
        entity: A,
        type_id: AVATAR,
        pos: Vec3::default(),
        yaw: 0.0,
        version: v,
        snapshot: &snap,
    };
    let mv = |h, version_low| ClientEvent::Move {
        handle: h,
        version_low,
        mv: Movement {
            absolute: false,
            d: [1, 0, 1],
            yaw: 0,
        },
    };
    let props = |h, version_low| ClientEvent::Props {
        handle: h,
        version_low,
        delta: &[0],
    };
    let resync = |h, v| ClientEvent::Resync {
        handle: h,
        version: v,
        snapshot: &snap,
    };
    let cases: Vec<(Vec<ClientEvent<'_>>, Rule)> = vec![
        (vec![mv(0, 1)], Rule::UpdateBeforeEnter),
        (vec![enter(0, 0), enter(0, 0)], Rule::DoubleEnter),
        (
            vec![enter(0, 0), enter(1, 0)],
            Rule::EntityTwice { other: 0 },
        ),
        (
            vec![enter(0, 3), props(0, 5)],
            Rule::VersionGap {
                expected: 4,
                got: 5,
            },
        ),
        (
            vec![enter(0, 3), mv(0, 5), resync(0, 4)],
            Rule::Stale { shown: 5, got: 4 },
        ),
        (
            vec![enter(0, 3), ClientEvent::Leave { handle: 0 }, mv(0, 4)],
            Rule::AfterLeave,
        ),
        (vec![ClientEvent::Leave { handle: 4 }], Rule::LeaveUnknown),
    ];
    for (evs, rule) in cases {
        let mut buf = Vec::new();
        for ev in &evs {
            encode_event(&mut buf, ev);
        }
        let mut cv = client(&w);
        cv.handle_batch(&buf);
        assert_eq!(cv.violation_count(), 1, "{rule:?}");
        assert_eq!(cv.violations()[0].rule, rule);
    }
    let mut cv = client(&w);
    cv.handle_batch(&[42]);
    assert_eq!(
        cv.violations()[0].rule,
        Rule::Decode(DecodeError::BadTag(42))
    );
    // An enter of a type this client does not know, and one whose
    // snapshot's properties do not decode: nothing is shown. (A snapshot
    // starts with its type id, one byte here, and its movement: 3 f64
    // and an f32.)
    assert!(snap[0] < 0x80 && snap.len() > 29, "a one-byte type id");
    let mut unknown = snap.clone();
    unknown[0] = 0x7f;
    let mut broken = snap[..29].to_vec();
    broken.extend_from_slice(&[0xff; 3]);
    let mut buf = Vec::new();
    for (handle, snapshot) in [(0, &unknown[..]), (1, &broken[..])] {
        encode_event(
            &mut buf,
            &ClientEvent::Enter {
                handle,
                entity: A,
                type_id: AVATAR,
                pos: Vec3::default(),
                yaw: 0.0,
                version: 0,
                snapshot,
            },
        );
    }
    let mut cv = client(&w);
    cv.handle_batch(&buf);
    let rules: Vec<&Rule> = cv.violations().iter().map(|v| &v.rule).collect();
    assert_eq!(rules.len(), 2, "{rules:?}");
    assert!(
        rules.iter().all(|r| matches!(r, Rule::BadPayload(_))),
        "{rules:?}"
    );
    assert!(cv.shown().is_empty());
    // More entities than the client keeps.
    let params = ClientViewParams {
        shown_max: 0,
        ..ClientViewParams::default()
    };
    let mut cv = ClientView::new(OWNER, w.reg.clone(), params);
    let mut buf = Vec::new();
    encode_event(&mut buf, &enter(0, 0));
    cv.handle_batch(&buf);
    assert_eq!(cv.violations()[0].rule, Rule::TooMany);
}

/// Entities at fixed distances from the owner (each at `x = base`, the owner
/// at the origin), all shown to one observer, for the budget tests.
struct Crowd {
    w: World,
    host: BTreeMap<EntityId, LocalCopy>,
    o: Observer,
    cv: ClientView,
    members: Vec<(EntityId, f64)>,
    versions: BTreeMap<EntityId, u64>,
    updates: BTreeMap<EntityId, u64>,
}

impl Crowd {
    fn new(members: Vec<(EntityId, f64)>, params: ObserverParams) -> Crowd {
        let mut ids = vec![OWNER];
        ids.extend(members.iter().map(|m| m.0));
        let mut w = World::new(&ids);
        let mut host = BTreeMap::new();
        host.insert(OWNER, w.owner_copy());
        for &(e, base) in &members {
            w.step(e, base, None);
            host.insert(e, w.ghost(e, SyncCacheParams::default()));
        }
        let mut o = Observer::new(OWNER, params);
        let mut cv = client(&w);
        for &(e, _) in &members {
            o.handle_aoi(&host, e, EventKind::Enter);
        }
        cv.handle_batch(o.flush(&host));
        Crowd {
            w,
            host,
            o,
            cv,
            members,
            versions: BTreeMap::new(),
            updates: BTreeMap::new(),
        }
    }

    /// Tick `t`: every member for which `moves(t, e)` holds steps a little
    /// (never to where it stood), the observer flushes within its budget
    /// and the client takes the batch, which is returned.
    fn tick(&mut self, t: u64, moves: impl Fn(u64, EntityId) -> bool) -> Vec<u8> {
        for &(e, base) in &self.members {
            if moves(t, e) {
                let (m, _) = self.w.step(e, base + (t % 7 + 1) as f64 * 0.3, None);
                apply(&mut self.host, self.w.now, &m);
                self.o
                    .handle_sync(&self.host, e, m.version, m.kind, m.others_payload());
            }
        }
        let b = self.o.flush_paced(&self.host).to_vec();
        self.cv.handle_batch(&b);
        b
    }

    /// Counts the members whose shown version changed since the last count.
    fn count(&mut self) {
        for &(e, _) in &self.members {
            let v = self.cv.find(e).expect("shown").version;
            if self.versions.insert(e, v).is_some_and(|old| old != v) {
                *self.updates.entry(e).or_default() += 1;
            }
        }
    }

    /// Updates counted per member of `set` per second over `secs`.
    fn rate(&self, set: &[EntityId], secs: f64) -> f64 {
        let n: u64 = set
            .iter()
            .map(|e| self.updates.get(e).copied().unwrap_or(0))
            .sum();
        n as f64 / set.len() as f64 / secs
    }
}

fn members(ids: &[EntityId], base: f64) -> impl Iterator<Item = (EntityId, f64)> + '_ {
    ids.iter().map(move |&e| (e, base))
}

/// Entities moving every tick at 5 m and 40 m from the owner: the budget
/// keeps the near ones at their band's rate, thins the far ones, and the
/// client still ends exactly where the server is.
#[test]
fn a_budget_paces_far_movements_and_keeps_near_ones() {
    let near: Vec<EntityId> = (100..105).map(EntityId).collect();
    let far: Vec<EntityId> = (200..240).map(EntityId).collect();
    let params = ObserverParams::default();
    let budget = params.budget;
    let all = members(&near, 5.0).chain(members(&far, 40.0)).collect();
    let mut c = Crowd::new(all, params);
    let ticks = 200u64;
    let mut bytes = 0usize;
    for t in 0..ticks {
        bytes += c.tick(t, |_, _| true).len() + usize::from(budget.frame_bytes);
        c.count();
    }
    assert_eq!(c.cv.violations(), &[]);
    let secs = ticks as f64 * f64::from(budget.tick_ms) / 1000.0;
    let (near_hz, far_hz) = (c.rate(&near, secs), c.rate(&far, secs));
    assert!(near_hz >= 9.5, "near band at {near_hz:.1} Hz");
    assert!(far_hz >= 1.9, "far band at {far_hz:.1} Hz");
    assert!(far_hz < near_hz, "far {far_hz:.1} Hz, near {near_hz:.1} Hz");
    let per_s = bytes as f64 / secs;
    assert!(
        per_s <= f64::from(budget.bytes_per_s) * 1.1,
        "{per_s:.0} B/s over a {} B/s budget",
        budget.bytes_per_s
    );
    // Everything pending goes out with a full flush: the client is exact.
    c.cv.handle_batch(c.o.flush(&c.host));
    for (&e, copy) in &c.host {
        if e == OWNER {
            continue;
        }
        let s = c.cv.find(e).expect("shown");
        assert_eq!(s.version, copy.version, "{e}");
        let d = s.replica.core().pos.dist_xz(copy.entity.core().pos);
        assert!(d <= POSITION_RESOLUTION_M, "{e} off by {d}");
    }
}

#[test]
fn the_drop_leave_fault_makes_the_client_see_a_handle_twice() {
    let mut w = World::new(&[OWNER, A, B]);
    let mut host = BTreeMap::new();
    host.insert(OWNER, w.owner_copy());
    host.insert(A, w.ghost(A, SyncCacheParams::default()));
    host.insert(B, w.ghost(B, SyncCacheParams::default()));
    let params = ObserverParams {
        fault: Fault::DropLeave,
        ..ObserverParams::default()
    };
    let mut o = Observer::new(OWNER, params);
    let mut cv = client(&w);
    o.handle_aoi(&host, A, EventKind::Enter);
    cv.handle_batch(o.flush(&host));
    o.handle_aoi(&host, A, EventKind::Leave);
    cv.handle_batch(o.flush(&host));
    assert!(cv.find(A).is_some(), "the leave was not sent");
    assert_eq!(o.stats().leaves, 1);
    // B gets A's freed handle, which the client still shows.
    o.handle_aoi(&host, B, EventKind::Enter);
    cv.handle_batch(o.flush(&host));
    assert_eq!(cv.violation_kinds().get("DoubleEnter"), Some(&1));
    // A again, under a new handle: the client shows it twice.
    o.handle_aoi(&host, A, EventKind::Enter);
    cv.handle_batch(o.flush(&host));
    assert_eq!(cv.violation_kinds().get("EntityTwice"), Some(&1));
    assert_eq!(cv.violation_count(), 2);
}

#[test]
fn the_stale_version_fault_makes_the_client_see_a_stale_update() {
    let mut w = World::new(&[OWNER, A]);
    let mut host = BTreeMap::new();
    host.insert(OWNER, w.owner_copy());
    host.insert(A, w.ghost(A, SyncCacheParams::default()));
    let params = ObserverParams {
        fault: Fault::StaleVersion,
        ..ObserverParams::default()
    };
    let mut o = Observer::new(OWNER, params);
    let mut cv = client(&w);
    o.handle_aoi(&host, A, EventKind::Enter);
    cv.handle_batch(o.flush(&host));
    let (m, _) = w.step(A, 1.0, None);
    apply(&mut host, w.now, &m);
    o.handle_sync(&host, A, m.version, m.kind, m.others_payload());
    cv.handle_batch(o.flush(&host));
    assert_eq!(
        cv.violations().first().map(|v| &v.rule),
        Some(&Rule::Stale { shown: 0, got: 0 })
    );
    assert_eq!(
        o.client_version(A),
        Some(1),
        "the observer's books are right"
    );
}

/// A crowd within the nearest band that the budget cannot carry: the client
/// is told `Degraded`, its downstream comes back to the budget (nearest
/// first, by priority), and no rule bends.
#[test]
fn an_overloaded_client_is_told_and_held_to_its_budget() {
    let crowd: Vec<EntityId> = (100..160).map(EntityId).collect();
    let mut params = ObserverParams::default();
    params.budget.bytes_per_s = 1_000;
    params.budget.burst_bytes = 400;
    let budget = params.budget;
    let mut c = Crowd::new(members(&crowd, 3.0).collect(), params);
    let (mut early, mut late) = (0usize, 0usize);
    let ticks = 200u64;
    for t in 0..ticks {
        let n = c.tick(t, |_, _| true).len() + usize::from(budget.frame_bytes);
        if t < 20 {
            early += n;
        } else if t >= ticks - 100 {
            late += n;
        }
    }
    assert_eq!(c.cv.violations(), &[]);
    assert!(c.cv.degraded(), "told it is degraded");
    assert_eq!(c.cv.degraded_notices(), 1);
    assert_eq!(c.o.stats().degraded, 1);
    let secs = 100.0 * f64::from(budget.tick_ms) / 1000.0;
    let per_s = late as f64 / secs;
    assert!(
        per_s <= f64::from(budget.bytes_per_s) * 1.1,
        "{per_s:.0} B/s once degraded (budget {})",
        budget.bytes_per_s
    );
    assert!(early > late / 5, "before degrading it sent every movement");
}

/// Degraded by a crowd, the budget still goes nearest first: 50 entities at
/// 3 m and 40 at 40 m, all moving at 10 Hz, on the default budget.
#[test]
fn a_degraded_client_still_sees_the_nearest_most_often() {
    let near: Vec<EntityId> = (100..150).map(EntityId).collect();
    let far: Vec<EntityId> = (200..240).map(EntityId).collect();
    let all = members(&near, 3.0).chain(members(&far, 40.0)).collect();
    let mut c = Crowd::new(all, ObserverParams::default());
    let mut deg = 0;
    for t in 0..400u64 {
        c.tick(t, |t, e| (t + e.0) % 2 == 0);
        deg += usize::from(c.o.degraded());
        if t >= 200 {
            c.count();
        }
    }
    let (near_hz, far_hz) = (c.rate(&near, 10.0), c.rate(&far, 10.0));
    assert!(deg > 100, "the crowd degrades the client ({deg} ticks)");
    assert!(
        near_hz > 3.0 * far_hz && far_hz > 0.0,
        "near {near_hz:.2} Hz, far {far_hz:.2} Hz"
    );
    assert_eq!(c.cv.violations(), &[]);
}

/// The own stream never goes back: an own snapshot older than what the
/// client shows (a stream that restarted behind after a migration) is a
/// violation, and so is an own movement that is not the next version.
#[test]
fn the_own_stream_going_back_is_caught() {
    let w = World::new(&[OWNER]);
    let (e, _) = &w.reals[&OWNER];
    let mut snap = Vec::new();
    e.encode_snapshot(Audience::OwnClient, &mut snap);
    let own = |version| ClientEvent::Own {
        version,
        kind: crate::core::entity::SyncKind::Snapshot,
        payload: &snap,
    };
    let mut buf = Vec::new();
    encode_event(&mut buf, &own(5));
    encode_event(&mut buf, &own(3));
    let mut cv = client(&w);
    cv.handle_batch(&buf);
    assert_eq!(
        cv.violations().first().map(|v| &v.rule),
        Some(&Rule::Stale { shown: 5, got: 3 })
    );
    let mut buf = Vec::new();
    let mv = Movement {
        absolute: false,
        d: [1, 0, 0],
        yaw: 0,
    };
    encode_event(&mut buf, &ClientEvent::OwnMove { version_low: 7, mv });
    cv.handle_batch(&buf);
    assert_eq!(
        cv.violations().last().map(|v| &v.rule),
        Some(&Rule::VersionGap {
            expected: 6,
            got: 7
        })
    );
    assert_eq!(cv.violation_count(), 2);
}

#[test]
fn a_flush_pulls_what_was_not_pushed_in_order_and_resyncs_past_the_cache() {
    let mut w = World::new(&[OWNER, A]);
    let small = SyncCacheParams {
        cache_msgs_max: 4,
        ..Default::default()
    };
    let mut host = BTreeMap::new();
    host.insert(OWNER, w.owner_copy());
    host.insert(A, w.ghost(A, small));
    let mut o = Observer::new(OWNER, ObserverParams::default());
    let mut cv = client(&w);
    o.handle_aoi(&host, A, EventKind::Enter);
    cv.handle_batch(o.flush(&host));
    // Three versions reach the copy and nothing is pushed: a movement, a
    // property change, a movement. The flush takes all three, in order.
    for (x, hp) in [(1.0, None), (2.0, Some(40)), (3.0, None)] {
        let (m, _) = w.step(A, x, hp);
        apply(&mut host, w.now, &m);
    }
    cv.handle_batch(o.flush(&host));
    assert_eq!(shown_x(&cv, A), Some((3, 3.0)));
    let hp = |cv: &ClientView| {
        let s = cv.find(A).expect("shown");
        let i = s.replica.props().entity_type().prop_index("hp");
        s.replica.props().get(i.expect("hp")).cloned()
    };
    assert_eq!(hp(&cv), Some(Value::Int(40)), "the property change arrived");
    assert_eq!(o.stats().resyncs, 0);
    assert!(
        o.flush(&host).is_empty(),
        "up to date: the pull finds nothing"
    );
    // Six versions while the cache holds four: the pull resyncs.
    for x in 4..=9 {
        let (m, _) = w.step(A, f64::from(x), None);
        apply(&mut host, w.now, &m);
    }
    cv.handle_batch(o.flush(&host));
    assert_eq!(shown_x(&cv, A), Some((9, 9.0)));
    assert_eq!(o.stats().resyncs, 1);
    assert_eq!(cv.violations(), &[]);
    o.verify();
}
