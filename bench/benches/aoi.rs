//! AOI benchmark: the reference workload (`/work/shared/bench/aoi-workload.txt`)
//! on [`GridAoi`], checked against the published checksums, positions and
//! event counts (aborts loudly on a mismatch), next to a brute-force
//! recompute baseline ([`BruteAoi`]) run in the same process on the first few
//! ticks of the same walk (its rate is moves per second over those ticks).
//!
//! Environment: `AOI_BENCH_REPS` (default 3) repetitions of each grid run
//! and of the baseline, best reported (the grid's with the spread; the
//! speed-up is best against best); `AOI_BENCH_CELL` overrides the grid cell
//! (default: the area radius); `AOI_BENCH_SKIN` overrides the watch-list skin
//! (default `AoiParams::skin_m`); `AOI_BENCH_SWEEP` overrides
//! `AoiParams::sweep_min_interest` (0 always sweeps, a huge value never); `AOI_BENCH_ONLY=a,c` picks configurations.
//! The last line of output is one JSON object.
//!
//! A fourth case, `srv` (`AOI_BENCH_ONLY=srv`), mirrors the server's view
//! workload at 2,000 clients (`loadgen --print-server-sets`, the default
//! `[aoi]` and `[runtime]` config): one area per entity of radius 45 m,
//! leave 48 m, cap 100, a world sized for ~58 entities in each view, 20
//! updates/s with every entity moving 1.2 m in a random direction every
//! other update (10 moves/s). It reports the CPU time of the update calls
//! alone (the moves excluded) and a digest of every event, to compare
//! builds (`AOI_BENCH_SRV_TICKS`, default 400; `AOI_BENCH_CELL` applies).

use tessera::core::aoi::{AoiEvent, AoiIndex, AoiParams, AreaSpec, BruteAoi, GridAoi};
use tessera::core::geom::{Rect, Vec3};
use tessera::core::ids::EntityId;
use tessera_bench::{
    close, drive, params_for, setup, thread_cpu_secs, walk_only, RunStats, SplitMix64, Walkers,
    Workload, CONFIGS, REFERENCES, TAU,
};

fn env_f64(name: &str) -> Option<f64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// One full grid run; panics on any mismatch with the reference.
fn grid_run(w: &Workload, cell_m: f64) -> RunStats {
    let r = REFERENCES[CONFIGS
        .iter()
        .position(|c| c.name == w.name)
        .expect("known config")];
    let mut ev = Vec::new();
    let mut walkers = Walkers::place(w);
    let placed = [
        (walkers.xs[0], walkers.zs[0]),
        (walkers.xs[1], walkers.zs[1]),
    ];
    for (got, want) in placed.iter().zip([r.placed0, r.placed1]) {
        assert!(
            close(got.0, want.0, 1e-9) && close(got.1, want.1, 1e-9),
            "{}: placement {got:?} != {want:?}",
            w.name
        );
    }
    let mut params = params_for(w, cell_m);
    if let Some(skin) = env_f64("AOI_BENCH_SKIN") {
        params.skin_m = skin;
    }
    if let Some(d) = env_f64("AOI_BENCH_SWEEP") {
        params.sweep_min_interest = d as usize;
    }
    let mut aoi = GridAoi::new(params).expect("params");
    let pairs0 = setup(&mut aoi, &walkers, w, &mut ev);
    assert_eq!(pairs0, r.pairs_tick0, "{}: tick-0 pairs", w.name);
    let st = drive(&mut aoi, &mut walkers, w.ticks, pairs0, &mut ev);
    let n = w.n - 1;
    let (sum, p0, pl) = (
        walkers.checksum(),
        (walkers.xs[0], walkers.zs[0]),
        (walkers.xs[n], walkers.zs[n]),
    );
    assert!(
        close(sum, r.checksum, 1e-6),
        "{}: checksum {sum:.9} != {:.9}",
        w.name,
        r.checksum
    );
    assert!(
        close(p0.0, r.pos0.0, 1e-9) && close(p0.1, r.pos0.1, 1e-9),
        "{}: pos0 {p0:?}",
        w.name
    );
    assert!(
        close(pl.0, r.pos_last.0, 1e-9) && close(pl.1, r.pos_last.1, 1e-9),
        "{}: posLast {pl:?}",
        w.name
    );
    let (enters, leaves): (u64, u64) = (st.enters.iter().sum(), st.leaves.iter().sum());
    assert_eq!(
        (enters, leaves),
        (r.enters, r.leaves),
        "{}: net enter/leave totals",
        w.name
    );
    assert_eq!(
        st.pairs_end, r.pairs_end,
        "{}: pairs after the last tick",
        w.name
    );
    st
}

