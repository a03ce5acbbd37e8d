//! The public face of [`GridAoi`]: the [`AoiIndex`] impl that routes to
//! `grid.rs` (mutators) and `grid_update.rs` (the update), the shape
//! queries, and the unit tests of the index as a whole.
//!
//! Owns no state; must not change the update algorithm.

use super::grid::{GridAoi, NONE};
#[cfg(test)]
use super::types::EventKind;
#[cfg(test)]
use super::types::HeightBand;
use super::types::{AoiError, AoiEvent, AreaId, AreaSpec, FlagFilter};
use super::AoiIndex;
use crate::core::geom::{Shape, Vec3};
use crate::core::ids::EntityId;

impl GridAoi {
    /// Shape query over the layout (skipping stale entries) plus the
    /// entities relocated since the last rebuild.
    fn do_query(
        &self,
        shape: &Shape,
        filter: &FlagFilter,
        out: &mut Vec<EntityId>,
    ) -> Result<(), AoiError> {
        shape.validate()?;
        out.clear();
        let b = shape.bounds();
        let pad = (b.min_x.abs() + b.max_x.abs() + b.min_z.abs() + b.max_z.abs()) * 1e-12 + 1e-9;
        let (c0, c1) = (self.col(b.min_x - pad), self.col(b.max_x + pad));
        let (r0, r1) = (self.row(b.min_z - pad), self.row(b.max_z + pad));
        let l = &self.layout;
        let mut consider = |s: usize| {
            if filter.accepts(self.flags[s]) && shape.contains(self.pos[s]) {
                out.push(self.ent_id[s]);
            }
        };
        for r in r0..=r1 {
            let (k0, k1) = (
                l.cell_start[r * self.cols + c0],
                l.cell_start[r * self.cols + c1 + 1],
            );
            for k in k0 as usize..k1 as usize {
                let s = l.sslot[k] as usize;
                if self.arr_pos[s] as usize == k {
                    consider(s);
                }
            }
        }
        for &s in &l.relocated.slots {
            let s = s as usize;
            if self.alive[s] && self.arr_pos[s] == NONE {
                consider(s);
            }
        }
        out.sort_unstable();
        Ok(())
    }
}

impl AoiIndex for GridAoi {
    fn add_entity(&mut self, id: EntityId, pos: Vec3, flags: u64) -> Result<(), AoiError> {
        self.do_add_entity(id, pos, flags)
    }

    fn remove_entity(&mut self, id: EntityId) -> Result<(), AoiError> {
        self.do_remove_entity(id)
    }

    #[inline]
    fn set_position(&mut self, id: EntityId, pos: Vec3) -> Result<(), AoiError> {
        self.do_set_position(id, pos)
    }

    fn set_flags(&mut self, id: EntityId, flags: u64) -> Result<(), AoiError> {
        self.do_set_flags(id, flags)
    }

    fn add_area(&mut self, owner: EntityId, spec: AreaSpec) -> Result<AreaId, AoiError> {
        self.do_add_area(owner, spec)
    }

    fn remove_area(&mut self, area: AreaId) -> Result<(), AoiError> {
        self.do_remove_area(area)
    }

    fn set_area_spec(&mut self, area: AreaId, spec: AreaSpec) -> Result<(), AoiError> {
        self.do_set_area_spec(area, spec)
    }

    fn force(&mut self, area: AreaId, entity: EntityId) -> Result<(), AoiError> {
        self.do_force(area, entity)
    }

    fn unforce(&mut self, area: AreaId, entity: EntityId) -> Result<bool, AoiError> {
        self.do_unforce(area, entity)
    }

    fn update(&mut self, out: &mut Vec<AoiEvent>) {
        self.do_update(out, None);
    }

    fn update_due(&mut self, out: &mut Vec<AoiEvent>, due: &[AreaId]) {
        self.do_update(out, Some(due));
    }

    fn interest(&self, area: AreaId, out: &mut Vec<EntityId>) -> Result<(), AoiError> {
        let a = self.area_index(area)?;
        out.clear();
        out.extend(
            self.areas[a]
                .members
                .iter()
                .map(|&m| self.ent_id[m as usize]),
        );
        out.sort_unstable();
        Ok(())
    }

    fn query(
        &self,
        shape: &Shape,
        filter: &FlagFilter,
        out: &mut Vec<EntityId>,
    ) -> Result<(), AoiError> {
        self.do_query(shape, filter, out)
    }

    fn position(&self, id: EntityId) -> Option<Vec3> {
        self.ids.get(id).map(|s| self.pos[s as usize])
    }

