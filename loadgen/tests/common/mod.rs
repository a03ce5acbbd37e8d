//! What loadgen's integration tests share: a run from command-line
//! arguments, unpinned and quiet, against the embedded server unless the
//! arguments say otherwise.

use clap::Parser;
use loadgen::cli::Cli;

/// Runs loadgen with `args` after the shared ones (`--quiet`, no pinning
/// of bots or shards).
///
/// # Panics
/// If the arguments do not parse or the run cannot start.
pub fn run(args: &[&str]) -> loadgen::run::Outcome {
    let mut all = vec![
        "loadgen",
        "--quiet",
        "--no-pin",
        "--set",
        "runtime.pin=false",
    ];
    all.extend_from_slice(args);
    let cli = Cli::try_parse_from(all).expect("valid arguments");
    loadgen::run::run(&cli).expect("the run starts and ends")
}
