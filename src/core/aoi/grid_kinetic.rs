//! The watch lists of [`GridAoi`]: Verlet lists with a deadline per pair,
//! so a tick re-checks only the pairs that could have crossed a rim.
//!
//! # The movement clock
//!
//! At each update every entity's step (ground distance since the previous
//! update) is measured. A step longer than `skin_m / 2`, or any height
//! change, is a *jump*: it stamps the cells at both ends as structural, and
//! every area within `leave + 2 * skin` of such a cell rescans in full. The
//! longest ordinary step advances the clock `g_clock`. An area whose
//! neighbourhood (`leave + skin`) saw no change in a tick does not advance its
//! own clock (`g_idle` holds what it skipped).
//!
//! An area is processed only on the updates it is due (see "Due areas" in
//! `grid_update.rs`). Found idle after sitting out some, it was idle at all
//! of them (stamps only grow): `g_idle` takes the clock's whole advance since
//! it was last processed (`g_seen`). Found busy, its clock counts every
//! skipped tick's advance, which only brings deadlines and expiry earlier.
//! Expiry also bounds what a skipping area can miss: while its list is
//! trusted, the clock advanced less than `skin / 2` since it last looked, so
//! a member (or a jumper, or a removed entity) it last saw within `leave`
//! left structural stamps within `leave + skin` of the owner, inside the
//! `leave + 2 * skin` that `needs_full` looks at.
//!
//! # Deadlines
//!
//! A full rescan lists every entity within `leave + skin` that passes the
//! filters (the *watch list*) and gives each a deadline: its area clock now
//! plus half its *slack*, the distance it must cover relative to the owner
//! before its status can change (`leave - d` for a member,
//! `min(d, leave + skin) - enter` otherwise). Owner and entity each cover at
//! most the clock's advance, so before the deadline nothing can have changed.
//! An entity outside the list was farther than `leave + skin`; it cannot reach
//! the enter radius before the owner's clock advanced `skin / 2` since the
//! rescan, when the list expires and the area rescans. Every slack is padded
//! against rounding. Flag changes, additions, removals and forcing are
//! structural (rescans), so the filters checked at the rescan hold.
//!
//! This file owns the clock, the deadline rule and the watch-list pass; it
//! must not touch the layout or the id maps.

use super::grid::{GridAoi, Watch};
use super::types::{dist2, AoiEvent, EventKind};
use crate::core::geom::Vec3;

/// Rounding allowance for slacks computed around `p` at clock `g`.
#[inline]
pub(super) fn slack_eps(p: Vec3, outer: f64, g: f64) -> f64 {
    1e-9 * (1.0 + p.x.abs() + p.z.abs() + outer) + g * 1e-14
}

/// The deadline of a pair at squared distance `d2`, checked at clock `g`.
#[inline]
pub(super) fn deadline(g: f64, member: bool, d2: f64, radii: (f64, f64, f64), eps: f64) -> f64 {
    let (re, rl, outer) = radii;
    let d = d2.sqrt();
    let slack = if member { rl - d } else { d.min(outer) - re };
    g + 0.5 * slack - eps
}

impl GridAoi {
    /// Measures the steps since the last update, stamps the jumps and
    /// advances the movement clock.
    pub(super) fn classify_movers(&mut self) {
        let tau = self.params.skin_m * 0.5;
        let mut dg = 0.0f64;
        for i in 0..self.movers.len() {
            let s = self.movers[i] as usize;
            if !self.alive[s] {
                continue;
            }
            let (from, to) = (self.last_pos[s], self.pos[s]);
            self.last_pos[s] = to;
            let step = dist2(from, to).sqrt();
            if step > tau || from.y != to.y {
                let c_from = self.cell_index(from);
                self.mark_struct(s, c_from);
                self.mark_struct(s, self.cell_of[s] as usize);
            } else {
                dg = dg.max(step);
            }
        }
        self.movers.clear();
        self.dg = if dg > 0.0 {
            dg * (1.0 + 1e-9) + 1e-12
        } else {
            0.0
        };
        self.g_clock += self.dg;
    }

    /// The area-clock advance after which a watch list expires.
    #[inline]
    pub(super) fn expiry(&self) -> f64 {
        0.5 * self.params.skin_m * (1.0 - 1e-9)
    }

    /// Rebuilds area `a`'s watch list from `scratch.cands` after a full
    /// recompute at area clock `g`; `limited` says the cap cut the set.
    pub(super) fn build_watch(&mut self, a: usize, g: f64, limited: bool) {
        let base = self.next_mark_base();
        let cutoff = self.expiry();
        let area = &mut self.areas[a];
        for &m in &area.members {
            self.mark[m as usize] = base;
        }
        let p = self.pos[area.owner as usize];
        let outer = area.rl + self.params.skin_m;
        let radii = (area.spec.radius_m, area.rl, outer);
        let eps = slack_eps(p, outer, g);
        area.watch.clear();
        // Entries due only after the list expires go behind `live`.
        let (mut min_rel, mut live) = (f64::INFINITY, 0);
        for &(j, d2) in &self.scratch.cands {
            let member = self.mark[j as usize] == base;
            let w = Watch::new(deadline(0.0, member, d2, radii, eps), j, member);
            area.watch.push(w);
            if (w.rel as f64) < cutoff {
                min_rel = min_rel.min(w.rel as f64);
                let last = area.watch.len() - 1;
                area.watch.swap(live, last);
                live += 1;
            }
        }
        area.live = live as u32;
        area.min_rel = min_rel;
        area.g_build = g;
        area.kinetic_ok = !limited;
    }

