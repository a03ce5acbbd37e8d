//! The server: the cell host every shard runs ([`host`]).
//!
//! The TCP gateway joins this module later. Owns the application side of the
//! runtime; it never touches executors or queues directly.

pub mod balance;
pub mod host;

pub use host::{CellHost, HostBatch, HostCounters, HostError, Routed, KIND_HOST_BATCH};
