//! [`GridAoi`]: the production AOI index. A uniform grid over the world
//! rectangle; each grid cell keeps its entities' ground coordinates in
//! contiguous arrays (`xs`, `zs`, `slots`), entities and areas live in dense
//! slot arrays, and an id -> slot map with a fixed hash finds them.
//!
//! This file owns the state and the mutators; `grid_update.rs` owns the
//! per-tick recompute and the shape queries.
//!
//! # Incremental updates
//!
//! Every change stamps the tick: a moved entity stamps itself and the grid
//! cells it left and entered; adds, removals and flag changes stamp their
//! cell; spec changes, new areas and forcing mark the area dirty. An update
//! recomputes an area only when it is dirty, its owner changed, or a grid cell
//! within its leave radius was stamped; every other set is provably unchanged.
//!
//! # Slot lifetime
//!
//! A removed entity's slot (and a removed area's) stays allocated, marked
//! dead, until the end of the next update, so that update can still name it in
//! leave events; only then is it reused.

use super::types::{check_position, AoiError, AoiParams, AreaId, AreaSpec};
use super::IdMap;
use crate::core::geom::Vec3;
use crate::core::ids::EntityId;
use std::collections::BTreeMap;

pub(super) const NONE: u32 = u32::MAX;

/// One grid cell: its entities' ground coordinates and slots, in step.
#[derive(Clone, Debug, Default)]
pub(super) struct GridCell {
    pub xs: Vec<f64>,
    pub zs: Vec<f64>,
    pub flags: Vec<u64>,
    pub slots: Vec<u32>,
}

/// One area ("radius entity").
#[derive(Clone, Debug)]
pub(super) struct Area {
    pub id: AreaId,
    pub owner: u32,
    pub spec: AreaSpec,
    pub re2: f64,
    pub rl: f64,
    pub rl2: f64,
    /// The area has a height band (needs the entities' `y`).
    pub has_height: bool,
    pub cap: usize,
    /// Entity slots in the set (forced ones included), unordered.
    pub members: Vec<u32>,
    /// Forced entity slots, unordered.
    pub forced: Vec<u32>,
    pub dirty: bool,
    pub alive: bool,
}

/// The production AOI index (see the module doc).
#[derive(Clone, Debug)]
pub struct GridAoi {
    pub(super) params: AoiParams,
    pub(super) cols: usize,
    pub(super) rows: usize,
    pub(super) inv_cell: f64,
    pub(super) cells: Vec<GridCell>,
    /// Tick at which the cell last changed.
    pub(super) cell_stamp: Vec<u64>,

    pub(super) ids: IdMap,
    pub(super) ent_id: Vec<EntityId>,
    pub(super) pos: Vec<Vec3>,
    pub(super) flags: Vec<u64>,
    pub(super) cell_of: Vec<u32>,
    pub(super) index_in_cell: Vec<u32>,
    /// Tick at which the entity last moved or changed flags.
    pub(super) ent_stamp: Vec<u64>,
    pub(super) alive: Vec<bool>,
    pub(super) owned: Vec<Vec<u32>>,
    /// How many areas force the entity (skips a scan on removal when 0).
    pub(super) forced_by: Vec<u32>,
    /// Scratch per entity slot for the recompute (see `grid_update.rs`).
    pub(super) mark: Vec<u32>,
    pub(super) mark_base: u32,
    pub(super) free_ents: Vec<u32>,
    pub(super) dead_ents: Vec<u32>,
    pub(super) live_ents: usize,

    pub(super) areas: Vec<Area>,
    pub(super) area_slot: BTreeMap<AreaId, u32>,
    /// Area slots in `AreaId` order (dead ones are dropped at update).
    pub(super) order: Vec<u32>,
    pub(super) free_areas: Vec<u32>,
    pub(super) dead_areas: Vec<u32>,
    pub(super) next_area: u64,

    /// The current tick (changes since the last update carry it).
    pub(super) tick: u64,
    pub(super) scratch: super::grid_update::Scratch,
}

