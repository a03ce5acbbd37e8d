//! Cost probe: wall time of the server's game path (one shard of the
//! sans-IO host harness: sessions, cells, AOI, views, proxies) per client
//! second, for a crowd walking at random. No sockets: the user-space part
//! of the clients bench, quiet enough to weigh one change in seconds. See
//! `tessera_bench::cost` and bench/README.md.
//!
//! `cargo bench -p tessera-bench --bench cost -- [CLIENTS [SECONDS [RUNS]]]`
//! (defaults 2000, 10, 3). Prints one JSON line per run and one with the
//! median.

// Counting the allocations of the hosts' ticks (`alloc_count`): a few
// thread-local flags and a counter per allocation, nothing else.
#[global_allocator]
static GLOBAL: tessera_bench::alloc_count::Counting<mimalloc::MiMalloc> =
    tessera_bench::alloc_count::Counting(mimalloc::MiMalloc);

fn arg(i: usize, default: usize) -> anyhow::Result<usize> {
    // Cargo passes `--bench` to a harness-less bench: skip flags.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    match args.get(i) {
        Some(v) => v
            .parse()
            .map_err(|_| anyhow::anyhow!("argument {}: {v:?} is not a count", i + 1)),
        None => Ok(default),
    }
}

fn main() -> anyhow::Result<()> {
    use std::io::Write;
    // Written, not printed: a closed pipe (`| head`) ends the run with an
    // error, not a panic.
    let mut out = std::io::stdout().lock();
    let (clients, seconds, runs) = (arg(0, 2000)?, arg(1, 10)?, arg(2, 3)?);
    let mut us = Vec::new();
    for _ in 0..runs.max(1) {
        let p = tessera_bench::cost::run(clients, seconds)?;
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
