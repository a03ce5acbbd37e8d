//! Bot behaviours of a benchmark run: where each bot starts, how it moves
//! and when it attacks.
//!
//! Owns the scenario choice (`--scenario`), the size of a world that puts
//! about `--in-view` entities in each bot's area of interest
//! ([`auto_world`]), and the per-bot [`Bot`] built from the simulator's
//! movement functions ([`tessera::sim::bots`]), so `loadgen` and `tessera
//! sim` move bots the same way. A bot starts where the server spawned it
//! and first walks into its scenario's area ([`step`]) if it is outside.
//! Pure math: no sockets, no clocks.

use std::f64::consts::PI;
use std::time::Duration;

use tessera::core::geom::{Rect, Vec3};
use tessera::sim::bots::{yaw_of, Behaviour, BorderLine, Bot, Pose, Spot, Step};
use tessera::sim::rng::Rng;

/// When a bot's moves fall within its move period (`--move-phase`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MovePhase {
    /// Each bot's first move at its own offset into the period, uniform and
    /// seeded: bots move on clocks of their own, as game clients do.
    Random,
    /// Each bot moves as soon as its own snapshot arrives, then every
    /// period. The snapshot comes in the batch a server tick writes last,
    /// so every move of a bot lands just after a tick read its inputs and
    /// waits most of a tick: the update latency measured is the worst
    /// phase's, for every bot (the behaviour before `random`).
    Spawn,
}

/// What the bots do (`--scenario`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    /// Random walk inside the arena.
    RandomWalk,
    /// Cyclic routes through four random points of the arena.
    Waypoints,
    /// The crowd converges on the arena's centre, then disperses (forces
    /// splits and dense areas of interest).
    Hotspot,
    /// Back and forth across a cell border (tests migration hysteresis).
    BorderPatrol,
    /// Random walk with jumps to far points of the arena.
    Teleport,
    /// Random walk; each bot hops (`--space-rate` per second) into a town
    /// or a dungeon by type and later back to the world.
    Spaces,
}

/// Parameters of a scenario (from the command line and the server config).
#[derive(Clone, Debug, PartialEq)]
pub struct ScenarioParams {
    /// What the bots do.
    pub scenario: Scenario,
    /// Walking speed, metres per second.
    pub speed_mps: f64,
    /// Moves sent per second per bot.
    pub move_hz: f64,
    /// Where the bots live (the world's bounds).
    pub arena: Rect,
    /// Border patrol: the cell border `x = border_x` the bots cross.
    pub border_x: f64,
    /// Border patrol: swing to either side of the border, metres.
    pub border_amplitude_m: f64,
    /// Hotspot: converge-then-disperse period, seconds.
    pub hotspot_period_s: f64,
    /// Teleport: jumps per bot per second.
    pub teleports_per_s: f64,
    /// Seed of every bot's random stream.
    pub seed: u64,
    /// When each bot's moves fall within its period.
    pub move_phase: MovePhase,
}

/// A world holding `bots` so that about `in_view` others are within
/// `aoi_radius_m` of each (area `bots * pi r^2 / in_view`), with room for
/// cells of side `min_cell_side_m`: a square with room for 4 cells when the
/// area allows, else `2 x min_cell_side_m` wide with room for 2. Returns
/// `(width, depth, cells it has room for)` (the border scenarios' layout).
pub fn auto_world(
    bots: u32,
    in_view: f64,
    aoi_radius_m: f64,
    min_cell_side_m: f64,
) -> (f64, f64, u32) {
    let area = f64::from(bots.max(1)) * PI * aoi_radius_m * aoi_radius_m / in_view.max(1.0);
    let m = min_cell_side_m;
    if area >= 4.0 * m * m {
        let side = area.sqrt().ceil();
        return (side, side, 4);
    }
    let w = 2.0 * m;
    (w, (area / w).max(m).ceil(), 2)
}

