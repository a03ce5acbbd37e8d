//! The application layer at the reals: what clients' inputs do to their
//! avatars, and the relay formats between a client's gateway (at the
//! proxy) and its real. Sans-IO and deterministic, like the core.
//!
//! The server's host (`server::host`) and the simulator's world
//! (`sim::world`) both drive the same [`Game`] the same way: each cell runs
//! its inputs (`Cell::run_inputs`), the game takes the cell's events, then
//! the cell publishes and the game takes what that half reported. So the
//! simulator checks the input, hit, property and deferral paths that run in
//! production, with the byte formats production uses (as TigerBeetle's VOPR
//! drives the production replica).
//!
//! - [`relay`]: the bytes upstream (a [`GameInput`] stamped by the proxy),
//!   downstream (view batches, frames, hit and space notices) and of the
//!   game calls that carry an effect past a migration.
//! - [`logic`]: [`Game`], the client-input logic of one shard.
//!
//! Owns these two. Must not touch sockets, clocks, sessions, shards or the
//! routing of messages (the driver's), nor the cells' protocols (the
//! core's).

pub mod logic;
pub mod relay;

pub use logic::{Game, GameCounters, GameEffect};
pub use relay::{decode_down, decode_input, Down, GameInput};