impl GridAoi {
    /// An empty index over `params.world`.
    ///
    /// # Errors
    /// [`AoiError::Params`] when `params` is unusable.
    pub fn new(params: AoiParams) -> Result<Self, AoiError> {
        params.validate()?;
        let (cols, rows) = params.grid_dims();
        Ok(GridAoi {
            params,
            cols,
            rows,
            inv_cell: 1.0 / params.grid_cell_m,
            cells: vec![GridCell::default(); cols * rows],
            cell_stamp: vec![0; cols * rows],
            ids: IdMap::default(),
            ent_id: Vec::new(),
            pos: Vec::new(),
            flags: Vec::new(),
            cell_of: Vec::new(),
            index_in_cell: Vec::new(),
            ent_stamp: Vec::new(),
            alive: Vec::new(),
            owned: Vec::new(),
            forced_by: Vec::new(),
            mark: Vec::new(),
            mark_base: 0,
            free_ents: Vec::new(),
            dead_ents: Vec::new(),
            live_ents: 0,
            areas: Vec::new(),
            area_slot: BTreeMap::new(),
            order: Vec::new(),
            free_areas: Vec::new(),
            dead_areas: Vec::new(),
            next_area: 1,
            tick: 1,
            scratch: Default::default(),
        })
    }

    /// The parameters this index was built with.
    pub fn params(&self) -> &AoiParams {
        &self.params
    }

    /// Column of `x`, clamped into the grid (monotone in `x`).
    #[inline]
    pub(super) fn col(&self, x: f64) -> usize {
        let c = ((x - self.params.world.min_x) * self.inv_cell).floor();
        (c.max(0.0) as usize).min(self.cols - 1)
    }

    /// Row of `z`, clamped into the grid (monotone in `z`).
    #[inline]
    pub(super) fn row(&self, z: f64) -> usize {
        let r = ((z - self.params.world.min_z) * self.inv_cell).floor();
        (r.max(0.0) as usize).min(self.rows - 1)
    }

    #[inline]
    pub(super) fn cell_index(&self, p: Vec3) -> usize {
        self.row(p.z) * self.cols + self.col(p.x)
    }

    #[inline]
    pub(super) fn slot(&self, id: EntityId) -> Result<usize, AoiError> {
        self.ids
            .get(id)
            .map(|s| s as usize)
            .ok_or(AoiError::UnknownEntity(id))
    }

    pub(super) fn area_index(&self, id: AreaId) -> Result<usize, AoiError> {
        self.area_slot
            .get(&id)
            .map(|&s| s as usize)
            .ok_or(AoiError::UnknownArea(id))
    }

    fn cell_insert(&mut self, s: usize, c: usize) {
        let cell = &mut self.cells[c];
        self.index_in_cell[s] = cell.slots.len() as u32;
        cell.xs.push(self.pos[s].x);
        cell.zs.push(self.pos[s].z);
        cell.flags.push(self.flags[s]);
        cell.slots.push(s as u32);
        self.cell_of[s] = c as u32;
        self.cell_stamp[c] = self.tick;
    }

    fn cell_remove(&mut self, s: usize) {
        let c = self.cell_of[s] as usize;
        let i = self.index_in_cell[s] as usize;
        let cell = &mut self.cells[c];
        debug_assert_eq!(cell.slots[i] as usize, s);
        cell.xs.swap_remove(i);
        cell.zs.swap_remove(i);
        cell.flags.swap_remove(i);
        cell.slots.swap_remove(i);
        if let Some(&moved) = cell.slots.get(i) {
            self.index_in_cell[moved as usize] = i as u32;
        }
        self.cell_of[s] = NONE;
        self.cell_stamp[c] = self.tick;
    }

    fn alloc_entity(&mut self, id: EntityId, pos: Vec3, flags: u64) -> usize {
        if let Some(s) = self.free_ents.pop() {
            let s = s as usize;
            self.ent_id[s] = id;
            self.pos[s] = pos;
            self.flags[s] = flags;
            self.alive[s] = true;
            debug_assert!(self.owned[s].is_empty());
            s
        } else {
            self.ent_id.push(id);
            self.pos.push(pos);
            self.flags.push(flags);
            self.cell_of.push(NONE);
            self.index_in_cell.push(0);
            self.ent_stamp.push(0);
            self.alive.push(true);
            self.owned.push(Vec::new());
            self.forced_by.push(0);
            self.mark.push(0);
            self.pos.len() - 1
        }
    }

    fn drop_area(&mut self, a: usize) {
        let area = &mut self.areas[a];
        debug_assert!(area.alive);
        area.alive = false;
        area.members.clear();
        for &f in &area.forced {
            self.forced_by[f as usize] -= 1;
        }
        area.forced.clear();
        self.area_slot.remove(&area.id);
        self.dead_areas.push(a as u32);
    }

