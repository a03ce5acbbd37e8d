//! The vocabulary of the AOI engine: ids, area specifications, flag and
//! height filters, events, parameters and errors.
//!
//! Pure values and the validation rules shared by every index, so the grid
//! and the brute-force oracle refuse exactly the same inputs. Owns no state.

use crate::core::geom::{Rect, ShapeError, Vec3};
use crate::core::ids::EntityId;
use std::fmt;

/// One area ("radius entity"), handed out by the index in increasing order
/// starting at 1 and never reused by that index.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct AreaId(pub u64);

impl fmt::Debug for AreaId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a{}", self.0)
    }
}

/// The type-flag filter of an area (seed 004's `check_flag`).
///
/// An entity with flags `f` passes when
/// `f & forbid == 0 && f & need == need && f & any != 0`, in that order.
/// Note the last clause: an entity whose flags are all zero passes no filter,
/// not even [`FlagFilter::ACCEPT_ALL`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlagFilter {
    /// At least one of these bits must be set.
    pub any: u64,
    /// All of these bits must be set.
    pub need: u64,
    /// None of these bits may be set.
    pub forbid: u64,
}

impl FlagFilter {
    /// Accepts every entity with at least one flag bit set.
    pub const ACCEPT_ALL: FlagFilter = FlagFilter {
        any: u64::MAX,
        need: 0,
        forbid: 0,
    };

    /// The seed's `check_flag` rule, exactly.
    #[inline]
    pub fn accepts(&self, flags: u64) -> bool {
        if flags & self.forbid != 0 {
            return false;
        }
        if flags & self.need != self.need {
            return false;
        }
        flags & self.any != 0
    }
}

impl Default for FlagFilter {
    fn default() -> Self {
        FlagFilter::ACCEPT_ALL
    }
}

/// A height limit relative to the area owner's height: an entity passes when
/// `min_dy_m <= entity.y - owner.y <= max_dy_m` (closed).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HeightBand {
    /// Lowest accepted height difference (entity minus owner), metres.
    pub min_dy_m: f64,
    /// Highest accepted height difference (entity minus owner), metres.
    pub max_dy_m: f64,
}

impl HeightBand {
    /// True when an entity at height `y` passes for an owner at `owner_y`.
    #[inline]
    pub fn accepts(&self, owner_y: f64, y: f64) -> bool {
        let dy = y - owner_y;
        dy >= self.min_dy_m && dy <= self.max_dy_m
    }
}

/// What an area is interested in.
///
/// Membership rule, evaluated at every update for an entity `e != owner`:
/// `e` is forced, or `e` passes the flag filter and the height band and
/// either `d2 <= radius_m^2`, or `e` was already in the set and
/// `d2 <= leave_radius_m^2` (hysteresis), where
/// `d2 = dx*dx + dz*dz` with `dx = owner.x - e.x` on the ground plane.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AreaSpec {
    /// Enter radius, metres (closed: exactly on the rim is inside).
    pub radius_m: f64,
    /// Leave radius, metres, `>= radius_m`; `None` means `radius_m`.
    pub leave_radius_m: Option<f64>,
    /// Type-flag filter (ignored for forced entities).
    pub filter: FlagFilter,
    /// Optional height band relative to the owner (ignored for forced entities).
    pub height: Option<HeightBand>,
    /// Most entities kept in the set; `None` is unlimited. When more qualify,
    /// forced entities are kept first (all of them, even beyond the cap), then
    /// the nearest by `d2`, ties to the lower entity id.
    pub max_interest: Option<u32>,
}

impl AreaSpec {
    /// A plain circle of `radius_m` accepting every entity with a flag set.
    pub fn circle(radius_m: f64) -> Self {
        AreaSpec {
            radius_m,
            leave_radius_m: None,
            filter: FlagFilter::ACCEPT_ALL,
            height: None,
            max_interest: None,
        }
    }

    /// The effective leave radius.
    #[inline]
    pub fn leave_radius(&self) -> f64 {
        self.leave_radius_m.unwrap_or(self.radius_m)
    }

