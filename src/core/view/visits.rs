//! Which slots a paced flush visits: the band-rate visits.
//!
//! Owns [`Visits`] (what an observer remembers between flushes: the
//! priority its budget cut at) and [`VisitPlan`] (one flush's rule). Reads
//! a slot's hot part and its copy's head; must not read a copy's messages,
//! send, or change a slot but its hint: the observer does that.
//!
//! # Why
//!
//! A flush visits each shown entity: the pull brings the slot up to its
//! copy and the budget walk ranks its pending movement (about 125 and 90
//! instructions; one pass since the nineteenth round). A client held to its budget (20 kbit/s) is sent its
//! nearest band every flush, the farther bands at their minimum rates and
//! what is left by priority: with 60 in view at 10 Hz, about 270 of 600
//! visits a second end in a send. BigWorld's witness updates each entity
//! at its own rate and touches no other; here a paced flush *skips* a slot
//! it cannot send: it reads nothing of the copy but its head (to see that
//! only movements came) and only ages the slot and grows its priority by
//! the weight of its last walk, as that walk would.
//!
//! # The rule
//!
//! A flush has a plan (skips at all) only when `view.band_rate_visits` is
//! on (`visit_span_max` > 1), the client is not degraded, and the previous
//! flush's budget was binding: some movement waited ([`Visits::plan`]). A
//! budget with room visits everything, so a small view keeps every
//! movement. Under a plan, a live slot is skipped when all of these hold
//! ([`VisitPlan::skips`]):
//!
//! - its band (as of its last walk) is not the nearest, and its band's
//!   minimum rate does not make it due at this flush, nor the span: it was
//!   sent within `visit_span_max - 1` flushes, so the versions a visit must
//!   take stay within the copies' caches and a coalescing step (the host
//!   derives `visit_span_max` from the ghost cache's length and the update
//!   period). Both are [`Slot::due_age`], set by its last walk;
//! - its priority after this flush stays below [`CUT_MARGIN`] times the
//!   previous flush's cut: it would not go by priority either;
//! - its copy's head (the dense line the pull prefetches anyway) says
//!   nothing but bare movements came after the client's version: a
//!   property change, a snapshot or a replaced copy is a visit, so
//!   property changes never wait;
//! - it is not marked important (the observer checks).
//!
//! A skipped movement is one a later movement replaces anyway.

use super::budget::BudgetParams;
use super::host::{ObserverHost, RunHead};
use super::observer::Slot;
use crate::core::ids::EntityId;

/// A skipped slot's priority after this flush must stay below this share
/// of the previous flush's cut: the cut moves a little from one flush to
/// the next, and a slot near it is visited so the budget ranks it.
pub(super) const CUT_MARGIN: f32 = 0.75;

/// `w` (a movement priority gained a flush, positive) as [`Slot::w_q`]
/// holds it: the high half of its bits (a `bfloat16`: 8 bits of precision,
/// within 1 % of `w`, rounded towards zero), two instructions each way in
/// the budget walk's loop.
#[inline]
pub(super) fn weight_q(w: f32) -> u16 {
    (w.to_bits() >> 16) as u16
}

/// The weight `w_q` stands for.
#[inline]
pub(super) fn weight_of(w_q: u16) -> f32 {
    f32::from_bits(u32::from(w_q) << 16)
}

/// [`Slot::due_age`] for a slot in `band` whose band refreshes every
/// `interval` flushes: the age at which a flush must visit it (0: always;
/// the nearest band, or no band-rate visits when `span_max <= 1`).
#[inline]
pub(super) fn due_age(band: usize, interval: u16, span_max: u16) -> u8 {
    if band == 0 || span_max <= 1 {
        0
    } else {
        interval.min(span_max).min(u16::from(u8::MAX)) as u8
    }
}

/// What an observer remembers between flushes for the plan.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct Visits {
    /// The lowest priority the previous flush sent by priority, or the
    /// highest that waited if none went; 0 when nothing waited.
    cut: f32,
}

/// One flush's rule (see the module doc).
#[derive(Clone, Copy, Debug)]
pub(super) struct VisitPlan {
    /// A slot whose priority after this flush reaches this is visited.
    bar: f32,
}

impl Visits {
    /// This flush's plan, if it may skip at all: `span_max` is the
    /// observer's bound (at most 1: never), `degraded` the client's state.
    pub(super) fn plan(
        &self,
        p: &BudgetParams,
        span_max: u16,
        degraded: bool,
    ) -> Option<VisitPlan> {
        if span_max <= 1 || degraded || self.cut <= 0.0 || !p.limited() {
            return None;
        }
        Some(VisitPlan {
            bar: self.cut * CUT_MARGIN,
        })
    }

    /// Ends a flush with the budget's cut.
    pub(super) fn flushed(&mut self, cut: f32) {
        self.cut = cut;
    }
}

