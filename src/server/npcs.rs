//! The NPC wanderers a shard drives: spawned at start over the world (each
//! shard creates those whose spawn point is in one of its cells), walking
//! straight and turning at the world's edge, followed across this shard's
//! cells; an NPC whose real migrates to another shard is no longer driven
//! (it stands still there).
//!
//! Owns only the `impl CellHost` NPC steps and their state.

use crate::core::cell::Residency;
use crate::core::entity::{Entity, TypeRegistry, NPC};
use crate::core::geom::Vec3;
use crate::core::ids::{CellId, EntityId};
use crate::core::time::Time;

use super::host::{entity_id, CellHost};

/// A wandering NPC real owned by this shard's logic.
#[derive(Clone, Copy, Debug)]
pub(super) struct Npc {
    id: EntityId,
    cell: CellId,
    pos: Vec3,
    heading: f64,
}

impl CellHost {
    /// NPCs are spread over the world; each shard creates those whose spawn
    /// point falls in one of its cells.
    pub(super) fn spawn_npcs(&mut self, n: u32, types: &TypeRegistry) {
        let w = self.tree.world();
        let ty = types.get(NPC).expect("built-in npc").clone();
        for i in 0..n {
            let f = (f64::from(i) + 0.5) / f64::from(n);
            let g = (f64::from(i) * 0.618_033_988_7).fract();
            let pos = Vec3 {
                x: w.min_x + f * w.width(),
                y: 0.0,
                z: w.min_z + g * w.depth(),
            };
            let cell = self.tree.cell_at(pos);
            let Some(c) = self.cells.get_mut(&cell) else {
                continue;
            };
            let id = entity_id(self.ctx.shard.index, u64::from(i));
            let entity = Entity::new_real(id, ty.clone(), pos, 0.0);
            if c.create_real(Time::ZERO, entity, false, 0).is_ok() {
                let heading = g * std::f64::consts::TAU;
                self.npcs.push(Npc {
                    id,
                    cell,
                    pos,
                    heading,
                });
            }
        }
    }

    /// Wanders NPCs (client inputs are the game logic's, after each tick).
    pub(super) fn npc_logic(&mut self, dt_s: f64) {
        let w = self.tree.world();
        for npc in &mut self.npcs {
            let Some(cell) = self.cells.get_mut(&npc.cell) else {
                continue;
            };
            if cell
                .residency(npc.id)
                .is_none_or(|r| !matches!(r, Residency::Real { .. }))
            {
                continue;
            }
            let started = self.balance.stamp();
            npc.heading = self.balance.npc_heading(npc.pos, npc.heading);
            let step = self.speed_mps * dt_s;
            let mut p = Vec3 {
                x: npc.pos.x + step * npc.heading.cos(),
                y: 0.0,
                z: npc.pos.z + step * npc.heading.sin(),
            };
            if !w.contains(p) {
                npc.heading += std::f64::consts::FRAC_PI_2;
                p = npc.pos;
            }
            if cell.move_real(npc.id, p).is_ok() {
                npc.pos = p;
            }
            self.balance.entity_done(npc.id, started);
        }
    }

    /// Follows NPCs that migrated to another cell of this shard; NPCs that
    /// left the shard become ghosts here and stop being driven by it.
    pub(super) fn follow_npcs(&mut self) {
        for npc in &mut self.npcs {
            if let Some(c) = self.cells.values().find(|c| {
                c.residency(npc.id)
                    .is_some_and(|r| matches!(r, Residency::Real { .. }))
            }) {
                npc.cell = c.id();
            }
        }
    }
}
