//! The mutators of [`GridAoi`]: adding, moving, re-flagging and removing
//! entities; adding, re-specifying and removing areas; forcing interest.
//! Each stamps what it touched so the next update re-checks only that (see
//! the module doc of `grid.rs`). Owns no state of its own; must not run the
//! recompute (that is `grid_update.rs`).

use super::grid::{Area, GridAoi, NONE};
use super::types::{check_position, AoiError, AreaId, AreaSpec};
use crate::core::geom::Vec3;
use crate::core::ids::EntityId;

impl GridAoi {
    pub(super) fn do_add_entity(
        &mut self,
        id: EntityId,
        pos: Vec3,
        flags: u64,
    ) -> Result<(), AoiError> {
        check_position(pos)?;
        if self.ids.get(id).is_some() {
            return Err(AoiError::DuplicateEntity(id));
        }
        if self.live_ents >= self.params.max_entities {
            return Err(AoiError::Full {
                what: "max_entities",
                max: self.params.max_entities,
            });
        }
        let s = self.alloc_entity(id, pos, flags);
        self.ids.insert(id, s as u32);
        self.live_ents += 1;
        self.ent_stamp[s] = self.tick;
        let c = self.cell_index(pos);
        self.cell_insert(s, c);
        self.mark_struct(s, c);
        Ok(())
    }

    pub(super) fn do_remove_entity(&mut self, id: EntityId) -> Result<(), AoiError> {
        let s = self.slot(id)?;
        self.ids.remove(id);
        self.live_ents -= 1;
        // Structural where it is and where the areas last saw it.
        self.mark_struct(s, self.cell_of[s] as usize);
        self.mark_struct(s, self.cell_index(self.last_pos[s]));
        self.cell_remove(s);
        self.alive[s] = false;
        self.ent_stamp[s] = self.tick;
        for a in std::mem::take(&mut self.owned[s]) {
            self.drop_area(a as usize);
        }
        // Forced pairs naming it end now; the areas re-check at the update.
        if self.forced_by[s] > 0 {
            for &a in &self.order {
                let area = &mut self.areas[a as usize];
                if let Some(i) = area.forced.iter().position(|&f| f as usize == s) {
                    area.forced.swap_remove(i);
                    area.dirty = true;
                }
            }
            self.forced_by[s] = 0;
        }
        self.dead_ents.push((s as u32, self.tick));
        Ok(())
    }

    #[inline]
    pub(super) fn do_set_position(&mut self, id: EntityId, pos: Vec3) -> Result<(), AoiError> {
        check_position(pos)?;
        let s = self.slot(id)?;
        let c_old = self.cell_of[s] as usize;
        let c_new = self.cell_index(pos);
        self.pos[s] = pos;
        self.ent_stamp[s] = self.tick;
        if self.moved_tick[s] != self.tick {
            self.recent_moves.moved(self.moved_tick[s], self.tick);
            self.moved_tick[s] = self.tick;
            self.movers.push(s as u32);
        }
        self.cell_stamp[c_old] = self.tick;
        if c_old != c_new {
            self.cell_insert(s, c_new);
        } else if let Some(k) = self.live_entry(s) {
            self.layout.sx[k] = pos.x;
            self.layout.sz[k] = pos.z;
        }
        Ok(())
    }

    /// The entity's layout entry, if it has a current one.
    #[inline]
    pub(super) fn live_entry(&self, s: usize) -> Option<usize> {
        let k = self.arr_pos[s];
        (k != NONE).then_some(k as usize)
    }

    pub(super) fn do_set_flags(&mut self, id: EntityId, flags: u64) -> Result<(), AoiError> {
        let s = self.slot(id)?;
        if self.flags[s] != flags {
            self.flags[s] = flags;
            if let Some(k) = self.live_entry(s) {
                self.layout.sflags[k] = flags;
            }
            self.mark_struct(s, self.cell_of[s] as usize);
            self.ent_stamp[s] = self.tick;
            self.cell_stamp[self.cell_of[s] as usize] = self.tick;
        }
        Ok(())
    }

