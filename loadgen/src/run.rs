//! One benchmark run, start to finish: the server config, the server
//! (embedded or remote), the plan, the bot threads, the per-second loop
//! (live line, progress bar while ramping) and the [`Summary`].
//!
//! Owns the orchestration only; bots are [`crate::bot`], threads
//! [`crate::driver`], figures [`crate::report`].

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use serde_json::json;
use tessera::client::ClientSessionParams;
use tessera::config::Config;
use tessera::core::geom::Rect;
use tessera::core::time::Time;

use crate::cli::{Cli, WorldMode};
use crate::cpu::{self, CpuTimes};
use crate::driver::{self, Clock, Plan};
use crate::embedded::Embedded;
use crate::latency::MoveBook;
use crate::measure::{IntervalPool, Percentiles};
use crate::report::{self, Collector, Rates, ServerSecond, ShardTicks, Summary};
use crate::scenario::{self, CellMap, Scenario, ScenarioParams};
use crate::server::Server;

/// The distance bands of `config`'s `[view]`, the last capped at the view's
/// leave radius.
pub fn band_edges(config: &Config) -> crate::bands::BandEdges {
    let edges: Vec<f64> = config.view.bands.iter().map(|b| b.to_m).collect();
    crate::bands::BandEdges::new(&edges, config.aoi.leave_radius_m)
}

/// A finished run: its figures and the reasons it failed (empty = passed).
#[derive(Debug)]
pub struct Outcome {
    /// Every figure.
    pub summary: Summary,
    /// Why the run failed its checks.
    pub failures: Vec<String>,
    /// The steady window's update latencies, µs (for the charts).
    pub latency_hist: hdrhistogram::Histogram<u64>,
    /// The embedded server's tree over time (seconds, snapshot), for
    /// `tree.png`; empty for a remote server or with balancing off.
    pub tree: Vec<(f64, tessera::server::balance::TreeSnapshot)>,
}

/// The embedded server's config: defaults, `--config`, ephemeral client and
/// admin ports, the auto world (see [`WorldMode::Auto`]), then `--shards`,
/// `--ghost-radius`, `--npcs` and `--set` (which win). With `--server` it is
/// only the best knowledge of the remote world (its bounds and cells).
///
/// # Errors
/// If the file cannot be read or a value is invalid (naming the key).
pub fn server_config(cli: &Cli) -> anyhow::Result<Config> {
    let base = vec![
        "gateway.listen_addr=\"127.0.0.1:0\"".to_owned(),
        "admin.listen_addr=\"127.0.0.1:0\"".to_owned(),
    ];
    let mut user = Vec::new();
    if let Some(n) = cli.shards {
        user.push(format!("runtime.shards={n}"));
    }
    if let Some(r) = cli.ghost_radius {
        user.push(format!("world.ghost_radius_m={r:?}"));
    }
    if let Some(n) = cli.npcs {
        user.push(format!("server.npcs={n}"));
    }
    user.extend(cli.sets.iter().cloned());
    let all = |mid: &[String]| [base.as_slice(), mid, user.as_slice()].concat();
    let first = Config::load(cli.config.as_deref(), &all(&[]))?;
    if cli.server.is_some() || cli.world != WorldMode::Auto {
        return Ok(first);
    }
    Ok(Config::load(
        cli.config.as_deref(),
        &all(&auto_sets(cli, &first)),
    )?)
}

/// The overrides of the auto world (see [`WorldMode::Auto`]) for `cli`'s
/// bots and scenario, given the rest of the config: also what a separate
/// server process needs to match (`loadgen --print-server-sets`).
pub fn auto_sets(cli: &Cli, config: &Config) -> Vec<String> {
    let min_side = config.space_params().min_cell_side_m;
    let world = if cli.scenario == Scenario::Hotspot {
        scenario::hotspot_world
    } else {
        scenario::auto_world
    };
    let (w, d, room) = world(cli.bots, cli.in_view, config.aoi.radius_m, min_side);
    // The cells the world has room for where the scenario is about a
    // border (the patrol's, the crowd's split); elsewhere the server's
    // default, one cell per shard: a shard's cells of one space only add
    // borders to its work.
    let cells = match cli.scenario {
        Scenario::BorderPatrol | Scenario::Hotspot => room,
        _ => 0,
    };
    let spawn = if cli.scenario == Scenario::BorderPatrol {
        "center"
    } else {
        "random"
    };
    let mut auto = vec![
        "world.min_x_m=0.0".to_owned(),
        "world.min_z_m=0.0".to_owned(),
        format!("world.max_x_m={w:?}"),
        format!("world.max_z_m={d:?}"),
        format!("server.initial_cells={cells}"),
        format!("gateway.spawn=\"{spawn}\""),
    ];
    if cli.scenario == Scenario::Hotspot {
        auto.extend(HOTSPOT_BALANCE.iter().map(|s| (*s).to_owned()));
    }
    if cli.scenario == Scenario::Teleport {
        auto.push("gateway.move_speed_max_mps=1000000.0".to_owned());
        auto.push("gateway.move_slack_m=1000000.0".to_owned());
    }
    auto
}

