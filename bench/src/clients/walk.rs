//! The clients' random walk: a small step every move, a heading that
//! drifts, reflected inside the world so every Move stays within the world
//! and under the server's speed limit.
//!
//! Owns one client's ground position and heading; no I/O.

use crate::SplitMix64;

/// Margin kept from the world's edges, metres (a reflected step never
/// leaves the world).
pub const EDGE_MARGIN_M: f64 = 1.0;

/// One client's walk.
#[derive(Clone, Debug)]
pub struct Walk {
    /// Ground position, metres.
    pub x: f64,
    /// Ground position, metres.
    pub z: f64,
    /// Heading, radians.
    pub yaw: f64,
}

/// The world rectangle the walk stays in.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bounds {
    /// Smallest x.
    pub min_x: f64,
    /// Smallest z.
    pub min_z: f64,
    /// Largest x.
    pub max_x: f64,
    /// Largest z.
    pub max_z: f64,
}

impl Walk {
    /// A walk starting at `(x, z)` with a random heading.
    pub fn at(x: f64, z: f64, rng: &mut SplitMix64) -> Walk {
        Walk {
            x,
            z,
            yaw: rng.u01() * crate::TAU,
        }
    }

    /// A walk starting at a uniformly random point of `b`.
    pub fn random(b: &Bounds, rng: &mut SplitMix64) -> Walk {
        let x = b.min_x + EDGE_MARGIN_M + rng.u01() * (b.max_x - b.min_x - 2.0 * EDGE_MARGIN_M);
        let z = b.min_z + EDGE_MARGIN_M + rng.u01() * (b.max_z - b.min_z - 2.0 * EDGE_MARGIN_M);
        Walk::at(x, z, rng)
    }

    /// One step of `step_m` metres: the heading turns by up to 0.5 rad
    /// either way, and the step reflects off the edges (margin kept).
    pub fn step(&mut self, step_m: f64, b: &Bounds, rng: &mut SplitMix64) {
        self.yaw += (rng.u01() - 0.5) * 1.0;
        let (lo_x, hi_x) = (b.min_x + EDGE_MARGIN_M, b.max_x - EDGE_MARGIN_M);
        let (lo_z, hi_z) = (b.min_z + EDGE_MARGIN_M, b.max_z - EDGE_MARGIN_M);
        let mut x = self.x + step_m * self.yaw.cos();
        let mut z = self.z + step_m * self.yaw.sin();
        if x < lo_x || x > hi_x {
            self.yaw = std::f64::consts::PI - self.yaw;
            x = self.x - (x - self.x);
        }
        if z < lo_z || z > hi_z {
            self.yaw = -self.yaw;
            z = self.z - (z - self.z);
        }
        self.x = x.clamp(lo_x, hi_x);
        self.z = z.clamp(lo_z, hi_z);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_walk_stays_inside_and_never_steps_further_than_asked() {
        let b = Bounds {
            min_x: 0.0,
            min_z: 0.0,
            max_x: 20.0,
            max_z: 10.0,
        };
        let mut rng = SplitMix64::new(7);
        let mut w = Walk::random(&b, &mut rng);
        let mut far = 0.0f64;
        for _ in 0..100_000 {
            let (x0, z0) = (w.x, w.z);
            w.step(0.6, &b, &mut rng);
            assert!(
                w.x >= 1.0 && w.x <= 19.0 && w.z >= 1.0 && w.z <= 9.0,
                "{w:?}"
            );
            let d = ((w.x - x0).powi(2) + (w.z - z0).powi(2)).sqrt();
            assert!(d <= 0.6 + 1e-9, "step {d}");
            far = far.max(w.x);
        }
        assert!(far > 18.0, "the walk goes places: {far}");
    }
}
