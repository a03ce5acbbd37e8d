//! The per-tick work of [`GridAoi`]: deciding which areas to recompute,
//! recomputing one area against the grid cells within its leave radius,
//! emitting the events in order (the queries and the [`AoiIndex`] impl are
//! in `grid_api.rs`).
//!
//! # Due areas
//!
//! An update processes every area ([`AoiIndex::update`]) or those listed
//! ([`AoiIndex::update_due`]: the cell lists the observers that flush this
//! tick, so an area is processed on its observer's flush ticks). The rest
//! sit out untouched. So that an area need not look at every tick, each
//! keeps the tick it was last processed (`seen`) and compares the stamps
//! (`ent_stamp`, `cell_stamp`, `ent_struct`, `cell_struct`, `last_struct`),
//! which hold the last tick of a change, with `> seen`: it sees every change
//! since it last looked; processed every update, that is "changed this
//! tick". A removed entity's slot is reclaimed only once every live area has
//! been processed since the removal (`reclaim`), so an area that skipped it
//! still names it in its leave and a newcomer in the slot is not taken for
//! it; areas are due at least once per flush period, so the wait is short.
//!
//! [`AoiIndex::update`]: super::AoiIndex::update
//! [`AoiIndex::update_due`]: super::AoiIndex::update_due
//!
//! # Recompute
//!
//! Recompute of one area, with a per-entity scratch `mark` and a fresh
//! `base` (old members `base`, forced `base + 1`, old members seen qualifying
//! `base + 2`, members of a capped selection `base + 3`): one pass over the
//! candidate cells finds the kept members and the newcomers; when neither a
//! member left nor one came the set is untouched (the common case), otherwise
//! it is rebuilt and the changes are reported leaves first, each group by
//! entity id.

use super::grid::{Area, GridAoi};
use super::types::{AoiEvent, AreaId, EventKind};
use crate::core::geom::Vec3;
use crate::core::ids::EntityId;

/// Reused buffers of the recompute (no allocation per update once warm).
#[derive(Clone, Debug, Default)]
pub(super) struct Scratch {
    /// Layout indices within the watch radius (`gather`) or entity slots
    /// within the leave radius (sweep mode), and their `d2`.
    pub hits: Vec<u32>,
    pub hit_d2: Vec<f64>,
    /// Distances of one layout row (sweep mode).
    pub row_d2: Vec<f64>,
    /// Rebuild cursor per cell.
    cursor: Vec<u32>,
    pub enters: Vec<u32>,
    pub leaves: Vec<u32>,
    pub qual: Vec<(f64, u32)>,
    /// Entities passing the filters within the watch radius, with `d2`.
    pub cands: Vec<(u32, f64)>,
    pub ids: Vec<EntityId>,
}

/// Warms the cache for `v` (a hint, no effect on the results): the next
/// area's member list, read first thing by its rescan, is otherwise a cache
/// miss per line (each list is its own allocation, ~2,000 of them on the
/// server's view workload, more than the L2 holds); on that workload the
/// rescan's `mark_members` spent ~80 % of its time waiting on it.
#[inline]
fn prefetch(v: &[u32]) {
    for line in v
        .chunks(16)
        .take(8)
        .map(<[u32]>::as_ptr)
        .chain(v.last().map(std::ptr::from_ref))
    {
        crate::core::prefetch::line(line);
    }
}

/// Inclusive cell ranges `(col0, col1, row0, row1)` and the padded radius.
type Range = (usize, usize, usize, usize);

impl GridAoi {
    /// Distance along z from `z` to row `r` (0 inside; edge rows reach out
    /// to infinity, they hold the clamped outsiders).
    #[inline]
    fn row_gap(&self, r: usize, z: f64) -> f64 {
        let (s, min) = (self.params.grid_cell_m, self.params.world.min_z);
        let lo = if r == 0 {
            f64::NEG_INFINITY
        } else {
            min + r as f64 * s
        };
        let hi = if r + 1 == self.rows {
            f64::INFINITY
        } else {
            min + (r + 1) as f64 * s
        };
        (lo - z).max(0.0).max(z - hi)
    }

    /// The layout range of row `r` holding every entity within `pad` of `p`
    /// (columns narrowed to the circle's chord over the row), or `None`.
    #[inline]
    pub(super) fn row_span(&self, r: usize, p: Vec3, pad: f64) -> Option<(usize, usize)> {
        let dz = self.row_gap(r, p.z);
        let h2 = pad * pad - dz * dz;
        if h2 < 0.0 {
            return None;
        }
        // Widen the chord a hair so rounding never drops a rim point.
        let hw = h2.sqrt() * (1.0 + 1e-12) + pad * 1e-12;
        let base = r * self.cols;
        let start = &self.layout.cell_start;
        let (c0, c1) = (self.col(p.x - hw), self.col(p.x + hw));
        Some((start[base + c0] as usize, start[base + c1 + 1] as usize))
    }

