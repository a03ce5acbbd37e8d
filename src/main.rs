//! The `tessera` binary: with no subcommand it serves (the cell host on
//! every shard until SIGINT/SIGTERM); `check-config`, `sim`, `ticket` and
//! `keygen` otherwise.

use anyhow::Context;
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use tessera::config::Config;
use tessera::server::EmbeddedServer;
use tessera::sim::options::{Scenario, SimOptions};
use tessera::sim::report::replay_command;
use tessera::sim::world::WorldParams;
use tessera::sim::world_run::run_one;

/// mimalloc underneath everything: much faster than glibc when objects are
/// freed on another core (batches cross shards) and with a large live set.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// tessera: a seamless-world MMO cell server.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Cli {
    /// A TOML config file; keys it leaves out keep the embedded defaults.
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    /// Override one key, e.g. `--set world.ghost_radius_m=80` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE", global = true)]
    overrides: Vec<String>,
    /// Print the effective configuration as TOML and exit.
    #[arg(long, global = true)]
    print_config: bool,
    /// Accept `testing.fault` other than "none" (faults injected on
    /// purpose, for tests only).
    #[arg(long, global = true)]
    allow_faults: bool,
    /// Accept clients on this address (overrides `gateway.listen_addr`).
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
    /// Serve the admin endpoint on this address (overrides `admin.listen_addr`).
    #[arg(long, value_name = "ADDR")]
    admin: Option<String>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Load and validate the configuration, print its world fingerprint.
    CheckConfig,
    /// Run the deterministic simulator: one seed, or a swarm of seeds.
    /// Options not given are drawn from each seed (VOPR swarm); given ones
    /// apply to every seed. Cell knobs come from the config (`--config`).
    Sim(Box<SimArgs>),
    /// Mint a signed login ticket (for tests and tools; a game's login
    /// service does the same) with the key of `gateway.key_file`.
    Ticket {
        /// The account the ticket logs in.
        #[arg(long)]
        account: String,
        /// Seconds until it expires.
        #[arg(long, default_value_t = 300)]
        ttl_s: u64,
    },
    /// Print a new random ticket key (hex, 32 bytes) for `gateway.key_file`.
    Keygen,
}

/// `tessera sim` options (every flag `report::replay_command` prints).
#[derive(clap::Args, Debug, Default)]
struct SimArgs {
    /// The seed to run (with --seeds: the first of the swarm).
    #[arg(long)]
    seed: Option<u64>,
    /// Run this many consecutive seeds.
    #[arg(long)]
    seeds: Option<u64>,
    /// random-walk, border-walk, teleport, combat-storm, merge-drain, hotspot, crowd, swing (the last two on the balanced space tree).
    #[arg(long)]
    scenario: Option<Scenario>,
    #[arg(long)]
    shards: Option<u16>,
    #[arg(long)]
    cells: Option<u32>,
    #[arg(long)]
    entities: Option<u32>,
    /// Ticks of phase one (faults).
    #[arg(long)]
    ticks: Option<u64>,
    /// Ticks of phase two (healing).
    #[arg(long)]
    heal_ticks: Option<u64>,
    #[arg(long)]
    tick_ms: Option<u64>,
    #[arg(long)]
    world_side_m: Option<f64>,
    #[arg(long)]
    bot_speed_mps: Option<f64>,
    #[arg(long)]
    latency_min_us: Option<u64>,
    #[arg(long)]
    latency_max_us: Option<u64>,
    #[arg(long)]
    latency_pair_skew_us_max: Option<u64>,
    #[arg(long)]
    burst_probability: Option<f64>,
    #[arg(long)]
    burst_us_max: Option<u64>,
    #[arg(long)]
    in_flight_per_pair_max: Option<usize>,
    #[arg(long)]
    stall_probability: Option<f64>,
    #[arg(long)]
    stall_ms_max: Option<u64>,
    /// Print one line per seed.
    #[arg(long)]
    verbose: bool,
}

