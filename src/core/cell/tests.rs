//! Scenario unit tests of the cell protocol on a tiny instant-delivery bus
//! (one global FIFO, which keeps FIFO per pair). The randomised, delayed
//! harness is `tests/cell_protocol.rs`.

use std::sync::Arc;

use super::*;
use crate::core::entity::{Entity, SyncEmitter, TypeRegistry, Value, AVATAR};
use crate::core::geom::Vec3;
use crate::core::ids::{CellId, EntityId};
use crate::core::time::Time;

pub(super) const E: EntityId = EntityId(42);

pub(super) fn types() -> Arc<TypeRegistry> {
    Arc::new(TypeRegistry::with_builtins())
}

pub(super) fn avatar(id: EntityId, x: f64, z: f64) -> Entity {
    let ty = types().get(AVATAR).expect("avatar").clone();
    Entity::new_real(id, ty, Vec3::ground(x, z), 0.0)
}

/// Client input `seq` of `E` (its one byte is `seq`), after `hops` hops.
pub(super) fn input_msg(seq: u64, hops: u8) -> CellMsg {
    CellMsg::ToReal(ToReal {
        entity: E,
        hops,
        body: ToRealBody::Input(Input {
            seq,
            data: (&[seq as u8][..]).into(),
        }),
    })
}

pub(super) fn params() -> CellParams {
    CellParams {
        ghost_radius_m: 30.0,
        ghost_keep_margin_m: 10.0,
        migrate_margin_m: 8.0,
        check_period_ms: 100,
        ghost_min_lifetime_ms: 0,
        new_real_keep_ghosts_ms: 0,
        resync_gap_timeout_ms: 300,
        ..CellParams::default()
    }
}

pub(super) struct Bus {
    pub(super) cells: Vec<Cell>,
    pub(super) layout: GridLayout,
    pub(super) now: Time,
    pub(super) proxy: Vec<ProxyMsg>,
    pub(super) events: Vec<(CellId, CellEvent)>,
    /// Messages matching this are dropped instead of delivered.
    lose: Option<fn(&Outgoing) -> bool>,
}

impl Bus {
    pub(super) fn new(nx: u32, nz: u32, p: CellParams) -> Bus {
        let layout = GridLayout::new(nx, nz, 200.0);
        let cells = layout
            .cells()
            .map(|c| Cell::new(c, p.clone(), types()).expect("params"))
            .collect();
        Bus {
            cells,
            layout,
            now: Time::ZERO,
            proxy: Vec::new(),
            events: Vec::new(),
            lose: None,
        }
    }

    pub(super) fn cell(&mut self, c: u32) -> &mut Cell {
        &mut self.cells[c as usize]
    }

    pub(super) fn pump(&mut self) {
        loop {
            let mut batch = Vec::new();
            for c in &mut self.cells {
                while let Some(o) = c.poll_output() {
                    batch.push((c.id(), o));
                }
                while let Some(ev) = c.poll_event() {
                    self.events.push((c.id(), ev));
                }
            }
            if batch.is_empty() {
                return;
            }
            for (from, o) in batch {
                if self.lose.is_some_and(|f| f(&o)) {
                    continue;
                }
                match (o.to, o.msg) {
                    (Dest::Cell(to), Msg::Cell(m)) => {
                        let now = self.now;
                        self.cells[to.0 as usize].handle(now, Source::Cell(from), m);
                    }
                    (Dest::Proxy(_), Msg::Proxy(m)) => self.proxy.push(m),
                    other => panic!("mismatched output {other:?}"),
                }
            }
        }
    }

    pub(super) fn tick(&mut self, ms: u64) {
        self.now = self.now + std::time::Duration::from_millis(ms);
        let now = self.now;
        for c in &mut self.cells {
            c.tick(now, &self.layout);
        }
        self.pump();
    }

    pub(super) fn spawn(&mut self, c: u32, x: f64, z: f64) {
        let now = self.now;
        self.cell(c)
            .create_real(now, avatar(E, x, z), true, 0)
            .expect("spawn");
        self.pump();
    }

