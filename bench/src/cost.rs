//! The cost probe: the server's own game path (gateway sessions, cells, AOI,
//! views, proxies) for a crowd of clients walking at random, on one shard of
//! the sans-IO host harness (`tessera::server::harness`), timed in-process.
//! No sockets, no kernel, no load process: the user-space part of what the
//! clients bench measures, with a fraction of its noise, so a change to the
//! game path can be weighed in seconds (`cargo bench --bench cost`).
//!
//! Only the hosts' ticks are timed (the harness's `host_busy`), not the test
//! clients that decode what they receive. A probe of a broken server
//! measures nothing: [`run`] fails if the crowd did not log in, saw a
//! violation or saw no one move.

use std::time::Duration;

use serde::Serialize;
use tessera::config::Config;
use tessera::core::geom::Vec3;
use tessera::server::harness::Harness;

use crate::SplitMix64;

/// The clients bench's write period at 2,000 clients (10 Hz).
const WRITE_MS: u64 = 100;
/// Moves a second of each walker.
const MOVE_HZ: usize = 10;
/// Seconds of walking before the measured span (every view filled).
const WARM_UP_S: usize = 5;
/// A walker's speed: 5 m/s, a running avatar.
const SPEED_MPS: f64 = 5.0;
/// Entities in a client's view on average (loadgen's default world).
const IN_VIEW: f64 = 60.0;

/// The crowd a probe runs: how dense, how fast, and what else differs from
/// the clients bench's config. The knobs that take the cost apart (the
/// tenth round in bench/README.md): the view's size moves the per-pair
/// work, the speed the churn of enters, leaves and crossings, a `--set`
/// anything the config holds (`server.initial_cells=1`: no cell borders).
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    /// Entities in each client's view on average: the world is sized for
    /// it (loadgen's `--in-view`). Default 60.
    pub in_view: f64,
    /// How fast each walker goes, m/s (`MOVE_HZ` moves a second). Default 5.
    pub speed_mps: f64,
    /// The share of the clients that stand still and send nothing (an
    /// idle crowd: avatars parked in town). Default 0.
    pub idle: f64,
    /// Config overrides, `key=value` as `--set` takes them, applied last.
    pub sets: Vec<String>,
}

impl Default for Workload {
    fn default() -> Self {
        Workload {
            in_view: IN_VIEW,
            speed_mps: SPEED_MPS,
            idle: 0.0,
            sets: Vec::new(),
        }
    }
}

impl Workload {
    /// The walkers' step, metres a move.
    fn step_m(&self) -> f64 {
        self.speed_mps / MOVE_HZ as f64
    }

    /// How many of `clients` walk (the rest, the first ones, stand idle).
    fn walkers(&self, clients: usize) -> usize {
        clients - (clients as f64 * self.idle).round() as usize
    }

    /// loadgen's arguments for this crowd (after the clients bench's own).
    fn loadgen_args(&self) -> Vec<String> {
        let mut args = vec!["--in-view".to_owned(), format!("{:?}", self.in_view)];
        for kv in &self.sets {
            args.push("--set".to_owned());
            args.push(kv.clone());
        }
        args
    }
}

/// The probe's command line: up to three counts, then the crowd's knobs.
#[derive(Debug, PartialEq)]
pub struct ProbeArgs {
    /// Clients in the crowd (default 2,000).
    pub clients: usize,
    /// Seconds measured per run (default 10).
    pub seconds: usize,
    /// Runs (default 3).
    pub runs: usize,
    /// The crowd.
    pub work: Workload,
}

/// What `--help` prints: the probe's command line.
pub const USAGE: &str = "\
usage: cost [CLIENTS [SECONDS [RUNS]]] [--in-view N] [--speed M_PER_S] [--idle SHARE] [--set KEY=VALUE]...
  CLIENTS   clients in the crowd (2000)
  SECONDS   seconds measured per run, after a 5 s warm-up (10)
  RUNS      runs; the last line is their median (3)
  --in-view N        the world sized for about N entities in each view (60)
  --speed M_PER_S    the walkers' speed (5)
  --idle SHARE       this share of the clients stands still and sends nothing (0)
  --set KEY=VALUE    a config key over the clients bench's config (repeatable)
