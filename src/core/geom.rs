//! Geometry of the world: points, rectangles and the query shapes.
//!
//! The ground plane is `(x, z)`; `y` is height. All coordinates are `f64`
//! metres. Yaw is in radians, measured from the `+z` axis towards `+x`, so a
//! yaw of 0 faces `+z` and a yaw of `PI / 2` faces `+x`.
//!
//! # Inclusive or exclusive
//!
//! - [`Rect::contains`] is half-open, `[min, max)` on both axes, so the leaves of
//!   the space tree tile the world with every point in exactly one leaf.
//! - Everything that answers "is this in range" is closed (inclusive): a point
//!   exactly on a circle's rim, a rectangle's edge, a cylinder's height limits
//!   or a sector's edge rays is inside. [`Rect::contains_closed`],
//!   [`Rect::intersects`] (touching rectangles meet) and every [`Shape`].
//!
//! This module owns no state and must not grow any: it is pure functions over
//! plain values.

use std::f64::consts::PI;

/// A point in the world. `x` and `z` lie on the ground plane, `y` is height.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize,
)]
#[rkyv(derive(Debug))]
pub struct Vec3 {
    /// East-west, metres.
    pub x: f64,
    /// Height, metres.
    pub y: f64,
    /// North-south, metres.
    pub z: f64,
}

impl Vec3 {
    /// A point at `(x, y, z)`.
    pub const fn new(x: f64, y: f64, z: f64) -> Self {
        Vec3 { x, y, z }
    }

    /// A point on the ground (`y = 0`).
    pub const fn ground(x: f64, z: f64) -> Self {
        Vec3 { x, y: 0.0, z }
    }

    /// True when every coordinate is finite (not NaN, not infinite).
    pub fn is_finite(self) -> bool {
        self.x.is_finite() && self.y.is_finite() && self.z.is_finite()
    }

    /// Squared distance on the ground plane (height ignored).
    #[inline]
    pub fn dist2_xz(self, other: Vec3) -> f64 {
        let dx = self.x - other.x;
        let dz = self.z - other.z;
        dx * dx + dz * dz
    }

    /// Distance on the ground plane (height ignored).
    pub fn dist_xz(self, other: Vec3) -> f64 {
        self.dist2_xz(other).sqrt()
    }
}

/// One of the two ground axes, used by the space tree to cut the world.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    rkyv::Archive,
    rkyv::Serialize,
    rkyv::Deserialize,
)]
#[rkyv(derive(Debug, PartialEq, Eq))]
pub enum Axis {
    /// Cut across `x` (the cut is a line `x = k`).
    X,
    /// Cut across `z` (the cut is a line `z = k`).
    Z,
}

impl Axis {
    /// The coordinate of `p` on this axis.
    #[inline]
    pub fn of(self, p: Vec3) -> f64 {
        match self {
            Axis::X => p.x,
            Axis::Z => p.z,
        }
    }

    /// The other ground axis.
    pub fn other(self) -> Axis {
        match self {
            Axis::X => Axis::Z,
            Axis::Z => Axis::X,
        }
    }
}

/// An axis-aligned rectangle on the ground plane, `min <= max` on both axes.
#[derive(Clone, Copy, Debug, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct Rect {
    /// Smallest x.
    pub min_x: f64,
    /// Smallest z.
    pub min_z: f64,
    /// Largest x.
    pub max_x: f64,
    /// Largest z.
    pub max_z: f64,
}

impl Rect {
    /// The rectangle with corners `(min_x, min_z)` and `(max_x, max_z)`.
    ///
    /// # Panics
    /// Debug builds assert `min <= max` on both axes.
    pub fn new(min_x: f64, min_z: f64, max_x: f64, max_z: f64) -> Self {
        debug_assert!(min_x <= max_x && min_z <= max_z, "inverted rect");
        Rect {
            min_x,
            min_z,
            max_x,
            max_z,
        }
    }

    /// The square of side `2 * half` centred on `(x, z)`.
    pub fn around(x: f64, z: f64, half: f64) -> Self {
        Rect::new(x - half, z - half, x + half, z + half)
    }

    /// Extent along x.
    pub fn width(&self) -> f64 {
        self.max_x - self.min_x
    }