    pub(super) fn real_at(&mut self, x: f64, z: f64) {
        let c = self.where_real().expect("a real");
        self.cell(c.0)
            .move_real(E, Vec3::ground(x, z))
            .expect("move");
    }

    pub(super) fn where_real(&self) -> Option<CellId> {
        let reals: Vec<CellId> = self
            .cells
            .iter()
            .filter(|c| matches!(c.residency(E), Some(Residency::Real { .. })))
            .map(|c| c.id())
            .collect();
        assert!(reals.len() <= 1, "two reals: {reals:?}");
        reals.first().copied()
    }

    pub(super) fn residency(&self, c: u32) -> Option<Residency> {
        self.cells[c as usize].residency(E)
    }
}

#[test]
fn ghosts_follow_the_rect_rule_with_hysteresis() {
    let mut bus = Bus::new(2, 1, params());
    bus.spawn(0, 150.0, 100.0);
    bus.tick(100);
    assert_eq!(bus.residency(1), None, "50 m from the border: no ghost");
    bus.real_at(175.0, 100.0);
    bus.tick(100);
    assert!(matches!(
        bus.residency(1),
        Some(Residency::Ghost {
            real_at: CellId(0),
            ..
        })
    ));
    assert_eq!(
        bus.cell(0).haunts(E).expect("real")[0].state,
        HauntState::Created
    );
    bus.real_at(165.0, 100.0);
    bus.tick(100);
    assert!(
        matches!(bus.residency(1), Some(Residency::Ghost { .. })),
        "35 m: kept"
    );
    bus.real_at(155.0, 100.0);
    bus.tick(100);
    assert!(
        matches!(bus.residency(1), Some(Residency::Gone { .. })),
        "45 m: deleted"
    );
    assert_eq!(bus.cell(0).counters().ghosts_deleted, 1);
}

#[test]
fn minimum_lifetimes_delay_deletion() {
    let p = CellParams {
        ghost_min_lifetime_ms: 1_000,
        ..params()
    };
    let mut bus = Bus::new(2, 1, p);
    bus.spawn(0, 180.0, 100.0);
    bus.tick(100);
    assert!(matches!(bus.residency(1), Some(Residency::Ghost { .. })));
    bus.real_at(100.0, 100.0);
    for _ in 0..8 {
        bus.tick(100);
        assert!(matches!(bus.residency(1), Some(Residency::Ghost { .. })));
    }
    bus.tick(200);
    assert!(matches!(bus.residency(1), Some(Residency::Gone { .. })));
}

#[test]
fn migration_moves_the_real_once_past_the_margin() {
    let mut bus = Bus::new(2, 1, params());
    bus.spawn(0, 190.0, 100.0);
    bus.tick(100);
    bus.real_at(205.0, 100.0);
    bus.tick(100);
    assert_eq!(
        bus.where_real(),
        Some(CellId(0)),
        "5 m past: within the margin"
    );
    bus.real_at(209.0, 100.0);
    bus.tick(100);
    assert_eq!(bus.where_real(), Some(CellId(1)));
    assert_eq!(bus.residency(1), Some(Residency::Real { epoch: 1 }));
    assert!(matches!(
        bus.residency(0),
        Some(Residency::Ghost {
            real_at: CellId(1),
            epoch: 1
        })
    ));
    let haunts = bus.cell(1).haunts(E).expect("real").to_vec();
    assert_eq!(haunts.len(), 1);
    assert_eq!(haunts[0].cell, CellId(0));
    assert!(bus.proxy.contains(&ProxyMsg::RealMoved {
        entity: E,
        cell: CellId(1),
        epoch: 1
    }));
    // Walking back a little does not migrate back (hysteresis).
    bus.real_at(195.0, 100.0);
    bus.tick(100);
    assert_eq!(bus.where_real(), Some(CellId(1)));
    assert_eq!(bus.cell(0).counters().migrations_out, 1);
    let seen: Vec<(EntityId, Residency)> = bus.cells[0]
        .entities()
        .map(|(id, v)| (id, v.residency))
        .collect();
    assert_eq!(
        seen,
        vec![(
            E,
            Residency::Ghost {
                real_at: CellId(1),
                epoch: 1
            }
        )]
    );
}

