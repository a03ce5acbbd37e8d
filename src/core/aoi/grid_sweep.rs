//! The sweep mode of [`GridAoi`]: when many entities moved since an area
//! was last processed (a quarter of them: [`RecentMoves`]), a dense area
//! whose neighbourhood changed rescans the grid cells within its leave
//! radius directly, with no watch list.
//!
//! With nearly everything moving, the watch lists of `grid_kinetic.rs` cost
//! more than they save: each rescan there reaches out to the leave radius
//! plus the skin, computes a deadline (a square root) per watched entity,
//! and the deadlines fall due within a few ticks anyway. A sweep rescan
//! reads only the layout rows within the leave radius (narrowed to the
//! circle's chord), keeps the entries inside that pass the flag filter in
//! one branch-free pass, and diffs them against the old set through the
//! per-slot `mark`. Height bands are judged on the kept entries; a capped
//! area lists its qualifying entities with their distances (for the
//! nearest-first selection) only when more qualify than the cap, which a
//! view rarely does.
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
//! about `(2r + cell / 4) * 2r` of the layout (see `COL_SPLIT`); that scan,
//! the `mark` diff and the per-mover bookkeeping are what limit it now.
//!
//! Capped and height-banded areas (every client view: cap 100) used to
//! rescan through the kinetic path's full recompute (out to the leave
//! radius plus the skin, every candidate listed for a watch list the sweep
//! then distrusts). On the server's view workload (`AOI_BENCH_ONLY=srv`:
//! 2,000 views of radius 45/48 m, cap 100, ~57 members, half the entities
//! moving per update) sweeping them here, with the narrow columns and the
//! prefetch of the next member list (`grid_update.rs`), takes the update
//! from ~2.1 to ~1.0 ms of CPU (x2.1, same run, alternated); the reference
//! configurations gain x1.2 (a, c) to x1.35 (b) per CPU-second.
//!
//! On the cost probe (callgrind, host instructions over 4 steady seconds at
//! 2,000 clients) the gather's compaction took ~17 instructions a candidate
//! (~130 candidates, ~70 hits an area). The owner marked `base + 1` (like a
//! forced entity) instead of tested per candidate, `ACCEPT_ALL` a const
//! parameter, and the hit loop over a pre-cut slice (no bounds check per
//! hit): the update 677 -> 642 M, the host 3,321 -> 3,286 M (-1.0 %), the
//! same results. Tried and dropped there: rows a quarter cell tall
//! (candidates -27 %, but three times the row spans at ~4 candidates a
//! row: host +0.1 %); the distance computed in the compaction loop, with no
//! row buffer (scalar, ~2 instructions a candidate more than the vectorised
//! pass: host +0.1 %).
//! The gather itself now lives in `gather.rs`: four candidates a step with
//! AVX2 where the CPU has it (21 -> 9.2 instructions a candidate).
//!
//! [`AoiParams::sweep_min_interest`]: super::AoiParams::sweep_min_interest
//!
//! This file owns the choice of mode and the sweep rescan; it must not
//! touch the layout or the id maps.

use super::gather::{gather_row, Row};
use super::grid::GridAoi;
use super::types::{AoiEvent, FlagFilter};
use crate::core::geom::Vec3;

/// An area sweeps when at least `1 / SWEEP_MOVERS_DIV` of the entities
/// moved since it was last processed.
const SWEEP_MOVERS_DIV: usize = 4;

/// The ticks [`RecentMoves`] remembers: an area processed less often than
/// this counts every entity as moved (it sweeps if dense).
pub(super) const RECENT_MOVE_TICKS: usize = 64;

/// How many entities moved since each of the latest ticks: the count of
/// entities whose last move came at tick `t`, for the last
/// [`RECENT_MOVE_TICKS`] ticks (a ring), and their sums from the newest
/// back, worked out once an update.
///
/// An area processed only on its observer's flush ticks (`update_due`)
/// sees the movements of several ticks at once: what makes sweeping pay is
/// the share of entities that moved since *it* last looked, not in the last
/// tick (with a 25 ms tick and moves at 10 Hz, a quarter of the entities
/// move a tick but all of them between two of an area's 10 Hz updates; the
/// per-tick rule kept such areas on their watch lists, at twice the cost).
/// Each entity is counted once, at its newest move (`moved`), so a count is
/// of distinct entities. A removed entity stays counted until its move
/// leaves the window or its slot's next entity moves: the rule leans to a
/// sweep, which is exact either way.
#[derive(Clone, Debug)]
pub(crate) struct RecentMoves {
    /// Entities whose newest move came at tick `t`, at `t % RECENT_MOVE_TICKS`.
    last_at: [u32; RECENT_MOVE_TICKS],
    /// At `j`: the entities that moved in the last `j` ticks, the update's
    /// own included (ticks `tick - j + 1 ..= tick`); `[0]` is 0.
    since: [u32; RECENT_MOVE_TICKS + 1],
    /// The tick `since` was summed up at.
    summed_at: u64,
}