/// The hotspot scenario's world: [`auto_world`]'s area, but a square of at
/// least `2 x min_cell_side_m` split into 2 cells, so the cell where the
/// crowd gathers ([`hotspot_center`]) is wide enough to split across the
/// other axis. Returns `(width, depth, initial_cells)`.
pub fn hotspot_world(
    bots: u32,
    in_view: f64,
    aoi_radius_m: f64,
    min_cell_side_m: f64,
) -> (f64, f64, u32) {
    let area = f64::from(bots.max(1)) * PI * aoi_radius_m * aoi_radius_m / in_view.max(1.0);
    let side = area.sqrt().max(2.0 * min_cell_side_m).ceil();
    (side, side, 2)
}

/// Where the hotspot crowd gathers: three quarters along x (inside the
/// right cell of the 2-cell layout, a quarter of the world from its border)
/// and half way along z, i.e. on the line that cell can split on: in the
/// 480 m world of 2,000 bots the cell is 240 x 480 m and its only legal cut
/// (both sides at least `min_cell_side_m`) is z = 240. A crowd far smaller
/// than a cell can only be shared between two shards by a cut through it;
/// at (3/4, 3/4), the old spot, every legal split either moved the whole
/// crowd to the other shard (every real migrating, the hot spot moved, not
/// shared) or none of it, and the policy now refuses both.
pub fn hotspot_center(arena: &Rect) -> Vec3 {
    Vec3::ground(
        arena.min_x + 0.75 * arena.width(),
        arena.min_z + 0.5 * arena.depth(),
    )
}

/// The x of the vertical cell border (a leaf's `max_x` inside the world)
/// nearest to `near_x`; `near_x` itself if there is none.
pub fn nearest_border_x(leaves: &[Rect], world: &Rect, near_x: f64) -> f64 {
    leaves
        .iter()
        .map(|r| r.max_x)
        .filter(|&x| x < world.max_x)
        .min_by(|a, b| (a - near_x).abs().total_cmp(&(b - near_x).abs()))
        .unwrap_or(near_x)
}

impl ScenarioParams {
    /// The rectangle the bots walk in: the arena; for border patrol the
    /// strip `border_x +- border_amplitude_m` over the arena's depth.
    pub fn walk_area(&self, world: &Rect) -> Rect {
        if self.scenario != Scenario::BorderPatrol {
            return self.arena;
        }
        let r = Rect::new(
            self.border_x - self.border_amplitude_m,
            self.arena.min_z,
            self.border_x + self.border_amplitude_m,
            self.arena.max_z,
        );
        r.intersection(world).unwrap_or(*world)
    }

    /// How long bot `i` waits, once spawned, before its first move: with
    /// [`MovePhase::Random`] a fraction of the move period uniform in
    /// `[0, 1)`, deterministic in `seed` and `i` and drawn apart from the
    /// bot's own stream (its walk is the same either way); with
    /// [`MovePhase::Spawn`] none.
    pub fn first_move_after(&self, i: u32) -> Duration {
        match self.move_phase {
            MovePhase::Spawn => Duration::ZERO,
            MovePhase::Random => {
                let mut rng = Rng::new(
                    self.seed
                        ^ 0x5eed_0ff5_e7e7
                        ^ (u64::from(i) + 1).wrapping_mul(0xd1b5_4a32_d192_ed03),
                );
                Duration::from_secs_f64(rng.f64_range(0.0, 1.0) * self.move_period_s())
            }
        }
    }