#[test]
fn inputs_and_calls_reaching_the_old_cell_are_forwarded() {
    let mut bus = Bus::new(2, 1, params());
    bus.spawn(0, 190.0, 100.0);
    bus.tick(100);
    bus.real_at(215.0, 100.0);
    bus.tick(100);
    assert_eq!(bus.where_real(), Some(CellId(1)));
    let now = bus.now;
    for seq in [2u64, 1] {
        let target = if seq == 1 { 0 } else { 1 };
        bus.cell(target)
            .handle(now, Source::Proxy(E), input_msg(seq, 0));
    }
    bus.pump();
    bus.tick(10);
    let applied: Vec<u64> = bus
        .events
        .iter()
        .filter_map(|(_, e)| match e {
            CellEvent::InputApplied { seq, .. } => Some(*seq),
            _ => None,
        })
        .collect();
    assert_eq!(applied, vec![1, 2]);
    assert_eq!(bus.cell(0).counters().forwards, 1);
}

/// Early inputs past `input_buffer_max` (a gap that does not fill): the
/// real gives up on the missing ones, keeps the newest and counts the drop;
/// every held input is then applied in order, none twice.
#[test]
fn a_full_input_buffer_skips_the_gap_and_keeps_the_input() {
    let p = CellParams {
        input_buffer_max: 2,
        ..params()
    };
    let mut bus = Bus::new(1, 1, p);
    bus.spawn(0, 100.0, 100.0);
    bus.tick(10);
    let now = bus.now;
    // Input 1 never comes: 2 and 3 are held, 4 finds the buffer full.
    for seq in [2u64, 3, 4] {
        bus.cell(0).handle(now, Source::Proxy(E), input_msg(seq, 0));
    }
    assert_eq!(
        bus.cell(0).counters().dropped(DropReason::InputBufferFull),
        1,
        "the full buffer is counted once"
    );
    bus.tick(10);
    let applied: Vec<(u64, Vec<u8>)> = bus
        .events
        .iter()
        .filter_map(|(_, e)| match e {
            CellEvent::InputApplied { seq, data, .. } => Some((*seq, data.to_vec())),
            _ => None,
        })
        .collect();
    assert_eq!(
        applied,
        vec![(2, vec![2]), (3, vec![3]), (4, vec![4])],
        "the gap given up, the held inputs and the one that found it full applied in order"
    );
}

/// One cell with the real `E` ten ticks old, its events cleared, and its
/// input 1 handled (queued, not run yet).
fn bus_given_input_1() -> Bus {
    let mut bus = Bus::new(1, 1, params());
    bus.spawn(0, 100.0, 100.0);
    bus.tick(10);
    bus.events.clear();
    let now = bus.now;
    bus.cell(0).handle(now, Source::Proxy(E), input_msg(1, 0));
    bus
}

/// A real runs its queued calls before the inputs it releases in the same
/// tick: what an older real deferred to it (inputs it released but could
/// not apply, their replies) came behind the `Onload`, ahead of any input
/// this real holds, and reaches the game first (a deferred input after a
/// later one once sent the client an ack going back: `tessera sim` seed
/// 122, the teleport scenario).
#[test]
fn calls_run_before_the_inputs_of_the_same_tick() {
    // The input arrives first, the call after it: the call still goes first.
    let mut bus = bus_given_input_1();
    let now = bus.now;
    let call = ToReal {
        entity: E,
        hops: 0,
        body: ToRealBody::Call(Call {
            kind: CallKind::Game,
            id: 9,
            data: Arc::from(&[0xD1u8, 1][..]),
        }),
    };
    bus.cell(0)
        .handle(now, Source::Local, CellMsg::ToReal(call));
    bus.tick(10);
    let order: Vec<&str> = bus
        .events
        .iter()
        .filter_map(|(_, e)| match e {
            CellEvent::CallRun { .. } => Some("call"),
            CellEvent::InputApplied { .. } => Some("input"),
            _ => None,
        })
        .collect();
    assert_eq!(order, ["call", "input"]);
}

