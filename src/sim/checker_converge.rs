//! The convergence checks run after healing, and the context attached to
//! every violation.
//!
//! After phase two (no faults, no new input), the world must have quiesced
//! and converged:
//! - nothing in flight, nothing backlogged, no deferred effect;
//! - every input sent applied, every call run exactly once, every
//!   downstream message sent by a real delivered to its client;
//! - every proxy knows its real's cell and epoch;
//! - every haunt of every real is `Created` and holds a ghost equal to the
//!   real (position, properties, version) that knows where the real is;
//! - every cell within the ghost radius of a real is a haunt;
//! - no leaf holds a ghost its real does not list (an orphan);
//! - no cell is still merging; clients have everything they expect;
//! - every client's view equals the truth (`world_view.rs`).
//!
//! Owns nothing beyond these `impl World` checks; changes no cell.

use std::fmt::Write as _;

use crate::core::cell::{HauntState, Layout, Residency};
use crate::core::entity::Audience;
use crate::core::geom::Rect;
use crate::core::ids::{CellId, EntityId};
use crate::sim::report::ViolationKind;
use crate::sim::world::World;
use crate::sim::world_event::SimEvent;

impl World {
    /// Runs every convergence check (see the module doc).
    pub(super) fn check_converged(&mut self) {
        let tick = self.tick;
        let (in_flight, backlog) = (self.net.in_flight(), self.router.backlog_len());
        let unsent = self.router.outbox_len();
        if in_flight > 0 || backlog > 0 || unsent > 0 {
            let d = format!(
                "{in_flight} batches in flight, {backlog} backlogged, {unsent} packets unsent after healing"
            );
            self.checker
                .report(tick, ViolationKind::NotQuiesced, None, d);
        }
        for i in 0..self.real_cell.len() {
            self.check_entity_converged(EntityId(i as u64));
        }
        self.check_orphans();
        let unrun: Vec<(usize, u32)> = (self.checker.calls.iter().enumerate())
            .filter(|(_, c)| c.runs != 1)
            .map(|(id, c)| (id, c.runs))
            .take(4)
            .collect();
        for (id, runs) in unrun {
            let target = self.checker.calls[id].target;
            let d = format!("call {id} ran {runs} times after healing");
            self.checker
                .report(tick, ViolationKind::CallLost, Some(target), d);
        }
        for c in 0..self.cells.len() {
            if self.layout.is_merging(CellId(c as u32)) {
                let d = format!(
                    "cell c{c} still merging after healing ({} reals)",
                    self.cells[c].reals().len()
                );
                self.checker
                    .report(tick, ViolationKind::MergeNotDrained, None, d);
            }
        }
        self.check_views_converged();
        for i in 0..self.clients.len() {
            if let Err(d) = self.clients[i].hook.check_converged() {
                let e = Some(EntityId(i as u64));
                self.checker
                    .report(tick, ViolationKind::DownstreamBroken, e, d);
            }
        }
    }