/// The hotspot scenario's balancing thresholds (`--set` wins), also
/// `tuning/presets/hotspot-2core.toml`. The defaults (`split_*` 0.6 and 0.8
/// cores, merge at 0.05) assume a shard with a core of its own; on a 2-core
/// machine the bots take one core and the 2 shards share the other: a cell
/// of the evenly spread crowd measures 0.1-0.3 cores, the gathering crowd's
/// cell 0.5-0.65. Splitting from 0.45 splits only the crowd's cell; merging
/// up to 0.2 per cell and 0.7 x 0.45 = 0.315 per pair lets the pair merge
/// back once the crowd has left, but not while it is half gathered; and
/// not before 8 reports (8 s) since the split.
pub const HOTSPOT_BALANCE: [&str; 5] = [
    "balance.split_cell_load_min=0.45",
    "balance.split_shard_load_min=0.5",
    "balance.merge_cell_load_max=0.2",
    "balance.merge_pair_load_fraction=0.7",
    "balance.merge_reports_min=8",
];

/// Bot threads for `--threads` (0 = one per available CPU).
fn bot_threads(asked: usize) -> usize {
    match asked {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
}

/// Shards the config asks for (0 = one per CPU).
fn shard_count(config: &Config) -> u16 {
    match config.runtime.shards {
        0 if !config.runtime.cpus.is_empty() => config.runtime.cpus.len() as u16,
        0 => std::thread::available_parallelism().map_or(1, |n| n.get() as u16),
        n => n,
    }
}

/// The scenario of `cli` in the world of `config`; and the initial cell
/// layout (for the client-side migration estimate).
///
/// # Errors
/// If the initial layout cannot be built from the config.
pub fn scenario_params(cli: &Cli, config: &Config) -> anyhow::Result<(ScenarioParams, CellMap)> {
    let world = config.world.bounds();
    let tree = tessera::server::host::initial_tree(
        config,
        config.server.initial_cells,
        shard_count(config),
    )
    .map_err(|e| anyhow::anyhow!("initial cell layout: {e}"))?;
    let leaves: Vec<Rect> = tree.leaves().map(|l| l.rect).collect();
    let arena = world;
    let border_x = scenario::nearest_border_x(&leaves, &world, arena.center().x);
    let params = ScenarioParams {
        scenario: cli.scenario,
        speed_mps: cli.speed,
        move_hz: cli.move_hz,
        arena,
        border_x,
        border_amplitude_m: cli.border_amplitude,
        hotspot_period_s: cli.hotspot_period.as_secs_f64(),
        teleports_per_s: cli.teleport_rate,
        seed: cli.seed,
        move_phase: cli.move_phase,
    };
    Ok((params, CellMap::new(leaves, config.cell.migrate_margin_m)))
}

/// Raises the open-files limit to `want` (past the hard limit too where
/// the process may, e.g. as root with CAP_SYS_RESOURCE), else to the hard
/// limit; returns the limit in force.
fn raise_nofile(want: u64) -> u64 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: r is a valid rlimit for getrlimit/setrlimit to read and fill;
    // a refused setrlimit changes nothing. Exercised by every loadgen run
    // (loadgen/tests/embedded_run.rs and the CI smoke).
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) != 0 {
            return 1024;
        }
        if want > r.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: want as libc::rlim_t,
                rlim_max: want as libc::rlim_t,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                return want;
            }
        }
        r.rlim_cur = r.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut r);
    }
    r.rlim_cur
}

fn resolve(addr: &str) -> anyhow::Result<SocketAddr> {
    addr.to_socket_addrs()
        .with_context(|| format!("resolving {addr}"))?
        .next()
        .ok_or_else(|| anyhow::anyhow!("{addr} does not resolve"))
}

/// The flags' own rules (the config's are checked when it loads).
fn check_flags(cli: &Cli) -> anyhow::Result<()> {
    anyhow::ensure!(cli.move_hz > 0.0, "--move-hz must be positive");
    anyhow::ensure!(
        (0.0..=1.0).contains(&cli.check_fraction),
        "--check-fraction must be within 0..=1"
    );
    anyhow::ensure!(cli.read_bytes > 0, "--read-bytes must be at least 1");
    anyhow::ensure!(cli.events_max > 0, "--events-max must be at least 1");
    anyhow::ensure!(
        cli.uring_buffers.is_power_of_two() && cli.uring_buffers <= 1 << 15,
        "--uring-buffers must be a power of two from 1 to 32768 (got {})",
        cli.uring_buffers
    );
    anyhow::ensure!(
        cli.uring_buffer_bytes >= 64,
        "--uring-buffer-bytes must be at least 64 (got {})",
        cli.uring_buffer_bytes
    );
    Ok(())
}

/// The bot threads' I/O for `--io`: `auto` is io_uring where a ring with
/// its buffers can be set up here (a probe on this thread), else epoll,
/// with a note on stderr.
///
/// # Errors
/// `--io io-uring` where the kernel refuses it (the error names `--io
/// epoll`).
fn resolve_io(cli: &Cli) -> anyhow::Result<crate::cli::IoKind> {
    let bufs = u16::try_from(cli.uring_buffers).unwrap_or(1 << 15);
    resolve_io_with(cli.io, || {
        crate::uring_loop::probe(bufs, cli.uring_buffer_bytes)
    })
}

