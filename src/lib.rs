//! tessera: a seamless-world MMO cell server.
//!
//! One big world is cut into rectangular *cells* by a KD-tree; every cell lives
//! on one *shard* (one pinned executor per CPU core). An entity is *real* in
//! exactly one cell and has read-only *ghosts* in the neighbouring cells within
//! the ghost radius, so every cell sees across its borders.
//!
//! # Layers
//!
//! ```text
//!   binaries      tessera (server, sim), loadgen, tuning tools
//!      |
//!   server        the cell host every shard runs (a sans-IO `ShardApp`);
//!      |          only its two drivers start the runtime
//!   runtime       the IO adapter: the only code that touches executors,
//!      |          queues, clocks, sockets; drives any `ShardApp`
//!   game          sans-IO: client inputs applied at the reals, the relay
//!      |          formats (the server and the simulator both drive it)
//!   shard         sans-IO shard contract: `ShardApp`, `Inbox`, `Outbox`,
//!      |          `ClientPort`, metric and view sinks (server and runtime
//!      |          meet only here)
//!   wire          rkyv shard message envelope; client protocol (later)
//!      |
//!   config        serde + toml; embedded defaults; validation naming the key
//!      |
//!   core          sans-IO: geometry, AOI, space tree, entities, cells
//! ```
//!
//! Each layer knows only the ones below it. [`core`] is deterministic: it takes
//! `(now, input)` and returns outputs; it never reads a clock, spawns a thread,
//! opens a socket or iterates a default-hashed map. `tests/tidy.rs` enforces
//! this.

pub mod client;
pub mod config;
pub mod core;
pub mod game;
pub mod runtime;
pub mod server;
pub mod shard;
pub mod sim;
pub mod wire;

/// True in a build with the `verify` feature: every cell checks all its
/// invariants after each publish (every test build of this crate, and the
/// simulator's smoke in CI). Those checks allocate, so a measurement of the
/// game path's own allocations (`bench/tests/host_allocs.rs`) is taken in a
/// build without them.
pub const INVARIANT_CHECKS: bool = cfg!(feature = "verify");
