//! The command line of the clients bench: the run (rows, window, repeats,
//! `--quick`) and the hidden `child` roles the run starts from this same
//! executable.
//!
//! Owns argument parsing and dispatch only.

use clap::{Args, Parser, Subcommand, ValueEnum};
use serde_json::{json, Value};

use super::driver::{LoadPlan, LoadWait, Peer};
use super::epoll_server::BarePlan;
use super::orchestrate::{self, Kind, RunOpts};
use super::walk::Bounds;
use super::{driver, epoll_server, sys, tessera_server, uring_server};

/// `cargo bench -p tessera-bench --bench clients -- [OPTIONS]`
#[derive(Debug, Parser)]
#[command(
    name = "clients",
    about = "Server CPU per client per second: tessera against bare epoll and io_uring servers"
)]
pub struct Cli {
    /// Client counts, one row each.
    #[arg(long, value_delimiter = ',', default_value = "2000,5000,10000")]
    pub clients: Vec<usize>,
    /// Steady window measured per run, seconds.
    #[arg(long, default_value_t = 10.0)]
    pub window_s: f64,
    /// Runs of each server per row (interleaved; the median is reported).
    #[arg(long, default_value_t = 2)]
    pub repeats: usize,
    /// Wait after every client moves, before the window, seconds.
    #[arg(long, default_value_t = 3.0)]
    pub settle_s: f64,
    /// Longest wait for all clients to connect and move, seconds.
    #[arg(long, default_value_t = 90.0)]
    pub ramp_timeout_s: f64,
    /// Servers to run (default the three; `tessera` runs its default
    /// socket loop, `auto`: io_uring where the kernel has it; `tessera-epoll`
    /// is tessera on its epoll loop).
    #[arg(long, value_delimiter = ',', default_value = "epoll,io-uring,tessera")]
    pub servers: Vec<ServerArg>,
    /// The servers' CPU.
    #[arg(long, default_value_t = 0)]
    pub server_cpu: usize,
    /// The load's CPU.
    #[arg(long, default_value_t = 1)]
    pub load_cpu: usize,
    /// Bare servers: poll the sockets every this many ms (tessera's tick).
    #[arg(long, default_value_t = 50)]
    pub poll_ms: u64,
    /// Write to every client every this many ms: the bare servers' tick,
    /// and tessera's `view.client_update_hz` (1000 / this).
    #[arg(long, default_value_t = 100)]
    pub tick_ms: u64,
    /// Bare servers: bytes per client per tick (250 per 100 ms = 2,500 B/s,
    /// tessera's `view.client_bytes_per_s_max`).
    #[arg(long, default_value_t = 250)]
    pub bytes_per_tick: usize,
    /// Moves per client per second.
    #[arg(long, default_value_t = 10.0)]
    pub move_hz: f64,
    /// Bare servers: walk this many KiB of their own memory every poll, a
    /// stand-in for a game's working set (0: none). An experiment: does
    /// user-space memory make the kernel's socket work dearer?
    #[arg(long, default_value_t = 0)]
    pub bare_touch_kib: usize,
    /// Bare servers: write each client's tick from a buffer of its own,
    /// rewritten every tick, instead of one shared buffer (an experiment).
    #[arg(long)]
    pub bare_own_buffers: bool,
    /// Bare servers: write each client once per `--tick-ms` as now, but in
    /// this many groups `tick_ms / N` apart, as tessera staggers its
    /// clients' update phases (1: all at once, the floor).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=16))]
    pub bare_phases: u32,
    /// How the load waits for the servers' bytes: `epoll` (blocks in
    /// epoll_wait; on loopback each server send that finds it asleep
    /// charges its wake-up to the server) or `sleep` (never blocks on the
    /// sockets: polls, then naps on its own timer, as remote clients would
    /// cost the server no wake-ups).
    #[arg(long, value_enum, default_value_t = LoadWait::Epoll)]
    pub load_wait: LoadWait,
    /// Split each server's CPU into kernel and user by `perf record`
    /// samples (1,999 Hz) instead of `/proc`'s scheduler-tick accounting,
    /// which a server ticking every 50 ms can bias (needs `perf`).
    #[arg(long)]
    pub perf_split: bool,
    /// Also list, for each row, the N kernel functions the servers' kernel
    /// part went to (inclusive µs per client-second, each server's median,
    /// from `perf record -g`; implies `--perf-split`): where tessera's
    /// kernel part differs from the floor's. 0: none.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub kernel_top: usize,
    /// Keep each run's perf data (`<server>-<clients>-<pid>.perf.data`) in
    /// this directory, created if missing, for `perf report -i` by hand
    /// (implies `--perf-split`).
    #[arg(long, value_name = "DIR")]
    pub perf_keep: Option<std::path::PathBuf>,
    /// A tessera config override, `KEY=VALUE` as the server's `--set`
    /// takes it (repeatable; applied after the bench's own settings):
    /// tuning knobs measured against the same floor, e.g.
    /// `--tessera-set gateway.io_poll_ms=25`. Checked before any run.
    #[arg(long = "tessera-set", value_name = "KEY=VALUE")]
    pub tessera_sets: Vec<String>,
    /// The world sized for about this many entities in each view
    /// (loadgen's `--in-view`), for tessera and the load alike: a small
    /// figure (1) measures tessera's client path with almost no view to
    /// keep, the same traffic in, against the same floor.
    #[arg(long, default_value_t = DEFAULT_IN_VIEW, value_name = "N")]
    pub in_view: f64,
    /// A short run: 200 clients, 2 s window, 1 repeat, 1 s settle.
    #[arg(long)]
    pub quick: bool,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    pub bench: bool,
    /// A role started by the run itself.
    #[command(subcommand)]
    pub child: Option<Child>,
}

