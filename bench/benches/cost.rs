//! Cost probe: wall time of the server's game path (one shard of the
//! sans-IO host harness: sessions, cells, AOI, views, proxies) per client
//! second, for a crowd walking at random. No sockets: the user-space part
//! of the clients bench, quiet enough to weigh one change in seconds. See
//! `tessera_bench::cost` and bench/README.md.
//!
//! `cargo bench -p tessera-bench --bench cost -- [CLIENTS [SECONDS [RUNS]]]
//! [--in-view N] [--speed M_PER_S] [--set KEY=VALUE]...` (defaults 2000, 10,
//! 3; 60 in view, 5 m/s, the clients bench's config). Prints one JSON line
//! per run and one with the median.

// Counting the allocations of the hosts' ticks (`alloc_count`): a few
// thread-local flags and a counter per allocation, nothing else.
#[global_allocator]
static GLOBAL: tessera_bench::alloc_count::Counting<mimalloc::MiMalloc> =
    tessera_bench::alloc_count::Counting(mimalloc::MiMalloc);

fn main() -> std::process::ExitCode {
    // An error is one line naming the bad argument or the failed run (no
    // `Debug` report, so no backtrace even with RUST_BACKTRACE set).
    match probe() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cost: {e:#}");
            std::process::ExitCode::from(2)
        }
    }
}

fn probe() -> anyhow::Result<()> {
    use std::io::Write;
    // Written, not printed: a closed pipe (`| head`) ends the run with an
    // error, not a panic.
    let mut out = std::io::stdout().lock();
    let args: Vec<String> = std::env::args().skip(1).collect();
    if tessera_bench::cost::wants_help(&args) {
        writeln!(out, "{}", tessera_bench::cost::USAGE)?;
        return Ok(());
    }
    let tessera_bench::cost::ProbeArgs {
        clients,
        seconds,
        runs,
        work,
    } = tessera_bench::cost::parse_args(args)?;
    let mut us = Vec::new();
    for _ in 0..runs.max(1) {
        let p = tessera_bench::cost::run_workload(clients, seconds, &work)?;
        writeln!(out, "{}", serde_json::to_string(&p)?)?;
        us.push(p.host_us_per_client_s);
    }
    us.sort_by(f64::total_cmp);
    writeln!(
        out,
        "{{\"bench\":\"cost\",\"clients\":{clients},\"seconds\":{seconds},\"runs\":{},\"host_us_per_client_s_median\":{:.2}}}",
        us.len(),
        us[us.len() / 2]
    )?;
    Ok(())
}