/// The brute-force baseline over the first `ticks` ticks; its per-tick event
/// counts must equal the grid's.
fn baseline_run(w: &Workload, ticks: u32, grid: &RunStats) -> f64 {
    let mut ev = Vec::new();
    let mut walkers = Walkers::place(w);
    let mut aoi = BruteAoi::new(params_for(w, w.radius_m)).expect("params");
    let pairs0 = setup(&mut aoi, &walkers, w, &mut ev);
    let st = drive(&mut aoi, &mut walkers, ticks, pairs0, &mut ev);
    let t = ticks as usize;
    assert_eq!(
        (&st.enters[..], &st.leaves[..]),
        (&grid.enters[..t], &grid.leaves[..t]),
        "{}: baseline events differ",
        w.name
    );
    (w.n as f64 * ticks as f64) / st.secs
}

/// Profiling mode (`AOI_BENCH_PROFILE_TICKS=n`): the grid alone for `n`
/// ticks of each selected workload, no reference checks, no baseline (for
/// `valgrind --tool=callgrind`, whose instruction counts ignore the load of
/// this shared machine).
fn profile(ticks: u32, only: &str) {
    for w in CONFIGS
        .iter()
        .filter(|w| only.is_empty() || only.split(',').any(|o| o == w.name))
    {
        let mut params = params_for(w, env_f64("AOI_BENCH_CELL").unwrap_or(w.radius_m));
        if let Some(skin) = env_f64("AOI_BENCH_SKIN") {
            params.skin_m = skin;
        }
        if let Some(d) = env_f64("AOI_BENCH_SWEEP") {
            params.sweep_min_interest = d as usize;
        }
        let (mut ev, mut walkers) = (Vec::new(), Walkers::place(w));
        let mut aoi = GridAoi::new(params).expect("params");
        let pairs0 = setup(&mut aoi, &walkers, w, &mut ev);
        let st = drive(&mut aoi, &mut walkers, ticks, pairs0, &mut ev);
        let moves = w.n as f64 * ticks as f64;
        println!(
            "profile {}: {ticks} ticks, {:.2} M moves/s per CPU-second",
            w.name,
            moves / st.cpu_secs / 1e6
        );
    }
}

/// The `srv` case's entities, view radius, leave radius and cap.
const SRV_N: usize = 2000;
const SRV_RADIUS_M: f64 = 45.0;
const SRV_LEAVE_M: f64 = 48.0;
const SRV_CAP: u32 = 100;
/// Entities in one view on average.
const SRV_IN_VIEW: f64 = 58.0;
/// One move of a client, metres (12 m/s at 10 moves/s).
const SRV_STEP_M: f64 = 1.2;

/// What one `srv` run measured.
struct SrvStats {
    /// CPU seconds in the update calls.
    update_cpu: f64,
    /// Update calls.
    updates: u32,
    /// FNV-1a over every event (area, owner, entity, kind), in order.
    digest: u64,
    events: u64,
    /// Interest pairs after the last update.
    pairs: i64,
}

