//! `tuning`: compare values of one config key on the same simulated worlds.
//!
//! `tuning sweep --key cell.migrate_margin_m --values 2,4,8 --seeds 10
//! --scenario border-walk` runs the deterministic simulator over the same
//! seeds once per value (every other key from `--config` and `--set`, or the
//! embedded defaults) and prints one row per value: migrations and forwards
//! per 1,000 ticks, violations and simulation speed, then one JSON line.
//! With `--json` it prints only JSON lines, one row per value as it is done:
//! `{"key", "value", "migrations_per_kilotick", "forwarded_per_kilotick",
//! "view_batches", "view_batches_per_kilotick", "hits_landed", "summary"}`.
//! Because the simulator is deterministic, a difference between rows comes
//! from the value, not from noise (speed excepted).

use anyhow::{bail, Context};
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;
use tessera::config::Config;
use tessera::sim::options::{Scenario, SimOptions};
use tessera::sim::report::SimSummary;
use tessera::sim::world::WorldParams;
use tessera::sim::world_run::run_one;

#[derive(Parser, Debug)]
#[command(about = "Tuning tools for tessera")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the simulator once per value of one config key, on the same seeds.
    Sweep(SweepArgs),
}

#[derive(clap::Args, Debug)]
struct SweepArgs {
    /// The dotted config key to vary, e.g. `cell.migrate_margin_m`.
    #[arg(long)]
    key: String,
    /// Comma-separated values (TOML syntax), e.g. `2,4,8`.
    #[arg(long, value_delimiter = ',', required = true)]
    values: Vec<String>,
    /// A base config file (keys it leaves out keep the embedded defaults).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Further overrides applied before the swept key (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    overrides: Vec<String>,
    /// Seeds per value (0..N).
    #[arg(long, default_value_t = 10)]
    seeds: u64,
    /// Run every seed with this scenario (otherwise each seed draws one).
    #[arg(long)]
    scenario: Option<Scenario>,
    /// Ticks of phase one per seed (otherwise drawn from the seed).
    #[arg(long)]
    ticks: Option<u64>,
    /// Print one JSON object per value (JSON lines) instead of the table.
    #[arg(long)]
    json: bool,
}

/// One row of the sweep.
#[derive(serde::Serialize)]
struct Row {
    key: String,
    value: String,
    migrations_per_kilotick: f64,
    forwarded_per_kilotick: f64,
    /// View batches the simulated clients received and checked.
    view_batches: u64,
    view_batches_per_kilotick: f64,
    hits_landed: u64,
    summary: SimSummary,
}

fn options(args: &SweepArgs, seed: u64) -> SimOptions {
    let mut o = SimOptions::swarm(seed);
    if let Some(s) = args.scenario {
        o.scenario = s;
    }
    if let Some(t) = args.ticks {
        o.ticks = t;
    }
    o
}

fn config_for(args: &SweepArgs, value: &str) -> anyhow::Result<Config> {
    let mut overrides = args.overrides.clone();
    overrides.push(format!("{}={value}", args.key));
    Config::load(args.config.as_deref(), &overrides)
        .with_context(|| format!("{} = {value}", args.key))
}

fn run_value(args: &SweepArgs, value: &str) -> anyhow::Result<Row> {
    let params = WorldParams::from_config(&config_for(args, value)?);
    let started = Instant::now();
    let mut total = SimSummary::default();
    let (mut view_batches, mut hits_landed) = (0, 0);
    for seed in 0..args.seeds {
        let out = run_one(&options(args, seed), &params).with_context(|| format!("seed {seed}"))?;
        total.merge(&out.summary);
        view_batches += out.stats.view_batches;
        hits_landed += out.stats.hits_landed;
    }
    let secs = started.elapsed().as_secs_f64().max(1e-9);
    total.sim_ticks_per_s = total.ticks as f64 / secs;
    let per_kilotick = |n: u64| n as f64 * 1000.0 / (total.ticks.max(1) as f64);
    Ok(Row {
        key: args.key.clone(),
        value: value.to_owned(),
        migrations_per_kilotick: per_kilotick(total.migrations),
        forwarded_per_kilotick: per_kilotick(total.forwarded),
        view_batches,
        view_batches_per_kilotick: per_kilotick(view_batches),
        hits_landed,
        summary: total,
    })
}

