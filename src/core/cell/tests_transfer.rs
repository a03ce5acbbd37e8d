//! Unit tests of [`Cell::transfer`] (a move between spaces) on the
//! instant-delivery bus of `tests.rs`.

use super::tests::{params, types, Bus, E};
use super::*;
use crate::core::entity::{Value, AVATAR};
use crate::core::geom::Vec3;
use crate::core::ids::CellId;

#[test]
fn transfer_moves_the_whole_real_and_leaves_nothing_behind() {
    // Cells 0 | 1 | 2; E in cell 0 near cell 1 (a ghost there).
    let mut bus = Bus::new(3, 1, params());
    bus.spawn(0, 190.0, 100.0);
    bus.tick(100);
    assert!(matches!(bus.residency(1), Some(Residency::Ghost { .. })));
    let hp = types()
        .get(AVATAR)
        .expect("avatar")
        .prop_index("hp")
        .expect("hp");
    bus.cell(0)
        .real_mut(E)
        .expect("real")
        .props_mut()
        .set(hp, Value::Int(33))
        .expect("hp");
    bus.tick(100);
    let now = bus.now;
    let notice = crate::core::down::DownBody::from(vec![0xF0u8]);
    bus.cell(0)
        .transfer(now, E, Vec3::ground(500.0, 100.0), CellId(2), Some(notice))
        .expect("transfer");
    assert_eq!(
        bus.cell(0)
            .transfer(now, E, Vec3::ground(0.0, 0.0), CellId(2), None),
        Err(CellError::NotReal(E)),
        "once only"
    );
    bus.pump();
    assert_eq!(bus.where_real(), Some(CellId(2)));
    assert!(
        matches!(bus.residency(0), Some(Residency::Gone { forward_to, .. }) if forward_to == CellId(2)),
        "no ghost in the old cell: {:?}",
        bus.residency(0)
    );
    assert!(
        matches!(bus.residency(1), Some(Residency::Gone { .. })),
        "the old space's ghosts are deleted"
    );
    assert_eq!(
        bus.cells[2].haunts(E).map(<[Haunt]>::len),
        Some(0),
        "no haunt in the old space"
    );
    let real = bus.cells[2].view(E).expect("real");
    assert_eq!(real.entity.props().get(hp), Some(&Value::Int(33)));
    assert_eq!(real.pos(), Vec3::ground(500.0, 100.0));
    // The notice follows the old cell's batches, before the new cell's.
    let downs: Vec<(CellId, u64, u8)> = bus
        .proxy
        .iter()
        .filter_map(|m| match m {
            ProxyMsg::Downstream {
                cell, seq, data, ..
            } => Some((*cell, *seq, data[0])),
            _ => None,
        })
        .collect();
    let at = downs
        .iter()
        .position(|d| d.2 == 0xF0)
        .expect("the notice was sent");
    assert!(downs[..at].iter().all(|d| d.0 == CellId(0)));
    assert!(downs[at + 1..].iter().all(|d| d.0 == CellId(2)));
    assert!(downs.windows(2).all(|w| w[1].1 == w[0].1 + 1), "{downs:?}");
    assert_eq!(bus.cells[0].counters().transfers_out, 1);
    for _ in 0..3 {
        bus.tick(100);
    }
    assert_eq!(bus.where_real(), Some(CellId(2)));
    for c in &bus.cells {
        c.verify();
    }
}