/// The `srv` case (see the file doc) on `aoi` for `ticks` updates.
fn srv_run<A: AoiIndex>(aoi: &mut A, ticks: u32) -> SrvStats {
    let side =
        (SRV_N as f64 * std::f64::consts::PI * SRV_RADIUS_M * SRV_RADIUS_M / SRV_IN_VIEW).sqrt();
    let mut rng = SplitMix64::new(7);
    let mut pos: Vec<(f64, f64)> = (0..SRV_N)
        .map(|_| (rng.u01() * side, rng.u01() * side))
        .collect();
    let spec = AreaSpec {
        leave_radius_m: Some(SRV_LEAVE_M),
        max_interest: Some(SRV_CAP),
        ..AreaSpec::circle(SRV_RADIUS_M)
    };
    for (i, &(x, z)) in pos.iter().enumerate() {
        let id = EntityId(i as u64);
        aoi.add_entity(id, Vec3::ground(x, z), 1).expect("add");
        aoi.add_area(id, spec).expect("area");
    }
    let mut ev: Vec<AoiEvent> = Vec::new();
    aoi.update(&mut ev);
    let mut pairs = ev.len() as i64;
    let (mut digest, mut events, mut cpu) = (0xcbf2_9ce4_8422_2325u64, 0u64, 0.0);
    for t in 0..ticks {
        for (i, p) in pos.iter_mut().enumerate() {
            if (i as u32 + t) % 2 != 0 {
                continue;
            }
            let theta = rng.u01() * TAU;
            let (mut x, mut z) = (
                p.0 + SRV_STEP_M * theta.cos(),
                p.1 + SRV_STEP_M * theta.sin(),
            );
            if !(0.0..=side).contains(&x) {
                x = p.0 - SRV_STEP_M * theta.cos();
            }
            if !(0.0..=side).contains(&z) {
                z = p.1 - SRV_STEP_M * theta.sin();
            }
            *p = (x, z);
            aoi.set_position(EntityId(i as u64), Vec3::ground(x, z))
                .expect("finite");
        }
        let c0 = thread_cpu_secs();
        aoi.update(&mut ev);
        cpu += thread_cpu_secs() - c0;
        for e in &ev {
            let enter = e.kind == tessera::core::aoi::EventKind::Enter;
            pairs += if enter { 1 } else { -1 };
            for v in [e.area.0, e.owner.0, e.entity.0, enter as u64] {
                digest = (digest ^ v).wrapping_mul(0x0000_0100_0000_01b3);
            }
        }
        events += ev.len() as u64;
    }
    SrvStats {
        update_cpu: cpu,
        updates: ticks,
        digest,
        events,
        pairs,
    }
}

/// Params of the `srv` case (the defaults over its world).
fn srv_params() -> AoiParams {
    let side =
        (SRV_N as f64 * std::f64::consts::PI * SRV_RADIUS_M * SRV_RADIUS_M / SRV_IN_VIEW).sqrt();
    let d = AoiParams::default();
    AoiParams {
        world: Rect::new(0.0, 0.0, side, side),
        grid_cell_m: env_f64("AOI_BENCH_CELL").unwrap_or(d.grid_cell_m),
        ..d
    }
}

/// Runs the `srv` case `reps` times on the grid (and, when
/// `AOI_BENCH_SRV_CHECK` is set, once on the brute force, which must
/// give the same digest); prints one line; returns its JSON object.
fn srv(reps: usize) -> String {
    let ticks = env_f64("AOI_BENCH_SRV_TICKS").map_or(400, |v| v as u32);
    let runs: Vec<SrvStats> = (0..reps.max(1))
        .map(|_| srv_run(&mut GridAoi::new(srv_params()).expect("params"), ticks))
        .collect();
    let best = runs
        .iter()
        .map(|r| r.update_cpu)
        .fold(f64::INFINITY, f64::min);
    let worst = runs.iter().map(|r| r.update_cpu).fold(0.0, f64::max);
    let r = &runs[0];
    assert!(
        runs.iter().all(|x| x.digest == r.digest),
        "srv: runs differ"
    );
    if std::env::var_os("AOI_BENCH_SRV_CHECK").is_some() {
        let b = srv_run(&mut BruteAoi::new(srv_params()).expect("params"), ticks);
        assert_eq!(b.digest, r.digest, "srv: the brute force differs");
        println!("srv: brute force agrees");
    }
    let us = best / f64::from(r.updates) * 1e6;
    println!(
        "aoi srv: N={SRV_N} r={SRV_RADIUS_M}/{SRV_LEAVE_M} cap={SRV_CAP} T={ticks} | \
         update {us:.1} us CPU per update (best of {}, worst {:.1}) | {:.1} events/update | \
         mean interest {:.1} | digest {:016x}",
        runs.len(),
        worst / f64::from(r.updates) * 1e6,
        r.events as f64 / f64::from(r.updates),
        r.pairs as f64 / SRV_N as f64,
        r.digest
    );
    format!(
        "{{\"name\":\"srv\",\"update_us\":{us:.2},\"digest\":\"{:016x}\"}}",
        r.digest
    )
}