/// `resolve_io` with the io_uring probe given.
fn resolve_io_with(
    io: crate::cli::IoKind,
    probe: impl FnOnce() -> Result<(), crate::uring_loop::UringLoopError>,
) -> anyhow::Result<crate::cli::IoKind> {
    use crate::cli::IoKind;
    match io {
        IoKind::Epoll => Ok(IoKind::Epoll),
        IoKind::IoUring => {
            probe()?;
            Ok(IoKind::IoUring)
        }
        IoKind::Auto => match probe() {
            Ok(()) => Ok(IoKind::IoUring),
            Err(e) => {
                eprintln!("loadgen: --io auto: using epoll ({e})");
                Ok(IoKind::Epoll)
            }
        },
    }
}

/// Runs the benchmark `cli` describes.
///
/// # Errors
/// If the config is invalid, the server cannot start or be reached, or the
/// bot threads cannot start.
pub fn run(cli: &Cli) -> anyhow::Result<Outcome> {
    check_flags(cli)?;
    let mut config = server_config(cli)?;
    // The embedded server checks signed tickets with a key of this run;
    // a remote one with its own (`--key-file`) or none.
    let (ticket_key, _key_file) = match (&cli.server, &cli.key_file) {
        (None, _) => {
            let (k, f) = crate::tickets::embedded_key(&mut config)?;
            (Some(k), Some(f))
        }
        (Some(_), Some(path)) => (Some(crate::tickets::read_key(path)?), None),
        (Some(_), None) => (None, None),
    };
    let (scenario, cells) = scenario_params(cli, &config)?;
    let per_bot = if cli.server.is_some() { 1 } else { 2 };
    let needed = u64::from(cli.bots) * per_bot + 256;
    let nofile = raise_nofile(needed);
    anyhow::ensure!(
        needed <= nofile,
        "{} bots need about {needed} open files here (limit {nofile}); \
         run the server as its own process and pass --server",
        cli.bots
    );
    let load_start = report::load_avg();
    let server = match &cli.server {
        Some(s) => Server::Remote {
            addr: resolve(s)?,
            admin: cli.server_admin.clone(),
        },
        None => Server::Embedded(Embedded::start(&config)?),
    };
    let clock = Clock::start();
    let stop_moves_at = Time(0) + cli.ramp + cli.duration;
    let plan = Arc::new(Plan {
        addr: server.client_addr(),
        bots: cli.bots,
        threads: bot_threads(cli.threads),
        pin: !cli.no_pin,
        ramp: cli.ramp,
        stop_moves_at,
        close_at: stop_moves_at + cli.settle,
        handshake_timeout: Duration::from_secs(10),
        world: config.world.bounds(),
        scenario,
        attack_rate: cli.attack_rate,
        space_rate: if cli.scenario == crate::scenario::Scenario::Spaces {
            cli.space_rate
        } else {
            0.0
        },
        hit_range_m: cli.hit_range,
        bands: band_edges(&config),
        cells,
        migration_window: Duration::from_millis(1500),
        session: ClientSessionParams::default(),
        read_bytes: cli.read_bytes,
        events_max: cli.events_max,
        io: resolve_io(cli)?,
        uring_buffers: u16::try_from(cli.uring_buffers).unwrap_or(1 << 15),
        uring_buffer_bytes: cli.uring_buffer_bytes,
        check_fraction: cli.check_fraction,
        name_prefix: "bot".to_owned(),
        ticket_key,
    });
    let book = Arc::new(MoveBook::new(cli.bots as usize));
    let (tx, rx) = mpsc::channel();
    let pool = Arc::new(IntervalPool::default());
    let joins = driver::spawn(plan.clone(), clock, book, pool.clone(), tx)?;
    let looped = main_loop(cli, &plan, clock, &server, &rx, &pool);
    for j in joins {
        j.join()
            .map_err(|_| anyhow::anyhow!("a bot thread panicked"))??;
    }
    let mut looped = looped?;
    while let Ok(r) = rx.try_recv() {
        looped.collector.push_tail(&r.interval);
    }
    let tree = server.tree();
    let mut final_status = server.finish()?;
    if let Some(obj) = final_status.value.as_object_mut() {
        obj.insert("tree_snapshots".to_owned(), json!(tree.len()));
        // The balancing counts also at the top of `server` (issue 6's keys).
        for key in [
            "splits",
            "merges",
            "rebalances",
            "instances_live",
            "instances_created",
            "instances_reclaimed",
            "space_enters",
            "space_refused",
            "space_transfers",
        ] {
            let v = obj.get("counters").and_then(|c| c.get(key)).cloned();
            if let Some(v) = v {
                obj.insert(key.to_owned(), v);
            }
        }
    }
    let budget_ms = config.runtime.tick_budget_ms as f64;
    let mut summary = summarize(cli, &plan, &looped, final_status.value, budget_ms);
    summary.load_avg = json!({"start": load_start, "end": report::load_avg()});
    summary.in_view_expected = expected_in_view(cli, &config);
    let failures = check(cli, &summary);
    summary.thresholds = json!({
        "max_p99_ms": cli.max_p99_ms,
        "max_disconnects": cli.max_disconnects,
        "min_in_view_fraction": cli.min_in_view_fraction,
        "min_ack_fraction": cli.min_ack_fraction,
        "check_fraction": cli.check_fraction,
        "failures": failures,
        "passed": failures.is_empty(),
    });
    Ok(Outcome {
        summary,
        failures,
        latency_hist: looped.collector.steady.hists.update_latency.clone(),
        tree,
    })
}