    fn entity_count(&self) -> usize {
        self.live_ents
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::aoi::AoiParams;

    fn grid(skin_m: f64) -> GridAoi {
        GridAoi::new(AoiParams {
            grid_cell_m: 10.0,
            skin_m,
            ..AoiParams::default()
        })
        .unwrap()
    }

    fn ids(ev: &[AoiEvent]) -> Vec<(u64, EventKind)> {
        ev.iter().map(|e| (e.entity.0, e.kind)).collect()
    }

    #[test]
    fn walkers_cross_the_rim_in_small_steps() {
        for skin in [0.0, 2.0, 8.0] {
            let mut g = grid(skin);
            let mut ev = Vec::new();
            g.add_entity(EntityId(1), Vec3::ground(500.0, 500.0), 1)
                .unwrap();
            g.add_entity(EntityId(2), Vec3::ground(530.0, 500.0), 1)
                .unwrap();
            g.add_area(EntityId(1), AreaSpec::circle(20.0)).unwrap();
            g.update(&mut ev);
            assert!(ev.is_empty());
            let mut log = Vec::new();
            // 2 walks in 0.5 m steps to 510 and back out again.
            for k in 1..=80 {
                let x = if k <= 40 {
                    530.0 - 0.5 * k as f64
                } else {
                    490.0 + 0.5 * k as f64
                };
                g.set_position(EntityId(2), Vec3::ground(x, 500.0)).unwrap();
                g.update(&mut ev);
                log.extend(ids(&ev).into_iter().map(|e| (k, e)));
                g.verify();
            }
            // Enters at x = 520 (k = 20), leaves once x > 520 (k = 61).
            assert_eq!(
                log,
                vec![(20, (2, EventKind::Enter)), (61, (2, EventKind::Leave))],
                "skin {skin}"
            );
        }
    }

    #[test]
    fn a_jump_into_range_is_seen_at_once() {
        let mut g = grid(8.0);
        let mut ev = Vec::new();
        g.add_entity(EntityId(1), Vec3::ground(100.0, 100.0), 1)
            .unwrap();
        g.add_entity(EntityId(2), Vec3::ground(1900.0, 1900.0), 1)
            .unwrap();
        g.add_area(EntityId(1), AreaSpec::circle(20.0)).unwrap();
        g.update(&mut ev);
        g.set_position(EntityId(2), Vec3::ground(105.0, 100.0))
            .unwrap();
        g.update(&mut ev);
        assert_eq!(ids(&ev), vec![(2, EventKind::Enter)]);
        // A height change is a jump too (height bands are relative).
        let band = HeightBand {
            min_dy_m: -1.0,
            max_dy_m: 1.0,
        };
        let a = g
            .add_area(
                EntityId(1),
                AreaSpec {
                    height: Some(band),
                    ..AreaSpec::circle(20.0)
                },
            )
            .unwrap();
        g.update(&mut ev);
        assert_eq!(ev.len(), 1);
        g.set_position(EntityId(2), Vec3::new(105.0, 1.5, 100.0))
            .unwrap();
        g.update(&mut ev);
        assert_eq!((ev.len(), ev[0].area, ev[0].kind), (1, a, EventKind::Leave));
        g.verify();
    }

    /// An entity removed while an area sits updates out, and a new entity
    /// added near it before its next processing: the area must report the
    /// leave of the old one and the enter of the new one (the dead slot is
    /// not reused before the area has seen the removal).
    #[test]
    fn a_skipping_area_never_takes_a_new_entity_for_a_removed_member() {
        let mut g = grid(2.0);
        let mut b = crate::core::aoi::BruteAoi::new(*g.params()).unwrap();
        let (mut eg, mut eb) = (Vec::new(), Vec::new());
        let mut log = Vec::new();
        for aoi in [&mut g as &mut dyn AoiIndex, &mut b] {
            let mut ev = Vec::new();
            let e = |i, x, z| (EntityId(i), Vec3::ground(x, z));
            for (id, p) in [e(1, 100.0, 100.0), e(2, 900.0, 900.0), e(3, 105.0, 100.0)] {
                aoi.add_entity(id, p, 1).unwrap();
            }
            let a = aoi.add_area(EntityId(1), AreaSpec::circle(20.0)).unwrap();
            let far = aoi.add_area(EntityId(2), AreaSpec::circle(20.0)).unwrap();
            aoi.update(&mut ev);
            assert_eq!(ids(&ev), vec![(3, EventKind::Enter)]);
            aoi.remove_entity(EntityId(3)).unwrap();
            aoi.update_due(&mut ev, &[far]);
            assert!(ev.is_empty());
            aoi.add_entity(EntityId(4), Vec3::ground(106.0, 100.0), 1)
                .unwrap();
            aoi.update_due(&mut ev, &[far]);
            assert!(ev.is_empty(), "area {a:?} skipped");
            aoi.update_due(&mut ev, &[a, far]);
            log.push(ids(&ev));
        }
        g.verify();
        assert_eq!(
            log,
            vec![vec![(3, EventKind::Leave), (4, EventKind::Enter)]; 2]
        );
        g.update(&mut eg);
        b.update(&mut eb);
        assert_eq!(eg, eb);
        g.verify();
    }

    /// Areas skipping updates while their neighbours walk, jump and get
    /// removed or re-flagged: each processing reports what the oracle does.
    #[test]
    fn staggered_areas_match_the_oracle() {
        let p = AoiParams {
            grid_cell_m: 7.0,
            skin_m: 3.0,
            ..AoiParams::default()
        };
        let mut g = GridAoi::new(p).unwrap();
        let mut b = crate::core::aoi::BruteAoi::new(p).unwrap();
        let mut s = 99u64;
        let mut rnd = move || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 11) as f64 / (1u64 << 53) as f64
        };
        let n = 60u64;
        let mut areas = Vec::new();
        for i in 0..n {
            let pos = Vec3::ground(rnd() * 50.0, rnd() * 50.0);
            let spec = AreaSpec {
                leave_radius_m: Some(10.0),
                ..AreaSpec::circle(8.0)
            };
            g.add_entity(EntityId(i), pos, 1).unwrap();
            b.add_entity(EntityId(i), pos, 1).unwrap();
            if i % 2 == 0 {
                areas.push(g.add_area(EntityId(i), spec).unwrap());
                b.add_area(EntityId(i), spec).unwrap();
            }
        }
        let (mut eg, mut eb, mut due, mut total) = (Vec::new(), Vec::new(), Vec::new(), 0);
        for step in 0..120u64 {
            for i in (1..n).step_by(2) {
                let Some(p) = b.position(EntityId(i)) else {
                    continue;
                };
                let r = rnd();
                let id = EntityId(i);
                let to = if r < 0.03 {
                    Vec3::ground(rnd() * 50.0, rnd() * 50.0)
                } else {
                    Vec3::ground(p.x + rnd() - 0.5, p.z + rnd() - 0.5)
                };
                g.set_position(id, to).unwrap();
                b.set_position(id, to).unwrap();
                if r > 0.99 {
                    g.remove_entity(id).unwrap();
                    b.remove_entity(id).unwrap();
                    g.add_entity(id, to, 1 + (step % 2)).unwrap();
                    b.add_entity(id, to, 1 + (step % 2)).unwrap();
                }
            }
            due.clear();
            let every = 1 + step % 4;
            due.extend(
                areas
                    .iter()
                    .enumerate()
                    .filter(|(k, _)| (step + *k as u64) % every == 0)
                    .map(|(_, &a)| a),
            );
            g.update_due(&mut eg, &due);
            b.update_due(&mut eb, &due);
            assert_eq!(eg, eb, "step {step}");
            total += eg.len();
            g.verify();
        }
        assert!(total > 100, "the walk changes the sets: {total}");
    }

    #[test]
    fn idle_updates_report_nothing_and_queries_see_pending_moves() {
        let mut g = grid(8.0);
        let mut ev = Vec::new();
        for i in 0..20u64 {
            g.add_entity(EntityId(i), Vec3::ground(i as f64 * 3.0, 0.0), 1)
                .unwrap();
            g.add_area(EntityId(i), AreaSpec::circle(10.0)).unwrap();
        }
        g.update(&mut ev);
        assert!(!ev.is_empty());
        g.update(&mut ev);
        assert!(ev.is_empty(), "nothing moved");
        // Moved to another cell and added, not yet updated: queries see both.
        g.set_position(EntityId(0), Vec3::ground(500.0, 500.0))
            .unwrap();
        g.add_entity(EntityId(99), Vec3::ground(501.0, 500.0), 2)
            .unwrap();
        let mut out = Vec::new();
        let circle = Shape::Circle {
            center: Vec3::ground(500.0, 500.0),
            radius: 2.0,
        };
        g.query(&circle, &FlagFilter::ACCEPT_ALL, &mut out).unwrap();
        assert_eq!(out, vec![EntityId(0), EntityId(99)]);
        let only_2 = FlagFilter {
            any: 2,
            need: 0,
            forbid: 0,
        };
        g.query(&circle, &only_2, &mut out).unwrap();
        assert_eq!(out, vec![EntityId(99)]);
        g.remove_entity(EntityId(99)).unwrap();
        g.query(&circle, &FlagFilter::ACCEPT_ALL, &mut out).unwrap();
        assert_eq!(out, vec![EntityId(0)]);
        g.update(&mut ev);
        g.verify();
    }
}