    /// Re-sorts the entities by cell when anything changed cell, was added
    /// or removed since the last rebuild (a counting sort, O(N + cells)).
    fn rebuild_layout(&mut self) {
        if !self.layout.dirty {
            return;
        }
        let l = &mut self.layout;
        l.cell_start.fill(0);
        for (s, &c) in self.cell_of.iter().enumerate() {
            if self.alive[s] {
                l.cell_start[c as usize + 1] += 1;
            }
        }
        for c in 1..l.cell_start.len() {
            l.cell_start[c] += l.cell_start[c - 1];
        }
        let n = self.live_ents;
        l.sx.resize(n, 0.0);
        l.sz.resize(n, 0.0);
        l.sflags.resize(n, 0);
        l.sslot.resize(n, 0);
        let cursor = &mut self.scratch.cursor;
        cursor.clear();
        cursor.extend_from_slice(&l.cell_start);
        for (s, &c) in self.cell_of.iter().enumerate() {
            if self.alive[s] {
                let k = cursor[c as usize] as usize;
                cursor[c as usize] += 1;
                l.sx[k] = self.pos[s].x;
                l.sz[k] = self.pos[s].z;
                l.sflags[k] = self.flags[s];
                l.sslot[k] = s as u32;
                self.arr_pos[s] = k as u32;
            }
        }
        l.relocated.clear();
        l.dirty = false;
        let sc = &mut self.scratch;
        sc.hits.resize(n, 0);
        sc.hit_d2.resize(n, 0.0);
        sc.row_d2.resize(n, 0.0);
    }

    pub(super) fn next_mark_base(&mut self) -> u32 {
        if self.mark_base > u32::MAX - 8 {
            self.mark.fill(0);
            self.mark_base = 0;
        }
        self.mark_base += 4;
        self.mark_base
    }

    /// Cells that may hold a point within `r` of `p` (padded against
    /// rounding so a point exactly on the rim is never missed).
    #[inline]
    pub(super) fn cell_range(&self, p: Vec3, r: f64) -> (Range, f64) {
        let pad = r + (p.x.abs().max(p.z.abs()) + r) * 1e-12;
        let range = (
            self.col(p.x - pad),
            self.col(p.x + pad),
            self.row(p.z - pad),
            self.row(p.z + pad),
        );
        (range, pad)
    }

    /// True when some cell within `r` of `p` has a stamp after tick `since`.
    pub(super) fn stamped_near(&self, stamps: &[u64], p: Vec3, r: f64, since: u64) -> bool {
        let ((c0, c1, r0, r1), _) = self.cell_range(p, r);
        (r0..=r1).any(|r| (c0..=c1).any(|c| stamps[r * self.cols + c] > since))
    }

    /// False when nothing within the watch radius changed since the area
    /// was last processed (it then sits the update out and its clock does
    /// not advance).
    pub(super) fn needs_recompute(&self, area: &Area) -> bool {
        let owner = area.owner as usize;
        area.dirty
            || self.ent_stamp[owner] > area.seen
            || self.stamped_near(
                &self.cell_stamp,
                self.pos[owner],
                area.rl + self.params.skin_m,
                area.seen,
            )
    }

    /// True when the watch list cannot be trusted at area clock `g`.
    fn needs_full(&self, area: &Area, g: f64) -> bool {
        let owner = area.owner as usize;
        let skin = self.params.skin_m;
        area.dirty
            || !area.kinetic_ok
            || self.ent_struct[owner] > area.seen
            || g - area.g_build >= self.expiry()
            || (self.last_struct > area.seen
                && self.stamped_near(
                    &self.cell_struct,
                    self.pos[owner],
                    area.rl + 2.0 * skin,
                    area.seen,
                ))
    }