/// What the per-second loop gathered.
#[derive(Debug, Default)]
pub struct Looped {
    /// The merged measurements.
    pub collector: Collector,
    /// CPU at the start and end of the steady window.
    pub cpu: Option<(CpuTimes, CpuTimes)>,
    /// Server migrations over the steady window.
    pub server_migrations: SteadyDelta,
}

/// A cumulative counter read once a second: its growth over exactly the
/// steady seconds, from the reading that starts the first one (the end of
/// the second before) to the reading that ends the last one, so the count
/// and [`Collector::steady_s`](crate::report::Collector) cover the same
/// seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SteadyDelta {
    /// The latest reading.
    prev: Option<u64>,
    /// The reading that started the first steady second (outer: seen one).
    start: Option<Option<u64>>,
    /// The reading that ended the last steady second so far.
    end: Option<u64>,
}

impl SteadyDelta {
    /// Before any second: `value` is the reading at the start of the run.
    pub fn starting_at(value: Option<u64>) -> Self {
        SteadyDelta {
            prev: value,
            ..SteadyDelta::default()
        }
    }

    /// The reading at the end of a second, and whether that second was
    /// steady.
    pub fn observe(&mut self, value: Option<u64>, steady: bool) {
        if steady {
            self.start.get_or_insert(self.prev);
            self.end = value;
        }
        self.prev = value;
    }

    /// The growth over the steady seconds (none: a reading was missing).
    pub fn delta(&self) -> Option<u64> {
        match (self.start.flatten(), self.end) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a)),
            _ => None,
        }
    }
}

fn main_loop(
    cli: &Cli,
    plan: &Plan,
    clock: Clock,
    server: &Server,
    rx: &mpsc::Receiver<driver::Report>,
    pool: &IntervalPool,
) -> anyhow::Result<Looped> {
    let mut out = Looped {
        server_migrations: SteadyDelta::starting_at(server.status().migrations),
        ..Looped::default()
    };
    let bar = if cli.quiet {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::new(u64::from(plan.bots))
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "ramping {bar:40} {pos}/{len} bots connected {msg}",
        )
        .expect("valid template"),
    );
    let ramp_s = plan.ramp.as_secs_f64();
    let stop_s = plan.stop_moves_at.0 as f64 / 1e6;
    let give_up_s = plan.close_at.0 as f64 / 1e6 + 30.0;
    let (mut lasts, mut cpu_start) = (0, None);
    let sample_cpu = || {
        let mut t = cpu::sample()?;
        if let Some(pid) = cli.server_pid {
            t.server_s = cpu::process_s(pid)?;
        }
        Some(t)
    };
    for k in 1.. {
        let t = Time(0) + Duration::from_millis(k * 1000 + 300);
        std::thread::sleep(clock.until(t));
        let t_s = k as f64;
        let mut second = pool.take();
        while let Ok(r) = rx.try_recv() {
            second.add(&r.interval);
            lasts += usize::from(r.last);
            pool.put(r.interval);
        }
        let steady = t_s - 1.0 >= ramp_s && t_s <= stop_s + 1e-9;
        let status = server.status();
        out.server_migrations.observe(status.migrations, steady);
        if steady && cpu_start.is_none() {
            cpu_start = sample_cpu();
        }
        if steady {
            if let (Some(a), Some(b)) = (cpu_start, sample_cpu()) {
                out.cpu = Some((a, b));
            }
        }
        let sample = out.collector.push_second(
            t_s,
            &second,
            steady,
            ServerSecond {
                migrations: status.migrations,
                shard_tick_p99_ms: status.tick_p99_window_ms,
            },
        );
        if t_s <= ramp_s + 1.0 && !bar.is_hidden() && !bar.is_finished() {
            bar.set_position(sample.connected);
            bar.set_message(format!("t={t_s:.0}s"));
            if t_s > ramp_s {
                bar.finish();
            }
        } else if !cli.quiet {
            println!("{}", report::live_line(sample, plan.bots));
        }
        pool.put(second);
        if lasts >= plan.threads {
            break;
        }
        anyhow::ensure!(t_s < give_up_s, "bot threads did not finish in time");
    }
    Ok(out)
}

fn rect_json(r: &Rect) -> serde_json::Value {
    json!({"min_x": r.min_x, "min_z": r.min_z, "max_x": r.max_x, "max_z": r.max_z})
}

fn pct(h: &hdrhistogram::Histogram<u64>) -> Percentiles {
    Percentiles::of(h)
}