    /// The bot with index `i` and its random stream (deterministic in
    /// `seed` and `i`).
    pub fn bot(&self, world: &Rect, i: u32) -> (Bot, Rng) {
        let mut rng = Rng::new(self.seed ^ (u64::from(i) + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let area = self.walk_area(world);
        let pos = Vec3::ground(
            rng.f64_range(area.min_x, area.max_x),
            rng.f64_range(area.min_z, area.max_z),
        );
        let yaw = rng.f64_range(0.0, 2.0 * PI);
        let behaviour = match self.scenario {
            Scenario::RandomWalk | Scenario::Spaces => Behaviour::RandomWalk {
                turn_rad_max: PI / 8.0,
            },
            Scenario::Waypoints => Behaviour::Waypoints {
                points: (0..4)
                    .map(|_| {
                        Vec3::ground(
                            rng.f64_range(area.min_x, area.max_x),
                            rng.f64_range(area.min_z, area.max_z),
                        )
                    })
                    .collect(),
            },
            Scenario::Hotspot => Behaviour::Hotspot {
                spot: Spot {
                    center: hotspot_center(&area),
                    radius_m: 5.0,
                },
                period_s: self.hotspot_period_s,
            },
            Scenario::BorderPatrol => Behaviour::BorderWalk(BorderLine {
                line_x: self.border_x,
                amplitude_m: self.border_amplitude_m,
                drift_mps: self.speed_mps * rng.f64_range(0.1, 0.5),
            }),
            Scenario::Teleport => Behaviour::Teleport {
                p: (self.teleports_per_s / self.move_hz.max(1e-9)).clamp(0.0, 1.0),
                min_distance_m: area.width().min(area.depth()) / 3.0,
            },
        };
        let bot = Bot {
            pose: Pose { pos, yaw },
            speed_mps: self.speed_mps,
            behaviour,
            next_waypoint: 0,
        };
        (bot, rng)
    }

    /// Seconds between two moves of one bot.
    pub fn move_period_s(&self) -> f64 {
        1.0 / self.move_hz.max(1e-3)
    }
}

/// One move of `bot` in `area`: its behaviour when it is inside `area`,
/// else a straight walk at its speed towards the nearest point of `area`
/// (a bot spawned elsewhere walks in; it never jumps).
pub fn step(bot: &mut Bot, rng: &mut Rng, area: &Rect, t_s: f64, dt_s: f64) -> Step {
    let pos = bot.pose.pos;
    if area.contains_closed(pos) {
        return bot.step(rng, area, t_s, dt_s);
    }
    let target = area.clamp(pos);
    let dist = pos.dist_xz(target);
    let d = (bot.speed_mps * dt_s).min(dist);
    let yaw = yaw_of(target.x - pos.x, target.z - pos.z);
    let k = if dist > 0.0 { d / dist } else { 0.0 };
    let next = Vec3::new(
        pos.x + (target.x - pos.x) * k,
        pos.y,
        pos.z + (target.z - pos.z) * k,
    );
    bot.pose = Pose { pos: next, yaw };
    Step {
        pose: bot.pose,
        teleported: false,
    }
}

/// Whether a bot attacks on this move: `attack_rate` hits per second,
/// one draw per move of `move_period_s`.
pub fn wants_attack(rng: &mut Rng, attack_rate: f64, move_period_s: f64) -> bool {
    attack_rate > 0.0 && rng.bool((attack_rate * move_period_s).min(1.0))
}

/// Which of `n` visible entities to hit (uniform), `None` if there are none.
pub fn pick_target(rng: &mut Rng, n: usize) -> Option<usize> {
    (n > 0).then(|| rng.index(n))
}

/// The cells of a layout, for the client-side estimate of migrations: a bot
/// is "in" the cell its position is more than `margin_m` inside, and keeps
/// its cell while it stays within the margin of it (the server's hysteresis).
#[derive(Clone, Debug, PartialEq)]
pub struct CellMap {
    cells: Vec<Rect>,
    margin_m: f64,
}

impl CellMap {
    /// The layout `cells` with the migration margin `margin_m`.
    pub fn new(cells: Vec<Rect>, margin_m: f64) -> Self {
        CellMap { cells, margin_m }
    }

    /// Cells in the map.
    pub fn len(&self) -> usize {
        self.cells.len()
    }

    /// True with no cell.
    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }

    /// The cell holding `pos` (half-open rects), if any.
    pub fn cell_of(&self, pos: Vec3) -> Option<usize> {
        self.cells.iter().position(|r| r.contains(pos))
    }

    /// The cell a bot is in after moving to `pos`, given it was in `home`:
    /// `home` while `pos` is within the margin of it, else the cell of `pos`.
    pub fn track(&self, home: Option<usize>, pos: Vec3) -> Option<usize> {
        match home {
            Some(h) if self.cells[h].inflate(self.margin_m).contains_closed(pos) => Some(h),
            _ => self.cell_of(pos),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WORLD: Rect = Rect {
        min_x: 0.0,
        min_z: 0.0,
        max_x: 4096.0,
        max_z: 4096.0,
    };

    fn params(scenario: Scenario) -> ScenarioParams {
        ScenarioParams {
            scenario,
            speed_mps: 5.0,
            move_hz: 10.0,
            arena: WORLD,
            border_x: 2048.0,
            border_amplitude_m: 20.0,
            hotspot_period_s: 30.0,
            teleports_per_s: 0.1,
            seed: 7,
            move_phase: MovePhase::Random,
        }
    }

    #[test]
    fn random_move_phases_spread_over_the_period_and_spawn_phases_do_not() {
        let random = params(Scenario::RandomWalk);
        let period = Duration::from_secs_f64(random.move_period_s());
        let waits: Vec<Duration> = (0..1000).map(|i| random.first_move_after(i)).collect();
        assert!(waits.iter().all(|w| *w < period), "within one period");
        // Deterministic in the seed and the index; another seed, other phases.
        assert_eq!(waits[17], random.first_move_after(17));
        let other = ScenarioParams {
            seed: 8,
            ..random.clone()
        };
        assert_ne!(waits[17], other.first_move_after(17));
        // Spread: every tenth of the period holds some bots (a uniform draw
        // puts about 100 in each).
        let mut tenths = [0u32; 10];
        for w in &waits {
            tenths[(w.as_secs_f64() / period.as_secs_f64() * 10.0) as usize] += 1;
        }
        assert!(
            tenths.iter().all(|&n| (60..=140).contains(&n)),
            "{tenths:?}"
        );
        let spawn = ScenarioParams {
            move_phase: MovePhase::Spawn,
            ..random
        };
        assert!((0..100).all(|i| spawn.first_move_after(i).is_zero()));
    }

    #[test]
    fn auto_worlds_give_the_asked_view() {
        for bots in [300, 1_000, 2_000, 5_000, 10_000] {
            let (w, d, cells) = auto_world(bots, 60.0, 45.0, 240.0);
            assert!(w >= 480.0 && d >= 240.0, "{bots}: {w} x {d}");
            assert!(
                cells == 4 || d < 480.0,
                "{bots}: {cells} cells in {w} x {d}"
            );
            let in_view = f64::from(bots) / (w * d) * PI * 45.0 * 45.0;
            if bots >= 2_000 {
                assert!((in_view - 60.0).abs() < 1.0, "{bots}: {in_view}");
            } else {
                assert!(in_view < 60.0, "{bots}: the minimum world is less dense");
            }
        }
        assert_eq!(auto_world(10_000, 60.0, 45.0, 240.0).2, 4);
    }

    #[test]
    fn the_hotspot_gathers_inside_a_splittable_cell() {
        let (w, d, cells) = hotspot_world(2_000, 60.0, 45.0, 240.0);
        assert_eq!((w, d, cells), (480.0, 480.0, 2));
        let c = hotspot_center(&Rect::new(0.0, 0.0, w, d));
        // 2 cells: x < 240 and x >= 240; the crowd is inside the right one,
        // on the line it splits on (z = 240), so a split shares it.
        assert!(c.x > 240.0 + 45.0 && c.x < w - 45.0, "{c:?}");
        assert_eq!(c.z, 240.0);
        let big = hotspot_world(20_000, 60.0, 45.0, 240.0);
        assert!(big.0 > 480.0 && big.0 == big.1, "{big:?}");
    }

    #[test]
    fn a_bot_outside_its_area_walks_in() {
        let p = params(Scenario::BorderPatrol);
        let strip = p.walk_area(&WORLD);
        let (mut bot, mut rng) = p.bot(&WORLD, 1);
        bot.pose.pos = Vec3::ground(1000.0, 300.0);
        let mut prev = bot.pose.pos;
        for k in 0..10_000 {
            let s = step(&mut bot, &mut rng, &strip, f64::from(k) * 0.1, 0.1);
            // Border walkers also drift along the border (up to half the speed).
            assert!(s.pose.pos.dist_xz(prev) <= 0.5 * 1.12, "walked, not jumped");
            prev = s.pose.pos;
        }
        assert!(strip.contains_closed(prev), "{prev:?}");
    }

    #[test]
    fn bots_start_in_their_area_and_are_deterministic() {
        for s in [
            Scenario::RandomWalk,
            Scenario::Waypoints,
            Scenario::Hotspot,
            Scenario::BorderPatrol,
            Scenario::Teleport,
            Scenario::Spaces,
        ] {
            let p = params(s);
            let area = p.walk_area(&WORLD);
            for i in 0..50 {
                let (mut a, mut ra) = p.bot(&WORLD, i);
                let (mut b, mut rb) = p.bot(&WORLD, i);
                assert!(area.contains_closed(a.pose.pos), "{s:?} {i}");
                for k in 0..100 {
                    let t = f64::from(k) * 0.1;
                    let sa = a.step(&mut ra, &area, t, 0.1);
                    assert_eq!(sa, b.step(&mut rb, &area, t, 0.1));
                    assert!(area.contains_closed(sa.pose.pos), "{s:?} left its area");
                }
            }
        }
    }

    #[test]
    fn border_patrol_strip_straddles_the_border() {
        let p = params(Scenario::BorderPatrol);
        let strip = p.walk_area(&WORLD);
        assert_eq!((strip.min_x, strip.max_x), (2028.0, 2068.0));
        assert_eq!((strip.min_z, strip.max_z), (0.0, 4096.0));
        let (mut bot, mut rng) = p.bot(&WORLD, 3);
        let mut sides = [false, false];
        for k in 0..200 {
            let s = bot.step(&mut rng, &strip, f64::from(k) * 0.1, 0.1);
            sides[usize::from(s.pose.pos.x >= 2048.0)] = true;
        }
        assert_eq!(sides, [true, true], "walked both sides");
    }

    #[test]
    fn border_is_the_nearest_inner_leaf_edge() {
        let leaves = [
            Rect::new(0.0, 0.0, 2048.0, 4096.0),
            Rect::new(2048.0, 0.0, 4096.0, 4096.0),
        ];
        assert_eq!(nearest_border_x(&leaves, &WORLD, 100.0), 2048.0);
        assert_eq!(nearest_border_x(&leaves[1..], &WORLD, 100.0), 100.0);
    }

    #[test]
    fn attack_rate_is_hits_per_second() {
        let mut rng = Rng::new(1);
        let n = (0..100_000)
            .filter(|_| wants_attack(&mut rng, 0.5, 0.1))
            .count();
        assert!((4_500..5_500).contains(&n), "{n}");
        assert!(!wants_attack(&mut rng, 0.0, 0.1));
        assert_eq!(pick_target(&mut rng, 0), None);
        assert!(pick_target(&mut rng, 3).is_some_and(|i| i < 3));
    }

    #[test]
    fn cell_map_keeps_the_home_cell_within_the_margin() {
        let m = CellMap::new(
            vec![
                Rect::new(0.0, 0.0, 100.0, 100.0),
                Rect::new(100.0, 0.0, 200.0, 100.0),
            ],
            8.0,
        );
        let home = m.track(None, Vec3::ground(90.0, 50.0));
        assert_eq!(home, Some(0));
        assert_eq!(m.track(home, Vec3::ground(105.0, 50.0)), Some(0));
        assert_eq!(m.track(home, Vec3::ground(109.0, 50.0)), Some(1));
        assert_eq!(m.track(Some(1), Vec3::ground(93.0, 50.0)), Some(1));
        assert_eq!(m.track(Some(1), Vec3::ground(91.0, 50.0)), Some(0));
    }
}
