//! [`GridAoi`]: the production AOI index. A grid over the world
//! rectangle; the entities sit sorted by grid cell in one contiguous layout
//! (`sx`, `sz`, `sflags`, `sslot`, patched in place on moves within a cell,
//! re-sorted by a counting sort at the next update when anything changed
//! cell); entities and areas live in dense slot arrays, and an id -> slot map
//! with a fixed hash finds them.
//!
//! This file owns the state and its slot bookkeeping; `grid_mutate.rs` the
//! mutators; `grid_update.rs` owns the
//! per-tick recompute and the shape queries, `grid_kinetic.rs` the watch
//! lists that let a tick re-check only the pairs near a rim.
//!
//! # Incremental updates
//!
//! Every change stamps the tick: a moved entity stamps itself and the grid
//! cells it left and entered; adds, removals and flag changes stamp their
//! cell (and count as structural); spec changes, new areas and forcing mark
//! the area dirty. Stamps hold the last tick of a change, so they only grow;
//! an area compares them with the tick it was last processed (`seen`). An
//! area with no newer stamp within its leave radius plus the skin
//! sits the update out; the others re-check their due watched pairs, or rescan
//! in full when dirty, after a structural change nearby, or when their watch
//! list expired.
//!
//! # Slot lifetime
//!
//! A removed entity's slot stays allocated, marked dead, until every live
//! area has been processed since the removal (see "Due areas" in
//! `grid_update.rs`), so each area that held it can still name it in its
//! leave events and a new entity in the slot is never taken for the old
//! member; with every area processed each update that is the end of the
//! next update. A removed area's slot is free at the end of the next
//! update (nothing else names it).

use super::gather::Kernel;
use super::types::{AoiError, AoiParams, AreaId, AreaSpec};
use super::IdMap;
use crate::core::geom::Vec3;
use crate::core::ids::EntityId;
use std::collections::BTreeMap;

/// Entities sorted by grid cell, in contiguous arrays (rebuilt at the start
/// of an update when anything changed cell; patched in place otherwise).
#[derive(Clone, Debug, Default)]
pub(super) struct Layout {
    pub cell_start: Vec<u32>,
    pub sx: Vec<f64>,
    pub sz: Vec<f64>,
    pub sflags: Vec<u64>,
    pub sslot: Vec<u32>,
    /// Entities whose entry is missing or stale since the last rebuild.
    pub relocated: Relocated,
    /// A rebuild is due.
    pub dirty: bool,
}

/// The slots without a current layout entry (each listed once).
#[derive(Clone, Debug, Default)]
pub(super) struct Relocated {
    pub slots: Vec<u32>,
    /// Per slot: listed in `slots` (reset at rebuild).
    pub listed: Vec<bool>,
}

impl Relocated {
    fn push(&mut self, s: u32) {
        if self.listed.len() <= s as usize {
            self.listed.resize(s as usize + 1, false);
        }
        if !self.listed[s as usize] {
            self.listed[s as usize] = true;
            self.slots.push(s);
        }
    }

    pub fn clear(&mut self) {
        for &s in &self.slots {
            self.listed[s as usize] = false;
        }
        self.slots.clear();
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }
}

pub(super) const NONE: u32 = u32::MAX;

/// Grid columns per `grid_cell_m` of width (rows are `grid_cell_m` tall)
/// when `grid_cells_max` allows, else 1. A rescan reads a run of
/// whole cells per row (narrowed to the circle's chord over the row, see
/// `row_span`); narrow columns trim that run to the chord plus at most a
/// quarter cell per side instead of a whole cell: on the server's view
/// workload (radius 48 m, 50 m cells) about a third fewer candidates per
/// rescan, at the same number of rows.
pub(super) const COL_SPLIT: usize = 4;

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
    /// The watch list (see `grid_kinetic.rs`).
    pub watch: Vec<Watch>,
    /// Tick of the last update that processed the area (its `tick` then;
    /// the last update's when it was added): it has seen every
    /// stamp up to it, and compares stamps with `> seen`.
    pub seen: u64,
    /// `g_clock` when the area was last processed (or added).
    pub g_seen: f64,
    /// Area clock at the last full recompute.
    pub g_build: f64,
    /// Clock advance of the ticks this area sat idle, found idle when
    /// processed, skipped ticks included (its clock is `g_clock - g_idle`).
    pub g_idle: f64,
    /// Entries `..live` of `watch` may fall due before the list expires;
    /// the rest cannot and are not scanned.
    pub live: u32,
    /// Smallest `rel` in `watch[..live]`.
    pub min_rel: f64,
    /// The watch list may be used (false while the cap limits the set).
    pub kinetic_ok: bool,
}