/// The run's figures from what the loop gathered.
pub fn summarize(
    cli: &Cli,
    plan: &Plan,
    l: &Looped,
    server: serde_json::Value,
    tick_budget_ms: f64,
) -> Summary {
    let c = &l.collector;
    let steady = &c.steady;
    let rates = Rates::of(&steady.counters, c.steady_bot_s);
    // Both sources count over the steady seconds, which `steady_s` counts.
    let (migrations, source) = match l.server_migrations.delta() {
        Some(n) => (n, "server"),
        None => (steady.counters.crossings, "client-estimate"),
    };
    let sc = &steady.counters;
    let cpu_window_s = (c.steady_s - 1.0).max(1.0);
    let cpu_pct = match l.cpu {
        Some((a, b)) => {
            let (client, server) = b.percent_since(&a, cpu_window_s);
            json!({"loadgen": client, "server": server})
        }
        None => json!(null),
    };
    let loadgen_cpu_us_per_bot_s = l.cpu.and_then(|(a, b)| {
        let bots = if c.steady_s > 0.0 {
            c.steady_bot_s / c.steady_s
        } else {
            0.0
        };
        cpu_us_per_bot_s(b.client_s - a.client_s, bots, cpu_window_s)
    });
    Summary {
        settings: json!({
            "scenario": cli.scenario, "bots": cli.bots, "threads": plan.threads,
            "ramp_s": cli.ramp.as_secs_f64(), "duration_s": cli.duration.as_secs_f64(),
            "move_hz": cli.move_hz, "move_phase": cli.move_phase, "speed_mps": cli.speed, "attack_rate": cli.attack_rate,
            "space_rate": cli.space_rate,
            "in_view_target": cli.in_view, "arena": rect_json(&plan.scenario.arena),
            "walk_area": rect_json(&plan.scenario.walk_area(&plan.world)),
            "server": cli.server.clone().unwrap_or_else(|| "embedded".to_owned()),
            "shards": cli.shards, "npcs": cli.npcs, "seed": cli.seed,
        }),
        bots: cli.bots,
        bots_connected: c.connected_max,
        duration_s: c.steady_s,
        violations: c.total.counters.violations,
        violation_samples: c.total.violation_samples.clone(),
        migrations,
        migrations_source: source,
        migrations_per_s: if c.steady_s > 0.0 {
            migrations as f64 / c.steady_s
        } else {
            0.0
        },
        update_latency_ms: pct(&steady.hists.update_latency),
        ack_rtt_ms: pct(&steady.hists.ack_rtt),
        hit_rtt_ms: pct(&steady.hists.hit_rtt),
        own_gap_ms: pct(&steady.hists.own_gap),
        migration_gap_ms: pct(&steady.hists.migration_gap),
        migration_gap_overflow: sc.migration_gap_overflow,
        updates_per_bot_per_s: rates.updates,
        bytes_per_bot_per_s: rates.bytes_in,
        bands: crate::bands::figures(
            &plan.bands,
            &sc.bands,
            &steady.hists.bands,
            plan.scenario.move_period_s(),
            sc.view_size_samples,
        ),
        degraded_notices: c.total.counters.degraded_notices,
        per_bot_per_s: rates,
        in_view_avg: if sc.view_size_samples > 0 {
            sc.view_size_sum as f64 / sc.view_size_samples as f64
        } else {
            0.0
        },
        in_view_expected: None,
        updates_timed_fraction: if sc.updates > 0 {
            sc.updates_timed as f64 / sc.updates as f64
        } else {
            0.0
        },
        counters: c.total.counters.clone(),
        cpu_pct,
        loadgen_cpu_us_per_bot_s,
        check_fraction: plan.check_fraction,
        io: plan.io,
        bots_checked: c.total.counters.connects_checked,
        load_avg: json!(null),
        server,
        hottest_shard_tick: ShardTicks::of(&c.steady_hottest_tick_ms, tick_budget_ms),
        thresholds: json!(null),
        series: c.series.clone(),
    }
}

/// Microseconds of CPU per bot-second: `cpu_s` of CPU over `window_s`
/// seconds with `bots` bots connected on average (`None` without bots or
/// time).
pub fn cpu_us_per_bot_s(cpu_s: f64, bots: f64, window_s: f64) -> Option<f64> {
    (bots > 0.0 && window_s > 0.0).then(|| cpu_s * 1e6 / (bots * window_s))
}

/// The entities a bot should see on average in the auto world the
/// embedded server runs (see [`WorldMode::Auto`]): the other bots spread
/// evenly over the world, within the AOI radius, at most
/// `aoi.max_interest`. Edges and a random walk make the real figure
/// somewhat lower, crowding scenarios higher; `--min-in-view-fraction`
/// leaves room for that.
///
/// `None` where the figure means nothing: a remote server or the config's
/// world (loadgen does not know how they spread bots), the spaces scenario
/// (bots leave the world for instances), or fewer than two bots.
pub fn expected_in_view(cli: &Cli, config: &Config) -> Option<f64> {
    if cli.server.is_some() || cli.world != WorldMode::Auto || cli.bots < 2 {
        return None;
    }
    if cli.scenario == Scenario::Spaces {
        return None;
    }
    let w = config.world.bounds();
    let area = (w.max_x - w.min_x) * (w.max_z - w.min_z);
    if area <= 0.0 {
        return None;
    }
    let others = f64::from(cli.bots - 1);
    let r = config.aoi.radius_m;
    let seen = others * std::f64::consts::PI * r * r / area;
    Some(seen.min(others).min(f64::from(config.aoi.max_interest)))
}

