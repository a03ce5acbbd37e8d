//! Scenarios: what the bots do and what else the world does to the cells.
//!
//! [`ScenarioPlan::new`] turns a [`Scenario`] into starting poses and
//! behaviours for every bot, the rates of the clients' property changes and
//! of the world's cross-entity calls and hits, and, for `MergeDrain`, when which
//! cell merges away and when its slot splits out again.
//!
//! | scenario      | bots                                  | stresses                        |
//! |---------------|---------------------------------------|---------------------------------|
//! | RandomWalk    | wander                                | steady migrations everywhere    |
//! | BorderWalk    | swing across a vertical cell border   | hysteresis, ghost churn         |
//! | Teleport      | wander, now and then jump far         | migrations without a neighbour  |
//! | CombatStorm   | mill about cell corners, call others  | forwarding of calls, sync       |
//! | MergeDrain    | wander; one cell merges, then splits  | draining, fresh leaves          |
//! | Hotspot       | converge on a cell corner, disperse   | crowding, ghost fan-out         |
//! | Crowd         | gather at spot A, then move to B      | splits under, merges behind     |
//! | Swing         | crowd swings between A and B          | boundary oscillation (damping)  |
//!
//! Crowd and swing run on the balanced space tree (`world_balance.rs`).
//!
//! Owns only the plan (plain values); the world carries it out.

use std::f64::consts::{FRAC_PI_4, TAU};

use crate::core::cell::CellParams;
use crate::core::geom::{Rect, Vec3};
use crate::core::ids::CellId;
use crate::sim::bots::{Behaviour, BorderLine, Bot, Pose, Spot};
use crate::sim::options::{Scenario, SimOptions};
use crate::sim::rng::Rng;
use crate::sim::world_layout::SimLayout;

/// When a cell merges away and when its slot comes back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MergePlan {
    /// The cell that drains.
    pub cell: CellId,
    /// The neighbour that takes its area.
    pub into: CellId,
    /// Tick at which the merge starts.
    pub merge_at_tick: u64,
    /// Tick from which the slot splits out again (once the cell retired).
    pub split_at_tick: u64,
}

/// Where the crowd of `Crowd` and `Swing` goes: spot `a` first, then `b`,
/// switching every `switch_every_ticks`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CrowdPlan {
    /// The first gathering place.
    pub a: Spot,
    /// The second.
    pub b: Spot,
    /// Ticks between moves of the crowd (at least 1).
    pub switch_every_ticks: u64,
}

/// Everything scenario-specific about one run.
#[derive(Clone, Debug)]
pub struct ScenarioPlan {
    /// The scenario.
    pub scenario: Scenario,
    /// One bot per entity, entity `i` driven by `bots[i]`.
    pub bots: Vec<Bot>,
    /// Every this many inputs (per client), a client sets its `status`
    /// instead of moving (the game acknowledges every tick's inputs).
    pub change_every_inputs: u64,
    /// Chance per entity per tick that its real calls another entity.
    pub call_probability: f64,
    /// Chance per entity per tick that its real tries a combat hit on an
    /// entity its observer sees (`CombatStorm` only; 0 elsewhere).
    pub hit_probability: f64,
    /// The merge, for `MergeDrain`.
    pub merge: Option<MergePlan>,
    /// The crowd's spots, for `Crowd` and `Swing`.
    pub crowd: Option<CrowdPlan>,
}