/// `run_reals` visits only the reals listed busy (given an input or a
/// call since the last tick); the check that every real with a call or a
/// ready input is listed fires when one is not, and a listed input is
/// applied at the next tick.
#[test]
fn a_real_given_an_input_is_listed_busy_and_the_check_fires_without() {
    let mut bus = bus_given_input_1();
    bus.cell(0).verify_busy_reals();
    let listed = std::mem::take(&mut bus.cell(0).busy_reals);
    assert_eq!(listed, [E]);
    let fired = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        bus.cell(0).verify_busy_reals()
    }));
    assert!(
        fired.is_err(),
        "an unlisted real with a ready input is caught"
    );
    bus.cell(0).busy_reals = listed;
    bus.tick(1);
    let applied = (bus.events.iter())
        .filter(|(_, e)| matches!(e, CellEvent::InputApplied { seq: 1, .. }))
        .count();
    assert_eq!(applied, 1);
    assert!(bus.cell(0).busy_reals.is_empty(), "emptied by the tick");
}

/// `emit_syncs` visits only the reals listed changed: a change through
/// the cell's API lists the real (once however often it is asked for) and
/// is synced at the next tick; a change made behind the list's back (the
/// entity reached without `real_entry`) is caught by the check, and would
/// not be synced.
#[test]
fn a_changed_real_is_listed_and_the_check_fires_without() {
    let mut bus = Bus::new(1, 1, params());
    bus.spawn(0, 100.0, 100.0);
    bus.tick(10);
    assert!(bus.cell(0).changed_reals.is_empty(), "emptied by the ticks");
    bus.cell(0).verify_changed_reals();
    let cell = bus.cell(0);
    cell.move_real(E, Vec3::ground(101.0, 100.0)).expect("real");
    cell.real_mut(E).expect("real");
    assert_eq!(cell.changed_reals, [E], "listed once");
    cell.verify_changed_reals();
    let built = cell.counters.syncs_built;
    bus.tick(1);
    assert_eq!(bus.cell(0).counters.syncs_built, built + 1, "synced");
    assert!(bus.cell(0).changed_reals.is_empty());

    let e = bus.cell(0).entities.get_mut(E).expect("held");
    e.entity.set_movement(Vec3::ground(102.0, 100.0), 0.0);
    let fired = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        bus.cell(0).verify_changed_reals()
    }));
    assert!(fired.is_err(), "an unlisted changed real is caught");
}

/// `run_combat` visits only the reals whose combat is not idle: a hit
/// lists the attacker, its call lists the target, and both leave the list
/// once the hit resolved and its memory expired; the check fires when a
/// busy combat is not listed.
#[test]
fn a_real_in_combat_is_listed_and_the_check_fires_without() {
    let target = EntityId(43);
    let mut bus = Bus::new(1, 1, params());
    bus.spawn(0, 100.0, 100.0);
    let now = bus.now;
    let mut t = avatar(target, 102.0, 100.0);
    let ty = types().get(AVATAR).expect("avatar").clone();
    let faction = ty.prop_index("faction").expect("faction");
    let hp = ty.prop_index("hp").expect("hp");
    t.props_mut().set(faction, Value::UInt(2)).expect("set");
    t.props_mut().set(hp, Value::Int(100)).expect("set");
    let cell = bus.cell(0);
    cell.create_real(now, t, false, 0).expect("spawn");
    let me = cell.real_mut(E).expect("real");
    me.props_mut().set(faction, Value::UInt(1)).expect("set");
    bus.tick(10);
    assert!(bus.cell(0).combat_reals.is_empty(), "no combat yet");
    let hp_of = |bus: &mut Bus| {
        bus.cell(0)
            .real_mut(target)
            .expect("real")
            .props()
            .get(hp)
            .cloned()
    };
    let before = hp_of(&mut bus);

    let now = bus.now;
    bus.cell(0).try_hit(now, E, target, 5).expect("a hit");
    assert_eq!(bus.cell(0).combat_reals, [E], "the attacker is listed");
    bus.cell(0).verify_combat_reals();
    let listed = std::mem::take(&mut bus.cell(0).combat_reals);
    let fired = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        bus.cell(0).verify_combat_reals()
    }));
    assert!(fired.is_err(), "an unlisted busy combat is caught");
    bus.cell(0).combat_reals = listed;

    for _ in 0..60 {
        bus.tick(100);
    }
    assert_ne!(hp_of(&mut bus), before, "the hit landed");
    assert!(
        bus.cell(0).combat_reals.is_empty(),
        "both left the list once their combat went idle"
    );
}

