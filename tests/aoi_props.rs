//! Property tests of the AOI engine: random operation sequences run on the
//! production [`GridAoi`] and the brute-force oracle [`BruteAoi`] must give
//! identical results for every call, identical event streams at every update
//! and identical interest sets afterwards.
//!
//! A second property runs the cell's schedule: each update processes only
//! a random subset of the areas ([`AoiIndex::update_due`]).
//!
//! Positions sit on a 5 m lattice (plus small jitter moves) so distances fall
//! exactly on radii; some lie outside the world rectangle. Cases default to
//! 256; set `PROPTEST_CASES` for more.

use proptest::prelude::*;
use std::collections::BTreeMap;
use tessera::core::aoi::{
    AoiError, AoiEvent, AoiIndex, AoiParams, AreaId, AreaSpec, BruteAoi, EventKind, FlagFilter,
    GridAoi, HeightBand,
};
use tessera::core::geom::{Rect, Shape, Vec3};
use tessera::core::ids::EntityId;

#[derive(Clone, Debug)]
enum Op {
    Add(u64, Vec3, u64),
    Remove(u64),
    Move(u64, Vec3),
    Nudge(u64, f64, f64, f64),
    Flags(u64, u64),
    AddArea(u64, AreaSpec),
    RemoveArea(u64),
    SetSpec(u64, AreaSpec),
    SetCap(u64, Option<u32>),
    Force(u64, u64),
    Unforce(u64, u64),
    Update,
    Query(Shape, FlagFilter),
}

const IDS: u64 = 14;

fn lattice(lo: i32, hi: i32, step: f64) -> impl Strategy<Value = (f64, f64)> {
    (lo..hi, lo..hi).prop_map(move |(x, z)| (x as f64 * step, z as f64 * step))
}

fn pos() -> impl Strategy<Value = Vec3> {
    let ground = prop_oneof![
        10 => lattice(0, 9, 2.5),
        2 => lattice(0, 41, 5.0),
        1 => lattice(-12, 55, 5.0),
        1 => (-1.0e6..1.0e6f64, -1.0e6..1.0e6f64),
    ];
    let y = prop_oneof![Just(0.0), Just(1.0), Just(3.0), -5.0..5.0f64];
    (ground, y).prop_map(|((x, z), y)| Vec3::new(x, y, z))
}

fn flags() -> impl Strategy<Value = u64> {
    prop_oneof![8 => Just(1u64), 2 => 0u64..16, 1 => any::<u64>()]
}

fn filter() -> impl Strategy<Value = FlagFilter> {
    prop_oneof![
        5 => Just(FlagFilter::ACCEPT_ALL),
        1 => (1u64..16, 0u64..4, 0u64..4).prop_map(|(any, need, forbid)| FlagFilter { any, need, forbid }),
    ]
}

fn spec() -> impl Strategy<Value = AreaSpec> {
    let radius = prop_oneof![
        Just(0.0),
        Just(2.5),
        Just(5.0),
        Just(10.0),
        Just(12.5),
        Just(20.0),
        Just(60.0),
        0.0..40.0f64
    ];
    let leave = prop_oneof![2 => Just(None), 1 => Just(Some(0.0)), 1 => Just(Some(2.5)), 1 => Just(Some(7.5))];
    let height = prop_oneof![
        3 => Just(None),
        1 => (-3.0..0.0f64, 0.0..3.0f64).prop_map(|(a, b)| Some(HeightBand { min_dy_m: a, max_dy_m: b })),
    ];
    let cap = prop_oneof![3 => Just(None), 1 => (0u32..5).prop_map(Some)];
    (radius, leave, filter(), height, cap).prop_map(|(r, l, filter, height, cap)| AreaSpec {
        radius_m: r,
        leave_radius_m: l.map(|d| r + d),
        filter,
        height,
        max_interest: cap,
    })
}

