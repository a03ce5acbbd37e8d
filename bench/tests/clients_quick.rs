//! The clients bench's `--quick` run end to end: three servers pinned to
//! CPU 0, the load on CPU 1, 200 clients; the JSON line must hold one row
//! with plausible figures (every client moving at 10 Hz, tessera refusing
//! none of the moves, positive CPU figures, the ratio against the floor).

use std::process::Command;

use serde_json::Value;

/// Runs the bench with `args`; its JSON line (which must start as the
/// issue prints it), parsed, and its stderr.
fn run_bench(args: &[&str]) -> (String, Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_clients"))
        .args(args)
        .output()
        .expect("the clients bench runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "exit {:?}:\n{stderr}", out.status);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.starts_with("{\"bench\":\"clients\""))
        .unwrap_or_else(|| panic!("no JSON line in:\n{stdout}\n{stderr}"))
        .to_owned();
    let v: Value = serde_json::from_str(&line).expect("the JSON line parses");
    (line, v, stderr)
}

#[test]
fn quick_run_gives_one_plausible_row() {
    let (line, v, stderr) = run_bench(&["--quick"]);
    let rows = v["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 1, "{line}");
    let r = &rows[0];
    assert_eq!(r["clients"], 200, "{line}");
    assert_eq!(r["all_connected"], true, "{line}\n{stderr}");
    assert_eq!(r["runs"], 3, "{line}");
    let f = |k: &str| {
        r[k].as_f64()
            .unwrap_or_else(|| panic!("{k} missing in {line}"))
    };
    for k in [
        "epoll_us_per_client_s",
        "io_uring_us_per_client_s",
        "server_us_per_client_s",
    ] {
        // Loopback I/O of 10 moves in and 10 writes out per client-second
        // costs tens to hundreds of µs; zero or a whole core is a broken run.
        assert!(f(k) > 0.0 && f(k) < 5_000.0, "{k} = {} in {line}", f(k));
    }
    let floor = f("ceiling_us_per_client_s");
    assert_eq!(
        floor,
        f("epoll_us_per_client_s").min(f("io_uring_us_per_client_s")),
        "the floor is the cheaper bare server: {line}"
    );
    let ratio = f("ratio");
    assert!(
        (ratio - f("server_us_per_client_s") / floor).abs() < 0.01,
        "{line}"
    );
    let moves = f("tessera_moves_per_client_s");
    assert!(
        (9.5..=10.5).contains(&moves),
        "moves/client/s {moves}: {line}"
    );
    assert_eq!(r["tessera_refused"], 0, "every move is valid: {line}");
    // tessera's split adds up, and the budget is what the goal leaves.
    let (sys, user) = (
        f("tessera_sys_us_per_client_s"),
        f("tessera_user_us_per_client_s"),
    );
    // Either part may be 0 here: `/proc` splits by scheduler ticks (100 a
    // second of CPU), and a quick run's tessera uses 2 s x 5 % of a core.
    assert!(sys >= 0.0 && user >= 0.0, "{line}");
    assert!(
        (sys + user - f("server_us_per_client_s")).abs() < 0.2,
        "{line}"
    );
    assert!(
        (f("user_budget_us_per_client_s") - (1.5 * floor - sys)).abs() < 0.2,
        "{line}"
    );
}

/// A tessera override the config does not know is refused before any run,
/// by name (no child started, so this takes no time).
#[test]
fn a_bad_tessera_override_is_refused_by_name() {
    let out = Command::new(env!("CARGO_BIN_EXE_clients"))
        .args(["--quick", "--tessera-set", "gateway.no_such_knob=1"])
        .output()
        .expect("the clients bench runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a bad override must fail: {stderr}");
    assert!(
        stderr.contains("--tessera-set") && stderr.contains("no_such_knob"),
        "the error names the override: {stderr}"
    );
    assert!(
        !stderr.contains("run 1"),
        "refused before any run: {stderr}"
    );
}

/// `--perf-split`, and the experiment knobs of the bare servers in one
/// short run: the bare io_uring server with two phases, a buffer per client
/// and a working set, the load napping instead of blocking in epoll. Every
/// client still moves, the split says it came from perf, and the bare
/// server's CPU is nearly all kernel (it does nothing else). Skipped, and
/// said so, where `perf` cannot run.
#[test]
fn perf_split_and_the_bare_experiments_give_a_plausible_row() {
    if !std::process::Command::new("perf")
        .args(["record", "-q", "-o", "/dev/null", "--", "true"])
        .output()
        .is_ok_and(|o| o.status.success())
    {
        eprintln!("SKIPPED: perf cannot record here");
        return;
    }
    let (line, v, stderr) = run_bench(&[
        "--quick",
        "--servers",
        "io-uring",
        "--perf-split",
        "--bare-phases",
        "2",
        "--bare-own-buffers",
        "--bare-touch-kib",
        "256",
        "--load-wait",
        "sleep",
    ]);
    assert_eq!(v["split"], "perf", "{line}");
    assert_eq!(v["experiments"]["bare_phases"], 2, "{line}");
    assert_eq!(v["experiments"]["load_wait"], "sleep", "{line}");
    let r = &v["rows"][0];
    assert_eq!(r["all_connected"], true, "{line}\n{stderr}");
    let total = r["io_uring_us_per_client_s"].as_f64().expect("floor");
    let kernel = r["floor_sys_us_per_client_s"]
        .as_f64()
        .expect("floor's split");
    assert!(
        kernel > 0.5 * total && kernel <= total,
        "the bare server is mostly kernel: {kernel} of {total} in {line}"
    );
}