/// A server of the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ServerArg {
    /// The bare epoll loop.
    Epoll,
    /// The bare io_uring loop.
    IoUring,
    /// tessera (its default socket loop, io_uring).
    Tessera,
    /// tessera with `gateway.io_backend = "epoll"`.
    TesseraEpoll,
}

/// The roles (hidden).
#[derive(Debug, Subcommand)]
pub enum Child {
    /// One process of the run.
    #[command(hide = true)]
    Child {
        /// Which.
        #[command(subcommand)]
        role: Role,
    },
}

/// A child's role.
#[derive(Debug, Subcommand)]
pub enum Role {
    /// The bare epoll server.
    Epoll(BareArgs),
    /// The bare io_uring server.
    #[command(name = "io_uring")]
    Uring(BareArgs),
    /// tessera, one shard (its default socket loop, io_uring).
    Tessera(TesseraArgs),
    /// tessera, one shard, on the epoll socket loop.
    #[command(name = "tessera_epoll")]
    TesseraEpoll(TesseraArgs),
    /// The load.
    Load(LoadArgs),
}

/// A bare server's arguments.
#[derive(Debug, Args)]
pub struct BareArgs {
    #[arg(long)]
    clients: usize,
    #[arg(long)]
    cpu: usize,
    #[arg(long)]
    poll_ms: u64,
    #[arg(long)]
    tick_ms: u64,
    #[arg(long)]
    bytes_per_tick: usize,
    #[arg(long, default_value_t = 0)]
    touch_bytes: usize,
    #[arg(long)]
    own_buffers: bool,
    #[arg(long, default_value_t = 1)]
    phases: usize,
}

/// tessera's arguments.
#[derive(Debug, Args)]
pub struct TesseraArgs {
    #[arg(long)]
    clients: usize,
    #[arg(long)]
    cpu: usize,
    /// Write to every client this often, ms (the bare servers' tick).
    #[arg(long)]
    tick_ms: u64,
    /// Config overrides (`--tessera-set`), `KEY=VALUE`.
    #[arg(long = "set")]
    sets: Vec<String>,
    /// The world sized for about this many in each view (`--in-view`).
    #[arg(long, default_value_t = DEFAULT_IN_VIEW)]
    in_view: f64,
}

