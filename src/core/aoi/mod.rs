//! The AOI (area of interest) engine of one cell: who sees whom.
//!
//! # Model (seed 004)
//!
//! *Entities* ("pos entities") have an [`EntityId`], a position ([`Vec3`],
//! ground plane `x, z`, height `y`) and 64 type-flag bits. Each entity may own
//! any number of *areas* ("radius entities", up to
//! [`AoiParams::max_areas_per_entity`]), each with an [`AreaSpec`]: enter
//! radius, optional larger leave radius (hysteresis), a [`FlagFilter`], an
//! optional [`HeightBand`] relative to the owner, and an optional cap on the
//! interest-set size. Every area holds an *interest set* of entities; an entity
//! never sees itself.
//!
//! # Contract
//!
//! - Mutators (`add_*`, `remove_*`, `set_*`, `force`, `unforce`) only record
//!   the change. [`AoiIndex::update`] (once per tick) brings every interest
//!   set up to date and reports the *net* change since the previous update
//!   (state-diff semantics: an entity that enters and leaves between two
//!   updates reports nothing). [`AoiIndex::update_due`] does so for some
//!   areas only (the cell's observers due to flush); each area then reports
//!   the net change since it was last brought up to date, and hysteresis
//!   and the cap judge against its set as of then.
//! - Event order: by [`AreaId`] ascending; within one area all leaves, then all
//!   enters, each by [`EntityId`] ascending.
//! - Forced interest ([`AoiIndex::force`]): the entity is in the set from the
//!   next update on, whatever its distance, flags or height, and is kept even
//!   beyond the cap (forced entities count first). Unforcing makes it an
//!   ordinary candidate again: it stays only if it qualifies then (for a member
//!   the leave radius applies).
//! - Cap: when more entities qualify than `max_interest`, the forced ones are
//!   kept, then the nearest (ground `d2`), ties to the lower entity id. The
//!   events report every change of the kept set.
//! - Removing an entity drops its own areas silently (no events for them) and,
//!   at the next update, every area that held it reports a leave. If the same
//!   id is added again before that update it counts as a new entity: the areas
//!   report a leave and, if it qualifies, an enter.
//! - Removing an area drops it silently.
//! - Positions anywhere are accepted (outside the world rectangle they are
//!   clamped into the edge grid cells for indexing, never moved); non-finite
//!   numbers are refused with [`AoiError`] naming the field; unknown ids give
//!   a typed error and change nothing.
//!
//! - Height bands are relative to the owner's height (`y`).
//!
//! [`GridAoi`] is the production index: a grid (rows `grid_cell_m` tall,
//! columns a quarter of that wide) with the entities sorted by cell in
//! contiguous arrays, incremental (areas whose
//! neighbourhood did not change are skipped) and kinetic (each area keeps a
//! watch list of the entities within its leave radius plus a skin and
//! re-checks a pair only once the movement seen since could have carried it
//! across a rim; see [`AoiParams::skin_m`]). Where at least a quarter of
//! the entities moved since an area was last processed, a dense area (at least
//! [`AoiParams::sweep_min_interest`] members, capped and banded ones
//! included) instead *sweeps*: it rescans the layout rows within its leave
//! radius in a branch-free pass and diffs the hits against its set
//! (`grid_sweep.rs`; an area processed only every few ticks, on its
//! observer's flushes, counts the movers of all of them). On the reference workload
//! (per CPU-second, noisy 2-core machine) this lifts config c from ~0.6 to
//! ~1.0 M moves/s and b from ~0.9 to ~1.1; a (sparse, ~10 members, stays
//! kinetic) is unchanged at ~3-4 M. [`BruteAoi`] recomputes
//! everything from scratch and is the oracle the property tests hold the grid
//! to. Both implement [`AoiIndex`].
//!
//! This module is sans-IO and deterministic; it knows nothing of cells,
//! ghosts or clients.

mod brute;
mod gather;
mod grid;
mod grid_api;
mod grid_kinetic;
mod grid_mutate;
mod grid_sweep;
mod grid_update;
mod grid_verify;
mod idmap;
mod types;

pub use brute::BruteAoi;
pub use grid::GridAoi;
pub use idmap::IdMap;
pub use types::{
    check_position, dist2, finite, AoiError, AoiEvent, AoiParams, AreaId, AreaSpec, EventKind,
    FlagFilter, HeightBand,
};