    fn check_entity_converged(&mut self, e: EntityId) {
        let (tick, i) = (self.tick, e.0 as usize);
        let Some(rc) = self.real_cell[i] else {
            return; // reported by the residency check
        };
        let sent = self.proxies[i].next_input() - 1;
        let applied = self.checker.input_applied(e);
        if sent != applied {
            let d = format!("{sent} inputs sent, {applied} applied after healing");
            self.checker
                .report(tick, ViolationKind::InputLost, Some(e), d);
        }
        let (acks_sent, acks_got) = self.acks[i];
        let skipped = self.proxies[i].counters().downstream_skipped;
        if acks_sent != acks_got || skipped > 0 {
            let d = format!(
                "input {acks_sent} acknowledged by the real, {acks_got} at the client, {skipped} skipped by the proxy"
            );
            self.checker
                .report(tick, ViolationKind::DownstreamBroken, Some(e), d);
        }
        if self.pending[i] > 0 {
            let d = format!("a script call's change still waits for the real (at {rc})");
            self.checker
                .report(tick, ViolationKind::InputLost, Some(e), d);
        }
        let real = self.cells[rc.0 as usize].view(e).expect("real here");
        let epoch = real.residency.epoch();
        let p = &self.proxies[i];
        if (p.real_at(), p.epoch()) != (rc, epoch) {
            let d = format!(
                "proxy thinks {} epoch {}, real at {rc} epoch {epoch}",
                p.real_at(),
                p.epoch()
            );
            self.checker
                .report(tick, ViolationKind::ProxyStale, Some(e), d);
        }
        let seen = real.entity.props().filtered(Audience::Ghost);
        let haunts = self.cells[rc.0 as usize].haunts(e).unwrap_or(&[]).to_vec();
        for h in &haunts {
            let ghost = self.cells.get(h.cell.0 as usize).and_then(|c| c.view(e));
            let want = Residency::Ghost { real_at: rc, epoch };
            let problem = match &ghost {
                _ if h.state != HauntState::Created => {
                    Some(format!("haunt {} still {:?}", h.cell, h.state))
                }
                None => Some(format!("haunt {} holds no ghost", h.cell)),
                Some(g) if g.residency != want => Some(format!(
                    "ghost at {} is {:?}, want {want:?}",
                    h.cell, g.residency
                )),
                Some(g)
                    if (g.pos(), g.entity.props().values(), g.version)
                        != (real.pos(), &seen[..], real.version) =>
                {
                    Some(format!(
                        "ghost at {} is v{} {:?} {:?}, real v{} {:?} {:?}",
                        h.cell,
                        g.version,
                        g.pos(),
                        g.entity.props().values(),
                        real.version,
                        real.pos(),
                        seen
                    ))
                }
                Some(_) => None,
            };
            if let Some(d) = problem {
                self.checker
                    .report(tick, ViolationKind::GhostDiverged, Some(e), d);
            }
        }
        let r = self.params.cell.ghost_radius_m;
        let mut near = Vec::new();
        self.layout
            .cells_meeting(&Rect::around(real.pos().x, real.pos().z, r), &mut near);
        for c in near {
            if c != rc && !haunts.iter().any(|h| h.cell == c) {
                let d = format!("real at {rc} {:?} has no ghost in {c}", real.pos());
                self.checker
                    .report(tick, ViolationKind::MissingGhost, Some(e), d);
            }
        }
    }

    fn check_orphans(&mut self) {
        let tick = self.tick;
        let mut orphans = Vec::new();
        for cell in &self.cells {
            if self.layout.is_retired(cell.id()) {
                continue;
            }
            for g in cell.ghosts() {
                let listed = self.real_cell[g.0 as usize]
                    .and_then(|rc| self.cells[rc.0 as usize].haunts(g))
                    .is_some_and(|hs| hs.iter().any(|h| h.cell == cell.id()));
                if !listed {
                    orphans.push((cell.id(), g));
                }
            }
        }
        for (c, g) in orphans {
            let d = format!("ghost at {c} is not a haunt of its real (orphan)");
            self.checker
                .report(tick, ViolationKind::GhostDiverged, Some(g), d);
        }
    }

    /// Attaches to every kept violation the entity's residency history in
    /// every cell and the last trace events (about the entity, if any).
    pub(super) fn add_context(&mut self) {
        let max = self.params.context_events_max;
        let log = self.trace.log();
        let mut contexts = Vec::new();
        for v in self.checker.violations() {
            let mut s = String::new();
            if let Some(e) = v.entity {
                let _ = writeln!(s, "residency history of {e} (debug or `verify` builds):");
                for cell in &self.cells {
                    let h = cell.history(e);
                    if !h.is_empty() {
                        let _ = writeln!(s, "  {}: {h:?}", cell.id());
                    }
                }
            }
            if let Some(e) = v.entity {
                let about: Vec<&(u64, SimEvent)> = log
                    .iter()
                    .filter(|(_, ev)| ev.entity() == Some(e))
                    .collect();
                let n = about.len().min(max);
                let _ = writeln!(s, "last {n} trace events about {e}:");
                for (t, ev) in &about[about.len() - n..] {
                    let _ = writeln!(s, "  tick {t}: {ev}");
                }
            }
            let n = log.len().min(max / 4);
            let _ = writeln!(s, "last {n} trace events:");
            for (t, ev) in log.iter().skip(log.len() - n) {
                let _ = writeln!(s, "  tick {t}: {ev}");
            }
            contexts.push(s);
        }
        for (v, s) in self.checker.violations_mut().iter_mut().zip(contexts) {
            v.context = s;
        }
    }
}