impl VisitPlan {
    /// True when this flush need not visit the live `slot` of entity `e`
    /// (see the module doc; the observer checks the important entities
    /// itself). Reads the copy's head only for a slot the first two rules
    /// let go, and keeps the slot's hint up to date as the pull does.
    #[inline(always)]
    pub(super) fn skips<H: ObserverHost + ?Sized>(
        &self,
        host: &H,
        e: EntityId,
        slot: &mut Slot,
        scratch: &mut RunHead,
    ) -> bool {
        // The band's rate and the span, as of its last walk (`due_age`),
        // and the priority.
        if slot.age.saturating_add(1) >= u16::from(slot.due_age)
            || slot.prio + weight_of(slot.w_q) >= self.bar
        {
            return false;
        }
        let last = slot.last;
        // Nothing new, a copy behind the client (held), or only bare
        // movements after the client's version: nothing that cannot wait.
        host.copy_head_hinted(e, &mut slot.hint, scratch)
            .is_some_and(|h| h.version <= last || h.run.is_some_and(|r| r.moves_only_after(last)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::entity::codec::{put_f32, put_f64};
    use crate::core::entity::{Entity, SyncCacheParams, SyncKind, SyncMsg, TypeRegistry, AVATAR};
    use crate::core::geom::Vec3;
    use crate::core::time::Time;
    use crate::core::view::observer::SlotState;
    use crate::core::view::LocalCopy;
    use std::collections::BTreeMap;

    const E: EntityId = EntityId(7);

    /// A host with one copy of `E` at version 10, then `more` (true: a
    /// bare movement; false: a property change) taken as 11, 12, ...
    fn host(more: &[bool]) -> BTreeMap<EntityId, LocalCopy> {
        let types = TypeRegistry::with_builtins();
        let ty = types.get(AVATAR).expect("avatar").clone();
        let entity = Entity::new_real(E, ty, Vec3::ground(1.0, 2.0), 0.0);
        let mut copy = LocalCopy::new(entity, 10, SyncCacheParams::default());
        for (i, &moved_only) in more.iter().enumerate() {
            let v = 11 + i as u64;
            let mut block = Vec::new();
            let (kind, payload): (SyncKind, &[u8]) = if moved_only {
                for x in [1.0, 0.0, 2.0] {
                    put_f64(&mut block, x);
                }
                put_f32(&mut block, 0.5);
                (SyncKind::Movement, &block)
            } else {
                (SyncKind::Props, &[0])
            };
            let msg = SyncMsg::new(E, v, kind, Time::ZERO, payload, payload);
            copy.cache.push(Time::ZERO, msg);
            copy.version = v;
        }
        BTreeMap::from([(E, copy)])
    }

    fn far_slot() -> Slot {
        let mut s = Slot::new(SlotState::Live, 10);
        s.due_age = due_age(2, 5, 8);
        s.age = 1;
        s.prio = 0.5;
        s.w_q = weight_q(0.25);
        s
    }

    fn binding(cut: f32) -> Visits {
        let mut v = Visits::default();
        v.flushed(cut);
        v
    }

    fn skips(plan: &VisitPlan, host: &BTreeMap<EntityId, LocalCopy>, s: Slot) -> bool {
        let mut s = s;
        plan.skips(host, E, &mut s, &mut RunHead::default())
    }

    #[test]
    fn a_far_quiet_slot_below_the_cut_is_skipped_and_each_rule_makes_it_a_visit() {
        let p = BudgetParams::default();
        let plan = binding(2.0).plan(&p, 8, false).expect("a plan");
        let moved = host(&[true, true, true]);
        let s = far_slot();
        assert!(
            skips(&plan, &moved, s),
            "far, not due, below the bar, moved only"
        );
        assert!(skips(&plan, &host(&[]), s), "nothing new");
        // Each rule alone makes it a visit.
        let mut near = s;
        near.due_age = due_age(0, 5, 8);
        assert!(!skips(&plan, &moved, near), "the nearest band");
        let mut due = s;
        due.age = 4;
        assert!(
            !skips(&plan, &moved, due),
            "due by its band's rate (5 flushes)"
        );
        let mut spanned = s;
        spanned.due_age = due_age(2, 5, 2);
        assert!(!skips(&plan, &moved, spanned), "sent a span ago");
        let mut ranked = s;
        ranked.prio = 1.3;
        assert!(!skips(&plan, &moved, ranked), "near the cut: ranked");
        assert!(
            !skips(&plan, &host(&[true, false, true]), s),
            "a property change"
        );
        assert!(!skips(&plan, &host(&[false]), s), "a property change, last");
        assert!(
            !skips(&plan, &BTreeMap::new(), s),
            "no copy: the pull decides"
        );
        let fresh = Slot::new(SlotState::Live, 10);
        assert!(!skips(&plan, &moved, fresh), "never walked: visited");
    }

    #[test]
    fn due_age_is_the_band_interval_within_the_span() {
        assert_eq!(due_age(0, 5, 8), 0, "the nearest band: always");
        assert_eq!(due_age(2, 5, 8), 5);
        assert_eq!(due_age(2, 12, 8), 8, "the span bounds it");
        assert_eq!(due_age(1, 5, 1), 0, "no band-rate visits");
        assert_eq!(due_age(3, u16::MAX, u16::MAX), u8::MAX);
    }

    #[test]
    fn no_plan_without_a_binding_budget() {
        let p = BudgetParams::default();
        assert!(
            Visits::default().plan(&p, 8, false).is_none(),
            "first flush"
        );
        assert!(binding(0.0).plan(&p, 8, false).is_none(), "room left");
        assert!(binding(2.0).plan(&p, 8, true).is_none(), "degraded");
        assert!(binding(2.0).plan(&p, 1, false).is_none(), "off");
        let mut unlimited = p;
        unlimited.bytes_per_s = 0;
        assert!(
            binding(2.0).plan(&unlimited, 8, false).is_none(),
            "no budget"
        );
        assert!(binding(2.0).plan(&p, 8, false).is_some());
    }

    #[test]
    fn weights_round_trip_within_one_percent() {
        for w in [0.1f32, 0.25, 1.0 / 3.0, 1.0, 4.0, 7.9, 123.4] {
            let back = weight_of(weight_q(w));
            assert!(back <= w && w - back <= w / 100.0, "{w} -> {back}");
        }
        assert_eq!(weight_of(weight_q(0.0)), 0.0);
    }
}
