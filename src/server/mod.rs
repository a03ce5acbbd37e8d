//! The server: the cell host every shard runs ([`host`]).
//!
//! The TCP gateway joins this module later. Owns the application side of the
//! runtime; it never touches executors or queues directly.

pub mod clients;
pub mod game;
pub mod gateway;
pub mod host;
pub mod relay;
pub mod spawn;
#[cfg(test)]
mod harness;
#[cfg(test)]
mod tests_host;

pub use host::{CellHost, HostBatch, HostCounters, HostError, Routed, KIND_HOST_BATCH};
