//! A `tessera` built with the costly invariant checks (feature `verify`,
//! on in every test build, `target/release/tessera` included after a
//! `cargo test --release`) says so at start, before it serves: such a
//! binary once passed for the server in a 10,000-bot A/B, its ticks
//! about 40 % longer (`loadgen/ab.sh` now warns on that line).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn a_build_with_the_invariant_checks_warns_before_it_serves() {
    // Test builds turn `verify` on (the self dev-dependency).
    const _: () = assert!(tessera::INVARIANT_CHECKS);
    let mut child = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"])
        .args(["--set", "runtime.shards=1", "--set", "runtime.pin=false"])
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tessera starts");
    let stderr = child.stderr.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = Vec::new();
    let serving = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line.contains("tessera serving") => break true,
            Ok(line) => seen.push(line),
            Err(_) => break false,
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        serving,
        "no `tessera serving` within 30 s:\n{}",
        seen.join("\n")
    );
    assert!(
        seen.iter()
            .any(|l| l.contains("WARN") && l.contains("costly invariant checks")),
        "no warning before serving:\n{}",
        seen.join("\n")
    );
}
