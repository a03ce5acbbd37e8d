//! Tests of the pull's quiet pass (`observer::pull`, `QUIET`): an observer
//! whose host can tell which heads held still sends exactly what one whose
//! host cannot sends, and a slot passed by with news is caught.

use super::tests::{apply, client, World, OWNER};
use super::*;
use crate::core::aoi::EventKind;
use crate::core::entity::{Audience, Entity, SyncCache, SyncCacheParams};
use crate::core::geom::Vec3;
use crate::core::ids::EntityId;
use std::collections::BTreeMap;

/// A host over the tests' copies that keeps what the cell's table keeps: an
/// epoch per flush and, per copy, the epoch of its last change (hints are
/// entity ids). `lie`: every head claims to have held still.
struct EpochHost {
    copies: BTreeMap<EntityId, LocalCopy>,
    epoch: u32,
    changed: BTreeMap<u32, u32>,
    lie: bool,
}

impl EpochHost {
    fn new(copies: BTreeMap<EntityId, LocalCopy>) -> Self {
        EpochHost {
            copies,
            epoch: 1,
            changed: BTreeMap::new(),
            lie: false,
        }
    }

    /// A new epoch, in which `e`'s copy changed.
    fn changed(&mut self, e: EntityId) {
        self.changed.insert(e.0 as u32, self.epoch + 1);
    }
}

impl ObserverHost for EpochHost {
    fn copy_version(&self, entity: EntityId) -> Option<u64> {
        self.copies.copy_version(entity)
    }

    fn copy_cache(&self, entity: EntityId) -> Option<&SyncCache> {
        self.copies.copy_cache(entity)
    }

    fn copy_snapshot(
        &self,
        entity: EntityId,
        audience: Audience,
        out: &mut Vec<u8>,
    ) -> Option<u64> {
        self.copies.copy_snapshot(entity, audience, out)
    }

    fn copy_position(&self, entity: EntityId) -> Option<Vec3> {
        self.copies.copy_position(entity)
    }

    fn copy_entity(&self, entity: EntityId) -> Option<(&Entity, u64)> {
        self.copies.copy_entity(entity)
    }

    fn copy_head_hinted<'a>(
        &'a self,
        entity: EntityId,
        hint: &mut u32,
        scratch: &'a mut RunHead,
    ) -> Option<HeadRef<'a>> {
        *hint = entity.0 as u32;
        Some(HeadRef::kept_in(self.copy_head(entity)?, scratch))
    }

    fn heads_epoch(&self) -> Option<u32> {
        Some(self.epoch)
    }

    fn head_unchanged_since(&self, hint: u32, since: u32) -> bool {
        self.lie || self.changed.get(&hint).is_none_or(|&c| c <= since)
    }
}

/// A crowd at 5 to 60 m, most of it standing, shown to two observers: one
/// on a host that tells which heads held still (so it passes quiet slots
/// by), one on the same copies through a host that cannot. Over many
/// flushes (some members moving, some changing a detail property, the
/// owner walking for a while, the budget binding or not) both send the
/// same bytes, and the first passed many slots by.
#[test]
fn passing_quiet_slots_by_sends_what_stepping_them_sends() {
    let ids: Vec<EntityId> = (100..160).map(EntityId).collect();
    let mut all = vec![OWNER];
    all.extend(&ids);
    let mut w = World::new(&all);
    let mut copies = BTreeMap::new();
    copies.insert(OWNER, w.owner_copy());
    for (k, &e) in ids.iter().enumerate() {
        w.step(e, 5.0 + k as f64, None);
        copies.insert(e, w.ghost(e, SyncCacheParams::default()));
    }
    let mut host = EpochHost::new(copies);
    let params = ObserverParams::default();
    let (mut fast, mut plain) = (Observer::new(OWNER, params), Observer::new(OWNER, params));
    let mut cv = client(&w);
    for &e in &ids {
        fast.handle_aoi(&host, e, EventKind::Enter);
        plain.handle_aoi(&host.copies, e, EventKind::Enter);
    }
    let mut steps = vec![0u64; ids.len()];
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for t in 0..400u64 {
        // Busy spells (every member may move) and quiet ones (one in
        // twenty); a detail property now and then; the owner walks for a
        // spell too.
        let busy = (t / 50) % 3 == 1;
        for (k, &e) in ids.iter().enumerate() {
            let roll = next() % 100;
            if roll < if busy { 60 } else { 5 } {
                let hp = (roll % 7 == 0).then_some((t % 90) as i64);
                // Never where it stood: a step always changes the copy.
                steps[k] += 1;
                let x = 5.0 + k as f64 + (steps[k] % 2 + 1) as f64 * 0.4;
                let (m, _) = w.step(e, x, hp);
                apply(&mut host.copies, w.now, &m);
                host.changed(e);
                fast.handle_sync(&host, e, m.version, m.kind, m.others_payload());
                plain.handle_sync(&host.copies, e, m.version, m.kind, m.others_payload());
            }
        }
        if (150..200).contains(&t) {
            let (m, _) = w.step(OWNER, (t - 149) as f64 * 0.5, None);
            apply(&mut host.copies, w.now, &m);
            host.changed(OWNER);
        }
        host.epoch += 1;
        let a = fast.flush_paced(&host).to_vec();
        let b = plain.flush_paced(&host.copies).to_vec();
        assert_eq!(a, b, "flush {t}: the same bytes");
        cv.handle_batch(&a);
    }
    assert_eq!(cv.violations(), &[]);
    let (f, p) = (fast.stats(), plain.stats());
    assert_eq!(p.quiet, 0, "a host without epochs passes nothing by");
    assert_eq!(f.visits, p.visits, "a quiet pass counts as a visit");
    // (A debug build steps every slot with stale detail, to check it: a
    // release build passes more by.)
    assert!(
        f.quiet * 10 > f.visits,
        "a tenth of the visits or more passed by: {} of {}",
        f.quiet,
        f.visits
    );
}

/// A host that says a changed head held still makes the pass skip news:
/// a debug build catches it at the slot.
#[cfg(debug_assertions)]
#[test]
#[should_panic(expected = "a slot passed by as quiet has news")]
fn a_slot_passed_by_with_news_is_caught() {
    let e = EntityId(100);
    let mut w = World::new(&[OWNER, e]);
    let mut copies = BTreeMap::new();
    copies.insert(OWNER, w.owner_copy());
    w.step(e, 5.0, None);
    copies.insert(e, w.ghost(e, SyncCacheParams::default()));
    let mut host = EpochHost::new(copies);
    let mut o = Observer::new(OWNER, ObserverParams::default());
    o.handle_aoi(&host, e, EventKind::Enter);
    // Long enough for the observer to look for quiet slots again after
    // its first flush (the enter) found none.
    for _ in 0..20 {
        host.epoch += 1;
        o.flush_paced(&host);
    }
    assert!(o.stats().quiet > 0, "the slot is passed by while it stands");
    // The copy moves, but the host claims every head held still.
    let (m, _) = w.step(e, 6.0, None);
    apply(&mut host.copies, w.now, &m);
    host.lie = true;
    host.epoch += 1;
    o.flush_paced(&host);
}