fn shape() -> impl Strategy<Value = Shape> {
    let c = || pos();
    prop_oneof![
        (c(), 0.0..80.0f64).prop_map(|(center, radius)| Shape::Circle { center, radius }),
        (c(), 0.0..50.0f64, 0.0..50.0f64, -4.0..4.0f64).prop_map(|(center, w, l, yaw)| {
            Shape::Rectangle {
                center,
                half_width: w,
                half_length: l,
                yaw,
            }
        }),
        (c(), 0.0..80.0f64, -3.0..1.0f64, 0.0..3.0f64).prop_map(|(center, radius, lo, h)| {
            Shape::Cylinder {
                center,
                radius,
                min_y: lo,
                max_y: lo + h,
            }
        }),
        (c(), 0.0..80.0f64, -4.0..4.0f64, 0.0..3.5f64).prop_map(
            |(center, radius, yaw, half_angle)| {
                Shape::Sector {
                    center,
                    radius,
                    yaw,
                    half_angle,
                }
            }
        ),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let id = 0..IDS;
    let area = 1u64..10;
    let step = prop_oneof![Just(0.0), Just(0.5), Just(-2.5), Just(5.0), -3.0..3.0f64];
    prop_oneof![
        3 => (id.clone(), pos(), flags()).prop_map(|(i, p, f)| Op::Add(i, p, f)),
        1 => id.clone().prop_map(Op::Remove),
        4 => (id.clone(), pos()).prop_map(|(i, p)| Op::Move(i, p)),
        6 => (id.clone(), step.clone(), step.clone(), step).prop_map(|(i, dx, dy, dz)| Op::Nudge(i, dx, dy, dz)),
        1 => (id.clone(), flags()).prop_map(|(i, f)| Op::Flags(i, f)),
        4 => (id.clone(), spec()).prop_map(|(i, s)| Op::AddArea(i, s)),
        1 => area.clone().prop_map(Op::RemoveArea),
        1 => (area.clone(), spec()).prop_map(|(a, s)| Op::SetSpec(a, s)),
        1 => (area.clone(), prop_oneof![Just(None), (0u32..4).prop_map(Some)]).prop_map(|(a, c)| Op::SetCap(a, c)),
        2 => (area.clone(), id.clone()).prop_map(|(a, i)| Op::Force(a, i)),
        2 => (area, id).prop_map(|(a, i)| Op::Unforce(a, i)),
        5 => Just(Op::Update),
        1 => (shape(), filter()).prop_map(|(s, f)| Op::Query(s, f)),
    ]
}

fn params() -> impl Strategy<Value = AoiParams> {
    let cell = prop_oneof![Just(5.0), Just(13.0), Just(40.0), Just(500.0)];
    let skin = prop_oneof![
        Just(0.0),
        Just(1.0),
        Just(2.5),
        Just(4.0),
        Just(10.0),
        0.0..20.0f64
    ];
    let sweep = prop_oneof![Just(0usize), Just(2), Just(usize::MAX)];
    (cell, skin, 1usize..4, sweep).prop_map(|(cell, skin, per, sweep)| AoiParams {
        world: Rect::new(0.0, 0.0, 200.0, 200.0),
        grid_cell_m: cell,
        skin_m: skin,
        sweep_min_interest: sweep,
        max_entities: 12,
        max_areas: 10,
        max_areas_per_entity: per,
        max_forced_per_area: 3,
        ..AoiParams::default()
    })
}

/// Applies `op` to one index; returns a comparable transcript line.
fn apply<A: AoiIndex>(aoi: &mut A, op: &Op, events: &mut Vec<AoiEvent>) -> String {
    let e = EntityId;
    match op {
        Op::Add(i, p, f) => format!("{:?}", aoi.add_entity(e(*i), *p, *f)),
        Op::Remove(i) => format!("{:?}", aoi.remove_entity(e(*i))),
        Op::Move(i, p) => format!("{:?}", aoi.set_position(e(*i), *p)),
        Op::Nudge(i, dx, dy, dz) => match aoi.position(e(*i)) {
            Some(p) => format!(
                "{:?}",
                aoi.set_position(e(*i), Vec3::new(p.x + dx, p.y + dy, p.z + dz))
            ),
            None => "absent".into(),
        },
        Op::Flags(i, f) => format!("{:?}", aoi.set_flags(e(*i), *f)),
        Op::AddArea(i, s) => format!("{:?}", aoi.add_area(e(*i), *s)),
        Op::RemoveArea(a) => format!("{:?}", aoi.remove_area(AreaId(*a))),
        Op::SetSpec(a, s) => format!("{:?}", aoi.set_area_spec(AreaId(*a), *s)),
        Op::SetCap(a, c) => {
            // Read-modify-write through the public spec setter: keep the
            // current spec but the cap (both indexes see the same spec).
            let spec = AreaSpec {
                max_interest: *c,
                ..AreaSpec::circle(20.0)
            };
            format!("{:?}", aoi.set_area_spec(AreaId(*a), spec))
        }
        Op::Force(a, i) => format!("{:?}", aoi.force(AreaId(*a), e(*i))),
        Op::Unforce(a, i) => format!("{:?}", aoi.unforce(AreaId(*a), e(*i))),
        Op::Update => {
            aoi.update(events);
            format!("{events:?}")
        }
        Op::Query(s, f) => {
            let mut out = Vec::new();
            let r = aoi.query(s, f, &mut out);
            format!("{r:?} {out:?}")
        }
    }
}

fn interest_sets<A: AoiIndex>(aoi: &A) -> Vec<(u64, Vec<EntityId>)> {
    let mut out = Vec::new();
    let mut buf = Vec::new();
    for a in 1..16 {
        if aoi.interest(AreaId(a), &mut buf).is_ok() {
            out.push((a, buf.clone()));
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(256),
        ..ProptestConfig::default()
    })]

    #[test]
    fn grid_matches_brute_force(
        p in params(),
        adds in prop::collection::vec((0..IDS, pos(), flags()), 2..12),
        rest in prop::collection::vec(op(), 1..120),
    ) {
        let ops: Vec<Op> = adds.into_iter().map(|(i, p, f)| Op::Add(i, p, f)).chain(rest).collect();
        let mut grid = GridAoi::new(p).unwrap();
        let mut brute = BruteAoi::new(p).unwrap();
        let (mut eg, mut eb) = (Vec::new(), Vec::new());
        for (k, op) in ops.iter().enumerate() {
            let g = apply(&mut grid, op, &mut eg);
            let b = apply(&mut brute, op, &mut eb);
            prop_assert_eq!(&g, &b, "op {} {:?}", k, op);
            if matches!(op, Op::Update) {
                prop_assert_eq!(interest_sets(&grid), interest_sets(&brute), "after op {}", k);
                grid.verify();
            }
        }
        let (g, b) = (apply(&mut grid, &Op::Update, &mut eg), apply(&mut brute, &Op::Update, &mut eb));
        prop_assert_eq!(g, b);
        prop_assert_eq!(interest_sets(&grid), interest_sets(&brute));
        // A second update with no change in between reports nothing.
        grid.update(&mut eg);
        prop_assert!(eg.is_empty(), "idle update reported {:?}", eg);
    }
}