    /// Checks every number.
    ///
    /// # Errors
    /// [`AoiError::NonFinite`] or [`AoiError::Invalid`] naming the field.
    pub fn validate(&self) -> Result<(), AoiError> {
        finite(self.radius_m, "radius_m")?;
        if self.radius_m < 0.0 {
            return Err(AoiError::Invalid {
                field: "radius_m",
                reason: "negative",
            });
        }
        if let Some(l) = self.leave_radius_m {
            finite(l, "leave_radius_m")?;
            if l < self.radius_m {
                return Err(AoiError::Invalid {
                    field: "leave_radius_m",
                    reason: "smaller than radius_m",
                });
            }
        }
        if let Some(h) = self.height {
            finite(h.min_dy_m, "height.min_dy_m")?;
            finite(h.max_dy_m, "height.max_dy_m")?;
            if h.min_dy_m > h.max_dy_m {
                return Err(AoiError::Invalid {
                    field: "height",
                    reason: "min_dy_m above max_dy_m",
                });
            }
        }
        Ok(())
    }
}

/// Refuses a non-finite number, naming `field`.
///
/// # Errors
/// [`AoiError::NonFinite`].
pub fn finite(v: f64, field: &'static str) -> Result<(), AoiError> {
    if v.is_finite() {
        Ok(())
    } else {
        Err(AoiError::NonFinite { field })
    }
}

/// Refuses a position with a non-finite coordinate, naming it.
///
/// # Errors
/// [`AoiError::NonFinite`] with field `position.x`, `position.y` or `position.z`.
pub fn check_position(p: Vec3) -> Result<(), AoiError> {
    finite(p.x, "position.x")?;
    finite(p.y, "position.y")?;
    finite(p.z, "position.z")
}

/// Squared ground distance from the owner `o` to `e`, computed the one way
/// every index uses (`dx = o.x - e.x`), so all agree to the last bit.
#[inline]
pub fn dist2(o: Vec3, e: Vec3) -> f64 {
    let dx = o.x - e.x;
    let dz = o.z - e.z;
    dx * dx + dz * dz
}

/// Whether an entity entered or left an area.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EventKind {
    /// Left the interest set (sorts before `Enter`).
    Leave,
    /// Entered the interest set.
    Enter,
}

/// One change of one area's interest set, reported by `update()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AoiEvent {
    /// The area whose set changed.
    pub area: AreaId,
    /// The entity owning that area.
    pub owner: EntityId,
    /// The entity that entered or left.
    pub entity: EntityId,
    /// Enter or leave.
    pub kind: EventKind,
}

/// Bounds and the grid geometry of one AOI index (one per cell).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AoiParams {
    /// The region the grid covers. Entities outside it are still indexed
    /// (clamped into the edge cells), only less efficiently.
    pub world: Rect,
    /// Side of one grid cell, metres. Best near the most common leave radius
    /// (an area then scans about 3 x 3 cells). Default 50.
    pub grid_cell_m: f64,
    /// Most grid cells (`ceil(width / cell) * ceil(depth / cell)`). Default 1 << 20.
    pub grid_cells_max: usize,
    /// Verlet skin, metres. Each area watches the entities within its leave
    /// radius plus this skin and re-checks one of them only once the movement
    /// seen since its last check could have carried it across the rim; the
    /// watch list is rebuilt after the entities moved up to `skin_m / 2`.
    /// A single step longer than `skin_m / 2` (or any height change) counts as
    /// a jump and makes every area near its ends rescan. Best around 4 to 10
    /// steps of an ordinary walker. 0 rescans on every move. Default 8
    /// (16 steps of a 5 m/s walker at 10 Hz).
    pub skin_m: f64,
    /// Sweep threshold: in an update where at least a quarter of the
    /// entities moved, an area holding at least this many entities rescans
    /// its leave radius directly instead of using its watch list (dense
    /// areas are cheaper to rescan than to track; see `grid_sweep.rs`).
    /// 0 sweeps every area in such updates, `usize::MAX` never. Default 24.
    pub sweep_min_interest: usize,
    /// Most entities at once. Default 65 536.
    pub max_entities: usize,
    /// Most areas at once. Default 65 536.
    pub max_areas: usize,
    /// Most areas owned by one entity. Default 8.
    pub max_areas_per_entity: usize,
    /// Most forced entities per area. Default 256.
    pub max_forced_per_area: usize,
}

impl Default for AoiParams {
    fn default() -> Self {
        AoiParams {
            world: Rect::new(0.0, 0.0, 2000.0, 2000.0),
            grid_cell_m: 50.0,
            grid_cells_max: 1 << 20,
            skin_m: 8.0,
            sweep_min_interest: 24,
            max_entities: 65_536,
            max_areas: 65_536,
            max_areas_per_entity: 8,
            max_forced_per_area: 256,
        }
    }
}