/// The load's arguments.
#[derive(Debug, Args)]
pub struct LoadArgs {
    #[arg(long)]
    clients: usize,
    #[arg(long)]
    cpu: usize,
    #[arg(long)]
    addr: std::net::SocketAddr,
    #[arg(long)]
    peer: String,
    #[arg(long)]
    move_hz: f64,
    #[arg(long, value_delimiter = ',')]
    world: Vec<f64>,
    #[arg(long, value_enum, default_value_t = LoadWait::Epoll)]
    wait: LoadWait,
}

/// Entities in each view the world is sized for, by default: loadgen's.
pub const DEFAULT_IN_VIEW: f64 = 60.0;

/// Handshakes the load keeps in flight (below the listeners' backlog).
pub const HANDSHAKES_MAX: usize = 256;
/// Connections the load opens per second (10,000 in 5 s).
pub const CONNECTS_PER_S: f64 = 2_000.0;
/// Bytes a load client holds unsent before its moves are dropped.
pub const UNSENT_BYTES_MAX: usize = 64 * 1024;
/// Ground step per move, metres: 0.5 m at 10 Hz is 5 m/s, under tessera's
/// 12 m/s limit.
pub const STEP_M: f64 = 0.5;

/// Runs what the command line asks.
///
/// # Errors
/// Bad arguments for a child, or a child that cannot start.
pub fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.child {
        Some(Child::Child { role }) => child(role),
        None => run(cli),
    }
}