impl Default for RecentMoves {
    fn default() -> Self {
        RecentMoves {
            last_at: [0; RECENT_MOVE_TICKS],
            since: [0; RECENT_MOVE_TICKS + 1],
            summed_at: 0,
        }
    }
}

impl RecentMoves {
    /// An entity whose newest move was at tick `before` (0: never) moved at
    /// `tick` (`before < tick`).
    #[inline]
    pub(super) fn moved(&mut self, before: u64, tick: u64) {
        debug_assert!(before < tick, "one move a tick is counted");
        if before != 0 && tick - before < RECENT_MOVE_TICKS as u64 {
            let at = &mut self.last_at[(before % RECENT_MOVE_TICKS as u64) as usize];
            debug_assert!(*at > 0, "a move in the window is counted");
            *at = at.saturating_sub(1);
        }
        self.last_at[(tick % RECENT_MOVE_TICKS as u64) as usize] += 1;
    }

    /// Sums the counts from `tick` (the update's) back.
    pub(super) fn sum_up(&mut self, tick: u64) {
        let mut sum = 0u32;
        for j in 1..=RECENT_MOVE_TICKS {
            // Ticks before the first one count nothing (the ring is zero
            // there).
            let t = tick.wrapping_sub(j as u64 - 1);
            sum += self.last_at[(t % RECENT_MOVE_TICKS as u64) as usize];
            self.since[j] = sum;
        }
        self.summed_at = tick;
    }

    /// A new tick begins: its slot of the ring forgets the tick
    /// [`RECENT_MOVE_TICKS`] before it.
    pub(super) fn tick_started(&mut self, tick: u64) {
        self.last_at[(tick % RECENT_MOVE_TICKS as u64) as usize] = 0;
    }

    /// Entities that moved after tick `seen` (up to the summed tick); `None`
    /// when `seen` is further back than the window.
    #[inline]
    pub(super) fn since(&self, seen: u64) -> Option<usize> {
        let j = self.summed_at.checked_sub(seen)?;
        self.since
            .get(usize::try_from(j).ok()?)
            .map(|&n| n as usize)
    }
}

