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

use tessera::core::aoi::{BruteAoi, GridAoi};
use tessera_bench::{
    close, drive, params_for, setup, walk_only, RunStats, Walkers, Workload, CONFIGS, REFERENCES,
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