#[test]
fn forwarding_gives_up_after_the_hop_limit() {
    let mut bus = Bus::new(2, 1, params());
    bus.spawn(0, 190.0, 100.0);
    bus.tick(100);
    let now = bus.now;
    let call = ToReal {
        entity: E,
        hops: params().forward_hops_max,
        body: ToRealBody::Call(Call {
            kind: CallKind::Game,
            id: 1,
            data: Arc::from(&[][..]),
        }),
    };
    bus.cell(1)
        .handle(now, Source::Local, CellMsg::ToReal(call.clone()));
    assert_eq!(
        bus.cell(1)
            .counters()
            .dropped(DropReason::ForwardHopsExceeded),
        1
    );
    bus.cell(1).handle(
        now,
        Source::Local,
        CellMsg::ToReal(ToReal {
            entity: EntityId(7),
            ..call
        }),
    );
    // Unknown here: held for a while (it may be ahead of its CreateGhost),
    // then dropped.
    assert_eq!(bus.cell(1).counters().dropped(DropReason::UnknownEntity), 0);
    assert_eq!(bus.cell(1).counters().early_held, 1);
    bus.tick(params().ghost_create_timeout_ms);
    assert_eq!(bus.cell(1).counters().dropped(DropReason::UnknownEntity), 1);
}

#[test]
fn a_tombstone_stops_an_older_create_from_resurrecting_a_ghost() {
    let mut bus = Bus::new(3, 1, params());
    let now = bus.now;
    let c = bus.cell(2);
    c.handle(
        now,
        Source::Cell(CellId(1)),
        CellMsg::DeleteGhost {
            entity: E,
            epoch: 2,
        },
    );
    let snapshot = SyncEmitter::resume(3).ghost_snapshot(now, &avatar(E, 390.0, 10.0));
    let create = |epoch| CellMsg::CreateGhost {
        entity: E,
        epoch,
        type_id: AVATAR,
        snapshot: snapshot.clone(),
    };
    c.handle(now, Source::Cell(CellId(0)), create(1));
    assert!(matches!(
        c.residency(E),
        Some(Residency::Gone { epoch: 2, .. })
    ));
    assert_eq!(c.counters().dropped(DropReason::StaleEpoch), 1);
    // The same (newest) real may re-create it.
    c.handle(now, Source::Cell(CellId(1)), create(2));
    assert!(matches!(
        c.residency(E),
        Some(Residency::Ghost { epoch: 2, .. })
    ));
    // An older delete crossing a newer create is ignored.
    c.handle(
        now,
        Source::Cell(CellId(0)),
        CellMsg::DeleteGhost {
            entity: E,
            epoch: 1,
        },
    );
    assert!(matches!(c.residency(E), Some(Residency::Ghost { .. })));
    assert!(c.history(E).len() >= 2 || !cfg!(debug_assertions));
}

