//! The sans-IO core: everything deterministic about the world.
//!
//! Owns geometry, the AOI engine, the space tree and (later) entities, sync and
//! the cell state machine. Must not touch executors, queues, sockets, threads,
//! the OS clock or default-hashed maps (see `tests/tidy.rs`).

pub mod aoi;
pub mod cell;
pub mod combat;
pub mod down;
pub mod entity;
pub mod fault;
pub mod geom;
pub mod ids;
pub mod load;
pub mod payload;
pub mod prefetch;
pub mod proxy;
pub mod space;
pub mod time;
pub mod view;
