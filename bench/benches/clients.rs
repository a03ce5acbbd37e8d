//! Clients benchmark: server CPU microseconds per client per second for
//! tessera (one shard) next to bare tick-batched epoll and io_uring servers
//! (no game), same traffic, same pinned core, one run. See bench/README.md
//! and `tessera_bench::clients`.
//!
//! `cargo bench -p tessera-bench --bench clients -- --clients 2000,5000,10000 --window-s 10 --repeats 2`
//! (`-- --quick`: 200 clients, 2 s).

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    tessera_bench::clients::cli::main()
}
