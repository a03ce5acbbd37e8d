//! Combat hosted by a cell: every real has a [`Combat`] state (it travels
//! in `Onload::combat`); the cell validates hits, ticks combat, routes hit
//! and feedback calls to the addressee's real wherever it is, and reports
//! what happened as [`CellEvent::Combat`].
//!
//! Owns only the `impl Cell` glue; the hit flow itself is `core::combat`.
//!
//! # Routing
//!
//! A [`CombatOutput`](crate::core::combat::CombatOutput) becomes a
//! `ToReal { entity: to, body: Call }` handed to the cell's own real-bound
//! path: queued if `to` is real here, else forwarded towards its real
//! (ghost's `real_at`, forwarding entry). At the real, a call of kind
//! [`CallKind::Combat`] (never a guess from its bytes) runs through
//! [`Combat::handle_call`] at the next tick instead of surfacing as
//! [`CellEvent::CallRun`]. A hit lowers `hp`, which syncs out with the
//! tick's change set, so every client that sees the target gets it.

use std::sync::Arc;

use crate::core::combat::{Combat, CombatEvent, HitRefused};
use crate::core::ids::EntityId;
use crate::core::time::Time;

use super::counters::CellEvent;
use super::machine::Cell;
use super::msg::{Call, CallKind, Source, ToReal, ToRealBody};
use super::table::{Entry, Part, RealPart};

/// How long a target stays important to its attacker's client, and an
/// attacker to its victim's, milliseconds.
pub const IMPORTANT_MS: u32 = 5_000;

/// Why [`Cell::try_hit`] refused.
#[derive(Clone, Copy, Debug, PartialEq, thiserror::Error)]
pub enum HitError {
    /// The attacker is not real in this cell.
    #[error("attacker {0} is not real in this cell")]
    NotReal(EntityId),
    /// The combat rules refused it.
    #[error(transparent)]
    Refused(#[from] HitRefused),
}

impl Cell {
    /// try_hit: real `attacker` starts a hit on `target` with `damage`. The
    /// target must be visible to the attacker: in its observer's view if it
    /// has a client, else held here as a copy (real or ghost). The hit is
    /// sent after the combat's `hit_delay_ms` and resolved at the target's
    /// real; see [`CellEvent::Combat`] for the outcome.
    ///
    /// # Errors
    /// [`HitError::NotReal`] if `attacker` is not real here;
    /// [`HitError::Refused`] naming the failed combat check.
    pub fn try_hit(
        &mut self,
        now: Time,
        attacker: EntityId,
        target: EntityId,
        damage: i64,
    ) -> Result<u64, HitError> {
        let visible = match self.views.watch(attacker) {
            Some(w) => w.observer.sees(target),
            None => self.entities.get(target).is_some(),
        };
        let params = self.views.params.combat;
        let Some(Part::Real(r)) = self.entities.get_mut(attacker).map(|e| &mut e.part) else {
            return Err(HitError::NotReal(attacker));
        };
        // Borrow the state out so both copies can be read (no allocation).
        let mut combat = std::mem::replace(&mut r.combat, Combat::new(attacker, params));
        let me = &self.entities.get(attacker).expect("real").entity;
        let copy = self.entities.get(target).map(|e| &e.entity);
        let result = combat.try_hit(now, me, copy, visible, damage);
        let Some(Part::Real(r)) = self.entities.get_mut(attacker).map(|e| &mut e.part) else {
            unreachable!("still real");
        };
        r.combat = combat;
        list_combat(&mut self.combat_reals, attacker, r);
        let seq = result?;
        self.counters.hits_tried += 1;
        // The attacker's client sees its target move smoothly (movement
        // priority, `view.important_factor`).
        if let Some(w) = self.views.watch_mut(attacker) {
            w.observer.mark_important(target, IMPORTANT_MS);
        }
        Ok(seq)
    }

    /// A real's combat state.
    pub fn combat(&self, entity: EntityId) -> Option<&Combat> {
        self.entities
            .get(entity)
            .and_then(Entry::real)
            .map(|r| &r.combat)
    }

    /// Runs one combat call at real `e` (from `run_reals`).
    pub(super) fn run_combat_call(&mut self, now: Time, entity: EntityId, data: &[u8]) {
        let Some(e) = self.entities.get_mut(entity) else {
            return;
        };
        if e.real().is_none() {
            return;
        }
        // The call may change the entity (a hit's damage).
        super::machine::list_changed(&mut self.changed_reals, e);
        let Part::Real(r) = &mut e.part else { return };
        if r.combat.handle_call(now, &mut e.entity, data).is_err() {
            self.counters.bad_combat_calls += 1;
        }
        list_combat(&mut self.combat_reals, entity, r);
    }