/// The areas due at an update (ascending): those whose bit (id mod 16) is
/// set in `mask`, and any that sat out `k - 1` updates in a row. `since`
/// counts each area's updates sat out.
fn due_areas(brute: &BruteAoi, mask: u16, k: u32, since: &mut BTreeMap<u64, u32>) -> Vec<AreaId> {
    let mut due = Vec::new();
    let mut buf = Vec::new();
    for a in 1..200u64 {
        if brute.interest(AreaId(a), &mut buf).is_err() {
            continue;
        }
        let s = since.entry(a).or_insert(0);
        if mask & (1 << (a % 16)) != 0 || *s + 1 >= k {
            *s = 0;
            due.push(AreaId(a));
        } else {
            *s += 1;
        }
    }
    due
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(256),
        ..ProptestConfig::default()
    })]

    /// The cell's schedule: each update processes only some areas (each at
    /// least every `k` updates). Every processed area reports what the
    /// oracle does for it (its net change since its last processing), and
    /// every set, processed or not, equals the oracle's.
    #[test]
    fn grid_matches_brute_force_on_due_areas(
        p in params(),
        k in prop_oneof![Just(1u32), 2u32..5, Just(50)],
        adds in prop::collection::vec((0..IDS, pos(), flags()), 2..12),
        rest in prop::collection::vec((op(), any::<u16>()), 1..120),
    ) {
        let ops: Vec<(Op, u16)> = adds
            .into_iter()
            .map(|(i, p, f)| (Op::Add(i, p, f), 0))
            .chain(rest)
            .collect();
        let mut grid = GridAoi::new(p).unwrap();
        let mut brute = BruteAoi::new(p).unwrap();
        let (mut eg, mut eb) = (Vec::new(), Vec::new());
        let mut since = BTreeMap::new();
        for (i, (op, mask)) in ops.iter().enumerate() {
            if !matches!(op, Op::Update) {
                let g = apply(&mut grid, op, &mut eg);
                let b = apply(&mut brute, op, &mut eb);
                prop_assert_eq!(&g, &b, "op {} {:?}", i, op);
                continue;
            }
            let due = due_areas(&brute, *mask, k, &mut since);
            grid.update_due(&mut eg, &due);
            brute.update_due(&mut eb, &due);
            prop_assert_eq!(&eg, &eb, "op {} due {:?}", i, due);
            prop_assert_eq!(all_sets(&grid), all_sets(&brute), "after op {}", i);
            grid.verify();
        }
        grid.update(&mut eg);
        brute.update(&mut eb);
        prop_assert_eq!(&eg, &eb);
        prop_assert_eq!(all_sets(&grid), all_sets(&brute));
        grid.verify();
        grid.update(&mut eg);
        prop_assert!(eg.is_empty(), "idle update reported {:?}", eg);
    }
}

