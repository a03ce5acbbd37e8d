//! The invariant checker: DESIGN.md's invariants, checked as the world runs.
//!
//! The world feeds it every cell event ([`Checker::on_event`]), every
//! `Onload` it delivers ([`Checker::on_onload`]), every position it gives a
//! real ([`Checker::on_real_cell`]) and every call it issues; once per step
//! it checks residency ([`Checker::check_reals`]); after healing, the world
//! runs the convergence checks of `checker_converge.rs`.
//!
//! Safety (every step, faults or not):
//! - one real per entity, or one `Onload` in flight; never zero, never two;
//! - client inputs applied exactly once, in sequence order;
//! - the destination of a migration holds a ghost when the `Onload` arrives;
//! - no message for a live entity is lost (`UnknownEntity`,
//!   `ForwardHopsExceeded`, `InputBufferFull`, `CallQueueFull` drops);
//! - ghosts apply versions in order (`+1` per sync; creations and resyncs
//!   never go back);
//! - a real migrates only after crossing into another cell since its last
//!   migration (hysteresis: no flapping);
//! - calls run once, at the entity they were sent to.
//!
//! Owns only its bookkeeping and the violations found; reads cells, never
//! changes them.

use std::collections::BTreeMap;

use crate::core::cell::{CellEvent, DropReason, Residency};
use crate::core::combat::CombatEvent;
use crate::core::ids::{CellId, EntityId};
use crate::sim::report::{Violation, ViolationKind};
use crate::sim::world_logic::SCRIPT_CALL;

/// What the checker remembers of one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallRecord {
    /// The entity it was sent to.
    pub target: EntityId,
    /// Times it ran.
    pub runs: u32,
}

/// Per-entity bookkeeping.
#[derive(Clone, Copy, Debug, Default)]
struct EntityBook {
    /// Last client input sequence applied (0: none).
    input_applied: u64,
    /// Migrations seen (`BecameReal` from another cell).
    migrations: u64,
    /// Times the cell under the real's position changed.
    crossings: u64,
    /// `crossings` at the last migration.
    crossings_at_migration: u64,
    /// At the last migration the cell under the real was not its new cell
    /// (a boundary moved again while it was in flight): the next migration
    /// needs no new crossing.
    unsettled: bool,
    /// The real is arriving in a cell it must leave again without crossing
    /// (merging or retired): the migration after this arrival is no flap.
    leaving: bool,
    /// The cell under the real's position, as last given.
    cell_under: Option<CellId>,
}

/// Checks invariants and collects violations (see the module doc).
#[derive(Debug)]
pub struct Checker {
    pub(super) seed: u64,
    books: Vec<EntityBook>,
    /// Last version applied by each ghost, keyed by (cell, entity).
    pub(super) ghost_versions: BTreeMap<(CellId, EntityId), u64>,
    pub(super) calls: Vec<CallRecord>,
    /// Combat hits seen, keyed by (attacker, seq): (ended at the attacker,
    /// resolved at the target).
    hits: BTreeMap<(EntityId, u64), (bool, bool)>,
    pub(super) found: Vec<Violation>,
    violations_max: usize,
    total: u64,
}

impl Checker {
    /// A checker for `entities` entities (ids `0..entities`), keeping at
    /// most `violations_max` violations (the rest are only counted).
    pub fn new(seed: u64, entities: usize, violations_max: usize) -> Self {
        Checker {
            seed,
            books: vec![EntityBook::default(); entities],
            ghost_versions: BTreeMap::new(),
            calls: Vec::new(),
            hits: BTreeMap::new(),
            found: Vec::new(),
            violations_max,
            total: 0,
        }
    }

    /// Records a violation.
    pub fn report(
        &mut self,
        tick: u64,
        kind: ViolationKind,
        entity: Option<EntityId>,
        detail: String,
    ) {
        self.total += 1;
        if self.found.len() < self.violations_max {
            self.found.push(Violation {
                seed: self.seed,
                tick,
                kind,
                entity,
                detail,
                context: String::new(),
            });
        }
    }

    /// Border crossings of every real so far (times the cell under its
    /// position changed).
    pub fn crossings(&self) -> u64 {
        self.books.iter().map(|b| b.crossings).sum()
    }