/// The run's failed checks, each naming its rule in brackets at the end:
/// violations (by kind), bots that never connected or disconnected unasked
/// (beyond `--max-disconnects` together), bots that received nothing
/// (silence), a view far emptier than the world implies (in-view), moves
/// not acknowledged (acks), and the latency threshold.
pub fn check(cli: &Cli, s: &Summary) -> Vec<String> {
    let mut f = Vec::new();
    let c = &s.counters;
    if s.violations > 0 {
        let mut kinds: Vec<(&String, &u64)> = c.violation_kinds.iter().collect();
        kinds.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let kinds: Vec<String> = kinds.iter().map(|(k, n)| format!("{k} {n}")).collect();
        if kinds.is_empty() {
            f.push(format!("violations: {}", s.violations));
        } else {
            f.push(format!(
                "violations: {} ({})",
                s.violations,
                kinds.join(", ")
            ));
        }
    }
    let asked = u64::from(s.bots);
    if asked > 0 && c.connects == 0 {
        f.push("no bot connected (connect)".to_owned());
    } else {
        let never = asked.saturating_sub(c.connects);
        if never + c.disconnects > cli.max_disconnects {
            if never > 0 {
                f.push(format!(
                    "only {} of {asked} bots connected (connect)",
                    c.connects
                ));
            }
            if c.disconnects > 0 {
                let why: Vec<String> = c
                    .disconnect_reasons
                    .iter()
                    .map(|(k, n)| format!("{k} {n}"))
                    .collect();
                f.push(format!(
                    "{} bots disconnected before the end [{}] (disconnects)",
                    c.disconnects,
                    why.join(", ")
                ));
            }
        }
    }
    if c.connects > 0 {
        if c.silent > 0 {
            f.push(format!(
                "no updates received by {} of {} bots (silence)",
                c.silent, c.connects
            ));
        } else if c.batches == 0 {
            f.push(format!(
                "no updates received at all by the {} bots connected (silence)",
                c.connects
            ));
        }
    }
    if let Some(expected) = s.in_view_expected {
        let want = cli.min_in_view_fraction * expected;
        if s.duration_s > 0.0 && c.view_size_samples > 0 && s.in_view_avg < want {
            f.push(format!(
                "{:.1} entities in view on average, under {} x the {expected:.1} the world implies (in-view)",
                s.in_view_avg, cli.min_in_view_fraction
            ));
        }
    }
    if c.moves > 0 && (c.acks as f64) < cli.min_ack_fraction * c.moves as f64 {
        f.push(format!(
            "{} of {} moves acknowledged, under {} of them (acks)",
            c.acks, c.moves, cli.min_ack_fraction
        ));
    }
    if let Some(max) = cli.max_p99_ms {
        if s.update_latency_ms.p99 > max {
            f.push(format!(
                "update latency p99 {:.1} ms > {max} ms (latency)",
                s.update_latency_ms.p99
            ));
        }
    }
    f
}

#[cfg(test)]
pub(crate) mod tests {
    #[test]
    fn server_migrations_count_over_the_steady_seconds_only() {
        // One migration a second; seconds 3..=7 are steady (5 s).
        let mut d = SteadyDelta::starting_at(Some(0));
        for k in 1..=10u64 {
            d.observe(Some(k), (3..=7).contains(&k));
        }
        assert_eq!(d.delta(), Some(5), "5 steady seconds, 5 migrations");
        // Steady from the first second: counted from the start reading.
        let mut d = SteadyDelta::starting_at(Some(0));
        for k in 1..=4u64 {
            d.observe(Some(10 * k), k <= 2);
        }
        assert_eq!(d.delta(), Some(20));
        // No figures from the server, or no steady second: no delta.
        let mut d = SteadyDelta::starting_at(None);
        d.observe(None, true);
        assert_eq!(d.delta(), None);
        let mut d = SteadyDelta::starting_at(Some(0));
        d.observe(Some(3), false);
        assert_eq!(d.delta(), None);
    }

    use super::*;
    use clap::Parser;

    fn cli(args: &[&str]) -> Cli {
        let mut all = vec!["loadgen"];
        all.extend_from_slice(args);
        Cli::try_parse_from(all).expect("valid args")
    }

    /// The auto world is cut one cell per shard (the server's default),
    /// except where the scenario is about a border; and loadgen's own map
    /// of the cells is the server's.
    #[test]
    fn the_auto_world_is_one_cell_per_shard_unless_about_a_border() {
        let cells = |args: &[&str]| {
            let c = server_config(&cli(args)).expect("valid");
            let (_, map) = scenario_params(&cli(args), &c).expect("layout");
            (c.server.initial_cells, map.len())
        };
        assert_eq!(cells(&["--bots", "5000", "--shards", "1"]), (0, 1));
        assert_eq!(cells(&["--bots", "5000", "--shards", "2"]), (0, 2));
        let patrol = [
            "--bots",
            "5000",
            "--shards",
            "1",
            "--scenario",
            "border-patrol",
        ];
        assert_eq!(cells(&patrol), (4, 4));
        let hotspot = ["--bots", "2000", "--shards", "1", "--scenario", "hotspot"];
        assert_eq!(cells(&hotspot), (2, 2));
    }

    #[test]
    fn overrides_reach_the_server_config() {
        let c = server_config(&cli(&[
            "--shards",
            "2",
            "--ghost-radius",
            "70",
            "--npcs",
            "5",
            "--set",
            "aoi.radius_m=40.0",
        ]))
        .expect("valid");
        assert_eq!(c.runtime.shards, 2);
        assert_eq!(c.world.ghost_radius_m, 70.0);
        assert_eq!(c.server.npcs, 5);
        assert_eq!(c.aoi.radius_m, 40.0);
        assert_eq!(c.gateway.listen_addr, "127.0.0.1:0");
        assert!(server_config(&cli(&["--set", "aoi.radius_m=-1.0"])).is_err());
    }