Prints one JSON line per run (host_us_per_client_s) and one with the median.";

/// True when the arguments ask for [`USAGE`] (`--help` or `-h`).
pub fn wants_help<S: AsRef<str>>(args: &[S]) -> bool {
    args.iter().any(|a| matches!(a.as_ref(), "--help" | "-h"))
}

/// Parses the cost bench's arguments (`ProbeArgs`; the bench's doc).
///
/// # Errors
/// Naming the bad argument: an unknown option, a knob without a value or
/// not a positive number, a count that is not one, more than three counts.
pub fn parse_args(args: impl IntoIterator<Item = String>) -> anyhow::Result<ProbeArgs> {
    let mut counts = Vec::new();
    let mut work = Workload::default();
    let mut args = args.into_iter();
    while let Some(a) = args.next() {
        let mut value = |name: &str| {
            args.next()
                .ok_or_else(|| anyhow::anyhow!("{name} needs a value"))
        };
        match a.as_str() {
            // Cargo passes `--bench` to a harness-less bench.
            "--bench" => {}
            "--in-view" => work.in_view = positive("--in-view", &value("--in-view")?)?,
            "--speed" => work.speed_mps = positive("--speed", &value("--speed")?)?,
            "--idle" => work.idle = share("--idle", &value("--idle")?)?,
            "--set" => work.sets.push(value("--set")?),
            flag if flag.starts_with("--") => anyhow::bail!(
                "unknown option {flag:?} (counts: CLIENTS SECONDS RUNS; options: --in-view N, --speed M_PER_S, --idle SHARE, --set KEY=VALUE; --help)"
            ),
            count => counts.push(
                count
                    .parse::<usize>()
                    .map_err(|_| anyhow::anyhow!("argument {}: {count:?} is not a count", counts.len() + 1))?,
            ),
        }
    }
    if counts.len() > 3 {
        anyhow::bail!(
            "at most three counts (CLIENTS SECONDS RUNS), got {}",
            counts.len()
        );
    }
    let count = |i: usize, default: usize| counts.get(i).copied().unwrap_or(default);
    Ok(ProbeArgs {
        clients: count(0, 2000),
        seconds: count(1, 10),
        runs: count(2, 3),
        work,
    })
}

/// `v`, the value of option `name`, as a positive finite number.
fn positive(name: &str, v: &str) -> anyhow::Result<f64> {
    match v.parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
        _ => anyhow::bail!("{name} {v:?}: not a positive number"),
    }
}

/// `v`, the value of option `name`, as a share: a number in `[0, 1)`.
fn share(name: &str, v: &str) -> anyhow::Result<f64> {
    match v.parse::<f64>() {
        Ok(x) if (0.0..1.0).contains(&x) => Ok(x),
        _ => anyhow::bail!("{name} {v:?}: not a share in [0, 1)"),
    }
}

/// What one probe measured.
#[derive(Clone, Debug, Serialize)]
pub struct Probe {
    /// Clients in the crowd.
    pub clients: usize,
    /// Seconds of game time measured.
    pub seconds: usize,
    /// The view the world was sized for ([`Workload::in_view`]).
    pub in_view: f64,
    /// The walkers' speed, m/s ([`Workload::speed_mps`]).
    pub speed_mps: f64,
    /// The share of clients standing idle ([`Workload::idle`]).
    pub idle: f64,
    /// Wall time of the hosts' ticks per client-second, µs.
    pub host_us_per_client_s: f64,
    /// View updates each client received a second.
    pub updates_per_client_s: f64,
    /// Moves each client sent a second (10 for a walker, none idle).
    pub moves_per_client_s: f64,
    /// Shown entities the clients' updates visited a client-second (the
    /// pulls' slot visits: `host_view_visits`).
    pub visits_per_client_s: f64,
    /// Shown entities they skipped a client-second (band-rate visits:
    /// `host_view_skips`).
    pub skips_per_client_s: f64,
    /// Of the visits, those that passed a quiet slot by unread, a
    /// client-second (`host_view_quiet`).
    pub quiet_per_client_s: f64,
    /// Allocations (and reallocations) in the hosts' ticks per
    /// client-second: `None` unless the binary's global allocator counts
    /// them (`crate::alloc_count::Counting`; the cost bench's does).
    pub host_allocs_per_client_s: Option<f64>,
}