impl GridAoi {
    /// True when an area last processed at tick `seen` should sweep in this
    /// update: a quarter of the entities moved since (see [`RecentMoves`]).
    pub(super) fn sweep_due(&self, seen: u64) -> bool {
        self.recent_moves
            .since(seen)
            .is_none_or(|moved| moved * SWEEP_MOVERS_DIV >= self.live_ents.max(1))
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
            let base = self.next_mark_base();
            self.mark_members(a, base);
            // The owner is never in its own set (nor forced): marked like a
            // forced entity, the scan passes it over with no test of its own.
            let owner = self.areas[a].owner as usize;
            debug_assert!(self.mark[owner] < base, "the owner is not a member");
            self.mark[owner] = base + 1;
            let newly_forced = self.scratch.enters.len();
            let (kept, n) = self.sweep_scan(a, base);
            let area = &self.areas[a];
            let qualifying = area.forced.len() + kept + self.scratch.enters.len() - newly_forced;
            let kept = if qualifying > area.cap {
                self.sweep_qual(a, base, n);
                self.select_capped(a, base, newly_forced)
            } else {
                kept
            };
            self.emit_changes(a, base, kept, newly_forced, out);
        }
        let area = &mut self.areas[a];
        area.kinetic_ok = false;
        area.dirty = false;
    }

    /// The rescan: marks kept old members `base + 2`, appends newcomers to
    /// `scratch.enters`; returns the kept count and the number of hits
    /// (left in `scratch.hits` / `hit_d2` for `sweep_qual`). The flag
    /// filter is judged in the gather, the height band here; the owner (in
    /// the hits) is marked `base + 1`, so it is neither kept nor entered.
    fn sweep_scan(&mut self, a: usize, base: u32) -> (usize, usize) {
        let area = &self.areas[a];
        let (re2, rl2, filter, band) = (area.re2, area.rl2, area.spec.filter, area.spec.height);
        let p = self.pos[area.owner as usize];
        let hysteresis = re2 < rl2;
        let d2 = hysteresis || area.cap != usize::MAX;
        let n = match (d2, filter == FlagFilter::ACCEPT_ALL) {
            (true, true) => self.gather_hits::<true, true>(p, area.rl, rl2, filter),
            (true, false) => self.gather_hits::<true, false>(p, area.rl, rl2, filter),
            (false, true) => self.gather_hits::<false, true>(p, area.rl, rl2, filter),
            (false, false) => self.gather_hits::<false, false>(p, area.rl, rl2, filter),
        };
        let (sc, mark, pos) = (&mut self.scratch, &mut self.mark, &self.pos);
        let mut kept = 0;
        let (hits, hit_d2) = (&sc.hits[..n], &sc.hit_d2);
        for (i, &j) in hits.iter().enumerate() {
            if band.is_some_and(|b| !b.accepts(p.y, pos[j as usize].y)) {
                continue;
            }
            let m = &mut mark[j as usize];
            if *m == base {
                *m = base + 2;
                kept += 1;
            } else if *m != base + 1 && !(hysteresis && hit_d2[i] > re2) {
                sc.enters.push(j);
            }
        }
        (kept, n)
    }

    /// After `sweep_scan` found more qualifying than the cap: lists every
    /// qualifying non-forced entity with its `d2` in `scratch.qual` (what
    /// `select_capped` needs) from the `n` hits, by the scan's own rule
    /// (kept members are marked `base + 2`; the scan's band check failed
    /// for members still marked `base`).
    fn sweep_qual(&mut self, a: usize, base: u32, n: usize) {
        let area = &self.areas[a];
        let (re2, band) = (area.re2, area.spec.height);
        let hysteresis = re2 < area.rl2;
        let p = self.pos[area.owner as usize];
        let (sc, mark, pos) = (&mut self.scratch, &self.mark, &self.pos);
        sc.qual.clear();
        for i in 0..n {
            let (j, d2) = (sc.hits[i], sc.hit_d2[i]);
            if band.is_some_and(|b| !b.accepts(p.y, pos[j as usize].y)) {
                continue;
            }
            let m = mark[j as usize];
            let newcomer = m != base && m != base + 1 && m != base + 2;
            if m == base + 2 || (newcomer && !(hysteresis && d2 > re2)) {
                sc.qual.push((d2, j));
            }
        }
    }

    /// The entity slots within `r` of `p` (`d2 <= r2`) whose flags pass
    /// `filter` (`ALL`: it is `ACCEPT_ALL`), into `scratch.hits` (and their
    /// `d2` into `scratch.hit_d2` when `D2`), one row at a time by the
    /// index's gather kernel (`gather.rs`); returns the count. The owner is
    /// among them when its flags pass.
    fn gather_hits<const D2: bool, const ALL: bool>(
        &mut self,
        p: Vec3,
        r: f64,
        r2: f64,
        filter: FlagFilter,
    ) -> usize {
        let ((_, _, r0, r1), pad) = self.cell_range(p, r);
        let mut hits = std::mem::take(&mut self.scratch.hits);
        let mut hit_d2 = std::mem::take(&mut self.scratch.hit_d2);
        let mut row_d2 = std::mem::take(&mut self.scratch.row_d2);
        let mut n = 0;
        for row_at in r0..=r1 {
            let Some((k0, k1)) = self.row_span(row_at, p, pad) else {
                continue;
            };
            let l = &self.layout;
            let row = Row {
                sx: &l.sx[k0..k1],
                sz: &l.sz[k0..k1],
                slot: &l.sslot[k0..k1],
                flags: &l.sflags[k0..k1],
            };
            let out_d2 = if D2 { &mut hit_d2[n..] } else { &mut [][..] };
            n += gather_row::<D2, ALL>(
                self.gather,
                (p.x, p.z, r2),
                filter,
                row,
                &mut hits[n..],
                out_d2,
                &mut row_d2,
            );
        }
        self.scratch.hits = hits;
        self.scratch.hit_d2 = hit_d2;
        self.scratch.row_d2 = row_d2;
        n
    }
}

#[cfg(test)]
mod tests {
    use super::super::gather::Kernel;
    use super::super::{AoiIndex, AoiParams, AreaSpec, BruteAoi};
    use super::*;
    use crate::core::ids::EntityId;