    #[test]
    fn the_border_patrol_line_is_a_cell_border() {
        let a = cli(&["--scenario", "border-patrol", "--shards", "2"]);
        let config = server_config(&a).expect("valid");
        let (p, cells) = scenario_params(&a, &config).expect("layout");
        let left = tessera::core::geom::Vec3::ground(p.border_x - 1.0, p.arena.center().z);
        let right = tessera::core::geom::Vec3::ground(p.border_x + 1.0, p.arena.center().z);
        assert_ne!(cells.cell_of(left), cells.cell_of(right));
    }

    #[test]
    fn the_json_report_has_every_key_the_issue_names() {
        let a = cli(&["--bots", "3"]);
        let plan = tests_plan(1.0);
        let s = summarize(
            &a,
            &plan,
            &Looped::default(),
            json!({"source": "embedded"}),
            40.0,
        );
        let v = serde_json::to_value(&s).expect("serialises");
        for key in [
            "bots_connected",
            "duration_s",
            "violations",
            "migrations",
            "updates_per_bot_per_s",
            "bytes_per_bot_per_s",
            "server",
            "loadgen_cpu_us_per_bot_s",
            "check_fraction",
            "io",
            "bots_checked",
        ] {
            assert!(v.get(key).is_some(), "missing {key}");
        }
        for key in ["p50", "p99", "max"] {
            assert!(
                v["update_latency_ms"].get(key).is_some(),
                "missing update_latency_ms.{key}"
            );
        }
        assert_eq!(check(&a, &s), vec!["no bot connected (connect)".to_owned()]);
    }

    /// A plan of 3 bots on the default auto world, `check_fraction` as
    /// given.
    pub(crate) fn tests_plan(check_fraction: f64) -> Plan {
        let a = cli(&["--bots", "3"]);
        let config = server_config(&a).expect("valid");
        let (scenario, cells) = scenario_params(&a, &config).expect("layout");
        Plan {
            addr: "127.0.0.1:1".parse().expect("addr"),
            bots: 3,
            threads: 1,
            pin: false,
            ramp: Duration::ZERO,
            stop_moves_at: Time(0),
            close_at: Time(0),
            handshake_timeout: Duration::from_secs(1),
            world: config.world.bounds(),
            scenario,
            attack_rate: 0.0,
            space_rate: 0.0,
            hit_range_m: 10.0,
            bands: band_edges(&config),
            cells,
            migration_window: Duration::from_secs(1),
            session: ClientSessionParams::default(),
            read_bytes: 1024,
            events_max: 16,
            io: crate::cli::IoKind::Epoll,
            uring_buffers: 64,
            uring_buffer_bytes: 256,
            check_fraction,
            name_prefix: "b".to_owned(),
            ticket_key: None,
        }
    }

    /// A summary every rule passes: 50 bots connected, heard, acked, with
    /// the view the world implies.
    fn healthy() -> Summary {
        let mut s = Summary {
            bots: 50,
            bots_connected: 50,
            duration_s: 5.0,
            in_view_avg: 2.5,
            in_view_expected: Some(2.7),
            ..Summary::default()
        };
        let c = &mut s.counters;
        c.connects = 50;
        c.closed = 50;
        c.batches = 5_000;
        c.updates = 3_000;
        c.moves = 2_500;
        c.acks = 2_490;
        c.view_size_sum = 5_000;
        c.view_size_samples = 2_000;
        s
    }

    fn fails(args: &[&str], s: &Summary, rule: &str) -> String {
        let f = check(&cli(args), s);
        let hits: Vec<&String> = f.iter().filter(|t| t.ends_with(rule)).collect();
        assert_eq!(hits.len(), 1, "{rule} should fire once: {f:?}");
        assert_eq!(f.len(), 1, "only {rule} should fire: {f:?}");
        hits[0].clone()
    }

    #[test]
    fn a_healthy_run_passes_every_rule() {
        assert_eq!(check(&cli(&[]), &healthy()), Vec::<String>::new());
    }

    #[test]
    fn violations_fail_by_kind() {
        let mut s = healthy();
        s.violations = 13;
        s.counters.violations = 13;
        s.counters.violation_kinds.insert("AfterLeave".into(), 12);
        s.counters
            .violation_kinds
            .insert("TruncatedStream".into(), 1);
        assert_eq!(
            check(&cli(&[]), &s),
            vec!["violations: 13 (AfterLeave 12, TruncatedStream 1)".to_owned()]
        );
    }

    #[test]
    fn missing_and_lost_bots_fail_beyond_the_allowance() {
        let mut s = healthy();
        s.counters.connects = 47;
        s.counters.closed = 44;
        s.counters.disconnects = 3;
        s.counters.disconnect_reasons.insert("eof".into(), 3);
        s.counters.batches = 5_000;
        let f = check(&cli(&[]), &s);
        assert_eq!(
            f,
            vec![
                "only 47 of 50 bots connected (connect)".to_owned(),
                "3 bots disconnected before the end [eof 3] (disconnects)".to_owned(),
            ]
        );
        assert!(check(&cli(&["--max-disconnects", "6"]), &s).is_empty());
        assert_eq!(check(&cli(&["--max-disconnects", "5"]), &s).len(), 2);
        s.counters.disconnects = 0;
        s.counters.closed = 47;
        fails(&[], &s, "(connect)");
        s.counters.connects = 50;
        s.counters.disconnects = 1;
        fails(&[], &s, "(disconnects)");
    }