fn sweep(args: &SweepArgs) -> anyhow::Result<ExitCode> {
    if args.seeds == 0 {
        bail!("--seeds must be at least 1");
    }
    for value in &args.values {
        config_for(args, value)?;
    }
    if args.json {
        let mut clean = true;
        for value in &args.values {
            let row = run_value(args, value)?;
            clean &= row.summary.violations == 0;
            println!("{}", serde_json::to_string(&row)?);
        }
        return Ok(if clean {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        });
    }
    println!(
        "{:>12} {:>6} {:>8} {:>10} {:>11} {:>10} {:>11} {:>10} {:>10}",
        args.key.rsplit('.').next().unwrap_or(&args.key),
        "seeds",
        "ticks",
        "migr",
        "migr/1kt",
        "fwd",
        "fwd/1kt",
        "views/1kt",
        "violations"
    );
    let mut rows = Vec::new();
    for value in &args.values {
        let row = run_value(args, value)?;
        let s = &row.summary;
        println!(
            "{:>12} {:>6} {:>8} {:>10} {:>11.1} {:>10} {:>11.1} {:>10.1} {:>10}   ({:.0} ticks/s)",
            row.value,
            s.seeds,
            s.ticks,
            s.migrations,
            row.migrations_per_kilotick,
            s.forwarded,
            row.forwarded_per_kilotick,
            row.view_batches_per_kilotick,
            s.violations,
            s.sim_ticks_per_s
        );
        rows.push(row);
    }
    let json = serde_json::json!({ "key": args.key, "rows": rows });
    println!("{json}");
    let clean = rows.iter().all(|r| r.summary.violations == 0);
    Ok(if clean {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Sweep(args) => sweep(args),
    };
    result.unwrap_or_else(|err| {
        eprintln!("tuning: {err:#}");
        ExitCode::from(2)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sweep_args(extra: &[&str]) -> SweepArgs {
        let mut argv = vec!["tuning", "sweep"];
        argv.extend_from_slice(extra);
        match Cli::try_parse_from(argv).expect("valid arguments").command {
            Command::Sweep(a) => a,
        }
    }

    /// The simulator honours `[aoi]`: two radii give different figures on
    /// the same seeds, and `--json` rows carry the value and its figures.
    /// (80 m needs a larger leave radius and ghost radius than the defaults:
    /// `--set world.ghost_radius_m=100 --set aoi.leave_radius_m=88`.)
    #[test]
    fn aoi_radius_changes_the_rows() {
        let args = sweep_args(&[
            "--set",
            "world.ghost_radius_m=100",
            "--set",
            "aoi.leave_radius_m=88",
            "--key",
            "aoi.radius_m",
            "--values",
            "30,80",
            "--seeds",
            "2",
            "--scenario",
            "border-walk",
            "--ticks",
            "150",
            "--json",
        ]);
        assert!(args.json);
        let rows: Vec<serde_json::Value> = args
            .values
            .iter()
            .map(|v| {
                let row = run_value(&args, v).expect("runs");
                let line = serde_json::to_string(&row).expect("serialises");
                assert!(!line.contains('\n'), "one line per row");
                serde_json::from_str(&line).expect("a JSON line")
            })
            .collect();
        assert_eq!(rows[0]["value"], "30");
        assert_eq!(rows[1]["value"], "80");
        assert_eq!(rows[0]["key"], "aoi.radius_m");
        assert_eq!(rows[0]["summary"]["violations"], 0);
        let figures = |r: &serde_json::Value| {
            (
                r["view_batches"].clone(),
                r["summary"]["messages_delivered"].clone(),
                r["summary"]["trace_hash"].clone(),
            )
        };
        let (a, b) = (figures(&rows[0]), figures(&rows[1]));
        assert_ne!(a.1, b.1, "messages delivered: {a:?} vs {b:?}");
        assert_ne!(a.2, b.2, "trace: {a:?} vs {b:?}");
    }
}