    /// The counts are of distinct entities since a tick, an entity counted
    /// at its newest move only, and forget ticks beyond the window.
    #[test]
    fn recent_moves_count_each_entity_once_since_a_tick() {
        let mut r = RecentMoves::default();
        // Tick 1: entities a, b move; tick 2: a again, c; tick 3: nobody.
        r.moved(0, 1);
        r.moved(0, 1);
        r.tick_started(2);
        r.moved(1, 2);
        r.moved(0, 2);
        r.tick_started(3);
        r.sum_up(3);
        assert_eq!(r.since(3), Some(0), "nothing after the tick itself");
        assert_eq!(r.since(2), Some(0), "nobody moved at tick 3");
        assert_eq!(r.since(1), Some(2), "a and c moved after tick 1");
        assert_eq!(r.since(0), Some(3), "a, b and c, a once");
        // Far on, b's and c's moves left the window; a moves again.
        let far = 2 + RECENT_MOVE_TICKS as u64;
        for t in 4..=far {
            r.tick_started(t);
        }
        r.moved(2, far);
        r.sum_up(far);
        assert_eq!(r.since(far - 1), Some(1));
        assert_eq!(r.since(far - RECENT_MOVE_TICKS as u64), Some(1));
        assert_eq!(
            r.since(far - RECENT_MOVE_TICKS as u64 - 1),
            None,
            "beyond the window"
        );
    }

    /// An area processed every fourth tick sweeps when, between two of its
    /// updates, half the entities moved, although an eighth moved in each
    /// tick (the per-tick rule would have kept it kinetic); one processed
    /// every tick stays kinetic. Both match the oracle.
    #[test]
    fn an_area_judges_the_movers_since_it_was_processed() {
        let p = AoiParams {
            grid_cell_m: 20.0,
            ..AoiParams::default()
        };
        let (mut g, mut b) = (GridAoi::new(p).unwrap(), BruteAoi::new(p).unwrap());
        let n = 80u64;
        let at = |i: u64, k: u64| {
            Vec3::ground(
                50.0 + (i % 9) as f64 + 0.1 * k as f64,
                50.0 + (i / 9) as f64,
            )
        };
        let mut areas = Vec::new();
        for i in 0..n {
            for a in [&mut g as &mut dyn AoiIndex, &mut b] {
                a.add_entity(EntityId(i), at(i, 0), 1).unwrap();
            }
            if i < 2 {
                let ga = g.add_area(EntityId(i), AreaSpec::circle(30.0)).unwrap();
                let ba = b.add_area(EntityId(i), AreaSpec::circle(30.0)).unwrap();
                assert_eq!(ga, ba);
                areas.push(ga);
            }
        }
        let (every_tick, every_fourth) = (areas[0], areas[1]);
        let (mut eg, mut eb) = (Vec::new(), Vec::new());
        let mut moves = vec![0u64; n as usize];
        for tick in 0..40u64 {
            // A different eighth of the entities each tick.
            for i in (0..n).filter(|i| i % 8 == tick % 8) {
                moves[i as usize] += 1;
                let pos = at(i, moves[i as usize]);
                g.set_position(EntityId(i), pos).unwrap();
                b.set_position(EntityId(i), pos).unwrap();
            }
            let mut due = vec![every_tick];
            if tick % 4 == 3 {
                due.push(every_fourth);
            }
            g.update_due(&mut eg, &due);
            b.update_due(&mut eb, &due);
            assert_eq!(eg, eb, "tick {tick}");
            g.verify();
        }
        let area = |id| &g.areas[g.area_index(id).unwrap()];
        assert!(area(every_fourth).members.len() >= p.sweep_min_interest);
        assert!(
            !area(every_fourth).kinetic_ok,
            "swept: half moved since its last update"
        );
        assert!(
            area(every_tick).kinetic_ok,
            "kinetic: an eighth moved since its last update"
        );
    }

    /// A dense random walk where every area sweeps (threshold 0), with
    /// hysteresis and a flag filter on some areas: events equal the oracle's,
    /// with each gather kernel this CPU runs.
    #[test]
    fn sweeping_areas_match_the_oracle() {
        sweep_against_the_oracle(Kernel::Scalar);
        if Kernel::detect() != Kernel::Scalar {
            sweep_against_the_oracle(Kernel::detect());
        }
    }

    fn sweep_against_the_oracle(kernel: Kernel) {
        let p = AoiParams {
            grid_cell_m: 7.0,
            sweep_min_interest: 0,
            ..AoiParams::default()
        };
        let (mut g, mut b) = (GridAoi::new(p).unwrap(), BruteAoi::new(p).unwrap());
        g.gather = kernel;
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
            assert_eq!(eg, eb, "{kernel:?}");
            total += eg.len();
            g.verify();
        }
        assert!(total > 100, "the walk changes the sets: {total}");
    }
}