    /// Violations found so far (all of them, kept or not).
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The kept violations.
    pub fn violations(&self) -> &[Violation] {
        &self.found
    }

    /// Mutable access to the kept violations (the world adds context).
    pub fn violations_mut(&mut self) -> &mut [Violation] {
        &mut self.found
    }

    /// The last input sequence applied for `e`.
    pub fn input_applied(&self, e: EntityId) -> u64 {
        self.books[e.0 as usize].input_applied
    }

    /// Migrations seen for `e`.
    pub fn migrations(&self, e: EntityId) -> u64 {
        self.books[e.0 as usize].migrations
    }

    /// Call `id`: its target and how many times it ran so far (`None` if
    /// it was never issued).
    pub fn call_runs(&self, id: u64) -> Option<(EntityId, u32)> {
        let c = self.calls.get(usize::try_from(id).ok()?)?;
        Some((c.target, c.runs))
    }

    /// A call was issued to `target`; returns its id.
    pub fn on_call_issued(&mut self, target: EntityId) -> u64 {
        self.calls.push(CallRecord { target, runs: 0 });
        self.calls.len() as u64 - 1
    }

    /// The ghost of `e` at `cell` (a real that just offloaded) is at
    /// `version`: the next sync it applies must be `version + 1`.
    pub fn ghost_baseline(&mut self, cell: CellId, e: EntityId, version: u64) {
        self.ghost_versions.insert((cell, e), version);
    }

    /// The world gave `e`'s real a position under cell `under` (or the
    /// layout changed under it).
    pub fn on_real_cell(&mut self, e: EntityId, under: Option<CellId>) {
        let b = &mut self.books[e.0 as usize];
        if b.cell_under != under {
            if b.cell_under.is_some() {
                b.crossings += 1;
            }
            b.cell_under = under;
        }
    }

    /// `e`'s real must leave its cell without crossing a border (its cell
    /// started merging): its next migration is no flap.
    pub fn excuse_migration(&mut self, e: EntityId) {
        self.books[e.0 as usize].unsettled = true;
    }

    /// `e`'s real is arriving in a cell it must leave again without
    /// crossing (a merging or retired cell, handed over by a shard that had
    /// not heard of the merge): the migration after this arrival is no flap.
    pub fn excuse_departure(&mut self, e: EntityId) {
        self.books[e.0 as usize].leaving = true;
    }

    /// An `Onload` of `e` is about to be handled by `to`, which holds `e` as
    /// `before`.
    pub fn on_onload(&mut self, tick: u64, to: CellId, e: EntityId, before: Option<Residency>) {
        if !matches!(before, Some(Residency::Ghost { .. })) {
            let detail = format!("Onload reached {to}, which held {before:?}, not a ghost");
            self.report(tick, ViolationKind::MigratedWithoutGhost, Some(e), detail);
        }
    }

    /// One cell event from `cell`.
    pub fn on_event(&mut self, tick: u64, cell: CellId, ev: &CellEvent) {
        match *ev {
            CellEvent::InputApplied { entity, seq, .. } => self.input(tick, cell, entity, seq),
            // The world's script calls; the game's own calls (effects
            // deferred past a migration) are checked through the game.
            CellEvent::CallRun {
                entity,
                id,
                ref data,
            } if data.first() == Some(&SCRIPT_CALL) => self.call_run(tick, entity, id),
            CellEvent::CallRun { .. } => {}
            CellEvent::BecameReal { entity, from } => {
                self.ghost_versions.remove(&(cell, entity));
                if from.is_some() {
                    self.migrated(tick, cell, entity);
                }
            }
            CellEvent::BecameGhost { entity, .. } => {
                // The new ghost starts at the real's version; the next sync
                // it may apply is any later one (no event gives the number).
                self.ghost_versions.remove(&(cell, entity));
            }
            CellEvent::GhostAdded { entity, version } => {
                let key = (cell, entity);
                if let Some(&had) = self.ghost_versions.get(&key) {
                    if version < had {
                        let d = format!("ghost at {cell} re-created at v{version} after v{had}");
                        self.report(tick, ViolationKind::GhostOutOfOrder, Some(entity), d);
                    }
                }
                self.ghost_versions.insert(key, version);
            }
            CellEvent::GhostRemoved { entity } => {
                self.ghost_versions.remove(&(cell, entity));
            }
            CellEvent::GhostSynced { entity, version } => {
                self.synced(tick, cell, entity, version, false)
            }
            CellEvent::GhostResynced { entity, version } => {
                self.synced(tick, cell, entity, version, true)
            }
            CellEvent::Dropped { entity, reason } => self.dropped(tick, cell, entity, reason),
            // The owner's view of its own changes: checked by observers.
            CellEvent::OwnChange { .. } => {}
            // The simulator never destroys (clients never leave).
            CellEvent::Destroyed { .. } => {}
            CellEvent::Combat { entity, ref event } => self.combat(tick, entity, event),
        }
    }

