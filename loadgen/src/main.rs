//! `loadgen`: thousands of bot clients over TCP against a tessera server.
//!
//! Not built yet: it needs the server runtime's TCP gateway and the client
//! library (issues "Server runtime" and "loadgen"). Until then the
//! deterministic simulator (`tessera sim`) drives bots against the core.

use std::process::ExitCode;

fn main() -> ExitCode {
    eprintln!(
        "loadgen: not available yet (needs the server's TCP gateway); \
         run the simulator instead: cargo run --release --bin tessera -- sim --seeds 20"
    );
    ExitCode::from(2)
}
