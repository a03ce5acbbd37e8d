//! A real-bound message that overtakes the entity's `CreateGhost` is held,
//! not lost (`early.rs`).

use super::tests::{input_msg, params, Bus, E};
use super::*;
use crate::core::geom::Vec3;
use crate::core::ids::CellId;

fn input(seq: u64) -> CellMsg {
    input_msg(seq, 1)
}

#[test]
fn a_forward_ahead_of_the_create_ghost_is_applied_once_the_real_lands() {
    let mut bus = Bus::new(3, 1, params());
    bus.spawn(0, 100.0, 100.0);
    bus.tick(100);
    let now = bus.now;
    let layout = bus.layout.clone();
    bus.cell(0)
        .teleport(now, E, Vec3::ground(500.0, 100.0), &layout)
        .expect("teleport");
    // Another haunt forwards an input to the new home first.
    bus.cell(2).handle(now, Source::Cell(CellId(1)), input(1));
    assert_eq!(bus.cell(2).counters().early_held, 1);
    bus.pump();
    assert_eq!(bus.where_real(), Some(CellId(2)));
    bus.tick(50);
    let applied: Vec<u64> = bus
        .events
        .iter()
        .filter_map(|(c, e)| match e {
            CellEvent::InputApplied { seq, .. } if *c == CellId(2) => Some(*seq),
            _ => None,
        })
        .collect();
    assert_eq!(applied, vec![1]);
    assert_eq!(bus.cell(2).counters().harmful_drops(), 0);
    for c in &bus.cells {
        c.verify();
    }
}

#[test]
fn held_messages_are_bounded() {
    let p = CellParams {
        early_msgs_max: 2,
        ..params()
    };
    let mut bus = Bus::new(2, 1, p);
    let now = bus.now;
    for seq in 1..=3 {
        bus.cell(1).handle(now, Source::Cell(CellId(0)), input(seq));
    }
    let c = bus.cell(1).counters().clone();
    assert_eq!(c.early_held, 2);
    assert_eq!(c.dropped(DropReason::UnknownEntity), 1);
    bus.cell(1).verify();
}