impl SimArgs {
    /// The swarm options of `seed` with every given flag applied.
    fn options(&self, seed: u64) -> SimOptions {
        let mut o = SimOptions::swarm(seed);
        macro_rules! set {
            ($($field:ident => $($path:ident).+),* $(,)?) => {$(
                if let Some(v) = self.$field { o.$($path).+ = v; }
            )*};
        }
        set!(
            scenario => scenario, shards => shards, cells => cells,
            entities => entities, ticks => ticks, heal_ticks => heal_ticks,
            tick_ms => tick_ms, world_side_m => world_side_m,
            bot_speed_mps => bot_speed_mps, latency_min_us => latency.min_us,
            latency_max_us => latency.max_us,
            latency_pair_skew_us_max => latency.pair_skew_us_max,
            burst_probability => latency.burst_probability,
            burst_us_max => latency.burst_us_max,
            in_flight_per_pair_max => in_flight_per_pair_max,
            stall_probability => stall_probability, stall_ms_max => stall_ms_max,
        );
        // A given cell count below the drawn shard count (or the reverse)
        // is resolved in favour of what was given.
        if self.cells.is_some() && self.shards.is_none() {
            o.shards = o.shards.min(o.cells.min(u32::from(u16::MAX)) as u16).max(1);
        }
        if self.shards.is_some() && self.cells.is_none() {
            o.cells = o.cells.max(u32::from(o.shards));
        }
        o
    }
}

fn run_sim(
    args: &SimArgs,
    config: &Config,
    config_path: Option<&std::path::Path>,
) -> anyhow::Result<ExitCode> {
    let params = WorldParams::from_config(config);
    let first = args.seed.unwrap_or(0);
    let count = args.seeds.unwrap_or(1);
    let started = std::time::Instant::now();
    let mut total = tessera::sim::report::SimSummary::default();
    let mut failed = Vec::new();
    let (mut views, mut hits) = (0u64, [0u64; 3]);
    for seed in first..first.saturating_add(count) {
        let options = args.options(seed);
        let out = run_one(&options, &params).with_context(|| format!("seed {seed}"))?;
        if args.verbose {
            let (o, s, w) = (&options, &out.summary, &out.stats);
            println!(
                "seed {seed}: {} {}sh {}c {}e {}t: {} migrations, {} forwarded, {} stalls, \
                 {} calls, {} teleports, {} deferred, {} layout changes, {} violations",
                o.scenario,
                o.shards,
                o.cells,
                o.entities,
                s.ticks,
                s.migrations,
                s.forwarded,
                w.stalls,
                w.calls_issued,
                w.teleports,
                w.deferred_effects,
                w.layout_changes,
                s.violations
            );
        }
        total.merge(&out.summary);
        views += out.stats.view_batches;
        hits[0] += out.stats.hits_tried;
        hits[1] += out.stats.hits_landed;
        hits[2] += out.stats.hits_expired;
        if !out.passed() {
            failed.push(out);
        }
    }
    let secs = started.elapsed().as_secs_f64();
    total.sim_ticks_per_s = if secs > 0.0 {
        total.ticks as f64 / secs
    } else {
        0.0
    };
    let config_flag = config_path.map_or(String::new(), |p| format!(" --config {}", p.display()));
    for out in &failed {
        println!("FAILED seed {}:", out.options.seed);
        for v in &out.violations {
            println!("  {v}");
            for line in v.context.lines() {
                println!("    {line}");
            }
        }
        println!("  replay: {}{config_flag}", replay_command(&out.options));
    }
    println!("{total}");
    println!(
        "client views: {views} batches checked; hits: {} tried, {} landed, {} expired",
        hits[0], hits[1], hits[2]
    );
    println!("{}", total.to_json_line());
    Ok(if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(err) => {
            eprintln!("tessera: {err:#}");
            ExitCode::from(2)
        }
    }
}

