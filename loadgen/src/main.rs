//! `loadgen`: thousands of bot clients over TCP against a tessera server
//! (see the library docs and `loadgen --help`).
//!
//! Exit codes: 0 passed; 1 a violation occurred or a threshold failed;
//! 2 bad arguments, config or a run that could not start.

use std::process::ExitCode;

use clap::Parser;
use loadgen::cli::Cli;

/// mimalloc underneath the bots and the embedded server, as in `tessera`:
/// buffers freed on another core (the mesh, the bot threads) and the large
/// live set of thousands of sessions are where glibc's allocator is slow.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.print_server_sets {
        let local = Cli {
            server: None,
            ..cli.clone()
        };
        return match loadgen::run::server_config(&Cli {
            world: loadgen::cli::WorldMode::Config,
            ..local.clone()
        }) {
            Ok(c) => {
                for s in loadgen::run::auto_sets(&local, &c) {
                    print!("--set '{s}' ");
                }
                println!();
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("loadgen: {e:#}");
                ExitCode::from(2)
            }
        };
    }
    let outcome = match loadgen::run::run(&cli) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("loadgen: {e:#}");
            return ExitCode::from(2);
        }
    };
    println!(
        "\nloadgen summary\n{}",
        loadgen::report::summary_table(&outcome.summary)
    );
    if let Some(path) = &cli.json {
        let text = serde_json::to_string_pretty(&outcome.summary).expect("a summary serialises");
        if let Err(e) = std::fs::write(path, text) {
            eprintln!("loadgen: writing {}: {e}", path.display());
            return ExitCode::from(2);
        }
        println!("report written to {}", path.display());
    }
    if let Some(dir) = &cli.plot {
        let charts = loadgen::plot::write_all(dir, &outcome.summary.series, &outcome.latency_hist)
            .and_then(|mut files| {
                if !outcome.tree.is_empty() {
                    let ticks = loadgen::plot_tree::Ticks::of(
                        &outcome.summary.series,
                        outcome.summary.hottest_shard_tick.budget_ms,
                    );
                    files.push(loadgen::plot_tree::write(dir, &outcome.tree, &ticks)?);
                }
                if !outcome.summary.bands.is_empty() {
                    files.push(loadgen::bands::chart(dir, &outcome.summary.bands)?);
                }
                Ok(files)
            });
        match charts {
            Ok(files) => println!("charts written: {files:?}"),
            Err(e) => {
                eprintln!("loadgen: {e:#}");
                return ExitCode::from(2);
            }
        }
    }
    if outcome.failures.is_empty() {
        println!("PASSED");
        ExitCode::SUCCESS
    } else {
        println!("FAILED: {}", outcome.failures.join("; "));
        ExitCode::from(1)
    }
}
