//! Bot movement behaviours, shared by the simulator and `loadgen`.
//!
//! Pure functions of `(rng, pose, speed, world rect, dt)`: no world, no ids,
//! no clocks, so the same seed moves the same bots the same way in both
//! programs. Yaw follows [`crate::core::geom`]: 0 faces `+z`, `PI / 2` faces
//! `+x`, so a heading `yaw` moves by `(sin yaw, cos yaw)` on `(x, z)`.
//!
//! Every behaviour keeps the bot inside the closed world rectangle and
//! returns a [`Step`]; [`Step::teleported`] marks a jump (the server sees a
//! discontinuous move, not a walk).

use std::f64::consts::{PI, TAU};

use crate::core::geom::{Rect, Vec3};
use crate::sim::rng::Rng;

/// Where a bot is and where it faces.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pose {
    /// Position (ground plane `x`, `z`; `y` kept as is).
    pub pos: Vec3,
    /// Heading, radians in `[0, TAU)`.
    pub yaw: f64,
}

/// The outcome of one behaviour step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Step {
    /// The new pose.
    pub pose: Pose,
    /// True if the bot jumped rather than walked.
    pub teleported: bool,
}

impl Step {
    fn walk(pos: Vec3, yaw: f64) -> Step {
        Step {
            pose: Pose {
                pos,
                yaw: yaw.rem_euclid(TAU),
            },
            teleported: false,
        }
    }
}

/// Heading from `(dx, dz)` in this module's convention.
pub fn yaw_of(dx: f64, dz: f64) -> f64 {
    dx.atan2(dz).rem_euclid(TAU)
}

/// Moves `d` metres along `yaw`, reflecting off the world's edges like a
/// billiard ball (the yaw is mirrored too). Returns the new `(pos, yaw)`.
pub fn advance_reflect(pos: Vec3, yaw: f64, d: f64, world: &Rect) -> (Vec3, f64) {
    let (mut dx, mut dz) = (yaw.sin() * d, yaw.cos() * d);
    let (x, fx) = reflect(pos.x + dx, world.min_x, world.max_x);
    let (z, fz) = reflect(pos.z + dz, world.min_z, world.max_z);
    if fx {
        dx = -dx;
    }
    if fz {
        dz = -dz;
    }
    let new_yaw = if fx || fz { yaw_of(dx, dz) } else { yaw };
    (Vec3::new(x, pos.y, z), new_yaw)
}

/// Folds `v` into `[lo, hi]`; true if the direction of travel flipped.
fn reflect(v: f64, lo: f64, hi: f64) -> (f64, bool) {
    let w = hi - lo;
    if w <= 0.0 {
        return (lo, false);
    }
    if (lo..=hi).contains(&v) {
        return (v, false);
    }
    let t = (v - lo).rem_euclid(2.0 * w);
    if t <= w {
        (lo + t, false)
    } else {
        (lo + 2.0 * w - t, true)
    }
}

/// Random walk: turns by up to `turn_rad_max` each step, walks
/// `speed_mps * dt_s`, reflects at the world's edges.
pub fn random_walk(
    rng: &mut Rng,
    pose: Pose,
    speed_mps: f64,
    turn_rad_max: f64,
    world: &Rect,
    dt_s: f64,
) -> Step {
    let yaw = pose.yaw + rng.f64_range(-turn_rad_max, turn_rad_max);
    let (pos, yaw) = advance_reflect(pose.pos, yaw, speed_mps * dt_s, world);
    Step::walk(pos, yaw)
}

/// Waypoints: walks towards `points[next]`; on reaching it, aims at the next
/// one (cyclically). Returns the step and the new `next`. With no points the
/// bot stands still.
pub fn waypoints(
    pose: Pose,
    speed_mps: f64,
    points: &[Vec3],
    next: usize,
    world: &Rect,
    dt_s: f64,
) -> (Step, usize) {
    if points.is_empty() {
        return (Step::walk(pose.pos, pose.yaw), 0);
    }
    let next = next % points.len();
    let target = world.clamp(points[next]);
    let dist = pose.pos.dist_xz(target);
    let d = speed_mps * dt_s;
    if dist <= d {
        let pos = Vec3::new(target.x, pose.pos.y, target.z);
        return (Step::walk(pos, pose.yaw), (next + 1) % points.len());
    }
    let yaw = yaw_of(target.x - pose.pos.x, target.z - pose.pos.z);
    let (pos, yaw) = advance_reflect(pose.pos, yaw, d, world);
    (Step::walk(pos, yaw), next)
}

