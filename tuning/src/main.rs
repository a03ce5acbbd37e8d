//! `tuning`: compare values of config keys on the same simulated worlds,
//! and recommend values.
//!
//! - `tuning sweep --key cell.migrate_margin_m --values 2,4,8 --seeds 10
//!   --scenario border-walk` runs the deterministic simulator over the same
//!   seeds once per value (every other key from `--config` and `--set`, or
//!   the embedded defaults) and prints one row per value: migrations per
//!   crossing and per 1,000 ticks, forwards, view batches and bytes,
//!   violations and simulation speed, then one JSON line. With `--json` it
//!   prints only JSON lines, one row per value as it is done: `{"key",
//!   "value", "migrations_per_kilotick", "forwarded_per_kilotick",
//!   "view_batches", "view_batches_per_kilotick", "hits_landed", "figures",
//!   "summary"}`. `--chart FILE.png` draws one figure (`--chart-figure`)
//!   against the values.
//! - `tuning recommend --scenario border-walk` runs a small grid of the
//!   knobs that matter and prints the recommended value per knob with the
//!   figures that justify it (`recommend.rs` holds the rules); `--json` for
//!   scripts.
//!
//! Because the simulator is deterministic, a difference between rows comes
//! from the value, not from noise (speed excepted). A key the simulator does
//! not read is refused (every value would give the same rows).
//!
//! Modules: `measure` (runs and figures), `sweep`, `recommend`, `chart`.

mod chart;
mod measure;
mod recommend;
mod sweep;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

use recommend::RecommendArgs;
use sweep::SweepArgs;

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
    /// Run a small grid of the knobs that matter and recommend a value each.
    Recommend(RecommendArgs),
}

fn exit(clean: bool) -> ExitCode {
    if clean {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn run_recommend(args: &RecommendArgs) -> anyhow::Result<ExitCode> {
    if !args.json {
        recommend::print_header(args);
    }
    let rec = recommend::recommend(args)?;
    if args.json {
        println!("{}", serde_json::to_string(&rec)?);
    } else {
        recommend::print_footer(&rec);
    }
    Ok(exit(rec.knobs.iter().all(|k| k.recommended.is_some())))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Sweep(args) => sweep::sweep(args).map(exit),
        Command::Recommend(args) => run_recommend(args),
    };
    result.unwrap_or_else(|err| {
        eprintln!("tuning: {err:#}");
        ExitCode::from(2)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sweep::run_value;

    fn sweep_args(extra: &[&str]) -> SweepArgs {
        let mut argv = vec!["tuning", "sweep"];
        argv.extend_from_slice(extra);
        match Cli::try_parse_from(argv).expect("valid arguments").command {
            Command::Sweep(a) => a,
            Command::Recommend(_) => panic!("not a sweep"),
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

    /// The simulator honours `[balance]` as the server does: two values of
    /// a policy threshold give rows whose figures differ on a tree
    /// scenario; on a grid scenario (no balancer) the key is refused.
    #[test]
    fn balance_threshold_changes_the_rows() {
        let sweep_of = |scenario: &str| {
            sweep_args(&[
                "--key",
                "balance.split_cell_load_min",
                "--values",
                "0.3,0.9",
                "--seeds",
                "2",
                "--scenario",
                scenario,
                "--json",
            ])
        };
        let err = sweep::sweep(&sweep_of("hotspot")).expect_err("no balancer on the grid");
        assert!(err.to_string().contains("--scenario crowd"), "{err}");
        let args = sweep_of("crowd");
        let rows: Vec<serde_json::Value> = args
            .values
            .iter()
            .map(|v| {
                let row = run_value(&args, v).expect("runs");
                serde_json::to_value(&row).expect("serialises")
            })
            .collect();
        assert_eq!(
            (&rows[0]["value"], &rows[1]["value"]),
            (&"0.3".into(), &"0.9".into())
        );
        for r in &rows {
            assert_eq!(r["summary"]["violations"], 0, "{r}");
            assert_eq!(r["summary"]["seeds"], 2);
        }
        assert_ne!(
            rows[0]["figures"], rows[1]["figures"],
            "the threshold changed nothing"
        );
        assert_ne!(
            rows[0]["summary"]["trace_hash"],
            rows[1]["summary"]["trace_hash"]
        );
    }

    /// `--chart` writes a PNG of the chosen figure against the values.
    #[test]
    fn sweep_draws_its_chart() {
        let file = std::env::temp_dir().join(format!("tuning-chart-{}.png", std::process::id()));
        let path = file.to_str().expect("utf-8 temp path");
        let args = sweep_args(&[
            "--key",
            "cell.migrate_margin_m",
            "--values",
            "2,8",
            "--seeds",
            "1",
            "--scenario",
            "border-walk",
            "--ticks",
            "60",
            "--json",
            "--chart",
            path,
            "--chart-figure",
            "migrations-per-crossing",
        ]);
        assert!(sweep::sweep(&args).expect("runs"), "no violation");
        let png = std::fs::read(&file).expect("the chart was written");
        let _ = std::fs::remove_file(&file);
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "a PNG");
        assert!(png.len() > 5_000, "{} bytes: an empty picture?", png.len());
    }
}