/// Why a probe measured nothing.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The probe's config did not load.
    #[error("the probe's config: {0}")]
    Config(String),
    /// A client was not welcomed.
    #[error("client {0} was not welcomed")]
    NotWelcomed(usize),
    /// The clients saw protocol violations.
    #[error("{0} violations: the server is broken, its cost means nothing")]
    Violations(u64),
    /// The server refused frames or reported errors to the clients.
    #[error("{0} errors reported to the clients: the walk is refused, its cost means nothing")]
    Errors(u64),
    /// Fewer than half the moves were acknowledged.
    #[error("{acked} of {sent} moves acknowledged")]
    Unacked {
        /// Moves acknowledged.
        acked: u64,
        /// Moves sent.
        sent: u64,
    },
    /// Hardly anyone saw anyone move.
    #[error("{0:.1} updates per client-second: the crowd did not see itself move")]
    NoUpdates(f64),
}

/// The clients bench's tessera config for `clients` (loadgen's world for
/// that many bots: for 2,000, 480 x 442 m and about 60 in view; one shard;
/// one view update per client every 100 ms), so the probe weighs the game
/// path the clients bench runs.
///
/// # Errors
/// [`ProbeError::Config`] if loadgen's settings do not make a config.
pub fn config(clients: usize) -> Result<Config, ProbeError> {
    config_for(clients, &Workload::default())
}

/// As [`config`], the world sized for `work.in_view` and `work.sets`
/// applied last.
///
/// # Errors
/// [`ProbeError::Config`] if the settings do not make a config (an unknown
/// key, a bad value).
pub fn config_for(clients: usize, work: &Workload) -> Result<Config, ProbeError> {
    let extra = work.loadgen_args();
    crate::clients::tessera_server::config_with(clients, 0, WRITE_MS, "epoll", &extra)
        .map_err(|e| ProbeError::Config(format!("{e:#}")))
}

/// A walker: where it is and where it is going.
struct Walker {
    pos: Vec3,
    to: Vec3,
}

fn unit(rng: &mut SplitMix64) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// Each walker's move on its tick of every `every` (`MOVE_HZ`), a new
/// random goal when it arrives. The first `idle` clients do not walk.
fn walk(
    h: &mut Harness,
    walkers: &mut [Walker],
    (step, every, step_m): (usize, usize, f64),
    rng: &mut SplitMix64,
    max: (f64, f64),
) {
    let now = h.now;
    let idle = h.clients.len() - walkers.len();
    for (j, w) in walkers.iter_mut().enumerate() {
        let i = idle + j;
        if (i + step) % every != 0 {
            continue;
        }
        let (dx, dz) = (w.to.x - w.pos.x, w.to.z - w.pos.z);
        let d = (dx * dx + dz * dz).sqrt();
        if d < step_m {
            w.to = Vec3::ground(unit(rng) * max.0, unit(rng) * max.1);
        } else {
            w.pos = Vec3::ground(w.pos.x + dx / d * step_m, w.pos.z + dz / d * step_m);
        }
        // A refused move (none expected) comes back as an Error frame: the
        // run fails (`ProbeError::Errors`).
        let _ = h.clients[i].session.send_move(now, w.pos, 0.0);
    }
}

fn updates(h: &Harness) -> u64 {
    h.clients.iter().map(|c| c.session.counters().updates).sum()
}

/// The hosts' slot visits, skips and quiet visits so far (`view_visits`,
/// `view_skips`, `view_quiet`).
fn visits(h: &Harness) -> (u64, u64, u64) {
    h.hosts
        .iter()
        .map(|host| host.cell_counters())
        .fold((0, 0, 0), |(v, k, q), c| {
            (v + c.view_visits, k + c.view_skips, q + c.view_quiet)
        })
}