/// A border walker's line and swing.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BorderLine {
    /// The border `x = line_x` it crosses.
    pub line_x: f64,
    /// How far it swings to either side, metres.
    pub amplitude_m: f64,
    /// How fast it drifts along the border (`z`), metres per second.
    pub drift_mps: f64,
}

/// Border walker: swings across `x = line_x` within `+- amplitude_m` at
/// `speed_mps`, drifting along `z` at `drift_mps` and turning back at the
/// world's edges. The direction of both motions lives in the yaw's quadrant
/// (`sin yaw` sign: x direction; `cos yaw` sign: z direction).
pub fn border_walk(pose: Pose, speed_mps: f64, line: &BorderLine, world: &Rect, dt_s: f64) -> Step {
    let mut sx = if pose.yaw.sin() >= 0.0 { 1.0 } else { -1.0 };
    let mut sz = if pose.yaw.cos() >= 0.0 { 1.0 } else { -1.0 };
    let lo = (line.line_x - line.amplitude_m).max(world.min_x);
    let hi = (line.line_x + line.amplitude_m).min(world.max_x);
    let mut x = pose.pos.x + sx * speed_mps * dt_s;
    if x >= hi {
        x = hi;
        sx = -1.0;
    } else if x <= lo {
        x = lo;
        sx = 1.0;
    }
    let mut z = pose.pos.z + sz * line.drift_mps * dt_s;
    if z >= world.max_z {
        z = world.max_z;
        sz = -1.0;
    } else if z <= world.min_z {
        z = world.min_z;
        sz = 1.0;
    }
    // Keep both signs recoverable even when one speed is zero.
    let yaw = yaw_of(sx * speed_mps.max(1e-3), sz * line.drift_mps.max(1e-3));
    Step::walk(Vec3::new(x, pose.pos.y, z), yaw)
}

/// The point a hotspot crowd meets at.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spot {
    /// Where.
    pub center: Vec3,
    /// How close counts as arrived, metres.
    pub radius_m: f64,
}

/// Hotspot: while `converging`, walks towards the spot's centre (milling
/// about slowly once within its radius); otherwise walks away from it with
/// random turns (up to `PI / 8` per step), reflecting at the world's edges.
pub fn hotspot(
    rng: &mut Rng,
    pose: Pose,
    speed_mps: f64,
    spot: &Spot,
    converging: bool,
    world: &Rect,
    dt_s: f64,
) -> Step {
    let (center, radius_m) = (spot.center, spot.radius_m);
    let away = yaw_of(pose.pos.x - center.x, pose.pos.z - center.z);
    let jitter = rng.f64_range(-PI / 8.0, PI / 8.0);
    if converging {
        if pose.pos.dist_xz(center) <= radius_m {
            return random_walk(rng, pose, speed_mps * 0.1, PI, world, dt_s);
        }
        let yaw = away + PI + jitter;
        let d = (speed_mps * dt_s).min(pose.pos.dist_xz(center));
        let (pos, yaw) = advance_reflect(pose.pos, yaw, d, world);
        return Step::walk(pos, yaw);
    }
    let (pos, yaw) = advance_reflect(pose.pos, away + jitter, speed_mps * dt_s, world);
    Step::walk(pos, yaw)
}

/// Whether a hotspot bot converges at time `t_s`: converge for the first half
/// of every `period_s`, disperse for the second.
pub fn hotspot_converging(t_s: f64, period_s: f64) -> bool {
    period_s <= 0.0 || (t_s / period_s).fract() < 0.5
}

/// Teleport: with probability `p`, jumps to a uniform random point of the
/// world at least `min_distance_m` away (tries a few times, then jumps to the
/// point mirrored through the world's centre). Otherwise `None`: the caller
/// walks instead.
pub fn teleport(
    rng: &mut Rng,
    pose: Pose,
    p: f64,
    min_distance_m: f64,
    world: &Rect,
) -> Option<Step> {
    if !rng.bool(p) {
        return None;
    }
    const TRIES: usize = 8;
    let mut pos = None;
    for _ in 0..TRIES {
        let cand = Vec3::new(
            rng.f64_range(world.min_x, world.max_x),
            pose.pos.y,
            rng.f64_range(world.min_z, world.max_z),
        );
        if cand.dist_xz(pose.pos) >= min_distance_m {
            pos = Some(cand);
            break;
        }
    }
    let c = world.center();
    let pos = pos.unwrap_or_else(|| {
        world.clamp(Vec3::new(
            2.0 * c.x - pose.pos.x,
            pose.pos.y,
            2.0 * c.z - pose.pos.z,
        ))
    });
    Some(Step {
        pose: Pose {
            pos,
            yaw: rng.f64_range(0.0, TAU),
        },
        teleported: true,
    })
}