/// One watched entity of an area, 8 bytes: re-check it once the area clock
/// reaches `g_build + rel` (`rel` rounded down, so never late).
#[derive(Clone, Copy, Debug)]
pub(super) struct Watch {
    pub rel: f32,
    /// `slot << 1 | member`.
    pub key: u32,
}

impl Watch {
    /// A watch on `slot` due at `g_build + rel`.
    pub fn new(rel: f64, slot: u32, member: bool) -> Self {
        debug_assert!(slot < 1 << 31);
        Watch {
            rel: f32_at_most(rel),
            key: slot << 1 | member as u32,
        }
    }

    #[inline]
    pub fn slot(self) -> u32 {
        self.key >> 1
    }

    #[inline]
    pub fn member(self) -> bool {
        self.key & 1 == 1
    }
}

/// The largest `f32` not above `v` (NaN never occurs here).
#[inline]
pub(super) fn f32_at_most(v: f64) -> f32 {
    let r = v as f32;
    if (r as f64) <= v {
        r
    } else if r > 0.0 {
        f32::from_bits(r.to_bits() - 1)
    } else if r == 0.0 {
        -f32::from_bits(1)
    } else {
        f32::from_bits(r.to_bits() + 1)
    }
}

/// The production AOI index (see the module doc).
#[derive(Clone, Debug)]
pub struct GridAoi {
    pub(super) params: AoiParams,
    pub(super) cols: usize,
    pub(super) rows: usize,
    /// `1 / grid_cell_m` (rows).
    pub(super) inv_cell: f64,
    /// Columns per grid cell's width (see [`COL_SPLIT`]) over `grid_cell_m`.
    pub(super) inv_col: f64,
    /// Tick at which the cell last changed.
    pub(super) cell_stamp: Vec<u64>,
    /// The sweep's row gather (`gather.rs`): AVX2 where the CPU has it.
    pub(super) gather: Kernel,
    /// The layout: entities sorted by grid cell, cell `c` at
    /// `cell_start[c]..cell_start[c + 1]` of `sx`, `sz`, `sflags`, `sslot`.
    pub(super) layout: Layout,