    /// Updates the areas listed in `due` (ascending ids; every area when
    /// `None`): idle ones sit out, the others re-check their due watched
    /// pairs or rescan in full (see `grid_kinetic.rs`), or sweep. The others
    /// keep their sets and stamps until their next processing.
    pub(super) fn do_update(&mut self, out: &mut Vec<AoiEvent>, due: Option<&[AreaId]>) {
        out.clear();
        debug_assert!(
            due.is_none_or(|d| d.windows(2).all(|w| w[0] < w[1])),
            "due areas ascending"
        );
        self.recent_moves.sum_up(self.tick);
        self.classify_movers();
        self.rebuild_layout();
        let (mut next, mut min_seen) = (0, self.tick);
        for k in 0..self.order.len() {
            let a = self.order[k] as usize;
            let area = &self.areas[a];
            if !area.alive {
                continue;
            }
            if let Some(due) = due {
                // `order` is by id too: one merge pass.
                while next < due.len() && due[next] < area.id {
                    next += 1;
                }
                if due.get(next) != Some(&area.id) {
                    debug_assert!(area.seen <= self.tick);
                    min_seen = min_seen.min(area.seen);
                    continue;
                }
            }
            if let Some(&b) = self.order.get(k + 1) {
                prefetch(&self.areas[b as usize].members);
            }
            self.process(a, out);
        }
        self.reclaim(min_seen);
        self.tick += 1;
        self.recent_moves.tick_started(self.tick);
    }

    /// Processes area `a` in this update; afterwards it has seen this tick.
    fn process(&mut self, a: usize, out: &mut Vec<AoiEvent>) {
        let area = &self.areas[a];
        if area.members.len() >= self.params.sweep_min_interest && self.sweep_due(area.seen) {
            self.sweep_area(a, out);
        } else if !self.needs_recompute(area) {
            // Idle at every tick since `seen` (stamps only grow): the clock
            // advance of all of them is skipped.
            let area = &mut self.areas[a];
            area.g_idle += self.g_clock - area.g_seen;
        } else {
            let g = self.g_clock - area.g_idle;
            if self.needs_full(area, g) || !self.kinetic(a, g, out) {
                self.recompute(a, g, out);
            }
            self.areas[a].dirty = false;
        }
        let area = &mut self.areas[a];
        debug_assert!(area.seen <= self.tick && area.g_seen <= self.g_clock);
        area.seen = self.tick;
        area.g_seen = self.g_clock;
    }

    /// Marks the old members and forced entities; returns the newly forced
    /// ones in `scratch.enters`.
    pub(super) fn mark_members(&mut self, a: usize, base: u32) {
        let area = &self.areas[a];
        let (mark, enters) = (&mut self.mark, &mut self.scratch.enters);
        enters.clear();
        for &m in &area.members {
            mark[m as usize] = base;
        }
        for &f in &area.forced {
            if mark[f as usize] != base {
                enters.push(f);
            }
            mark[f as usize] = base + 1;
        }
    }

    /// Collects the layout entries within the (padded) leave radius of the
    /// owner into `scratch.hits` / `hit_d2`, branch-free; returns the count.
    pub(super) fn gather(&mut self, p: Vec3, rl: f64, rl2: f64) -> usize {
        let ((_, _, r0, r1), pad) = self.cell_range(p, rl);
        let mut n = 0;
        for r in r0..=r1 {
            let Some((k0, k1)) = self.row_span(r, p, pad) else {
                continue;
            };
            let l = &self.layout;
            let (hits, hit_d2) = (&mut self.scratch.hits, &mut self.scratch.hit_d2);
            for (k, (&x, &z)) in (k0..k1).zip(l.sx[k0..k1].iter().zip(&l.sz[k0..k1])) {
                let (dx, dz) = (p.x - x, p.z - z);
                let d2 = dx * dx + dz * dz;
                hits[n] = k as u32;
                hit_d2[n] = d2;
                n += (d2 <= rl2) as usize;
            }
        }
        n
    }

    /// One pass over the gathered entries: marks kept members `base + 2`,
    /// appends newcomers to `scratch.enters` and, for capped areas, every
    /// qualifying non-forced entity to `scratch.qual`. Returns the kept count.
    fn scan(&mut self, a: usize, base: u32) -> usize {
        let area = &self.areas[a];
        let owner = area.owner;
        let p = self.pos[owner as usize];
        let (re2, filter, band) = (area.re2, area.spec.filter, area.spec.height);
        let capped = area.cap != usize::MAX;
        let rl2 = area.rl2;
        let outer = area.rl + self.params.skin_m;
        let n = self.gather(p, outer, outer * outer);
        let (l, pos) = (&self.layout, &self.pos);
        let (sc, mark) = (&mut self.scratch, &mut self.mark);
        sc.qual.clear();
        sc.cands.clear();
        let mut kept = 0;
        for i in 0..n {
            let (k, d2) = (sc.hits[i] as usize, sc.hit_d2[i]);
            let j = l.sslot[k];
            let m = mark[j as usize];
            if m == base + 1 || j == owner || !filter.accepts(l.sflags[k]) {
                continue;
            }
            if band.is_some_and(|b| !b.accepts(p.y, pos[j as usize].y)) {
                continue;
            }
            sc.cands.push((j, d2));
            if d2 > rl2 {
                continue;
            }
            if m == base {
                mark[j as usize] = base + 2;
                kept += 1;
            } else if d2 <= re2 {
                sc.enters.push(j);
            } else {
                continue;
            }
            if capped {
                sc.qual.push((d2, j));
            }
        }
        kept
    }