    /// Frees the slots of entities and areas removed before this update.
    pub(super) fn reclaim(&mut self) {
        for s in std::mem::take(&mut self.dead_ents) {
            self.free_ents.push(s);
        }
        for a in std::mem::take(&mut self.dead_areas) {
            self.free_areas.push(a);
        }
        let areas = &self.areas;
        self.order.retain(|&a| areas[a as usize].alive);
    }
}

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
        Ok(())
    }

    pub(super) fn do_remove_entity(&mut self, id: EntityId) -> Result<(), AoiError> {
        let s = self.slot(id)?;
        self.ids.remove(id);
        self.live_ents -= 1;
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
        self.dead_ents.push(s as u32);
        Ok(())
    }

    pub(super) fn do_set_position(&mut self, id: EntityId, pos: Vec3) -> Result<(), AoiError> {
        check_position(pos)?;
        let s = self.slot(id)?;
        let c_old = self.cell_of[s] as usize;
        let c_new = self.cell_index(pos);
        self.pos[s] = pos;
        self.ent_stamp[s] = self.tick;
        if c_old == c_new {
            let i = self.index_in_cell[s] as usize;
            let cell = &mut self.cells[c_old];
            cell.xs[i] = pos.x;
            cell.zs[i] = pos.z;
            self.cell_stamp[c_old] = self.tick;
        } else {
            self.cell_remove(s);
            self.cell_insert(s, c_new);
        }
        Ok(())
    }

    pub(super) fn do_set_flags(&mut self, id: EntityId, flags: u64) -> Result<(), AoiError> {
        let s = self.slot(id)?;
        if self.flags[s] != flags {
            self.flags[s] = flags;
            let (c, i) = (self.cell_of[s] as usize, self.index_in_cell[s] as usize);
            self.cells[c].flags[i] = flags;
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
        };
        set_spec(&mut area, spec);
        let a = match self.free_areas.pop() {
            Some(a) => {
                let old = std::mem::replace(&mut self.areas[a as usize], area);
                // Keep the buffers' capacity for the next user of the slot.
                let fresh = &mut self.areas[a as usize];
                fresh.members = old.members;
                fresh.forced = old.forced;
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

impl GridAoi {
    /// Checks the whole structure (slots, cells, id map, areas); costly, for
    /// tests and the `verify` feature. Call it right after an update.
    ///
    /// # Panics
    /// On any broken invariant.
    pub fn verify(&self) {
        use std::collections::BTreeSet;
        let mut in_cells = 0;
        for (c, cell) in self.cells.iter().enumerate() {
            assert!(cell.xs.len() == cell.slots.len() && cell.zs.len() == cell.slots.len());
            assert_eq!(cell.flags.len(), cell.slots.len());
            for (i, &s) in cell.slots.iter().enumerate() {
                let s = s as usize;
                assert!(self.alive[s], "dead entity in a cell");
                assert_eq!(
                    (self.cell_of[s] as usize, self.index_in_cell[s] as usize),
                    (c, i)
                );
                assert_eq!(self.cell_index(self.pos[s]), c, "entity in the wrong cell");
                assert_eq!((cell.xs[i], cell.zs[i]), (self.pos[s].x, self.pos[s].z));
                assert_eq!(cell.flags[i], self.flags[s]);
                assert_eq!(self.ids.get(self.ent_id[s]), Some(s as u32));
                in_cells += 1;
            }
        }
        assert_eq!(in_cells, self.live_ents);
        assert_eq!(self.ids.len(), self.live_ents);
        assert!(self.dead_ents.is_empty() && self.dead_areas.is_empty());
        let mut forced_by = vec![0u32; self.pos.len()];
        let mut last = AreaId(0);
        for &a in &self.order {
            let area = &self.areas[a as usize];
            assert!(area.alive && area.id > last, "order broken");
            last = area.id;
            assert_eq!(self.area_slot.get(&area.id), Some(&a));
            let owner = area.owner as usize;
            assert!(self.alive[owner] && self.owned[owner].contains(&a));
            let members: BTreeSet<u32> = area.members.iter().copied().collect();
            assert_eq!(members.len(), area.members.len(), "duplicate member");
            assert!(!members.contains(&area.owner), "an area sees its owner");
            for &f in &area.forced {
                assert!(members.contains(&f), "forced entity not in the set");
                forced_by[f as usize] += 1;
            }
            assert!(area.members.len() <= area.cap.max(area.forced.len()));
            for &m in &area.members {
                assert!(self.alive[m as usize], "member is dead after update");
            }
        }
        assert_eq!(self.order.len(), self.area_slot.len());
        assert_eq!(forced_by, self.forced_by);
    }
}