#[test]
fn a_lost_sync_is_healed_by_a_resync_from_the_cache() {
    let mut bus = Bus::new(2, 1, params());
    bus.spawn(0, 185.0, 100.0);
    bus.tick(100);
    assert!(matches!(bus.residency(1), Some(Residency::Ghost { .. })));
    let is_v1 =
        |o: &Outgoing| matches!(&o.msg, Msg::Cell(CellMsg::Sync { msg, .. }) if msg.version == 1);
    bus.lose = Some(is_v1);
    bus.real_at(186.0, 100.0);
    bus.tick(10);
    bus.lose = None;
    bus.real_at(187.0, 100.0);
    bus.tick(10);
    assert_eq!(
        bus.cells[1].view(E).expect("ghost").version,
        0,
        "v2 waits for v1"
    );
    let hp = types()
        .get(AVATAR)
        .expect("avatar")
        .prop_index("hp")
        .expect("hp");
    bus.cell(0)
        .real_mut(E)
        .expect("real")
        .props_mut()
        .set(hp, Value::Int(7))
        .expect("hp");
    for _ in 0..5 {
        bus.tick(100);
    }
    let ghost = bus.cells[1].view(E).expect("ghost");
    assert_eq!(ghost.version, 3);
    assert_eq!(ghost.pos(), Vec3::ground(187.0, 100.0));
    assert_eq!(ghost.entity.props().get(hp), Some(&Value::Int(7)));
    assert_eq!(bus.cells[1].counters().resync_requests, 1);
    let synced: Vec<u64> = bus
        .events
        .iter()
        .filter_map(|(c, e)| match e {
            CellEvent::GhostSynced { version, .. } if *c == CellId(1) => Some(*version),
            _ => None,
        })
        .collect();
    assert_eq!(synced, vec![1, 2, 3]);
}

#[test]
fn a_merging_cell_pushes_its_reals_out() {
    let mut bus = Bus::new(2, 1, params());
    bus.spawn(0, 185.0, 100.0);
    bus.tick(100);
    bus.layout.set_merging(CellId(0), true);
    bus.tick(100);
    assert_eq!(bus.where_real(), Some(CellId(1)));
    // It now stands 15 m inside cell 0, outside cell 1's margin, but nothing
    // migrates into a merging cell.
    for _ in 0..5 {
        bus.tick(100);
        assert_eq!(bus.where_real(), Some(CellId(1)));
    }
    bus.layout.set_merging(CellId(0), false);
    bus.tick(100);
    assert_eq!(bus.where_real(), Some(CellId(0)), "back once cell 0 stays");
}

#[test]
fn teleport_sends_create_then_onload_on_one_channel() {
    let mut bus = Bus::new(3, 1, params());
    bus.spawn(0, 100.0, 100.0);
    bus.tick(100);
    let now = bus.now;
    let layout = bus.layout.clone();
    bus.cell(0)
        .teleport(now, E, Vec3::ground(500.0, 100.0), &layout)
        .expect("teleport");
    let mut to_2 = Vec::new();
    while let Some(o) = bus.cell(0).poll_output() {
        if o.to == Dest::Cell(CellId(2)) {
            to_2.push(o);
        }
    }
    assert!(matches!(
        to_2[0].msg,
        Msg::Cell(CellMsg::CreateGhost { .. })
    ));
    assert!(matches!(to_2[1].msg, Msg::Cell(CellMsg::Onload(_))));
    for o in to_2 {
        let Msg::Cell(m) = o.msg else { unreachable!() };
        bus.cell(2).handle(now, Source::Cell(CellId(0)), m);
    }
    bus.pump();
    assert_eq!(bus.where_real(), Some(CellId(2)));
    // The old cell's ghost is far away: deleted once the keep periods pass.
    for _ in 0..3 {
        bus.tick(100);
    }
    assert!(matches!(bus.residency(0), Some(Residency::Gone { .. })));
    for c in &bus.cells {
        c.verify();
    }
}

