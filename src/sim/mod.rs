//! The deterministic simulator (TigerBeetle's VOPR, for cells and shards).
//!
//! Drives core cells, proxies and clients over a fake network on a virtual
//! clock, with one seeded RNG, checking the invariants of DESIGN.md at every
//! step; the seed replays a run exactly. Sans-IO like the core: no threads,
//! no clocks, no sockets, no default-hashed maps.
//!
//! Foundation (this layer knows nothing of cells yet):
//! - [`rng`]: the seeded stream (xoshiro256**), forked per subsystem;
//! - [`net`]: FIFO-per-pair links with random latency, bursts, stalls, bounds;
//! - [`options`]: what a run does, swarm-drawn from a seed or explicit;
//! - [`bots`]: movement behaviours, shared with `loadgen`;
//! - [`trace`]: the run's hash and its recent-event log;
//! - [`report`]: summary, violations, replay command.

pub mod bots;
pub mod net;
pub mod options;
pub mod report;
pub mod rng;
pub mod trace;
