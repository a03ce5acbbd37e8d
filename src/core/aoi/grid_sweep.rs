//! The sweep mode of [`GridAoi`]: when most entities moved since the last
//! update, every area whose neighbourhood changed rescans the grid cells
//! within its leave radius directly, with no watch lists.
//!
//! With nearly everything moving, the watch lists of `grid_kinetic.rs` cost
//! more than they save: each rescan there reaches out to the leave radius
//! plus the skin, computes a deadline (a square root) per watched entity,
//! and the deadlines fall due within a few ticks anyway. A sweep rescan
//! reads only the layout rows within the leave radius (narrowed to the
//! circle's chord), keeps the entries inside in one branch-free pass, and
//! diffs them against the old set through the per-slot `mark`.
//!
//! Only areas holding at least [`AoiParams::sweep_min_interest`] entities
//! sweep (sparse areas stay kinetic: most of their watch lists have nothing
//! due in a tick). A swept area's watch list is left untrusted
//! (`kinetic_ok = false`), so its next kinetic update rescans in full.
//!
//! Measured on the reference workload (`cargo bench --bench aoi`, per
//! CPU-second, load 7-10 on 2 cores, so +-15%): c 0.6 -> 1.0 M moves/s,
//! b 0.9 -> 1.1, a unchanged (3-4). Callgrind counts *more* instructions
//! per move with the sweep (c 5,300 -> 6,100, b 3,100 -> 4,600): the
//! kinetic pass is branchy (unpredictable due checks) and takes a square
//! root per due pair, the sweep's per-candidate loop is straight-line work,
//! so it retires far more instructions per cycle. Per area and tick it reads
//! about `(2r + cell) * 2r` of the layout (c: ~135 candidates for ~56
//! members); that scan, the `mark` diff and the per-mover bookkeeping are
//! what limit it now.
//!
//! [`AoiParams::sweep_min_interest`]: super::AoiParams::sweep_min_interest
//!
//! This file owns the choice of mode and the plain-area rescan; it must not
//! touch the layout or the id maps.

use super::grid::GridAoi;
use super::types::{AoiEvent, FlagFilter};
use crate::core::geom::Vec3;

/// Sweep when at least `1 / SWEEP_MOVERS_DIV` of the entities moved since
/// the last update.
const SWEEP_MOVERS_DIV: usize = 4;

impl GridAoi {
    /// True when this update should sweep (call before the movers are
    /// consumed).
    pub(super) fn sweep_due(&self) -> bool {
        self.movers.len() * SWEEP_MOVERS_DIV >= self.live_ents.max(1)
    }

    /// False when nothing within the leave radius of area `a` changed since
    /// it was last processed (its set cannot have changed).
    fn needs_sweep(&self, a: usize) -> bool {
        let area = &self.areas[a];
        let owner = area.owner as usize;
        area.dirty
            || self.ent_stamp[owner] > area.seen
            || self.stamped_near(&self.cell_stamp, self.pos[owner], area.rl, area.seen)
    }

    /// One area in sweep mode: rescans and reports when something near it
    /// changed; always leaves its watch list untrusted.
    pub(super) fn sweep_area(&mut self, a: usize, out: &mut Vec<AoiEvent>) {
        if self.needs_sweep(a) {
            let area = &self.areas[a];
            if area.has_height || area.cap != usize::MAX {
                self.recompute_set(a, out);
            } else {
                let base = self.next_mark_base();
                self.mark_members(a, base);
                let newly_forced = self.scratch.enters.len();
                let kept = self.sweep_scan(a, base);
                self.emit_changes(a, base, kept, newly_forced, out);
            }
        }
        let area = &mut self.areas[a];
        area.kinetic_ok = false;
        area.dirty = false;
    }

    /// The rescan of an area with neither height band nor cap: marks kept
    /// old members `base + 2`, appends newcomers to `scratch.enters`;
    /// returns the kept count.
    fn sweep_scan(&mut self, a: usize, base: u32) -> usize {
        let area = &self.areas[a];
        let owner = area.owner;
        let (re2, rl2, filter) = (area.re2, area.rl2, area.spec.filter);
        let p = self.pos[owner as usize];
        let hysteresis = re2 < rl2;
        let n = if hysteresis {
            self.gather_hits::<true>(p, area.rl, rl2)
        } else {
            self.gather_hits::<false>(p, area.rl, rl2)
        };
        let (l, sc, mark) = (&self.layout, &mut self.scratch, &mut self.mark);
        let all = filter == FlagFilter::ACCEPT_ALL;
        let mut kept = 0;
        for (i, &k) in sc.hits[..n].iter().enumerate() {
            let k = k as usize;
            let (j, f) = (l.sslot[k], l.sflags[k]);
            let passes = if all { f != 0 } else { filter.accepts(f) };
            if j == owner || !passes {
                continue;
            }
            let m = &mut mark[j as usize];
            if *m == base {
                *m = base + 2;
                kept += 1;
            } else if *m != base + 1 && !(hysteresis && sc.hit_d2[i] > re2) {
                sc.enters.push(j);
            }
        }
        kept
    }