fn all_sets<A: AoiIndex>(aoi: &A) -> Vec<(u64, Vec<EntityId>)> {
    let mut out = Vec::new();
    let mut buf = Vec::new();
    for a in 1..200 {
        if aoi.interest(AreaId(a), &mut buf).is_ok() {
            out.push((a, buf.clone()));
        }
    }
    out
}

/// Drives both indexes through the same fixed script and checks the events.
fn both(
    script: impl Fn(&mut dyn AoiIndex, &mut Vec<AoiEvent>) -> Vec<Vec<AoiEvent>>,
) -> Vec<Vec<AoiEvent>> {
    let p = AoiParams {
        grid_cell_m: 10.0,
        ..AoiParams::default()
    };
    let mut ev = Vec::new();
    let g = script(&mut GridAoi::new(p).unwrap(), &mut ev);
    let b = script(&mut BruteAoi::new(p).unwrap(), &mut ev);
    assert_eq!(g, b, "grid and brute differ");
    g
}

fn kinds(ev: &[AoiEvent]) -> Vec<(u64, EventKind)> {
    ev.iter().map(|e| (e.entity.0, e.kind)).collect()
}

#[test]
fn exactly_on_the_radius_is_inside_and_hysteresis_holds() {
    let got = both(|aoi, ev| {
        let mut ticks = Vec::new();
        aoi.add_entity(EntityId(1), Vec3::ground(100.0, 100.0), 1)
            .unwrap();
        aoi.add_entity(EntityId(2), Vec3::ground(103.0, 104.0), 1)
            .unwrap(); // d = 5
        let spec = AreaSpec {
            leave_radius_m: Some(8.0),
            ..AreaSpec::circle(5.0)
        };
        aoi.add_area(EntityId(1), spec).unwrap();
        aoi.update(ev);
        ticks.push(ev.clone());
        aoi.set_position(EntityId(2), Vec3::ground(106.0, 108.0))
            .unwrap(); // d = 10
        aoi.update(ev);
        ticks.push(ev.clone());
        aoi.set_position(EntityId(2), Vec3::ground(100.0, 107.0))
            .unwrap(); // d = 7: outside enter
        aoi.update(ev);
        ticks.push(ev.clone());
        aoi.set_position(EntityId(2), Vec3::ground(100.0, 105.0))
            .unwrap(); // d = 5
        aoi.update(ev);
        ticks.push(ev.clone());
        aoi.set_position(EntityId(2), Vec3::ground(100.0, 108.0))
            .unwrap(); // d = 8: still in
        aoi.update(ev);
        ticks.push(ev.clone());
        ticks
    });
    let k: Vec<_> = got.iter().map(|t| kinds(t)).collect();
    assert_eq!(
        k,
        vec![
            vec![(2, EventKind::Enter)],
            vec![(2, EventKind::Leave)],
            vec![],
            vec![(2, EventKind::Enter)],
            vec![],
        ]
    );
}