    pub(super) fn do_add_area(
        &mut self,
        owner: EntityId,
        spec: AreaSpec,
    ) -> Result<AreaId, AoiError> {
        spec.validate()?;
        let s = self.slot(owner)?;
        if self.owned[s].len() >= self.params.max_areas_per_entity {
            return Err(AoiError::Full {
                what: "max_areas_per_entity",
                max: self.params.max_areas_per_entity,
            });
        }
        if self.area_slot.len() >= self.params.max_areas {
            return Err(AoiError::Full {
                what: "max_areas",
                max: self.params.max_areas,
            });
        }
        let id = AreaId(self.next_area);
        self.next_area += 1;
        let mut area = Area {
            id,
            owner: s as u32,
            spec,
            re2: 0.0,
            rl: 0.0,
            rl2: 0.0,
            has_height: false,
            cap: usize::MAX,
            members: Vec::new(),
            forced: Vec::new(),
            dirty: true,
            alive: true,
            watch: Vec::new(),
            // Dirty, so its first processing rescans in full whatever the
            // stamps (and it names no entity slot before); as if processed
            // by the last update.
            seen: self.tick - 1,
            g_seen: self.g_clock,
            g_build: 0.0,
            g_idle: 0.0,
            live: 0,
            min_rel: 0.0,
            kinetic_ok: false,
        };
        set_spec(&mut area, spec);
        let a = match self.free_areas.pop() {
            Some(a) => {
                let old = std::mem::replace(&mut self.areas[a as usize], area);
                // Keep the buffers' capacity for the next user of the slot.
                let fresh = &mut self.areas[a as usize];
                fresh.members = old.members;
                fresh.forced = old.forced;
                fresh.watch = old.watch;
                fresh.watch.clear();
                a as usize
            }
            None => {
                self.areas.push(area);
                self.areas.len() - 1
            }
        };
        self.area_slot.insert(id, a as u32);
        self.order.push(a as u32);
        self.owned[s].push(a as u32);
        Ok(id)
    }

    pub(super) fn do_remove_area(&mut self, id: AreaId) -> Result<(), AoiError> {
        let a = self.area_index(id)?;
        let owner = self.areas[a].owner as usize;
        let owned = &mut self.owned[owner];
        let i = owned.iter().position(|&x| x as usize == a);
        owned.swap_remove(i.expect("an area is listed by its owner"));
        self.drop_area(a);
        Ok(())
    }

    pub(super) fn do_set_area_spec(&mut self, id: AreaId, spec: AreaSpec) -> Result<(), AoiError> {
        spec.validate()?;
        let a = self.area_index(id)?;
        set_spec(&mut self.areas[a], spec);
        Ok(())
    }

    pub(super) fn do_force(&mut self, id: AreaId, entity: EntityId) -> Result<(), AoiError> {
        let a = self.area_index(id)?;
        let s = self.slot(entity)? as u32;
        let max = self.params.max_forced_per_area;
        let area = &mut self.areas[a];
        if area.owner == s {
            return Err(AoiError::SelfInterest(id));
        }
        if area.forced.contains(&s) {
            return Ok(());
        }
        if area.forced.len() >= max {
            return Err(AoiError::Full {
                what: "max_forced_per_area",
                max,
            });
        }
        area.forced.push(s);
        area.dirty = true;
        self.forced_by[s as usize] += 1;
        Ok(())
    }

    pub(super) fn do_unforce(&mut self, id: AreaId, entity: EntityId) -> Result<bool, AoiError> {
        let a = self.area_index(id)?;
        let s = self.slot(entity)? as u32;
        let area = &mut self.areas[a];
        match area.forced.iter().position(|&f| f == s) {
            Some(i) => {
                area.forced.swap_remove(i);
                area.dirty = true;
                self.forced_by[s as usize] -= 1;
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

/// Installs `spec` into `area` with its derived fields and marks it dirty.
fn set_spec(area: &mut Area, spec: AreaSpec) {
    let rl = spec.leave_radius();
    area.spec = spec;
    area.re2 = spec.radius_m * spec.radius_m;
    area.rl = rl;
    area.rl2 = rl * rl;
    area.has_height = spec.height.is_some();
    area.cap = spec.max_interest.map_or(usize::MAX, |c| c as usize);
    area.dirty = true;
}
