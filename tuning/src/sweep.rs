//! `tuning sweep`: one config key, several values, the same simulated seeds
//! once per value; one row each, and optionally a chart of one figure
//! against the values (`--chart FILE.png`).
//!
//! Owns the sweep's arguments, rows and table; measuring is `measure`'s,
//! drawing is `chart`'s.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::bail;
use tessera::config::Config;
use tessera::sim::options::Scenario;
use tessera::sim::report::SimSummary;

use crate::chart::{self, Figure, Point};
use crate::measure::{check_read, check_scenario, config_with, measure, Figures, Runs};

/// Arguments of `tuning sweep`.
#[derive(clap::Args, Debug)]
pub struct SweepArgs {
    /// The dotted config key to vary, e.g. `cell.migrate_margin_m`.
    #[arg(long)]
    pub key: String,
    /// Comma-separated values (TOML syntax), e.g. `2,4,8`.
    #[arg(long, value_delimiter = ',', required = true)]
    pub values: Vec<String>,
    /// A base config file (keys it leaves out keep the embedded defaults).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Further overrides applied before the swept key (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
    /// Seeds per value (0..N).
    #[arg(long, default_value_t = 10)]
    pub seeds: u64,
    /// Run every seed with this scenario (otherwise each seed draws one).
    #[arg(long)]
    pub scenario: Option<Scenario>,
    /// Ticks of phase one per seed (otherwise drawn from the seed).
    #[arg(long)]
    pub ticks: Option<u64>,
    /// Print one JSON object per value (JSON lines) instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Draw `--chart-figure` against the values into this PNG file.
    #[arg(long, value_name = "FILE.png")]
    pub chart: Option<PathBuf>,
    /// The figure `--chart` draws.
    #[arg(long, value_enum, default_value = "migrations-per-kilotick")]
    pub chart_figure: Figure,
}

impl SweepArgs {
    fn runs(&self) -> Runs {
        Runs {
            seeds: self.seeds,
            scenario: self.scenario,
            ticks: self.ticks,
        }
    }

    fn config_for(&self, value: &str) -> anyhow::Result<Config> {
        Ok(config_with(
            self.config.as_deref(),
            &self.overrides,
            &self.key,
            value,
        )?)
    }
}

/// One row of the sweep.
#[derive(serde::Serialize)]
pub struct Row {
    /// The swept key.
    pub key: String,
    /// This row's value.
    pub value: String,
    /// Migrations per 1,000 ticks (also in `figures`; kept for scripts).
    pub migrations_per_kilotick: f64,
    /// Forwards per 1,000 ticks (also in `figures`).
    pub forwarded_per_kilotick: f64,
    /// View batches the simulated clients received and checked.
    pub view_batches: u64,
    /// View batches per 1,000 ticks (also in `figures`).
    pub view_batches_per_kilotick: f64,
    /// Combat hits that landed.
    pub hits_landed: u64,
    /// Every figure of `measure`.
    pub figures: Figures,
    /// The merged summary of the seeds.
    pub summary: SimSummary,
}

/// Runs every seed for one value.
///
/// # Errors
/// If the config does not load or a world cannot be built.
pub fn run_value(args: &SweepArgs, value: &str) -> anyhow::Result<Row> {
    let config = args.config_for(value)?;
    let started = Instant::now();
    let m = measure(&config, &args.runs())?;
    let mut summary = m.summary;
    let secs = started.elapsed().as_secs_f64().max(1e-9);
    summary.sim_ticks_per_s = summary.ticks as f64 / secs;
    let f = m.figures;
    Ok(Row {
        key: args.key.clone(),
        value: value.to_owned(),
        migrations_per_kilotick: f.migrations_per_kilotick,
        forwarded_per_kilotick: f.forwarded_per_kilotick,
        view_batches: f.view_batches,
        view_batches_per_kilotick: f.view_batches_per_kilotick,
        hits_landed: f.hits_landed,
        figures: f,
        summary,
    })
}

/// `tuning sweep`: exit 0 if no value broke an invariant, 1 otherwise.
///
/// # Errors
/// Bad arguments, a value that does not validate, a key the simulator does
/// not read, a chart that cannot be written.
pub fn sweep(args: &SweepArgs) -> anyhow::Result<bool> {
    if args.seeds == 0 {
        bail!("--seeds must be at least 1");
    }
    let configs = args
        .values
        .iter()
        .map(|v| args.config_for(v))
        .collect::<anyhow::Result<Vec<_>>>()?;
    check_read(&args.key, &configs.iter().collect::<Vec<_>>())?;
    check_scenario(&args.key, &args.runs())?;
    let mut rows = Vec::new();
    if !args.json {
        println!(
            "{:>12} {:>6} {:>8} {:>10} {:>9} {:>11} {:>11} {:>10} {:>11} {:>10}",
            args.key.rsplit('.').next().unwrap_or(&args.key),
            "seeds",
            "ticks",
            "migr",
            "migr/x",
            "migr/1kt",
            "fwd/1kt",
            "views/1kt",
            "viewB/cl/s",
            "violations"
        );
    }
    for value in &args.values {
        let row = run_value(args, value)?;
        let (s, f) = (&row.summary, &row.figures);
        if args.json {
            println!("{}", serde_json::to_string(&row)?);
        } else {
            println!(
                "{:>12} {:>6} {:>8} {:>10} {:>9.3} {:>11.1} {:>11.1} {:>10.1} {:>11.1} {:>10}   ({:.0} ticks/s)",
                row.value,
                s.seeds,
                s.ticks,
                s.migrations,
                f.migrations_per_crossing,
                f.migrations_per_kilotick,
                f.forwarded_per_kilotick,
                f.view_batches_per_kilotick,
                f.view_bytes_per_client_s,
                s.violations,
                s.sim_ticks_per_s
            );
        }
        rows.push(row);
    }
    if let Some(file) = &args.chart {
        let points: Vec<Point<'_>> = rows
            .iter()
            .map(|r| Point {
                value: &r.value,
                figures: &r.figures,
            })
            .collect();
        chart::draw(file, &args.key, args.chart_figure, &points)?;
        if !args.json {
            println!("chart: {}", file.display());
        }
    }
    if !args.json {
        let json = serde_json::json!({ "key": args.key, "rows": rows });
        println!("{json}");
    }
    Ok(rows.iter().all(|r| r.summary.violations == 0))
}