    #[test]
    fn bots_that_heard_nothing_fail_as_silence() {
        let mut s = healthy();
        s.counters.silent = 37;
        assert_eq!(
            fails(&[], &s, "(silence)"),
            "no updates received by 37 of 50 bots (silence)"
        );
        let mut s = healthy();
        s.counters.batches = 0;
        fails(&[], &s, "(silence)");
    }

    #[test]
    fn an_empty_view_fails_unless_the_world_is_unknown() {
        let mut s = healthy();
        s.in_view_avg = 0.5;
        let text = fails(&[], &s, "(in-view)");
        assert!(text.contains("0.5") && text.contains("2.7"), "{text}");
        assert!(check(&cli(&["--min-in-view-fraction", "0.1"]), &s).is_empty());
        s.in_view_expected = None;
        assert!(check(&cli(&[]), &s).is_empty());
    }

    #[test]
    fn unacknowledged_moves_fail() {
        let mut s = healthy();
        s.counters.acks = 0;
        assert_eq!(
            fails(&[], &s, "(acks)"),
            "0 of 2500 moves acknowledged, under 0.5 of them (acks)"
        );
        s.counters.acks = 1_000;
        fails(&[], &s, "(acks)");
        assert!(check(&cli(&["--min-ack-fraction", "0.4"]), &s).is_empty());
    }

    #[test]
    fn loadgen_cpu_is_per_bot_second() {
        // 0.5 s of CPU over 10 s with 1,000 bots: 50 µs per bot-second.
        let us = cpu_us_per_bot_s(0.5, 1000.0, 10.0).expect("bots and time");
        assert!((us - 50.0).abs() < 1e-9, "{us}");
        assert_eq!(cpu_us_per_bot_s(0.5, 0.0, 10.0), None);
        assert_eq!(cpu_us_per_bot_s(0.5, 10.0, 0.0), None);
    }

    #[test]
    fn a_check_fraction_outside_zero_to_one_and_empty_loop_bounds_are_refused() {
        for f in ["--check-fraction=1.5", "--check-fraction=-0.1"] {
            let e = run(&cli(&["--bots", "1", f])).expect_err("refused");
            assert!(e.to_string().contains("--check-fraction"), "{e}");
        }
        for flag in ["--read-bytes", "--events-max", "--uring-buffer-bytes"] {
            let e = run(&cli(&["--bots", "1", flag, "0"])).expect_err("refused");
            assert!(e.to_string().contains(flag), "{e}");
        }
        for n in ["0", "3000", "65536"] {
            let e = run(&cli(&["--bots", "1", "--uring-buffers", n])).expect_err("refused");
            assert!(e.to_string().contains("--uring-buffers"), "{e}");
        }
    }

    #[test]
    fn auto_io_falls_back_to_epoll_and_a_refused_io_uring_names_epoll() {
        use crate::cli::IoKind;
        use crate::uring_loop::UringLoopError;
        let refused = || {
            Err(UringLoopError::Setup {
                thread: 0,
                feature: "io_uring_setup with SINGLE_ISSUER and DEFER_TASKRUN",
                source: std::io::Error::from_raw_os_error(libc::EPERM),
            })
        };
        assert_eq!(
            resolve_io_with(IoKind::Auto, || Ok(())).ok(),
            Some(IoKind::IoUring)
        );
        assert_eq!(
            resolve_io_with(IoKind::Auto, refused).ok(),
            Some(IoKind::Epoll)
        );
        let e = resolve_io_with(IoKind::IoUring, refused).expect_err("refused");
        assert!(e.to_string().contains("--io epoll"), "{e}");
        assert_eq!(
            resolve_io_with(IoKind::Epoll, || panic!("no probe for epoll")).ok(),
            Some(IoKind::Epoll)
        );
    }

    #[test]
    fn the_expected_view_follows_the_auto_world() {
        let a = cli(&["--bots", "50"]);
        let config = server_config(&a).expect("valid");
        let e = expected_in_view(&a, &config).expect("auto world");
        let w = config.world.bounds();
        let area = (w.max_x - w.min_x) * (w.max_z - w.min_z);
        let r = config.aoi.radius_m;
        assert!((e - 49.0 * std::f64::consts::PI * r * r / area).abs() < 1e-9);
        assert!(e > 1.0, "{e}");
        let spaces = cli(&["--bots", "50", "--scenario", "spaces"]);
        assert_eq!(expected_in_view(&spaces, &config), None);
        let config_world = cli(&["--bots", "50", "--world", "config"]);
        assert_eq!(expected_in_view(&config_world, &config), None);
        let big = cli(&["--bots", "10000"]);
        let config = server_config(&big).expect("valid");
        let e = expected_in_view(&big, &config).expect("auto world");
        assert!((e - 60.0).abs() < 2.0, "sized for --in-view 60: {e}");
    }
}
