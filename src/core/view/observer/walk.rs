//! The budget walk of a paced flush: each pulled slot ranked
//! ([`Walk::rank`], called by the pull for every slot it visits), the
//! ranked lists settled once the budget's balance is known ([`Ranked`]),
//! and the pending movements sent by rank within the budget
//! (`send_paced`).
//!
//! Part of [`Observer`]; reads and writes only the observer's slots, its
//! batch and its budget's balance.

use super::{FlushScratch, Observer, Slot, SlotState, COALESCE_VERSIONS_MAX};
use crate::core::ids::EntityId;
use crate::core::view::budget::{BudgetParams, Ranks, BANDS_MAX};
use crate::core::view::slots::ColdPrefetch;
use crate::core::view::visits::{weight_of, weight_q};

impl Observer {
    /// Sends the pending movements of a paced flush: every due one (slot
    /// positions in `due`), then those in `rest` (priority keys, see
    /// `prio_key`) by priority while the budget lasts. Returns the cut
    /// (`visits`): the lowest priority sent by priority, or the highest
    /// that waited if none went; 0 when nothing waited.
    pub(super) fn send_paced(&mut self, p: &BudgetParams, due: &[u32], rest: &mut Vec<u64>) -> f32 {
        // (The due ones' cold lines were asked for by the budget walk.)
        for &i in due {
            let before = self.batch.len();
            self.send_pending_at(i as usize);
            self.pacer.charge(p, self.batch.len() - before);
        }
        // The cut matters only to band-rate visits.
        let cuts = self.params.visit_span_max > 1;
        if self.pacer.tokens() <= 0.0 {
            // Nothing more goes this flush: no need to rank the rest.
            let best = rest.iter().min().filter(|_| cuts);
            return best.map_or(0.0, |&key| prio_of_key(key));
        }
        // Only the first few by priority can go (each costs at least
        // `MOVE_EVENT_BYTES_MIN` of what is left): those are selected, then
        // sorted. Plain integers sort several times faster than a float
        // comparator.
        let room = self.pacer.tokens().max(0.0) / MOVE_EVENT_BYTES_MIN as f64;
        let can_go = (room.ceil() as usize).saturating_add(1);
        let cut = can_go < rest.len();
        if cut {
            rest.select_nth_unstable(can_go);
            rest.truncate(can_go);
        }
        rest.sort_unstable();
        // What goes: its cold lines (the client's base, the handle) are
        // fetched together, not one miss after another.
        let mut room = self.pacer.tokens();
        for &key in rest.iter() {
            if room <= 0.0 {
                break;
            }
            self.slots.prefetch_cold(key as u32 as usize);
            room -= MOVE_EVENT_BYTES_MIN as f64;
        }
        let mut went = 0;
        for &key in rest.iter() {
            if self.pacer.tokens() <= 0.0 {
                break;
            }
            let before = self.batch.len();
            // The low half is the slot position.
            self.send_pending_at(key as u32 as usize);
            self.pacer.charge(p, self.batch.len() - before);
            went += 1;
        }
        debug_assert!(
            !cut || self.pacer.tokens() <= 0.0,
            "a movement the selection cut could still have gone"
        );
        match (
            rest.get(went),
            went.checked_sub(1).and_then(|w| rest.get(w)),
        ) {
            // Everything ranked went: the budget had room.
            (None, _) if !cut => 0.0,
            (_, Some(&last)) => prio_of_key(last),
            (Some(&first), None) => prio_of_key(first),
            (None, None) => 0.0,
        }
    }
}

/// What a paced flush's budget walk ranks by, worked out once per flush
/// (see [`Walk::rank`]).
pub(super) struct Walk {
    /// The observer's ground position in the wire's units.
    pub(super) me_u: Option<[f64; 2]>,
    pub(super) ranks: Ranks,
    /// Each band's refresh interval, in flushes.
    pub(super) intervals: [u16; BANDS_MAX],
    pub(super) degraded: bool,
    /// Each band's [`Slot::due_age`] (`visits::due_age`).
    pub(super) due_ages: [u8; BANDS_MAX],
    /// The important factor, while any entity is marked important.
    pub(super) important_factor: Option<f32>,
    /// Where the sends will read the slots' cold parts.
    pub(super) cold: ColdPrefetch,
}

