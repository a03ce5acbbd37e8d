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
//!
//! The world on top of it:
//! - [`world`]: shards, cells, proxies and clients over the network, one
//!   step per tick ([`world_logic`]: delivery, routing, the server's game;
//!   [`world_layout`]: the grid that merges and splits; [`world_balance`]:
//!   the balanced space tree of the `crowd` and `swing` scenarios; [`world_route`]:
//!   per-tick batches and back-pressure; [`world_client`]: the client hook
//!   observers plug into; [`world_event`]: what the trace records);
//! - [`checker`]: the invariants, every step, and after healing;
//! - [`scenario`]: what the bots do in each scenario;
//! - [`world_run`]: one seed or a swarm, panics turned into violations;
//! - [`world_faults`]: fault-injection hooks for tests (each makes one
//!   violation kind fire; `tests/sim.rs` holds the table).

pub mod bots;
pub mod checker;
mod checker_converge;
pub mod net;
pub mod options;
pub mod report;
pub mod rng;
pub mod scenario;
pub mod trace;
pub mod world;
pub mod world_balance;
pub mod world_client;
pub mod world_event;
pub mod world_faults;
pub mod world_layout;
pub mod world_logic;
pub mod world_params;
pub mod world_replicas;
pub mod world_route;
pub mod world_run;
pub mod world_view;