/// A behaviour with its parameters (what one bot does, for the whole run).
#[derive(Clone, Debug, PartialEq)]
pub enum Behaviour {
    /// [`random_walk`].
    RandomWalk {
        /// Largest turn per step, radians.
        turn_rad_max: f64,
    },
    /// [`waypoints`], cyclic.
    Waypoints {
        /// The route.
        points: Vec<Vec3>,
    },
    /// [`border_walk`].
    BorderWalk(BorderLine),
    /// [`hotspot`], converging for half of each period.
    Hotspot {
        /// The point everyone meets at.
        spot: Spot,
        /// Converge-then-disperse period, seconds.
        period_s: f64,
    },
    /// A random walk with [`teleport`] jumps.
    Teleport {
        /// Chance of a jump per step.
        p: f64,
        /// Shortest jump, metres.
        min_distance_m: f64,
    },
}

/// One bot: pose, speed, behaviour and the behaviour's small state.
#[derive(Clone, Debug, PartialEq)]
pub struct Bot {
    /// Where it is.
    pub pose: Pose,
    /// Walking speed, metres per second.
    pub speed_mps: f64,
    /// What it does.
    pub behaviour: Behaviour,
    /// Next waypoint index (waypoint bots only).
    pub next_waypoint: usize,
}

impl Bot {
    /// Advances the bot by `dt_s` seconds at time `t_s`; returns the step
    /// (its pose is also stored in `self.pose`).
    pub fn step(&mut self, rng: &mut Rng, world: &Rect, t_s: f64, dt_s: f64) -> Step {
        let (pose, speed) = (self.pose, self.speed_mps);
        let step = match &self.behaviour {
            Behaviour::RandomWalk { turn_rad_max } => {
                random_walk(rng, pose, speed, *turn_rad_max, world, dt_s)
            }
            Behaviour::Waypoints { points } => {
                let (step, next) = waypoints(pose, speed, points, self.next_waypoint, world, dt_s);
                self.next_waypoint = next;
                step
            }
            Behaviour::BorderWalk(line) => border_walk(pose, speed, line, world, dt_s),
            Behaviour::Hotspot { spot, period_s } => {
                let conv = hotspot_converging(t_s, *period_s);
                hotspot(rng, pose, speed, spot, conv, world, dt_s)
            }
            Behaviour::Teleport { p, min_distance_m } => {
                teleport(rng, pose, *p, *min_distance_m, world)
                    .unwrap_or_else(|| random_walk(rng, pose, speed, PI / 4.0, world, dt_s))
            }
        };
        debug_assert!(world.contains_closed(step.pose.pos), "bot left the world");
        self.pose = step.pose;
        step
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WORLD: Rect = Rect {
        min_x: 0.0,
        min_z: 0.0,
        max_x: 100.0,
        max_z: 50.0,
    };

    fn at(x: f64, z: f64, yaw: f64) -> Pose {
        Pose {
            pos: Vec3::ground(x, z),
            yaw,
        }
    }

    fn run(mut bot: Bot, seed: u64, steps: usize) -> Vec<Step> {
        let mut rng = Rng::new(seed);
        (0..steps)
            .map(|i| bot.step(&mut rng, &WORLD, i as f64 * 0.1, 0.1))
            .collect()
    }

    fn all_behaviours() -> Vec<Behaviour> {
        vec![
            Behaviour::RandomWalk { turn_rad_max: 0.5 },
            Behaviour::Waypoints {
                points: vec![Vec3::ground(10.0, 10.0), Vec3::ground(90.0, 40.0)],
            },
            Behaviour::BorderWalk(BorderLine {
                line_x: 50.0,
                amplitude_m: 5.0,
                drift_mps: 1.0,
            }),
            Behaviour::Hotspot {
                spot: Spot {
                    center: Vec3::ground(30.0, 30.0),
                    radius_m: 3.0,
                },
                period_s: 20.0,
            },
            Behaviour::Teleport {
                p: 0.05,
                min_distance_m: 40.0,
            },
        ]
    }

    #[test]
    fn reflect_folds_into_range() {
        assert_eq!(reflect(5.0, 0.0, 10.0), (5.0, false));
        assert_eq!(reflect(12.0, 0.0, 10.0), (8.0, true));
        assert_eq!(reflect(-3.0, 0.0, 10.0), (3.0, true));
        assert_eq!(reflect(23.0, 0.0, 10.0), (3.0, false));
        let (pos, yaw) = advance_reflect(Vec3::ground(99.0, 25.0), PI / 2.0, 3.0, &WORLD);
        assert!((pos.x - 98.0).abs() < 1e-9 && (pos.z - 25.0).abs() < 1e-9);
        assert!((yaw - 3.0 * PI / 2.0).abs() < 1e-9, "now facing -x: {yaw}");
    }

    #[test]
    fn every_behaviour_stays_in_the_world_and_is_deterministic() {
        for (i, behaviour) in all_behaviours().into_iter().enumerate() {
            let bot = Bot {
                pose: at(50.0, 25.0, 1.0),
                speed_mps: 30.0,
                behaviour,
                next_waypoint: 0,
            };
            let a = run(bot.clone(), i as u64, 2_000);
            assert_eq!(a, run(bot, i as u64, 2_000));
            for s in &a {
                assert!(WORLD.contains_closed(s.pose.pos), "{i}: {:?}", s.pose);
                assert!((0.0..TAU).contains(&s.pose.yaw));
            }
        }
    }

    #[test]
    fn walks_move_at_most_speed_times_dt() {
        let mut rng = Rng::new(9);
        let mut pose = at(50.0, 25.0, 0.0);
        for _ in 0..1_000 {
            let s = random_walk(&mut rng, pose, 10.0, 1.0, &WORLD, 0.1);
            assert!(s.pose.pos.dist_xz(pose.pos) <= 1.0 + 1e-9);
            assert!(!s.teleported);
            pose = s.pose;
        }
    }

    #[test]
    fn border_walker_crosses_its_line_within_the_amplitude() {
        let line = BorderLine {
            line_x: 50.0,
            amplitude_m: 5.0,
            drift_mps: 0.5,
        };
        let mut pose = at(50.0, 25.0, 0.3);
        let (mut crossings, mut side) = (0, pose.pos.x >= 50.0);
        for _ in 0..1_000 {
            pose = border_walk(pose, 2.0, &line, &WORLD, 0.1).pose;
            assert!((45.0..=55.0).contains(&pose.pos.x), "{pose:?}");
            if (pose.pos.x >= 50.0) != side {
                crossings += 1;
                side = !side;
            }
        }
        assert!(crossings >= 15, "crossings = {crossings}");
        assert!(pose.pos.z != 25.0, "drifted along the border");
    }

    #[test]
    fn hotspot_converges_then_disperses() {
        let mut rng = Rng::new(4);
        let center = Vec3::ground(30.0, 30.0);
        let spot = Spot {
            center,
            radius_m: 3.0,
        };
        let mut pose = at(90.0, 5.0, 0.0);
        for _ in 0..500 {
            pose = hotspot(&mut rng, pose, 5.0, &spot, true, &WORLD, 0.1).pose;
        }
        assert!(pose.pos.dist_xz(center) <= 4.0, "{pose:?}");
        for _ in 0..50 {
            pose = hotspot(&mut rng, pose, 5.0, &spot, false, &WORLD, 0.1).pose;
        }
        assert!(pose.pos.dist_xz(center) > 10.0, "{pose:?}");
        assert!(hotspot_converging(1.0, 10.0) && !hotspot_converging(6.0, 10.0));
    }

    #[test]
    fn teleport_jumps_far_and_is_marked() {
        let mut rng = Rng::new(2);
        let pose = at(10.0, 10.0, 0.0);
        assert_eq!(teleport(&mut rng, pose, 0.0, 40.0, &WORLD), None);
        for _ in 0..100 {
            let s = teleport(&mut rng, pose, 1.0, 40.0, &WORLD).expect("p = 1");
            assert!(s.teleported);
            assert!(WORLD.contains_closed(s.pose.pos));
            assert!(s.pose.pos.dist_xz(pose.pos) >= 40.0, "{s:?}");
        }
    }

    #[test]
    fn waypoints_are_reached_in_order() {
        let points = [Vec3::ground(10.0, 10.0), Vec3::ground(20.0, 10.0)];
        let mut pose = at(0.0, 0.0, 0.0);
        let mut next = 0;
        let mut reached = Vec::new();
        for _ in 0..200 {
            let (s, n) = waypoints(pose, 5.0, &points, next, &WORLD, 0.1);
            if n != next {
                reached.push(next);
            }
            pose = s.pose;
            next = n;
        }
        assert!(
            reached.len() >= 3 && reached[..3] == [0, 1, 0],
            "{reached:?}"
        );
    }
}