/// A paced flush's pending movements as its budget walk ranked them (slot
/// positions and [`prio_key`]s), built in the pull: at that point the
/// budget's balance after the flush's fixed part is not known yet, so the
/// movements due by their band's minimum rate, which go only while the
/// debt is shallow, wait in `timely` until it is.
pub(super) struct Ranked {
    /// Must go whatever the budget (the nearest band, or a movement
    /// coalescing nearly a version byte's range), in table order.
    due: Vec<u32>,
    /// Due by their band's minimum rate if the debt is shallow.
    timely: Vec<u64>,
    /// May wait: by priority.
    rest: Vec<u64>,
}

impl Ranked {
    /// The lists, taken from `work` and emptied, with room for `slots`
    /// entries each (at most one per slot in all: the pushes never grow
    /// them).
    pub(super) fn take(work: &mut FlushScratch, slots: usize) -> Self {
        let mut r = Ranked {
            due: std::mem::take(&mut work.due),
            timely: std::mem::take(&mut work.timely),
            rest: std::mem::take(&mut work.by_prio),
        };
        r.due.clear();
        r.timely.clear();
        r.rest.clear();
        r.due.reserve(slots);
        r.timely.reserve(slots);
        r.rest.reserve(slots);
        r
    }

    /// The movements that go whatever the budget (slot positions, table
    /// order within each class) and those that go by priority (keys), once
    /// the debt is known: the `timely` ones join the first while it is
    /// `shallow`, the second otherwise. The third list is `timely`'s
    /// buffer, emptied.
    pub(super) fn settle(self, shallow: bool) -> (Vec<u32>, Vec<u64>, Vec<u64>) {
        let Ranked {
            mut due,
            mut timely,
            mut rest,
        } = self;
        if shallow {
            // The low half of a key is the slot position.
            due.extend(timely.iter().map(|&key| key as u32));
        } else {
            rest.extend_from_slice(&timely);
        }
        timely.clear();
        (due, rest, timely)
    }
}

impl Walk {
    /// A slot the pull skipped under a band-rate plan (`visits`): aged, and
    /// its priority grown by its last walk's weight, as though it moved
    /// (most in view do); it waits unranked.
    #[inline(always)]
    pub(super) fn rest_skipped(slot: &mut Slot) {
        slot.age = slot.age.saturating_add(1);
        slot.prio += weight_of(slot.w_q);
    }

    /// A live slot the pull just listed for the flush's catch-up, which
    /// sends its pending movement before the detail: only aged, not
    /// listed (an entry sent before its turn would be a send of nothing
    /// that takes a movement's place in the budget).
    #[inline(always)]
    pub(super) fn age(slot: &mut Slot) {
        debug_assert_eq!(slot.state, SlotState::Live, "a catch-up is of a live slot");
        slot.age = slot.age.saturating_add(1);
    }

    /// The budget walk's step for `slot` (entity `e`, table position
    /// `i`), just pulled (`d2`: its squared distance as the pull worked it
    /// out, if it did): ages it and, if a movement is pending, grows its
    /// priority and lists it in `ranked` (`due` with its cold line asked
    /// for, `timely` or `rest`); `important`: the observer's important
    /// entities.
    #[inline(always)]
    pub(super) fn rank(
        &self,
        i: u32,
        e: EntityId,
        slot: &mut Slot,
        d2: Option<f64>,
        important: &[(EntityId, u16)],
        ranked: &mut Ranked,
    ) {
        if slot.state != SlotState::Live {
            return;
        }
        slot.age = slot.age.saturating_add(1);
        if !slot.has_pending() {
            return;
        }
        // In the wire's units, squared: no division, one `f32` root.
        let d2 = d2.unwrap_or_else(|| self.me_u.map_or(0.0, |m| slot.dist2_xz_units(m)));
        debug_assert_eq!(
            d2.to_bits(),
            self.me_u.map_or(0.0, |m| slot.dist2_xz_units(m)).to_bits(),
            "the pull's distance is the slot's"
        );
        let band = self.ranks.band(d2);
        let mut w = self.ranks.weight(d2);
        if let Some(factor) = self.important_factor {
            if important.iter().any(|(x, _)| *x == e) {
                w *= factor;
            }
        }
        slot.prio += w;
        slot.w_q = weight_q(w);
        slot.due_age = self.due_ages[band];
        // A movement coalescing nearly a version byte's range goes out
        // whatever the budget (the wire's step is at most 256).
        // Degraded, even the nearest band goes by priority (it has the
        // highest), so a crowd cannot hold the client over its budget.
        let coalesced = slot.last - slot.sent() >= COALESCE_VERSIONS_MAX;
        if (!self.degraded && band == 0) || coalesced {
            // What the send reads (the client's base, the handle) is
            // asked for now, ahead of the send.
            self.cold.line(i as usize);
            ranked.due.push(i);
        } else if !self.degraded && slot.age >= self.intervals[band] {
            self.cold.line(i as usize);
            ranked.timely.push(prio_key(slot.prio, i));
        } else {
            ranked.rest.push(prio_key(slot.prio, i));
        }
    }
}

