//! The command line of `loadgen`.
//!
//! Owns the flags, their defaults and the parsing of durations; turning
//! them into a server config and a run plan is [`crate::run`]'s job.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

use crate::scenario::Scenario;

/// Thousands of bot clients against a tessera server, with latency
/// histograms, a live line, a summary table, a JSON report and charts.
///
/// With no `--server`, a server is started in this process from the
/// embedded default config (or `--config FILE`, `--shards`, `--ghost-radius`,
/// `--npcs`, `--set`), so one command runs a whole benchmark.
#[derive(Clone, Debug, Parser)]
#[command(name = "loadgen", version)]
pub struct Cli {
    /// Bots (one TCP connection each).
    #[arg(long, default_value_t = 100)]
    pub bots: u32,
    /// How long the bots move after the ramp (e.g. 60s, 2m, 500ms).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Connect to this server (host:port) instead of an embedded one.
    #[arg(long, value_name = "HOST:PORT")]
    pub server: Option<String>,
    /// The remote server's admin address, for its /metrics counters.
    #[arg(long, value_name = "HOST:PORT", requires = "server")]
    pub server_admin: Option<String>,
    /// The remote server's ticket key (its `gateway.key_file`), for a
    /// server with `gateway.auth = "hmac"`: bots sign their logins with it.
    #[arg(long, value_name = "FILE", requires = "server")]
    pub key_file: Option<PathBuf>,
    /// The remote server's process id (same machine), for its CPU use.
    #[arg(long, value_name = "PID", requires = "server")]
    pub server_pid: Option<u32>,
    /// Config file of the embedded server (only the keys it changes).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Shards of the embedded server (runtime.shards; 0 = one per CPU).
    #[arg(long)]
    pub shards: Option<u16>,
    /// Ghost radius of the embedded server, metres (world.ghost_radius_m).
    #[arg(long, value_name = "M")]
    pub ghost_radius: Option<f64>,
    /// Server-side NPC wanderers in the embedded server (server.npcs).
    #[arg(long)]
    pub npcs: Option<u32>,
    /// Any other embedded-server override, `section.key=value` (repeatable).
    #[arg(long = "set", value_name = "SECTION.KEY=VALUE")]
    pub sets: Vec<String>,
    /// Bot threads (pinned, each one batched epoll loop over its bots'
    /// sockets); 0 = one per available CPU. Nothing spins, so they share
    /// the CPUs with an embedded server's shards.
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Do not pin bot threads to CPUs.
    #[arg(long)]
    pub no_pin: bool,
    /// Connect the bots evenly over this long (e.g. 5s).
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub ramp: Duration,
    /// What the bots do.
    #[arg(long, value_enum, default_value_t = Scenario::RandomWalk)]
    pub scenario: Scenario,
    /// Hits per bot per second on visible targets (0 = none).
    #[arg(long, default_value_t = 0.0)]
    pub attack_rate: f64,
    /// Scenario `spaces`: space hops per bot per second (into a town or a
    /// dungeon by type, and later back to the world).
    #[arg(long, default_value_t = 0.2)]
    pub space_rate: f64,
    /// The server's hit range, metres: bots hit only targets shown within
    /// 0.8 x this distance.
    #[arg(long, default_value_t = 10.0)]
    pub hit_range: f64,
    /// Moves per bot per second.
    #[arg(long, default_value_t = 10.0)]
    pub move_hz: f64,
    /// When each bot's moves fall within its move period: `random` (its
    /// own seeded offset, as game clients run their own clocks) or `spawn`
    /// (right when its own snapshot arrives, i.e. just after a server tick:
    /// every move then waits most of a tick, the worst phase).
    #[arg(long, value_enum, default_value_t = crate::scenario::MovePhase::Random)]
    pub move_phase: crate::scenario::MovePhase,
    /// Bot walking speed, metres per second.
    #[arg(long, default_value_t = 5.0)]
    pub speed: f64,
    /// Entities wanted in each bot's area of interest: sizes the embedded
    /// server's world (with --world auto).
    #[arg(long, default_value_t = 60.0)]
    pub in_view: f64,
    /// `auto`: the embedded server's world is sized for --in-view, with
    /// spawns where the scenario needs them (the centre for border patrol)
    /// and no speed limit for teleports; `config`: the config's world as is.
    #[arg(long, value_enum, default_value_t = WorldMode::Auto)]
    pub world: WorldMode,
    /// Teleport scenario: jumps per bot per second.
    #[arg(long, default_value_t = 0.1)]
    pub teleport_rate: f64,
    /// Hotspot scenario: converge-then-disperse period (converge for the
    /// first half). 60s: at 5 m/s a bot walks 150 m while converging, most
    /// of the way across the auto world.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub hotspot_period: Duration,
    /// Border patrol: swing to either side of the border, metres.
    #[arg(long, default_value_t = 20.0)]
    pub border_amplitude: f64,
    /// After the bots stop moving, wait this long for acks before Bye.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub settle: Duration,
    /// Seed of the bots' random streams.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write every figure to this JSON file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write PNG charts into this directory.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// Fail (exit 1) if the update latency p99 exceeds this, ms.
    #[arg(long, value_name = "MS")]
    pub max_p99_ms: Option<f64>,
    /// Fail (exit 1) if more bots than this, together, never connect or
    /// disconnect before the run's end.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub max_disconnects: u64,
    /// Fail (exit 1) if the average entities in a bot's view fall below
    /// this fraction of what the auto world's density implies (judged with
    /// `--world auto` on the embedded server, random spawns and no spaces).
    #[arg(long, value_name = "FRACTION", default_value_t = 0.25)]
    pub min_in_view_fraction: f64,
    /// Fail (exit 1) if fewer than this fraction of the moves sent were
    /// acknowledged.
    #[arg(long, value_name = "FRACTION", default_value_t = 0.5)]
    pub min_ack_fraction: f64,
    /// Share of bots that run every view check (the others decode every
    /// frame, ack and time their own stream but skip other entities'
    /// events): update latency, in-view and band figures then come from
    /// the checked bots only, and the report says how many they were.
    #[arg(long, value_name = "F", default_value_t = 1.0)]
    pub check_fraction: f64,
    /// Bytes each socket read takes (each bot thread's one read buffer).
    #[arg(long, value_name = "BYTES", default_value_t = 64 << 10, hide = true)]
    pub read_bytes: usize,
    /// Readiness events a bot thread takes per wait of the epoll loop (a
    /// round waits again while a wait comes back full).
    #[arg(long, value_name = "N", default_value_t = 1024, hide = true)]
    pub events_max: usize,
    /// How the bot threads do their socket I/O: `io-uring` (one ring per
    /// thread, one submission a round for all its sends and receives, as
    /// the server's client port), `epoll` (a `send` and a `recv` syscall
    /// per socket), or `auto`: io_uring where this kernel gives it (Linux
    /// 6.1 or later, io_uring not blocked by a seccomp profile), else
    /// epoll with a note.
    #[arg(long, value_enum, default_value_t = IoKind::Auto)]
    pub io: IoKind,
    /// io_uring loop: provided receive buffers per bot thread (a power of
    /// two, at most 32,768).
    #[arg(long, value_name = "N", default_value_t = 8192, hide = true)]
    pub uring_buffers: u32,
    /// io_uring loop: bytes per receive buffer.
    #[arg(long, value_name = "BYTES", default_value_t = 2048, hide = true)]
    pub uring_buffer_bytes: u32,
    /// Print the `--set` overrides a separate server process needs to
    /// match the auto world of these flags (for `tessera` and `loadgen
    /// --server ... --set ...`), then exit.
    #[arg(long)]
    pub print_server_sets: bool,
    /// No live line (the summary is still printed).
    #[arg(long)]
    pub quiet: bool,
}