#[test]
fn forced_cap_and_outside_world() {
    let got = both(|aoi, ev| {
        let mut ticks = Vec::new();
        aoi.add_entity(EntityId(1), Vec3::ground(-500.0, -500.0), 1)
            .unwrap();
        for i in 2..6 {
            let d = i as f64;
            aoi.add_entity(EntityId(i), Vec3::ground(-500.0 + d, -500.0), 1)
                .unwrap();
        }
        aoi.add_entity(EntityId(9), Vec3::ground(1e5, 1e5), 0)
            .unwrap();
        let a = aoi
            .add_area(
                EntityId(1),
                AreaSpec {
                    max_interest: Some(2),
                    ..AreaSpec::circle(10.0)
                },
            )
            .unwrap();
        aoi.force(a, EntityId(9)).unwrap();
        assert_eq!(aoi.force(a, EntityId(1)), Err(AoiError::SelfInterest(a)));
        aoi.update(ev);
        ticks.push(ev.clone());
        aoi.set_position(EntityId(5), Vec3::ground(-500.0, -500.5))
            .unwrap();
        aoi.update(ev);
        ticks.push(ev.clone());
        assert!(aoi.unforce(a, EntityId(9)).unwrap());
        aoi.update(ev);
        ticks.push(ev.clone());
        aoi.remove_entity(EntityId(5)).unwrap();
        aoi.update(ev);
        ticks.push(ev.clone());
        ticks
    });
    let k: Vec<_> = got.iter().map(|t| kinds(t)).collect();
    assert_eq!(
        k,
        vec![
            vec![(2, EventKind::Enter), (9, EventKind::Enter)],
            vec![(2, EventKind::Leave), (5, EventKind::Enter)],
            vec![(9, EventKind::Leave), (2, EventKind::Enter)],
            vec![(5, EventKind::Leave), (3, EventKind::Enter)],
        ]
    );
}

#[test]
fn bad_input_is_refused_with_the_field_named() {
    let mut g = GridAoi::new(AoiParams::default()).unwrap();
    assert_eq!(
        g.add_entity(EntityId(1), Vec3::ground(f64::INFINITY, 0.0), 1),
        Err(AoiError::NonFinite {
            field: "position.x"
        })
    );
    g.add_entity(EntityId(1), Vec3::ground(0.0, 0.0), 1)
        .unwrap();
    assert_eq!(
        g.add_area(EntityId(1), AreaSpec::circle(f64::NAN)),
        Err(AoiError::NonFinite { field: "radius_m" })
    );
    assert_eq!(
        g.set_position(EntityId(2), Vec3::default()),
        Err(AoiError::UnknownEntity(EntityId(2)))
    );
    assert_eq!(
        g.remove_area(AreaId(7)),
        Err(AoiError::UnknownArea(AreaId(7)))
    );
}