    /// Re-checks the due entries of area `a`'s watch list at area clock `g`
    /// and reports the changes. Returns false, having reported nothing, when
    /// the changes would break the cap (the caller then rescans in full).
    pub(super) fn kinetic(&mut self, a: usize, g: f64, out: &mut Vec<AoiEvent>) -> bool {
        let cutoff = self.expiry();
        let area = &mut self.areas[a];
        if g - area.g_build < area.min_rel {
            return true;
        }
        let p = self.pos[area.owner as usize];
        let outer = area.rl + self.params.skin_m;
        let radii = (area.spec.radius_m, area.rl, outer);
        let (re2, rl2, filter, band) = (area.re2, area.rl2, area.spec.filter, area.spec.height);
        let eps = slack_eps(p, outer, g);
        let sc = &mut self.scratch;
        sc.leaves.clear();
        sc.enters.clear();
        // Deadlines are stored relative to the last rescan.
        let t = g - area.g_build;
        let (mut min_rel, mut live, mut i) = (f64::INFINITY, area.live as usize, 0);
        while i < live {
            let w = &mut area.watch[i];
            if w.rel as f64 <= t {
                let j = w.slot() as usize;
                let e = self.pos[j];
                let passes = self.alive[j]
                    && filter.accepts(self.flags[j])
                    && band.is_none_or(|b| b.accepts(p.y, e.y));
                if passes {
                    let d2 = dist2(p, e);
                    let mut member = w.member();
                    if member && d2 > rl2 {
                        member = false;
                        sc.leaves.push(j as u32);
                    } else if !member && d2 <= re2 {
                        member = true;
                        sc.enters.push(j as u32);
                    }
                    *w = Watch::new(deadline(t, member, d2, radii, eps), j as u32, member);
                } else {
                    // A removed entity or a reused slot: never a member here
                    // (members are structural neighbours, rescanned in full).
                    debug_assert!(!w.member(), "a watched member vanished without a rescan");
                    w.rel = f32::INFINITY;
                }
                if w.rel as f64 >= cutoff {
                    // Not due again before the list expires: park it.
                    live -= 1;
                    area.watch.swap(i, live);
                    continue;
                }
            }
            min_rel = min_rel.min(area.watch[i].rel as f64);
            i += 1;
        }
        area.live = live as u32;
        area.min_rel = min_rel;
        let (leaves, enters) = (sc.leaves.len(), sc.enters.len());
        if leaves == 0 && enters == 0 {
            return true;
        }
        if area.cap != usize::MAX && area.members.len() - leaves + enters > area.cap {
            return false;
        }
        self.apply_watch_changes(a, out);
        true
    }

    /// Applies `scratch.leaves` / `scratch.enters` to area `a`'s set and
    /// reports them, leaves first, each by entity id.
    fn apply_watch_changes(&mut self, a: usize, out: &mut Vec<AoiEvent>) {
        let area = &mut self.areas[a];
        let sc = &mut self.scratch;
        let (aid, owner) = (area.id, self.ent_id[area.owner as usize]);
        let ev = |kind, entity| AoiEvent {
            area: aid,
            owner,
            entity,
            kind,
        };
        let ids = &mut sc.ids;
        ids.clear();
        ids.extend(sc.leaves.iter().map(|&j| self.ent_id[j as usize]));
        ids.sort_unstable();
        out.extend(ids.iter().map(|&e| ev(EventKind::Leave, e)));
        for &j in &sc.leaves {
            let i = area.members.iter().position(|&m| m == j);
            area.members
                .swap_remove(i.expect("a leaving member is in the set"));
        }
        ids.clear();
        ids.extend(sc.enters.iter().map(|&j| self.ent_id[j as usize]));
        ids.sort_unstable();
        out.extend(ids.iter().map(|&e| ev(EventKind::Enter, e)));
        area.members.extend_from_slice(&sc.enters);
    }
}

#[cfg(test)]
mod tests {
    use super::super::grid::f32_at_most;
    use super::*;

    #[test]
    fn f32_deadlines_round_down() {
        for v in [
            0.0,
            1e-30,
            -1e-30,
            0.1,
            -0.1,
            1.0 / 3.0,
            12345.678,
            -7.25,
            1e30,
        ] {
            let r = f32_at_most(v);
            assert!(r as f64 <= v, "{v} -> {r}");
            assert!((v - r as f64).abs() <= v.abs() * 1e-6 + 1e-37, "{v} -> {r}");
        }
        assert_eq!(f32_at_most(f64::INFINITY), f32::INFINITY);
    }

    #[test]
    fn deadlines_use_half_the_slack() {
        let radii = (10.0, 12.0, 20.0);
        // A member 9 m out must move 3 m (relative) to leave: due in 1.5.
        assert_eq!(deadline(1.0, true, 81.0, radii, 0.0), 2.5);
        // An outsider at 15 m is 5 m from the enter rim.
        assert_eq!(deadline(0.0, false, 225.0, radii, 0.0), 2.5);
        // Beyond the watch radius the slack stops growing.
        assert_eq!(deadline(0.0, false, 900.0, radii, 0.0), 5.0);
        assert!(deadline(0.0, false, 900.0, radii, 1e-9) < 5.0);
    }
}