impl AoiParams {
    /// Checks the geometry.
    ///
    /// # Errors
    /// [`AoiError::Params`] naming the field.
    pub fn validate(&self) -> Result<(), AoiError> {
        let bad = |field, reason| Err(AoiError::Params { field, reason });
        if !self.world.is_valid() {
            return bad("world", "non-finite or inverted");
        }
        if !(self.grid_cell_m.is_finite() && self.grid_cell_m > 0.0) {
            return bad("grid_cell_m", "must be finite and positive");
        }
        if !(self.skin_m.is_finite() && self.skin_m >= 0.0) {
            return bad("skin_m", "must be finite and non-negative");
        }
        if self.max_entities > 1 << 30 {
            return bad("max_entities", "above 2^30");
        }
        let (cols, rows) = self.grid_dims();
        if cols.saturating_mul(rows) > self.grid_cells_max {
            return bad("grid_cell_m", "too many cells (grid_cells_max)");
        }
        Ok(())
    }

    /// Columns (along x) and rows (along z) of the grid, each at least 1.
    pub fn grid_dims(&self) -> (usize, usize) {
        let n = |side: f64| ((side / self.grid_cell_m).ceil() as usize).max(1);
        (n(self.world.width()), n(self.world.depth()))
    }
}

/// Why the AOI index refused a call.
#[derive(Clone, Copy, Debug, PartialEq, thiserror::Error)]
pub enum AoiError {
    /// A coordinate, radius or height is NaN or infinite.
    #[error("non-finite {field}")]
    NonFinite {
        /// The offending field.
        field: &'static str,
    },
    /// A number is out of its legal range.
    #[error("invalid {field}: {reason}")]
    Invalid {
        /// The offending field.
        field: &'static str,
        /// The rule it breaks.
        reason: &'static str,
    },
    /// The parameters are unusable.
    #[error("bad AOI parameter {field}: {reason}")]
    Params {
        /// The offending parameter.
        field: &'static str,
        /// The rule it breaks.
        reason: &'static str,
    },
    /// No such entity.
    #[error("unknown entity {0:?}")]
    UnknownEntity(EntityId),
    /// No such area.
    #[error("unknown area {0:?}")]
    UnknownArea(AreaId),
    /// The entity is already indexed.
    #[error("entity {0:?} already indexed")]
    DuplicateEntity(EntityId),
    /// An area cannot force its own owner.
    #[error("area {0:?} cannot force its own owner")]
    SelfInterest(AreaId),
    /// A bound from [`AoiParams`] is reached.
    #[error("AOI limit {what} ({max}) reached")]
    Full {
        /// The parameter name of the bound.
        what: &'static str,
        /// Its value.
        max: usize,
    },
    /// A query shape is malformed.
    #[error("bad query shape: {0}")]
    Shape(#[from] ShapeError),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_flag_follows_the_seed() {
        let f = FlagFilter {
            any: 0b0110,
            need: 0b1000,
            forbid: 0b0001,
        };
        assert!(f.accepts(0b1010));
        assert!(!f.accepts(0b1011), "forbid wins");
        assert!(!f.accepts(0b0010), "need is missing");
        assert!(!f.accepts(0b1000), "no any bit");
        assert!(
            !FlagFilter::ACCEPT_ALL.accepts(0),
            "zero flags pass nothing"
        );
        assert!(FlagFilter::ACCEPT_ALL.accepts(1 << 63));
    }

    #[test]
    fn specs_are_validated_naming_the_field() {
        let mut s = AreaSpec::circle(f64::NAN);
        assert_eq!(s.validate(), Err(AoiError::NonFinite { field: "radius_m" }));
        s.radius_m = 5.0;
        s.leave_radius_m = Some(4.0);
        assert!(matches!(
            s.validate(),
            Err(AoiError::Invalid {
                field: "leave_radius_m",
                ..
            })
        ));
        s.leave_radius_m = Some(6.0);
        s.height = Some(HeightBand {
            min_dy_m: 1.0,
            max_dy_m: f64::INFINITY,
        });
        assert_eq!(
            s.validate(),
            Err(AoiError::NonFinite {
                field: "height.max_dy_m"
            })
        );
        s.height = None;
        assert_eq!(s.validate(), Ok(()));
        assert_eq!(
            check_position(Vec3::new(0.0, f64::NAN, 0.0)),
            Err(AoiError::NonFinite {
                field: "position.y"
            })
        );
    }

    #[test]
    fn params_default_is_valid_and_bounded() {
        let p = AoiParams::default();
        assert_eq!(p.validate(), Ok(()));
        assert_eq!(p.grid_dims(), (40, 40));
        let tiny = AoiParams {
            grid_cell_m: 0.001,
            ..p
        };
        assert!(matches!(tiny.validate(), Err(AoiError::Params { .. })));
    }
}
