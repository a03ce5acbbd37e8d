//! The `tessera` binary: configuration checks and the deterministic
//! simulator today; the server runtime joins it in a later issue.

use anyhow::Context;
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use tessera::config::Config;

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
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Load and validate the configuration, print its world fingerprint.
    CheckConfig,
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

fn run() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    let config =
        Config::load(cli.config.as_deref(), &cli.overrides).context("invalid configuration")?;
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
        None => {
            eprintln!("tessera: no command given; see `tessera --help`");
            Ok(ExitCode::from(2))
        }
    }
}
