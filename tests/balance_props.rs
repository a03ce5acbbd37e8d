//! Property tests of load measurement and of the space service.
//!
//! - The nested-depth recorder charges exactly the time spent inside
//!   outermost calls, per entity, against a brute-force replay of the same
//!   begin/end script.
//! - The service, fed random load reports (hot spots, idle cells, empty
//!   merging cells, stale cells), only ever emits changes its own tree and a
//!   replica accept in order; the replica stays equal, every tree stays
//!   valid, and merges finish only for cells that reported empty.
//!
//! Cases: `PROPTEST_CASES` (default 64).

use proptest::prelude::*;
use tessera::core::geom::Rect;
use tessera::core::ids::{CellId, EntityId, ShardId, SpaceId};
use tessera::core::load::LoadRecorder;
use tessera::core::space::{
    initial_tree, CellReport, ChangeOp, EntitySample, LoadReport, ServiceParams, SpaceParams,
    SpaceService,
};
use tessera::core::time::Time;

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64)
}

/// One step of a recorder script: `(entity, begin?, time step)`.
fn script() -> impl Strategy<Value = Vec<(u8, bool, u8)>> {
    prop::collection::vec((0u8..4, any::<bool>(), 0u8..20), 0..200)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn recorder_charges_only_outermost_calls(steps in script()) {
        let mut r = LoadRecorder::new(16);
        let mut depth = [0u32; 4];
        let mut since = [0u64; 4];
        let mut oracle = [0u64; 4];
        let mut now = 0u64;
        for (e, begin, dt) in steps {
            now += u64::from(dt);
            let i = usize::from(e);
            let id = EntityId(u64::from(e));
            if begin {
                if depth[i] == 0 {
                    since[i] = now;
                }
                depth[i] += 1;
                r.begin(id, now).unwrap();
            } else if depth[i] > 0 {
                depth[i] -= 1;
                if depth[i] == 0 {
                    oracle[i] += now - since[i];
                }
                r.end(id, now);
            }
        }
        for (i, want) in oracle.iter().enumerate() {
            let got = r.get(EntityId(i as u64)).map_or(0, |s| s.current());
            prop_assert_eq!(got, *want, "entity {}", i);
        }
    }

    #[test]
    fn service_changes_are_always_legal_and_replicated(
        rounds in prop::collection::vec(
            prop::collection::vec((0u32..24, 0u8..5, 0u8..3), 1..12), 1..30),
    ) {
        drive(&rounds)?;
    }
}

/// Feeds `rounds` of reports (cell, heat, reals/10) to a service over a
/// 4-cell tree on 3 shards, checking every change; returns how many.
fn drive(rounds: &[Vec<(u32, u8, u8)>]) -> Result<u64, TestCaseError> {
    let mut changes = 0u64;
    let world = Rect::new(0.0, 0.0, 2000.0, 2000.0);
    let tree = initial_tree(world, SpaceParams::for_ghost_radius(50.0), 4, 3).unwrap();
    let shards: Vec<ShardId> = (0..3).map(ShardId::local).collect();
    let mut s = SpaceService::new(ServiceParams::default(), &shards).unwrap();
    let space = SpaceId(1);
    s.add_union_space(space, tree.clone()).unwrap();
    let mut replica = tree;
    // Per cell: consecutive empty entries reported, latest last.
    let mut empty_run = std::collections::BTreeMap::<u32, u32>::new();
    for (round, cells) in rounds.iter().enumerate() {
        let t = s.tree(space).unwrap().clone();
        for shard in &shards {
            let mut report = LoadReport {
                shard: *shard,
                space,
                version: t.version(),
                busy: 0.0,
                cells: Vec::new(),
            };
            for &(cell, heat, reals) in cells {
                let Some(leaf) = t.cell(CellId(cell)) else {
                    continue;
                };
                if leaf.shard != *shard {
                    continue;
                }
                let load = f64::from(heat) * 0.4;
                let c = leaf.rect.center();
                let n = u64::from(reals) * 10;
                let samples = (0..n)
                    .map(|k| EntitySample {
                        entity: EntityId(k),
                        x: c.x + (k % 7) as f64,
                        z: c.z + (k % 5) as f64,
                        load: load / n.max(1) as f64,
                        is_real: true,
                    })
                    .collect();
                let run = empty_run.entry(cell).or_insert(0);
                *run = if n == 0 { *run + 1 } else { 0 };
                report.busy += load;
                report.cells.push(CellReport {
                    cell: CellId(cell),
                    load,
                    reals: n as u32,
                    samples,
                });
            }
            s.handle_load_report(Time::ZERO, &report).unwrap();
        }
        s.handle_timeout(Time::from_millis(round as u64 * 1000));
        while let Some((sp, c)) = s.poll_change() {
            prop_assert_eq!(sp, space);
            if let ChangeOp::FinishMerge { cell } = c.op {
                // Only cells whose last two reports were empty.
                let run = empty_run.get(&cell.0).copied().unwrap_or(0);
                prop_assert!(run >= 2, "{:?} finished after {} empty reports", cell, run);
            }
            replica.apply(&c).unwrap();
            changes += 1;
        }
        prop_assert_eq!(&replica, s.tree(space).unwrap());
        replica.validate().unwrap();
    }
    Ok(changes)
}

#[test]
fn hot_then_idle_reports_make_changes() {
    let hot: Vec<(u32, u8, u8)> = (0..4).map(|c| (c, if c == 0 { 4 } else { 0 }, 2)).collect();
    let idle: Vec<(u32, u8, u8)> = (0..24).map(|c| (c, 0, 0)).collect();
    let mut rounds = vec![hot; 8];
    rounds.extend(std::iter::repeat_n(idle, 12));
    let n = drive(&rounds).expect("legal");
    assert!(n >= 3, "{n} changes");
}
