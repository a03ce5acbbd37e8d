//! Property test of the AOI engine's sweep mode with every kind of area:
//! a dense random walk where every entity moves at every update (so every
//! update sweeps, `sweep_min_interest = 0`), areas with caps that bind,
//! height bands, hysteresis, flag filters and forced entities, on the
//! production [`GridAoi`] and the brute-force oracle [`BruteAoi`]: identical
//! event streams at every update and identical interest sets afterwards.
//! Cases default to 64; set `PROPTEST_CASES` for more.

use proptest::prelude::*;
use tessera::core::aoi::{
    AoiIndex, AoiParams, AreaId, AreaSpec, BruteAoi, FlagFilter, GridAoi, HeightBand,
};
use tessera::core::geom::{Rect, Vec3};
use tessera::core::ids::EntityId;

/// One entity's area, from a small code (so shrinking stays readable).
fn spec(code: u8, radius: f64) -> AreaSpec {
    let mut s = AreaSpec::circle(radius);
    if code & 1 != 0 {
        s.leave_radius_m = Some(radius + 2.0);
    }
    if code & 2 != 0 {
        s.max_interest = Some(u32::from(code >> 4) % 6);
    }
    if code & 4 != 0 {
        s.height = Some(HeightBand {
            min_dy_m: -1.0,
            max_dy_m: 2.0,
        });
    }
    if code & 8 != 0 {
        s.filter = FlagFilter {
            any: 1,
            need: 0,
            forbid: 4,
        };
    }
    s
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(64),
        ..ProptestConfig::default()
    })]

    #[test]
    fn sweeping_capped_banded_areas_match_brute_force(
        seed in any::<u64>(),
        n in 5usize..40,
        cell in prop_oneof![Just(3.0), Just(7.0), Just(12.0), Just(50.0)],
        radius in prop_oneof![Just(5.0), Just(8.0), 2.0..12.0f64],
        codes in prop::collection::vec(any::<u8>(), 40),
        forced in prop::collection::vec((0usize..40, 0usize..40), 0..6),
        step in prop_oneof![Just(0.5), Just(1.5), 0.1..3.0f64],
    ) {
        let p = AoiParams {
            world: Rect::new(0.0, 0.0, 40.0, 40.0),
            grid_cell_m: cell,
            sweep_min_interest: 0,
            ..AoiParams::default()
        };
        let (mut g, mut b) = (GridAoi::new(p).unwrap(), BruteAoi::new(p).unwrap());
        let mut s = seed;
        let mut rnd = move || {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (s >> 11) as f64 / (1u64 << 53) as f64
        };
        // Some outside the world (clamped into the edge cells), heights in
        // a few levels so the bands cut.
        let mut ps: Vec<Vec3> = (0..n)
            .map(|_| Vec3::new(rnd() * 50.0 - 5.0, (rnd() * 4.0).floor(), rnd() * 50.0 - 5.0))
            .collect();
        for (i, &pos) in ps.iter().enumerate() {
            let flags = [1, 1, 3, 5, 2][i % 5];
            for a in [&mut g as &mut dyn AoiIndex, &mut b] {
                a.add_entity(EntityId(i as u64), pos, flags).unwrap();
                a.add_area(EntityId(i as u64), spec(codes[i], radius)).unwrap();
            }
        }
        for &(a, e) in &forced {
            let (a, e) = (AreaId(a as u64 % n as u64 + 1), EntityId((e % n) as u64));
            prop_assert_eq!(g.force(a, e), b.force(a, e));
        }
        let (mut eg, mut eb) = (Vec::new(), Vec::new());
        for t in 0..30 {
            for (i, pos) in ps.iter_mut().enumerate() {
                let th = rnd() * std::f64::consts::TAU;
                // A height change now and then (a jump).
                let dy = if rnd() < 0.05 { 1.0 } else { 0.0 };
                *pos = Vec3::new(pos.x + step * th.cos(), pos.y + dy, pos.z + step * th.sin());
                g.set_position(EntityId(i as u64), *pos).unwrap();
                b.set_position(EntityId(i as u64), *pos).unwrap();
            }
            if t == 15 {
                // Unforce one, re-cap another mid-walk.
                if let Some(&(a, e)) = forced.first() {
                    let (a, e) = (AreaId(a as u64 % n as u64 + 1), EntityId((e % n) as u64));
                    prop_assert_eq!(g.unforce(a, e), b.unforce(a, e));
                }
                let sp = spec(codes[0] | 2, radius);
                prop_assert_eq!(g.set_area_spec(AreaId(1), sp), b.set_area_spec(AreaId(1), sp));
            }
            g.update(&mut eg);
            b.update(&mut eb);
            prop_assert_eq!(&eg, &eb, "update {}", t);
            g.verify();
        }
        for a in 1..=n as u64 {
            let (mut sg, mut sb) = (Vec::new(), Vec::new());
            prop_assert_eq!(g.interest(AreaId(a), &mut sg), b.interest(AreaId(a), &mut sb));
            prop_assert_eq!(sg, sb);
        }
    }
}
