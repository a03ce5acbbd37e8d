//! Shared helpers for tessera's benchmarks (`bench/benches/*.rs`).
//!
//! Every benchmark reports its figures next to a baseline measured in the same
//! process, because this machine is shared and noisy: absolute numbers drift
//! between runs, ratios measured back to back do not.
//!
//! # AOI reference workload
//!
//! [`SplitMix64`], [`Workload`], [`Walkers`] and [`drive`] implement the AOI
//! reference workload (`/work/shared/bench/aoi-workload.txt`) exactly: the RNG,
//! the order of the draws, the reflection at the world edges and the step of
//! `S * dt = 0.5` m. [`REFERENCES`] holds the published checksums, positions
//! and event counts. The `aoi` bench and this crate's tests share them.

pub mod alloc_count;
pub mod clients;
pub mod cost;

use std::time::Instant;
use tessera::core::aoi::{AoiEvent, AoiIndex, AoiParams, AreaSpec, EventKind};
use tessera::core::geom::{Rect, Vec3};
use tessera::core::ids::EntityId;

/// SplitMix64 with wrapping u64 arithmetic, as the workload specifies.
#[derive(Clone, Debug)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator whose state starts at `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)` from the top 53 bits.
    #[inline]
    pub fn u01(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// The step of one entity per tick, `S * dt` (exactly 0.5 m).
pub const STEP_M: f64 = 5.0 * 0.1;
/// `2 * PI`; the workload writes it `6.283185307179586`, the same `f64`.
pub const TAU: f64 = std::f64::consts::TAU;

/// One configuration of the reference workload.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Workload {
    /// Name (`a`, `b`, `c`).
    pub name: &'static str,
    /// Side of the square world, metres.
    pub side_m: f64,
    /// Entities.
    pub n: usize,
    /// Area radius, metres.
    pub radius_m: f64,
    /// Timed ticks.
    pub ticks: u32,
    /// RNG seed.
    pub seed: u64,
}

/// The three published configurations.
pub const CONFIGS: [Workload; 3] = [
    Workload {
        name: "a",
        side_m: 2000.0,
        n: 5000,
        radius_m: 50.0,
        ticks: 600,
        seed: 42,
    },
    Workload {
        name: "b",
        side_m: 2000.0,
        n: 20000,
        radius_m: 50.0,
        ticks: 600,
        seed: 42,
    },
    Workload {
        name: "c",
        side_m: 500.0,
        n: 5000,
        radius_m: 30.0,
        ticks: 600,
        seed: 42,
    },
];

/// Published reference values of one configuration (circle areas).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Reference {
    /// Sum over entities of `x + 3 z` after the last tick.
    pub checksum: f64,
    /// Entity 0 after placement.
    pub placed0: (f64, f64),
    /// Entity 1 after placement.
    pub placed1: (f64, f64),
    /// Entity 0 after the last tick.
    pub pos0: (f64, f64),
    /// The last entity after the last tick.
    pub pos_last: (f64, f64),
    /// Directed interest pairs after tick 0.
    pub pairs_tick0: u64,
    /// Directed interest pairs after the last tick.
    pub pairs_end: u64,
    /// Enter events summed over ticks 1..=T.
    pub enters: u64,
    /// Leave events summed over ticks 1..=T.
    pub leaves: u64,
}

const PLACED_2000: [(f64, f64); 2] = [
    (1483.129757543647, 319.820785753840),
    (557.202260510277, 688.381433047275),
];
const PLACED_500: [(f64, f64); 2] = [
    (370.782439385912, 79.955196438460),
    (139.300565127569, 172.095358261819),
];