impl ScenarioPlan {
    /// Draws the plan from `rng` for `options` on `layout`.
    pub fn new(
        options: &SimOptions,
        layout: &SimLayout,
        params: &CellParams,
        rng: &mut Rng,
    ) -> Self {
        let world = layout.world();
        let n = options.entities as usize;
        let mut plan = ScenarioPlan {
            scenario: options.scenario,
            bots: Vec::with_capacity(n),
            change_every_inputs: 5,
            call_probability: 0.01,
            hit_probability: 0.0,
            merge: None,
            crowd: crowd_plan(options, &world),
        };
        let hot = interior_vertices(layout);
        for _ in 0..n {
            let speed = options.bot_speed_mps * rng.f64_range(0.5, 1.5);
            let bot = match options.scenario {
                Scenario::RandomWalk | Scenario::MergeDrain => wanderer(rng, &world, speed),
                Scenario::BorderWalk => border_walker(rng, &world, layout, params, speed),
                Scenario::Teleport => {
                    let mut b = wanderer(rng, &world, speed);
                    b.behaviour = Behaviour::Teleport {
                        p: 0.01,
                        min_distance_m: layout.side_m(),
                    };
                    b
                }
                Scenario::CombatStorm => fighter(rng, &world, &hot, params, speed),
                Scenario::Crowd | Scenario::Swing => {
                    let a = plan.crowd.expect("crowd scenarios have a plan").a;
                    crowd_member(rng, &world, &a, speed)
                }
                Scenario::Hotspot => {
                    let mut b = wanderer(rng, &world, speed);
                    let center = *rng.choose(&hot).unwrap_or(&world.center());
                    b.behaviour = Behaviour::Hotspot {
                        spot: Spot {
                            center,
                            radius_m: params.ghost_radius_m / 4.0,
                        },
                        period_s: rng.f64_range(10.0, 40.0),
                    };
                    b
                }
            };
            plan.bots.push(bot);
        }
        match options.scenario {
            Scenario::CombatStorm => {
                plan.call_probability = 0.3;
                plan.hit_probability = 0.2;
                plan.change_every_inputs = 2;
            }
            Scenario::MergeDrain => plan.merge = merge_plan(rng, layout, options.ticks),
            _ => {}
        }
        plan
    }
}

/// Grid vertices where four cells meet (or the world's centre if none).
fn interior_vertices(layout: &SimLayout) -> Vec<Vec3> {
    let (nx, nz) = layout.dims();
    let s = layout.side_m();
    let mut v = Vec::new();
    for x in 1..nx {
        for z in 1..nz.max(2) {
            let zz = if nz > 1 { f64::from(z) * s } else { s / 2.0 };
            v.push(Vec3::ground(f64::from(x) * s, zz));
        }
    }
    if v.is_empty() {
        v.push(layout.world().center());
    }
    v
}

fn random_point(rng: &mut Rng, world: &Rect) -> Vec3 {
    Vec3::ground(
        rng.f64_range(world.min_x, world.max_x),
        rng.f64_range(world.min_z, world.max_z),
    )
}

fn wanderer(rng: &mut Rng, world: &Rect, speed: f64) -> Bot {
    Bot {
        pose: Pose {
            pos: random_point(rng, world),
            yaw: rng.f64_range(0.0, TAU),
        },
        speed_mps: speed,
        behaviour: Behaviour::RandomWalk {
            turn_rad_max: FRAC_PI_4,
        },
        next_waypoint: 0,
    }
}

fn border_walker(
    rng: &mut Rng,
    world: &Rect,
    layout: &SimLayout,
    p: &CellParams,
    speed: f64,
) -> Bot {
    let (nx, _) = layout.dims();
    if nx < 2 {
        return wanderer(rng, world, speed);
    }
    let line_x = layout.side_m() * rng.range(1, u64::from(nx) - 1) as f64;
    // Some swing within the migration margin (never migrate), most beyond.
    let amplitude_m = p.migrate_margin_m * rng.f64_range(0.3, 3.0);
    let line = BorderLine {
        line_x,
        amplitude_m,
        drift_mps: rng.f64_range(0.0, 1.0),
    };
    let x = line_x + rng.f64_range(-amplitude_m, amplitude_m);
    let z = rng.f64_range(world.min_z, world.max_z);
    Bot {
        pose: Pose {
            pos: world.clamp(Vec3::ground(x, z)),
            yaw: rng.f64_range(0.0, TAU),
        },
        speed_mps: speed,
        behaviour: Behaviour::BorderWalk(line),
        next_waypoint: 0,
    }
}

