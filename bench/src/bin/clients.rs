//! The clients benchmark as a binary (bench/tests run it through
//! `CARGO_BIN_EXE_clients`); `cargo bench --bench clients` is the same.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    tessera_bench::clients::cli::main()
}