    /// Extent along z.
    pub fn depth(&self) -> f64 {
        self.max_z - self.min_z
    }

    /// Extent along `axis`.
    pub fn side(&self, axis: Axis) -> f64 {
        match axis {
            Axis::X => self.width(),
            Axis::Z => self.depth(),
        }
    }

    /// The `(min, max)` bounds along `axis`.
    pub fn span(&self, axis: Axis) -> (f64, f64) {
        match axis {
            Axis::X => (self.min_x, self.max_x),
            Axis::Z => (self.min_z, self.max_z),
        }
    }

    /// Area in square metres.
    pub fn area(&self) -> f64 {
        self.width() * self.depth()
    }

    /// The centre point (on the ground).
    pub fn center(&self) -> Vec3 {
        Vec3::ground(
            (self.min_x + self.max_x) * 0.5,
            (self.min_z + self.max_z) * 0.5,
        )
    }

    /// True when every bound is finite and `min <= max`.
    pub fn is_valid(&self) -> bool {
        [self.min_x, self.min_z, self.max_x, self.max_z]
            .iter()
            .all(|v| v.is_finite())
            && self.min_x <= self.max_x
            && self.min_z <= self.max_z
    }

    /// Half-open containment, `[min, max)`: the rule that makes leaves tile.
    #[inline]
    pub fn contains(&self, p: Vec3) -> bool {
        p.x >= self.min_x && p.x < self.max_x && p.z >= self.min_z && p.z < self.max_z
    }

    /// Closed containment, `[min, max]`.
    #[inline]
    pub fn contains_closed(&self, p: Vec3) -> bool {
        p.x >= self.min_x && p.x <= self.max_x && p.z >= self.min_z && p.z <= self.max_z
    }

    /// True when `other` lies wholly inside this rectangle (edges may touch).
    pub fn covers(&self, other: &Rect) -> bool {
        other.min_x >= self.min_x
            && other.max_x <= self.max_x
            && other.min_z >= self.min_z
            && other.max_z <= self.max_z
    }

    /// True when the closed rectangles share at least one point (touching counts).
    #[inline]
    pub fn intersects(&self, other: &Rect) -> bool {
        self.min_x <= other.max_x
            && other.min_x <= self.max_x
            && self.min_z <= other.max_z
            && other.min_z <= self.max_z
    }

    /// True when the open interiors overlap (touching does not count).
    pub fn overlaps(&self, other: &Rect) -> bool {
        self.min_x < other.max_x
            && other.min_x < self.max_x
            && self.min_z < other.max_z
            && other.min_z < self.max_z
    }

    /// The common part, if the closed rectangles meet.
    pub fn intersection(&self, other: &Rect) -> Option<Rect> {
        self.intersects(other).then(|| Rect {
            min_x: self.min_x.max(other.min_x),
            min_z: self.min_z.max(other.min_z),
            max_x: self.max_x.min(other.max_x),
            max_z: self.max_z.min(other.max_z),
        })
    }

    /// Grown by `d` on every side (`d < 0` shrinks; the result never inverts,
    /// it collapses to the centre line instead).
    pub fn inflate(&self, d: f64) -> Rect {
        let c = self.center();
        Rect {
            min_x: (self.min_x - d).min(c.x),
            min_z: (self.min_z - d).min(c.z),
            max_x: (self.max_x + d).max(c.x),
            max_z: (self.max_z + d).max(c.z),
        }
    }

    /// Squared ground distance from `p` to the closest point of the closed
    /// rectangle; 0 inside.
    #[inline]
    pub fn dist2_to(&self, p: Vec3) -> f64 {
        let dx = (self.min_x - p.x).max(0.0).max(p.x - self.max_x);
        let dz = (self.min_z - p.z).max(0.0).max(p.z - self.max_z);
        dx * dx + dz * dz
    }

    /// Ground distance from `p` to the closed rectangle; 0 inside.
    pub fn distance_to(&self, p: Vec3) -> f64 {
        self.dist2_to(p).sqrt()
    }

    /// `p` moved to the nearest point of the closed rectangle.
    pub fn clamp(&self, p: Vec3) -> Vec3 {
        Vec3::new(
            p.x.clamp(self.min_x, self.max_x),
            p.y,
            p.z.clamp(self.min_z, self.max_z),
        )
    }