fn moves(h: &Harness) -> u64 {
    h.clients
        .iter()
        .map(|c| c.session.counters().inputs_sent)
        .sum()
}

/// Runs `clients` walkers for the warm-up and then `seconds` measured.
///
/// # Errors
/// See [`ProbeError`].
pub fn run(clients: usize, seconds: usize) -> Result<Probe, ProbeError> {
    run_workload(clients, seconds, &Workload::default())
}

/// Runs `clients` walkers of the crowd `work` for the warm-up and then
/// `seconds` measured.
///
/// # Errors
/// See [`ProbeError`].
pub fn run_workload(clients: usize, seconds: usize, work: &Workload) -> Result<Probe, ProbeError> {
    let step_m = work.step_m();
    let config = config_for(clients, work)?;
    let max = (config.world.max_x_m, config.world.max_z_m);
    let ticks_per_s = (1000 / config.runtime.tick_ms.max(1)) as usize;
    let every = (ticks_per_s / MOVE_HZ).max(1);
    let mut h = Harness::try_new(&config).map_err(|e| ProbeError::Config(e.to_string()))?;
    h.host_hook = Some(crate::alloc_count::window);
    for i in 0..clients {
        h.connect(0, &format!("bot{i}"));
    }
    h.run(4);
    let mut walkers = Vec::with_capacity(clients);
    let idle = clients - work.walkers(clients);
    for (i, c) in h.clients.iter().enumerate() {
        let pos = c.session.welcome().ok_or(ProbeError::NotWelcomed(i))?.pos;
        if i >= idle {
            walkers.push(Walker { pos, to: pos });
        }
    }
    let mut rng = SplitMix64::new(0x7e55_e7a0);
    for step in 0..WARM_UP_S * ticks_per_s {
        walk(&mut h, &mut walkers, (step, every, step_m), &mut rng, max);
        h.step();
    }
    let (busy0, updates0, moves0) = (h.host_busy, updates(&h), moves(&h));
    let visits0 = visits(&h);
    let allocs0 = crate::alloc_count::allocations();
    crate::alloc_count::trace_every();
    for step in 0..seconds * ticks_per_s {
        walk(&mut h, &mut walkers, (step, every, step_m), &mut rng, max);
        h.step();
    }
    let busy: Duration = h.host_busy - busy0;
    let allocs = crate::alloc_count::allocations() - allocs0;
    let client_s = (clients * seconds).max(1) as f64;
    let per_client_s = (updates(&h) - updates0) as f64 / client_s;
    let moves_per_client_s = (moves(&h) - moves0) as f64 / client_s;
    let visits1 = visits(&h);
    let visits_per_client_s = (visits1.0 - visits0.0) as f64 / client_s;
    let skips_per_client_s = (visits1.1 - visits0.1) as f64 / client_s;
    let quiet_per_client_s = (visits1.2 - visits0.2) as f64 / client_s;
    let violations: u64 = h.clients.iter().map(|c| c.session.violation_count()).sum();
    if violations > 0 {
        return Err(ProbeError::Violations(violations));
    }
    let sum = |f: fn(&tessera::client::SessionCounters) -> u64| -> u64 {
        h.clients.iter().map(|c| f(c.session.counters())).sum()
    };
    let errors = sum(|c| c.errors);
    if errors > 0 {
        return Err(ProbeError::Errors(errors));
    }
    let (sent, acked) = (sum(|c| c.inputs_sent), sum(|c| c.inputs_acked));
    if acked * 2 < sent {
        return Err(ProbeError::Unacked { acked, sent });
    }
    if per_client_s < 1.0 {
        return Err(ProbeError::NoUpdates(per_client_s));
    }
    Ok(Probe {
        clients,
        seconds,
        in_view: work.in_view,
        speed_mps: work.speed_mps,
        idle: work.idle,
        host_us_per_client_s: busy.as_secs_f64() * 1e6 / client_s,
        updates_per_client_s: per_client_s,
        moves_per_client_s,
        visits_per_client_s,
        skips_per_client_s,
        quiet_per_client_s,
        host_allocs_per_client_s: crate::alloc_count::installed().then(|| allocs as f64 / client_s),
    })
}