#[test]
fn the_create_budget_caps_each_check() {
    let p = CellParams {
        ghosts_created_per_check_max: 2,
        ..params()
    };
    let mut bus = Bus::new(2, 2, p);
    let now = bus.now;
    for i in 0..3 {
        bus.cell(0)
            .create_real(now, avatar(EntityId(i), 190.0, 190.0), false, 0)
            .expect("spawn");
    }
    bus.tick(100);
    assert_eq!(bus.cell(0).counters().ghosts_created, 2);
    bus.tick(100);
    assert_eq!(bus.cell(0).counters().ghosts_created, 4);
    for _ in 0..4 {
        bus.tick(100);
    }
    assert_eq!(
        bus.cell(0).counters().ghosts_created,
        9,
        "3 reals x 3 neighbours"
    );
}

#[test]
fn a_destination_still_being_created_by_an_older_real_is_created_again() {
    let mut bus = Bus::new(2, 2, params());
    // Hold everything for cell 3 (the one both reals will ghost to).
    let to_3 = |o: &Outgoing| o.to == Dest::Cell(CellId(3));
    bus.spawn(0, 195.0, 195.0);
    bus.lose = Some(to_3);
    bus.tick(100);
    assert_eq!(bus.residency(3), None, "create from cell 0 lost in flight");
    bus.real_at(210.0, 195.0);
    bus.tick(100);
    assert_eq!(bus.where_real(), Some(CellId(1)));
    let inherited = bus
        .cell(1)
        .haunts(E)
        .expect("real")
        .iter()
        .find(|h| h.cell == CellId(3))
        .copied();
    assert!(matches!(
        inherited.map(|h| h.state),
        Some(HauntState::Creating {
            sent_by: CellId(0),
            ..
        })
    ));
    bus.lose = None;
    bus.real_at(215.0, 215.0);
    bus.tick(100);
    assert_eq!(
        bus.where_real(),
        Some(CellId(3)),
        "migrated through a fresh ghost"
    );
    let steps: Vec<Option<Residency>> = bus.cells[3]
        .history(E)
        .into_iter()
        .map(|(_, r)| r)
        .collect();
    if cfg!(debug_assertions) {
        assert!(matches!(
            steps[0],
            Some(Residency::Ghost {
                real_at: CellId(1),
                epoch: 1
            })
        ));
        assert_eq!(steps[1], Some(Residency::Real { epoch: 2 }));
    }
}

/// `send_to_client_or_back` hands the data back with `NotReal` where the
/// entity is not real (a caller forwards it), with `NoProxy` where it is a
/// real with no client, and sends it, numbered, where it has one (fails if
/// a send to a missing real lost its data, or one went unnumbered).
#[test]
fn a_send_to_a_client_hands_the_data_back_where_it_cannot_go() {
    use crate::core::down::DownBody;
    let now = Time::ZERO;
    let mut cell = Cell::new(CellId(0), params(), types()).expect("params");
    let body = || DownBody::from(&[7u8, 8, 9][..]);
    match cell.send_to_client_or_back(E, body()) {
        Err((CellError::NotReal(e), back)) => {
            assert_eq!(e, E);
            assert_eq!(&*back, &[7, 8, 9], "the data comes back whole");
        }
        other => panic!("no real here: {:?}", other.map_err(|(e, _)| e)),
    }
    let lone = EntityId(77);
    cell.create_real(now, avatar(lone, 10.0, 10.0), false, 0)
        .expect("a real with no client");
    assert!(matches!(
        cell.send_to_client_or_back(lone, body()),
        Err((CellError::NoProxy(e), _)) if e == lone
    ));
    cell.create_real(now, avatar(E, 20.0, 20.0), true, 0)
        .expect("an avatar");
    while cell.poll_output().is_some() {}
    cell.send_to_client_or_back(E, body()).expect("sent");
    cell.send_to_client_or_back(E, body()).expect("sent");
    let seqs: Vec<u64> = std::iter::from_fn(|| cell.poll_output())
        .filter_map(|o| match o.msg {
            Msg::Proxy(ProxyMsg::Downstream { entity, seq, .. }) if entity == E => Some(seq),
            _ => None,
        })
        .collect();
    assert_eq!(seqs.len(), 2, "both sends went out");
    assert_eq!(seqs[1], seqs[0] + 1, "numbered in order");
}