    /// Split at `at` across `axis`: `(low, high)` halves.
    ///
    /// # Panics
    /// Debug builds assert that `at` lies within the rectangle's span.
    pub fn split(&self, axis: Axis, at: f64) -> (Rect, Rect) {
        let (lo, hi) = self.span(axis);
        debug_assert!(lo <= at && at <= hi, "split outside the rect");
        match axis {
            Axis::X => (Rect { max_x: at, ..*self }, Rect { min_x: at, ..*self }),
            Axis::Z => (Rect { max_z: at, ..*self }, Rect { min_z: at, ..*self }),
        }
    }
}

/// A query area on the ground, with optional height limits, for skill
/// targeting and area effects. Every test is closed (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Shape {
    /// All points within `radius` of `center` on the ground, any height.
    Circle { center: Vec3, radius: f64 },
    /// A rectangle of `half_width` (across) by `half_length` (along the
    /// facing) centred on `center` and turned by `yaw`; any height.
    Rectangle {
        center: Vec3,
        half_width: f64,
        half_length: f64,
        yaw: f64,
    },
    /// A circle on the ground whose points also satisfy
    /// `min_y <= y <= max_y`.
    Cylinder {
        center: Vec3,
        radius: f64,
        min_y: f64,
        max_y: f64,
    },
    /// A fan: points within `radius` of `center` whose bearing is within
    /// `half_angle` of `yaw`. `half_angle >= PI` is a full circle.
    Sector {
        center: Vec3,
        radius: f64,
        yaw: f64,
        half_angle: f64,
    },
}