/// Reference values of [`CONFIGS`], same order, digits as published.
#[allow(clippy::excessive_precision)]
pub const REFERENCES: [Reference; 3] = [
    Reference {
        checksum: 20175328.012219001,
        placed0: PLACED_2000[0],
        placed1: PLACED_2000[1],
        pos0: (1482.299923388852, 317.962714750080),
        pos_last: (1512.969731076903, 773.107225520993),
        pairs_tick0: 48368,
        pairs_end: 48346,
        enters: 231134,
        leaves: 231156,
    },
    Reference {
        checksum: 80287686.929809421,
        placed0: PLACED_2000[0],
        placed1: PLACED_2000[1],
        pos0: (1477.918601243025, 316.878734048692),
        pos_last: (1834.082433190294, 449.206295537949),
        pairs_tick0: 769018,
        pairs_end: 769800,
        enters: 3707414,
        leaves: 3706632,
    },
    Reference {
        checksum: 5044170.531966010,
        placed0: PLACED_500[0],
        placed1: PLACED_500[1],
        pos0: (369.952605231117, 78.097125434700),
        pos_last: (377.430355056476, 193.454461967260),
        pairs_tick0: 268086,
        pairs_end: 267520,
        enters: 2114650,
        leaves: 2115216,
    },
];

/// The entities' ground positions and the RNG that moves them.
#[derive(Clone, Debug)]
pub struct Walkers {
    /// x of entity i.
    pub xs: Vec<f64>,
    /// z of entity i.
    pub zs: Vec<f64>,
    rng: SplitMix64,
    side_m: f64,
}

impl Walkers {
    /// Placement: for each entity in order, `x` then `z`, uniform in `[0, L)`.
    pub fn place(w: &Workload) -> Self {
        let mut rng = SplitMix64::new(w.seed);
        let (mut xs, mut zs) = (Vec::with_capacity(w.n), Vec::with_capacity(w.n));
        for _ in 0..w.n {
            xs.push(rng.u01() * w.side_m);
            zs.push(rng.u01() * w.side_m);
        }
        Walkers {
            xs,
            zs,
            rng,
            side_m: w.side_m,
        }
    }

    /// Moves entity `i` one step in a random direction, reflecting at the
    /// edges; returns its new position.
    #[inline]
    pub fn step(&mut self, i: usize) -> (f64, f64) {
        let theta = self.rng.u01() * TAU;
        let l = self.side_m;
        let mut x = self.xs[i] + STEP_M * theta.cos();
        let mut z = self.zs[i] + STEP_M * theta.sin();
        if x < 0.0 {
            x = -x;
        }
        if x > l {
            x = 2.0 * l - x;
        }
        if z < 0.0 {
            z = -z;
        }
        if z > l {
            z = 2.0 * l - z;
        }
        self.xs[i] = x;
        self.zs[i] = z;
        (x, z)
    }

    /// `sum(x + 3 z)` in id order.
    pub fn checksum(&self) -> f64 {
        self.xs
            .iter()
            .zip(&self.zs)
            .fold(0.0, |s, (x, z)| s + (x * 1.0 + z * 3.0))
    }
}

/// AOI parameters for a workload with grid cell `cell_m`.
pub fn params_for(w: &Workload, cell_m: f64) -> AoiParams {
    AoiParams {
        world: Rect::new(0.0, 0.0, w.side_m, w.side_m),
        grid_cell_m: cell_m,
        max_entities: w.n,
        max_areas: w.n,
        max_areas_per_entity: 1,
        ..AoiParams::default()
    }
}

/// Tick 0: inserts every entity (flags 1) with one circle area, in id
/// order, then one update. Returns the enter events (the directed pairs).
///
/// # Panics
/// When the index refuses the setup.
pub fn setup<A: AoiIndex>(
    aoi: &mut A,
    walkers: &Walkers,
    w: &Workload,
    ev: &mut Vec<AoiEvent>,
) -> u64 {
    for i in 0..w.n {
        let id = EntityId(i as u64);
        aoi.add_entity(id, Vec3::ground(walkers.xs[i], walkers.zs[i]), 1)
            .expect("add entity");
        aoi.add_area(id, AreaSpec::circle(w.radius_m))
            .expect("add area");
    }
    aoi.update(ev);
    assert!(ev.iter().all(|e| e.kind == EventKind::Enter));
    ev.len() as u64
}

/// What [`drive`] measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunStats {
    /// Enter events per tick, ticks 1..=T.
    pub enters: Vec<u64>,
    /// Leave events per tick.
    pub leaves: Vec<u64>,
    /// Directed pairs after the last tick (tick-0 pairs plus the net events).
    pub pairs_end: u64,
    /// Sum over ticks of the pairs after that tick (for the mean set size).
    pub pairs_sum: u64,
    /// Wall time of the ticks, seconds.
    pub secs: f64,
    /// CPU time of the ticks (this thread), seconds.
    pub cpu_secs: f64,
}