    pub(super) ids: IdMap,
    pub(super) ent_id: Vec<EntityId>,
    pub(super) pos: Vec<Vec3>,
    pub(super) flags: Vec<u64>,
    pub(super) cell_of: Vec<u32>,
    /// Index of the entity's entry in the layout, `NONE` when it has none
    /// or it is stale (the entity changed cell since the last rebuild).
    pub(super) arr_pos: Vec<u32>,
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
    /// Removed entity slots not yet free, with the tick of the removal:
    /// freed once every live area was processed at or after it.
    pub(super) dead_ents: Vec<(u32, u64)>,
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
    /// Entity positions at the last update (to measure each step).
    pub(super) last_pos: Vec<Vec3>,
    /// Tick of the entity's last structural change (added, jumped, height
    /// or flags changed).
    pub(super) ent_struct: Vec<u64>,
    /// Tick of the last structural change in the cell.
    pub(super) cell_struct: Vec<u64>,
    /// Tick of the last structural change anywhere (0: none yet).
    pub(super) last_struct: u64,
    /// Entities moved since the last update (each once, see `moved_tick`).
    pub(super) movers: Vec<u32>,
    pub(super) moved_tick: Vec<u64>,
    /// How many entities last moved at each of the latest ticks (at
    /// `t % RECENT_MOVE_TICKS`): an area processed every few ticks judges
    /// by the movers since it was processed whether to sweep
    /// (`grid_sweep.rs`).
    pub(super) recent_moves: super::grid_sweep::RecentMoves,
    /// The movement clock: sum over updates of the longest ordinary step.
    pub(super) g_clock: f64,
    /// This update's advance of the clock.
    pub(super) dg: f64,
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
        // Narrower columns when the cell budget allows (see `COL_SPLIT`).
        let split = if (cols * rows).saturating_mul(COL_SPLIT) <= params.grid_cells_max {
            COL_SPLIT
        } else {
            1
        };
        let cols = cols * split;
        Ok(GridAoi {
            params,
            cols,
            rows,
            inv_cell: 1.0 / params.grid_cell_m,
            inv_col: split as f64 / params.grid_cell_m,
            cell_stamp: vec![0; cols * rows],
            gather: Kernel::detect(),
            layout: Layout {
                cell_start: vec![0; cols * rows + 1],
                ..Layout::default()
            },
            ids: IdMap::default(),
            ent_id: Vec::new(),
            pos: Vec::new(),
            flags: Vec::new(),
            cell_of: Vec::new(),
            arr_pos: Vec::new(),
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
            last_pos: Vec::new(),
            ent_struct: Vec::new(),
            cell_struct: vec![0; cols * rows],
            last_struct: 0,
            movers: Vec::new(),
            moved_tick: Vec::new(),
            recent_moves: Default::default(),
            g_clock: 0.0,
            dg: 0.0,
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
        // Truncation is floor for t >= 0 (and cheaper than a libm call);
        // negatives clamp to 0, huge values saturate then clamp.
        let t = (x - self.params.world.min_x) * self.inv_col;
        if t > 0.0 {
            (t as usize).min(self.cols - 1)
        } else {
            0
        }
    }

    /// Row of `z`, clamped into the grid (monotone in `z`).
    #[inline]
    pub(super) fn row(&self, z: f64) -> usize {
        let t = (z - self.params.world.min_z) * self.inv_cell;
        if t > 0.0 {
            (t as usize).min(self.rows - 1)
        } else {
            0
        }
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

    /// Puts entity `s` into cell `c` (its layout entry goes stale until the
    /// next rebuild; queries look at it through `layout.relocated`).
    pub(super) fn cell_insert(&mut self, s: usize, c: usize) {
        self.cell_of[s] = c as u32;
        self.cell_stamp[c] = self.tick;
        self.unlay(s);
    }

    pub(super) fn cell_remove(&mut self, s: usize) {
        let c = self.cell_of[s] as usize;
        self.cell_of[s] = NONE;
        self.cell_stamp[c] = self.tick;
        self.unlay(s);
    }

    /// Records a structural change of entity `s` in cell `c`.
    pub(super) fn mark_struct(&mut self, s: usize, c: usize) {
        self.ent_struct[s] = self.tick;
        self.cell_struct[c] = self.tick;
        self.last_struct = self.tick;
    }

    /// Marks `s`'s layout entry stale.
    pub(super) fn unlay(&mut self, s: usize) {
        self.layout.relocated.push(s as u32);
        self.arr_pos[s] = NONE;
        self.layout.dirty = true;
    }

    pub(super) fn alloc_entity(&mut self, id: EntityId, pos: Vec3, flags: u64) -> usize {
        if let Some(s) = self.free_ents.pop() {
            let s = s as usize;
            self.ent_id[s] = id;
            self.pos[s] = pos;
            self.flags[s] = flags;
            self.alive[s] = true;
            self.last_pos[s] = pos;
            debug_assert!(self.owned[s].is_empty());
            s
        } else {
            self.ent_id.push(id);
            self.pos.push(pos);
            self.flags.push(flags);
            self.cell_of.push(NONE);
            self.arr_pos.push(NONE);
            self.ent_stamp.push(0);
            self.last_pos.push(pos);
            self.ent_struct.push(0);
            self.moved_tick.push(0);
            self.alive.push(true);
            self.owned.push(Vec::new());
            self.forced_by.push(0);
            self.mark.push(0);
            self.pos.len() - 1
        }
    }

    pub(super) fn drop_area(&mut self, a: usize) {
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

    /// At the end of an update: frees the slots of the areas removed
    /// before it, and of the entities removed at or before `min_seen` (the
    /// least `seen` of the live areas: every area has named them in its
    /// leaves by then, so a new entity in the slot cannot pass for them).
    pub(super) fn reclaim(&mut self, min_seen: u64) {
        let free = &mut self.free_ents;
        self.dead_ents.retain(|&(s, died)| {
            let due = died <= min_seen;
            if due {
                free.push(s);
            }
            !due
        });
        // Nothing outlives an area that names its slot: its members and
        // watch list name entity slots, `owned` and `area_slot` forgot it
        // at the removal and `order` does here.
        for a in self.dead_areas.drain(..) {
            self.free_areas.push(a);
        }
        let areas = &self.areas;
        self.order.retain(|&a| areas[a as usize].alive);
    }
}