    fn input(&mut self, tick: u64, cell: CellId, e: EntityId, seq: u64) {
        let b = &mut self.books[e.0 as usize];
        let last = b.input_applied;
        b.input_applied = b.input_applied.max(seq);
        // Only the highest input applied is kept: the same one again is a
        // repeat, an older one came after a later one (a repeat of an
        // older one is that too), and a jump skipped the inputs between.
        if seq == last {
            let d = format!("input {seq} applied again at {cell}");
            self.report(tick, ViolationKind::InputDuplicated, Some(e), d);
        } else if seq < last {
            let d = format!("input {seq} applied at {cell} after input {last}");
            self.report(tick, ViolationKind::InputOutOfOrder, Some(e), d);
        } else if seq != last + 1 {
            let d = format!(
                "input {seq} applied at {cell} right after input {last}: {} skipped",
                seq - last - 1
            );
            self.report(tick, ViolationKind::InputLost, Some(e), d);
        }
    }

    fn call_run(&mut self, tick: u64, e: EntityId, id: u64) {
        let Some(rec) = self.calls.get_mut(id as usize) else {
            let d = format!("call {id} ran but was never issued");
            self.report(tick, ViolationKind::CallLost, Some(e), d);
            return;
        };
        rec.runs += 1;
        let rec = *rec;
        if rec.target != e {
            let d = format!("call {id} for {} ran at {e}", rec.target);
            self.report(tick, ViolationKind::CallLost, Some(e), d);
        } else if rec.runs > 1 {
            let d = format!("call {id} ran {} times", rec.runs);
            self.report(tick, ViolationKind::CallDuplicated, Some(e), d);
        }
    }

    fn migrated(&mut self, tick: u64, cell: CellId, e: EntityId) {
        let b = &mut self.books[e.0 as usize];
        b.migrations += 1;
        let crossed = b.crossings > b.crossings_at_migration || b.unsettled;
        b.crossings_at_migration = b.crossings;
        b.unsettled = b.cell_under.is_some_and(|u| u != cell) || std::mem::take(&mut b.leaving);
        if !crossed {
            let d = format!(
                "migration #{} into {cell} without crossing into another cell since the last one",
                b.migrations
            );
            self.report(tick, ViolationKind::MigrationFlap, Some(e), d);
        }
    }

    fn synced(&mut self, tick: u64, cell: CellId, e: EntityId, version: u64, resync: bool) {
        let key = (cell, e);
        match self.ghost_versions.get(&key).copied() {
            None => {
                // A ghost that was a real here a moment ago starts from the
                // version it had; the first sync has no baseline.
                self.ghost_versions.insert(key, version);
            }
            Some(had) => {
                let ok = if resync {
                    version > had
                } else {
                    version == had + 1
                };
                if !ok {
                    let what = if resync { "resynced to" } else { "applied" };
                    let d = format!("ghost at {cell} {what} v{version} after v{had}");
                    self.report(tick, ViolationKind::GhostOutOfOrder, Some(e), d);
                }
                self.ghost_versions.insert(key, version.max(had));
            }
        }
    }

    /// A combat hit ends exactly once at its attacker (landed or expired) and
    /// is resolved at most once at its target.
    fn combat(&mut self, tick: u64, e: EntityId, event: &CombatEvent) {
        let (key, at_target) = match *event {
            CombatEvent::HitLanded { seq, .. } | CombatEvent::HitExpired { seq, .. } => {
                ((e, seq), false)
            }
            CombatEvent::Damaged { attacker, seq, .. } => ((attacker, seq), true),
            _ => return,
        };
        let book = self.hits.entry(key).or_default();
        let again = if at_target {
            std::mem::replace(&mut book.1, true)
        } else {
            std::mem::replace(&mut book.0, true)
        };
        if again {
            let side = if at_target {
                "resolved at its target"
            } else {
                "ended at its attacker"
            };
            let d = format!("hit {} of {} {side} twice ({event:?})", key.1, key.0);
            self.report(tick, ViolationKind::CallDuplicated, Some(e), d);
        }
    }