/// Runs the server until a signal stops it; exit 0 on a clean stop.
fn serve(config: &Config) -> anyhow::Result<ExitCode> {
    if tessera::INVARIANT_CHECKS {
        tracing::warn!(
            "built with the costly invariant checks (feature `verify`, which every `cargo test` \
             build turns on, target/release/tessera included): not a binary to benchmark; \
             `cargo build --release --bin tessera` makes a plain one"
        );
    }
    let mut server = EmbeddedServer::start(config).context("cannot start the server")?;
    server
        .handle()
        .stop_on_signals()
        .context("cannot install signal handlers")?;
    tracing::info!(
        shards = server.handle().shards(),
        clients = %server.client_addr(),
        "tessera serving"
    );
    while !server.is_stopping() {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let c = server.stop().context("a shard failed")?;
    tracing::info!(reals = c.reals, clients = c.clients, "tessera stopped");
    Ok(ExitCode::SUCCESS)
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// The effective configuration; a `testing.fault` other than none is
/// refused unless `allow_faults` (`--allow-faults`).
///
/// # Errors
/// [`tessera::config::ConfigError`] naming the file, key or rule at fault.
fn load_config(
    file: Option<&std::path::Path>,
    overrides: &[String],
    allow_faults: bool,
) -> Result<Config, tessera::config::ConfigError> {
    let config = Config::load(file, overrides)?;
    config.testing.check_allowed(allow_faults)?;
    Ok(config)
}

fn run() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    init_tracing();
    let mut overrides = cli.overrides.clone();
    if let Some(addr) = &cli.listen {
        overrides.push(format!("gateway.listen_addr=\"{addr}\""));
    }
    if let Some(addr) = &cli.admin {
        overrides.push(format!("admin.listen_addr=\"{addr}\""));
    }
    let config = load_config(cli.config.as_deref(), &overrides, cli.allow_faults)
        .context("invalid configuration")?;
    if cli.print_config {
        print!("{}", config.to_toml());
        return Ok(ExitCode::SUCCESS);
    }
    match cli.command {
        Some(Command::CheckConfig) => {
            println!(
                "config ok; world fingerprint {:016x}",
                config.world.fingerprint()
            );
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Sim(args)) => run_sim(&args, &config, cli.config.as_deref()),
        Some(Command::Ticket { account, ttl_s }) => {
            let key = config
                .gateway
                .ticket_key()?
                .context("gateway.auth is \"none\": set auth = \"hmac\" and key_file")?;
            anyhow::ensure!(
                tessera::server::gateway::ticket::valid_account(&account),
                "an account is 1..=64 bytes of [A-Za-z0-9_-]"
            );
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)?
                .as_secs();
            let mut nonce = [0u8; 8];
            getrandom::getrandom(&mut nonce).map_err(|e| anyhow::anyhow!("random nonce: {e}"))?;
            let ticket = tessera::server::gateway::mint(
                &key,
                &account,
                now + ttl_s,
                u64::from_le_bytes(nonce),
            );
            println!("{ticket}");
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Keygen) => {
            let mut key = [0u8; 32];
            getrandom::getrandom(&mut key).map_err(|e| anyhow::anyhow!("random key: {e}"))?;
            println!("{}", hex::encode(key));
            Ok(ExitCode::SUCCESS)
        }
        None => serve(&config),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fault_is_refused_without_allow_faults() {
        let fault = ["testing.fault=\"silence\"".to_owned()];
        let err = load_config(None, &fault, false).expect_err("refused");
        assert!(err.to_string().contains("testing.fault"), "{err}");
        assert!(err.to_string().contains("--allow-faults"), "{err}");
        let config = load_config(None, &fault, true).expect("allowed");
        assert_eq!(config.testing.fault, "silence");
        assert!(load_config(None, &[], false).is_ok());
        let cli =
            Cli::try_parse_from(["tessera", "--allow-faults", "check-config"]).expect("parses");
        assert!(cli.allow_faults);
    }
}