    /// The layout entries within `r` of `p` (`d2 <= r2`), into
    /// `scratch.hits` (and their `d2` into `scratch.hit_d2` when `D2`),
    /// in one branch-free pass per row; returns the count.
    // Indexed loops over pre-cut slices vectorise where iterator zips did not.
    #[allow(clippy::needless_range_loop)]
    fn gather_hits<const D2: bool>(&mut self, p: Vec3, r: f64, r2: f64) -> usize {
        let ((_, _, r0, r1), pad) = self.cell_range(p, r);
        let mut hits = std::mem::take(&mut self.scratch.hits);
        let mut hit_d2 = std::mem::take(&mut self.scratch.hit_d2);
        let mut row_d2 = std::mem::take(&mut self.scratch.row_d2);
        let mut n = 0;
        for row in r0..=r1 {
            let Some((k0, k1)) = self.row_span(row, p, pad) else {
                continue;
            };
            let len = k1 - k0;
            let (sx, sz) = (&self.layout.sx[k0..k1], &self.layout.sz[k0..k1]);
            // Dense distances first (indexed loop over equal lengths: it
            // vectorises), then a branch-free compaction.
            let d2s = &mut row_d2[..len];
            let (sx, sz) = (&sx[..len], &sz[..len]);
            for i in 0..len {
                let (dx, dz) = (p.x - sx[i], p.z - sz[i]);
                d2s[i] = dx * dx + dz * dz;
            }
            let out = &mut hits[n..n + len];
            let out_d2 = &mut hit_d2[if D2 { n..n + len } else { 0..0 }];
            let mut c = 0;
            for i in 0..len {
                let d2 = d2s[i];
                // `c <= i` always; the `min` lets the compiler drop the
                // bounds check.
                out[c.min(i)] = (k0 + i) as u32;
                if D2 {
                    out_d2[c.min(i)] = d2;
                }
                c += (d2 <= r2) as usize;
            }
            n += c;
        }
        self.scratch.hits = hits;
        self.scratch.hit_d2 = hit_d2;
        self.scratch.row_d2 = row_d2;
        n
    }
}

#[cfg(test)]
mod tests {
    use super::super::{AoiIndex, AoiParams, AreaSpec, BruteAoi};
    use super::*;
    use crate::core::ids::EntityId;

    /// A dense random walk where every area sweeps (threshold 0), with
    /// hysteresis and a flag filter on some areas: events equal the oracle's.
    #[test]
    fn sweeping_areas_match_the_oracle() {
        let p = AoiParams {
            grid_cell_m: 7.0,
            sweep_min_interest: 0,
            ..AoiParams::default()
        };
        let (mut g, mut b) = (GridAoi::new(p).unwrap(), BruteAoi::new(p).unwrap());
        let mut s = 12345u64;
        let mut rnd = move || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 11) as f64 / (1u64 << 53) as f64
        };
        let mut xs: Vec<(f64, f64)> = (0..150).map(|_| (rnd() * 60.0, rnd() * 60.0)).collect();
        for (i, &(x, z)) in xs.iter().enumerate() {
            let id = EntityId(i as u64);
            let flags = if i % 5 == 0 { 2 } else { 1 };
            let mut spec = AreaSpec::circle(8.0);
            if i % 3 == 0 {
                spec.leave_radius_m = Some(10.0);
            }
            if i % 7 == 0 {
                spec.filter = FlagFilter {
                    any: 1,
                    need: 0,
                    forbid: 0,
                };
            }
            for a in [&mut g as &mut dyn AoiIndex, &mut b] {
                a.add_entity(id, Vec3::ground(x, z), flags).unwrap();
                a.add_area(id, spec).unwrap();
            }
        }
        let (mut eg, mut eb, mut total) = (Vec::new(), Vec::new(), 0);
        for _ in 0..25 {
            for (i, p) in xs.iter_mut().enumerate() {
                *p = (p.0 + rnd() * 2.0 - 1.0, p.1 + rnd() * 2.0 - 1.0);
                let pos = Vec3::ground(p.0, p.1);
                g.set_position(EntityId(i as u64), pos).unwrap();
                b.set_position(EntityId(i as u64), pos).unwrap();
            }
            g.update(&mut eg);
            b.update(&mut eb);
            assert_eq!(eg, eb);
            total += eg.len();
            g.verify();
        }
        assert!(total > 100, "the walk changes the sets: {total}");
    }
}