/// Runs `ticks` timed ticks: every entity steps and is reported to the index,
/// then one update; counts the events.
///
/// # Panics
/// When the index refuses a position (it never should: they are finite).
pub fn drive<A: AoiIndex>(
    aoi: &mut A,
    walkers: &mut Walkers,
    ticks: u32,
    pairs0: u64,
    ev: &mut Vec<AoiEvent>,
) -> RunStats {
    let n = walkers.xs.len();
    let mut st = RunStats {
        enters: Vec::with_capacity(ticks as usize),
        leaves: Vec::with_capacity(ticks as usize),
        ..RunStats::default()
    };
    let mut pairs = pairs0;
    let (t0, c0) = (Instant::now(), thread_cpu_secs());
    for _ in 0..ticks {
        for i in 0..n {
            let (x, z) = walkers.step(i);
            aoi.set_position(EntityId(i as u64), Vec3::ground(x, z))
                .expect("finite position");
        }
        aoi.update(ev);
        let enters = ev.iter().filter(|e| e.kind == EventKind::Enter).count() as u64;
        let leaves = ev.len() as u64 - enters;
        pairs = pairs + enters - leaves;
        st.pairs_sum += pairs;
        st.enters.push(enters);
        st.leaves.push(leaves);
    }
    st.secs = t0.elapsed().as_secs_f64();
    st.cpu_secs = thread_cpu_secs() - c0;
    st.pairs_end = pairs;
    st
}

#[repr(C)]
struct Timespec {
    tv_sec: i64,
    tv_nsec: i64,
}

extern "C" {
    fn clock_gettime(clock: i32, tp: *mut Timespec) -> i32;
}

/// CPU time consumed by the calling thread, seconds (Linux
/// `CLOCK_THREAD_CPUTIME_ID`). On this shared machine it is steadier than
/// wall time, which also counts the time other processes hold the core.
pub fn thread_cpu_secs() -> f64 {
    const CLOCK_THREAD_CPUTIME_ID: i32 = 3;
    let mut ts = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the call only writes it.
    let rc = unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime");
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// The walk alone (RNG, trig, reflection) for `ticks` ticks, no index:
/// the floor under any AOI's moves/s. Returns (wall, cpu) seconds.
pub fn walk_only(w: &Workload, ticks: u32) -> (f64, f64) {
    let mut walkers = Walkers::place(w);
    let (t0, c0) = (Instant::now(), thread_cpu_secs());
    let mut sink = 0.0;
    for _ in 0..ticks {
        for i in 0..w.n {
            let (x, z) = walkers.step(i);
            sink += x + z;
        }
    }
    std::hint::black_box(sink);
    (t0.elapsed().as_secs_f64(), thread_cpu_secs() - c0)
}

/// True when `a` and `b` agree to `tol` (absolute).
pub fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol
}

/// Clock ticks per second, the unit of `utime` and `stime` in `/proc`
/// stat files (`sysconf(_SC_CLK_TCK)`; 100 if the call fails).
pub fn clock_ticks_per_s() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as f64
    } else {
        100.0
    }
}

/// CPU seconds (`utime + stime`) in a `/proc/.../stat` line whose ticks come
/// at `hz` a second; `None` if the line is not one.
pub fn stat_cpu_s(stat: &str, hz: f64) -> Option<f64> {
    stat_user_sys_s(stat, hz).map(|(u, s)| u + s)
}

/// User and system CPU seconds from a `/proc/PID/stat` line (see
/// [`stat_cpu_s`]).
pub fn stat_user_sys_s(stat: &str, hz: f64) -> Option<(f64, f64)> {
    // Fields 14 and 15 (utime, stime) are 11 and 12 after the comm, which
    // may hold spaces and parentheses: split after its last ')'.
    let (_, after) = stat.rsplit_once(')')?;
    let mut f = after.split_whitespace().skip(11);
    let utime: u64 = f.next()?.parse().ok()?;
    let stime: u64 = f.next()?.parse().ok()?;
    Some((utime as f64 / hz, stime as f64 / hz))
}