fn fighter(rng: &mut Rng, world: &Rect, hot: &[Vec3], p: &CellParams, speed: f64) -> Bot {
    let c = *rng.choose(hot).unwrap_or(&world.center());
    let r = p.ghost_radius_m;
    let points: Vec<Vec3> = (0..4)
        .map(|_| {
            world.clamp(Vec3::ground(
                c.x + rng.f64_range(-r, r),
                c.z + rng.f64_range(-r, r),
            ))
        })
        .collect();
    Bot {
        pose: Pose {
            pos: points[0],
            yaw: 0.0,
        },
        speed_mps: speed,
        behaviour: Behaviour::Waypoints { points },
        next_waypoint: 1,
    }
}

fn crowd_plan(options: &SimOptions, world: &Rect) -> Option<CrowdPlan> {
    let every = match options.scenario {
        Scenario::Crowd => options.ticks / 2,
        Scenario::Swing => options.ticks / 6,
        _ => return None,
    };
    let radius_m = 0.15 * world.width().min(world.depth());
    let at = |f: f64| Spot {
        center: Vec3::ground(
            world.min_x + f * world.width(),
            world.min_z + f * world.depth(),
        ),
        radius_m,
    };
    Some(CrowdPlan {
        a: at(0.3),
        b: at(0.7),
        switch_every_ticks: every.max(1),
    })
}

/// A crowd member: starts within twice the spot's radius of its centre and
/// heads for it (always converging; the world moves the spot).
fn crowd_member(rng: &mut Rng, world: &Rect, spot: &Spot, speed: f64) -> Bot {
    let r = 2.0 * spot.radius_m * rng.f64_range(0.0, 1.0).sqrt();
    let a = rng.f64_range(0.0, TAU);
    let pos = world.clamp(Vec3::ground(
        spot.center.x + r * a.cos(),
        spot.center.z + r * a.sin(),
    ));
    Bot {
        pose: Pose {
            pos,
            yaw: rng.f64_range(0.0, TAU),
        },
        speed_mps: speed,
        behaviour: Behaviour::Hotspot {
            spot: *spot,
            period_s: 0.0,
        },
        next_waypoint: 0,
    }
}

fn merge_plan(rng: &mut Rng, layout: &SimLayout, ticks: u64) -> Option<MergePlan> {
    let n = layout.cell_count();
    if n < 2 {
        return None;
    }
    let cell = CellId(rng.range(0, u64::from(n) - 1) as u32);
    let into = *rng.choose(&layout.side_neighbours(cell))?;
    Some(MergePlan {
        cell,
        into,
        merge_at_tick: ticks / 4,
        split_at_tick: ticks * 3 / 4,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_are_deterministic_and_in_the_world() {
        let layout = SimLayout::new(4, 2, 300.0);
        let params = CellParams::default();
        for sc in Scenario::ALL {
            let options = SimOptions {
                scenario: sc,
                entities: 50,
                ..SimOptions::test_min()
            };
            let a = ScenarioPlan::new(&options, &layout, &params, &mut Rng::new(3));
            let b = ScenarioPlan::new(&options, &layout, &params, &mut Rng::new(3));
            assert_eq!(a.bots, b.bots, "{sc}");
            assert_eq!(a.bots.len(), 50);
            for bot in &a.bots {
                assert!(
                    layout.world().contains_closed(bot.pose.pos),
                    "{sc}: {bot:?}"
                );
            }
            assert_eq!(a.merge.is_some(), sc == Scenario::MergeDrain);
            assert_eq!(a.crowd.is_some(), sc.is_balanced());
        }
    }

    #[test]
    fn merge_plan_picks_side_neighbours() {
        let layout = SimLayout::new(3, 3, 100.0);
        for seed in 0..20 {
            let m = merge_plan(&mut Rng::new(seed), &layout, 100).expect("plan");
            assert!(layout.side_neighbours(m.cell).contains(&m.into));
            assert!(m.merge_at_tick < m.split_at_tick);
        }
        assert_eq!(
            merge_plan(&mut Rng::new(0), &SimLayout::new(1, 1, 10.0), 100),
            None
        );
    }
}