    fn dropped(&mut self, tick: u64, cell: CellId, e: EntityId, reason: DropReason) {
        let kind = match reason {
            DropReason::UnknownEntity | DropReason::ForwardHopsExceeded => {
                ViolationKind::ForwardLost
            }
            DropReason::InputBufferFull => ViolationKind::InputLost,
            DropReason::CallQueueFull => ViolationKind::CallLost,
            r if r.is_benign() => return,
            _ => ViolationKind::HarmfulDrop,
        };
        let d = format!("{cell} dropped a message: {reason:?}");
        self.report(tick, kind, Some(e), d);
    }

    /// Exactly one real per entity, or one `Onload` in flight. `reals[i]`
    /// counts the cells holding entity `i` as real, `in_flight[i]` its
    /// `Onload`s on the network.
    pub fn check_reals(&mut self, tick: u64, reals: &[u32], in_flight: &[u32]) {
        for (i, (&r, &f)) in reals.iter().zip(in_flight).enumerate() {
            if r + f == 1 {
                continue;
            }
            let e = EntityId(i as u64);
            let kind = if r + f == 0 {
                ViolationKind::NoReal
            } else {
                ViolationKind::TwoReals
            };
            let d = format!("{r} cells hold it as real, {f} Onload in flight");
            self.report(tick, kind, Some(e), d);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn applied(seq: u64) -> CellEvent {
        CellEvent::InputApplied {
            entity: EntityId(0),
            seq,
            data: (&[][..]).into(),
        }
    }

    fn kinds(c: &Checker) -> Vec<ViolationKind> {
        c.violations().iter().map(|v| v.kind).collect()
    }

    #[test]
    fn inputs_in_order_pass_and_gaps_or_repeats_fail() {
        let mut c = Checker::new(1, 1, 8);
        for s in 1..=3 {
            c.on_event(0, CellId(0), &applied(s));
        }
        assert!(kinds(&c).is_empty());
        c.on_event(1, CellId(0), &applied(3));
        c.on_event(2, CellId(0), &applied(5));
        c.on_event(3, CellId(0), &applied(4));
        assert_eq!(
            kinds(&c),
            vec![
                ViolationKind::InputDuplicated,
                ViolationKind::InputLost,
                ViolationKind::InputOutOfOrder
            ]
        );
        assert_eq!(c.violations()[0].seed, 1);
    }

    #[test]
    fn residency_counts_flag_zero_and_two() {
        let mut c = Checker::new(0, 4, 8);
        c.check_reals(5, &[1, 0, 0, 2], &[0, 1, 0, 0]);
        assert_eq!(
            kinds(&c),
            vec![ViolationKind::NoReal, ViolationKind::TwoReals]
        );
        assert_eq!(c.violations()[0].entity, Some(EntityId(2)));
        assert_eq!(c.violations()[1].tick, 5);
    }

    #[test]
    fn ghost_versions_must_follow_each_other() {
        let mut c = Checker::new(0, 1, 8);
        let (cell, e) = (CellId(3), EntityId(0));
        c.on_event(
            0,
            cell,
            &CellEvent::GhostAdded {
                entity: e,
                version: 4,
            },
        );
        c.on_event(
            0,
            cell,
            &CellEvent::GhostSynced {
                entity: e,
                version: 5,
            },
        );
        c.on_event(
            0,
            cell,
            &CellEvent::GhostResynced {
                entity: e,
                version: 9,
            },
        );
        assert!(kinds(&c).is_empty());
        c.on_event(
            1,
            cell,
            &CellEvent::GhostSynced {
                entity: e,
                version: 11,
            },
        );
        c.on_event(
            1,
            cell,
            &CellEvent::GhostAdded {
                entity: e,
                version: 2,
            },
        );
        assert_eq!(
            kinds(&c),
            vec![
                ViolationKind::GhostOutOfOrder,
                ViolationKind::GhostOutOfOrder
            ]
        );
    }

    #[test]
    fn landing_off_the_cell_under_excuses_one_more_migration() {
        let mut c = Checker::new(0, 1, 8);
        let e = EntityId(0);
        c.on_real_cell(e, Some(CellId(0)));
        c.on_real_cell(e, Some(CellId(1)));
        let moved = |from| CellEvent::BecameReal {
            entity: e,
            from: Some(CellId(from)),
        };
        // The layout moved while the real was in flight: it lands in c2,
        // not under it; going on to c1 is no flap, a further hop is.
        c.on_event(1, CellId(2), &moved(0));
        c.on_event(2, CellId(1), &moved(2));
        assert!(kinds(&c).is_empty(), "{:?}", c.violations());
        c.on_event(3, CellId(2), &moved(1));
        assert_eq!(kinds(&c), vec![ViolationKind::MigrationFlap]);
    }

    #[test]
    fn arriving_in_a_merging_cell_excuses_the_way_out_only() {
        let mut c = Checker::new(0, 1, 8);
        let e = EntityId(0);
        c.on_real_cell(e, Some(CellId(0)));
        c.on_real_cell(e, Some(CellId(1)));
        let moved = |from| CellEvent::BecameReal {
            entity: e,
            from: Some(CellId(from)),
        };
        // Handed to c1, which is merging: it leaves for c0 without crossing.
        c.excuse_departure(e);
        c.on_event(1, CellId(1), &moved(0));
        c.on_event(2, CellId(0), &moved(1));
        assert!(kinds(&c).is_empty(), "{:?}", c.violations());
        // It landed off the cell under it (c1): one more hop is excused,
        // and then the excuses are spent.
        c.on_event(3, CellId(1), &moved(0));
        assert!(kinds(&c).is_empty(), "{:?}", c.violations());
        c.on_event(4, CellId(0), &moved(1));
        assert_eq!(kinds(&c), vec![ViolationKind::MigrationFlap]);
    }

    #[test]
    fn flapping_and_migration_without_ghost_are_caught() {
        let mut c = Checker::new(0, 1, 8);
        let e = EntityId(0);
        c.on_real_cell(e, Some(CellId(0)));
        c.on_real_cell(e, Some(CellId(1)));
        let moved = |from| CellEvent::BecameReal {
            entity: e,
            from: Some(CellId(from)),
        };
        c.on_event(1, CellId(1), &moved(0));
        assert!(kinds(&c).is_empty(), "one crossing, one migration");
        c.on_event(2, CellId(0), &moved(1));
        assert_eq!(kinds(&c), vec![ViolationKind::MigrationFlap]);
        c.on_onload(3, CellId(1), e, None);
        c.on_onload(
            3,
            CellId(1),
            e,
            Some(Residency::Ghost {
                real_at: CellId(0),
                epoch: 1,
            }),
        );
        assert_eq!(c.violations().len(), 2);
        assert_eq!(c.violations()[1].kind, ViolationKind::MigratedWithoutGhost);
    }

    #[test]
    fn calls_run_once_at_their_target_and_lossy_drops_fail() {
        let mut c = Checker::new(0, 2, 8);
        let id = c.on_call_issued(EntityId(1));
        let run = |e| CellEvent::CallRun {
            entity: EntityId(e),
            id,
            data: Arc::from(&[SCRIPT_CALL][..]),
        };
        c.on_event(0, CellId(0), &run(1));
        assert!(kinds(&c).is_empty());
        c.on_event(0, CellId(0), &run(1));
        c.on_event(0, CellId(0), &run(0));
        let drop = |reason| CellEvent::Dropped {
            entity: EntityId(0),
            reason,
        };
        c.on_event(0, CellId(0), &drop(DropReason::DuplicateSync));
        c.on_event(0, CellId(0), &drop(DropReason::UnknownEntity));
        assert_eq!(
            kinds(&c),
            vec![
                ViolationKind::CallDuplicated,
                ViolationKind::CallLost,
                ViolationKind::ForwardLost
            ]
        );
    }

    #[test]
    fn keeps_at_most_the_bound_but_counts_all() {
        let mut c = Checker::new(0, 3, 1);
        c.check_reals(0, &[0, 0, 0], &[0, 0, 0]);
        assert_eq!((c.violations().len(), c.total()), (1, 3));
    }
}