fn main() {
    if let Some(t) = env_f64("AOI_BENCH_PROFILE_TICKS") {
        profile(
            t as u32,
            &std::env::var("AOI_BENCH_ONLY").unwrap_or_default(),
        );
        return;
    }
    let reps = env_f64("AOI_BENCH_REPS").map_or(3, |v| v.max(1.0) as usize);
    let only = std::env::var("AOI_BENCH_ONLY").unwrap_or_default();
    let mut json = Vec::new();
    if only.is_empty() || only.split(',').any(|o| o == "srv") {
        json.push(srv(reps));
    }
    for w in CONFIGS
        .iter()
        .filter(|w| only.is_empty() || only.split(',').any(|o| o == w.name))
    {
        let cell_m = env_f64("AOI_BENCH_CELL").unwrap_or(w.radius_m);
        let moves = (w.n as f64) * w.ticks as f64;
        let runs: Vec<RunStats> = (0..reps).map(|_| grid_run(w, cell_m)).collect();
        let rates: Vec<f64> = runs.iter().map(|s| moves / s.secs).collect();
        let best = rates.iter().copied().fold(0.0, f64::max);
        let cpu_best = runs.iter().map(|s| moves / s.cpu_secs).fold(0.0, f64::max);
        let (walk_wall, walk_cpu) = walk_only(w, w.ticks);
        let worst = rates.iter().copied().fold(f64::INFINITY, f64::min);
        let st = &runs[0];
        let events: u64 = st.enters.iter().chain(&st.leaves).sum();
        let events_per_tick = events as f64 / w.ticks as f64;
        let mean_interest = st.pairs_sum as f64 / w.ticks as f64 / w.n as f64;
        // The brute force costs O(N^2) per tick: time ~1 s of it.
        let base_ticks = ((4.0e7 / (w.n as f64 * w.n as f64)).ceil() as u32).clamp(1, 20);
        // As many baseline runs as grid runs: the speed-up is best against
        // best.
        let base_rates: Vec<f64> = (0..reps).map(|_| baseline_run(w, base_ticks, st)).collect();
        let base = base_rates.iter().copied().fold(0.0, f64::max);
        let speedup = tessera_bench::speedup(&rates, &base_rates);
        println!(
            "aoi {}: N={} L={} R={} T={} cell={}m | grid {:.2} M moves/s wall (best of {reps}, worst {:.2}), \
             {:.2} M/s per CPU-second | walk alone {:.2} M/s wall, {:.2} M/s CPU | \
             {:.1} events/tick | mean interest {:.2} | baseline brute force {:.3} M moves/s (best of {reps}, {base_ticks} ticks) | x{:.0}",
            w.name, w.n, w.side_m, w.radius_m, w.ticks, cell_m, best / 1e6, worst / 1e6,
            cpu_best / 1e6, moves / walk_wall / 1e6, moves / walk_cpu / 1e6,
            events_per_tick, mean_interest, base / 1e6, speedup
        );
        json.push(format!(
            "{{\"name\":\"{}\",\"moves_per_s\":{:.0},\"events_per_tick\":{:.2},\"mean_interest\":{:.3},\"baseline_moves_per_s\":{:.0}}}",
            w.name, best, events_per_tick, mean_interest, base
        ));
    }
    println!("{{\"workloads\":[{}]}}", json.join(","));
}