    /// Ticks every real's combat, then routes its calls and reports its
    /// events (after the tick's calls ran, before its change sets).
    ///
    /// An idle combat does nothing here, so only the reals listed in
    /// `combat_reals` are visited, in slab order (the order of a walk over
    /// every entry), each once; those still busy (a hit pending or
    /// remembered) stay listed for the next tick. A walk over every entry
    /// read each real's boxed part every tick, a cache miss apiece.
    pub(super) fn run_combat(&mut self, now: Time) {
        #[cfg(debug_assertions)]
        self.verify_combat_reals();
        let mut calls = std::mem::take(&mut self.scratch_calls);
        let mut at = std::mem::take(&mut self.scratch_at);
        // (Still-busy combats are listed again as they are visited.)
        (self.entities).positions_in_order(self.combat_reals.drain(..), &mut at);
        for &i in &at {
            let e = self.entities.at_mut(i);
            let Part::Real(r) = &mut e.part else { continue };
            r.combat_listed = false;
            if r.combat.poll_timeout().is_some_and(|t| t <= now) {
                r.combat.tick(now);
            }
            while let Some(o) = r.combat.poll_output() {
                calls.push((o.to, Arc::from(o.call)));
            }
            while let Some(event) = r.combat.poll_event() {
                if let CombatEvent::Damaged { attacker, .. } = event {
                    // ... and a victim's client its attacker.
                    if let Some(w) = self.views.watch_mut(e.id) {
                        w.observer.mark_important(attacker, IMPORTANT_MS);
                    }
                }
                self.events.push_back(CellEvent::Combat {
                    entity: e.id,
                    event,
                });
            }
            list_combat(&mut self.combat_reals, e.id, r);
        }
        self.scratch_at = at;
        self.route_combat_calls(now, &mut calls);
        self.scratch_calls = calls;
    }

    /// Checks that every real whose combat is not idle is listed in
    /// `combat_reals` (`run_combat` visits no other), and that every real
    /// flagged listed is.
    ///
    /// # Panics
    /// On the first real that is not.
    pub(super) fn verify_combat_reals(&self) {
        let mut listed = self.combat_reals.clone();
        listed.sort_unstable();
        for e in self.entities.iter() {
            let Some(r) = e.real() else { continue };
            let on_list = listed.binary_search(&e.id).is_ok();
            assert!(
                on_list || !r.combat_listed,
                "{} flagged listed for combat but not on the list",
                e.id
            );
            assert!(
                r.combat.is_idle() || (on_list && r.combat_listed),
                "{} has combat to run but is not listed",
                e.id
            );
        }
    }

    /// Drains real `id`'s combat queues (outputs routed, events reported)
    /// and returns its encoded state for the `Onload`.
    pub(super) fn take_combat(&mut self, now: Time, id: EntityId) -> Vec<u8> {
        let mut calls = std::mem::take(&mut self.scratch_calls);
        let mut state = Vec::new();
        if let Some(Part::Real(r)) = self.entities.get_mut(id).map(|e| &mut e.part) {
            while let Some(o) = r.combat.poll_output() {
                calls.push((o.to, Arc::from(o.call)));
            }
            while let Some(event) = r.combat.poll_event() {
                self.events
                    .push_back(CellEvent::Combat { entity: id, event });
            }
            r.combat.encode(&mut state);
        }
        self.route_combat_calls(now, &mut calls);
        self.scratch_calls = calls;
        state
    }

    /// The combat state of real `id` arriving by migration (a state that
    /// does not decode is counted and replaced by a fresh one).
    pub(super) fn restore_combat(&mut self, id: EntityId, bytes: &[u8]) -> Combat {
        let params = self.views.params.combat;
        if bytes.is_empty() {
            return Combat::new(id, params);
        }
        Combat::decode(id, params, bytes).unwrap_or_else(|_| {
            self.counters.combat_state_errors += 1;
            Combat::new(id, params)
        })
    }

    fn route_combat_calls(&mut self, now: Time, calls: &mut Vec<(EntityId, Arc<[u8]>)>) {
        for (to, data) in calls.drain(..) {
            self.counters.combat_calls += 1;
            let msg = ToReal {
                entity: to,
                hops: 0,
                body: ToRealBody::Call(Call {
                    kind: CallKind::Combat,
                    id: 0,
                    data,
                }),
            };
            self.on_to_real(now, Source::Local, msg);
        }
    }
}

/// Lists real `id` (its part `r`) in `list` if its combat is not idle and
/// it is not listed already.
#[inline]
pub(super) fn list_combat(list: &mut Vec<EntityId>, id: EntityId, r: &mut RealPart) {
    if !r.combat_listed && !r.combat.is_idle() {
        r.combat_listed = true;
        list.push(id);
    }
}