fn child(role: Role) -> anyhow::Result<()> {
    let bare = |a: &BareArgs| BarePlan {
        clients: a.clients,
        poll_ms: a.poll_ms,
        tick_ms: a.tick_ms,
        bytes_per_tick: a.bytes_per_tick,
        touch_bytes: a.touch_bytes,
        own_buffers: a.own_buffers,
        phases: a.phases.max(1),
    };
    match role {
        Role::Epoll(a) => {
            sys::pin(a.cpu)?;
            epoll_server::run(&bare(&a))
        }
        Role::Uring(a) => {
            sys::pin(a.cpu)?;
            uring_server::run(&bare(&a))
        }
        Role::Tessera(a) => {
            sys::pin(a.cpu)?;
            let extra = tessera_server::extra_args(a.in_view, &a.sets);
            tessera_server::run(a.clients, a.cpu, a.tick_ms, "auto", &extra)
        }
        Role::TesseraEpoll(a) => {
            sys::pin(a.cpu)?;
            let extra = tessera_server::extra_args(a.in_view, &a.sets);
            tessera_server::run(a.clients, a.cpu, a.tick_ms, "epoll", &extra)
        }
        Role::Load(a) => {
            sys::pin(a.cpu)?;
            let [min_x, min_z, max_x, max_z] = a.world[..] else {
                anyhow::bail!("--world takes min_x,min_z,max_x,max_z");
            };
            let peer = match a.peer.as_str() {
                "tessera" => Peer::Tessera,
                "bare" => Peer::Bare,
                p => anyhow::bail!("--peer {p}: tessera or bare"),
            };
            driver::run(&LoadPlan {
                addr: a.addr,
                clients: a.clients,
                move_hz: a.move_hz,
                step_m: STEP_M,
                world: Bounds {
                    min_x,
                    min_z,
                    max_x,
                    max_z,
                },
                peer,
                handshakes_max: HANDSHAKES_MAX,
                unsent_bytes_max: UNSENT_BYTES_MAX,
                connects_per_s: CONNECTS_PER_S,
                seed: 21,
                wait: a.wait,
            })
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let mut o = RunOpts {
        clients: cli.clients,
        window_s: cli.window_s,
        repeats: cli.repeats.max(1),
        settle_s: cli.settle_s,
        ramp_timeout_s: cli.ramp_timeout_s,
        server_cpu: cli.server_cpu,
        load_cpu: cli.load_cpu,
        poll_ms: cli.poll_ms,
        tick_ms: cli.tick_ms,
        bytes_per_tick: cli.bytes_per_tick,
        move_hz: cli.move_hz,
        touch_bytes: cli.bare_touch_kib.saturating_mul(1024),
        own_buffers: cli.bare_own_buffers,
        phases: cli.bare_phases as usize,
        load_wait: cli.load_wait,
        perf_split: cli.perf_split || cli.kernel_top > 0 || cli.perf_keep.is_some(),
        kernel_top: cli.kernel_top,
        perf_keep: cli.perf_keep.clone(),
        tessera_sets: cli.tessera_sets.clone(),
        in_view: cli.in_view,
    };
    if let Some(dir) = &o.perf_keep {
        std::fs::create_dir_all(dir)
            .map_err(|e| anyhow::anyhow!("--perf-keep {}: {e}", dir.display()))?;
    }
    if o.perf_split {
        super::perf_split::check()?;
    }
    // A bad override is named now, not by a child that fails to start.
    for &n in &o.clients {
        tessera_server::config_with(n, o.server_cpu, o.tick_ms, "auto", &o.tessera_extra())
            .map_err(|e| {
                anyhow::anyhow!(
                    "--in-view {} --tessera-set {:?}: {e:#}",
                    o.in_view,
                    o.tessera_sets
                )
            })?;
    }
    if cli.quick {
        o.clients = vec![200];
        o.window_s = 2.0;
        o.repeats = 1;
        o.settle_s = 1.0;
        o.ramp_timeout_s = 20.0;
    }
    // The load holds every client in one process: check the file limit
    // here, before any child starts, with the same clear error.
    let most = o.clients.iter().copied().max().unwrap_or(0);
    sys::raise_nofile(sys::files_for(most))?;
    let kinds: Vec<Kind> = cli
        .servers
        .iter()
        .map(|s| match s {
            ServerArg::Epoll => Kind::Epoll,
            ServerArg::IoUring => Kind::Uring,
            ServerArg::Tessera => Kind::Tessera,
            ServerArg::TesseraEpoll => Kind::TesseraEpoll,
        })
        .collect();
    eprintln!(
        "clients: servers on CPU {}, load on CPU {}, window {} s, {} repeat(s), rows {:?}",
        o.server_cpu, o.load_cpu, o.window_s, o.repeats, o.clients
    );
    let samples = orchestrate::run_all(&o, &kinds);
    let mut rows: Vec<_> = o
        .clients
        .iter()
        .map(|&n| orchestrate::row(n, &samples))
        .collect();
    println!("{}", orchestrate::table(&rows));
    if o.kernel_top > 0 {
        for (row, &n) in rows.iter_mut().zip(&o.clients) {
            let fns = super::kernel_fns::rows(n, &samples, o.kernel_top);
            println!("{}", super::kernel_fns::table(n, &fns));
            row["kernel_functions"] = Value::Array(fns);
        }
    }
    println!(
        "{}",
        json!({"bench": "clients", "rows": rows, "window_s": o.window_s, "repeats": o.repeats,
               "poll_ms": o.poll_ms, "tick_ms": o.tick_ms, "bytes_per_tick": o.bytes_per_tick,
               "tessera_sets": o.tessera_sets, "in_view": o.in_view,
               "split": if o.perf_split { "perf" } else { "ticks" },
               // Keys sort: "bench" stays first, as the issue prints it.
               "experiments": {"bare_touch_kib": cli.bare_touch_kib,
                   "bare_own_buffers": o.own_buffers, "bare_phases": o.phases,
                   "load_wait": o.load_wait}})
    );
    let planned = o.clients.len() * o.repeats * kinds.len();
    if samples.len() < planned {
        anyhow::bail!(
            "{} of {planned} runs failed (see above)",
            planned - samples.len()
        );
    }
    Ok(())
}
