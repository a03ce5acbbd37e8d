//! Scenario tests of `destroy.rs` on the instant-delivery bus of `tests.rs`:
//! ghosts deleted everywhere, observers see a leave, stragglers dropped,
//! a destroy that chases a migrated real.

use super::tests::{avatar, params, Bus, E};
use super::*;
use crate::core::aoi::AoiIndex;
use crate::core::ids::{CellId, EntityId};

/// An observing avatar in cell 1, next to the border.
const O: EntityId = EntityId(7);

fn to_real(body: ToRealBody) -> CellMsg {
    CellMsg::ToReal(ToReal {
        entity: E,
        hops: 0,
        body,
    })
}

fn input(seq: u64) -> CellMsg {
    to_real(ToRealBody::Input(Input {
        seq,
        data: (&b"x"[..]).into(),
    }))
}

/// E real in cell 0 at x=190 with a ghost in cell 1, seen by O's observer.
fn watched() -> Bus {
    let mut bus = Bus::new(2, 1, params());
    bus.spawn(0, 190.0, 100.0);
    let now = bus.now;
    bus.cell(1)
        .create_real(now, avatar(O, 215.0, 100.0), true, 0)
        .expect("observer");
    for _ in 0..3 {
        bus.tick(100);
    }
    assert!(matches!(bus.residency(1), Some(Residency::Ghost { .. })));
    assert!(bus.cell(1).observer(O).expect("observer").sees(E));
    bus
}

#[test]
fn destroy_deletes_ghosts_and_observers_see_a_leave() {
    let mut bus = watched();
    let now = bus.now;
    bus.cell(0)
        .handle(now, Source::Proxy(E), to_real(ToRealBody::Destroy));
    bus.pump();
    assert_eq!(bus.where_real(), None);
    assert!(matches!(
        bus.residency(0),
        Some(Residency::Gone {
            forward_to: CellId(0),
            epoch: 1,
            ..
        })
    ));
    assert!(matches!(bus.residency(1), Some(Residency::Gone { .. })));
    assert_eq!(bus.cell(1).ghosts().count(), 0);
    assert_eq!(bus.cell(0).counters().reals_destroyed, 1);
    assert!(bus
        .events
        .iter()
        .any(|(c, ev)| *c == CellId(0) && *ev == CellEvent::Destroyed { entity: E }));
    bus.tick(100);
    assert!(!bus.cell(1).observer(O).expect("observer").sees(E));
    assert_eq!(bus.cell(0).aoi().position(E), None);
    bus.cell(0).verify();
    bus.cell(1).verify();
}

#[test]
fn stragglers_are_dropped_not_forwarded_in_a_loop() {
    let mut bus = watched();
    let now = bus.now;
    bus.cell(0).destroy_real(now, E).expect("real");
    bus.pump();
    // An input reaching the old haunt is forwarded to the tombstone's cell,
    // which drops it as destroyed.
    bus.cell(1).handle(now, Source::Proxy(E), input(1));
    bus.pump();
    assert_eq!(bus.cell(1).counters().forwards, 1);
    assert_eq!(bus.cell(0).counters().dropped(DropReason::Destroyed), 1);
    assert!(DropReason::Destroyed.is_benign());
    assert_eq!(
        bus.cell(0).destroy_real(now, E),
        Err(CellError::NotReal(E)),
        "destroyed once"
    );
}

#[test]
fn a_destroy_sent_to_the_old_cell_catches_the_migrated_real() {
    let mut bus = watched();
    bus.real_at(215.0, 100.0);
    for _ in 0..3 {
        bus.tick(100);
    }
    assert_eq!(bus.where_real(), Some(CellId(1)));
    let now = bus.now;
    bus.cell(0)
        .handle(now, Source::Proxy(E), to_real(ToRealBody::Destroy));
    bus.pump();
    assert_eq!(bus.where_real(), None);
    assert!(matches!(
        bus.residency(1),
        Some(Residency::Gone {
            forward_to: CellId(1),
            epoch: 2,
            ..
        })
    ));
    assert!(matches!(bus.residency(0), Some(Residency::Gone { .. })));
    bus.tick(100);
    assert!(!bus.cell(1).observer(O).expect("observer").sees(E));
    for c in 0..2 {
        assert!(bus.cell(c).ghosts().all(|g| g != E));
        bus.cell(c).verify();
    }
}

#[test]
fn a_destroyed_observer_leaves_the_views_it_was_in() {
    let mut bus = watched();
    // O (with a client) is seen from cell 0 through its ghost; destroying
    // O removes its observer and its ghost.
    let now = bus.now;
    assert!(bus.cells[0].residency(O).is_some());
    bus.cell(1).destroy_real(now, O).expect("real");
    bus.pump();
    assert!(bus.cell(1).observer(O).is_none());
    assert!(matches!(
        bus.cells[0].residency(O),
        Some(Residency::Gone { .. })
    ));
    bus.tick(100);
    bus.cell(0).verify();
    bus.cell(1).verify();
}
