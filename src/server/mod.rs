//! The server: the cell host every shard runs ([`host`]), its client side
//! ([`clients`], [`gateway`] sessions, [`spawn`]; the game logic at the
//! reals and the relay formats are [`crate::game`]'s), mono-space instances
//! ([`spaces`]), and the whole server
//! started in-process ([`embedded`]).
//!
//! Owns the application side of the runtime; it never touches executors,
//! queues or sockets directly (clients arrive through the runtime's
//! `ClientPort`).

pub mod balance;
pub mod cell_factory;
pub mod clients;
mod conn_table;
pub mod door;
pub mod embedded;
mod follow;
pub mod gateway;
#[cfg(any(test, feature = "harness"))]
pub mod harness;
pub mod host;
mod npcs;
pub mod spaces;
mod spaces_directory;
mod spaces_host;
pub mod spawn;
#[cfg(test)]
mod tests_door;
#[cfg(test)]
mod tests_host;
#[cfg(test)]
mod tests_spaces;
mod viewer;

pub use embedded::{EmbeddedServer, ServerCounters, ServerError};
pub use host::{CellHost, HostBatch, HostCounters, HostError, Routed, KIND_HOST_BATCH};