/// How the embedded server's world is chosen (`--world`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum WorldMode {
    /// Sized for the bots and --in-view.
    Auto,
    /// As the config says.
    Config,
}

/// Parses `90`, `90s`, `1.5s`, `500ms`, `2m`, `1h` into a duration.
///
/// # Errors
/// A message naming the accepted forms.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("`{text}`: expected a number with s, ms, m or h"))?;
    let scale = match unit {
        "" | "s" => 1.0,
        "ms" => 1e-3,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => return Err(format!("`{text}`: unknown unit `{unit}` (s, ms, m, h)")),
    };
    let secs = v * scale;
    if !(secs.is_finite() && secs >= 0.0) {
        return Err(format!("`{text}`: not a duration"));
    }
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("60s"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("s").is_err());
    }

    #[test]
    fn the_ci_smoke_command_parses() {
        let cli = Cli::try_parse_from([
            "loadgen",
            "--bots",
            "300",
            "--duration",
            "10s",
            "--scenario",
            "border-patrol",
            "--attack-rate",
            "0.5",
            "--json",
            "report.json",
        ])
        .expect("parses");
        assert_eq!(cli.bots, 300);
        assert_eq!(cli.scenario, Scenario::BorderPatrol);
        assert_eq!(cli.duration, Duration::from_secs(10));
        let spaces =
            Cli::try_parse_from(["loadgen", "--scenario", "spaces", "--space-rate", "0.5"])
                .expect("parses");
        assert_eq!(
            (spaces.scenario, spaces.space_rate),
            (Scenario::Spaces, 0.5)
        );
        assert!(Cli::try_parse_from(["loadgen", "--server-admin", "x:1"]).is_err());
    }
}

/// How the bot threads do their socket I/O (`--io`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum IoKind {
    /// io_uring where the kernel gives it, else epoll (resolved before
    /// the bots start: a plan never carries it)
    #[default]
    Auto,
    /// One io_uring per bot thread, one enter a round (src/uring_loop.rs)
    IoUring,
    /// One epoll set per bot thread, a syscall per socket operation
    /// (src/event_loop.rs)
    Epoll,
}