use crate::core::geom::{Shape, Vec3};
use crate::core::ids::EntityId;

/// The common API of every AOI index (see the module doc for the contract).
pub trait AoiIndex {
    /// Indexes a new entity.
    ///
    /// # Errors
    /// [`AoiError::NonFinite`] for a bad position, [`AoiError::DuplicateEntity`],
    /// [`AoiError::Full`] (`max_entities`).
    fn add_entity(&mut self, id: EntityId, pos: Vec3, flags: u64) -> Result<(), AoiError>;

    /// Removes an entity and its areas (see the module doc for the events).
    ///
    /// # Errors
    /// [`AoiError::UnknownEntity`].
    fn remove_entity(&mut self, id: EntityId) -> Result<(), AoiError>;

    /// Moves an entity (height included).
    ///
    /// # Errors
    /// [`AoiError::NonFinite`], [`AoiError::UnknownEntity`].
    fn set_position(&mut self, id: EntityId, pos: Vec3) -> Result<(), AoiError>;

    /// Replaces an entity's type flags.
    ///
    /// # Errors
    /// [`AoiError::UnknownEntity`].
    fn set_flags(&mut self, id: EntityId, flags: u64) -> Result<(), AoiError>;

    /// Adds an area owned by `owner`; its set fills at the next update.
    ///
    /// # Errors
    /// The spec's validation error, [`AoiError::UnknownEntity`],
    /// [`AoiError::Full`] (`max_areas`, `max_areas_per_entity`).
    fn add_area(&mut self, owner: EntityId, spec: AreaSpec) -> Result<AreaId, AoiError>;

    /// Removes an area silently.
    ///
    /// # Errors
    /// [`AoiError::UnknownArea`].
    fn remove_area(&mut self, area: AreaId) -> Result<(), AoiError>;

    /// Replaces an area's spec (radii, filter, height band, cap); the set
    /// follows at the next update (members are judged with the new leave radius).
    ///
    /// # Errors
    /// The spec's validation error, [`AoiError::UnknownArea`].
    fn set_area_spec(&mut self, area: AreaId, spec: AreaSpec) -> Result<(), AoiError>;

    /// Forces `entity` into `area`'s set; idempotent.
    ///
    /// # Errors
    /// [`AoiError::UnknownArea`], [`AoiError::UnknownEntity`],
    /// [`AoiError::SelfInterest`], [`AoiError::Full`] (`max_forced_per_area`).
    fn force(&mut self, area: AreaId, entity: EntityId) -> Result<(), AoiError>;

    /// Ends a forced interest; returns whether it was forced.
    ///
    /// # Errors
    /// [`AoiError::UnknownArea`], [`AoiError::UnknownEntity`].
    fn unforce(&mut self, area: AreaId, entity: EntityId) -> Result<bool, AoiError>;

    /// Brings every interest set up to date; `out` is cleared and then filled
    /// with the events in the documented order.
    fn update(&mut self, out: &mut Vec<AoiEvent>);

    /// [`AoiIndex::update`] for the areas listed in `due` only (ascending
    /// ids; unknown ones are ignored): each is brought up to date and reports
    /// the net change since it was last brought up to date (the state diff
    /// of every tick it sat out included). The others keep their sets and
    /// report nothing. `update_due` with every area is `update`.
    fn update_due(&mut self, out: &mut Vec<AoiEvent>, due: &[AreaId]);

    /// The area's current interest set (as of the last update), ascending.
    ///
    /// # Errors
    /// [`AoiError::UnknownArea`].
    fn interest(&self, area: AreaId, out: &mut Vec<EntityId>) -> Result<(), AoiError>;

    /// Entities whose current position lies in `shape` and whose flags pass
    /// `filter`, ascending by id, into `out` (cleared first).
    ///
    /// # Errors
    /// [`AoiError::Shape`] for a malformed shape.
    fn query(
        &self,
        shape: &Shape,
        filter: &FlagFilter,
        out: &mut Vec<EntityId>,
    ) -> Result<(), AoiError>;

    /// The entity's current position.
    fn position(&self, id: EntityId) -> Option<Vec3>;

    /// Number of entities indexed.
    fn entity_count(&self) -> usize;
}