    /// Full recompute of area `a` at area clock `g`: rescans the cells,
    /// reports the changes and rebuilds the watch list.
    fn recompute(&mut self, a: usize, g: f64, out: &mut Vec<AoiEvent>) {
        let limited = self.recompute_set(a, out);
        self.build_watch(a, g, limited);
    }

    /// Rescans and reports; returns whether the cap cut the set.
    pub(super) fn recompute_set(&mut self, a: usize, out: &mut Vec<AoiEvent>) -> bool {
        let base = self.next_mark_base();
        self.mark_members(a, base);
        let newly_forced = self.scratch.enters.len();
        let kept = self.scan(a, base);
        let area = &self.areas[a];
        let forced_n = area.forced.len();
        let qualifying = forced_n + kept + self.scratch.enters.len() - newly_forced;
        let limited = qualifying > area.cap;
        let kept = if limited {
            self.select_capped(a, base, newly_forced)
        } else {
            kept
        };
        self.emit_changes(a, base, kept, newly_forced, out);
        limited
    }

    /// Applies a scan's outcome to area `a`: old members still marked `base`
    /// leave, `scratch.enters` enter; reports both, each group by id.
    /// `kept` counts the old plain members that stay.
    pub(super) fn emit_changes(
        &mut self,
        a: usize,
        base: u32,
        kept: usize,
        newly_forced: usize,
        out: &mut Vec<AoiEvent>,
    ) {
        let area = &mut self.areas[a];
        let old_plain = area.members.len() - (area.forced.len() - newly_forced);
        let (leaves, enters) = (old_plain - kept, self.scratch.enters.len());
        if leaves == 0 && enters == 0 {
            return;
        }
        let (mark, ids, ent_id) = (&self.mark, &mut self.scratch.ids, &self.ent_id);
        let (aid, owner) = (area.id, ent_id[area.owner as usize]);
        let ev = |kind, entity| AoiEvent {
            area: aid,
            owner,
            entity,
            kind,
        };
        if leaves > 0 {
            // One pass: collect the leavers' ids, compact the stayers.
            ids.clear();
            let mut w = 0;
            for r in 0..area.members.len() {
                let m = area.members[r];
                if mark[m as usize] == base {
                    ids.push(ent_id[m as usize]);
                } else {
                    area.members[w] = m;
                    w += 1;
                }
            }
            area.members.truncate(w);
            ids.sort_unstable();
            out.extend(ids.iter().map(|&e| ev(EventKind::Leave, e)));
        }
        ids.clear();
        for &j in &self.scratch.enters {
            ids.push(ent_id[j as usize]);
            area.members.push(j);
        }
        ids.sort_unstable();
        out.extend(ids.iter().map(|&e| ev(EventKind::Enter, e)));
    }

    /// More qualify than the cap: keeps the forced, then the nearest
    /// (ties to the lower id). Rewrites the marks so that `recompute` sees
    /// dropped old members as unseen (`base`) and `scratch.enters` as the
    /// newly forced plus the selected newcomers. Returns the kept count.
    pub(super) fn select_capped(&mut self, a: usize, base: u32, newly_forced: usize) -> usize {
        let area = &self.areas[a];
        let room = area.cap.saturating_sub(area.forced.len());
        let (sc, mark, ent_id) = (&mut self.scratch, &mut self.mark, &self.ent_id);
        let key = |e: &(f64, u32)| (e.0, ent_id[e.1 as usize]);
        let cmp = |x: &(f64, u32), y: &(f64, u32)| {
            let (a, b) = (key(x), key(y));
            a.0.total_cmp(&b.0).then(a.1.cmp(&b.1))
        };
        if sc.qual.len() > room {
            if room > 0 {
                sc.qual.select_nth_unstable_by(room - 1, cmp);
            }
            // Old members that were seen but are now out of the selection
            // go back to `base` (leaving).
            for &(_, j) in &sc.qual[room..] {
                if mark[j as usize] == base + 2 {
                    mark[j as usize] = base;
                }
            }
            sc.qual.truncate(room);
        }
        sc.enters.truncate(newly_forced);
        let mut kept = 0;
        for &(_, j) in &sc.qual {
            if mark[j as usize] == base + 2 {
                kept += 1;
            } else {
                sc.enters.push(j);
            }
        }
        kept
    }
}