/// Why a [`Shape`] was refused.
#[derive(Clone, Copy, Debug, PartialEq, thiserror::Error)]
pub enum ShapeError {
    /// A coordinate, radius, extent or angle is NaN or infinite.
    #[error("shape has a non-finite {0}")]
    NonFinite(&'static str),
    /// A radius, extent or angle is negative, or `min_y > max_y`.
    #[error("shape has a negative or inverted {0}")]
    Negative(&'static str),
}

impl Shape {
    /// Checks that every number is finite and every extent non-negative.
    ///
    /// # Errors
    /// [`ShapeError`] naming the first bad field.
    pub fn validate(&self) -> Result<(), ShapeError> {
        let finite = |v: f64, name| {
            if v.is_finite() {
                Ok(())
            } else {
                Err(ShapeError::NonFinite(name))
            }
        };
        let non_negative = |v: f64, name| {
            if v >= 0.0 {
                Ok(())
            } else {
                Err(ShapeError::Negative(name))
            }
        };
        let center = |c: Vec3| {
            if c.is_finite() {
                Ok(())
            } else {
                Err(ShapeError::NonFinite("center"))
            }
        };
        match *self {
            Shape::Circle { center: c, radius } => {
                center(c)?;
                finite(radius, "radius")?;
                non_negative(radius, "radius")
            }
            Shape::Rectangle {
                center: c,
                half_width,
                half_length,
                yaw,
            } => {
                center(c)?;
                finite(half_width, "half_width")?;
                finite(half_length, "half_length")?;
                finite(yaw, "yaw")?;
                non_negative(half_width, "half_width")?;
                non_negative(half_length, "half_length")
            }
            Shape::Cylinder {
                center: c,
                radius,
                min_y,
                max_y,
            } => {
                center(c)?;
                finite(radius, "radius")?;
                finite(min_y, "min_y")?;
                finite(max_y, "max_y")?;
                non_negative(radius, "radius")?;
                non_negative(max_y - min_y, "height range")
            }
            Shape::Sector {
                center: c,
                radius,
                yaw,
                half_angle,
            } => {
                center(c)?;
                finite(radius, "radius")?;
                finite(yaw, "yaw")?;
                finite(half_angle, "half_angle")?;
                non_negative(radius, "radius")?;
                non_negative(half_angle, "half_angle")
            }
        }
    }

    /// The smallest axis-aligned rectangle holding the shape's ground footprint.
    pub fn bounds(&self) -> Rect {
        match *self {
            Shape::Circle { center, radius }
            | Shape::Cylinder { center, radius, .. }
            | Shape::Sector { center, radius, .. } => Rect::around(center.x, center.z, radius),
            Shape::Rectangle {
                center,
                half_width,
                half_length,
                yaw,
            } => {
                let (s, c) = yaw.sin_cos();
                let ex = (half_length * s).abs() + (half_width * c).abs();
                let ez = (half_length * c).abs() + (half_width * s).abs();
                Rect::new(center.x - ex, center.z - ez, center.x + ex, center.z + ez)
            }
        }
    }

    /// True when `p` lies inside the closed shape.
    pub fn contains(&self, p: Vec3) -> bool {
        match *self {
            Shape::Circle { center, radius } => p.dist2_xz(center) <= radius * radius,
            Shape::Cylinder {
                center,
                radius,
                min_y,
                max_y,
            } => p.y >= min_y && p.y <= max_y && p.dist2_xz(center) <= radius * radius,
            Shape::Rectangle {
                center,
                half_width,
                half_length,
                yaw,
            } => {
                let (s, c) = yaw.sin_cos();
                let (dx, dz) = (p.x - center.x, p.z - center.z);
                // Project onto the facing (s, c) and the side (c, -s).
                let along = dx * s + dz * c;
                let across = dx * c - dz * s;
                along.abs() <= half_length && across.abs() <= half_width
            }
            Shape::Sector {
                center,
                radius,
                yaw,
                half_angle,
            } => {
                let d2 = p.dist2_xz(center);
                if d2 > radius * radius {
                    return false;
                }
                if half_angle >= PI || d2 == 0.0 {
                    return true;
                }
                let bearing = (p.x - center.x).atan2(p.z - center.z);
                angle_between(bearing, yaw) <= half_angle
            }
        }
    }
}

/// `x.round() as i64` (halves away from zero, saturating, NaN as 0)
/// without the libm call `f64::round` costs on baseline x86-64 (no SSE4.1):
/// it sits on the view's per-movement path (quantising positions).
#[inline]
pub fn round_i64(x: f64) -> i64 {
    // Truncation is one instruction; `x - t` is exact for every `|x| < 2^63`
    // (both are within one of each other, and `t` is an integer).
    let t = x as i64;
    let frac = x - t as f64;
    if frac >= 0.5 {
        t.saturating_add(1)
    } else if frac <= -0.5 {
        t.saturating_sub(1)
    } else {
        t
    }
}

/// The absolute difference of two angles, folded into `[0, PI]`.
pub fn angle_between(a: f64, b: f64) -> f64 {
    let d = (a - b).rem_euclid(2.0 * PI);
    if d > PI {
        2.0 * PI - d
    } else {
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::f64::consts::FRAC_PI_2;

    #[test]
    fn round_i64_is_round_as_i64() {
        let mut xs = vec![
            0.0,
            -0.0,
            0.5,
            -0.5,
            1.5,
            -1.5,
            2.5,
            -2.5,
            0.49999999999999994,
            -0.49999999999999994,
            4503599627370495.5,
            -4503599627370495.5,
            4503599627370497.0,
            9.3e18,
            -9.3e18,
            1e300,
            -1e300,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MIN_POSITIVE,
            123.456,
            -123.456,
        ];
        let mut v = 0.37_f64;
        for _ in 0..10_000 {
            v = (v * 7919.0 + 0.123).fract();
            xs.push((v - 0.5) * 2e6);
            xs.push(((v - 0.5) * 2e4).trunc() + 0.5);
        }
        for x in xs {
            assert_eq!(round_i64(x), x.round() as i64, "{x}");
        }
    }

    #[test]
    fn rect_containment_is_half_open_and_closed_where_documented() {
        let r = Rect::new(0.0, 0.0, 10.0, 10.0);
        assert!(r.contains(Vec3::ground(0.0, 0.0)));
        assert!(!r.contains(Vec3::ground(10.0, 5.0)));
        assert!(r.contains_closed(Vec3::ground(10.0, 5.0)));
        let (lo, hi) = r.split(Axis::X, 4.0);
        let p = Vec3::ground(4.0, 1.0);
        assert!(
            !lo.contains(p) && hi.contains(p),
            "a split line belongs to the high side"
        );
    }

    #[test]
    fn rect_relations() {
        let a = Rect::new(0.0, 0.0, 10.0, 10.0);
        let b = Rect::new(10.0, 0.0, 20.0, 10.0);
        assert!(a.intersects(&b) && !a.overlaps(&b));
        assert!(a.inflate(1.0).overlaps(&b));
        assert!(a.inflate(1.0).covers(&a));
        assert_eq!(a.inflate(-100.0).area(), 0.0);
        assert_eq!(a.intersection(&b).map(|r| r.width()), Some(0.0));
        assert_eq!(a.distance_to(Vec3::ground(13.0, 14.0)), 5.0);
        assert_eq!(a.distance_to(Vec3::ground(3.0, 4.0)), 0.0);
        assert_eq!(
            a.clamp(Vec3::new(-3.0, 2.0, 40.0)),
            Vec3::new(0.0, 2.0, 10.0)
        );
    }

    #[test]
    fn circle_and_cylinder_are_closed() {
        let c = Shape::Circle {
            center: Vec3::ground(0.0, 0.0),
            radius: 5.0,
        };
        assert!(c.contains(Vec3::new(3.0, 99.0, 4.0)));
        assert!(!c.contains(Vec3::ground(3.0, 4.1)));
        let cyl = Shape::Cylinder {
            center: Vec3::ground(0.0, 0.0),
            radius: 5.0,
            min_y: 0.0,
            max_y: 2.0,
        };
        assert!(cyl.contains(Vec3::new(0.0, 2.0, 0.0)));
        assert!(!cyl.contains(Vec3::new(0.0, 2.1, 0.0)));
    }

    #[test]
    fn rectangle_turns_with_yaw() {
        // Facing +x: long along x, narrow along z.
        let r = Shape::Rectangle {
            center: Vec3::ground(0.0, 0.0),
            half_width: 1.0,
            half_length: 10.0,
            yaw: FRAC_PI_2,
        };
        assert!(r.contains(Vec3::ground(9.9, 0.5)));
        assert!(!r.contains(Vec3::ground(0.5, 9.9)));
        let b = r.bounds();
        assert!((b.width() - 20.0).abs() < 1e-9 && (b.depth() - 2.0).abs() < 1e-9);
    }

    #[test]
    fn sector_checks_bearing() {
        // Facing +z with a 45 degree half angle.
        let s = Shape::Sector {
            center: Vec3::ground(0.0, 0.0),
            radius: 10.0,
            yaw: 0.0,
            half_angle: PI / 4.0,
        };
        assert!(s.contains(Vec3::ground(0.0, 5.0)));
        assert!(s.contains(Vec3::ground(3.0, 3.0)), "the edge ray is inside");
        assert!(!s.contains(Vec3::ground(5.0, 1.0)));
        assert!(!s.contains(Vec3::ground(0.0, -5.0)));
        assert!(s.contains(Vec3::ground(0.0, 0.0)), "the apex is inside");
        let full = Shape::Sector {
            center: Vec3::ground(0.0, 0.0),
            radius: 10.0,
            yaw: 0.0,
            half_angle: PI,
        };
        assert!(full.contains(Vec3::ground(0.0, -5.0)));
    }

    #[test]
    fn shapes_refuse_bad_numbers() {
        let bad = Shape::Circle {
            center: Vec3::ground(f64::NAN, 0.0),
            radius: 1.0,
        };
        assert_eq!(bad.validate(), Err(ShapeError::NonFinite("center")));
        let neg = Shape::Sector {
            center: Vec3::default(),
            radius: 1.0,
            yaw: 0.0,
            half_angle: -0.1,
        };
        assert_eq!(neg.validate(), Err(ShapeError::Negative("half_angle")));
        let inv = Shape::Cylinder {
            center: Vec3::default(),
            radius: 1.0,
            min_y: 2.0,
            max_y: 1.0,
        };
        assert_eq!(inv.validate(), Err(ShapeError::Negative("height range")));
    }

    #[test]
    fn angles_fold() {
        assert!((angle_between(0.1, 2.0 * PI - 0.1) - 0.2).abs() < 1e-12);
        assert!((angle_between(PI, -PI)).abs() < 1e-12);
    }
}