/// The sort key of a movement that may wait: ascending keys run by
/// priority, highest first (`f32::total_cmp`'s order), then by slot
/// position `i`.
#[inline]
pub(super) fn prio_key(prio: f32, i: u32) -> u64 {
    let bits = prio.to_bits() as i32;
    // total_cmp's trick: flip the magnitude bits of negatives, so the bits
    // compare as signed integers in total order; then as unsigned.
    let ordered = (bits ^ (((bits >> 31) as u32) >> 1) as i32) as u32 ^ 0x8000_0000;
    (u64::from(!ordered) << 32) | u64::from(i)
}

/// The priority a [`prio_key`] was made of (bit for bit).
#[inline]
fn prio_of_key(key: u64) -> f32 {
    let x = !((key >> 32) as u32) ^ 0x8000_0000;
    let mask = (((x as i32) >> 31) as u32) >> 1;
    f32::from_bits(x ^ mask)
}

/// The fewest bytes a movement event takes (tag, handle, version byte, two
/// one-byte deltas, heading: `codec`'s `a_small_move_is_six_bytes`).
const MOVE_EVENT_BYTES_MIN: usize = 6;

#[cfg(test)]
mod ranked_tests {
    use super::{prio_key, Ranked};

    /// Movements due by their band's minimum rate go whatever the budget
    /// only while the debt is shallow; deeper, they wait their turn by
    /// priority with the rest.
    #[test]
    fn timely_movements_are_due_only_while_the_debt_is_shallow() {
        let ranked = || Ranked {
            due: vec![0, 4],
            timely: vec![prio_key(2.0, 2), prio_key(0.5, 7)],
            rest: vec![prio_key(1.0, 1)],
        };
        let (due, rest, timely) = ranked().settle(true);
        assert_eq!(due, [0, 4, 2, 7]);
        assert_eq!(rest, [prio_key(1.0, 1)]);
        assert!(timely.is_empty());
        let (due, mut rest, timely) = ranked().settle(false);
        assert_eq!(due, [0, 4]);
        rest.sort_unstable();
        assert_eq!(rest, [prio_key(2.0, 2), prio_key(1.0, 1), prio_key(0.5, 7)]);
        assert!(timely.is_empty());
    }
}

#[cfg(test)]
mod prio_key_tests {
    use super::prio_key;

    #[test]
    fn keys_sort_as_priority_descending_then_slot() {
        let prios = [
            0.0f32,
            -0.0,
            1.0,
            0.5,
            1e-30,
            3.4e38,
            f32::INFINITY,
            -1.0,
            f32::NEG_INFINITY,
            f32::NAN,
            0.25,
            0.25,
            1.0,
        ];
        let mut by_cmp: Vec<(f32, u32)> = prios.iter().zip(0..).map(|(&p, i)| (p, i)).collect();
        by_cmp.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut keys: Vec<u64> = prios
            .iter()
            .zip(0..)
            .map(|(&p, i)| prio_key(p, i))
            .collect();
        keys.sort_unstable();
        let from_keys: Vec<u32> = keys.iter().map(|&k| k as u32).collect();
        for (&k, &(p, _)) in keys.iter().zip(&by_cmp) {
            assert_eq!(
                super::prio_of_key(k).to_bits(),
                p.to_bits(),
                "{p} from its key"
            );
        }
        let from_cmp: Vec<u32> = by_cmp.iter().map(|&(_, i)| i).collect();
        assert_eq!(from_keys, from_cmp);
    }
}