/// How many times faster the measured runs are than the baseline's: the
/// best run of each, so both sides get the same chance to dodge the noise
/// of a shared machine (0 if either side has no positive rate).
pub fn speedup(rates: &[f64], base_rates: &[f64]) -> f64 {
    let best = |r: &[f64]| r.iter().copied().fold(0.0, f64::max);
    let (a, b) = (best(rates), best(base_rates));
    if a > 0.0 && b > 0.0 {
        a / b
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera::core::aoi::{AreaId, BruteAoi, GridAoi};

    #[test]
    #[allow(clippy::approx_constant)]
    fn tau_is_the_published_constant() {
        assert_eq!(TAU.to_bits(), 6.283185307179586f64.to_bits());
    }

    #[test]
    fn placement_matches_the_reference() {
        for (w, r) in CONFIGS.iter().zip(&REFERENCES) {
            let short = Workload { n: 2, ..*w };
            let p = Walkers::place(&short);
            assert!(
                close(p.xs[0], r.placed0.0, 1e-9) && close(p.zs[0], r.placed0.1, 1e-9),
                "{}",
                w.name
            );
            assert!(
                close(p.xs[1], r.placed1.0, 1e-9) && close(p.zs[1], r.placed1.1, 1e-9),
                "{}",
                w.name
            );
        }
    }

    /// A short config c (fewer entities and ticks): the grid's event counts,
    /// pairs and checksum must equal the brute-force oracle's.
    #[test]
    fn short_config_c_matches_the_oracle() {
        let w = Workload {
            n: 800,
            ticks: 15,
            ..CONFIGS[2]
        };
        let mut ev = Vec::new();
        let mut wg = Walkers::place(&w);
        let mut grid = GridAoi::new(params_for(&w, w.radius_m)).unwrap();
        let g0 = setup(&mut grid, &wg, &w, &mut ev);
        let gs = drive(&mut grid, &mut wg, w.ticks, g0, &mut ev);
        let mut wb = Walkers::place(&w);
        let mut brute = BruteAoi::new(params_for(&w, w.radius_m)).unwrap();
        let b0 = setup(&mut brute, &wb, &w, &mut ev);
        let bs = drive(&mut brute, &mut wb, w.ticks, b0, &mut ev);
        assert!(g0 > 1000, "a dense world: {g0} pairs");
        assert_eq!(g0, b0);
        assert_eq!(
            (&gs.enters, &gs.leaves, gs.pairs_end),
            (&bs.enters, &bs.leaves, bs.pairs_end)
        );
        assert!(
            gs.enters.iter().sum::<u64>() > 100,
            "the walk changes the sets"
        );
        assert_eq!(wg.checksum().to_bits(), wb.checksum().to_bits());
        // The pairs recount from the sets themselves.
        let (mut sets, mut buf) = (0, Vec::new());
        for a in 1..=w.n as u64 {
            grid.interest(AreaId(a), &mut buf).unwrap();
            sets += buf.len() as u64;
        }
        assert_eq!(sets, gs.pairs_end);
    }

    #[test]
    fn stat_lines_give_cpu_seconds_at_the_clock_rate() {
        let line = "42 (my (odd) comm) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 1";
        assert_eq!(stat_cpu_s(line, 100.0), Some(3.0));
        assert_eq!(stat_cpu_s(line, 250.0), Some(1.2));
        assert_eq!(stat_user_sys_s(line, 100.0), Some((2.5, 0.5)));
        assert_eq!(stat_cpu_s("garbage", 100.0), None);
        assert_eq!(stat_cpu_s("1 (x) S 1 2", 100.0), None);
        assert!(clock_ticks_per_s() > 0.0);
    }

    #[test]
    fn speedup_is_best_against_best() {
        assert_eq!(speedup(&[10.0, 40.0, 20.0], &[1.0, 4.0, 2.0]), 10.0);
        assert_eq!(speedup(&[10.0], &[]), 0.0);
        assert_eq!(speedup(&[], &[1.0]), 0.0);
    }
}
